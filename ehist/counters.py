"""Many sliding counters held as one :class:`~ehist.columnar.HistogramColumn`.

The ECM-sketch (:mod:`frequencies`) and the sliding quantiles
(:mod:`quantiles`) keep thousands of counters, each an exponential
histogram of the rows that fell in it.  Held one object each, updating them
would be a Python loop per counter; held as one column, a batch of rows
updates every touched counter in one vectorized l-canonical rebuild
(:func:`apply_rows`, checked against :meth:`ExponentialHistogram.update`
counter by counter in tests/test_frequencies.py).

Counters are numbered ``0 .. n - 1``; an empty counter has no buckets.
:func:`write_counters` / :func:`read_counters` store the counters that hold
units as their index gaps, byte lengths and :meth:`ExponentialHistogram.to_bytes`
blobs (each with its own preamble and CRC, decoded together and checked by
the histogram decoder), the payload layout both families share.
"""

from __future__ import annotations

import numpy as np

from . import eh_layout
from .validation import INT64_MAX, INT64_MIN, resolve_query
from .columnar import HistogramColumn, decode_compact
from .errors import CorruptSketchError, IncompatibleSketchError
from .exponential_histogram import ExponentialHistogram
from .segments import every, order_by
from .serialization import MAGIC, seal
from .synopsis import Synopsis

__all__ = ["KeyedHistograms", "radix_key", "empty", "settle", "settled_total", "replace", "apply_rows",
           "apply_keyed", "merge_keyed", "merge_keyed_groups", "dense", "keyed_equal", "keyed_copy", "write_counters", "read_keyed", "read_counters",
           "MIN_HISTOGRAM_BYTES"]

#: The fewest bytes of one stored histogram: preamble, window and eps, CRC.
MIN_HISTOGRAM_BYTES = 6 + 16 + 4
#: The fewest bytes of one compact counter: flags, a bucket count and a run count.
MIN_COMPACT_BYTES = 3


def radix_key(x: np.ndarray, bound: int) -> np.ndarray:
    """``x`` (values below ``bound``) in the narrowest unsigned type: numpy's
    stable sort of 8- and 16-bit keys is a radix sort (several times faster
    than on int64)."""
    return x.astype(np.uint16 if bound <= 1 << 16 else np.uint32 if bound <= 1 << 32 else np.int64)


def empty(window: int, eps: float, n: int) -> HistogramColumn:
    z = np.zeros(0, dtype=np.int64)
    return HistogramColumn(window, eps, np.zeros(n + 1, dtype=np.int64), z.astype(np.int8), z, z,
                           np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))


def settle(col: HistogramColumn, window: int, newest) -> HistogramColumn:
    """Every histogram advanced to ``newest`` (one time, or one per
    histogram): buckets that left the window dropped (what ``update`` at
    ``newest`` with a zero does), histograms left without units made empty,
    the others' newest set to ``newest``."""
    n = len(col)
    if _none_leave(col, window, newest):  # every bucket stays: the arrays shared, only the times set
        has = np.diff(col.offsets) > 0
        return HistogramColumn(col.window, col.eps, col.offsets, col.exps, col.hi, col.lo,
                               np.where(has, newest, 0), has, col.merged & has)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(col.offsets))
    if np.ndim(newest):
        newest = np.asarray(newest, dtype=np.int64)
        everything = newest < INT64_MIN + window  # a cutoff below int64 keeps every bucket
        cutoff = np.where(everything, INT64_MIN, newest - np.where(everything, 0, window))
        alive = everything[owner] | (col.hi > cutoff[owner])
    else:
        cutoff = newest - window
        alive = col.hi > cutoff if cutoff >= INT64_MIN else np.ones(col.hi.size, dtype=bool)
    counts = np.bincount(owner[alive], minlength=n)
    has = counts > 0
    return HistogramColumn(col.window, col.eps, np.concatenate([[0], np.cumsum(counts)]), col.exps[alive],
                           col.hi[alive], col.lo[alive], np.where(has, newest, 0), has, col.merged & has)


def _none_leave(col: HistogramColumn, window: int, newest) -> bool:
    """Whether settling at ``newest`` drops no bucket: each histogram's
    oldest bucket (its last: newest first) still in the window."""
    last = col.offsets[1:][np.diff(col.offsets) > 0] - 1
    if np.ndim(newest):
        newest = np.asarray(newest, dtype=np.int64)[np.diff(col.offsets) > 0]
        everything = newest < INT64_MIN + window
        return bool((everything | (col.hi[last] > newest - np.where(everything, 0, window))).all())
    cutoff = int(newest) - window
    return cutoff < INT64_MIN or bool((col.hi[last] > cutoff).all())


def settled_total(col: HistogramColumn, counters: int) -> int:
    """The units of counters ``0 .. counters - 1``, as a Python int."""
    end = int(col.offsets[counters])
    return sum(1 << int(e) for e in col.exps[:end].tolist())


def replace(col: HistogramColumn, ids: np.ndarray, new: HistogramColumn) -> HistogramColumn:
    """``col`` with histograms ``ids`` (sorted, distinct) replaced by
    ``new``'s: every bucket scattered to its place, no sort."""
    n = len(col)
    counts = np.diff(col.offsets)
    new_counts = np.diff(new.offsets)
    counts[ids] = new_counts
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    old_owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(col.offsets))
    touched = np.zeros(n, dtype=bool)
    touched[ids] = True
    keep = np.flatnonzero(~touched[old_owner])
    kept_owner = old_owner[keep]
    to_old = offsets[kept_owner] + (keep - col.offsets[kept_owner])
    new_owner = np.repeat(np.arange(ids.size, dtype=np.int64), new_counts)
    to_new = offsets[ids][new_owner] + (np.arange(new.exps.size) - new.offsets[:-1][new_owner])

    def place(a, b):
        out = np.empty(int(offsets[-1]), dtype=a.dtype)
        out[to_old] = a[keep]
        out[to_new] = b
        return out

    newest, has, merged = col.newest.copy(), col.has_newest.copy(), col.merged.copy()
    newest[ids], has[ids], merged[ids] = new.newest, new.has_newest, new.merged
    return HistogramColumn(col.window, col.eps, offsets, place(col.exps, new.exps), place(col.hi, new.hi),
                           place(col.lo, new.lo), newest, has, merged)


def apply_rows(col: HistogramColumn, ids: np.ndarray, ts: np.ndarray, v: np.ndarray | None, newest: int) -> HistogramColumn:
    """``col`` after each counter ``ids[i]`` received ``(ts[i], v[i])``
    (rows grouped by counter, in time order within one, none older than
    ``newest - window``): what :meth:`ExponentialHistogram.update` of each
    counter with its rows and a zero at ``newest`` (the batch's newest
    time) gives.

    One vectorized :meth:`HistogramColumn.build` serves every counter not
    from a merge: a counter's old buckets still in the window enter it as
    elements (bucket ``2**e`` at its newest timestamp, oldest first) ahead
    of the new rows.  The l-canonical rebuild of DGIM Section 4 never
    splits an old bucket, so every bucket boundary falls where ``update``
    puts it; only the oldest bucket's lower time differs (an element's time
    there, the old bucket's bound in ``update``) and is set back.  Counters
    from a merge are updated one histogram at a time (``update``
    compresses them).  tests/test_frequencies.py checks the result against
    ``update`` counter by counter."""
    cutoff = newest - col.window
    change = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate([[0], change]).astype(np.int64)
    touched = ids[starts]
    lengths = np.append(starts[1:], ids.size) - starts
    merged = col.merged[touched]
    if merged.any():
        zero = np.zeros(1, dtype=np.int64)
        hs = [col[i].update(np.append(ts[a:a + m], newest), np.append(np.ones(m, np.int64) if v is None else
                                                                      v[a:a + m], zero))
              for i, a, m in zip(touched[merged].tolist(), starts[merged].tolist(), lengths[merged].tolist())]
        col = replace(col, touched[merged], HistogramColumn.from_histograms(hs, col.window, col.eps))
    plain = ~merged
    if not plain.any():
        return col
    mine = touched[plain]
    old = col.take(mine)
    old_owner = np.repeat(np.arange(mine.size), np.diff(old.offsets))
    alive = old.hi > cutoff if cutoff >= INT64_MIN else np.ones(old.hi.size, dtype=bool)
    old_counts = np.bincount(old_owner[alive], minlength=mine.size)
    # alive old buckets oldest first (a prefix of each newest-first run), then the new rows
    flip = np.flatnonzero(alive)
    run_of_old = old_owner[flip]
    first_of_run = np.concatenate([[0], np.cumsum(old_counts)[:-1]])
    rank = np.arange(flip.size) - first_of_run[run_of_old]
    flip = old.offsets[:-1][run_of_old] + (old_counts[run_of_old] - 1 - rank)
    rows = np.flatnonzero(np.repeat(plain, lengths))
    run_of_new = np.repeat(np.arange(mine.size), lengths[plain])
    owner = np.concatenate([run_of_old, run_of_new])
    order = np.argsort(radix_key(owner, mine.size), kind="stable")
    t_all = np.concatenate([old.hi[flip], ts[rows]])[order]
    new_v = np.ones(rows.size, dtype=np.int64) if v is None else v[rows]
    v_all = np.concatenate([np.left_shift(np.int64(1), old.exps[flip].astype(np.int64)), new_v])[order]
    run_starts = np.concatenate([[0], np.cumsum(old_counts + lengths[plain])[:-1]]).astype(np.int64)
    built = HistogramColumn.build(t_all, run_starts, v_all, window=col.window, eps=col.eps)
    # the oldest bucket's lower time: the oldest alive old bucket's
    oldest = np.full(mine.size, -1, dtype=np.int64)
    has_old = old_counts > 0
    oldest[has_old] = old.offsets[:-1][has_old] + old_counts[has_old] - 1
    fix = has_old & (np.diff(built.offsets) > 0)
    last = built.offsets[1:][fix] - 1
    built.lo[last] = np.where(built.exps[last] == 0, built.hi[last], old.lo[oldest[fix]])
    return replace(col, mine, built)


# ------------------------------------------------------- keyed (sparse) columns
# A sketch with many possible counters and few used ones (the ECM-sketch's
# width x depth, the quantile sketch's value bins) keeps only the counters
# holding units: sorted int64 keys and a column of as many histograms.  Its
# memory, update, merge and decode cost follow the counters used, never
# the counters possible.
def _used(keys: np.ndarray, col: HistogramColumn):
    kept = np.flatnonzero(np.diff(col.offsets) > 0)
    return (keys, col) if kept.size == keys.size else (keys[kept], col.take(kept))


def apply_keyed(keys: np.ndarray, col: HistogramColumn, batch: np.ndarray, ts: np.ndarray, v: np.ndarray | None,
                newest: int, size: int | None = None) -> tuple[np.ndarray, HistogramColumn]:
    """``(keys, col)`` after row ``i`` went to the counter keyed
    ``batch[i]`` (rows in time order within a key, none older than
    ``newest - window``), settled at ``newest``: new keys added, counters
    left without units dropped (:func:`apply_rows` on the used ones).
    ``size``: keys are below it (the ECM-sketch's width x depth): a mark
    per possible key replaces sorting the batch's keys."""
    window, eps = col.window, col.eps
    if size is not None and batch.size:
        mark = np.zeros(size, dtype=bool)
        mark[keys] = True
        mark[batch] = True
        grown = np.flatnonzero(mark)
        position = np.cumsum(mark) - 1
    else:
        grown = np.union1d(keys, batch) if batch.size else keys
        position = None
    if grown.size > keys.size:
        col = replace(empty(window, eps, grown.size), np.searchsorted(grown, keys), col)
    if ts.size:
        ids = np.searchsorted(grown, batch) if position is None else position[batch]
        order = np.argsort(radix_key(ids, grown.size), kind="stable")  # time order kept per counter
        col = apply_rows(col, ids[order], ts[order], None if v is None else v[order], newest)
    return _used(grown, settle(col, window, newest))


def merge_keyed(parts: list, newest: int) -> tuple[np.ndarray, HistogramColumn]:
    """The union of keyed columns ``[(keys, col), ...]`` of one window and
    eps, settled at ``newest``: a counter only one part holds is taken as
    it is, one several hold is merged as
    :meth:`ExponentialHistogram.merge_all` merges the parts' histograms in
    order (its guarantee kept), every counter at once
    (:func:`merge_keyed_groups`)."""
    keys = np.concatenate([k for k, _ in parts])
    col = HistogramColumn.concat([c for _, c in parts])
    _, keys, col = merge_keyed_groups(np.zeros(keys.size, dtype=np.int64), keys, col, np.array([newest]))
    return keys, col


def merge_keyed_groups(group: np.ndarray, keys: np.ndarray, col: HistogramColumn,
                       newest: np.ndarray) -> tuple[np.ndarray, np.ndarray, HistogramColumn]:
    """The unions of many sketches' keyed columns at once: histogram ``i``
    is counter ``keys[i]`` of a sketch of group ``group[i]`` (each group's
    sketches in merge order), ``newest[g]`` group ``g``'s newest time.
    Returns ``(group, keys, col)`` of the united counters holding units,
    sorted by group then key, each settled at its group's newest: as
    :func:`merge_keyed` of each group's parts gives them, by one
    :func:`~ehist.columnar_union.union_column` of every group's counters."""
    from .columnar_union import union_column

    group = np.asarray(group, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    col = settle(col, col.window, newest[group])
    used = np.flatnonzero(np.diff(col.offsets) > 0)
    group, keys = group[used], keys[used]
    order = order_by(group, keys)  # stable: each counter's parts stay in merge order
    group, keys, col = group[order], keys[order], col.take(used[order])
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]) | (group[1:] != group[:-1])]) if keys.size \
        else np.zeros(0, dtype=np.int64)
    united = settle(union_column(col, starts), col.window, newest[group[starts]])
    kept = np.flatnonzero(np.diff(united.offsets) > 0)
    if every(kept, len(united)):
        return group[starts], keys[starts], united
    return group[starts][kept], keys[starts][kept], united.take(kept)


def dense(keys: np.ndarray, col: HistogramColumn, size: int) -> HistogramColumn:
    """The column of all ``size`` counters (the unkeyed ones empty)."""
    return replace(empty(col.window, col.eps, size), keys, col)


def keyed_equal(a: tuple, b: tuple) -> bool:
    """Whether two keyed columns ``(keys, col)`` hold the same counters."""
    (ka, ca), (kb, cb) = a, b
    return np.array_equal(ka, kb) and all(np.array_equal(getattr(ca, f), getattr(cb, f))
                                          for f in ("offsets", "exps", "hi", "lo", "merged"))


def keyed_copy(keys: np.ndarray, col: HistogramColumn) -> tuple[np.ndarray, HistogramColumn]:
    """A copy of a keyed column, sharing nothing with it."""
    return keys.copy(), col.take(np.arange(keys.size))


def write_counters(writer, col: HistogramColumn, keys: np.ndarray | None = None, compact: bool = True):
    """Append the counters holding units (settled at one newest time):
    ``varint n``, ``n`` varint index gaps (the first index, then index -
    previous - 1), ``n`` varint byte lengths, the ``n`` histograms.
    ``keys``: the counter indexes of a keyed column (every one used);
    default: the column is every counter, the used ones written.

    ``compact`` (the current formats): each histogram is its flags byte and
    its payload, what its own bytes hold beyond the preamble, window, eps,
    newest and CRC that every counter of a sketch shares (34 bytes a
    counter); :func:`read_keyed` rebuilds and checks the full bytes.
    Without it, each is ``ExponentialHistogram.to_bytes()`` (the first
    formats, still read)."""
    if keys is None:
        ids = np.flatnonzero(np.diff(col.offsets) > 0)
        blobs = col.take(ids).to_bytes()
    else:
        ids, blobs = keys, col.to_bytes()
    if compact:
        blobs = [b[eh_layout.FLAGS_AT:eh_layout.FLAGS_AT + 1] + b[eh_layout.HEAD_BYTES:-4] for b in blobs]
    gaps = np.diff(np.concatenate([[-1], ids])) - 1
    writer.varints([ids.size]).varints(gaps.astype(np.uint64))
    writer.varints(np.array([len(b) for b in blobs], dtype=np.uint64))
    return writer.raw(b"".join(blobs))


def _full_bytes(compact: list, window: int, eps: float, newest: int, name: str) -> list:
    """The ``ExponentialHistogram`` bytes of compact counters (flags byte,
    payload): the shared head and a CRC put back, so that the histogram
    decoder checks them as it checks any."""
    head = eh_layout.HEAD.pack(MAGIC, eh_layout.FAMILY, eh_layout.FORMAT_VERSION, 0, window, eps)
    newest_bytes = eh_layout.NEWEST.pack(newest)
    out = []
    for b in compact:
        if not b[0] & eh_layout.FLAG_HAS_NEWEST:
            raise CorruptSketchError(f"{name}: expected every counter's flags to mark a newest timestamp, "
                                     f"found {b[0]:#04x}")
        out.append(seal(head[:eh_layout.FLAGS_AT] + b[:1] + b"\x00" + head[eh_layout.FLAGS_AT + 2:]
                        + newest_bytes + b[1:]))
    return out


def read_keyed(reader, name: str, size: int, window: int, eps: float, newest: int,
               compact: bool = True) -> tuple[np.ndarray, HistogramColumn]:
    """``(keys, col)``: the counters :func:`write_counters` wrote, of
    indexes below ``size``, every stored histogram checked to hold units
    and end at ``newest``; the reader must end with them.  Costs what the
    bytes hold, whatever ``size`` says.

    Raises
    ------
    CorruptSketchError
        Counts beyond the bytes left or ``size``, lengths that do not add
        up, a histogram its own decoder refuses or of other parameters.
    """
    least = MIN_COMPACT_BYTES if compact else MIN_HISTOGRAM_BYTES
    n = reader.varint("counter count")
    most = min(size, reader.remaining // (2 + least))
    if n > most:
        raise CorruptSketchError(f"{name}: expected at most {most} counters in the bytes left, found {n}")
    if n == 0:  # zeros only, or every unit expired
        reader.expect_end()
        return np.zeros(0, dtype=np.int64), empty(window, eps, 0)
    gaps = reader.varints(n, "counter gaps")
    if int(gaps.max()) >= size:
        raise CorruptSketchError(f"{name}: expected counter gaps below {size}, found {int(gaps.max())}")
    ids = np.cumsum(gaps.astype(np.int64) + 1) - 1
    if int(ids[-1]) >= size:
        raise CorruptSketchError(f"{name}: expected counter indexes below {size}, found {int(ids[-1])}")
    lengths = reader.varints(n, "histogram lengths")
    if int(lengths.min()) < least or int(lengths.max()) > reader.remaining \
            or int(lengths.sum()) != reader.remaining:
        raise CorruptSketchError(f"{name}: expected histogram lengths of at least {least} "
                                 f"bytes summing to the {reader.remaining} bytes left, found "
                                 f"{int(lengths.min())} to {int(lengths.max())} summing to {int(lengths.sum())}")
    ends = np.cumsum(lengths.astype(np.int64)).tolist()
    body = reader.raw(reader.remaining, "histograms")
    blobs = [body[a:b] for a, b in zip([0] + ends[:-1], ends)]
    hist = None
    if compact:
        # straight from flags and payloads; should any fail the vectorized
        # checks, every counter is rebuilt whole for the histogram decoder,
        # which names what is wrong (and decodes a merged histogram)
        accepted, hist = decode_compact(blobs, window, eps, newest)
        if not accepted.all():
            hist, blobs = None, _full_bytes(blobs, window, eps, newest, name)
    if hist is None:
        try:
            hist = HistogramColumn.from_bytes(blobs, window, eps)
        except IncompatibleSketchError as exc:
            raise CorruptSketchError(f"{name}: expected histograms of window {window} and eps {eps}: {exc}") from None
        except CorruptSketchError as exc:
            raise CorruptSketchError(f"{name}: a counter's histogram: {exc}") from None
    if not np.array_equal(hist.newest, np.full(n, newest)) or not hist.has_newest.all() \
            or not (np.diff(hist.offsets) > 0).all():
        raise CorruptSketchError(f"{name}: expected every counter's histogram to hold units and end at "
                                 f"the sketch's newest timestamp {newest}")
    return ids, hist


def read_counters(reader, name: str, size: int, window: int, eps: float, newest: int,
                  compact: bool = True) -> HistogramColumn:
    """:func:`read_keyed` as the column of all ``size`` counters."""
    keys, hist = read_keyed(reader, name, size, window, eps, newest, compact)
    return dense(keys, hist, size)


class KeyedHistograms(Synopsis, abstract=True):
    """The base of a synopsis whose state is exponential histograms keyed
    by index: the counters of :class:`~frequencies.SlidingCountMin`, the
    bins of :class:`~quantiles.SlidingQuantiles`.  It holds ``_keys``
    (the sorted indexes holding units), ``_col`` (their histograms, one
    :class:`~ehist.columnar.HistogramColumn`) and ``_newest``, and writes
    once what both did: the bucket count, copy, equality and the union of
    the keyed columns."""

    _state = ("_newest", "_keys", "_col")

    def __len__(self) -> int:
        """Buckets kept, over all histograms."""
        return int(self._col.exps.size)

    def _set_counters(self, newest: int, keys, col) -> None:
        """Hold ``keys`` and their histograms ``col`` as of ``newest`` (a
        column's sketch made an object)."""
        self._newest, self._keys, self._col = int(newest), keys, col

    def _same_state(self, other) -> bool:
        return self._newest == other._newest and keyed_equal((self._keys, self._col), (other._keys, other._col))

    def copy(self):
        out = super().copy()
        out._keys, out._col = keyed_copy(self._keys, self._col)
        return out

    @classmethod
    def _union(cls, sk: list):
        """Histograms of one index merge with
        :meth:`ExponentialHistogram.merge_all` (:func:`merge_keyed`), so
        the guarantees hold for the union; the parts that saw nothing are
        left out, and a single part is copied."""
        live = [s for s in sk if s._newest is not None]
        if len(live) <= 1:
            return (live[0] if live else sk[0]).copy()
        newest = max(s._newest for s in live)
        cls._check_union_total(live, newest)
        out = cls(*sk[0]._params())
        out._keys, out._col = merge_keyed([(s._keys, s._col) for s in live], newest)
        out._newest = newest
        return out

    def _keyed_bounds(self, now, window) -> tuple[np.ndarray, np.ndarray]:
        """Each held histogram's ``(lower, upper)`` over the window as of
        ``now`` (int64 arrays aligned with ``_keys``; zeros when nothing
        is held or the window ends before every time)."""
        now, window = resolve_query(now, window, self._newest, self._window)
        if now is None or now - window >= INT64_MAX:
            return np.zeros(self._keys.size, dtype=np.int64), np.zeros(self._keys.size, dtype=np.int64)
        if now > INT64_MAX:  # the same cutoff from the largest int64 time
            window -= now - INT64_MAX
            now = INT64_MAX
        if now - window < INT64_MIN:
            window = now - INT64_MIN
        return self._col.bounds(now=np.int64(now), window=window)

    @classmethod
    def _check_union_total(cls, live: list, newest: int) -> None:
        """SumOverflowError when the union's window total would pass
        int64 (the family's measure of it)."""
        raise NotImplementedError
