"""Many ECM-sketches and heavy-hitter sketches at once: decode, unite, encode.

A stored table of :class:`~frequencies.SlidingCountMin` or
:class:`~frequencies.SlidingHeavyHitters` sketches (one per key and site)
is rolled up by uniting each key's sketches.  One key at a time that is a
``from_bytes``, a ``merge_all`` and a ``to_bytes`` per sketch, each a few
dozen numpy calls over a sketch's hundred-odd counters (the heavy hitters'
eight levels eight times that): milliseconds per key.
:class:`CountMinColumn` holds many sketches of one parameter set as their
heads and one :class:`~ehist.keyed_counters.KeyedCounters` of every
counter, and :class:`HeavyHittersColumn` the levels of many heavy-hitter
sketches as one :class:`CountMinColumn`, so that each step runs once for
all of them.  Sketches of sparse keys keep their rows (the rows form): both
columns carry them beside the counters (:class:`~frequencies.rows.Rows`),
build, read, unite, answer and write them in numpy passes of their own,
and give a group that mixes both forms the counters its rows build.

Contract (``tests/test_frequencies_columnar.py``, under both engines of
:mod:`ehist.compiled`): ``from_bytes(blobs).to_bytes() == blobs`` for
sketches of one parameter set, and ``from_bytes(blobs).union(starts)``
is, byte for byte, ``merge_all`` of each group's sketches in order (the
per-key union raises where it raises).  What the vectorized checks leave
out (corrupt bytes, version 1, sketches never updated, totals near int64)
goes through the family's ``from_bytes`` / ``merge_all``.

Examples
--------
>>> import numpy as np
>>> from frequencies import SlidingCountMin
>>> parts = [SlidingCountMin(100, eps=0.1).update(np.arange(p, 90, 3), np.arange(p, 90, 3) % 7)
...          for p in range(3)]
>>> col = CountMinColumn.from_bytes([s.to_bytes() for s in parts])
>>> col.union([0]).to_bytes() == [SlidingCountMin.merge_all(parts).to_bytes()]
True
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

import numpy as np

from ehist import compiled
from ehist.counters import empty, settle
from ehist.flat_rows import union_groups
from ehist.errors import CorruptSketchError, SumOverflowError
from ehist.validation import INT64_MIN
from ehist.columnar import region_varints, sealed, sealed_blobs, sealed_heads, sealed_spans
from ehist.hashing import as_hashes
from ehist.keyed_counters import KeyedColumn, KeyedCounters
from ehist.serialization import FAMILIES, MAGIC, varint_stream
from ehist.segments import gather, groups_checked, ranges, search_segments

from . import count_min as _cm
from . import heavy_hitters as _hh
from .count_min import SlidingCountMin
from .heavy_hitters import SlidingHeavyHitters, levels_of
from .rows import Rows, cutoffs, rows_sealed

__all__ = ["CountMinColumn", "HeavyHittersColumn", "Hitters"]

_ECM_HEAD = struct.Struct(_cm.LAYOUT.head.format + "q")  # preamble, parameters, newest
_ECM_FIELDS = np.dtype([("window", "<i8"), ("eps", "<f8"), ("delta", "<f8"), ("eh_eps", "<f8"), ("seed", "<u8"),
                        ("newest", "<i8")])
_ECM_PARAMS_AT = 6
_VERSION_AT, _FLAGS_AT = 3, 4
_HH_HEAD = _hh.LAYOUT.head
_HH_ROWS_HEAD = struct.Struct(_HH_HEAD.format + _hh.ROWS_PARAMETERS)  # preamble, bits, level bits, params, newest
_HH_ROWS_FIELDS = np.dtype([("preamble", "V6"), ("bits", "u1"), ("level_bits", "u1"), ("window", "<i8"),
                            ("eps", "<f8"), ("delta", "<f8"), ("eh_eps", "<f8"), ("seed", "<u8"), ("newest", "<i8")])
_CRC = struct.Struct("<I")


def _head_fields(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The parameters and newest time (:data:`_ECM_FIELDS`) of the
    ECM-sketches at ``starts``, one span copy each."""
    at = np.asarray(starts, dtype=np.int64) + _ECM_PARAMS_AT
    return np.frombuffer(gather(buf, at, at + _ECM_FIELDS.itemsize), dtype=_ECM_FIELDS)


class Hitters(NamedTuple):
    """Many groups' heavy hitters, flat: group ``g``'s at
    ``offsets[g]:offsets[g + 1]``, largest estimate first (ties: smaller
    item first), as :meth:`lists` gives them, without a Python object per
    item (``flat=True`` of :meth:`HeavyHittersColumn.heavy_hitters` and
    its byte-level forms: what a Spark column of lists is built from).

    >>> h = Hitters.of(3, np.array([2, 0, 2]), np.array([5, 9, 7], dtype=np.uint64), np.array([1.0, 4.0, 3.0]),
    ...                np.array([1, 4, 3]), np.array([1, 4, 3]))
    >>> h.offsets.tolist(), [[x.item for x in hs] for hs in h.lists()]
    ([0, 1, 1, 3], [[9], [], [7, 5]])
    """

    offsets: np.ndarray
    item: np.ndarray
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, groups: int, cg, cand, est, lower, upper) -> "Hitters":
        """From each hitter's group, id, estimate and bounds, in any order."""
        order = np.lexsort((cand, -est, cg))
        offsets = np.concatenate([[0], np.cumsum(np.bincount(cg, minlength=groups))]).astype(np.int64)
        return cls(offsets, np.asarray(cand, dtype=np.uint64)[order], np.asarray(est, dtype=np.float64)[order],
                   np.asarray(lower, dtype=np.int64)[order], np.asarray(upper, dtype=np.int64)[order])

    @classmethod
    def of_lists(cls, lists: list) -> "Hitters":
        """From lists of :class:`~frequencies.heavy_hitters.HeavyHitter` (in order)."""
        flat = [h for hs in lists for h in hs]
        offsets = np.concatenate([[0], np.cumsum([len(hs) for hs in lists])]).astype(np.int64)
        return cls(offsets, np.array([h.item for h in flat], dtype=np.uint64),
                   np.array([h.estimate for h in flat], dtype=np.float64),
                   np.array([h.lower for h in flat], dtype=np.int64), np.array([h.upper for h in flat], dtype=np.int64))

    def lists(self) -> list:
        """Each group's list of :class:`~frequencies.heavy_hitters.HeavyHitter`."""
        from .heavy_hitters import HeavyHitter

        hitters = [HeavyHitter(*h) for h in zip(self.item.tolist(), self.estimate.tolist(), self.lower.tolist(),
                                                 self.upper.tolist())]
        bounds = self.offsets.tolist()
        return [hitters[a:z] for a, z in zip(bounds[:-1], bounds[1:])]


class CountMinColumn(KeyedColumn):
    """Many :class:`~frequencies.SlidingCountMin` sketches of one parameter
    set (``params``: window, eps, delta, eh_eps, seed), their counters flat
    (``counters``: sketch ``i``'s keys and histograms, newest time) and the
    rows of those in the rows form (``rows``, a :class:`~frequencies.rows.Rows`,
    and ``form``: which sketches are in it; ``rows`` None: every sketch
    holds counters, as the heavy hitters' levels do)."""

    __slots__ = ("params", "counters", "rows", "form", "_width", "_size")
    sketch_type = SlidingCountMin
    store = "counters"

    def __init__(self, params: tuple, counters: KeyedCounters, rows: Rows | None = None, form=None):
        self.params = tuple(params)
        self.counters = counters
        self.rows = rows
        self.form = np.zeros(len(counters), dtype=bool) if form is None else np.asarray(form, dtype=bool)
        probe = SlidingCountMin(*self.params)
        self._width, self._size = probe.width, probe.counters

    @property
    def _any_rows(self) -> bool:
        """Whether a sketch is in the rows form."""
        return self.rows is not None and bool(self.form.any())

    def _times(self, now) -> np.ndarray:
        """Each sketch's query time: ``now`` (one, or one per sketch) or its newest."""
        c = self.counters
        return c.newest if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), (len(c),))

    @classmethod
    def from_sketches(cls, sketches: list) -> "CountMinColumn":
        """A column of sketch objects (one parameter set)."""
        first = sketches[0]
        for s in sketches[1:]:
            first._check_compatible(s)
        form = np.array([s._rows is not None for s in sketches], dtype=bool)
        rows = Rows.of([s._rows if s._rows is not None and s.newest is not None else None for s in sketches])
        return cls(first._params(), KeyedCounters.of_sketches(sketches), rows, form)

    @classmethod
    def _placed(cls, params: tuple, parts: list) -> "CountMinColumn":
        """One column of ``parts`` (``(column, positions)`` each; together
        every position once), in the positions' order."""
        parts, position = _positions(parts)
        if position is None:
            return parts[0][0]
        counters = KeyedCounters.concat([c.counters for c, _ in parts])
        rows = Rows.concat([c.rows if c.rows is not None else Rows.empty(len(c)) for c, _ in parts])
        form = np.concatenate([c.form for c, _ in parts])
        return cls(params, counters, rows, form).take(position)

    def take(self, indices) -> "CountMinColumn":
        """The sketches at ``indices``, in that order (``self`` when they
        are all of them in order)."""
        idx = np.asarray(indices, dtype=np.int64)
        taken = self.counters.take(idx)
        if taken is self.counters:
            return self
        return CountMinColumn(self.params, taken, None if self.rows is None else self.rows.take(idx), self.form[idx])

    def __getitem__(self, i: int) -> SlidingCountMin:
        i = range(len(self))[i]
        if self.rows is not None and self.form[i]:
            s = SlidingCountMin(*self.params)
            if self.counters.has_newest[i]:
                s._rows, s._newest = self.rows.sketch(i), int(self.counters.newest[i])
            return s
        s = super().__getitem__(i)
        s._rows = None  # counters, even a sketch never updated
        return s

    # ------------------------------------------------------------ building
    @classmethod
    def build(cls, timestamps, starts, hashes, values, params: tuple, rows: bool = True) -> "CountMinColumn":
        """One sketch per run of rows (``starts``: where each run begins,
        rows sorted by time within a run; items already hashed with the
        sketches' seed; ``values`` None for ones), as
        ``SlidingCountMin(*params).update_hashes(run_ts, run_hashes,
        run_values)`` builds it: each run's rows older than its newest less
        the window left out, a run of at most ``width`` rows left in the
        rows form (:meth:`~frequencies.rows.Rows.canonical`), every other
        (run, counter)'s histogram built from its canonical rows in one
        :meth:`~ehist.columnar.HistogramColumn.build`, then settled at the
        run's newest.  A run whose total may pass int64, or rows ``update``
        would refuse, go through ``update_hashes`` itself (its message).
        ``rows`` False: every run takes counters from its rows as they are
        (the heavy hitters' levels, which hold counters from the start)."""
        from ehist.columnar import HistogramColumn
        from ehist.counters import radix_key, settle

        from .count_min import counter_ids

        from ehist.columnar import check_starts
        from ehist.hashing import as_hashes
        from ehist.validation import coerce_times

        probe = SlidingCountMin(*params)
        ts = coerce_times(timestamps)
        h = as_hashes(hashes)
        v = None if values is None else np.asarray(values)
        if h.shape != ts.shape or (v is not None and v.shape != ts.shape):
            raise ValueError(f"timestamps, hashes and values have different lengths ({ts.size}, {h.size} and "
                             f"{ts.size if v is None else v.size})")
        starts = check_starts(starts, ts.size)
        runs = starts.size
        lengths = np.diff(np.append(starts, ts.size))
        run = np.repeat(np.arange(runs, dtype=np.int64), lengths)
        bad = ts.size and (int(ts.min()) == INT64_MIN or np.any((ts[1:] < ts[:-1]) & (run[1:] == run[:-1])))
        if v is not None:
            bad = bad or v.dtype.kind not in "iu" or (v.size and (v.min() < 0 or v.max() >= 2**62))
        if not bad and v is not None and v.size:  # a run's total near int64: update decides
            bad = np.bincount(run, weights=v.astype(np.float64), minlength=runs).max() >= 2.0 ** 62
        if bad:
            ends = np.append(starts[1:], ts.size)
            fresh = (lambda: SlidingCountMin(*params)) if rows else (lambda: SlidingCountMin(*params)._counters_only())
            return cls.from_sketches([fresh().update_hashes(ts[a:b], h[a:b], None if v is None else v[a:b])
                                      for a, b in zip(starts.tolist(), ends.tolist())])
        v = None if v is None else v.astype(np.int64)
        has = lengths > 0
        newest = np.zeros(runs, dtype=np.int64)
        newest[has] = ts[np.append(starts[1:], ts.size)[has] - 1]
        window = probe.window
        everything = newest[run] < INT64_MIN + window  # a cutoff below int64: every row stays
        keep = everything | (ts > np.where(everything, INT64_MIN, newest[run] - np.where(everything, 0, window)))
        ts, h, run = ts[keep], h[keep], run[keep]
        v = None if v is None else v[keep]
        held, form = None, None
        if rows:
            held, form, (ts, h, run, v) = _split_runs(run, ts, h, v, newest, window, runs, probe.width)
        depth = probe.counters // probe.width
        ids = counter_ids(h, probe.width, depth).T.ravel()  # each row's counters, row by row
        row_run = np.repeat(run, depth)
        # stable: time order within a (run, counter); one key in the narrowest type, not lexsort's two passes
        order = np.argsort(radix_key(row_run * probe.counters + ids, runs * probe.counters), kind="stable")
        ids, row_run = ids[order], row_run[order]
        t_all = np.repeat(ts, depth)[order]
        v_all = None if v is None else np.repeat(v, depth)[order]
        first = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (row_run[1:] != row_run[:-1])]) if ids.size \
            else np.zeros(0, dtype=np.int64)
        col = HistogramColumn.build(t_all, first, v_all, window=window, eps=probe.eh_eps)
        counter_run = row_run[first]
        col = settle(col, window, newest[counter_run])
        kept = np.flatnonzero(np.diff(col.offsets) > 0)
        counts = np.bincount(counter_run[kept], minlength=runs)
        counters = KeyedCounters(np.concatenate([[0], np.cumsum(counts)]), ids[first][kept], col.take(kept),
                                 np.where(has, newest, 0), has)
        return cls(probe._params(), counters, held, None if held is None else form)

    # ------------------------------------------------------------ decoding
    @classmethod
    def from_bytes(cls, blobs: list) -> "CountMinColumn | None":
        """Decode many :meth:`SlidingCountMin.to_bytes` outputs (None when
        they hold different parameters: the per-sketch merge refuses
        those); raises what ``SlidingCountMin.from_bytes`` raises, for the
        first blob it rejects."""
        if not blobs:
            return None
        ok, buf, starts, lengths = sealed_heads(blobs, FAMILIES["SlidingCountMin"], _ECM_HEAD.size + 1 + _CRC.size, 0)
        return cls._decode(buf, starts, lengths, ok)

    @classmethod
    def _decode(cls, buf, starts, lengths, ok, rows: bool = True, in_rows=None) -> "CountMinColumn | None":
        """The column of the blobs ``buf[starts[i]:starts[i] + lengths[i]]``
        (``ok``: :func:`~ehist.columnar.sealed` accepted them), counters
        and, where ``rows``, the rows form (else a blob in it raises, as
        the heavy hitters' levels hold counters; ``in_rows``: which blobs
        :func:`~frequencies.rows.rows_sealed` accepted, when known)."""
        ok = ok & (buf[starts + _VERSION_AT] == _cm.LAYOUT.version) if starts.size else ok
        if in_rows is None:
            in_rows = rows_sealed(buf, starts, lengths) & ~ok if rows and starts.size else np.zeros(starts.size, bool)
        in_rows = in_rows.copy()
        idx = np.flatnonzero(ok | in_rows)
        params = None
        fast = []
        if idx.size:
            fields = _head_fields(buf, starts[idx])
            first = fields[0]
            params = (int(first["window"]), float(first["eps"]), float(first["delta"]), float(first["eh_eps"]),
                      int(first["seed"]))
            alike = ((fields["window"] == first["window"]) & (fields["eps"] == first["eps"])
                     & (fields["delta"] == first["delta"]) & (fields["eh_eps"] == first["eh_eps"])
                     & (fields["seed"] == first["seed"]))
            try:
                probe = SlidingCountMin(*params)
            except ValueError:
                alike[:] = False  # from_bytes names the bad parameter
                params = None
            keep = alike & (fields["newest"] != INT64_MIN)
            ok[idx[~keep]] = False
            in_rows[idx[~keep]] = False
            newest_of = np.zeros(starts.size, dtype=np.int64)
            newest_of[idx] = fields["newest"]
            idx = np.flatnonzero(ok)
            if idx.size:
                read, counters = KeyedCounters.read(buf, starts[idx] + _ECM_HEAD.size,
                                                    starts[idx] + lengths[idx] - 4, probe.counters, params[0],
                                                    probe.eh_eps, newest_of[idx])
                ok[idx[~read]] = False
                # a row-0 total near int64: from_bytes decides it exactly
                heavy = _row_units(counters, probe.width) >= 2.0 ** 62
                if heavy.any():
                    ok[idx[read][heavy]] = False
                    counters = counters.take(np.flatnonzero(~heavy))
                fast.append((cls(params, counters, Rows.empty(len(counters)) if rows else None), np.flatnonzero(ok)))
            r_idx = np.flatnonzero(in_rows)
            if r_idx.size:
                valued = (buf[starts[r_idx] + _FLAGS_AT] & _cm.FLAG_VALUES) != 0
                good, held = Rows.read(buf, starts[r_idx], lengths[r_idx], newest_of[r_idx], valued, probe.width,
                                       params[0])
                in_rows[r_idx[~good]] = False
                held = held.take(np.flatnonzero(good))
                k = len(held)
                none = KeyedCounters(np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                     empty(params[0], probe.eh_eps, 0), newest_of[r_idx[good]], np.ones(k, bool))
                fast.append((cls(params, none, held, np.ones(k, dtype=bool)), r_idx[good]))
        slow = np.flatnonzero(~(ok | in_rows))
        if slow.size:
            sketches = [SlidingCountMin.from_bytes(bytes(buf[starts[i]:starts[i] + lengths[i]]))
                        for i in slow.tolist()]
            if not rows and any(s._rows is not None and s.newest is not None for s in sketches):
                raise CorruptSketchError("SlidingCountMin: expected counters, found a sketch in the rows form")
            if params is None:
                params = sketches[0]._params()
            if any(s._params() != params for s in sketches):
                return None
            part = cls.from_sketches(sketches)
            if not rows:
                part = cls(params, part.counters)
            fast.append((part, slow))
        if not fast:
            return None
        return cls._placed(params, fast) if rows else cls(params, cls._placed(params, fast).counters)

    # -------------------------------------------------------------- union
    def union(self, group_starts) -> "CountMinColumn":
        """Each group's :meth:`SlidingCountMin.merge_all` (group ``i``:
        sketches ``group_starts[i]`` to the next start, in order), every
        counter of every group in one
        :meth:`~ehist.keyed_counters.KeyedCounters.unite`; a group whose
        window total comes near int64 by ``merge_all`` itself (which raises
        SumOverflowError past it).  Groups whose live sketches are all in
        the rows form unite their rows (:meth:`~frequencies.rows.Rows.canonical`
        at the group's newest) and stay in it while those fit; in the
        other groups, a live sketch in the rows form takes its counters
        first (:meth:`_densified`)."""
        if not self._any_rows:
            united = self._united(group_starts, _row_units(self.counters, self._width))
            return CountMinColumn(self.params, united, None if self.rows is None else Rows.empty(len(united)))
        starts = np.asarray(group_starts, dtype=np.int64)
        c, n, groups = self.counters, len(self), starts.size
        live = c.has_newest
        group_of, lone, pick, rows_only = union_groups(starts, n, live, self.form)
        g_newest = _group_times(group_of, groups, live, c.newest, None)
        # the rows of groups of rows alone, united
        units = np.bincount(self.rows.owner, weights=self.rows.values.astype(np.float64), minlength=n)
        rough = np.bincount(group_of, weights=units + _row_units(c, self._width), minlength=groups)
        heavy = rough >= 2.0 ** 62  # near int64: merge_all itself decides (and raises past it)
        candidate = ~lone & rows_only & ~heavy
        members = np.flatnonzero(candidate[group_of])
        part = self.rows.take(members)
        united = Rows.canonical(group_of[members][part.owner], part.ts, part.hashes, part.values, g_newest,
                                self.params[0], groups)
        in_rows = ((lone & self.form[pick]) | (candidate & (united.counts <= self._width))) & ~heavy
        # the others: counters, the rows form's live sketches among them taking theirs first
        to_counters = np.flatnonzero(self.form & live & ~in_rows[group_of] & ~heavy[group_of])
        plain = c
        if to_counters.size:
            rest = np.setdiff1d(np.arange(n), to_counters)
            plain = KeyedCounters.placed(c.take(rest), rest, self._densified(to_counters).counters, to_counters)
        merged = CountMinColumn(self.params, plain)._united(starts, np.zeros(n))
        # each group's rows: a lone sketch's own, or the union's
        held = Rows.concat([self.rows.take(pick), united]).take(np.where(lone, 0, groups) + np.arange(groups))
        held = Rows.concat([held.take(np.flatnonzero(in_rows)), Rows.empty(int((~in_rows).sum()))]).take(
            np.argsort(np.r_[np.flatnonzero(in_rows), np.flatnonzero(~in_rows)], kind="stable"))
        light = np.flatnonzero(~heavy)
        parts = [(CountMinColumn(self.params, merged, held, in_rows).take(light), light)]
        if heavy.any():  # the sketches' own merge_all
            ends = np.append(starts[1:], n)
            exact = [SlidingCountMin.merge_all([self[i] for i in range(int(starts[g]), int(ends[g]))])
                     for g in np.flatnonzero(heavy).tolist()]
            parts.append((CountMinColumn.from_sketches(exact), np.flatnonzero(heavy)))
        return CountMinColumn._placed(self.params, parts)

    def _densified(self, indices) -> "CountMinColumn":
        """The sketches at ``indices`` (in the rows form, updated) in the
        counter form: each one's :meth:`SlidingCountMin._as_counters`, the
        histograms of all of them built in one pass."""
        idx = np.asarray(indices, dtype=np.int64)
        part = self.rows.take(idx)
        owner = part.owner
        newest = self.counters.newest[idx]
        built = CountMinColumn.build(part.ts, np.searchsorted(owner, np.arange(idx.size)), part.hashes,
                                     None if bool((part.values == 1).all()) else part.values, self.params, rows=False)
        return built.settled(newest)

    def settled(self, newest, has=None) -> "CountMinColumn":
        """The sketches advanced to ``newest`` (one time per sketch, none
        before its newest): each counter's buckets out of the window
        dropped, counters left empty dropped, every sketch's newest set
        (``has``: which sketches have one; default all)."""
        c = self.counters
        newest = np.asarray(newest, dtype=np.int64)
        has = np.ones(len(c), dtype=bool) if has is None else np.asarray(has, dtype=bool)
        col = settle(c.col, self.params[0], newest[c.owner])
        kept = np.flatnonzero(np.diff(col.offsets) > 0)
        counts = np.bincount(c.owner[kept], minlength=len(c))
        return CountMinColumn(self.params, KeyedCounters(np.concatenate([[0], np.cumsum(counts)]), c.keys[kept],
                                                         col.take(kept), np.where(has, newest, 0), has),
                              self.rows, self.form)

    # ------------------------------------------------------------- answers
    def bounds(self, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every sketch's :meth:`SlidingCountMin.bounds` (int64 arrays):
        ``now`` None (each sketch's newest) or one time per sketch, never
        earlier than its newest; a sketch never updated, ``(0, 0)``."""
        n = len(self)
        lo, up = self._counter_bounds(now, window)
        c = self.counters
        depth = self._size // self._width
        lower, upper, _ = _row_sums(lo, up, c.owner * depth + c.keys // self._width, n * depth)
        lower, upper = lower.reshape(n, depth).max(axis=1), upper.reshape(n, depth).min(axis=1)
        if self._any_rows:  # the rows form: exact
            exact = self.rows.totals(self._times(now), self._window_of(window))
            lower, upper = np.where(self.form, exact, lower), np.where(self.form, exact, upper)
        return lower, upper

    def _window_of(self, window) -> int:
        return self.params[0] if window is None else int(window)

    def frequencies_of_hashes(self, hashes, now=None, window: int | None = None):
        """Each sketch's :meth:`SlidingCountMin.frequencies_of_hashes` of
        one item (``hashes[i]``, a ``hash64`` value, for sketch ``i``):
        ``(estimate, lower, upper)`` arrays, the same numbers, every
        sketch's counters bounded in one pass (``now``: None or one time
        per sketch, as :meth:`bounds` takes it).

        >>> from ehist.hashing import hash64
        >>> a = SlidingCountMin(100, eps=0.05).update([1, 2, 3], ["x", "x", "y"])
        >>> b = SlidingCountMin(100, eps=0.05).update([4], ["x"])
        >>> col = CountMinColumn.from_sketches([a, b])
        >>> h = hash64(np.array(["x", "x"]), 0)
        >>> est, lower, upper = col.frequencies_of_hashes(h)
        >>> est.tolist(), [a.frequency("x"), b.frequency("x")]
        ([2.0, 1.0], [2.0, 1.0])
        """
        n = len(self)
        h = as_hashes(hashes)
        if h.shape != (n,):
            raise ValueError(f"frequencies_of_hashes takes one hash per sketch ({n}), got shape {h.shape}")
        lo, up = self._counter_bounds(now, window)
        c = self.counters
        depth = self._size // self._width
        _, row_upper, wide = _row_sums(lo, up, c.owner * depth + c.keys // self._width, n * depth)
        total = row_upper.reshape(n, depth).min(axis=1) if n else row_upper
        # each (sketch, row)'s counter of the item, among the held ones (keys ascending within a sketch)
        held = c.owner * self._size + c.keys
        want = np.arange(n, dtype=np.int64)[None, :] * self._size + _cm.counter_ids(h, self._width, depth)
        at = np.minimum(np.searchsorted(held, want), max(held.size - 1, 0))
        found = (held[at] == want) if held.size else np.zeros(want.shape, dtype=bool)
        low, high = np.where(found, lo[at] if held.size else 0, 0), np.where(found, up[at] if held.size else 0, 0)
        estimate = (low * 0.5 + high * 0.5).min(axis=0)
        slack = np.ceil(self.params[1] * total.astype(np.float64)).astype(np.int64)
        lower, upper = np.maximum(low.min(axis=0) - slack, 0), high.min(axis=0)
        if self._any_rows:  # the rows form: exact
            exact = self.rows.frequencies(h, self._times(now), self._window_of(window))
            estimate = np.where(self.form, exact.astype(np.float64), estimate)
            lower, upper = np.where(self.form, exact, lower), np.where(self.form, exact, upper)
        near = np.flatnonzero(wide.reshape(n, depth).max(axis=1) >= 2.0 ** 62) if n else wide[:0].astype(np.int64)
        for i in near.tolist():  # totals near int64: the sketch's own arithmetic
            at_i = None if now is None else int(np.broadcast_to(np.asarray(now, dtype=np.int64), (n,))[i])
            e, lw, up_i = self[i].frequencies_of_hashes(h[i:i + 1], at_i, window)
            estimate[i], lower[i], upper[i] = e[0], lw[0], up_i[0]
        return estimate, lower, upper

    def union_frequencies_of_hashes(self, group_starts, hashes, now=None, window: int | None = None):
        """Each group's frequency of one item (``hashes[g]`` for group
        ``g``: sketches ``group_starts[g]`` to the next start) without
        merging them: :meth:`SlidingCountMin.union_frequencies_of_hashes`
        as of ``now`` (one time per group; default: the group's newest),
        the same numbers; a group whose sums come near int64 through that
        method (which raises SumOverflowError past it).

        >>> from ehist.hashing import hash64
        >>> a = SlidingCountMin(10).update([1, 2], ["x", "y"])
        >>> b = SlidingCountMin(10).update([2, 3], ["x", "x"])
        >>> est, lower, upper = CountMinColumn.from_sketches([a, b]).union_frequencies_of_hashes([0], hash64(["x"], 0))
        >>> est.tolist(), upper.tolist()
        ([3.0], [3])
        """
        starts = np.asarray(group_starts, dtype=np.int64)
        h = as_hashes(hashes)
        if h.shape != starts.shape:
            raise ValueError(f"union_frequencies_of_hashes takes one hash per group ({starts.size}), got {h.shape}")
        c = self.counters
        groups, n = starts.size, len(c)
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, n)))
        group_now = _group_times(group_of, groups, c.has_newest, c.newest, now)
        at = np.where(c.has_newest, group_now[group_of], c.newest)
        lo, up = self._counter_bounds(at, window)
        exact_g = np.zeros(groups, dtype=bool)
        if self._any_rows:  # groups of the rows form alone: their rows, exact
            exact_g = np.bincount(group_of[c.has_newest & ~self.form], minlength=groups) == 0
        if exact_g.all():
            estimate, lower, upper = (np.zeros(groups), np.zeros(groups, np.int64), np.zeros(groups, np.int64))
            near = np.zeros(groups, dtype=bool)
        else:
            owner, keys = c.owner, c.keys
            if self._any_rows:  # the rows form's exact counters beside the others, in the groups of both
                mixed = np.flatnonzero(~exact_g[group_of] & self.form)
                owner, keys, lo, up = self.take(mixed)._with_row_counters(owner, keys, lo, up, at[mixed], window,
                                                                          mixed)
            estimate, lower, upper, near = _item_frequencies(self.params[1], self._width, self._size, owner, keys, lo,
                                                             up, group_of, groups, h)
        if exact_g.any():
            found = self.rows.frequencies(h[group_of], at, self._window_of(window))
            sums = np.zeros(groups, dtype=np.int64)
            np.add.at(sums, group_of, found)
            near |= exact_g & (np.bincount(group_of, weights=found.astype(np.float64), minlength=groups) >= 2.0 ** 62)
            estimate = np.where(exact_g, sums.astype(np.float64), estimate)
            lower, upper = np.where(exact_g, sums, lower), np.where(exact_g, sums, upper)
        if near.any():  # sums near int64: the class's own arithmetic, and its error past it
            ends = np.append(starts[1:], n)
            for g in np.flatnonzero(near).tolist():
                parts = [self[i] for i in range(int(starts[g]), int(ends[g]))]
                at_g = None if now is None else int(group_now[g])
                e, lw, u = SlidingCountMin.union_frequencies_of_hashes(parts, h[g:g + 1], at_g, window)
                estimate[g], lower[g], upper[g] = e[0], lw[0], u[0]
        return estimate, lower, upper

    @classmethod
    def frequencies_of_bytes(cls, blobs, hashes_of, group_starts=None, now=None, window: int | None = None):
        """``from_bytes(blobs).union_frequencies_of_hashes(group_starts,
        hashes_of(seed), now, window)`` (groups of one sketch each without
        ``group_starts``: :meth:`frequencies_of_hashes`, the same numbers),
        every counter bounded as it is decoded, in one compiled pass
        (:meth:`~ehist.keyed_counters.KeyedCounters.read_bounds`: no
        counter's histogram built, where building them took half of
        answering).  ``hashes_of(seed)``: one ``hash64`` value per group for
        the sketches' seed.  None where the column must decide instead (no
        numba, sketches the checks refuse or never updated, parameters that
        differ, a query late or too wide, sums near int64: it raises what
        is wrong).  ValueError for group starts that do not start at 0 and
        rise strictly, or ``hashes_of`` giving other than one hash per group.

        >>> from ehist.hashing import hash64
        >>> a = SlidingCountMin(10).update([1, 2], ["x", "y"])
        >>> b = SlidingCountMin(10).update([2, 3], ["x", "x"])
        >>> got = CountMinColumn.frequencies_of_bytes([a.to_bytes(), b.to_bytes()], lambda seed: hash64(["x"], seed), [0])
        >>> got is None or got[0].tolist() == [3.0]     # None without numba
        True
        """
        if group_starts is not None:
            groups_checked(group_starts, len(blobs))
        if not (compiled.active() and len(blobs)):
            return None
        ok, buf, starts, lengths = sealed_heads(blobs, FAMILIES["SlidingCountMin"], _ECM_HEAD.size + 1 + _CRC.size, 0)
        n = starts.size
        starts_g = np.arange(n, dtype=np.int64) if group_starts is None else groups_checked(group_starts, n)
        if not ok.all():
            in_rows = rows_sealed(buf, starts, lengths) & ~ok
            if not (ok | in_rows).all():
                return None
            # sketches in the rows form: the column's answers (their rows decode in a pass as cheap as this one)
            fields = _head_fields(buf, starts)
            newest = fields["newest"].astype(np.int64)
            groups = starts_g.size
            group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts_g, n)))
            at = _group_times(group_of, groups, np.ones(n, dtype=bool), newest, now)[group_of]
            full = int(fields["window"][0])
            if (at < newest).any() or (window is not None and (isinstance(window, (bool, np.bool_)) or not isinstance(
                    window, (int, np.integer)) or not 1 <= int(window) <= full)):
                return None  # the column raises what is wrong
            column = cls._decode(buf, starts, lengths, ok, in_rows=in_rows)
            if column is None:
                return None
            h = as_hashes(hashes_of(column.params[4]))
            if h.shape != (starts_g.size,):
                raise ValueError(f"hashes_of must give one hash per group ({starts_g.size}), got shape {h.shape}")
            return column.union_frequencies_of_hashes(starts_g, h, now, window) if group_starts is not None \
                else column.frequencies_of_hashes(h, now, window)
        groups = starts_g.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts_g, n)))
        got = _ecm_bounds_of_bytes(buf, starts, lengths, window, lambda newest: _group_times(
            group_of, groups, np.ones(n, dtype=bool), newest, now)[group_of])
        if got is None:
            return None
        params, width, size, owner, keys, lo, up = got
        h = as_hashes(hashes_of(params[4]))
        if h.shape != (groups,):
            raise ValueError(f"hashes_of must give one hash per group ({groups}), got shape {h.shape}")
        estimate, lower, upper, near = _item_frequencies(params[1], width, size, owner, keys, lo, up, group_of, groups,
                                                         h)
        return None if near.any() else (estimate, lower, upper)

    def _with_row_counters(self, owner, keys, lo, up, at, window, sketches=None):
        """``(owner, keys, lower, upper)`` of counters (``owner``: their
        sketches) and of the exact counters of this column's rows in the
        window as of ``at`` (one time per sketch), sorted by sketch, then
        counter; ``sketches``: the sketch each of this column's stands for
        (default: itself)."""
        s_of, k_of, sums = self.rows.counter_sums(at, self._window_of(window), self._width,
                                                  self._size // self._width)
        if sketches is not None:
            s_of = np.asarray(sketches, dtype=np.int64)[s_of]
        owner = np.concatenate([owner, s_of])
        keys = np.concatenate([keys, k_of])
        order = np.argsort(owner * self._size + keys, kind="stable")
        return owner[order], keys[order], np.concatenate([lo, sums])[order], np.concatenate([up, sums])[order]

    def union_bounds(self, group_starts, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each group's window total bounds from its sketches' summed counter
        bounds, without merging (:meth:`SlidingCountMin.union_bounds`, then
        :meth:`~SlidingCountMin.total_from_bounds`), as of ``now`` (one time
        per group; default: the group's newest); a group near int64 by
        those methods themselves (which raise SumOverflowError past it)."""
        starts = np.asarray(group_starts, dtype=np.int64)
        c = self.counters
        groups = starts.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, len(c))))
        if now is None:
            group_now = np.full(groups, INT64_MIN, dtype=np.int64)
            np.maximum.at(group_now, group_of[c.has_newest], c.newest[c.has_newest])
        else:
            group_now = np.broadcast_to(np.asarray(now, dtype=np.int64), starts.shape)
        at = np.where(c.has_newest, group_now[group_of], c.newest)
        lo, up = self._counter_bounds(at, window)
        depth = self._size // self._width
        owner = group_of[c.owner]
        lower, upper, wide = _row_sums(lo, up, owner * depth + c.keys // self._width, groups * depth)
        lower, upper = lower.reshape(groups, depth).max(axis=1), upper.reshape(groups, depth).min(axis=1)
        wide = wide.reshape(groups, depth).max(axis=1)
        if self._any_rows:  # the rows form's exact totals add to every row of their group's counters
            exact = np.zeros(groups, dtype=np.int64)
            totals = self.rows.totals(at, self._window_of(window))
            np.add.at(exact, group_of, totals)
            lower, upper = lower + exact, upper + exact
            wide = wide + np.bincount(group_of, weights=totals.astype(np.float64), minlength=groups)
        heavy = np.flatnonzero(wide >= 2.0 ** 62)
        if heavy.size:  # sums near int64: the exact per-group path decides, and raises past it
            ends = np.append(starts[1:], len(c))
            for g in heavy.tolist():
                parts = [self[i] for i in range(int(starts[g]), int(ends[g]))]
                at = None if now is None else int(group_now[g])
                lower[g], upper[g] = parts[0].total_from_bounds(*SlidingCountMin.union_bounds(parts, at, window))
        return lower, upper

    def summed_bounds(self, group_starts, now=None) -> tuple[np.ndarray, np.ndarray]:
        """Each group's window total bounds as the sums of its sketches' own
        (:meth:`bounds`, each as of the group's time: ``now``, one time or
        one per group, default the group's newest): every part brackets its
        share, so the sums bracket the group's total, never wider than
        :meth:`union_bounds` (the parts' tightest rows, summed, are at least
        as tight as the tightest row of the summed counters).  Raises
        :class:`~ehist.errors.SumOverflowError` for a group past int64.

        >>> a = SlidingCountMin(100, eps=0.05).update([1, 2], ["x", "y"])
        >>> b = SlidingCountMin(100, eps=0.05).update([5], ["x"])
        >>> [x.tolist() for x in CountMinColumn.from_sketches([a, b]).summed_bounds([0])]
        [[3], [3]]
        """
        starts = np.asarray(group_starts, dtype=np.int64)
        c = self.counters
        groups = starts.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, len(c))))
        group_now = _group_times(group_of, groups, c.has_newest, c.newest, now)
        lo, up = self.bounds(np.where(c.has_newest, group_now[group_of], c.newest))
        if groups and np.bincount(group_of, weights=up.astype(np.float64), minlength=groups).max() >= 2.0 ** 63:
            raise SumOverflowError("the sum of a group's window totals would overflow int64")
        lower = np.zeros(groups, dtype=np.int64)
        upper = np.zeros(groups, dtype=np.int64)
        np.add.at(lower, group_of, lo)
        np.add.at(upper, group_of, up)
        return lower, upper

    def _counter_bounds(self, now, window):
        """Every counter's bounds as of its sketch's ``now`` (one time per
        sketch, or None: each one's newest), the sketches' own checks."""
        c = self.counters
        full = self.params[0]
        at = c.newest if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), (len(c),))
        late = c.has_newest & (at < c.newest)
        wide = window is not None and (isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer))
                                       or not 1 <= int(window) <= full)
        if late.any() or wide:  # the sketch's own query raises what is wrong
            i = int(np.flatnonzero(late)[0]) if late.any() else 0
            self[i].bounds(None if now is None else int(at[i]), window)
        return c.col.bounds(at[c.owner], full if window is None else int(window))

    # ------------------------------------------------------------ encoding
    def to_bytes(self) -> list:
        """``[self[i].to_bytes() for i in range(len(self))]``, in one pass
        (one for the counters, one for the rows form)."""
        if not len(self):
            return []
        in_rows = self.form & self.counters.has_newest if self._any_rows else None
        if in_rows is None or not in_rows.any():
            return sealed_blobs(*self._sealing())
        out = np.empty(len(self), dtype=object)
        at = np.flatnonzero(in_rows)
        out[at] = self.rows.take(at).to_bytes(self.params, self.counters.newest[at])
        rest = np.flatnonzero(~in_rows)
        if rest.size:
            out[rest] = sealed_blobs(*CountMinColumn(self.params, self.counters.take(rest))._sealing())
        return out.tolist()

    def _sealing(self) -> tuple:
        """:func:`~ehist.columnar.sealed_blobs`'s arguments for every
        sketch: the head (preamble and parameters), "has newest" flags, the
        newest times and the keyed counter regions."""
        c = self.counters
        regions, r_off = c.write()
        head = _cm.LAYOUT.head.pack(MAGIC, FAMILIES["SlidingCountMin"], _cm.LAYOUT.version, 0, *self.params)
        return head, c.has_newest.astype(np.uint16), c.newest, c.has_newest, regions, r_off[:-1], r_off[1:]


def _positions(parts: list) -> tuple:
    """``(parts, position)`` of ``(column, positions)`` pairs (together
    every position once): the non-empty ones, and where each position's
    sketch lies in their concatenation (None: one part, already in order)."""
    parts = [(c, np.asarray(at, dtype=np.int64)) for c, at in parts if len(c)] or parts[:1]
    if len(parts) == 1:
        return parts, None
    position = np.empty(sum(len(c) for c, _ in parts), dtype=np.int64)
    position[np.concatenate([at for _, at in parts])] = np.arange(position.size)
    return parts, position


def _split_runs(run, ts, h, v, newest, window: int, runs: int, width: int):
    """``(rows, form, (ts, h, run, v))`` of runs of rows inside their
    windows (``run`` ascending, times in order within a run): the rows
    form's rows of the runs that keep them (:func:`_rows_of_runs`; the
    others: none) and ``form``, and the rows the other runs build counters
    from, by run and time: their rows as they are where their distinct
    times alone pass ``width``, else their canonical rows (the counters of
    those are the same: ``test_rows_form_answers_exactly_...``)."""
    held, form, plenty = _rows_of_runs(run, ts, h, v, newest, window, runs, width)
    dense = held.take(np.flatnonzero(~form & ~plenty))
    many = plenty[run]
    ts = np.concatenate([ts[many], dense.ts])
    h = np.concatenate([h[many], dense.hashes])
    run_c = np.concatenate([run[many], np.flatnonzero(~form & ~plenty)[dense.owner]])
    if v is not None or not bool((dense.values == 1).all()):
        v = np.concatenate([np.ones(int(many.sum()), np.int64) if v is None else v[many], dense.values])
    order = np.argsort(run_c, kind="stable")  # runs in order, times in order within each
    v = None if v is None else v[order]
    held = Rows.concat([held.take(np.flatnonzero(form)), Rows.empty(int((~form).sum()))]).take(
        np.argsort(np.r_[np.flatnonzero(form), np.flatnonzero(~form)], kind="stable"))
    return held, form, (ts[order], h[order], run_c[order], v)


def _rows_of_runs(run, ts, h, v, newest, window: int, runs: int, width: int):
    """``(rows, form, plenty)`` of runs of rows (``run`` ascending, times
    in order within a run, none out of the window): the canonical rows of
    every run that may hold at most ``width`` of them (``form``: those that
    do); ``plenty``: the runs whose distinct times alone pass ``width``
    (their rows are not made canonical: they take counters)."""
    nonzero = np.ones(ts.size, dtype=bool) if v is None else v != 0
    idx = np.flatnonzero(nonzero)
    r, t = run[idx], ts[idx]
    new_time = np.r_[True, (r[1:] != r[:-1]) | (t[1:] != t[:-1])] if idx.size else np.zeros(0, dtype=bool)
    plenty = np.bincount(r[new_time], minlength=runs) > width
    some = ~plenty[run]
    held = Rows.canonical(run[some], ts[some], h[some], np.ones(int(some.sum()), np.int64) if v is None else v[some],
                          newest, window, runs)
    form = ~plenty & (held.counts <= width)
    return held, form, plenty


def _row_sums(lo: np.ndarray, up: np.ndarray, segment: np.ndarray, size: int):
    """``(lower, upper, upper in floats)`` summed per ``segment`` (a
    sketch's or group's row) out of ``size``: int64 sums, and float ones to
    find those that may pass int64."""
    lower = np.zeros(size, dtype=np.int64)
    upper = np.zeros(size, dtype=np.int64)
    order = np.argsort(segment, kind="stable")
    s = segment[order]
    if s.size:
        first = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        lower[s[first]] = np.add.reduceat(lo[order], first)
        upper[s[first]] = np.add.reduceat(up[order], first)
    return lower, upper, np.bincount(segment, weights=up.astype(np.float64), minlength=size)


def _row_units(c: KeyedCounters, width: int) -> np.ndarray:
    """Each sketch's units in row 0 (counters below ``width``), as floats:
    its row-0 counters come first (keys ascending), so their buckets are
    one stretch, read alone (a fifth of a dense column's buckets at depth
    5, nothing repeated per bucket)."""
    n = len(c)
    first = c.offsets[:-1]
    row0_end = first + np.bincount(c.owner[c.keys < width], minlength=n)
    a, z = c.col.offsets[first], c.col.offsets[row0_end]
    sketch = np.repeat(np.arange(n, dtype=np.int64), z - a)
    return np.bincount(sketch, weights=np.ldexp(1.0, c.col.exps[ranges(a, z)].astype(np.int64)), minlength=n)


def _item_frequencies(eps: float, width: int, size: int, owner, keys, lo, up, group_of, groups: int, h):
    """``(estimate, lower, upper, near)`` of each group's item (``h[g]``)
    from the summed bounds of its sketches' counters (``owner``: each
    counter's sketch, ``keys`` ascending within one; ``group_of``: each
    sketch's group), as :meth:`SlidingCountMin.answers_from_bounds` of
    :meth:`~SlidingCountMin.union_bounds` gives them; ``near``: the groups
    whose sums come near int64, whose numbers the caller must replace."""
    n = group_of.size
    depth = size // width
    _, row_upper, wide = _row_sums(lo, up, group_of[owner] * depth + keys // width, groups * depth)
    total = row_upper.reshape(groups, depth).min(axis=1) if groups else row_upper
    # each sketch's counter of its group's item in each row, summed over the group
    ids = _cm.counter_ids(h, width, depth)[:, group_of]  # (depth, sketches)
    held = owner * size + keys
    want = np.arange(n, dtype=np.int64)[None, :] * size + ids
    at = np.minimum(np.searchsorted(held, want), max(held.size - 1, 0))
    found = (held[at] == want) if held.size else np.zeros(want.shape, dtype=bool)
    where = (np.arange(depth)[:, None] * groups + group_of[None, :]).ravel()
    low = np.zeros(depth * groups, dtype=np.int64)
    high = np.zeros(depth * groups, dtype=np.int64)
    if held.size:
        np.add.at(low, where, np.where(found, lo[at], 0).ravel())
        np.add.at(high, where, np.where(found, up[at], 0).ravel())
    high_f = np.bincount(where, weights=np.where(found, up[at] if held.size else 0, 0).ravel().astype(np.float64),
                         minlength=depth * groups)
    low, high = low.reshape(depth, groups), high.reshape(depth, groups)
    estimate = (low * 0.5 + high * 0.5).min(axis=0)
    slack = np.ceil(eps * total.astype(np.float64)).astype(np.int64)
    lower, upper = np.maximum(low.min(axis=0) - slack, 0), high.min(axis=0)
    near = wide.reshape(groups, depth).max(axis=1) >= 2.0 ** 62 if groups else np.zeros(0, dtype=bool)
    near |= high_f.reshape(depth, groups).max(axis=0) >= 2.0 ** 62 if groups else near
    return estimate, lower, upper, near


def _ecm_bounds_of_bytes(buf, starts, lengths, window, times):
    """Every ECM-sketch's counters (sketch ``i`` at ``buf[starts[i]:
    starts[i] + lengths[i]]``, its preamble and checksum already checked)
    bounded for its window as of ``times(newest)`` (each sketch's query
    time from its head's newest) as they are decoded
    (:meth:`~ehist.keyed_counters.KeyedCounters.read_bounds`, no column
    built): ``(params, width, counters, owner, keys, lower, upper)``, each
    counter's sketch, key and bounds.  None where the column must decide:
    layouts, parameters that differ or do not construct, a sketch never
    updated, a window out of range, ``times`` giving None or a time before
    a sketch's newest, a counter the reader refuses, a row-0 total near
    int64."""
    n = starts.size
    if not (buf[starts + 3] == _cm.LAYOUT.version).all():
        return None
    fields = _head_fields(buf, starts)
    first = fields[0]
    params = (int(first["window"]), float(first["eps"]), float(first["delta"]), float(first["eh_eps"]),
              int(first["seed"]))
    newest = fields["newest"].astype(np.int64)
    if not all((fields[f] == first[f]).all() for f in ("window", "eps", "delta", "eh_eps", "seed")) or \
            (newest == INT64_MIN).any():
        return None
    try:
        probe = SlidingCountMin(*params)
    except ValueError:
        return None
    full = params[0]
    if window is not None and (isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer))
                               or not 1 <= int(window) <= full):
        return None
    at = times(newest)
    if at is None or (at < newest).any():
        return None
    w = full if window is None else int(window)
    cutoffs = np.maximum(at, np.int64(INT64_MIN + w)) - np.int64(w)
    read, offsets, keys, lo, up, units = KeyedCounters.read_bounds(
        buf, starts + _ECM_HEAD.size, starts + lengths - _CRC.size, probe.counters, full, probe.eh_eps, newest,
        cutoffs)
    if not read.all():
        return None
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    row0 = np.bincount(owner[keys < probe.width], weights=units[keys < probe.width].astype(np.float64), minlength=n)
    if (row0 >= 2.0 ** 62).any():  # a total near int64: from_bytes decides it exactly
        return None
    return params, probe.width, probe.counters, owner, keys, lo, up


def _group_times(group_of, groups: int, has, newest, now) -> np.ndarray:
    """Each group's query time: ``now`` (one time, or one per group), or
    the newest of its sketches that have one."""
    if now is not None:
        return np.broadcast_to(np.asarray(now, dtype=np.int64), (groups,))
    out = np.full(groups, INT64_MIN, dtype=np.int64)
    np.maximum.at(out, group_of[has], newest[has])
    return out


def _level_spans(buf, starts, lengths, depth: int):
    """Where each heavy-hitter sketch's levels lie (an ECM-sketch each):
    ``(readable mask, starts, lengths)``, sketch ``i``'s level ``j`` at
    ``i * depth + j`` (a sketch whose level table does not read: its own
    decoder names what is wrong).  The table: varint L (one byte: at most
    64 levels), then L varint lengths, then the levels."""
    count = starts.size
    ends = starts + lengths - _CRC.size
    pos = starts + _HH_HEAD.size
    good = buf[pos] == depth
    pos = pos + 1
    # the table's varints lie in its first 10 * depth bytes: read from those alone (not a scan of every byte)
    span = np.clip(ends - pos, 0, 10 * depth)
    at = np.concatenate([[0], np.cumsum(span)[:-1]]).astype(np.int64)
    read = region_varints(gather(buf, pos, pos + span), at, at + span)
    sizes = np.zeros((count, depth), dtype=np.int64)
    every = np.arange(count)
    for j in range(depth):
        value, stop, bad = read(np.full(count, j), every)
        good &= ~bad & (value < np.uint64(1 << 40))
        sizes[:, j] = np.where(good, value, 0).astype(np.int64)
    pos = np.where(good, stop - at + pos + 1, pos)  # after the last length: the levels
    good &= (sizes.sum(axis=1) == ends - pos) & (sizes >= 1).all(axis=1)
    return good, (pos[:, None] + np.cumsum(sizes, axis=1) - sizes).ravel(), sizes.ravel()


def _walk(phi: float, bits: int, level_bits: int, params: tuple, width: int, size: int, depth: int, groups: int,
          group_of, owner, keys, lo, up) -> "Hitters | None":
    """Every group's walk down the levels from its sketches' counter bounds
    summed (``owner``: each counter's level sketch, sketch ``i``'s level
    ``j`` at ``i * depth + j``; ``group_of``: each sketch's group): the
    candidates of all groups in one array per level, each counter's bounds
    looked up among the groups' summed counters.  None when a row's sums
    come near int64 (the sketches' own queries decide, and raise past it)."""
    from ehist.hashing import hash64

    from .count_min import counter_ids

    rows = size // width
    # every group's summed counters, by one key: (group, level, counter)
    g_level = group_of[owner // depth] * depth + owner % depth
    key = g_level * size + keys
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, dtype=np.int64)
    # each (group, level)'s rows (the key runs of one row, in order): their sums, exactly
    row_of = (key // size) * rows + (key % size) // width
    row_first = np.flatnonzero(np.r_[True, row_of[1:] != row_of[:-1]]) if key.size else first
    if key.size and float(np.add.reduceat(up[order].astype(np.float64), row_first).max()) >= 2.0 ** 61:
        return None
    row_lo = np.zeros(groups * depth * rows, dtype=np.int64)
    row_up = np.zeros(groups * depth * rows, dtype=np.int64)
    if key.size:
        row_lo[row_of[row_first]] = np.add.reduceat(lo[order], row_first)
        row_up[row_of[row_first]] = np.add.reduceat(up[order], row_first)
    total_lower = row_lo.reshape(groups, depth, rows).max(axis=2)
    total_upper = row_up.reshape(groups, depth, rows).min(axis=2)
    sum_lo = np.add.reduceat(lo[order], first) if key.size else lo[:0]
    sum_up = np.add.reduceat(up[order], first) if key.size else up[:0]
    key = key[first]
    eps, seed = float(params[1]), int(params[4])
    slack = np.array([math.ceil(eps * int(t)) for t in total_upper.ravel().tolist()],
                     dtype=np.int64).reshape(groups, depth)
    threshold = np.maximum(float(phi) * total_lower[:, -1].astype(np.float64), 1.0)
    lengths = levels_of(bits, level_bits)
    if compiled.active():  # one group at a time in compiled code (frequencies.compiled)
        from ehist.hashing import int_hash_key

        from .compiled import walk

        cg, cand, est, lower, upper = walk(key, sum_lo, sum_up, np.searchsorted(
            key, np.arange(groups * depth + 1, dtype=np.int64) * size), slack, threshold, lengths,
            int_hash_key(seed), _cm._ROW_KEYS[:rows], width, size)
        return Hitters.of(groups, cg, cand, est, lower, upper)
    # the walk: every group's candidates at once
    fanout = np.arange(1 << lengths[0], dtype=np.uint64)
    bounds = np.searchsorted(key, np.arange(groups * depth + 1, dtype=np.int64) * size)  # each (group, level)
    cand = np.tile(fanout, groups)
    cg = np.repeat(np.arange(groups, dtype=np.int64), fanout.size)
    for j in range(depth):
        ids = counter_ids(hash64(cand, seed), width, rows)  # (rows, candidates)
        want = (cg * depth + j)[None, :] * size + ids
        segment = cg * depth + j
        pos = np.minimum(search_segments(key, bounds[segment], bounds[segment + 1], want), max(key.size - 1, 0))
        hit = key[pos] == want if key.size else np.zeros(want.shape, dtype=bool)
        c_lo = np.where(hit, sum_lo[pos] if key.size else 0, 0)
        c_up = np.where(hit, sum_up[pos] if key.size else 0, 0)
        est = (c_lo * 0.5 + c_up * 0.5).min(axis=0)
        lower = np.maximum(c_lo.min(axis=0) - slack[cg, j], 0)
        upper = c_up.min(axis=0)
        keep = upper >= threshold[cg]
        cand, cg, est, lower, upper = cand[keep], cg[keep], est[keep], lower[keep], upper[keep]
        if j + 1 < depth:
            step = lengths[j + 1] - lengths[j]
            cand = ((cand[:, None] << np.uint64(step)) | np.arange(1 << step, dtype=np.uint64)[None, :]).ravel()
            cg = np.repeat(cg, 1 << step)
    return Hitters.of(groups, cg, cand, est, lower, upper)


class HeavyHittersColumn:
    """Many :class:`~frequencies.SlidingHeavyHitters` sketches of one
    parameter set: ``bits``, ``level_bits`` and their levels as one
    :class:`CountMinColumn` (sketch ``i``'s level ``j`` at ``i * L + j``,
    ``L`` levels; a sketch in the rows form: levels without counters, their
    newest its own), and the rows of those in the rows form (``rows``, ids
    in place of hashes, and ``form``)."""

    __slots__ = ("bits", "level_bits", "levels", "rows", "form")

    def __init__(self, bits: int, level_bits: int, levels: CountMinColumn, rows: Rows | None = None, form=None):
        self.bits, self.level_bits, self.levels = int(bits), int(level_bits), levels
        n = len(levels) // len(levels_of(self.bits, self.level_bits))
        self.rows = Rows.empty(n) if rows is None else rows
        self.form = np.zeros(n, dtype=bool) if form is None else np.asarray(form, dtype=bool)

    @property
    def depth(self) -> int:
        """Levels per sketch."""
        return len(levels_of(self.bits, self.level_bits))

    @property
    def _any_rows(self) -> bool:
        return bool(self.form.any())

    def _newest(self) -> tuple[np.ndarray, np.ndarray]:
        """Each sketch's (has newest, newest): its first level's."""
        c = self.levels.counters
        n, depth = len(self), self.depth
        return c.has_newest.reshape(n, depth)[:, 0], c.newest.reshape(n, depth)[:, 0]

    def _last(self) -> CountMinColumn:
        """Every sketch's last level (the ids themselves) as ECM-sketches,
        the rows form's rows with their ids hashed as that level hashes them."""
        from ehist.hashing import hash64

        n, levels = len(self), self.depth
        counters = self.levels.counters.take(np.arange(n) * levels + levels - 1)
        if not self._any_rows:
            return CountMinColumn(self.levels.params, counters)
        r = self.rows
        hashed = Rows(r.offsets, r.ts, hash64(r.hashes, self.levels.params[4]), r.values)
        return CountMinColumn(self.levels.params, counters, hashed, self.form)

    def frequencies(self, ids, now=None, window: int | None = None, group_starts=None):
        """Each sketch's :meth:`SlidingHeavyHitters.frequencies` of one id
        (``ids[i]``, uint64 below ``2**bits``, for sketch ``i``): its last
        level's counters (whole ids), every sketch at once
        (:meth:`CountMinColumn.frequencies_of_hashes`); with
        ``group_starts``, one id per group of sketches, from their summed
        counter bounds (:meth:`CountMinColumn.union_frequencies_of_hashes`:
        the union's, without merging)."""
        from ehist.hashing import hash64

        last = self._last()
        hashes = hash64(np.asarray(ids, dtype=np.uint64), self.levels.params[4])
        if group_starts is not None:
            return last.union_frequencies_of_hashes(group_starts, hashes, now, window)
        return last.frequencies_of_hashes(hashes, now, window)

    def __len__(self) -> int:
        return len(self.levels) // self.depth

    def take(self, indices) -> "HeavyHittersColumn":
        """The sketches at ``indices``, in that order (each one's levels
        together)."""
        depth = self.depth
        idx = np.asarray(indices, dtype=np.int64)
        rows = (idx[:, None] * depth + np.arange(depth)).ravel()
        return HeavyHittersColumn(self.bits, self.level_bits, self.levels.take(rows), self.rows.take(idx),
                                  self.form[idx])

    def __repr__(self) -> str:
        return f"HeavyHittersColumn(sketches={len(self)}, bits={self.bits}, level_bits={self.level_bits})"

    def __getitem__(self, i: int) -> SlidingHeavyHitters:
        i = range(len(self))[i]
        out = SlidingHeavyHitters(self.levels.params[0], self.bits, *self.levels.params[1:], self.level_bits)
        out._levels = [self.levels[i * self.depth + j] for j in range(self.depth)]
        has = out.newest is not None
        out._rows = (self.rows.sketch(i) if self.form[i] else None) if has else _cm._no_rows()
        return out

    @classmethod
    def _placed(cls, bits: int, level_bits: int, parts: list) -> "HeavyHittersColumn":
        """One column of ``parts`` (``(column, positions)`` each; together
        every position once), in the positions' order."""
        parts, position = _positions(parts)
        if position is None:
            return parts[0][0]
        levels = CountMinColumn(parts[0][0].levels.params, KeyedCounters.concat([c.levels.counters for c, _ in parts]))
        return cls(bits, level_bits, levels, Rows.concat([c.rows for c, _ in parts]),
                   np.concatenate([c.form for c, _ in parts])).take(position)

    def _densified(self) -> "HeavyHittersColumn":
        """Every sketch holding its levels' counters (those in the rows form:
        :meth:`SlidingHeavyHitters._as_counters`, built in one pass)."""
        if not self._any_rows:
            return self
        has, newest = self._newest()
        at = np.flatnonzero(self.form & has)
        if at.size == 0:
            return HeavyHittersColumn(self.bits, self.level_bits, self.levels)
        part = self.rows.take(at)
        built = HeavyHittersColumn.build(part.ts, part.offsets[:-1], part.hashes,
                                         None if bool((part.values == 1).all()) else part.values, self.bits,
                                         self.level_bits, self.levels.params, rows=False, newest=newest[at])
        rest = np.flatnonzero(~(self.form & has))
        return HeavyHittersColumn._placed(self.bits, self.level_bits, [
            (HeavyHittersColumn(self.bits, self.level_bits, self.take(rest).levels), rest), (built, at)])

    @classmethod
    def build(cls, timestamps, starts, ids, values, bits: int, level_bits: int, params: tuple, rows: bool = True,
              newest=None) -> "HeavyHittersColumn":
        """One sketch per run of rows (``starts``: where each run begins,
        rows sorted by time within a run; ``ids`` uint64 in ``[0,
        2**bits)``; ``values`` None for ones), as
        ``SlidingHeavyHitters(window, bits, eps, delta, eh_eps, seed,
        level_bits).update(run_ts, run_ids, run_values)`` builds it: each
        level's ECM-sketches of the ids' prefixes by one
        :meth:`CountMinColumn.build`; a run of at most ``width`` rows in
        the rows form, as :meth:`CountMinColumn.build` keeps them.
        ``params``: ``(window, eps, delta, eh_eps, seed)``.  Ids outside
        ``[0, 2**bits)``, unsorted times or totals near int64 go through
        ``update`` itself (its message).  ``rows`` False: every run takes
        its levels' counters, settled at ``newest`` (one time per run; the
        rows form's own, densified)."""
        from ehist.hashing import hash64

        from ehist.columnar import check_starts

        ts = np.asarray(timestamps)
        x = np.asarray(ids)
        v = None if values is None else np.asarray(values)
        window, eps, delta, eh_eps, seed = params
        make = lambda: SlidingHeavyHitters(window, bits, eps, delta, eh_eps, seed, level_bits)  # noqa: E731
        probe = make()
        lengths = levels_of(bits, level_bits)
        starts = check_starts(starts, ts.size)
        run = np.repeat(np.arange(starts.size), np.diff(np.append(starts, ts.size)))
        bad = ts.dtype.kind not in "iu" or x.shape != ts.shape or x.dtype != np.uint64 or (v is not None and (
            v.shape != ts.shape or v.dtype.kind not in "iu" or (v.size and (v.min() < 0 or v.max() >= 2**62))))
        if not bad and ts.size:  # unsorted runs, or a time update refuses
            bad = int(ts.min()) == INT64_MIN or bool(np.any((ts[1:] < ts[:-1]) & (run[1:] == run[:-1])))
        if not bad and x.size and bits < 64:
            bad = int(x.max()) >= 1 << bits
        if not bad and v is not None and v.size:  # a total near int64: update decides
            bad = float(v.astype(np.float64).sum()) >= 2.0 ** 62
        if bad:
            ends = np.append(np.asarray(starts)[1:], ts.size)
            return cls.from_sketches([make().update(ts[a:b], x[a:b], None if v is None else v[a:b])
                                      for a, b in zip(np.asarray(starts).tolist(), ends.tolist())])
        params = probe._levels[0]._params()  # eh_eps resolved as the sketch resolves it
        runs = starts.size
        sizes = np.diff(np.append(starts, ts.size))
        has = sizes > 0 if newest is None else np.ones(runs, dtype=bool)
        if newest is None:
            newest = np.zeros(runs, dtype=np.int64)
            newest[has] = ts[np.append(starts[1:], ts.size)[has] - 1]
        newest = np.asarray(newest, dtype=np.int64)
        held, form = None, np.zeros(runs, dtype=bool)
        if rows:  # as CountMinColumn.build: runs of at most width rows keep them, ids in place of hashes
            keep = ts > cutoffs(newest, window)[run]
            ts, x, run = ts[keep], x[keep], run[keep]
            v = None if v is None else v[keep]
            held, form, (ts, x, run, v) = _split_runs(run, ts, x, v, newest, window, runs, probe.width)
            starts = np.searchsorted(run, np.arange(runs))
        levels = [CountMinColumn.build(ts, starts, hash64(x >> np.uint64(bits - length), seed), v, params, rows=False)
                  .settled(newest, has) for length in lengths]
        depth, n = len(lengths), len(levels[0])
        if any(len(level) != n for level in levels):
            raise AssertionError("the levels of one build hold different numbers of sketches")
        # sketch i's level j at i * depth + j
        order = (np.arange(depth, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None]).ravel()
        counters = KeyedCounters.concat([level.counters for level in levels]).take(order)
        return cls(bits, level_bits, CountMinColumn(levels[0].params, counters), held, form)

    @classmethod
    def from_sketches(cls, sketches: list) -> "HeavyHittersColumn":
        """The column of sketches of one parameter set."""
        first = sketches[0]
        levels = CountMinColumn.from_sketches([x for s in sketches for x in s._levels])
        form = np.array([s._rows is not None and s.newest is not None for s in sketches], dtype=bool)
        return cls(first.bits, first.level_bits, CountMinColumn(levels.params, levels.counters),
                   Rows.of([s._rows if f else None for s, f in zip(sketches, form.tolist())]), form)

    @classmethod
    def from_bytes(cls, blobs: list) -> "HeavyHittersColumn | None":
        """Decode many :meth:`SlidingHeavyHitters.to_bytes` outputs (None
        when they hold different parameters); raises what
        ``SlidingHeavyHitters.from_bytes`` raises, for the first blob it
        rejects."""
        if not blobs:
            return None
        family = FAMILIES["SlidingHeavyHitters"]
        ok, buf, starts, lengths = sealed_heads(blobs, family, _HH_HEAD.size + 1 + _CRC.size, 0, base_flags=0)
        in_rows = rows_sealed(buf, starts, lengths, "SlidingHeavyHitters", _HH_ROWS_HEAD.size) & ~ok
        if in_rows.any():
            return cls._with_rows(blobs, buf, starts, lengths, in_rows)
        idx = np.flatnonzero(ok)
        shape = None
        if idx.size:
            bits, level_bits = buf[starts[idx] + 6].astype(np.int64), buf[starts[idx] + 7].astype(np.int64)
            shape = (int(bits[0]), int(level_bits[0]))
            alike = (bits == shape[0]) & (level_bits == shape[1])
            try:
                depth = len(levels_of(*shape))
            except ValueError:
                alike[:], shape = False, None
            ok[idx[~alike]] = False
            idx = idx[alike]
        if idx.size:
            good, level_starts, level_lengths = _level_spans(buf, starts[idx], lengths[idx], depth)
            ok[idx[~good]] = False
            idx = idx[good]
            level_starts, level_lengths = (a.reshape(-1, depth)[good].ravel() for a in (level_starts, level_lengths))
        slow = np.flatnonzero(~ok)
        fast = None
        if idx.size:
            ecm_ok = sealed(buf, level_starts, level_lengths, FAMILIES["SlidingCountMin"], _ECM_HEAD.size + 1 + 4, 0)
            try:
                fast = CountMinColumn._decode(buf, level_starts, level_lengths, ecm_ok, rows=False)
            except ValueError:  # a corrupt level: the sketch's own decoder names it, blob by blob
                fast, slow = None, np.arange(len(blobs))
            else:
                if fast is None:  # levels of different parameters
                    return None
                # every level of a sketch: the first's newest
                c = fast.counters
                has = c.has_newest.reshape(-1, depth)
                newest = np.where(has, c.newest.reshape(-1, depth), 0)
                same = (has == has[:, :1]).all(axis=1) & (newest == newest[:, :1]).all(axis=1)
                if not same.all():
                    bad = idx[~same]
                    ok[bad] = False
                    fast = CountMinColumn(fast.params, c.take(_level_rows(np.flatnonzero(same), depth)))
                    slow = np.flatnonzero(~ok)
        if slow.size == 0:
            return cls(*shape, fast)
        sketches = [SlidingHeavyHitters.from_bytes(bytes(blobs[i])) for i in slow.tolist()]
        first = sketches[0]
        if shape is None:
            shape = (first.bits, first.level_bits)
        if any((s.bits, s.level_bits) != shape for s in sketches):
            return None
        slow_levels = CountMinColumn.from_sketches([x for s in sketches for x in s._levels])
        if fast is None or len(fast) == 0:
            return cls(*shape, slow_levels)
        if slow_levels.params != fast.params:
            return None
        depth = len(levels_of(*shape))
        merged = KeyedCounters.placed(fast.counters, _level_rows(np.flatnonzero(ok), depth), slow_levels.counters,
                                      _level_rows(slow, depth))
        return cls(*shape, CountMinColumn(fast.params, merged))

    @classmethod
    def _with_rows(cls, blobs, buf, starts, lengths, in_rows) -> "HeavyHittersColumn | None":
        """:meth:`from_bytes` of blobs some of which are in the rows form
        (``in_rows``): those read in one pass (:meth:`~frequencies.rows.Rows.read`),
        the others by :meth:`from_bytes`, placed together."""
        at = np.flatnonzero(in_rows)
        head = np.frombuffer(gather(buf, starts[at], starts[at] + _HH_ROWS_HEAD.size).tobytes(),
                             dtype=_HH_ROWS_FIELDS)
        shape = (int(head["bits"][0]), int(head["level_bits"][0]))
        params = tuple(head[f][0].item() for f in ("window", "eps", "delta", "eh_eps", "seed"))
        alike = (head["bits"] == shape[0]) & (head["level_bits"] == shape[1]) & (head["newest"] != INT64_MIN)
        for f, value in zip(("window", "eps", "delta", "eh_eps", "seed"), params):
            alike &= head[f] == value
        try:
            probe = SlidingHeavyHitters(params[0], shape[0], *params[1:], shape[1])
        except ValueError:
            alike[:] = False
        fast = []
        in_rows[at[~alike]] = False  # another parameter set, or a newest its decoder refuses: decoded alone
        if alike.any():
            ok_at = at[alike]
            newest = head["newest"][alike].astype(np.int64)
            valued = (buf[starts[ok_at] + _FLAGS_AT] & _cm.FLAG_VALUES) != 0
            good, held = Rows.read(buf, starts[ok_at], lengths[ok_at], newest, valued, probe.width, params[0],
                                   _HH_ROWS_HEAD.size)
            if held.hashes.size and shape[0] < 64:  # ids below 2**bits
                big = held.hashes >> np.uint64(shape[0]) != 0
                good &= np.bincount(held.owner[big], minlength=len(held)) == 0
            held = held.take(np.flatnonzero(good))
            k, depth = len(held), len(levels_of(*shape))
            level_params = probe._levels[0]._params()
            none = KeyedCounters(np.zeros(k * depth + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                 empty(params[0], level_params[3], 0), np.repeat(newest[good], depth),
                                 np.ones(k * depth, dtype=bool))
            fast.append((cls(*shape, CountMinColumn(level_params, none), held, np.ones(k, dtype=bool)), ok_at[good]))
            in_rows[ok_at[~good]] = False
        rest = np.flatnonzero(~in_rows)
        if rest.size:
            rest_blobs = [bytes(buf[starts[i]:starts[i] + lengths[i]]) for i in rest.tolist()]
            if rows_sealed(buf, starts[rest], lengths[rest], "SlidingHeavyHitters", _HH_ROWS_HEAD.size).any():
                # a rows form blob the checks refused: each blob by its own decoder, in order (the first bad one raises)
                decoded = [SlidingHeavyHitters.from_bytes(b) for b in rest_blobs]
                if any(x._params() != decoded[0]._params() for x in decoded):
                    return None
                other = cls.from_sketches(decoded)
            else:
                other = cls.from_bytes(rest_blobs)
            if other is None or (other.bits, other.level_bits) != shape or (
                    fast and other.levels.params != fast[0][0].levels.params):
                return None
            fast.append((other, rest))
        return cls._placed(*shape, fast)

    def bounds(self, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every sketch's :meth:`SlidingHeavyHitters.bounds` (its last
        level's: the ids themselves; the rows form's rows, exact)."""
        return self._last().bounds(now, window)

    def heavy_hitters(self, phi: float, group_starts=None, now=None, window: int | None = None,
                      flat: bool = False) -> "list | Hitters":
        """Each group's list of :meth:`SlidingHeavyHitters.heavy_hitters`
        (a group of one sketch) or
        :meth:`~SlidingHeavyHitters.union_heavy_hitters` (several: the
        parts' summed counter bounds, no merge), every group's walk down
        the levels at once: the candidates of all groups in one array per
        level, each counter's bounds looked up among the groups' summed
        counters.  The same lists, floats and order.

        ``group_starts`` None: every sketch its own group; ``now``: one
        time, one per group, or None (each group's newest); ``flat``: the
        lists as one :class:`Hitters`.  Raises what the sketches' own
        queries raise (a ``now`` before a part's newest, a bad window or
        ``phi``)."""
        from .heavy_hitters import _check_phi

        _check_phi(phi)
        n, depth = len(self), self.depth
        starts = np.arange(n, dtype=np.int64) if group_starts is None else np.asarray(group_starts, dtype=np.int64)
        groups = starts.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, n)))
        if self._any_rows:
            got = self._heavy_hitters_with_rows(phi, starts, group_of, now, window)
            return got if flat else got.lists()
        c = self.levels.counters
        group_now = _group_times(group_of, groups, c.has_newest.reshape(n, depth)[:, 0],
                                 c.newest.reshape(n, depth)[:, 0], now)
        level_sketch = np.repeat(np.arange(n, dtype=np.int64), depth)
        at = np.where(c.has_newest, group_now[group_of[level_sketch]], c.newest)
        lo, up = self.levels._counter_bounds(at, window)
        got = _walk(phi, self.bits, self.level_bits, self.levels.params, self.levels._width, self.levels._size, depth,
                    groups, group_of, c.owner, c.keys, lo, up)
        if got is None:
            got = Hitters.of_lists(self._heavy_hitters_one_by_one(phi, starts, now, window))
        return got if flat else got.lists()

    def _heavy_hitters_with_rows(self, phi: float, starts, group_of, now, window) -> "Hitters":
        """:meth:`heavy_hitters` (flat) where sketches are in the rows form:
        groups of the rows form alone answered from their rows (exact, as
        :meth:`SlidingHeavyHitters.union_heavy_hitters` answers them), the
        others by the walk, their rows form members taking counters first."""
        groups = starts.size
        has, newest = self._newest()
        exact_g = np.bincount(group_of[has & ~self.form], minlength=groups) == 0
        parts = []
        mixed = np.flatnonzero(~exact_g)
        if mixed.size:
            members = np.flatnonzero(~exact_g[group_of])
            sub = self.take(members)._densified()
            sub_starts = np.searchsorted(members, starts[mixed])
            at = None if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), (groups,))[mixed]
            parts.append((sub.heavy_hitters(phi, sub_starts, at, window, flat=True), mixed))
        exact = np.flatnonzero(exact_g)
        if exact.size:
            group_now = _group_times(group_of, groups, has, newest, now)
            late = has & (group_now[group_of] < newest)
            if late.any() or (window is not None and (isinstance(window, (bool, np.bool_)) or not isinstance(
                    window, (int, np.integer)) or not 1 <= int(window) <= self.levels.params[0])):
                i = int(np.flatnonzero(late)[0]) if late.any() else int(np.flatnonzero(exact_g[group_of])[0])
                self[i].heavy_hitters(phi, None if now is None else int(group_now[group_of[i]]), window)
            parts.append((_exact_hitters_of_rows(self.rows, phi, group_of, exact_g, group_now, window,
                                                 self.levels.params[0]), exact))
        return _placed_hitters(groups, parts)

    @classmethod
    def heavy_hitters_of(cls, blobs, phi: float, group_starts=None, now=None, window: int | None = None,
                         flat: bool = False) -> "list | Hitters | None":
        """Stored sketches' (bytes) :meth:`heavy_hitters`: by
        :meth:`heavy_hitters_of_bytes` where it answers, else by the
        decoded column (which raises what is wrong); None for sketches of
        different parameters (their merge refuses them).

        >>> from frequencies import SlidingHeavyHitters
        >>> parts = [SlidingHeavyHitters(100, bits=8).update([1, 2], [7, 7]),
        ...          SlidingHeavyHitters(100, bits=8).update([2, 3], [7, 9])]
        >>> lists = HeavyHittersColumn.heavy_hitters_of([p.to_bytes() for p in parts], 0.5, [0])
        >>> [[h.item for h in hs] for hs in lists]
        [[7]]
        """
        lists = cls.heavy_hitters_of_bytes(blobs, phi, group_starts, now, window, flat)
        if lists is None:
            column = cls.from_bytes(blobs)
            lists = None if column is None else column.heavy_hitters(phi, group_starts, now, window, flat)
        return lists

    @classmethod
    def heavy_hitters_of_bytes(cls, blobs, phi: float, group_starts=None, now=None, window: int | None = None,
                               flat: bool = False) -> "list | Hitters | None":
        """``from_bytes(blobs).heavy_hitters(phi, group_starts, now,
        window)``, every counter bounded as it is decoded, in one compiled
        pass (:meth:`~ehist.keyed_counters.KeyedCounters.read_bounds`: no
        counter's histogram built, where decoding them took nine tenths of
        answering).  The same lists.  None where the column must decide
        instead (no numba, parameters or levels that differ, a sketch never
        updated, a blob the vectorized checks refuse, a query late or too
        wide, totals near int64: it raises what is wrong)."""
        from .heavy_hitters import _check_phi

        _check_phi(phi)
        if not (compiled.active() and len(blobs)):
            return None
        ok, buf, starts, lengths = sealed_heads(blobs, FAMILIES["SlidingHeavyHitters"], _HH_HEAD.size + 1 + _CRC.size,
                                                0, base_flags=0)
        if not ok.all():
            in_rows = rows_sealed(buf, starts, lengths, "SlidingHeavyHitters", _HH_ROWS_HEAD.size) & ~ok
            if not (ok | in_rows).all():
                return None
            # sketches in the rows form: the column's answers (their rows read in one pass)
            column = cls._with_rows(blobs, buf, starts, lengths, in_rows)
            if column is None:
                return None
            n = len(column)
            starts_g = np.arange(n, dtype=np.int64) if group_starts is None else groups_checked(group_starts, n)
            has, newest = column._newest()
            groups = starts_g.size
            group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts_g, n)))
            at = _group_times(group_of, groups, has, newest, now)[group_of]
            if (has & (at < newest)).any() or (window is not None and (isinstance(window, (bool, np.bool_)) or not
                                                                       isinstance(window, (int, np.integer)) or not
                                                                       1 <= int(window) <= column.levels.params[0])):
                return None  # the column raises what is wrong
            return column.heavy_hitters(phi, group_starts, now, window, flat)
        bits, level_bits = buf[starts + 6].astype(np.int64), buf[starts + 7].astype(np.int64)
        if not ((bits == bits[0]).all() and (level_bits == level_bits[0]).all()):
            return None
        try:
            lengths_of = levels_of(int(bits[0]), int(level_bits[0]))
        except ValueError:
            return None
        n, depth = starts.size, len(lengths_of)
        good, level_starts, level_lengths = _level_spans(buf, starts, lengths, depth)
        if not good.all():
            return None
        if not sealed(buf, level_starts, level_lengths, FAMILIES["SlidingCountMin"], _ECM_HEAD.size + 1 + 4, 0).all():
            return None
        starts_g = np.arange(n, dtype=np.int64) if group_starts is None else np.asarray(group_starts, dtype=np.int64)
        groups = starts_g.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts_g, n)))

        def times(newest):  # a sketch's levels share its newest; its group's time, for each level
            levels = newest.reshape(n, depth)
            if not (levels == levels[:, :1]).all():
                return None
            return np.repeat(_group_times(group_of, groups, np.ones(n, dtype=bool), levels[:, 0], now)[group_of], depth)

        got = _ecm_bounds_of_bytes(buf, level_starts, level_lengths, window, times)
        if got is None:
            return None
        params, width, size, owner, keys, lo, up = got
        got = _walk(phi, int(bits[0]), int(level_bits[0]), params, width, size, depth, groups, group_of, owner, keys,
                    lo, up)
        return got if got is None or flat else got.lists()

    def _heavy_hitters_one_by_one(self, phi, starts, now, window) -> list:
        ends = np.append(starts[1:], len(self)).tolist()
        at = None if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), starts.shape).tolist()
        return [SlidingHeavyHitters.union_heavy_hitters([self[i] for i in range(a, z)], phi,
                                                        None if at is None else at[g], window)
                for g, (a, z) in enumerate(zip(starts.tolist(), ends))]

    def union(self, group_starts) -> "HeavyHittersColumn":
        """Each group's :meth:`SlidingHeavyHitters.merge_all`, level by
        level (:meth:`CountMinColumn.union` of every group's level ``j``);
        groups in the rows form as :meth:`CountMinColumn.union` unites
        them."""
        if self._any_rows:
            return self._union_with_rows(np.asarray(group_starts, dtype=np.int64))
        starts = np.asarray(group_starts, dtype=np.int64)
        depth, n = self.depth, len(self)
        sizes = np.diff(np.append(starts, n))
        group_of = np.repeat(np.arange(starts.size, dtype=np.int64), sizes)
        # levels ordered by (group, level, sketch): each group's level j one run, its sketches in order
        sketch = np.repeat(np.arange(n, dtype=np.int64), depth)
        level = np.tile(np.arange(depth, dtype=np.int64), n)
        order = np.lexsort((sketch, level, group_of[sketch]))
        runs = np.repeat(sizes, depth)
        run_starts = np.concatenate([[0], np.cumsum(runs)[:-1]])
        ordered = CountMinColumn(self.levels.params, self.levels.counters.take(order))
        return HeavyHittersColumn(self.bits, self.level_bits, ordered.union(run_starts))

    def _union_with_rows(self, starts) -> "HeavyHittersColumn":
        """:meth:`union` where sketches are in the rows form: their rows
        united (:meth:`CountMinColumn.union` of the rows form's ECM-sketches
        of the ids, whose rows these are), kept where they fit; elsewhere
        the rows form's members take counters first, then the levels unite."""
        n, groups = len(self), starts.size
        has, newest = self._newest()
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, n)))
        # the ids' rows as ECM-sketches in the rows form: CountMinColumn.union decides which groups stay in it
        as_ecm = CountMinColumn(self.levels.params, self._last().counters, self.rows, self.form).union(starts)
        in_rows = as_ecm.form & ~(np.bincount(group_of[has & ~self.form], minlength=groups) > 0)
        parts = []
        kept = np.flatnonzero(in_rows)
        if kept.size:
            g_has, g_newest = as_ecm.counters.has_newest[kept], as_ecm.counters.newest[kept]
            depth = self.depth
            none = KeyedCounters(np.zeros(kept.size * depth + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                 empty(self.levels.params[0], self.levels.params[3], 0),
                                 np.repeat(np.where(g_has, g_newest, 0), depth), np.repeat(g_has, depth))
            parts.append((HeavyHittersColumn(self.bits, self.level_bits, CountMinColumn(self.levels.params, none),
                                             as_ecm.rows.take(kept), g_has), kept))
        rest = np.flatnonzero(~in_rows)
        if rest.size:
            members = np.flatnonzero(~in_rows[group_of])
            sub = self.take(members)._densified()
            parts.append((sub.union(np.searchsorted(members, starts[rest])), rest))
        return HeavyHittersColumn._placed(self.bits, self.level_bits, parts)

    def to_bytes(self) -> list:
        """``[self[i].to_bytes() for i in range(len(self))]``: every level
        sealed in one pass, then every sketch's level table and levels."""
        n, depth = len(self), self.depth
        if n == 0:
            return []
        has, newest = self._newest()
        in_rows = self.form & has
        if in_rows.any():  # the rows form's blobs in one pass, the others' in another
            out = np.empty(n, dtype=object)
            at = np.flatnonzero(in_rows)
            head = _HH_HEAD.pack(MAGIC, FAMILIES["SlidingHeavyHitters"], _cm.ROWS_VERSION, 0, self.bits,
                                 self.level_bits) + struct.pack("<" + _cm.LAYOUT.parameters, *self.levels.params)
            out[at] = self.rows.take(at).to_bytes(self.levels.params, newest[at], head)
            rest = np.flatnonzero(~in_rows)
            if rest.size:
                out[rest] = HeavyHittersColumn(self.bits, self.level_bits, self.take(rest).levels).to_bytes()
            return out.tolist()
        levels, l_off = sealed_spans(*self.levels._sealing())
        sizes = np.diff(l_off)
        table, nbytes = varint_stream(sizes)  # each sketch's level lengths, then its levels (consecutive)
        t_off = np.concatenate([[0], np.cumsum(nbytes)])[::depth]
        firsts, ends = l_off[:-1:depth], l_off[depth::depth]  # each sketch's levels
        piece_starts, piece_ends = np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=np.int64)
        piece_starts[0::2], piece_ends[0::2] = t_off[:-1], t_off[1:]
        piece_starts[1::2], piece_ends[1::2] = table.size + firsts, table.size + ends
        payload = gather(np.concatenate([table, levels]), piece_starts, piece_ends)
        p_off = np.concatenate([[0], np.cumsum(np.diff(t_off) + ends - firsts)])
        head = _HH_HEAD.pack(MAGIC, FAMILIES["SlidingHeavyHitters"], _hh.LAYOUT.version, 0, self.bits,
                             self.level_bits) + bytes([depth])
        return sealed_blobs(head, np.zeros(n, dtype=np.uint16), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool),
                            payload, p_off[:-1], p_off[1:])


def _exact_hitters_of_rows(rows: Rows, phi: float, group_of, exact_g, group_now, window, full: int) -> Hitters:
    """The heavy hitters of the groups ``exact_g`` from their sketches'
    rows (ids in place of hashes) in the window as of each group's time:
    each id whose frequency reaches ``max(phi T, 1)``, exact (the rows
    form's :meth:`SlidingHeavyHitters.heavy_hitters`), in the order of
    :class:`Hitters`, for those groups only (numbered among them)."""
    w = full if window is None else int(window)
    owner = rows.owner
    g = group_of[owner]
    inside = exact_g[g] & (rows.ts > cutoffs(group_now, w)[g])
    g, ids, v = g[inside], rows.hashes[inside], rows.values[inside]
    rank = np.cumsum(exact_g) - 1  # each exact group's place among them
    count = int(exact_g.sum())
    totals = np.zeros(count, dtype=np.int64)
    np.add.at(totals, rank[g], v)
    order = np.lexsort((ids, g))
    g, ids, v = g[order], ids[order], v[order]
    if g.size:
        first = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (ids[1:] != ids[:-1])])
        g, ids, sums = g[first], ids[first], np.add.reduceat(v, first)
    else:
        sums = v
    threshold = np.maximum(float(phi) * totals.astype(np.float64), 1.0)
    keep = sums >= threshold[rank[g]]
    g, ids, sums = rank[g][keep], ids[keep], sums[keep]
    return Hitters.of(count, g, ids, sums.astype(np.float64), sums, sums)


def _placed_hitters(groups: int, parts: list) -> Hitters:
    """One :class:`Hitters` of ``parts`` (``(hitters, groups)`` each,
    together every group once), in group order."""
    cg, item, est, lower, upper = [], [], [], [], []
    for h, at in parts:
        cg.append(np.repeat(np.asarray(at, dtype=np.int64), np.diff(h.offsets)))
        item.append(h.item)
        est.append(h.estimate)
        lower.append(h.lower)
        upper.append(h.upper)
    if not parts:
        return Hitters.of(groups, *(np.zeros(0, dtype=t) for t in (np.int64, np.uint64, np.float64, np.int64,
                                                                    np.int64)))
    return Hitters.of(groups, *(np.concatenate(a) for a in (cg, item, est, lower, upper)))


def _level_rows(sketches: np.ndarray, depth: int) -> np.ndarray:
    """The level rows of ``sketches`` (each ``depth`` levels), in order."""
    return (np.asarray(sketches, dtype=np.int64)[:, None] * depth + np.arange(depth)).ravel()
