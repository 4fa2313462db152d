"""Many sliding HyperLogLogs at once, in flat numpy arrays.

A Spark partition holds thousands of keys; building and serializing one
:class:`~distinct.SlidingHyperLogLog` per key costs ~45-90 us of Python,
decoding one ~25 us, and merging a key's partial sketches and estimating
their union ~40 us more.  The functions here do those steps for all keys
of a batch in a few numpy passes (the sketches' twin of
:mod:`ehist.columnar`):

* :func:`sliding_hll_bytes`: each run's sketch, serialized: two 16-bit
  radix sorts (register, then run) of cache-sized chunks and one segmented
  running maximum over blocks of equal time give the lists of future
  possible maxima of every register of every run; then every sketch's
  varints in one pass;
* :func:`sketches_from_bytes`: decode a list of stored sketches, every
  varint of every blob in one pass;
* :func:`union_estimates`: the estimate of each group's union of sketches
  (a key's partials from several partitions) without merging them: a
  register of the union holds the largest rank live in any of them.

Contract: ``sliding_hll_bytes(ts, starts, hashes, ...)[i]`` equals
``SlidingHyperLogLog(...).update_hashes(run_i, hashes_i).to_bytes()``;
``sketches_from_bytes(blobs)`` equals ``[SlidingHyperLogLog.from_bytes(b)
for b in blobs]`` and raises what it raises; ``union_estimates(sketches,
starts, now)[g]`` equals the estimate of the merge of group ``g``'s
sketches, bit for bit (both paths sum the same floats in the same order,
:func:`distinct.hll.estimates_from_rank_counts`).  Each is a property test
(``tests/test_distinct_columnar.py``, the decoder also on mutated bytes).

Examples
--------
>>> import numpy as np
>>> from distinct import SlidingHyperLogLog
>>> from ehist.hashing import hash64
>>> ts = np.array([1, 2, 3, 10, 11])                 # two keys' runs
>>> hashes = hash64(np.array([7, 8, 7, 1, 2]))
>>> blobs = sliding_hll_bytes(ts, [0, 3], hashes, window=100, precision=4)
>>> blobs[1] == SlidingHyperLogLog(100, 4).update([10, 11], [1, 2]).to_bytes()
True
>>> sketches = sketches_from_bytes(blobs)
>>> sketches[0] == SlidingHyperLogLog.from_bytes(blobs[0])
True
>>> union_estimates(sketches, [0]).round(3).tolist()  # both runs as one stream
[4.603]
>>> round(sketches[0].merge(sketches[1]).estimate(), 3)
4.603
"""

from __future__ import annotations

import bisect
import struct

import numpy as np

from ehist import compiled as ehist_compiled
from ehist.validation import (
    INT64_MIN,
    check_positive_int,
    check_window,
    coerce_timestamps,
    resolve_query,
)
from ehist.columnar import check_starts, segment_gcds, payload_varints, sealed_blobs, sealed_heads
from ehist.errors import require_same
from ehist.hashing import check_seed
from ehist.serialization import MAGIC, varint_stream
from ehist.blobs import Blobs
from ehist.segments import gather, order_by

from . import hll_layout as L
from .compiled import decode_entries, encode_payloads, window_rank_counts
from .fm import trailing_zeros
from .hll import SlidingHyperLogLog, estimates_from_rank_counts

__all__ = ["SketchColumn", "sketches_from_bytes", "sliding_hll_bytes", "union_estimates", "encode_entries",
           "future_maxima_blocks"]

_U64 = np.uint64
_CRC = struct.Struct("<I")
_GROUPS_AT_ONCE = 4096  # rows of the (groups x ranks) count matrix per pass
_RUNS_AT_ONCE = 4096  # runs whose entries are sorted together (fewer than 2**16)
_ROWS_AT_ONCE = 1 << 16  # and about this many rows
_BYTES_AT_ONCE = 1 << 17  # bytes of stored sketches decoded together
# unions: registers kept in a dense array (one scatter, no sort) when there
# are at most this many per live entry (big sketches); else the entries are sorted
_DENSE_CELLS_PER_ENTRY = 4


def sliding_hll_bytes(timestamps, starts, hashes, *, window: int, precision: int = 12, seed: int = 0) -> list:
    """Serialized sliding HyperLogLogs of many runs at once.

    Parameters
    ----------
    timestamps : int64 array
        Runs one after the other (each run: one key's rows).
    starts : int array
        Start of each run (``starts[0] == 0``, non-decreasing; an empty run
        gives an empty sketch).
    hashes : uint64 (or int64) array
        ``ehist.hashing.hash64(items, seed)`` of each row's item.
    window, precision, seed
        As for :class:`~distinct.SlidingHyperLogLog`.

    Returns
    -------
    list of bytes
        ``SlidingHyperLogLog(window, precision, seed).update_hashes(run,
        run_hashes).to_bytes()`` for each run.

    Raises
    ------
    ValueError
        Bad parameters, mismatched lengths, bad starts, the reserved
        timestamp ``-2**63``.
    """
    window = check_window(window)
    p = check_positive_int(precision, "precision", 4, 18)
    seed = check_seed(seed)
    ts = coerce_timestamps(timestamps)
    h = np.asarray(hashes)
    if h.size == 0:
        h = h.astype(_U64)
    elif h.dtype != _U64:
        if h.dtype.kind not in "iu":
            raise ValueError(f"hashes must be 64-bit integers, got dtype {h.dtype}")
        h = h.astype(np.int64).view(_U64)
    if h.shape != ts.shape:
        raise ValueError(f"timestamps and hashes have different lengths ({ts.size} and {h.size})")
    starts = check_starts(starts, ts.size)
    runs = starts.size
    if runs == 0:
        return []
    lengths = np.diff(np.append(starts, ts.size))
    run = np.repeat(np.arange(runs, dtype=np.int64), lengths)
    if ts.size > 1 and not bool(np.all((ts[1:] >= ts[:-1]) | (run[1:] != run[:-1]))):
        order = order_by(run, ts)  # stable within a run, as update sorts its batch
        ts, h = ts[order], h[order]
    if ts.size and int(ts.min()) == INT64_MIN:
        raise ValueError("timestamps must be > -2**63 (the smallest int64 is reserved)")
    ends = np.append(starts, ts.size)
    out = []
    i = 0
    while i < runs:  # chunks of runs: cache-sized arrays, run numbers below 2**16
        j = min(i + _RUNS_AT_ONCE, runs, max(i + 1, int(np.searchsorted(starts, starts[i] + _ROWS_AT_ONCE))))
        a, b = int(ends[i]), int(ends[j])
        out += _chunk_bytes(ts[a:b], h[a:b], starts[i:j] - a, window, p, seed)
        i = j
    return out


def _chunk_bytes(ts, h, starts, window: int, p: int, seed: int) -> list:
    """:func:`sliding_hll_bytes` of fewer than 2**16 runs, validated and
    each sorted by time."""
    m = 1 << p
    runs = starts.size
    lengths = np.diff(np.append(starts, ts.size))
    run = np.repeat(np.arange(runs, dtype=np.int64), lengths)
    has = lengths > 0
    newest = np.zeros(runs, dtype=np.int64)
    newest[has] = ts[(starts + lengths - 1)[has]]
    # alive: newest - t < window (the difference is exact as uint64: t <= newest)
    age = newest[run].view(_U64) - ts.view(_U64)
    alive = age < _U64(window)
    run, ts, h, age = run[alive], ts[alive], h[alive], age[alive]
    reg = (h & _U64(m - 1)).astype(np.int64)
    rank = trailing_zeros(h >> _U64(p), 64 - p) + 1
    run, reg, rank, age = _future_maxima(run, reg, ts, rank, age, m)
    return encode_entries(run, reg, rank, age, newest, has, window, p, seed)


def encode_entries(run, reg, rank, age, newest, has, window: int, p: int, seed: int) -> list:
    """Each run's sketch as :meth:`SlidingHyperLogLog.to_bytes` writes it,
    from its canonical entries: ``run``, ``reg``, ``rank`` (int64) and
    ``age`` (uint64, ``newest - t``), sorted by run, register and time;
    ``newest`` and ``has`` (a newest timestamp) per run."""
    runs = newest.size
    counts = np.bincount(run, minlength=runs)
    head = L.PREAMBLE.pack(MAGIC, L.FAMILY, L.FORMAT_VERSION, 0) + L.PARAMS.pack(window, p, seed)
    if ehist_compiled.active():  # every payload in one compiled pass (distinct.compiled)
        payload, byte_starts, byte_ends, ticked = encode_payloads(np.concatenate([[0], np.cumsum(counts)]), reg, rank,
                                                                  age, has)
        flags = np.where(has, L.FLAG_HAS_NEWEST, 0) | np.where(ticked, L.FLAG_TICK, 0)
        return sealed_blobs(head, flags, newest, has, payload, byte_starts, byte_ends)
    tick = segment_gcds(age, run, runs)
    ticked = tick >= _U64(2)
    tick[~ticked] = _U64(1)
    scaled = ticked[run]
    age[scaled] //= tick[run[scaled]]
    first_of_run = np.r_[True, run[1:] != run[:-1]] if run.size else np.zeros(0, dtype=bool)
    deltas = np.where(first_of_run, reg, reg - np.r_[0, reg[:-1]]).astype(_U64)

    # the varints before the ranks: [n, tick?, register deltas...] per sketch
    n_head = np.where(has, 1 + ticked + counts, 0)
    head_at = np.cumsum(n_head) - n_head
    flat = np.zeros(int(n_head.sum()), dtype=_U64)
    flat[head_at[has]] = counts[has].astype(_U64)
    flat[(head_at + 1)[ticked]] = tick[ticked]
    entry_offsets = np.cumsum(counts) - counts
    local = np.arange(run.size) - entry_offsets[run]
    flat[(head_at + 1 + ticked)[run] + local] = deltas
    # each sketch's payload: its head varints, its ranks (a byte each), its age varints
    head_buf, head_n = varint_stream(flat)
    age_buf, age_n = varint_stream(age)
    h_end = np.concatenate([[0], np.cumsum(head_n)])[np.cumsum(n_head)]
    a_end = np.concatenate([[0], np.cumsum(age_n)])[np.cumsum(counts)]
    h_len, a_len = np.diff(np.r_[0, h_end]), np.diff(np.r_[0, a_end])
    pieces = np.empty((runs, 3, 2), dtype=np.int64)
    pieces[:, 0, 0], pieces[:, 0, 1] = h_end - h_len, h_end
    pieces[:, 1, 0] = head_buf.size + entry_offsets
    pieces[:, 1, 1] = pieces[:, 1, 0] + counts
    pieces[:, 2, 0] = head_buf.size + run.size + a_end - a_len
    pieces[:, 2, 1] = head_buf.size + run.size + a_end
    src = np.concatenate([head_buf, rank.astype(np.uint8), age_buf])
    payload = gather(src, pieces[:, :, 0].ravel(), pieces[:, :, 1].ravel())
    byte_ends = np.cumsum(h_len + counts + a_len)
    flags = np.where(has, L.FLAG_HAS_NEWEST, 0) | np.where(ticked, L.FLAG_TICK, 0)
    return sealed_blobs(head, flags, newest, has, payload, byte_ends - (h_len + counts + a_len), byte_ends)


def _future_maxima(run, reg, ts, rank, age, m: int):
    """The entries (rows sorted by run, then time) that no entry of their
    run and register with a later or equal time matches or beats in rank:
    the lists of future possible maxima of every register of every run,
    as ``(run, register, rank, age)`` sorted by run, register and time
        (runs numbered below 2**16 here)."""
    if run.size == 0:
        return run, reg, rank, age
    # by (run, register, row): two stable radix sorts of 16-bit keys
    order = np.argsort(reg.astype(np.uint16 if m <= 1 << 16 else np.uint32), kind="stable")
    order = order[np.argsort(run[order].astype(np.uint16), kind="stable")]
    run, reg, ts, rank, age = run[order], reg[order], ts[order], rank[order], age[order]
    at, top = future_maxima_blocks(np.r_[True, (run[1:] != run[:-1]) | (reg[1:] != reg[:-1])],
                                   np.r_[True, ts[1:] != ts[:-1]], rank)
    return run[at], reg[at], top, age[at]


def future_maxima_blocks(new_list: np.ndarray, new_time: np.ndarray, rank: np.ndarray):
    """The lists of future possible maxima of entries sorted by list (a
    run's or group's register) and time: ``new_list`` / ``new_time`` mark
    the entries that start a list / a time within it.  Of each block of
    equal time only its largest rank can survive, and it does iff it beats
    every later block of its list.  Returns the surviving blocks' first
    entries and their ranks (below 128)."""
    block = np.flatnonzero(new_list | new_time)
    top = np.maximum.reduceat(rank, block)
    lists = np.cumsum(new_list[block]) - 1
    # reversed, "later" becomes "earlier"; each list offset above the one
    # before it so a running maximum never carries across lists
    key = (lists[-1] - lists[::-1]) * 128 + top[::-1]
    running = np.maximum.accumulate(key)
    keep = np.empty(key.size, dtype=bool)
    keep[0] = True
    keep[1:] = key[1:] > running[:-1]
    kept = keep[::-1]
    return block[kept], top[kept]


def union_estimates(sketches, group_starts, now=None, window: int | None = None) -> np.ndarray:
    """The estimate of each group's union of sketches, without merging.

    Parameters
    ----------
    sketches : sequence of SlidingHyperLogLog, or a SketchColumn
        All of one window, precision and seed; group ``g`` is
        ``sketches[group_starts[g]:group_starts[g + 1]]`` (a key's partial
        sketches from several partitions, say).  A
        :class:`SketchColumn` decoded from bytes skips the objects.
    group_starts : int array
        ``group_starts[0] == 0``, non-decreasing.
    now : int or int array, optional
        The time to answer at, or one per group (default: each group's
        newest timestamp).
    window : int, optional
        The window to answer for, in ``[1, N]`` (default: the sketches' N).

    Returns
    -------
    float64 array: ``merge(group).estimate(now, window)`` for each group,
    the same floats (an empty group, or one of empty sketches: 0.0).

    Raises
    ------
    IncompatibleSketchError (a ValueError)
        Sketches of different windows, precisions or seeds.
    ValueError
        ``now`` earlier than a group's newest timestamp, ``window``
        outside ``[1, N]``.
    """
    col = sketches if isinstance(sketches, SketchColumn) else SketchColumn.from_sketches(sketches)
    n = len(col)
    starts = check_starts(group_starts, n)
    groups = starts.size
    if groups == 0:
        return np.zeros(0)
    if not n:  # groups of no sketch answer 0.0; the query is still checked
        if window is not None:
            check_positive_int(window, "window", 1, np.iinfo(np.int64).max)
        _times_per_group(now, groups)
        return np.zeros(groups)
    full_window, p, _ = col.check_alike()
    _, window = resolve_query(None, window, None, full_window)
    sizes = np.diff(np.append(starts, n))
    group_of = np.repeat(np.arange(groups, dtype=np.int64), sizes)
    stamps = col.newest
    newest = np.full(groups, INT64_MIN, dtype=np.int64)
    np.maximum.at(newest, group_of, stamps)
    empty = newest == INT64_MIN  # no sketch of the group has seen an item
    if now is None:
        at = newest
    else:
        at = _times_per_group(now, groups)
        late = np.flatnonzero(~empty & (newest > at))
        if late.size:
            resolve_query(int(at[late[0]]), None, int(newest[late[0]]), window)  # raises, naming both

    entries = col.counts
    offsets = np.concatenate([[0], np.cumsum(entries)])
    group_entries = offsets[np.append(starts, n)]
    out = np.empty(groups)
    g = 0
    while g < groups:  # chunks of groups: cache-sized arrays
        h = min(g + _GROUPS_AT_ONCE, groups,
                max(g + 1, int(np.searchsorted(group_entries, group_entries[g] + _ROWS_AT_ONCE))))
        a, b = int(starts[g]), (int(starts[h]) if h < groups else n)
        e = slice(int(offsets[a]), int(offsets[b]))
        out[g:h] = _union_chunk(col.reg[e], col.ts[e], col.rank[e], group_of[a:b] - g, entries[a:b], at[g:h], h - g,
                                window, p)
        g = h
    return out


def _times_per_group(now, groups: int) -> np.ndarray | None:
    """``now`` (None, an integer, or one integer per group) as int64 per
    group, with the errors of a query's ``now``."""
    if now is None:
        return None
    if np.ndim(now) == 0:
        resolve_query(now, None, None, 1)  # the type check of a query's now
        return np.full(groups, int(now), dtype=np.int64)
    at = np.asarray(now)
    if at.shape != (groups,) or at.dtype.kind not in "iu":
        raise ValueError(f"now must be an integer or {groups} integers (one per group), got {now!r}")
    return at.astype(np.int64)


def _union_chunk(reg, ts, rank, group_of, entries, at, groups: int, window: int, p: int) -> np.ndarray:
    """:func:`union_estimates` of a few groups (their sketches' entries;
    ``group_of``: each sketch's group, from 0; ``at``: each group's time)."""
    m = 1 << p
    owner = np.repeat(group_of, entries)
    # live: at - t < window (exact as uint64: every t <= its group's newest <= at)
    live = at[owner].view(_U64) - ts.view(_U64) < _U64(window)
    cell, rank = owner[live] * m + reg[live], rank[live]
    ranks = 66 - p  # register values 0 (empty) to 65 - p
    if groups * m <= _DENSE_CELLS_PER_ENTRY * cell.size:
        # registers about as many as the live entries: each register's
        # largest rank in place (no sort), empty registers left at 0
        top = np.zeros(groups * m, dtype=np.int8)
        np.maximum.at(top, cell, rank.astype(np.int8))
        shift = np.repeat(np.arange(groups, dtype=np.int64) * ranks, m)
        return estimates_from_rank_counts(np.bincount(shift + top, minlength=groups * ranks).reshape(groups, ranks), m)
    # each (group, register)'s largest live rank
    order = np.argsort(cell)
    cell, rank = cell[order], rank[order]
    first = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]]) if cell.size else np.zeros(0, dtype=np.int64)
    top = np.maximum.reduceat(rank, first) if first.size else rank
    counts = np.bincount(cell[first] // m * ranks + top, minlength=groups * ranks).reshape(groups, ranks)
    counts[:, 0] = m - counts[:, 1:].sum(axis=1)
    return estimates_from_rank_counts(counts, m)


def union_estimates_of_bytes(blobs, group_starts, now=None, window: int | None = None) -> np.ndarray | None:
    """:func:`union_estimates` of stored sketches (``blobs``, bytes), the
    same floats, in one compiled pass that decodes every sketch and counts
    each group's register values without building a column
    (:func:`distinct.compiled.window_rank_counts`).  None where that pass
    does not apply: the compiled loops off, a null or empty sketch, one the
    checks of ``SlidingHyperLogLog.from_bytes`` would refuse, sketches of
    different parameters; the caller then takes the column's path (which
    raises what it raises)."""
    if not ehist_compiled.active():
        return None
    blobs = Blobs.of(blobs)
    if not len(blobs) or not blobs.present.all():
        return None
    ok, buf, starts, lengths = sealed_heads(blobs, L.FAMILY, L.HEAD_BYTES + 4 + _CRC.size, L.FLAG_TICK)
    if not ok.all():
        return None
    f = L.head_fields(buf, starts)
    windows, precision, newest = (f[c].astype(np.int64) for c in ("window", "precision", "newest"))
    if (windows != windows[0]).any() or (precision != precision[0]).any() or (f["seed"] != f["seed"][0]).any():
        return None
    p = int(precision[0])
    if windows[0] < 1 or not 4 <= p <= 18 or (newest == INT64_MIN).any():
        return None
    group_of_start = check_starts(group_starts, len(blobs))
    groups = group_of_start.size
    sizes = np.diff(np.append(group_of_start, len(blobs)))
    group_newest = np.full(groups, INT64_MIN, dtype=np.int64)
    np.maximum.at(group_newest, np.repeat(np.arange(groups), sizes), newest)
    _, window = resolve_query(None, window, None, int(windows[0]))
    if now is None:
        at = group_newest
    else:
        at = _times_per_group(now, groups)
        late = np.flatnonzero((group_newest != INT64_MIN) & (group_newest > at))
        if late.size:
            resolve_query(int(at[late[0]]), None, int(group_newest[late[0]]), window)  # raises, naming both
    ticked = (L.flags_of(buf, starts) & L.FLAG_TICK) > 0
    version_2 = L.version_of(buf, starts) == L.FORMAT_VERSION
    accepted, counts = window_rank_counts(buf, starts + L.HEAD_BYTES, starts + lengths - _CRC.size, ticked,
                                          version_2, newest, windows, p, np.append(group_of_start, len(blobs)),
                                          np.where(group_newest == INT64_MIN, 0, at), window)
    if not accepted.all():
        return None
    return estimates_from_rank_counts(counts, 1 << p)


def sketches_from_bytes(blobs) -> list:
    """``[SlidingHyperLogLog.from_bytes(b) for b in blobs]``, the common
    case decoded for all blobs at once.

    A blob is decoded here only when every check of
    :meth:`SlidingHyperLogLog.from_bytes` passes on it, with the same
    result; the others (empty sketches, anything suspicious) go to
    ``from_bytes``, in order, so a corrupt blob raises what it raises.
    """
    blobs = _as_bytes(blobs)
    out = []
    for i, j in _chunks(blobs):
        out += _decode_chunk(blobs[i:j])
    return out


def _as_bytes(blobs):
    if isinstance(blobs, Blobs) and blobs.present.all():
        return blobs  # read in place
    blobs = [bytes(b) if isinstance(b, (bytearray, memoryview)) else b for b in blobs]
    for b in blobs:
        if not isinstance(b, bytes):
            SlidingHyperLogLog.from_bytes(b)  # names the type it wants
    return blobs


def _chunks(blobs):
    """``(start, end)`` of consecutive chunks of about _BYTES_AT_ONCE
    bytes (cache-sized arrays), at least one blob each."""
    ends = np.cumsum(blobs.lengths if isinstance(blobs, Blobs) else [len(b) for b in blobs]).tolist()
    i = 0
    while i < len(blobs):
        j = max(i + 1, bisect.bisect_right(ends, (ends[i - 1] if i else 0) + _BYTES_AT_ONCE))
        yield i, j
        i = j


def _decode_chunk(blobs: list) -> list:
    ok, parsed = _decode_fast(blobs)
    out = []
    at = 0
    for i, accepted in enumerate(ok.tolist()):
        if not accepted:
            out.append(SlidingHyperLogLog.from_bytes(blobs[i]))
            continue
        window, p, seed, newest, a, b = parsed[at]
        at += 1
        s = object.__new__(SlidingHyperLogLog)
        s._window, s._p, s._m, s._seed, s._newest = window, p, 1 << p, seed, newest
        s._reg, s._ts, s._rank = parsed.reg[a:b], parsed.ts[a:b], parsed.rank[a:b]
        out.append(s)
    return out


class _Parsed:
    """What :func:`_decode_fast` read from the blobs it accepted, in order:
    ``parsed[i]`` is (window, precision, seed, newest, start, end) of the
    i-th one's entries in the flat ``reg``, ``ts`` and ``rank``."""

    def __init__(self, fields, offsets, reg, ts, rank):
        self.fields, self.offsets = fields, offsets
        self.reg, self.ts, self.rank = reg, ts, rank
        self._rows = None

    def __getitem__(self, i):
        if self._rows is None:
            f, o = self.fields, self.offsets
            self._rows = list(zip(f["window"].tolist(), f["precision"].tolist(), f["seed"].tolist(),
                                  f["newest"].tolist(), o[:-1].tolist(), o[1:].tolist()))
        return self._rows[i]


class SketchColumn:
    """Many sliding HyperLogLogs as flat arrays, for unions across keys.

    Per sketch: ``window``, ``precision``, ``seed`` (uint64), ``has`` (a newest
    time), ``newest`` (INT64_MIN without one) and ``counts`` (entries);
    the entries ``reg``, ``ts``, ``rank`` of every sketch one after the
    other, each sketch's sorted by register and time (as
    :class:`~distinct.SlidingHyperLogLog` keeps them).  Build one with
    :meth:`from_bytes` (what :func:`sketches_from_bytes` decodes, and the
    errors it raises, with no object per sketch) or :meth:`from_sketches`.

    Examples
    --------
    >>> from distinct import SlidingHyperLogLog
    >>> parts = [SlidingHyperLogLog(100, 4).update([1, 2], [7, 8]), SlidingHyperLogLog(100, 4).update([3], [9])]
    >>> col = SketchColumn.from_bytes([p.to_bytes() for p in parts])
    >>> len(col), col.counts.tolist(), col.check_alike()
    (2, [2, 1], (100, 4, 0))
    >>> union_estimates(col, [0]).round(3).tolist() == [round(parts[0].merge(parts[1]).estimate(), 3)]
    True
    """

    __slots__ = ("window", "precision", "seed", "has", "newest", "counts", "reg", "ts", "rank")

    def __init__(self, window, precision, seed, has, newest, counts, reg, ts, rank):
        self.window, self.precision, self.seed = window, precision, seed
        self.has, self.newest, self.counts = has, newest, counts
        self.reg, self.ts, self.rank = reg, ts, rank

    def __len__(self) -> int:
        return int(self.counts.size)

    @classmethod
    def from_sketches(cls, sketches) -> "SketchColumn":
        sketches = list(sketches)
        for s in sketches:
            if not isinstance(s, SlidingHyperLogLog):
                raise TypeError(f"expected SlidingHyperLogLog sketches, got {type(s).__name__}")
        ints = (lambda xs: np.array(xs, dtype=np.int64))
        cat = (lambda arrays: np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64))
        return cls(ints([s.window for s in sketches]), ints([s.precision for s in sketches]),
                   np.array([s.seed for s in sketches], dtype=np.uint64), np.array([s.newest is not None for s in sketches], dtype=bool),
                   ints([INT64_MIN if s.newest is None else s.newest for s in sketches]),
                   ints([len(s) for s in sketches]), cat([s._reg for s in sketches]),
                   cat([s._ts for s in sketches]), cat([s._rank for s in sketches]))

    @classmethod
    def from_bytes(cls, blobs) -> "SketchColumn":
        """``from_sketches(sketches_from_bytes(blobs))``, without the objects
        (chunks with a blob the vectorized checks refuse go through them)."""
        blobs = _as_bytes(blobs)
        if ehist_compiled.active() and len(blobs):  # one compiled pass over all (chunks only after a refusal)
            whole = cls._of_parsed(*_decode_fast(blobs))
            if whole is not None:
                return whole
        parts = []
        for i, j in _chunks(blobs):
            part = cls._of_parsed(*_decode_fast(blobs[i:j]))
            parts.append(part if part is not None else cls.from_sketches(_decode_chunk(blobs[i:j])))
        if not parts:
            return cls.from_sketches([])
        return cls(*(np.concatenate([getattr(p, a) for p in parts]) for a in cls.__slots__))

    @classmethod
    def _of_parsed(cls, ok, parsed) -> "SketchColumn | None":
        """The column of :func:`_decode_fast`'s blobs when it accepted them
        all (None otherwise)."""
        if not ok.all():
            return None
        f = parsed.fields
        as64 = (lambda a: a.astype(np.int64, copy=False))  # the compiled decoder's are int64 already: no copy
        return cls(as64(f["window"]), as64(f["precision"]), f["seed"].astype(np.uint64), np.ones(ok.size, dtype=bool),
                   as64(f["newest"]), as64(np.diff(parsed.offsets)), as64(parsed.reg), as64(parsed.ts),
                   as64(parsed.rank))

    def take(self, indices) -> "SketchColumn":
        """The sketches at ``indices``, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        counts = self.counts[idx]
        first = np.concatenate([[0], np.cumsum(self.counts)])[idx]
        src = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts - first, counts)
        return SketchColumn(self.window[idx], self.precision[idx], self.seed[idx], self.has[idx], self.newest[idx],
                            counts, self.reg[src], self.ts[src], self.rank[src])

    def alike(self) -> bool:
        """Whether every sketch has the first one's window, precision and seed."""
        return all(bool((a == a[0]).all()) for a in (self.window, self.precision, self.seed)) if len(self) else True

    def check_alike(self) -> tuple:
        """``(window, precision, seed)`` shared by every sketch (not none),
        or IncompatibleSketchError naming the first values that differ."""
        if not self.alike():
            i = int(np.flatnonzero((self.window != self.window[0]) | (self.precision != self.precision[0])
                                   | (self.seed != self.seed[0]))[0])
            require_same("SlidingHyperLogLog", (("windows", int(self.window[0]), int(self.window[i])),
                                                ("precisions", int(self.precision[0]), int(self.precision[i])),
                                                ("seeds", int(self.seed[0]), int(self.seed[i]))))
        return int(self.window[0]), int(self.precision[0]), int(self.seed[0])


def _decode_fast(blobs: list):
    """(accepted mask, _Parsed of the accepted blobs): the blobs of version
    1 or 2 with a newest timestamp, at least one entry and valid
    parameters, on which every check of ``SlidingHyperLogLog.from_bytes``
    passes."""
    # n, one delta, one rank, one age at least
    ok, buf, starts, lengths = sealed_heads(blobs, L.FAMILY, L.HEAD_BYTES + 4 + _CRC.size,
                                            L.FLAG_TICK)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return ok, None
    fields = L.head_fields(buf, starts[idx])
    bad = (fields["window"] < 1) | (fields["precision"] < 4) | (fields["precision"] > 18) \
        | (fields["newest"] == INT64_MIN)  # check_newest's rule (from_bytes names it)
    ticked = (L.flags_of(buf, starts[idx]) & L.FLAG_TICK) > 0
    version_2 = L.version_of(buf, starts[idx]) == L.FORMAT_VERSION
    if ehist_compiled.active():  # one compiled pass per sketch (distinct.compiled)
        good = ~bad
        sub, f = idx[good], fields[good]
        accepted, counts, reg, ts, rank = decode_entries(
            buf, starts[sub] + L.HEAD_BYTES, starts[sub] + lengths[sub] - _CRC.size, ticked[good], version_2[good],
            f["newest"].astype(np.int64), f["window"].astype(np.int64), f["precision"].astype(np.int64))
        ok[idx[bad]] = False
        ok[sub[~accepted]] = False
        return ok, _Parsed(f[accepted], np.concatenate([[0], np.cumsum(counts)]), reg, ts, rank)
    t_i = ticked.astype(np.int64)
    # the payloads are all varints: a rank byte is below 0x80, a one-byte
    # varint (a longer "rank" fails the rank check below)
    values, n_vals, v_first, value = payload_varints(buf, starts[idx], lengths[idx], L.HEAD_BYTES, bad)
    n = value(v_first, n_vals >= 1)
    bad |= (n < _U64(1)) | (n > _U64(1 << 40))
    n_i = np.where(bad, 0, n).astype(np.int64)
    bad |= n_vals != 1 + t_i + 3 * n_i
    n_i = np.where(bad, 0, n_i)
    tick = np.where(ticked, value(v_first + 1, ticked & ~bad), _U64(1))
    bad |= ticked & (tick < _U64(2))
    tick = np.where(bad, _U64(1), tick)
    # entries: deltas, ranks, ages, each n_i values after [n, tick?]
    offsets = np.concatenate([[0], np.cumsum(n_i)])
    owner = np.repeat(np.arange(idx.size, dtype=np.int64), n_i)
    local = np.arange(owner.size) - offsets[:-1][owner]
    first = v_first + 1 + t_i
    deltas = values[(first + 0)[owner] + local] if owner.size else np.zeros(0, dtype=_U64)
    ranks = values[(first + n_i)[owner] + local] if owner.size else np.zeros(0, dtype=_U64)
    ages = values[(first + 2 * n_i)[owner] + local] if owner.size else np.zeros(0, dtype=_U64)
    window = fields["window"].astype(np.int64)
    # version 2: the tick is the ages' gcd exactly when that is 2 or more,
    # and every age stays below the window in ticks
    g = segment_gcds(ages, owner, idx.size)
    bad |= version_2 & np.where(tick > _U64(1), g != _U64(1), g >= _U64(2))
    top = np.zeros(idx.size, dtype=_U64)
    if owner.size:
        np.maximum.at(top, owner, ages)
    w64 = window.astype(_U64)
    ceil_ticks = w64 // tick + (w64 % tick != _U64(0)).astype(_U64)
    bad |= version_2 & (top >= ceil_ticks)
    ages = np.where(bad[owner], _U64(0), ages * tick[owner])
    m = np.left_shift(np.int64(1), fields["precision"].astype(np.int64))
    # deltas and ages in range, ranks in [1, 65 - p]
    d_max = np.zeros(idx.size, dtype=_U64)
    if owner.size:
        np.maximum.at(d_max, owner, deltas)
    bad |= (d_max >= m.astype(_U64)) | (np.where(bad, _U64(0), top * tick) >= window.astype(_U64))
    bad[owner[(ranks < _U64(1)) | (ranks > (65 - fields["precision"].astype(np.int64))[owner].astype(_U64))]] = True
    keep = ~bad[owner]
    reg = np.cumsum(np.where(keep, deltas, _U64(0)).astype(np.int64))
    reg -= np.concatenate([[0], reg])[offsets[:-1]][owner]
    with np.errstate(over="ignore"):
        ts = fields["newest"].astype(np.int64)[owner] - ages.astype(np.int64)
    # every time above -2**63 (times_before's rule in from_bytes): an age of at most newest - (-2**63 + 1)
    room = (fields["newest"].astype(np.int64).view(_U64) ^ _U64(1 << 63)) - _U64(1)
    bad[owner[ages > room[owner]]] = True
    rank = ranks.astype(np.int64)
    bad |= np.zeros(idx.size, dtype=bool) if not owner.size else np.bincount(
        owner, weights=reg >= m[owner], minlength=idx.size) > 0
    # inside each register: times increasing, ranks decreasing
    same = (owner[1:] == owner[:-1]) & (reg[1:] == reg[:-1])
    wrong = same & ((ts[1:] <= ts[:-1]) | (rank[1:] >= rank[:-1]))
    bad[owner[1:][wrong]] = True
    ok[idx[bad]] = False
    good = ~bad
    keep = good[owner]
    kept = np.concatenate([[0], np.cumsum(n_i[good])])
    return ok, _Parsed(fields[good], kept, reg[keep], ts[keep], rank[keep])
