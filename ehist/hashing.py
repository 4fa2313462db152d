"""Seeded, vectorized 64-bit hashing of integers, strings and bytes.

Sketches that hash their items (distinct counts, p-stable sketches indexed
by strings) must give the same hash in every process, on every executor and
in every Python version, so Python's salted ``hash()`` is never used.
:func:`hash64` is pure numpy arithmetic on the items' bytes:

* integers (any int/uint/bool dtype, or Python ints and bools in ``[-2**63, 2**64)``,
  taken as their 64-bit two's complement pattern, so ``-1`` and ``2**64 - 1``
  are the same item) are mapped by the splitmix64 / murmur3 finalizer of ``x`` xor a key
  derived from the seed: a bijection of 64-bit values for each seed, so
  distinct integers never collide;
* strings hash their UTF-32 code points and bytes their bytes, eight bytes
  at a time, vectorized across items (one numpy pass per 8-byte column of
  the longest item in a group of similar lengths), with the length and a
  type tag mixed in, so ``"a"``, ``b"a"`` and ``97`` hash differently.

numpy's fixed-width string arrays drop trailing NUL characters, so ``"a"``
and ``"a\\x00"`` hash alike; every other pair of distinct items hashes
differently with probability ``1 - 2**-64``.

Examples
--------
>>> bool(hash64([1, 2, 3], seed=0)[0] == hash64(np.array([1]), seed=0)[0])
True
>>> h = hash64(["alice", "bob", "alice"], seed=7)
>>> bool(h[0] == h[2]), bool(h[0] != h[1])
(True, True)
>>> int(hash64([b"x"], seed=1)[0]) != int(hash64(["x"], seed=1)[0])
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["hash64", "mix64", "check_seed", "as_hashes", "int_hash_key", "GOLDEN"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: The golden-ratio constant of the mixing steps (:func:`int_hash_key`).
GOLDEN = _GOLDEN
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_TAG_INT = 0x1A2B3C4D5E6F7081
_TAG_STR = 0x2B3C4D5E6F708192
_TAG_BYTES = 0x3C4D5E6F708192A3
_MASK64 = (1 << 64) - 1
# Rows per chunk when hashing variable-length items (bounds temporary memory).
_CHUNK_BYTES = 1 << 24


def check_seed(seed) -> int:
    """Seeds are integers in ``[0, 2**64)``."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    seed = int(seed)
    if not 0 <= seed <= _MASK64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed}")
    return seed


def as_hashes(hashes) -> np.ndarray:
    """Precomputed :func:`hash64` values as uint64 (int64 bit patterns
    accepted, as streaming state stores them).

    >>> as_hashes(np.array([-1], dtype=np.int64)).tolist()
    [18446744073709551615]
    """
    hashes = np.asarray(hashes)
    if hashes.dtype != np.uint64:
        if hashes.dtype.kind not in "iu":
            raise ValueError(f"hashes must be 64-bit integers, got dtype {hashes.dtype}")
        hashes = hashes.astype(np.int64).view(np.uint64)
    return hashes


def mix64(x: np.ndarray) -> np.ndarray:
    """The murmur3 64-bit finalizer (a bijection), on a uint64 array."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(33))
        x = x * _C1
        x = x ^ (x >> np.uint64(33))
        x = x * _C2
        x = x ^ (x >> np.uint64(33))
    return x


def _key(seed: int, tag: int) -> np.uint64:
    k = mix64(np.array([(seed ^ tag) & _MASK64], dtype=np.uint64))
    with np.errstate(over="ignore"):
        k = mix64(k + _GOLDEN)
    return np.uint64(k[0])


def int_hash_key(seed: int) -> np.uint64:
    """The key integers are hashed with: ``hash64(x, seed) ==
    mix64((x ^ int_hash_key(seed)) + GOLDEN)`` for uint64 ``x`` (an int64
    by its bit pattern), for compiled code that hashes integers itself.

    >>> x = np.array([0, 7, 2**63], dtype=np.uint64)
    >>> bool((hash64(x, 5) == mix64((x ^ int_hash_key(5)) + GOLDEN)).all())
    True
    """
    return _key(check_seed(seed), _TAG_INT)


def _hash_ints(x: np.ndarray, seed: int) -> np.ndarray:
    if x.dtype.kind == "b":
        x = x.astype(np.uint64)
    elif x.dtype.kind == "i":
        x = x.astype(np.int64, copy=False).view(np.uint64)
    else:
        x = x.astype(np.uint64, copy=False)
    with np.errstate(over="ignore"):
        return mix64((x ^ _key(seed, _TAG_INT)) + _GOLDEN)


def _hash_words(words: np.ndarray, nbytes: np.ndarray, key: np.uint64) -> np.ndarray:
    """Hash rows of little-endian uint64 words; ``nbytes`` is each item's length."""
    with np.errstate(over="ignore"):
        h = mix64(nbytes.astype(np.uint64) * _GOLDEN ^ key)
        for j in range(words.shape[1]):
            h = mix64((h ^ words[:, j]) + _GOLDEN)
        return mix64(h ^ key)


def _hash_fixed(units: np.ndarray, lengths: np.ndarray, itemsize: int, key: np.uint64) -> np.ndarray:
    """Hash a 2-D array of code units (uint8 or uint32) with per-row lengths
    in units; rows are zero-padded past their length (numpy guarantees it)."""
    n, width = units.shape
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    per_word = 8 // itemsize
    # Group rows by the number of 8-byte words they need, so one long item
    # does not make every row pay for its length.
    nwords = (lengths + per_word - 1) // per_word
    order = np.argsort(nwords, kind="stable")
    sorted_words = nwords[order]
    bounds = np.flatnonzero(np.diff(sorted_words)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [n]])
    for a, b in zip(starts.tolist(), ends.tolist()):
        w = int(sorted_words[a])
        rows = order[a:b]
        step = max(1, _CHUNK_BYTES // max(1, 8 * w))
        for c in range(0, rows.size, step):
            idx = rows[c : c + step]
            block = np.zeros((idx.size, w * per_word), dtype=units.dtype)
            take = min(width, w * per_word)
            block[:, :take] = units[idx, :take]
            words = np.ascontiguousarray(block).view("<u8").reshape(idx.size, w)
            out[idx] = _hash_words(words, lengths[idx] * itemsize, key)
    return out


def _hash_str(arr: np.ndarray, seed: int) -> np.ndarray:
    arr = arr.astype("<U", copy=False) if arr.dtype.byteorder == ">" else arr
    n = arr.size
    width = arr.dtype.itemsize // 4
    if width == 0:
        units = np.zeros((n, 1), dtype=np.uint32)
        lengths = np.zeros(n, dtype=np.int64)
    else:
        units = np.ascontiguousarray(arr).view("<u4").reshape(n, width)
        lengths = np.strings.str_len(arr).astype(np.int64)
    return _hash_fixed(units, lengths, 4, _key(seed, _TAG_STR))


def _hash_bytes(arr: np.ndarray, seed: int) -> np.ndarray:
    n = arr.size
    width = arr.dtype.itemsize
    if width == 0:
        units = np.zeros((n, 1), dtype=np.uint8)
        lengths = np.zeros(n, dtype=np.int64)
    else:
        units = np.ascontiguousarray(arr).view(np.uint8).reshape(n, width)
        lengths = np.strings.str_len(arr).astype(np.int64)
    return _hash_fixed(units, lengths, 1, _key(seed, _TAG_BYTES))


def _hash_objects(arr: np.ndarray, seed: int) -> np.ndarray:
    """Object arrays (pandas string columns, lists of Python objects)."""
    values = arr.tolist()
    kinds = {type(v) for v in values}
    if kinds <= {str}:
        return _hash_str(np.array(values, dtype=str), seed)
    if kinds <= {bytes, bytearray, memoryview}:
        return _hash_bytes(np.array([bytes(v) for v in values], dtype=bytes), seed)
    if all(isinstance(v, (int, np.integer, np.bool_)) for v in values):  # bool: 0 / 1, as a bool array
        ints = [int(v) for v in values]
        if ints and (min(ints) < -(2**63) or max(ints) > _MASK64):
            raise ValueError("integer items must fit in 64 bits")
        as_u64 = np.array([v & _MASK64 for v in ints], dtype=np.uint64)
        return _hash_ints(as_u64, seed)
    names = sorted(k.__name__ for k in kinds)
    raise ValueError(
        f"items must be all integers, all strings or all bytes; found {', '.join(names)}"
    )


def hash64(items, seed: int = 0) -> np.ndarray:
    """Seeded 64-bit hashes of ``items`` (uint64 array), equal in every process.

    Parameters
    ----------
    items : int, str, bytes, or a 1-D array-like of one of those kinds
        numpy arrays of integer, unicode or bytes dtype, lists, pandas
        Series (their ``to_numpy()``), object arrays of str or bytes.
    seed : int in [0, 2**64)

    Returns
    -------
    numpy.ndarray of uint64, one hash per item.

    Raises
    ------
    ValueError
        Mixed item kinds, floats, None/NaN, integers beyond 64 bits.
    """
    seed = check_seed(seed)
    if isinstance(items, (str, bytes, int, np.integer, np.bool_)):
        items = [items]
    if hasattr(items, "to_numpy") and not isinstance(items, np.ndarray):
        items = items.to_numpy()
    if isinstance(items, np.ndarray):
        arr = items
    elif isinstance(items, (list, tuple)):
        # keep Python objects as they are: numpy would silently turn
        # ["a", 1] into strings and huge ints into floats
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
    else:
        arr = np.asarray(items)
    if arr.ndim != 1:
        if arr.ndim == 0:
            arr = arr.reshape(1)
        else:
            raise ValueError(f"items must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind in "iub":
        return _hash_ints(arr, seed)
    if kind == "U":
        return _hash_str(arr, seed)
    if kind == "S":
        return _hash_bytes(arr, seed)
    if kind == "O":
        return _hash_objects(arr, seed)
    if kind == "T":  # numpy StringDType
        return _hash_str(arr.astype(str), seed)
    raise ValueError(
        f"items must be integers, strings or bytes, got an array of dtype {arr.dtype}"
    )
