"""Compiled reading and writing of quantile sketches' bin keys (numba, optional).

Every answer of stored :class:`~quantiles.SlidingQuantiles` sketches first
reads each sketch's bin keys: a count, the first key zigzag-encoded, then
the gaps between keys, all varints.  In numpy that is a pass over every
stop byte of the batch and a dozen passes over every bin (0.46 s of the
1.4 s that answering 100k stored sketches takes, measured); when
:func:`ehist.compiled.active`, :func:`bin_keys` reads them in one compiled
pass per sketch, with the same checks, to the same keys; :func:`key_varints`
writes them (the values of those varints, and each bin's position in its
sketch) in one pass, where numpy took a dozen over every bin.
"""

from __future__ import annotations

import numpy as np

from ehist import compiled

__all__ = ["bin_keys", "key_varints"]


def bin_keys(buf, starts, ends, max_bins: int):
    """Each sketch's bin keys from ``buf[starts[i]:ends[i]]`` (the bytes
    after its head): ``(bad mask, bin counts, key offsets, keys, region
    starts)`` as ``quantiles.columnar._bins`` reads them before the
    mapping's check of the keys.  A sketch is bad when its count is not a
    varint, is 0 or more than ``max_bins`` or than its bytes can hold, a
    gap is not a varint inside its bytes, or its keys may come near
    int64's edge; a bad sketch's count is 0 when the count itself is
    what is wrong (its keys and region are then not read).

    >>> _ = __import__("pytest").importorskip("numba")
    >>> buf = np.array([3, 4, 0, 2, 9, 9, 9], dtype=np.uint8)   # 3 bins: zigzag 4 -> 2, gaps 0 and 2
    >>> bad, m, k_off, keys, region = bin_keys(buf, [0], [7], 100)
    >>> bad.tolist(), m.tolist(), keys.tolist(), region.tolist()
    ([False], [3], [2, 3, 6], [4])
    """
    buf, starts, ends = compiled.spans(buf, starts, ends)
    return _kernel()(buf, starts, ends, np.int64(max_bins))


def _bin_keys(buf, starts, ends, max_bins):
    count = starts.size
    m = np.zeros(count, dtype=np.int64)
    bad = np.zeros(count, dtype=np.bool_)
    after = np.zeros(count, dtype=np.int64)
    for i in range(count):
        v, p, ok = _varint(buf, starts[i], ends[i])
        most = min(max_bins, (ends[i] - p) // 2)  # the bytes after the count: two per bin at least
        if not ok or v == np.uint64(0) or v > np.uint64(most):
            bad[i] = True
            continue
        m[i] = np.int64(v)
        after[i] = p
    k_off = np.zeros(count + 1, dtype=np.int64)
    for i in range(count):
        k_off[i + 1] = k_off[i] + m[i]
    keys = np.zeros(k_off[count], dtype=np.int64)
    region = ends.copy()
    cap = np.uint64(1 << 62)
    for i in range(count):
        if m[i] == 0:
            continue
        p = after[i]
        base = np.int64(0)
        run = np.int64(0)
        span = 0.0
        for j in range(m[i]):
            g, p, ok = _varint(buf, p, ends[i])
            if not ok:
                bad[i] = True
                break
            if j == 0:
                base = np.int64(g >> np.uint64(1)) ^ -np.int64(g & np.uint64(1))
            else:
                span += float(g)
                run += np.int64(min(g, cap)) + 1
            keys[k_off[i] + j] = base + run
        if not bad[i]:
            region[i] = p
            if float(base) + (span + float(m[i] - 1)) > 2.0 ** 62:  # near int64's edge: from_bytes decides
                bad[i] = True
    return bad, m, k_off, keys, region


def key_varints(keys, offsets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The varint values :func:`bin_keys` reads, for sketches whose bin keys
    (ascending) are ``keys[offsets[s]:offsets[s + 1]]``: ``(values,
    value offsets, positions)``, sketch ``s``'s values (its count, the
    first key zigzag-encoded, then each key - the previous one - 1) at
    ``values[value_offsets[s]:value_offsets[s + 1]]``, and each bin's
    position in its sketch.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> values, v_off, local = key_varints([2, 3, 6, -1], [0, 3, 3, 4])
    >>> values.tolist(), v_off.tolist(), local.tolist()
    ([3, 4, 0, 2, 0, 1, 1], [0, 4, 5, 7], [0, 1, 2, 0])
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != keys.size or np.any(
            np.diff(offsets) < 0):
        raise ValueError(f"offsets must run from 0 to {keys.size} without falling, got {offsets.tolist()[:8]}")
    rises = np.diff(keys) > 0
    firsts = offsets[1:-1]
    rises[firsts[(firsts > 0) & (firsts < keys.size)] - 1] = True  # a sketch's first key may follow any other
    if not rises.all():
        raise ValueError("each sketch's bin keys must be strictly ascending")
    global _WRITE
    if _WRITE is None:
        _WRITE = compiled.kernel(_key_varints)
    return _WRITE(keys, offsets)


def _key_varints(keys, offsets):
    sketches = offsets.size - 1
    v_off = np.empty(sketches + 1, dtype=np.int64)
    v_off[0] = 0
    for s in range(sketches):
        v_off[s + 1] = v_off[s] + 1 + offsets[s + 1] - offsets[s]
    values = np.empty(v_off[sketches], dtype=np.uint64)
    local = np.empty(keys.size, dtype=np.int64)
    for s in range(sketches):
        a, z, at = offsets[s], offsets[s + 1], v_off[s]
        values[at] = np.uint64(z - a)
        for c in range(a, z):
            local[c] = c - a
            if c == a:
                values[at + 1] = np.uint64((keys[c] << 1) ^ (keys[c] >> 63))
            else:
                values[at + 1 + c - a] = np.uint64(keys[c] - keys[c - 1] - 1)
    return values, v_off, local


_WRITE = None
_COMPILED = None
_varint = None  # the compiled ehist.compiled.read_varint


def _kernel():
    global _COMPILED, _varint
    if _COMPILED is None:
        _varint = compiled.jit(compiled.read_varint)
        _COMPILED = compiled.kernel(_bin_keys)
    return _COMPILED
