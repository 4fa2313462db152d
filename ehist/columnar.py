"""Many exponential histograms at once, in flat numpy arrays.

A Spark partition holds thousands of keys; building, serializing, decoding
and querying one :class:`~ehist.ExponentialHistogram` per key costs tens of
microseconds of Python each.  :class:`HistogramColumn` holds many
histograms of one ``(window, eps)`` as flat arrays (every histogram's
buckets newest first, one after the other) and does each of those steps for
all of them in a few numpy passes:

* :meth:`HistogramColumn.build` from sorted runs of timestamps (one run
  per key): the l-canonical batch rebuild of DGIM Section 4, vectorized
  across runs (canonical sizes from each run's total, bucket boundaries by
  one ``searchsorted`` over the concatenated cumulative sums);
* :meth:`HistogramColumn.to_bytes` and :meth:`HistogramColumn.from_bytes`:
  the :meth:`~ehist.ExponentialHistogram.to_bytes` format, byte for byte,
  with every varint of the column encoded or decoded in one pass;
* :meth:`HistogramColumn.bounds` and :meth:`HistogramColumn.union_bounds`:
  the bounds of each histogram, or of groups of histograms of one stream's
  parts (Spark partitions of one key), per-bucket contributions summed.

Contract: ``HistogramColumn.build(ts, starts, values, window=w, eps=e)[i]``
equals ``ExponentialHistogram(w, e).update(run_i, values_i)``;
``to_bytes()`` equals ``[h.to_bytes() for h in ...]``; ``from_bytes(blobs)``
decodes what :meth:`ExponentialHistogram.from_bytes` decodes and raises the
error it raises, for the first blob (in order) it rejects.  Each of these is
a property test (``tests/test_columnar.py``).

Examples
--------
>>> import numpy as np
>>> ts = np.array([1, 2, 3, 10, 11, 5, 6])      # three keys' runs
>>> col = HistogramColumn.build(ts, starts=[0, 3, 5], window=8, eps=0.1)
>>> len(col), col[1]
(3, ExponentialHistogram(window=8, eps=0.1, buckets=2, total=2, newest=11))
>>> lower, upper = col.bounds(now=13)              # window (5, 13]
>>> lower.tolist(), upper.tolist()
([0, 2, 1], [0, 2, 1])
>>> [HistogramColumn.from_bytes(col.to_bytes())[i] == col[i] for i in range(3)]
[True, True, True]
>>> lo, up = col.union_bounds([0, 2])   # runs 0 and 1 as parts of one stream
>>> lo.tolist(), up.tolist()            # as of each group's newest (11 and 6)
([2, 2], [2, 2])
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from . import compiled
from . import eh_layout as L
from .blobs import ZLIB_CRC_FROM, Blobs, sealed_blobs, segment_gcds, split  # noqa: F401 - the families import them here
from .eh_rows import HistogramRows, rows_blobs
from .flat_rows import cutoffs as _row_cutoffs
from .segments import gather, order_by, ranges
from .validation import (INT64_MAX, INT64_MIN, check_eps, check_window, coerce_times, coerce_timestamps, coerce_values,
                          k_of_eps)
from .errors import IncompatibleSketchError, QueryTimeError, SumOverflowError
from .exponential_histogram import ExponentialHistogram
from .serialization import (FAMILY_AT, FLAGS_AT, MAGIC, MAGIC_AT, PREAMBLE_BYTES, VERSION_AT, varint_stream)

__all__ = ["HistogramColumn", "histogram_bytes", "exact_forms", "check_starts", "segment_gcds"]

_CRC = struct.Struct("<I")
_U64 = np.uint64


#: Buckets per histogram from which :meth:`HistogramColumn.take` copies
#: spans (:func:`ehist.segments.gather`) rather than building one index:
#: measured faster for the sums' long histograms, slower for one to three
#: buckets.
_SPAN_COPY = 8


class HistogramColumn:
    """Exponential histograms of one ``(window, eps)``, stored flat.

    Histogram ``i`` has buckets ``offsets[i]:offsets[i + 1]`` of the flat
    ``exps`` (bucket size ``2**exps``), ``hi`` and ``lo`` arrays (newest
    bucket first, as :meth:`ExponentialHistogram.buckets` lists them),
    newest timestamp ``newest[i]`` when ``has_newest[i]``, and ``merged[i]``
    when it came out of a merge.  Build one with :meth:`build`,
    :meth:`from_bytes` or :meth:`from_histograms`; ``col[i]`` is histogram
    ``i`` as an :class:`ExponentialHistogram`.
    """

    __slots__ = ("window", "eps", "_l", "offsets", "exps", "hi", "lo", "newest", "has_newest", "merged")

    def __init__(self, window: int, eps: float, offsets, exps, hi, lo, newest, has_newest, merged):
        self.window = check_window(window)
        self.eps = check_eps(eps)
        self._l = (k_of_eps(self.eps) + 1) // 2
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.exps = np.asarray(exps, dtype=np.int8)
        self.hi = np.asarray(hi, dtype=np.int64)
        self.lo = np.asarray(lo, dtype=np.int64)
        self.newest = np.asarray(newest, dtype=np.int64)
        self.has_newest = np.asarray(has_newest, dtype=bool)
        self.merged = np.asarray(merged, dtype=bool)

    def __len__(self) -> int:
        return int(self.newest.size)

    def __repr__(self) -> str:
        return (f"HistogramColumn(window={self.window}, eps={self.eps:g}, histograms={len(self)}, "
                f"buckets={self.exps.size})")

    def __getitem__(self, i: int) -> ExponentialHistogram:
        i = range(len(self))[i]
        h = ExponentialHistogram(self.window, self.eps)
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        if self.has_newest[i]:
            h._newest = int(self.newest[i])
        h._exps, h._hi, h._lo = self.exps[a:b].copy(), self.hi[a:b].copy(), self.lo[a:b].copy()
        h._merged = bool(self.merged[i])
        h._total = int(np.sum(np.left_shift(np.int64(1), h._exps.astype(np.int64))))
        return h

    # ------------------------------------------------------------- building
    @classmethod
    def from_histograms(cls, histograms, window: int | None = None, eps: float | None = None) -> "HistogramColumn":
        """A column of existing histograms, which must share ``window`` and
        ``eps`` (give them for an empty list).  A column holds buckets: a
        histogram in the rows form enters as the buckets its rows build
        (:mod:`ehist.eh_rows` holds rows)."""
        hs = list(histograms)
        if hs:
            window = hs[0].window if window is None else window
            eps = hs[0].eps if eps is None else eps
        if window is None or eps is None:
            raise ValueError("from_histograms needs window and eps for an empty list")
        for h in hs:
            if not isinstance(h, ExponentialHistogram):
                raise TypeError(f"expected ExponentialHistogram, got {type(h).__name__}")
            if (h.window, h.eps) != (window, eps):
                raise IncompatibleSketchError(
                    f"a column holds histograms of one window and eps: ({window}, {eps}) and ({h.window}, {h.eps})")
        hs = [h._as_buckets() for h in hs]
        sizes = np.array([len(h) for h in hs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def flat(attr, dtype):
            return np.concatenate([getattr(h, attr) for h in hs]).astype(dtype) if hs else np.zeros(0, dtype)

        return cls(window, eps, offsets, flat("_exps", np.int8), flat("_hi", np.int64), flat("_lo", np.int64),
                   [h.newest or 0 for h in hs], [h.newest is not None for h in hs], [h.merged for h in hs])

    @classmethod
    def from_rows(cls, rows: HistogramRows, window: int, eps: float, newest) -> "HistogramColumn":
        """The buckets each histogram's rows build in one batch, ending at
        ``newest[i]``: what a histogram in the rows form takes past ``k``
        rows or in a union with a histogram of buckets
        (``ExponentialHistogram._as_buckets``).

        >>> rows = HistogramRows.of_runs(np.array([1, 2, 3]), np.array([0]), np.array([5, 6, 7]), 100)
        >>> HistogramColumn.from_rows(rows, 100, 0.5, [9])[0] == ExponentialHistogram.of_rows(
        ...     100, 0.5, [1, 2, 3, 9], [5, 6, 7, 0])      # 3 rows > k = 2: buckets, newest 9
        True
        """
        col = cls.build(rows.ts, rows.offsets[:-1], rows.values, window=window, eps=eps)
        return cls(col.window, col.eps, col.offsets, col.exps, col.hi, col.lo, np.asarray(newest, dtype=np.int64),
                   np.ones(len(rows), dtype=bool), col.merged)

    @classmethod
    def build(cls, timestamps, starts, values=None, *, window: int, eps: float = 0.01) -> "HistogramColumn":
        """One histogram per run of ``timestamps``, as :meth:`ExponentialHistogram.update` builds it.

        Parameters
        ----------
        timestamps : array-like of int
            The runs one after the other; each run is sorted here if it is
            not (stably, as ``update`` does).
        starts : array-like of int
            Where each run starts: ``starts[0] == 0``, non-decreasing, at
            most ``len(timestamps)``.  An empty run gives an empty histogram.
        values : array-like of non-negative int, optional
            As for ``update`` (default: all ones, a count).
        window, eps
            As for :class:`ExponentialHistogram`.

        Raises
        ------
        ValueError
            Bad runs, or what ``update`` raises for the values and
            timestamps (the message is ``update``'s).
        """
        window, eps = check_window(window), check_eps(eps)
        ts = coerce_timestamps(timestamps)
        v = coerce_values(values, ts.shape[0])
        n = ts.size
        starts = check_starts(starts, n)
        runs = starts.size
        ends = np.append(starts[1:], n).astype(np.int64)
        lengths = ends - starts
        run_of = np.repeat(np.arange(runs, dtype=np.int64), lengths)
        if n > 1:
            step_back = ts[1:] < ts[:-1]
            if step_back.any() and (run_of[1:] == run_of[:-1])[step_back].any():
                order = order_by(run_of, ts)  # stable within equal timestamps
                ts = ts[order]
                if v is not None:
                    v = v[order]
        if n and int(ts.min()) == INT64_MIN:
            raise ValueError("timestamps must be > -2**63 (the smallest int64 is reserved)")
        if v is not None and v.dtype.kind == "b":
            v = v.astype(np.int64)
        if v is not None and n and int(v.max()) * n > INT64_MAX:
            # cumulative sums over the whole column could wrap: one run at a time
            return cls.from_histograms(
                [ExponentialHistogram(window, eps).update(ts[a:b], v[a:b])
                 for a, b in zip(starts.tolist(), ends.tolist())], window, eps)
        nonempty = lengths > 0
        newest = np.zeros(runs, dtype=np.int64)
        newest[nonempty] = ts[ends[nonempty] - 1]
        # expired: newest - ts >= window (uint64: the difference cannot wrap)
        age = newest[run_of].view(_U64) - ts.view(_U64)
        expired = np.concatenate([[0], np.cumsum(age >= _U64(window))])
        first = starts + (expired[ends] - expired[starts])  # runs stay sorted: a prefix expires
        if v is None:
            cum = None
            base = first
            totals = ends - first
        else:
            cum = np.cumsum(v, dtype=np.int64)
            cum0 = np.concatenate([[0], cum])
            base = cum0[first]
            totals = cum0[ends] - base
        l = (k_of_eps(eps) + 1) // 2
        exps, owner = _canonical_exps(totals, l)
        counts = np.bincount(owner, minlength=runs)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        sizes = np.left_shift(np.int64(1), exps.astype(np.int64))
        within = np.cumsum(sizes)
        within -= np.concatenate([[0], within])[offsets[:-1]][owner]
        newest_pos = totals[owner] - within + sizes  # 1-based unit, from the run's oldest kept unit
        if cum is None:
            idx = first[owner] + newest_pos - 1
            oldest = first
        else:
            # targets ascend when each run's buckets are taken oldest first:
            # numpy's searchsorted is much faster on sorted needles
            target = (base[owner] + newest_pos)[::-1]
            idx = np.searchsorted(cum, target, side="left")[::-1]
            oldest = np.searchsorted(cum, base + 1, side="left")
        hi = ts[idx] if n else np.zeros(0, dtype=np.int64)
        lo = np.empty_like(hi)
        if hi.size:
            lo[:-1] = hi[1:]
            has = counts > 0
            lo[offsets[1:][has] - 1] = ts[oldest[has]]
            unit = exps == 0
            lo[unit] = hi[unit]
        return cls(window, eps, offsets, exps, hi, lo, newest, nonempty, np.zeros(runs, dtype=bool))

    # ---------------------------------------------------------------- query
    def _cutoffs(self, now, window) -> np.ndarray:
        return _cutoffs(self.window, self.newest, self.has_newest, now, window, " of histogram {i}")

    def _bucket_bounds(self, cutoffs: np.ndarray):
        """Per-histogram (lower, upper) for units with timestamp > cutoff."""
        if compiled.active():
            return compiled.bucket_bounds(self.exps, self.hi, self.lo, self.offsets, cutoffs)
        owner = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))
        cut = cutoffs[owner]
        sizes = np.left_shift(np.int64(1), self.exps.astype(np.int64))
        in_hi = self.hi > cut
        in_lo = self.lo > cut
        upper = np.where(in_hi, sizes, 0)
        lower = np.where(in_lo, sizes, 0) + (in_hi & ~in_lo)  # a straddling bucket: its newest unit
        return _segment_sums(lower, self.offsets), _segment_sums(upper, self.offsets)

    def bounds(self, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every histogram's :meth:`~ExponentialHistogram.bounds`: int64 arrays.

        ``now`` is None (each histogram's newest), one time or one per
        histogram, never earlier than the histogram's newest timestamp.
        """
        return self._bucket_bounds(self._cutoffs(now, window))

    def union_bounds(self, group_starts, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of groups of histograms, each group the parts of one stream.

        Group ``g`` is histograms ``group_starts[g]:group_starts[g + 1]``.
        Its bounds are the sums of its parts' bounds at one cutoff, as of
        ``now`` (default: the group's newest timestamp): what the
        :meth:`~ExponentialHistogram.merge_all` of the group would bracket,
        without merging.  The parts' errors add up, so the midpoint is
        within ``eps`` of the exact union (every part is within budget).
        A group whose upper bound passes int64 raises
        :class:`~ehist.errors.SumOverflowError`, as its merge would.
        """
        starts = check_starts(group_starts, len(self))
        per_hist, owner = _group_times(starts, self.newest, self.has_newest, now)
        lower, upper = self._bucket_bounds(self._cutoffs(per_hist, window))
        return _group_sums(lower, upper, owner, starts)

    # --------------------------------------------------------- serialization
    def to_bytes(self) -> list:
        """``[self[i].to_bytes() for i in range(len(self))]``, in one pass."""
        if len(self) == 0:
            return []
        payload, byte_starts, byte_ends, flags = self._encode()
        head = L.HEAD.pack(MAGIC, L.FAMILY, L.FORMAT_VERSION, 0, self.window, self.eps)
        return sealed_blobs(head, flags, self.newest, self.has_newest, payload, byte_starts, byte_ends)

    def compact_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(buf, offsets)``: histogram ``i`` as its flags byte and payload
        (its ``to_bytes()`` less the head, newest and CRC: the compact
        counters of :mod:`ehist.counters`) at ``buf[offsets[i]:offsets[i +
        1]]``, every histogram (each with a newest) in one pass."""
        if len(self) == 0:
            return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
        if compiled.active():  # each flags byte written before its payload
            buf, byte_starts, byte_ends, _ = compiled.encode_histograms(
                self.exps, self.hi, self.lo, self.offsets, self.newest, self.has_newest, self.merged, compact=True)
            return buf, np.append(byte_starts, byte_ends[-1]).astype(np.int64)
        payload, byte_starts, byte_ends, flags = self._encode()
        buf = np.insert(payload, byte_starts, flags.astype(np.uint8))
        return buf, np.concatenate([[0], byte_ends + np.arange(1, len(self) + 1)]).astype(np.int64)

    def _encode(self):
        """(payload as uint8, each histogram's start and end in it, its
        flags): the varints after each histogram's head and newest."""
        if compiled.active():
            return compiled.encode_histograms(self.exps, self.hi, self.lo, self.offsets, self.newest,
                                              self.has_newest, self.merged)
        hists = len(self)
        counts = np.diff(self.offsets)
        owner = np.repeat(np.arange(hists, dtype=np.int64), counts)
        # runs of equal exponents inside each histogram
        run_start = np.ones(self.exps.size, dtype=bool)
        if self.exps.size > 1:
            run_start[1:] = (self.exps[1:] != self.exps[:-1]) | (owner[1:] != owner[:-1])
        run_pos = np.flatnonzero(run_start)
        run_owner = owner[run_pos]
        run_len = np.diff(np.append(run_pos, self.exps.size))
        n_runs = np.bincount(run_owner, minlength=hists)
        # buckets sharing the previous bucket's timestamp: a bitmap where it pays (see to_bytes)
        local = np.arange(self.exps.size) - self.offsets[owner]
        same = np.zeros(self.exps.size, dtype=bool)
        if self.exps.size > 1:
            same[1:] = (self.hi[1:] == self.hi[:-1]) & (local[1:] > 0)
        n_same = np.bincount(owner[same], minlength=hists)
        bitmap = n_same > -(-counts // L.BITS)
        maps = np.where(bitmap, -(-counts // L.BITS), 0)
        shared = same & bitmap[owner]
        stamps = counts - np.where(bitmap, n_same, 0)
        widths = np.where(self.merged, counts, np.minimum(counts, 1))
        # deltas and widths, and their gcd per histogram: the tick (see to_bytes)
        kept = np.flatnonzero(~shared)
        k_owner = owner[kept]
        prev = np.where(local[kept] == 0, self.newest[k_owner], self.hi[np.maximum(kept - 1, 0)])
        delta = prev.view(_U64) - self.hi[kept].view(_U64)
        merged_at = np.flatnonzero(self.merged[owner])
        gap = self.hi[merged_at].view(_U64) - self.lo[merged_at].view(_U64)
        has = counts > 0
        ordered = has & ~self.merged
        last = self.offsets[1:][ordered] - 1
        last_gap = self.hi[last].view(_U64) - self.lo[last].view(_U64)
        tick = np.gcd(segment_gcds(delta, k_owner, hists), segment_gcds(gap, owner[merged_at], hists))
        tick[ordered] = np.gcd(tick[ordered], last_gap)
        ticked = tick >= _U64(2)
        tick[~ticked] = _U64(1)
        n_values = 1 + np.where(has, 1 + 2 * n_runs + ticked + maps + stamps + widths, 0)
        first = np.concatenate([[0], np.cumsum(n_values)[:-1]])
        flat = np.zeros(int(n_values.sum()), dtype=_U64)
        flat[first] = counts.astype(_U64)
        flat[first[has] + 1] = n_runs[has].astype(_U64)
        run_offsets = np.concatenate([[0], np.cumsum(n_runs)])
        local_run = np.arange(run_pos.size) - run_offsets[run_owner]
        at = first[run_owner] + 2 + 2 * local_run
        flat[at] = self.exps[run_pos].astype(_U64)
        flat[at + 1] = run_len.astype(_U64)
        flat[(first + 2 + 2 * n_runs)[ticked]] = tick[ticked]
        body = first + 2 + 2 * n_runs + ticked  # where each histogram's bitmap (or its deltas) starts
        if shared.any():
            bit_at = body[owner[shared]] + local[shared] // L.BITS
            np.add.at(flat, bit_at, np.left_shift(_U64(1), (local[shared] % L.BITS).astype(_U64)))
        stamp_local = np.arange(kept.size) - (np.cumsum(stamps) - stamps)[k_owner]
        scaled = np.flatnonzero(ticked[k_owner])
        if scaled.size:
            delta[scaled] //= tick[k_owner[scaled]]
        flat[(body + maps)[k_owner] + stamp_local] = delta
        end_stamps = body + maps + stamps  # where the widths start
        flat[end_stamps[owner[merged_at]] + local[merged_at]] = gap // tick[owner[merged_at]]
        flat[end_stamps[ordered]] = last_gap // tick[ordered]
        payload, nbytes = varint_stream(flat)
        byte_ends = np.cumsum(nbytes)[first + n_values - 1]
        byte_starts = np.concatenate([[0], byte_ends[:-1]])
        flags = (np.where(self.has_newest, L.FLAG_HAS_NEWEST, 0) | np.where(self.merged, L.FLAG_MERGED, 0)
                 | np.where(bitmap, L.FLAG_SHARED, 0) | np.where(ticked, L.FLAG_TICK, 0))
        return payload, byte_starts, byte_ends, flags

    @classmethod
    def from_bytes(cls, blobs, window: int | None = None, eps: float | None = None) -> "HistogramColumn":
        """Decode many :meth:`ExponentialHistogram.to_bytes` outputs at once.

        All must share one ``(window, eps)`` (the first blob's, unless
        given).  They are decoded with numpy, ordered and merged alike;
        any blob the vectorized checks do not pass (and the rare kinds
        they leave out: histograms never updated, merged ones of format
        version 1) goes through :meth:`ExponentialHistogram.from_bytes`,
        which raises its CorruptSketchError for the first bad blob.

        Raises
        ------
        CorruptSketchError
            As ``ExponentialHistogram.from_bytes`` would, for the first
            blob (in order) it rejects.
        IncompatibleSketchError
            Histograms of different windows or eps.
        TypeError
            A blob that is not bytes.
        """
        blobs = Blobs.of(blobs)
        if not blobs.present.all():
            raise TypeError("expected bytes, bytearray or memoryview, got NoneType")
        fast, parsed = _decode_fast(blobs)
        slow = np.flatnonzero(~np.asarray(fast, dtype=bool)).tolist()  # not one Python step per blob
        slow_hists = [ExponentialHistogram.from_bytes(blobs[i]) for i in slow]  # raises for corrupt bytes
        if window is None or eps is None:
            if not blobs:
                raise ValueError("from_bytes needs window and eps for an empty list")
            first = (int(parsed.window[0]), float(parsed.eps[0])) if fast[0] else \
                (slow_hists[0].window, slow_hists[0].eps)
            window = first[0] if window is None else window
            eps = first[1] if eps is None else eps
        fast_col = _assemble(parsed, window, eps)
        if not slow:
            return fast_col
        slow_col = cls.from_histograms(slow_hists, window, eps)
        order = np.empty(len(blobs), dtype=np.int64)
        order[np.flatnonzero(fast)] = np.arange(len(fast_col))
        order[slow] = len(fast_col) + np.arange(len(slow))
        return HistogramColumn.concat([fast_col, slow_col]).take(order)

    @classmethod
    def concat(cls, columns) -> "HistogramColumn":
        """The histograms of several columns of one window and eps, in order."""
        cols = list(columns)
        if not cols:
            raise ValueError("concat needs at least one column")
        for c in cols[1:]:
            if (c.window, c.eps) != (cols[0].window, cols[0].eps):
                raise IncompatibleSketchError(f"a column holds histograms of one window and eps: "
                                              f"({cols[0].window}, {cols[0].eps}) and ({c.window}, {c.eps})")
        shift = np.cumsum([0] + [int(c.offsets[-1]) for c in cols[:-1]])
        return cls(cols[0].window, cols[0].eps,
                   np.concatenate([[0]] + [c.offsets[1:] + s for c, s in zip(cols, shift)]),
                   *(np.concatenate([getattr(c, a) for c in cols])
                     for a in ("exps", "hi", "lo", "newest", "has_newest", "merged")))

    def take(self, indices) -> "HistogramColumn":
        """The histograms at ``indices``, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        first, end = self.offsets[idx], self.offsets[idx + 1]
        counts = end - first
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if offsets[-1] >= _SPAN_COPY * idx.size:  # long histograms (sums): copied span by span
            buckets = [gather(a, first, end) for a in (self.exps, self.hi, self.lo)]
        else:  # a few buckets each (counts, bins): one index, three gathers
            owner = np.repeat(np.arange(idx.size, dtype=np.int64), counts)
            src = first[owner] + (np.arange(offsets[-1]) - offsets[:-1][owner])
            buckets = [self.exps[src], self.hi[src], self.lo[src]]
        return HistogramColumn(self.window, self.eps, offsets, *buckets, self.newest[idx], self.has_newest[idx],
                               self.merged[idx])

    def take_spans(self, starts, ends) -> "HistogramColumn":
        """The histograms ``starts[i]:ends[i]`` of every ``i``, in that
        order: :meth:`take` of :func:`ehist.segments.ranges` of them, with
        each span's buckets (contiguous) copied as one span rather than
        indexed histogram by histogram (a keyed sketch's counters lie
        together: :meth:`ehist.keyed_counters.KeyedCounters.take`).

        >>> col = HistogramColumn.build(np.array([1, 2, 3, 4, 5, 6]), np.array([0, 2, 3, 5]), window=100, eps=0.5)
        >>> part = col.take_spans([2, 0], [4, 1])
        >>> part.hi.tolist() == col.take([2, 3, 0]).hi.tolist(), np.diff(part.offsets).tolist()
        (True, [2, 1, 2])
        """
        a = np.asarray(starts, dtype=np.int64)
        z = np.asarray(ends, dtype=np.int64)
        first, end = (gather(self.offsets[:-1], a, z), gather(self.offsets[1:], a, z))
        offsets = np.concatenate([[0], np.cumsum(end - first)]).astype(np.int64)
        ba, bz = self.offsets[a], self.offsets[z]  # each span's buckets, together
        buckets = [gather(x, ba, bz) for x in (self.exps, self.hi, self.lo)]
        return HistogramColumn(self.window, self.eps, offsets, *buckets,
                               *(gather(x, a, z) for x in (self.newest, self.has_newest, self.merged)))


def _cutoffs(total: int, newest, has_newest, now, window, where: str) -> np.ndarray:
    """Each histogram's cutoff (units after it are in the window) for a
    query at ``now`` (None: its newest) over ``window`` (None: ``total``,
    the histograms' own), checked: the window within ``[1, total]``, no
    ``now`` before a histogram's newest (``where``: which one, ``{i}`` its
    position)."""
    if window is None:
        window = total
    elif isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer)):
        raise ValueError(f"window must be an integer in [1, {total}] (the synopsis's window), got {window!r}")
    elif not 1 <= int(window) <= total:
        raise QueryTimeError.wide(int(window), total)
    if now is None:
        now = newest
    else:
        now = np.broadcast_to(coerce_times(now, "now"), newest.shape)
        late = has_newest & (now < newest)
        if late.any():
            i = int(np.flatnonzero(late)[0])
            raise QueryTimeError.late(int(now[i]), int(newest[i]), where.format(i=i))
    return np.maximum(now, np.int64(INT64_MIN + int(window))) - np.int64(window)


def _group_times(starts: np.ndarray, newest: np.ndarray, has_newest: np.ndarray, now):
    """``(time of each histogram's group, owner)``: ``now`` (one per group)
    or, when None, the group's newest timestamp."""
    owner = np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.append(starts, newest.size)))
    if now is None:
        stamp = np.where(has_newest, newest, INT64_MIN)
        group_now = np.full(starts.size, INT64_MIN, dtype=np.int64)
        np.maximum.at(group_now, owner, stamp)
        return group_now[owner], owner
    return np.broadcast_to(coerce_times(now, "now"), starts.shape)[owner], owner


def _group_sums(lower: np.ndarray, upper: np.ndarray, owner: np.ndarray, starts: np.ndarray):
    """Each group's sums of its histograms' bounds; SumOverflowError for a
    group whose upper bound passes int64, as its merge would raise."""
    if upper.size and float(upper.sum(dtype=np.float64)) >= 2.0**62:  # a group's sum may pass int64
        approx = np.bincount(owner, weights=upper.astype(np.float64), minlength=starts.size)
        for g in np.flatnonzero(approx >= 2.0**62).tolist():
            total = sum(upper[owner == g].tolist())
            if total > INT64_MAX:
                raise SumOverflowError(f"the union's total would overflow int64 ({total} > 2**63 - 1)")
    bounds = np.concatenate([[0], np.append(starts, owner.size)[1:]]).astype(np.int64)
    return _segment_sums(lower, bounds), _segment_sums(upper, bounds)


def bounds_from_bytes(blobs, now=None, window: int | None = None, *, groups=None, where: str = " of histogram {i}"):
    """``HistogramColumn.from_bytes(blobs).bounds(now, window)``: every
    histogram's bounds, with the same checks and errors (a ``now`` before
    a histogram's newest names it by ``where``).  With ``groups`` (the
    first histogram of each group), ``union_bounds(groups, now, window)``
    instead: each group's sums, as of ``now`` (one per group; None: the
    group's newest timestamp).

    With numba, each histogram is decoded into a histogram-sized scratch
    and bounded in the same pass (:func:`ehist.compiled.decode_bounds`):
    the column's buckets are never built, which is most of the cost of
    answering a stored table.  Blobs that pass the vectorized checks take
    that path; a batch with any other goes through :meth:`from_bytes`.

    Histograms in the rows form (:mod:`ehist.eh_rows`) answer exactly:
    :func:`_bounds_with_rows`.

    Returns
    -------
    (lower, upper): int64 arrays, one entry per blob (or group).
    """
    blobs = Blobs.of(blobs)
    if groups is not None:
        groups = check_starts(groups, len(blobs))
    rows = rows_form(blobs)
    if rows.any():
        return _bounds_with_rows(blobs, rows, now, window, groups, where)
    if compiled.active() and len(blobs) and blobs.present.all():
        ok, buf, starts, lengths = sealed_heads(blobs, L.FAMILY, L.HEAD_BYTES + 1 + _CRC.size,
                                                L.FLAG_SHARED | L.FLAG_TICK | L.FLAG_MERGED)
        if ok.all():
            w, eps, newest = L.head_fields(buf, starts)
            try:
                alike = bool((w == w[0]).all() and (eps == eps[0]).all())
                w0, l = check_window(int(w[0])), (k_of_eps(check_eps(float(eps[0]))) + 1) // 2
            except ValueError:
                alike = False  # from_bytes names the bad parameter
            cut = None
            if alike:
                has = np.ones(newest.size, dtype=bool)
                try:
                    at, owner = (now, None) if groups is None else _group_times(groups, newest, has, now)
                    cut = _cutoffs(w0, newest, has, at, window, where)
                except (ValueError, TypeError):
                    pass  # a bad query: raised below, after from_bytes has said what is wrong with the bytes
            if cut is not None:
                accepted, lower, upper, _, _ = compiled.decode_bounds(
                    buf, starts + L.HEAD_BYTES, starts + lengths - _CRC.size, L.flags_of(buf, starts),
                    L.version_of(buf, starts) == L.FORMAT_VERSION, newest, w0, l, cut)
                if accepted.all():
                    return (lower, upper) if groups is None else _group_sums(lower, upper, owner, groups)
    column = HistogramColumn.from_bytes(blobs)
    at, owner = (now, None) if groups is None else _group_times(groups, column.newest, column.has_newest, now)
    lower, upper = column._bucket_bounds(_cutoffs(column.window, column.newest, column.has_newest, at, window, where))
    return (lower, upper) if groups is None else _group_sums(lower, upper, owner, groups)


def rows_form(blobs: Blobs) -> np.ndarray:
    """Which of the (present) blobs say they are histograms in the rows
    form (format version 3; their reader checks the rest).

    >>> rows_form([ExponentialHistogram.of_rows(10, 0.1, [1]).to_bytes(),
    ...            ExponentialHistogram(10, 0.1).update([1]).to_bytes(), None]).tolist()
    [True, False, False]
    """
    blobs = Blobs.of(blobs)
    out = np.zeros(len(blobs), dtype=bool)
    if len(blobs):
        long = np.flatnonzero(blobs.present & (blobs.lengths > L.VERSION_AT))
        out[long] = blobs.buf[blobs.starts[long] + L.VERSION_AT] == L.ROWS_VERSION
    return out


def read_rows_blobs(blobs: Blobs):
    """``(rows, newest, window, eps)`` of histograms all in the rows form,
    of one window and eps: :meth:`ehist.eh_rows.HistogramRows.read`, or
    where that refuses a blob, ``ExponentialHistogram.from_bytes`` of each
    (its CorruptSketchError; IncompatibleSketchError for mixed windows or
    eps)."""
    buf, starts, lengths = blobs.buf, blobs.starts, blobs.lengths
    if rows_blobs(buf, starts, lengths).all():
        w, e, _ = L.head_fields(buf, starts)
        try:
            window, eps = check_window(int(w[0])), check_eps(float(e[0]))
        except ValueError:
            window = None
        if window is not None and bool((w == w[0]).all() and (e == e[0]).all()):
            ok, rows, newest = HistogramRows.read(buf, starts, lengths, window, eps)
            if ok.all():
                return rows, newest, window, eps
    hs = [ExponentialHistogram.from_bytes(b) for b in blobs.tolist()]  # raises for the first bad blob
    for h in hs[1:]:
        if (h.window, h.eps) != (hs[0].window, hs[0].eps):
            raise IncompatibleSketchError(f"a column holds histograms of one window and eps: ({hs[0].window}, "
                                          f"{hs[0].eps}) and ({h.window}, {h.eps})")
    rows = HistogramRows.of([(h.rows[0], np.zeros(len(h), dtype=_U64), h.rows[1]) for h in hs])
    return rows, np.array([h.newest for h in hs], dtype=np.int64), hs[0].window, hs[0].eps


def _bounds_with_rows(blobs: Blobs, rows: np.ndarray, now, window, groups, where: str):
    """:func:`bounds_from_bytes` of blobs some of which (``rows``) hold
    the rows form: those exact, the others' buckets bounded as ever."""
    n = len(blobs)
    r_idx, b_idx = np.flatnonzero(rows), np.flatnonzero(~rows)
    kept, r_newest, w0, e0 = read_rows_blobs(blobs.take(r_idx))
    newest = np.zeros(n, dtype=np.int64)
    has = np.ones(n, dtype=bool)
    newest[r_idx] = r_newest
    column = None
    if b_idx.size:
        column = HistogramColumn.from_bytes(blobs.take(b_idx))
        if (column.window, column.eps) != (w0, e0):
            raise IncompatibleSketchError(f"a column holds histograms of one window and eps: ({column.window}, "
                                          f"{column.eps}) and ({w0}, {e0})")
        newest[b_idx], has[b_idx] = column.newest, column.has_newest
    at, owner = (now, None) if groups is None else _group_times(groups, newest, has, now)
    cut = _cutoffs(w0, newest, has, at, window, where)
    lower = np.zeros(n, dtype=np.int64)
    upper = np.zeros(n, dtype=np.int64)
    if column is not None:
        lower[b_idx], upper[b_idx] = column._bucket_bounds(cut[b_idx])
    lower[r_idx] = upper[r_idx] = kept.sums_after(cut[r_idx])
    return (lower, upper) if groups is None else _group_sums(lower, upper, owner, groups)


def histogram_bytes(timestamps, starts, values=None, *, window: int, eps: float = 0.01, now=None,
                    chunk: int = 1024, exact: bool = False):
    """``HistogramColumn.build(...).to_bytes()``, ``chunk`` runs at a time
    (a histogram of sums has up to ``l log2(sum)`` buckets whatever its
    run's length: chunks keep the flat arrays in cache), with each
    histogram's bounds as of ``now`` (None: its newest; or one per run).

    With ``exact``, a run whose window holds 1 to ``k`` rows is written
    in the rows form (:meth:`ExponentialHistogram.of_rows`: a key's few
    rows as they are, answered without error), and another in its exact
    form (:func:`exact_forms`) where that is shorter (a burst of rows at
    one time).

    Returns
    -------
    (blobs, lower, upper): a list of bytes and two int64 arrays.
    """
    ts = coerce_timestamps(timestamps)
    v = None if values is None else np.asarray(values)
    starts = check_starts(starts, ts.size)
    if exact:
        got = _with_rows(ts, starts, v, window, eps, now, chunk)
        if got is not None:
            return got
    return _bucket_bytes(ts, starts, v, window, eps, now, chunk, exact)


def _with_rows(ts, starts, v, window, eps, now, chunk: int):
    """:func:`histogram_bytes` with ``exact`` where some run keeps its rows
    (the others through :func:`_bucket_bytes`), or None where none does
    or the general path must decide (its errors and messages)."""
    window, eps = check_window(window), check_eps(eps)
    v = coerce_values(v, ts.size)
    runs = starts.size
    ends = np.append(starts[1:], ts.size)
    has = ends > starts
    if not runs or not ts.size or int(ts.min()) == INT64_MIN:
        return None
    vals = np.ones(ts.size, dtype=np.int64) if v is None else v.astype(np.int64)
    owner = np.repeat(np.arange(runs, dtype=np.int64), ends - starts)
    if float(np.bincount(owner, weights=vals.astype(np.float64), minlength=runs).max()) >= 2.0 ** 62:
        return None  # sums near int64's end: the general path checks them
    newest = np.zeros(runs, dtype=np.int64)
    newest[has] = np.maximum.reduceat(ts, starts[has])
    at = newest if now is None else np.broadcast_to(coerce_times(now, "now"), (runs,)).astype(np.int64)
    if np.any(has & (at < newest)):
        return None
    k = k_of_eps(eps)
    maybe = _few_rows(ts, owner, vals, newest, window, k, runs)
    if maybe.size == 0:
        return None
    rows = HistogramRows.of_runs(*(ts, starts, vals) if maybe.size == runs else (
        ts[ranges(starts[maybe], ends[maybe])], np.concatenate([[0], np.cumsum((ends - starts)[maybe])[:-1]]),
        vals[ranges(starts[maybe], ends[maybe])]), window, newest[maybe])
    fits = (rows.counts >= 1) & (rows.counts <= k)
    pick = maybe[fits]
    if pick.size == 0:
        return None
    kept = rows.take(np.flatnonzero(fits))
    blobs = [None] * runs
    lower = np.zeros(runs, dtype=np.int64)
    for i, blob in zip(pick.tolist(), kept.to_bytes(window, eps, newest[pick])):
        blobs[i] = blob
    lower[pick] = kept.bounds(at[pick], window)
    upper = lower.copy()
    rest = np.setdiff1d(np.arange(runs), pick)
    if rest.size:
        picked = ranges(starts[rest], ends[rest])
        r_starts = np.concatenate([[0], np.cumsum(ends[rest] - starts[rest])[:-1]]).astype(np.int64)
        got = _bucket_bytes(ts[picked], r_starts, None if v is None else v[picked], window, eps,
                            None if now is None else at[rest], chunk, True)
        for i, blob in zip(rest.tolist(), got[0]):
            blobs[i] = blob
        lower[rest], upper[rest] = got[1], got[2]
    return blobs, lower, upper


def _few_rows(ts, owner, vals, newest, window: int, k: int, runs: int) -> np.ndarray:
    """The runs that may keep 1 to ``k`` rows: where each run is sorted by
    time, those whose distinct times of positive values inside the window
    (their rows, exactly) are that many; else every run."""
    same = owner[1:] == owner[:-1]
    if ts.size > 1 and not bool(np.all((ts[1:] >= ts[:-1]) | ~same)):
        return np.arange(runs)
    live = np.flatnonzero((ts > _row_cutoffs(newest, window)[owner]) & (vals > 0))
    o, t = owner[live], ts[live]
    first = np.r_[True, (o[1:] != o[:-1]) | (t[1:] != t[:-1])] if o.size else np.zeros(0, dtype=bool)
    counts = np.bincount(o[first], minlength=runs)
    return np.flatnonzero((counts >= 1) & (counts <= k))


def _bucket_bytes(ts, starts, v, window, eps, now, chunk: int, exact: bool):
    """:func:`histogram_bytes` of buckets (canonical, or exact forms where
    shorter with ``exact``)."""
    if compiled.active():  # every run built, chosen and encoded in one compiled pass
        got = _compiled_bytes(ts, starts, v, window, eps, now, exact)
        if got is not None:
            return got
    bounds = np.append(starts, ts.size)
    blobs, lower, upper = [], [], []
    for a in range(0, starts.size, chunk):
        b = min(a + chunk, starts.size)
        lo_row, hi_row = int(bounds[a]), int(bounds[b])
        at = now if now is None or np.ndim(now) == 0 else np.asarray(now)[a:b]
        got = _chunk_bytes(ts[lo_row:hi_row], starts[a:b] - lo_row, None if v is None else v[lo_row:hi_row],
                           window, eps, at, exact)
        blobs += got[0]
        lower.append(got[1])
        upper.append(got[2])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    return blobs, cat(lower), cat(upper)


def _compiled_bytes(ts, starts, values, window, eps, now, exact: bool):
    """:func:`histogram_bytes` by :func:`ehist.compiled.build_histograms`
    (byte for byte the numpy path), or None for what that path decides
    itself: runs out of time order, a timestamp of -2**63, values whose
    sums could pass int64 or reach 2**61, a ``now`` before a run's newest
    (their errors and messages are its)."""
    window, eps = check_window(window), check_eps(eps)
    v = coerce_values(values, ts.size)
    runs = starts.size
    ends = np.append(starts[1:], ts.size)
    run_of = np.repeat(np.arange(runs, dtype=np.int64), ends - starts)
    same_run = run_of[1:] == run_of[:-1]
    if ts.size and (int(ts.min()) == INT64_MIN or np.any((ts[1:] < ts[:-1]) & same_run)):
        return None
    if v is not None:
        v = v.astype(np.int64)
        if ts.size and int(v.max()) * ts.size > INT64_MAX:
            return None
    has = ends > starts
    newest = np.where(has, ts[np.maximum(ends - 1, 0)] if ts.size else 0, 0)
    at = newest if now is None else np.broadcast_to(coerce_times(now, "now"), (runs,)).astype(np.int64)
    if np.any(has & (at < newest)):
        return None
    cutoff = np.maximum(at, np.int64(INT64_MIN + window)) - np.int64(window)
    if v is None:  # counts: exact forms only for rows sharing a time
        exact = exact and bool(np.any((ts[1:] == ts[:-1]) & same_run))
        totals = (ends - starts).astype(np.float64)
    else:
        totals = np.bincount(run_of, weights=v.astype(np.float64), minlength=runs)
    if totals.size and float(totals.max()) >= 2.0 ** 61:  # sizes near the largest exponent: the numpy path
        return None
    l = (k_of_eps(eps) + 1) // 2
    parts = []
    for a, b in _build_chunks(totals, ends - starts, l):  # the builder's output room, bounded per call
        lo_row, hi_row = int(starts[a]), int(ends[b - 1])
        got = compiled.build_histograms(ts[lo_row:hi_row], starts[a:b] - lo_row,
                                        None if v is None else v[lo_row:hi_row], window, l, exact,
                                        totals[a:b] < 2.0 ** 61, cutoff[a:b])
        shift = sum(int(p[0].size) for p in parts)
        parts.append((got[0], got[1] + shift, got[2] + shift, *got[3:]))
    payload, b_start, b_end, flags, newest, has, lower, upper = (
        (np.concatenate(x) for x in zip(*parts)) if parts else compiled.build_histograms(
            ts, starts, v, window, l, exact, totals < 2.0 ** 61, cutoff))
    head = L.HEAD.pack(MAGIC, L.FAMILY, L.FORMAT_VERSION, 0, window, eps)
    return sealed_blobs(head, flags, newest, has, payload, b_start, b_end), lower, upper


#: The most bytes one call of the compiled builder may set aside for its output.
_BUILD_ROOM = 1 << 26


def _build_chunks(totals: np.ndarray, rows: np.ndarray, l: int):
    """``(first run, end run)`` of consecutive chunks whose output room in
    :func:`ehist.compiled.build_histograms` (42 bytes for each canonical
    bucket and each possible exact one: at most ``(l + 1)(j + 1)`` and
    ``63`` per row, ``j`` the canonical levels of the run's total) adds up
    to at most :data:`_BUILD_ROOM`, one run at least: memory that does not
    grow with the number of keys of a partition."""
    levels = np.floor(np.log2(totals / l + 1.0)) + 1.0
    room = np.cumsum(64.0 + 42.0 * ((l + 1) * (levels + 1.0) + 63.0 * rows))
    a = 0
    while a < totals.size:
        b = max(a + 1, int(np.searchsorted(room, (room[a - 1] if a else 0.0) + _BUILD_ROOM, side="right")))
        yield a, min(b, totals.size)
        a = b


def _chunk_bytes(ts, starts, v, window, eps, now, exact: bool):
    """One chunk of :func:`histogram_bytes`: ``(blobs, lower, upper)``.

    With ``exact``, the runs whose exact form is surely shorter -- shorter
    than a lower bound on their canonical form's bytes, read from the
    canonical sizes alone (:func:`_canonical_bytes_at_least`) -- are
    written without building their canonical buckets (a sum of a few rows
    has hundreds); the others are built and compared
    (:func:`_exact_choice`).  Either way the choice is the shorter form."""
    runs = starts.size
    ends = np.append(starts[1:], ts.size)
    sure = np.zeros(0, dtype=np.int64)
    run_of = np.repeat(np.arange(runs), ends - starts)
    same_run = run_of[1:] == run_of[:-1]
    if v is None and not np.any((ts[1:] == ts[:-1]) & same_run):
        exact = False  # counts of rows at distinct times: the canonical form is the shorter
    if exact and runs and ts.size and not np.any((ts[1:] < ts[:-1]) & same_run):
        window, eps = check_window(window), check_eps(eps)
        ones = np.ones(ts.size, dtype=np.int64) if v is None else np.asarray(v)
        if ones.dtype.kind in "iu" and (ones.size == 0 or (int(ones.min()) >= 0 and int(ones.max()) < 2**62)):
            has = ends > starts
            newest = np.where(has, ts[np.maximum(ends - 1, 0)], 0)
            g_run, g_t, sums, popcount = _run_sums(ts, starts, ones.astype(np.int64), window, newest, has)
            totals = np.bincount(g_run, weights=sums.astype(np.float64), minlength=runs)
            c_exps, c_owner = _canonical_exps(np.where(totals < 2.0 ** 61, totals, 0).astype(np.int64),
                                              (k_of_eps(eps) + 1) // 2)
            n_c = np.bincount(c_owner, minlength=runs)
            maybe = np.flatnonzero((popcount > 0) & (popcount < n_c) & (totals < 2.0 ** 61))
            if maybe.size:
                forms = _forms(g_run, g_t, sums, maybe, window, eps, newest, has)
                _, e_start, e_end, _ = forms._encode()
                least = _canonical_bytes_at_least(c_exps, c_owner, runs)[maybe]
                won = (e_end - e_start) + (L.HEAD_BYTES + _CRC.size) < least
                sure, sure_forms = maybe[won], forms.take(np.flatnonzero(won))
    blobs = [None] * runs
    lower = np.zeros(runs, dtype=np.int64)
    upper = np.zeros(runs, dtype=np.int64)
    rest = np.setdiff1d(np.arange(runs), sure)
    if sure.size:
        for i, blob in zip(sure.tolist(), sure_forms.to_bytes()):
            blobs[i] = blob
        lower[sure], upper[sure] = sure_forms.bounds(now=now if now is None or np.ndim(now) == 0 else now[sure])
    if rest.size:
        if rest.size < runs:  # the canonical build of the other runs only
            rows = np.concatenate([np.arange(a, z) for a, z in zip(starts[rest].tolist(), ends[rest].tolist())]
                                  + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
            r_starts = np.concatenate([[0], np.cumsum(ends[rest] - starts[rest])[:-1]]).astype(np.int64)
            r_ts, r_v = ts[rows], None if v is None else np.asarray(v)[rows]
        else:
            r_starts, r_ts, r_v = starts, ts, v
        col = HistogramColumn.build(r_ts, r_starts, r_v, window=window, eps=eps)
        got = col.to_bytes()
        at = now if now is None or np.ndim(now) == 0 else now[rest]
        lo, up = col.bounds(now=at)
        if exact:  # the runs whose exact form may be shorter: compared with the canonical one built
            chosen, forms = _exact_choice(col, r_ts, r_starts, np.ones(r_ts.size, dtype=np.int64) if r_v is None
                                          else r_v)
            if chosen.size:
                for i, blob in zip(chosen.tolist(), forms.to_bytes()):
                    got[i] = blob
                lo[chosen], up[chosen] = forms.bounds(now=at if at is None or np.ndim(at) == 0 else at[chosen])
        for i, blob in zip(rest.tolist(), got):
            blobs[i] = blob
        lower[rest], upper[rest] = lo, up
    return blobs, lower, upper


def _canonical_bytes_at_least(exps: np.ndarray, owner: np.ndarray, runs: int) -> np.ndarray:
    """A lower bound on the bytes of each run's canonical histogram, from
    its sizes alone (``exps`` ascending per ``owner``, as
    :func:`_canonical_exps` gives them): head, newest and CRC, the bucket
    and run counts, every size run, the shared-timestamps bitmap or a
    delta per bucket (whichever the writer picks, at least one delta), and
    the oldest width."""
    n = np.bincount(owner, minlength=runs)
    if exps.size == 0:
        return np.full(runs, L.HEAD_BYTES + _CRC.size + 1, dtype=np.int64)
    start = np.flatnonzero(np.r_[True, (exps[1:] != exps[:-1]) | (owner[1:] != owner[:-1])])
    run_len = np.diff(np.append(start, exps.size))
    per_run = np.bincount(owner[start], weights=1 + _varint_bytes(run_len), minlength=runs).astype(np.int64)
    n_runs = np.bincount(owner[start], minlength=runs)
    stamps = np.minimum(-(-n // L.BITS) + 1, n)
    return L.HEAD_BYTES + _CRC.size + _varint_bytes(n) + _varint_bytes(n_runs) + per_run + stamps + 1


def _varint_bytes(x: np.ndarray) -> np.ndarray:
    """Bytes of each non-negative value as a varint."""
    x = np.asarray(x, dtype=np.int64)
    out = np.ones(x.shape, dtype=np.int64)
    for k in range(1, 10):
        out += x >= (1 << (7 * k))
    return out


def exact_forms(col: "HistogramColumn", timestamps, starts, values) -> "HistogramColumn":
    """``col`` (:meth:`HistogramColumn.build` of these runs of sums, or of
    counts with values of ones) with each histogram replaced by its exact
    form where that encodes shorter.

    The exact form of a run keeps each of its timestamps inside the window
    with the sum of its values there, split into the powers of two of that
    sum (``800 = 512 + 256 + 32``: three buckets of one timestamp, largest
    first), each bucket's time interval the one timestamp: a merged
    histogram (:mod:`ehist.compress`) whose every bucket straddles no
    cutoff, so its bounds are the exact sum for every window.  A run of a
    few flows of hundreds of bytes takes a few buckets this way, where the
    canonical form at eps 0.01 takes ~215 (``l`` of every size below the
    total); a run of many rows keeps the canonical form, which is then the
    shorter.  Both are histograms of format version 2, read by every
    decoder; unions and later updates treat the exact form as any merged
    histogram (their guarantees hold).  Runs must be sorted by time (as
    the build leaves them) and their totals below ``2**62``; others keep
    their canonical form.

    >>> import numpy as np
    >>> ts, v = np.array([10, 20, 20]), np.array([800, 100, 5])
    >>> col = exact_forms(HistogramColumn.build(ts, [0], v, window=100, eps=0.01), ts, [0], v)
    >>> h = col[0]                       # 105 at time 20, 800 at time 10
    >>> h.merged, h.buckets()[0].tolist()
    (True, [64, 32, 8, 1, 512, 256, 32])
    >>> h.bounds(now=30, window=15)      # (15, 30]: exactly the 105
    (105, 105)
    """
    chosen, forms = _exact_choice(col, timestamps, starts, values)
    if chosen.size == 0:
        return col
    pick = np.arange(len(col))
    pick[chosen] = len(col) + np.arange(chosen.size)
    return HistogramColumn.concat([col, forms]).take(pick)


def _exact_choice(col: "HistogramColumn", timestamps, starts, values):
    """``(chosen, forms)``: the runs whose exact form (:func:`exact_forms`)
    encodes shorter than their histogram in ``col``, and those forms."""
    none = (np.zeros(0, dtype=np.int64), None)
    ts = np.asarray(timestamps, dtype=np.int64)
    v = np.asarray(values).astype(np.int64)
    runs = len(col)
    starts = np.asarray(starts, dtype=np.int64)
    run_of = np.repeat(np.arange(runs, dtype=np.int64), np.diff(np.append(starts, ts.size)))
    if ts.size and (np.any((ts[1:] < ts[:-1]) & (run_of[1:] == run_of[:-1])) or int(v.min()) < 0):
        return none
    g_run, g_t, sums, popcount = _run_sums(ts, starts, v, col.window, col.newest, col.has_newest)
    # only fewer buckets can encode shorter (each costs a run or bitmap bit, and a width, more than a
    # canonical one): counts of rows at distinct times never do, and are left at that
    maybe = np.flatnonzero((popcount > 0) & (popcount < np.diff(col.offsets)))
    if maybe.size == 0:
        return none
    forms = _forms(g_run, g_t, sums, maybe, col.window, col.eps, col.newest, col.has_newest)
    _, c_start, c_end, _ = col._encode()
    _, e_start, e_end, _ = forms._encode()
    shorter = e_end - e_start < (c_end - c_start)[maybe]
    if not shorter.any():
        return none
    return maybe[shorter], forms.take(np.flatnonzero(shorter))


def _run_sums(ts, starts, v, window: int, newest, has_newest):
    """Each run's timestamps inside its window with a positive sum of
    values there, newest first within a run: ``(run, time, sum)`` arrays,
    and each run's exact bucket count (the set bits of its sums; 0 for a
    run whose total may pass ``2**61``)."""
    runs = starts.size
    run_of = np.repeat(np.arange(runs, dtype=np.int64), np.diff(np.append(starts, ts.size)))
    totals = np.bincount(run_of, weights=v.astype(np.float64), minlength=runs)
    small = totals < 2.0 ** 61  # the sums below stay exact in int64
    age = np.asarray(newest, dtype=np.int64)[run_of].view(_U64) - ts.view(_U64)
    keep = np.asarray(has_newest)[run_of] & (age < _U64(window)) & (v > 0) & small[run_of]
    r, t, x = run_of[keep], ts[keep], v[keep]
    popcount = np.zeros(runs, dtype=np.int64)
    if r.size == 0:
        return r, t, x, popcount
    first = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (t[1:] != t[:-1])])
    sums, g_run, g_t = np.add.reduceat(x, first), r[first], t[first]
    order = np.arange(first.size)[::-1]  # newest first within each run
    order = order[np.argsort(g_run[order], kind="stable")]
    sums, g_run, g_t = sums[order], g_run[order], g_t[order]
    np.add.at(popcount, g_run, _popcount(sums))
    return g_run, g_t, sums, popcount


def _forms(g_run, g_t, sums, runs_at, window: int, eps: float, newest, has_newest) -> "HistogramColumn":
    """The exact forms of the runs ``runs_at`` (sorted) from :func:`_run_sums`."""
    mine = np.isin(g_run, runs_at)
    sums, g_run, g_t = sums[mine], g_run[mine], g_t[mine]
    bits = ((sums[:, None] >> np.arange(62, -1, -1, dtype=np.int64)[None, :]) & 1).astype(bool)
    group, column = np.nonzero(bits)  # each group's set bits, largest first
    counts = np.bincount(np.searchsorted(runs_at, g_run[group]), minlength=runs_at.size)
    hi = g_t[group]
    return HistogramColumn(window, eps, np.concatenate([[0], np.cumsum(counts)]), (62 - column).astype(np.int8), hi,
                           hi.copy(), np.asarray(newest)[runs_at], np.asarray(has_newest)[runs_at],
                           counts > 0)


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each non-negative int64."""
    x = x.astype(_U64)
    x = x - ((x >> _U64(1)) & _U64(0x5555555555555555))
    x = (x & _U64(0x3333333333333333)) + ((x >> _U64(2)) & _U64(0x3333333333333333))
    x = (x + (x >> _U64(4))) & _U64(0x0F0F0F0F0F0F0F0F)
    return ((x * _U64(0x0101010101010101)) >> _U64(56)).astype(np.int64)


def check_starts(starts, n: int) -> np.ndarray:
    """``starts`` (where each run of ``n`` rows begins) as int64, checked:
    one-dimensional integers from 0, non-decreasing, up to ``n``
    (ValueError naming what is wrong).  Every columnar builder's check of
    its runs, the family packages' too.

    >>> check_starts([0, 2, 2], 5).tolist()
    [0, 2, 2]
    """
    s = np.asarray(starts)
    if s.ndim != 1 or (s.size and s.dtype.kind not in "iu"):
        raise ValueError(f"starts must be a one-dimensional array of integers, got {s!r}")
    s = s.astype(np.int64)
    if s.size == 0:
        if n:
            raise ValueError(f"starts is empty but there are {n} timestamps (starts[0] must be 0)")
        return s
    if s[0] != 0 or np.any(np.diff(s) < 0) or s[-1] > n:
        raise ValueError(f"starts must begin at 0 and be non-decreasing up to {n}, got {s.tolist()[:10]}")
    return s


def _segment_sums(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sums of ``x[offsets[i]:offsets[i + 1]]`` (empty segments: 0).

    int64 cumulative sums may wrap around over many segments; each
    segment's sum fits in int64, and differences modulo 2**64 are exact.
    """
    with np.errstate(over="ignore"):
        c = np.concatenate([[0], np.cumsum(x, dtype=np.int64)])
        return c[offsets[1:]] - c[offsets[:-1]]


def _canonical_exps(totals: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat :func:`~ehist.canonical.canonical_exponents` of many totals,
    each histogram's exponents ascending (newest bucket first), and the
    index of the total each belongs to."""
    t = totals.astype(_U64)
    live = np.flatnonzero(t > 0)
    if live.size == 0:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64)
    t = t[live]
    q = t // _U64(l) + _U64(1)  # largest j with 2**j <= q (exact: see canonical.py)
    j = np.frexp(q.astype(np.float64))[1].astype(np.int64) - 1
    j -= (np.left_shift(_U64(1), j.astype(_U64)) > q).astype(np.int64)
    bump = j < 63
    bump[bump] = np.left_shift(_U64(1), (j[bump] + 1).astype(_U64)) <= q[bump]
    j += bump
    rest = t - _U64(l) * (np.left_shift(_U64(1), j.astype(_U64)) - _U64(1))
    m = rest >> j.astype(_U64)
    low = rest & (np.left_shift(_U64(1), j.astype(_U64)) - _U64(1))
    width = int(j.max()) + 1
    levels = np.arange(width, dtype=np.int64)
    bits = ((low[:, None] >> levels.astype(_U64)[None, :]) & _U64(1)).astype(np.int64)
    counts = np.where(levels[None, :] < j[:, None], l + bits, 0)
    counts[np.arange(live.size), j] = m.astype(np.int64)
    exps = np.repeat(np.tile(levels.astype(np.int8), live.size), counts.ravel())
    owner = np.repeat(live.astype(np.int64), counts.sum(axis=1))
    return exps, owner


class _Parsed:
    """What the vectorized decoder read from the blobs it accepted, in order."""

    def __init__(self, window, eps, newest, counts, exps, hi, lo, merged):
        self.window, self.eps, self.newest = window, eps, newest
        self.counts, self.exps, self.hi, self.lo, self.merged = counts, exps, hi, lo, merged

    @property
    def size(self) -> int:
        return int(self.newest.size)


def _decode_varints(payload: np.ndarray, owner_byte: np.ndarray, blobs: int):
    """Every varint of the concatenated payloads: (values, owning blob,
    per-blob 'malformed' mask).  Malformed: longer than 10 bytes, not
    minimal, above 64 bits, or running across the end of its payload."""
    stop = payload < 0x80
    stops = np.flatnonzero(stop)
    bad = np.zeros(blobs, dtype=bool)
    if stops.size == 0:
        bad[:] = True
        return np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int64), bad
    v_start = np.concatenate([[0], stops[:-1] + 1])
    v_len = stops - v_start + 1
    v_owner = owner_byte[stops]
    malformed = ((v_len > 10) | ((v_len > 1) & (payload[stops] == 0)) | ((v_len == 10) & (payload[stops] > 1))
                 | (owner_byte[v_start] != v_owner))
    bad[v_owner[malformed]] = True
    bad[owner_byte[stops[-1] + 1:]] = True  # bytes after the last stop: an unfinished varint
    bad[owner_byte[v_start[malformed]]] = True
    # one pass per byte position over the varints that long (most are 1-4
    # bytes): 2.6x faster than spreading every byte and summing by varint
    used = np.minimum(v_len, 10)
    values = (payload[v_start] & 0x7F).astype(_U64)
    longer = np.arange(v_start.size)
    for j in range(1, int(used.max())):
        longer = longer[used[longer] > j]
        values[longer] |= (payload[v_start[longer] + j] & 0x7F).astype(_U64) << _U64(7 * j)
    return values, v_owner, bad


def varints_at(buf: np.ndarray, v_start: np.ndarray, v_stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, malformed)``: the varints ``buf[v_start[i]:v_stop[i] + 1]``
    (``v_stop[i]``: a byte below 0x80, the only one from ``v_start[i]``);
    malformed: longer than 10 bytes, not minimal, or above 64 bits."""
    length = v_stop - v_start + 1
    malformed = (length > 10) | ((length > 1) & (buf[v_stop] == 0)) | ((length == 10) & (buf[v_stop] > 1))
    used = np.minimum(length, 10)
    values = (buf[v_start] & 0x7F).astype(_U64)
    longer = np.arange(v_start.size)
    for j in range(1, int(used.max()) if used.size else 0):
        longer = longer[used[longer] > j]
        values[longer] |= (buf[v_start[longer] + j] & 0x7F).astype(_U64) << _U64(7 * j)
    return values, malformed


def region_varints(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """A reader of the varints that open byte regions ``buf[starts[i]:
    ends[i]]`` (counts, gaps, lengths before a region's other bytes),
    without decoding the rest: the ``k``-th varint of a region ends at the
    ``k``-th byte below 0x80 from its start.  Returns ``read(k, of)``:
    ``(values, stop bytes, bad)`` of varint ``k[j]`` of region ``of[j]``
    (bad: running past the region's end, or malformed)."""
    stops = np.flatnonzero(buf < 0x80)
    last = max(stops.size - 1, 0)
    first = np.searchsorted(stops, starts)

    def read(k, of):
        if stops.size == 0:
            return np.zeros(k.size, dtype=_U64), np.zeros(k.size, dtype=np.int64), np.ones(k.size, dtype=bool)
        at = np.minimum(first[of] + k, last)
        stop = stops[at]
        begin = np.where(k == 0, starts[of], stops[np.maximum(at - 1, 0)] + 1)
        missing = (first[of] + k > last) | (stop >= ends[of])
        value, malformed = varints_at(buf, np.where(missing, 0, begin), np.where(missing, 0, stop))
        return value, stop, missing | malformed

    return read


def payload_varints(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, head: int, bad: np.ndarray,
                    tail: int = _CRC.size):
    """Every varint of the payloads ``[start + head, end - tail)`` of blobs
    joined in ``buf`` (the bytes between a fixed header and the checksum),
    marking ``bad`` the blobs with a malformed one.

    Returns
    -------
    (values, per-blob value counts, each blob's first value's index,
    value(at, where)): the value at index ``at`` where ``where`` holds,
    else 0 (indices clipped, so a short blob reads zeros, not past the end).
    """
    p_len = lengths - head - tail
    owner_byte = np.repeat(np.arange(starts.size, dtype=np.int64), p_len)
    p_off = np.concatenate([[0], np.cumsum(p_len)])
    payload = buf[np.repeat(starts + head - p_off[:-1], p_len) + np.arange(p_off[-1])]
    values, v_owner, malformed = _decode_varints(payload, owner_byte, starts.size)
    bad |= malformed
    n_vals = np.bincount(v_owner, minlength=starts.size)
    v_first = np.concatenate([[0], np.cumsum(n_vals)[:-1]])
    last_value = max(values.size - 1, 0)

    def value(at, where):
        if values.size == 0:
            return np.zeros(np.shape(at), dtype=_U64)
        return np.where(where, values[np.minimum(at, last_value)], _U64(0))

    return values, n_vals, v_first, value


def _decode_fast(blobs: list) -> tuple[np.ndarray, _Parsed | None]:
    """Vectorized decode of the histograms among ``blobs``.

    Returns (accepted mask, fields of the accepted blobs in order).  A blob
    is accepted only when every check of ``ExponentialHistogram.from_bytes``
    passes on it, with the same result; the others (histograms never
    updated, merged histograms of format version 1, anything suspicious)
    are left to it.
    """
    # version 1 or 2, a newest timestamp; merged (united) histograms in version 2
    ok, buf, starts, lengths = sealed_heads(blobs, L.FAMILY, L.HEAD_BYTES + 1 + _CRC.size,
                                            L.FLAG_SHARED | L.FLAG_TICK | L.FLAG_MERGED)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return ok, None
    window, eps, newest = L.head_fields(buf, starts[idx])
    if compiled.active():
        return _decode_compiled(ok, idx, buf, starts, lengths, window, eps, newest)
    bad, parsed = _decode_payloads(buf, starts[idx], lengths[idx], L.HEAD_BYTES, _CRC.size,
                                   L.version_of(buf, starts[idx]) == L.FORMAT_VERSION, L.flags_of(buf, starts[idx]),
                                   window, eps, newest)
    if bad is None:
        ok[:] = False  # from_bytes names the bad parameter
        return ok, None
    ok[idx[bad]] = False
    return ok, parsed


def _decode_compiled(ok, idx, buf, starts, lengths, window, eps, newest):
    """:func:`_decode_fast`'s payload step by the compiled loop
    (:func:`ehist.compiled.decode_histograms`): one pass per blob, the same
    accepted blobs and fields as :func:`_decode_payloads` (or fewer: the
    rest go to ``from_bytes``)."""
    try:
        w0, l = check_window(int(window[0])), (k_of_eps(check_eps(float(eps[0]))) + 1) // 2
    except ValueError:
        ok[:] = False  # from_bytes names the bad parameter
        return ok, None
    alike = (window == window[0]) & (eps == eps[0])
    ok[idx[~alike]] = False
    sub = idx[alike]
    at = starts[sub]
    flags = L.flags_of(buf, at)
    accepted, counts, exps, hi, lo = compiled.decode_histograms(
        buf, at + L.HEAD_BYTES, at + lengths[sub] - _CRC.size, flags, L.version_of(buf, at) == L.FORMAT_VERSION,
        newest[alike], w0, l)
    ok[sub[~accepted]] = False
    keep = np.flatnonzero(alike)[accepted]
    return ok, _Parsed(window[keep], eps[keep], newest[keep], counts, exps, hi, lo,
                       (flags[accepted] & L.FLAG_MERGED) > 0)


def decode_compact(parts: list, window: int, eps: float, newest: int) -> tuple[np.ndarray, HistogramColumn]:
    """``(accepted mask, column of the accepted)``: histograms stored as
    their flags byte and payload (:mod:`ehist.counters`' compact counters,
    format 2 of the histogram), of one ``window``, ``eps`` and ``newest``
    (the sketch's, checked by its decoder): :func:`decode_compact_flat` of
    the parts joined."""
    lengths = np.fromiter((len(b) for b in parts), dtype=np.int64, count=len(parts))
    return decode_compact_flat(np.frombuffer(b"".join(parts), dtype=np.uint8),
                               np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64), lengths, window, eps,
                               np.full(len(parts), newest, dtype=np.int64))


def decode_compact_flat(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, window: int, eps: float,
                        newest: np.ndarray) -> tuple[np.ndarray, HistogramColumn]:
    """``(accepted mask, column of the accepted)``: compact histograms
    (flags byte and payload) at ``buf[starts[i]:starts[i] + lengths[i]]``,
    of one ``window`` and ``eps``, histogram ``i`` ending at ``newest[i]``
    (its sketch's, checked by the sketch's decoder), decoded as
    :func:`_decode_fast` decodes whole histograms, without rebuilding their
    heads and checksums; the rejected are left to the caller, which
    rebuilds them for ``ExponentialHistogram.from_bytes`` to name what is
    wrong."""
    count = starts.size
    ok, flags = _compact_flags(buf, starts, lengths)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return ok, _assemble(None, window, eps)
    newest = np.asarray(newest, dtype=np.int64)[idx]
    if compiled.active():
        try:
            w0, l = check_window(int(window)), (k_of_eps(check_eps(float(eps))) + 1) // 2
        except ValueError:
            return np.zeros(count, dtype=bool), _assemble(None, window, eps)
        accepted, counts, exps, hi, lo = compiled.decode_histograms(
            buf, starts[idx] + 1, starts[idx] + lengths[idx], flags[idx], np.ones(idx.size, dtype=bool), newest, w0, l)
        ok[idx[~accepted]] = False
        keep = np.flatnonzero(accepted)
        return ok, _assemble(_Parsed(np.full(keep.size, window, dtype=np.int64), np.full(keep.size, eps),
                                     newest[keep], counts, exps, hi, lo, (flags[idx][keep] & L.FLAG_MERGED) > 0),
                             window, eps)
    bad, parsed = _decode_payloads(buf, starts[idx], lengths[idx], 1, 0, np.ones(idx.size, dtype=bool), flags[idx],
                                   np.full(idx.size, window, dtype=np.int64), np.full(idx.size, eps), newest)
    if bad is None:
        return np.zeros(count, dtype=bool), _assemble(None, window, eps)
    ok[idx[bad]] = False
    return ok, _assemble(parsed, window, eps)


def _compact_flags(buf, starts, lengths) -> tuple[np.ndarray, np.ndarray]:
    """``(possible mask, flags)`` of compact histograms: a flags byte with
    "has newest" and known bits, and at least one payload byte."""
    ok = lengths >= 2
    flags = np.zeros(starts.size, dtype=np.uint8)
    flags[ok] = buf[starts[ok]]
    ok &= (flags & ~np.uint8(L.FLAG_SHARED | L.FLAG_TICK | L.FLAG_MERGED)) == L.FLAG_HAS_NEWEST
    return ok, flags


def _decode_payloads(buf, starts, lengths, head: int, tail: int, version_2, flags, window, eps, newest):
    """The vectorized checks and decode of histogram payloads (between a
    ``head`` and a ``tail`` of ``buf``'s blobs at ``starts``), given their
    versions, flags and head fields: ``(bad mask, fields of the good)``, or
    ``(None, None)`` when the first blob's window or eps is invalid."""
    flag = (flags & L.FLAG_SHARED) > 0  # a shared-timestamps bitmap follows the runs
    merged = (flags & L.FLAG_MERGED) > 0  # every bucket's width is stored, not just the oldest's
    t_i = ((flags & L.FLAG_TICK) > 0).astype(np.int64)  # a tick follows the runs
    bad = (window != window[0]) | (eps != eps[0]) | (newest == INT64_MIN)  # check_newest's rule
    try:
        w0, l = check_window(int(window[0])), (k_of_eps(check_eps(float(eps[0]))) + 1) // 2
    except ValueError:
        return None, None
    idx = np.arange(starts.size)
    values, n_vals, v_first, value = payload_varints(buf, starts, lengths, head, bad, tail)
    n = value(v_first, n_vals >= 1)
    n_runs = value(v_first + 1, n_vals >= 2)
    empty = n == 0
    big = _U64(1 << 40)
    sane = (n < big) & (n_runs < big)
    n_i = np.where(sane, n, 0).astype(np.int64)
    r_i = np.where(sane & ~empty, n_runs, 0).astype(np.int64)
    bad |= ~sane | (n_vals < 1)
    m_i = np.where(flag, -(-n_i // L.BITS), 0)  # bitmap words (one-byte varints)
    bad |= empty & ((n_vals != 1) | flag | (t_i > 0) | merged)
    w_i = np.where(merged, n_i, 1)  # widths stored
    # exact value count without a bitmap; with one, enough values for it (n <= 7 per word)
    bad |= ~empty & ((r_i < 1) | (r_i > n_i)
                     | np.where(flag, n_vals < 2 + 2 * r_i + t_i + m_i + w_i,
                                n_vals != 2 + 2 * r_i + t_i + n_i + w_i))
    n_i, r_i, m_i = np.where(bad, 0, n_i), np.where(bad, 0, r_i), np.where(bad, 0, m_i)
    # size runs: (exponent, length) pairs
    run_owner = np.repeat(np.arange(idx.size, dtype=np.int64), r_i)
    run_at = v_first[run_owner] + 2 + 2 * (np.arange(run_owner.size) - np.repeat(np.cumsum(r_i) - r_i, r_i))
    run_exp, run_len = values[run_at], values[run_at + 1]
    bad_run = (run_exp > _U64(L.MAX_EXPONENT)) | (run_len < _U64(1)) | (run_len > big)
    if run_owner.size > 1:  # runs of one exponent are one run (as the writer and from_bytes have them)
        bad_run[1:] |= (run_owner[1:] == run_owner[:-1]) & (run_exp[1:] == run_exp[:-1])
    bad[run_owner[bad_run]] = True
    run_len_i = np.where(bad_run, 0, run_len).astype(np.int64)
    bad |= _segment_sums(run_len_i, np.concatenate([[0], np.cumsum(r_i)])) != n_i
    keep = ~bad[run_owner]
    n_i, r_i = np.where(bad, 0, n_i), np.where(bad, 0, r_i)
    exps = np.repeat(run_exp[keep].astype(np.int8), run_len_i[keep])
    offsets = np.concatenate([[0], np.cumsum(n_i)]).astype(np.int64)
    owner = np.repeat(np.arange(idx.size, dtype=np.int64), n_i)
    local = np.arange(exps.size) - offsets[:-1][owner]
    tick = np.where(t_i > 0, value(v_first + 2 + 2 * r_i, (t_i > 0) & ~bad), _U64(1))
    bad |= tick < _U64(2 - (t_i == 0))  # a tick is at least 2
    tick = np.where(bad, _U64(1), tick)
    body = v_first + 2 + 2 * r_i + t_i  # where the bitmap, or the deltas, start
    shared, stamps = _shared_bits(value, body, flag, n_i, m_i, owner, local, bad)
    bad |= flag & (np.bincount(owner[shared], minlength=idx.size) <= m_i)  # the bitmap must pay
    bad |= flag & (n_vals != 2 + 2 * r_i + t_i + m_i + stamps + w_i)
    stamp_local = np.cumsum(~shared) - 1 - (np.cumsum(stamps) - stamps)[owner]
    deltas = np.where(shared, _U64(0), value(body[owner] + m_i[owner] + stamp_local, ~bad[owner] & ~shared))
    # no zero delta beside a bitmap; without one, fewer zero deltas than it would take
    zero = ~shared & (deltas == 0) & (local > 0)
    bad[owner[zero & flag[owner]]] = True
    bad |= version_2 & ~flag & (np.bincount(owner[zero], minlength=idx.size) > -(-n_i // L.BITS))
    has = n_i > 0
    # per bucket: its width (merged), the oldest's width at the oldest (ordered), else 0
    widths = np.zeros(exps.size, dtype=_U64)
    at_widths = (body + m_i + stamps)[owner]
    per_bucket = merged[owner] & ~bad[owner]
    widths[per_bucket] = value(at_widths[per_bucket] + local[per_bucket], True)
    oldest = offsets[1:][has & ~merged & ~bad] - 1
    widths[oldest] = value(at_widths[oldest], True)
    deltas, widths = _unscale(deltas, widths, tick, owner, ~shared, version_2 & has, bad)
    hi, lo = _timestamps(deltas, widths, newest, offsets, owner, exps, has, merged, w0, bad)
    _check_canonical(exps, offsets, owner, n_i, l, merged, bad)
    good = ~bad
    keep = good[owner]
    return bad, _Parsed(window[good], eps[good], newest[good], n_i[good], exps[keep], hi[keep], lo[keep],
                        merged[good])


def sealed_spans(head: bytes, flags, newest, has_newest, payload: np.ndarray, byte_starts,
                 byte_ends) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sealed_blobs` one after the other, for a writer that puts
    them inside larger blobs (a heavy-hitter sketch's levels): ``(buf,
    offsets)``, blob ``i`` at ``buf[offsets[i]:offsets[i + 1]]``, in one
    compiled pass where the compiled loops run.

    >>> head = bytes([69, 72, 1, 2, 0, 0])
    >>> args = (head, [0, 1], [0, 7], [False, True], np.array([3, 4], dtype=np.uint8), [0, 1], [1, 2])
    >>> split(*sealed_spans(*args)) == sealed_blobs(*args)
    True
    """
    if compiled.active():
        return compiled.seal(head, flags, newest, has_newest, payload, byte_starts, byte_ends, FLAGS_AT)
    blobs = sealed_blobs(head, flags, newest, has_newest, payload, byte_starts, byte_ends)
    return (np.frombuffer(b"".join(blobs), dtype=np.uint8),
            np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64))


def sealed_heads(blobs: list, family: int, min_length: int, v2_flags: int, base_flags: int = 1):
    """(accepted mask, bytes as uint8, starts, lengths): the ``blobs`` (a
    list of bytes or a :class:`~ehist.blobs.Blobs`)
    of at least ``min_length`` bytes with ``family``'s preamble, format
    version 1 or 2, flags ``base_flags`` ("has newest", bit 0, unless told)
    plus, in version 2, any of ``v2_flags``, and a matching checksum.  The
    step every columnar decoder starts with; what it rejects goes to the
    family's from_bytes."""
    if len(blobs) == 0:
        return np.zeros(0, dtype=bool), None, None, None
    col = Blobs.of(blobs)
    return (sealed(col.buf, col.starts, col.lengths, family, min_length, v2_flags, base_flags), col.buf, col.starts,
            col.lengths)


def sealed(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, family: int, min_length: int, v2_flags: int,
           base_flags: int = 1) -> np.ndarray:
    """:func:`sealed_heads` of blobs at ``buf[starts[i]:starts[i] +
    lengths[i]]``: the accepted mask."""
    ok = lengths >= min_length
    head = buf[starts[ok][:, None] + np.arange(PREAMBLE_BYTES)]
    version, flags = head[:, VERSION_AT], head[:, FLAGS_AT]
    version_2 = version == 2
    ok[ok] = ((head[:, MAGIC_AT] == MAGIC[0]) & (head[:, MAGIC_AT + 1] == MAGIC[1]) & (head[:, FAMILY_AT] == family)
              & (version_2 | (version == 1)) & (head[:, FLAGS_AT + 1] == 0)
              & ((flags & ~np.uint8(v2_flags)) == base_flags) & (version_2 | (flags == base_flags)))
    rest = np.flatnonzero(ok)
    if compiled.active():  # in one compiled pass; by the table loop, large blobs by zlib (faster per byte)
        small = rest if compiled.crc_by_zlib() else rest[lengths[rest] < ZLIB_CRC_FROM]
        ok[small] = compiled.crc_matches(buf, starts[small], lengths[small])
        rest = rest[:0] if compiled.crc_by_zlib() else rest[lengths[rest] >= ZLIB_CRC_FROM]
    mv = memoryview(buf)
    crc32 = zlib.crc32
    for i in rest.tolist():
        a, n = int(starts[i]), int(lengths[i])
        if crc32(mv[a:a + n - 4]) != int.from_bytes(mv[a + n - 4:a + n], "little"):
            ok[i] = False
    return ok


def _timestamps(deltas, widths, newest, offsets, owner, exps, has, merged, w0, bad):
    """(hi, lo) per bucket from the (unscaled) deltas and widths (every
    bucket's in a merged histogram, the oldest's in an ordered one).
    Marks ``bad`` the blobs near the int64 edges (from_bytes decides those
    exactly) and those with a bucket outside the window."""
    idx_size = newest.size
    # hi = newest - cumulative deltas; anything near the int64 edges: from_bytes
    with np.errstate(over="ignore"):
        approx = np.cumsum(deltas.astype(np.float64))
    approx -= np.concatenate([[0.0], approx])[offsets[:-1]][owner]
    far = approx >= 2.0**61
    bad[owner[far]] = True
    cum = np.where(far, 0, deltas).astype(np.int64)
    cum = np.cumsum(cum)
    cum -= np.concatenate([[0], cum])[offsets[:-1]][owner]
    room = newest.view(_U64) ^ _U64(1 << 63)  # newest - INT64_MIN, exactly
    bad[owner[cum.astype(_U64) > room[owner]]] = True
    hi = newest[owner] - np.where(bad[owner], 0, cum)
    bad[owner[widths > (hi.view(_U64) ^ _U64(1 << 63))]] = True  # lo = hi - width >= INT64_MIN
    last = offsets[1:][has] - 1
    hi_last = np.zeros(idx_size, dtype=np.int64)
    hi_last[has] = hi[last]
    # every bucket inside the window: newest - hi[-1] < window
    bad |= has & ((newest.view(_U64) - hi_last.view(_U64)) >= _U64(w0))
    # an ordered oldest bucket of size 1 has one unit, at its newest time: width 0 (as from_bytes requires)
    odd_unit = np.zeros(idx_size, dtype=bool)
    odd_unit[has] = (exps[last] == 0) & (widths[last] != 0)
    bad |= odd_unit & ~merged
    lo = np.empty_like(hi)
    if hi.size:
        lo[:-1] = hi[1:]  # an ordered bucket starts where the next older one ends
        united = merged[owner]
        tail = united.copy()  # merged buckets, and ordered oldest ones: hi - width
        tail[last] = True
        lo[tail] = (hi[tail].view(_U64) - np.where(bad[owner[tail]], _U64(0), widths[tail])).view(np.int64)
        unit = (exps == 0) & ~united
        lo[unit] = hi[unit]
    return hi, lo


def _check_canonical(exps, offsets, owner, n_i, l, merged, bad) -> None:
    """Marks ``bad`` the ordered blobs whose bucket sizes are not the
    l-canonical sizes of their total (as ExponentialHistogram.from_bytes
    checks; a merged histogram's sizes are whatever its merge left), and
    any whose total is near int64's edge (from_bytes decides those)."""
    idx_size = n_i.size
    # the l-canonical sizes of the total
    sizes = np.left_shift(np.int64(1), exps.astype(np.int64))
    heavy = np.bincount(owner, weights=sizes.astype(np.float64), minlength=idx_size) >= 2.0**62
    bad |= heavy
    skip = bad | merged
    total = np.where(skip, 0, _segment_sums(np.where(heavy[owner], 0, sizes), offsets))
    want, want_owner = _canonical_exps(total, l)
    bad |= np.bincount(want_owner, minlength=idx_size) != np.where(skip, np.where(bad, -1, 0), n_i)
    same = ~bad & ~merged
    if same.any():
        differ = exps[same[owner]] != want[same[want_owner]]
        bad[owner[same[owner]][differ]] = True


def _unscale(deltas, widths, tick, owner, kept, checked, bad):
    """Deltas and widths times each blob's tick.  Marks ``bad`` the blobs
    whose tick is not the gcd of what they store (``checked``, version 2: a
    tick flag exactly when that gcd is 2 or more) or whose products pass
    2**64."""
    g = np.gcd(segment_gcds(deltas[kept], owner[kept], tick.size), segment_gcds(widths, owner, tick.size))
    bad |= checked & np.where(tick > _U64(1), g != _U64(1), g >= _U64(2))
    limit = (np.iinfo(np.uint64).max // tick)[owner]
    bad[owner[(deltas > limit) | (widths > limit)]] = True
    return deltas * tick[owner], widths * tick[owner]


def _shared_bits(value, body, flag, n_i, m_i, owner, local, bad):
    """Read the shared-timestamps bitmaps of the blobs that have one: (per
    bucket: shares the previous bucket's timestamp; per blob: timestamps
    stored).  Marks ``bad`` the blobs whose bitmap words are not below 128
    or whose padding or first bit is set."""
    has_map = flag[owner] & ~bad[owner]
    word = value(body[owner] + local // L.BITS, has_map)
    shared = has_map & (((word >> (local % L.BITS).astype(_U64)) & _U64(1)) == _U64(1))
    map_owner = np.repeat(np.arange(n_i.size, dtype=np.int64), m_i)
    map_local = np.arange(map_owner.size) - np.repeat(np.cumsum(m_i) - m_i, m_i)
    words = value(body[map_owner] + map_local, ~bad[map_owner])
    used = np.minimum(n_i[map_owner] - L.BITS * map_local, L.BITS).astype(_U64)
    bad[map_owner[(words >= _U64(1 << L.BITS)) | ((words >> used) != _U64(0))]] = True
    bad[owner[shared & (local == 0)]] = True
    return shared, n_i - np.bincount(owner[shared], minlength=n_i.size)


def _assemble(parsed: _Parsed | None, window: int, eps: float) -> HistogramColumn:
    if parsed is None or parsed.size == 0:
        return HistogramColumn(window, eps, [0], [], [], [], [], [], [])
    if int(parsed.window[0]) != window or float(parsed.eps[0]) != eps:
        raise IncompatibleSketchError(
            f"a column holds histograms of one window and eps: ({window}, {eps}) and "
            f"({int(parsed.window[0])}, {float(parsed.eps[0])})")
    offsets = np.concatenate([[0], np.cumsum(parsed.counts)]).astype(np.int64)
    return HistogramColumn(window, eps, offsets, parsed.exps, parsed.hi, parsed.lo, parsed.newest,
                           np.ones(parsed.size, dtype=bool), parsed.merged)
