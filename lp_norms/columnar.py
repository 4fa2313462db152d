"""Many sliding L_p sketches at once, in flat arrays.

A stored table of :class:`~lp_norms.SlidingLpNorm` sketches (one per key
and site) is answered and united one sketch at a time by the class:
decoding and estimating one costs ~90 us, uniting a key's four sketches
~5 ms (each of its ~60 bucket decisions takes a median through numpy
calls; 48 KB sketches at eps 0.1, measured).  :class:`LpColumn` keeps the
buckets of many sketches of one set of parameters in three arrays and
does each step for all of them in one compiled loop
(:mod:`lp_norms.compiled`, when :func:`ehist.compiled.active`; else one
sketch at a time through the class):

* :meth:`LpColumn.from_bytes`: decode, with every check of
  ``SlidingLpNorm.from_bytes`` (what the loop does not accept goes to it,
  and it names what is wrong);
* :meth:`LpColumn.union`: each group's ``SlidingLpNorm.merge_all``, byte
  for byte;
* :meth:`LpColumn.estimates`: ``SlidingLpNorm.estimate`` of each, and
  :meth:`LpColumn.sum_estimates` the norm of each group's sketches added
  as of one time (``LpNorm.union``), the same floats;
* :meth:`LpColumn.to_bytes`: ``SlidingLpNorm.to_bytes`` of each.

Sketches of sparse keys keep their elements (the elements form,
:mod:`lp_norms.elements`): the column carries them beside the buckets and
does each step for them in numpy passes (exact norms), a group of both
forms taking the buckets its elements build.

For instance, two sketches of one stream's halves, united:

>>> import numpy as np
>>> from lp_norms import SlidingLpNorm
>>> ts = np.arange(0, 400, 3)
>>> parts = [SlidingLpNorm(2.0, 200, 0.3, 0.3).update(ts[p::2], ts[p::2] % 17) for p in range(2)]
>>> col = LpColumn.from_bytes([s.to_bytes() for s in parts])
>>> united = col.union([0])
>>> united.to_bytes() == [SlidingLpNorm.merge_all(parts).to_bytes()]
True
>>> united.estimates([500], 150).tolist() == [SlidingLpNorm.merge_all(parts).estimate(500, 150)]
True
"""

from __future__ import annotations

import sys

import numpy as np

from ehist import compiled as ehist_compiled
from ehist.blobs import Blobs
from ehist.columnar import check_starts, sealed_blobs, sealed_heads
from ehist.errors import IncompatibleSketchError
from ehist.hashing import as_hashes
from ehist.segments import gather
from ehist.serialization import MAGIC, PREAMBLE_BYTES, VERSION_AT
from ehist.validation import INT64_MIN, coerce_times, coerce_timestamps

from ehist.flat_rows import union_groups

from .elements import Elements, cutoffs
from .sliding import _BLOCK_CELLS, ELEMENTS_VERSION, FLAG_ELEMENTS, LAYOUT, SlidingLpNorm
from .stable import stable_variates
from .stable_sketch import float_values

__all__ = ["LpColumn"]

_NEWEST_AT = LAYOUT.head.size  # the newest timestamp follows the preamble and parameters
_LITTLE = sys.byteorder == "little"


class LpColumn:
    """The buckets of many :class:`~lp_norms.SlidingLpNorm` sketches of
    one set of parameters ``params`` (p, window, eps, delta, seed, rows).

    Sketches in the elements form (``form``) have their elements in
    ``elements`` (:class:`~lp_norms.elements.Elements`) and no bucket.
    Sketch ``s`` has buckets ``offsets[s]:offsets[s + 1]``, newest first:
    their sums ``sk`` (one row of ``rows`` float64 each), newest and
    oldest times ``hi`` and ``lo``; and a newest time ``newest[s]`` where
    ``has_newest[s]`` (a sketch without one holds no bucket).
    """

    __slots__ = ("params", "offsets", "hi", "lo", "newest", "has_newest", "data", "at", "_sk", "elements", "form")

    def __init__(self, params, offsets, sk, hi, lo, newest, has_newest, elements: Elements | None = None, form=None):
        self.elements = Elements.empty(len(newest)) if elements is None else elements
        self.form = np.zeros(len(newest), dtype=bool) if form is None else np.asarray(form, dtype=bool)
        self.params = tuple(params)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.hi = np.asarray(hi, dtype=np.int64)
        self.lo = np.asarray(lo, dtype=np.int64)
        self.newest = np.asarray(newest, dtype=np.int64)
        self.has_newest = np.asarray(has_newest, dtype=bool)
        self._sk = np.ascontiguousarray(sk, dtype=np.float64).reshape(-1, int(self.params[5]))
        self.data = self._sk.reshape(-1).view(np.uint8)
        self.at = 8 * int(self.params[5]) * self.offsets[:-1]

    @classmethod
    def _in_bytes(cls, params, offsets, data, at, hi, lo, newest, has_newest) -> "LpColumn":
        """A column whose sketch ``s`` has its sums (native float64) at
        ``data[at[s]:]``, one bucket after the other: the stored bytes
        themselves, read in place."""
        out = cls(params, offsets, np.zeros((0, int(params[5]))), hi, lo, newest, has_newest)
        out.data, out.at, out._sk = data, np.asarray(at, dtype=np.int64), None
        return out

    @property
    def sk(self) -> np.ndarray:
        """The sums of every bucket (buckets x rows), in sketch order."""
        if self._sk is None:
            rows = int(self.params[5])
            ends = self.at + 8 * rows * np.diff(self.offsets)
            self._sk = gather(self.data, self.at, ends).view(np.float64).reshape(-1, rows)
        return self._sk

    def __len__(self) -> int:
        return int(self.newest.size)

    def __repr__(self) -> str:
        return f"LpColumn(sketches={len(self)}, buckets={self.hi.size}, rows={self.params[5]})"

    def _empty(self) -> SlidingLpNorm:
        return SlidingLpNorm(*self.params[:5], rows=self.params[5])

    @property
    def _any_elements(self) -> bool:
        return bool(self.form.any())

    def __getitem__(self, s: int) -> SlidingLpNorm:
        """Sketch ``s`` as a :class:`~lp_norms.SlidingLpNorm`."""
        out = self._empty()
        if self.has_newest[s] and self.form[s]:
            out._elements, out._newest = self.elements.sketch(s), int(self.newest[s])
            return out
        if self.has_newest[s]:
            out._elements = None
            a, b = int(self.offsets[s]), int(self.offsets[s + 1])
            start, rows = int(self.at[s]), int(self.params[5])
            out._sk = self.data[start:start + 8 * rows * (b - a)].view(np.float64).reshape(b - a, rows).copy()
            out._hi, out._lo = self.hi[a:b].copy(), self.lo[a:b].copy()
            out._newest = int(self.newest[s])
        return out

    # ------------------------------------------------------------ building
    @classmethod
    def from_sketches(cls, sketches) -> "LpColumn":
        """The column of sketches of one set of parameters."""
        sketches = list(sketches)
        if not sketches:
            raise ValueError("from_sketches needs at least one sketch")
        params = {s._params() for s in sketches}
        if len(params) > 1:
            raise IncompatibleSketchError(f"a column holds sketches of one p, window, eps, delta, seed and rows, "
                                          f"got {sorted(params)}")
        rows = sketches[0].rows
        form = np.array([s._elements is not None and s.newest is not None for s in sketches], dtype=bool)
        return cls(sketches[0]._params(), np.concatenate([[0], np.cumsum([s._hi.size for s in sketches])]),
                   np.concatenate([s._sk for s in sketches]).reshape(-1, rows) if sketches else np.zeros((0, rows)),
                   np.concatenate([s._hi for s in sketches]), np.concatenate([s._lo for s in sketches]),
                   [0 if s.newest is None else s.newest for s in sketches], [s.newest is not None for s in sketches],
                   Elements.of([s._elements if f else None for s, f in zip(sketches, form.tolist())]), form)

    @classmethod
    def build(cls, timestamps, starts, hashes, values=None, *, params, elements: bool = True) -> "LpColumn":
        """One sketch of ``params`` (p, window, eps, delta, seed, rows) per
        run of rows (run ``i``: rows ``starts[i]`` to ``starts[i + 1]``,
        the last to the end), each ``SlidingLpNorm(...).update_hashes(ts,
        hashes, values)`` of its rows, the same bytes: every run's
        timestamp sketches in a few numpy passes over the batch (each
        index's stable variables generated once), then every run bucketed
        in one compiled loop.

        Raises
        ------
        ValueError
            As ``update_hashes`` raises it, for the first run it refuses.

        Examples
        --------
        >>> from ehist.hashing import hash64
        >>> ts, h, v = np.array([1, 4, 2, 3]), hash64(np.array([7, 8, 7, 9]), 0), np.array([2.0, 1, 5, 1])
        >>> col = LpColumn.build(ts, [0, 2], h, v, params=(2.0, 100, 0.3, 0.3, 0, 8))
        >>> col.to_bytes()[1] == SlidingLpNorm(2.0, 100, 0.3, 0.3, rows=8).update_hashes(ts[2:], h[2:], v[2:]).to_bytes()
        True
        """
        params = tuple(params)
        ts = coerce_timestamps(timestamps)
        h = as_hashes(hashes)
        if h.size != ts.size:
            raise ValueError(f"timestamps and indices have different lengths ({ts.size} and {h.size})")
        v = float_values(values, ts.size, nonnegative=True, against="timestamps")
        starts = check_starts(starts, ts.size)
        ends = np.append(starts[1:], ts.size)
        probe = SlidingLpNorm(*params[:5], rows=params[5])
        ts0, h0, v0 = ts, h, v
        if not starts.size:
            return cls(params, [0], np.zeros((0, int(params[5]))), [], [], [], [])
        if not _compiled(params) or not ts.size or int(ts.min()) == INT64_MIN:
            def fresh():
                out = SlidingLpNorm(*params[:5], rows=params[5])
                if not elements:  # buckets from the start
                    out._elements = None
                return out

            return cls.from_sketches([fresh().update_hashes(ts[a:z], h[a:z], v[a:z])
                                      for a, z in zip(starts.tolist(), ends.tolist())])
        if elements:  # runs of at most rows elements keep them; the others' buckets from their rows
            return cls._build_forms(ts, starts, ends, h, v, params)
        runs, rows, window = starts.size, int(params[5]), int(params[1])
        run_of = np.repeat(np.arange(runs, dtype=np.int64), ends - starts)
        # each run stably by time (update's sort), cut to its window as of its newest row, zeros dropped
        order = np.lexsort((ts, run_of))
        ts, h, v, run_of = ts[order], h[order], v[order], run_of[order]
        has = ends > starts
        newest = np.zeros(runs, dtype=np.int64)
        newest[has] = ts[ends[has] - 1]
        run_new = newest[run_of]
        keep = ((run_new < INT64_MIN + window) | (ts > run_new - np.where(run_new < INT64_MIN + window, 0, window))) \
            & (v > 0)
        ts, h, v, run_of = ts[keep], h[keep], v[keep], run_of[keep]
        # SlidingLpNorm._atoms: each (time, index)'s values summed in row order, each time's sketch the sum over its
        # indexes in hash order of the index's variables times that sum
        order = np.lexsort((h, ts, run_of))
        ts, h, v, run_of = ts[order], h[order], v[order], run_of[order]
        new_pair = np.r_[True, (run_of[1:] != run_of[:-1]) | (ts[1:] != ts[:-1]) | (h[1:] != h[:-1])] if ts.size \
            else np.zeros(0, dtype=bool)
        pair = np.flatnonzero(new_pair)
        vals = np.add.reduceat(v, pair) if pair.size else v[:0]
        ts, h, run_of = ts[pair], h[pair], run_of[pair]
        atom = np.flatnonzero(np.r_[True, (run_of[1:] != run_of[:-1]) | (ts[1:] != ts[:-1])]) if ts.size else pair
        atoms = np.empty((atom.size, rows))
        step = max(1, _BLOCK_CELLS // rows)  # about this many (time, index) pairs per chunk, cut at an atom's start
        a = 0
        while a < atom.size:
            p0 = int(atom[a])
            z = atom.size if ts.size - p0 <= step else max(a + 1, int(np.searchsorted(atom, p0 + step, "right")) - 1)
            p1 = int(atom[z]) if z < atom.size else ts.size
            uniq, inverse = np.unique(h[p0:p1], return_inverse=True)
            x = stable_variates(params[0], params[4], rows, uniq)
            atoms[a:z] = np.add.reduceat(x.T[inverse] * vals[p0:p1, None], atom[a:z] - p0, axis=0)
            a = z
        from . import compiled

        key_off = np.concatenate([[0], np.cumsum(np.bincount(run_of[atom], minlength=runs))]).astype(np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            offsets, sk, hi, lo = compiled.build(atoms, ts[atom], key_off, max(1, _BLOCK_CELLS // rows),
                                                 probe._cf / probe._k, probe._q, probe._median)
            # every window's sum finite (update's check): surely so when the largest value times the most
            # buckets of a run is; else each run's column sums, as update adds them
            most = int(np.diff(offsets).max()) if runs else 0
            finite = not sk.size or float(np.abs(sk).max()) * most < 1e300
            if not finite:
                owner = np.repeat(np.arange(runs), np.diff(offsets))
                sums = np.zeros((runs, rows))
                np.add.at(sums, owner, np.abs(sk))
                finite = bool(np.isfinite(sums).all())
        if not finite:  # update refuses a state its bytes could not hold: its message, for the first run
            return cls.from_sketches([SlidingLpNorm(*params[:5], rows=params[5]).update_hashes(
                ts0[a:z], h0[a:z], v0[a:z]) for a, z in zip(starts.tolist(), ends.tolist())])
        return cls(params, offsets, sk, hi, lo, newest, has)

    @classmethod
    def _build_forms(cls, ts, starts, ends, h, v, params) -> "LpColumn":
        """:meth:`build` of runs in either form: each run's canonical
        elements (:meth:`~lp_norms.elements.Elements.canonical`), kept
        where at most ``rows``; the other runs' buckets built from their
        rows (the same buckets as from their elements: ``_atoms`` sums each
        pair's values in the rows' order, as the elements do)."""
        runs, rows, window = starts.size, int(params[5]), int(params[1])
        sizes = ends - starts
        has = sizes > 0
        run_of = np.repeat(np.arange(runs, dtype=np.int64), sizes)
        newest = np.full(runs, INT64_MIN, dtype=np.int64)
        np.maximum.at(newest, run_of, ts)
        newest = np.where(has, newest, 0)
        held = Elements.canonical(run_of, ts, h, v, newest, window, runs)  # equal pairs summed in the rows' order
        with np.errstate(over="ignore"):
            sums = np.bincount(held.owner, weights=np.abs(held.values), minlength=runs)
        if not np.isfinite(sums).all():  # update refuses those (its message)
            return cls.from_sketches([SlidingLpNorm(*params[:5], rows=params[5]).update_hashes(
                ts[a:z], h[a:z], v[a:z]) for a, z in zip(starts.tolist(), ends.tolist())])
        form = has & (held.counts <= rows)
        small, big = np.flatnonzero(~has | form), np.flatnonzero(has & ~form)
        parts = []
        if big.size:
            sel = np.concatenate([np.arange(starts[i], ends[i]) for i in big.tolist()]) if big.size < 64 else \
                np.flatnonzero(np.isin(run_of, big))
            sub_starts = np.concatenate([[0], np.cumsum(sizes[big])[:-1]])
            parts.append(cls.build(ts[sel], sub_starts, h[sel], v[sel], params=params, elements=False))
        if small.size:
            k = small.size
            parts.append(cls(params, np.zeros(k + 1, dtype=np.int64), np.zeros((0, rows)), [], [],
                             np.where(has[small], newest[small], 0), has[small], held.take(small), form[small]))
        position = np.empty(runs, dtype=np.int64)
        position[np.concatenate([big, small])] = np.arange(runs)
        return (parts[0] if len(parts) == 1 else cls.concat(parts)).take(position)

    @classmethod
    def from_bytes(cls, blobs) -> "LpColumn":
        """Decode many ``SlidingLpNorm.to_bytes`` outputs of one set of
        parameters at once.

        Raises
        ------
        CorruptSketchError
            As ``SlidingLpNorm.from_bytes`` raises it, for the first blob
            (in order) the compiled checks do not pass and it refuses.
        IncompatibleSketchError
            Sketches of different parameters.
        """
        blobs = Blobs.of(blobs)
        if not len(blobs):
            raise ValueError("from_bytes needs at least one blob")
        ok, parsed = _decode_fast(blobs) if ehist_compiled.active() and _LITTLE else \
            (np.zeros(len(blobs), dtype=bool), None)
        in_elements, listed = _decode_elements(blobs, ok) if _LITTLE else (np.zeros(len(blobs), dtype=bool), None)
        slow = np.flatnonzero(~(ok | in_elements))
        slow_col = cls.from_sketches([SlidingLpNorm.from_bytes(blobs[i]) for i in slow.tolist()]) if slow.size \
            else None  # raises for corrupt bytes
        parts = [(c, at) for c, at in ((parsed, np.flatnonzero(ok)), (listed, np.flatnonzero(in_elements)),
                                       (slow_col, slow)) if c is not None]
        if len(parts) == 1:
            return parts[0][0]
        if len({c.params for c, _ in parts}) > 1:
            raise IncompatibleSketchError(f"a column holds sketches of one p, window, eps, delta, seed and rows, "
                                          f"got {sorted({c.params for c, _ in parts})}")
        position = np.empty(len(blobs), dtype=np.int64)
        position[np.concatenate([at for _, at in parts])] = np.arange(len(blobs))
        return cls.concat([c for c, _ in parts]).take(position)

    @classmethod
    def concat(cls, columns) -> "LpColumn":
        """The sketches of several columns of one set of parameters, in order."""
        cols = list(columns)
        if len({c.params for c in cols}) > 1:
            raise IncompatibleSketchError(f"a column holds sketches of one p, window, eps, delta, seed and rows, "
                                          f"got {sorted({c.params for c in cols})}")
        shift = np.cumsum([0] + [int(c.offsets[-1]) for c in cols[:-1]])
        return cls(cols[0].params, np.concatenate([[0]] + [c.offsets[1:] + s for c, s in zip(cols, shift)]),
                   *(np.concatenate([getattr(c, a) for c in cols]) for a in ("sk", "hi", "lo", "newest",
                                                                              "has_newest")),
                   Elements.concat([c.elements for c in cols]), np.concatenate([c.form for c in cols]))

    def take(self, indices) -> "LpColumn":
        """The sketches at ``indices``, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        a, b = self.offsets[idx], self.offsets[idx + 1]
        rows = np.repeat(a - np.concatenate([[0], np.cumsum(b - a)[:-1]]), b - a) + np.arange(int((b - a).sum()))
        return LpColumn(self.params, np.concatenate([[0], np.cumsum(b - a)]), self.sk[rows], self.hi[rows],
                        self.lo[rows], self.newest[idx], self.has_newest[idx], self.elements.take(idx), self.form[idx])

    # --------------------------------------------------------------- union
    def union(self, group_starts) -> "LpColumn":
        """Each group's ``SlidingLpNorm.merge_all`` (group ``i``: sketches
        ``group_starts[i]`` to the next start, united in that order), the
        same bytes; groups in the elements form united as ``merge_all``
        unites them (kept where they fit), the elements form's members of
        the other groups taking buckets first."""
        starts = _check_starts(group_starts, len(self))
        if self._any_elements:
            return self._union_with_elements(starts)
        if not _compiled(self.params):
            ends = np.append(starts[1:], len(self)).tolist()
            return LpColumn.from_sketches([SlidingLpNorm.merge_all([self[i] for i in range(a, z)])
                                           for a, z in zip(starts.tolist(), ends)])
        probe = self._empty()
        from . import compiled

        offsets, sk, hi, lo, newest, has = compiled.union(
            self.data, self.at, self.hi, self.lo, self.offsets, self.newest, self.has_newest, starts, self.params[1],
            self.params[5], probe._cf / probe._k, probe._q, probe._median)
        return LpColumn(self.params, offsets, sk, hi, lo, newest, has)

    def _union_with_elements(self, starts) -> "LpColumn":
        n, groups = len(self), starts.size
        live = self.has_newest
        group_of, lone, pick, rows_only = union_groups(starts, n, live, self.form)
        g_newest = np.full(groups, INT64_MIN, dtype=np.int64)
        np.maximum.at(g_newest, group_of[live], self.newest[live])
        candidate = ~lone & rows_only
        members = np.flatnonzero(candidate[group_of])
        part = self.elements.take(members)
        united = Elements.canonical(group_of[members][part.owner], part.ts, part.hashes, part.values, g_newest,
                                    int(self.params[1]), groups)
        with np.errstate(over="ignore", invalid="ignore"):
            sums = np.bincount(united.owner, weights=np.abs(united.values), minlength=groups)
        heavy = candidate & ~(sums < 1e300)  # near float64's end: the class's merge_all decides
        kept = (lone & self.form[pick] & live[pick]) | (candidate & ~heavy & (united.counts <= int(self.params[5])))
        parts = []
        if heavy.any():
            ends = np.append(starts[1:], n)
            at = np.flatnonzero(heavy)
            parts.append((LpColumn.from_sketches([SlidingLpNorm.merge_all([self[i] for i in range(int(starts[g]),
                                                                                              int(ends[g]))])
                                                  for g in at.tolist()]), at))
            kept |= heavy  # placed already
        at = np.flatnonzero(kept & ~heavy)
        if at.size:
            held = Elements.concat([self.elements.take(pick), united]).take(np.where(lone, 0, groups)
                                                                            + np.arange(groups)).take(at)
            parts.append((LpColumn(self.params, np.zeros(at.size + 1, dtype=np.int64), np.zeros((0, self.params[5])),
                                   [], [], np.where(lone[at], self.newest[pick[at]], g_newest[at]),
                                   np.ones(at.size, dtype=bool), held, np.ones(at.size, dtype=bool)), at))
        rest = np.flatnonzero(~kept)
        if rest.size:
            sub = self.take(np.flatnonzero(~kept[group_of]))._as_buckets()
            sub_starts = np.searchsorted(np.flatnonzero(~kept[group_of]), starts[rest])
            parts.append((sub.union(sub_starts), rest))
        position = np.empty(groups, dtype=np.int64)
        position[np.concatenate([a for _, a in parts])] = np.arange(groups)
        return (parts[0][0] if len(parts) == 1 else LpColumn.concat([c for c, _ in parts])).take(position)

    def _as_buckets(self) -> "LpColumn":
        """Every sketch holding buckets (those in the elements form: the
        buckets their elements build as of their newest time, all at once:
        :meth:`build` of their elements and a zero at each one's newest)."""
        at = np.flatnonzero(self.form & self.has_newest)
        if not at.size:
            return LpColumn(self.params, self.offsets, self.sk, self.hi, self.lo, self.newest, self.has_newest)
        part = self.elements.take(at)
        k = part.counts + 1  # and the zero at the newest time
        ts = np.insert(part.ts, part.offsets[1:], self.newest[at])
        h = np.insert(part.hashes, part.offsets[1:], np.uint64(0))
        v = np.insert(part.values, part.offsets[1:], 0.0)
        built = LpColumn.build(ts, np.concatenate([[0], np.cumsum(k)[:-1]]), h, v, params=self.params,
                               elements=False)
        rest = np.flatnonzero(~(self.form & self.has_newest))
        others = self.take(rest)
        others = LpColumn(self.params, others.offsets, others.sk, others.hi, others.lo, others.newest,
                          others.has_newest)
        position = np.empty(len(self), dtype=np.int64)
        position[np.concatenate([rest, at])] = np.arange(len(self))
        return LpColumn.concat([others, built]).take(position)

    # --------------------------------------------------------------- query
    def estimates(self, now=None, window: int | None = None) -> np.ndarray:
        """``self[s].estimate(now[s], window)`` of every sketch (``now``:
        one time, one per sketch, or None for each one's newest), the same
        floats.

        Raises
        ------
        ValueError
            A ``now`` before a sketch's newest time, a window outside
            ``[1, window]``: as ``estimate`` raises them, for the first.
        """
        count = len(self)
        at = None if now is None else np.broadcast_to(coerce_times(now, "now"), (count,)).astype(np.int64)
        self._check_query(at, window)
        out = self._estimates(at, window, np.arange(count, dtype=np.int64))
        if self._any_elements:  # the elements form: exact
            w = int(self.params[1]) if window is None else int(window)
            exact = self.elements.norms(self.params[0], cutoffs(self.newest if at is None else at, w),
                                        np.arange(count, dtype=np.int64))
            out = np.where(self.form & self.has_newest, exact, out)
        return out

    def sum_estimates(self, group_starts, at=None) -> np.ndarray:
        """The norm of each group's sketches added (the sketch is linear),
        as of ``at`` (one time for all, or None: each group's newest),
        each over its whole window: ``LpNorm.union``'s answers, the same
        floats (a group without a newest time: 0.0).

        Raises
        ------
        ValueError
            ``at`` before a sketch's newest time, as ``sketch`` raises it.
        """
        starts = _check_starts(group_starts, len(self))
        count = len(self)
        group_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, count)))
        if at is None:
            newest = np.full(starts.size, INT64_MIN, dtype=np.int64)
            np.maximum.at(newest, group_of[self.has_newest], self.newest[self.has_newest])
            times = newest[group_of]
        else:
            times = np.full(count, int(at), dtype=np.int64)
            self._check_query(times, None)
        if not self._any_elements:
            return self._estimates(times, None, starts)
        # groups of the elements form alone: their exact norm; groups with both forms: the class's own answer
        live = self.has_newest
        exact_g = np.bincount(group_of[live & ~self.form], minlength=starts.size) == 0
        mixed = ~exact_g & (np.bincount(group_of[live & self.form], minlength=starts.size) > 0)
        out = self._estimates(times, None, starts)
        out = np.where(exact_g, self.elements.norms(self.params[0], cutoffs(times, int(self.params[1])), starts),
                       out)
        ends = np.append(starts[1:], count)
        for g in np.flatnonzero(mixed).tolist():
            out[g] = SlidingLpNorm.union_estimate([self[i] for i in range(int(starts[g]), int(ends[g]))],
                                                  int(times[starts[g]]))
        return out

    def _check_query(self, at, window) -> None:
        """Raise what ``estimate`` raises for the first sketch a query
        time or the window does not suit."""
        count = len(self)
        late = np.zeros(count, dtype=bool) if at is None else (at < self.newest) & self.has_newest
        if count and (late.any() or window is not None):
            bad = int(np.argmax(late)) if late.any() else 0
            self[bad].estimate(None if at is None else int(at[bad]), window)

    def _estimates(self, at, window, group_starts) -> np.ndarray:
        """Each group's sketches composed as of ``at`` (None: each
        sketch's newest) over ``window``, added in order, estimated."""
        if not _compiled(self.params):
            ends = np.append(group_starts[1:], len(self)).tolist()
            return np.array([
                float(np.median(np.abs(sum(self[s].sketch(None if at is None else int(at[s]), window)
                                           for s in range(a, z))))) / self._empty()._median
                for a, z in zip(group_starts.tolist(), ends)], dtype=np.float64)
        w = self.params[1] if window is None else int(window)
        times = self.newest if at is None else at
        # max(now - window, INT64_MIN); a sketch without a time has no bucket
        low = times < INT64_MIN + w
        cutoffs = np.where(low, INT64_MIN, times - np.where(low, 0, w))
        from . import compiled

        return compiled.window_estimates(self.data, self.at, self.lo, self.offsets, cutoffs, group_starts,
                                         self.params[5], self._empty()._median)

    # --------------------------------------------------------- serialization
    def to_bytes(self) -> list:
        """``[self[s].to_bytes() for s in range(len(self))]``, in one pass."""
        if not len(self):
            return []
        in_elements = self.form & self.has_newest
        if in_elements.any():  # the elements form's blobs in one pass, the others' in another
            out = np.empty(len(self), dtype=object)
            at = np.flatnonzero(in_elements)
            head = LAYOUT.head.pack(MAGIC, LAYOUT.family_id, ELEMENTS_VERSION, 0, *self.params)
            out[at] = self.elements.take(at).to_bytes(head, 1 | FLAG_ELEMENTS, self.newest[at])
            rest = np.flatnonzero(~in_elements)
            if rest.size:
                others = self.take(rest)
                out[rest] = LpColumn(self.params, others.offsets, others.sk, others.hi, others.lo, others.newest,
                                     others.has_newest).to_bytes()
            return out.tolist()
        if not _compiled(self.params):
            return [self[s].to_bytes() for s in range(len(self))]
        from . import compiled

        payload, ends = compiled.payloads(self.data, self.at, self.hi, self.lo, self.offsets, self.newest,
                                          self.has_newest, self.params[5])
        head = LAYOUT.head.pack(MAGIC, LAYOUT.family_id, LAYOUT.version, 0, *self.params)
        return sealed_blobs(head, self.has_newest.astype(np.int64), self.newest, self.has_newest, payload, ends[:-1],
                            ends[1:])


def _compiled(params) -> bool:
    """Whether the compiled loops give the class's floats and bytes for
    sketches of ``params``: numba runs, the machine is little-endian (the
    loops read stored sums in place), and the sketches have two rows or
    more (numpy sums a single column of buckets pairwise, the loops in
    order)."""
    return ehist_compiled.active() and _LITTLE and params[5] >= 2


def _check_starts(group_starts, n: int) -> np.ndarray:
    """``group_starts`` as int64, checked (ValueError): groups of ``n``
    sketches that start at 0 and rise strictly."""
    from .compiled import groups_checked

    return groups_checked(group_starts, n)


def _first_parameters(buf, starts, idx, ok) -> tuple:
    """``(params, idx, newest)``: the parameters of blob ``idx[0]`` and the
    blobs of ``idx`` that hold them and a newest time (``ok`` cleared for
    the others; ``params`` None, every one cleared, where they do not make
    a sketch: ``from_bytes`` names the bad parameter)."""
    fields = buf[starts[idx][:, None] + np.arange(PREAMBLE_BYTES, _NEWEST_AT)]
    params = LAYOUT.head.unpack(b"\0" * PREAMBLE_BYTES + fields[0].tobytes())[4:]
    try:
        probe = SlidingLpNorm(*params[:5], rows=params[5])
    except (ValueError, TypeError, OverflowError):
        probe = None
    if probe is None or probe._params() != params:
        ok[:] = False
        return None, idx[:0], None
    newest = np.ascontiguousarray(buf[starts[idx][:, None] + np.arange(_NEWEST_AT, _NEWEST_AT + 8)]).view(
        "<i8").ravel().astype(np.int64)
    same = (fields == fields[0]).all(axis=1) & (newest != INT64_MIN)
    ok[idx[~same]] = False
    return params, idx[same], newest[same]


def _decode_fast(blobs: Blobs):
    """``(accepted mask, column of the accepted)``: the sketches with a
    newest time whose every check of ``SlidingLpNorm.from_bytes`` passes
    in the compiled reader; the rest (empty sketches, anything suspect,
    parameters other than the first accepted sketch's) are left to it."""
    ok, buf, starts, lengths = sealed_heads(blobs, LAYOUT.family_id, _NEWEST_AT + 8 + 1 + 4, 0)
    ok[ok] = buf[starts[ok] + VERSION_AT] == LAYOUT.version
    idx = np.flatnonzero(ok)
    if not idx.size:
        return ok, None
    params, idx, newest = _first_parameters(buf, starts, idx, ok)
    if params is None:
        return ok, None
    from . import compiled

    rows, window = int(params[5]), int(params[1])
    read, n, hi, lo, at = compiled.decode(buf, starts[idx] + _NEWEST_AT + 8, starts[idx] + lengths[idx] - 4, newest,
                                          rows, window)
    ok[idx[~read]] = False
    idx, newest = idx[read], newest[read]
    if not idx.size:
        return ok, None
    return ok, LpColumn._in_bytes(params, np.concatenate([[0], np.cumsum(n)]), buf, at, hi, lo, newest,
                                  np.ones(idx.size, dtype=bool))


def _decode_elements(blobs: Blobs, fast) -> tuple:
    """``(accepted mask, column of the accepted)``: the sketches in the
    elements form (version 2) whose every check of
    ``SlidingLpNorm.from_bytes`` passes in one vectorized pass
    (:meth:`~lp_norms.elements.Elements.read`), of the first one's
    parameters; ``fast``: blobs already decoded (left alone)."""
    ok, buf, starts, lengths = sealed_heads(blobs, LAYOUT.family_id, _NEWEST_AT + 8 + 1 + 4, FLAG_ELEMENTS)
    ok &= ~fast
    ok[ok] = (buf[starts[ok] + VERSION_AT] == ELEMENTS_VERSION) & (buf[starts[ok] + VERSION_AT + 1]
                                                                   == 1 | FLAG_ELEMENTS)
    idx = np.flatnonzero(ok)
    if not idx.size:
        return ok, None
    params, idx, newest = _first_parameters(buf, starts, idx, ok)
    if params is None:
        return ok, None
    good, held = Elements.read(buf, starts[idx] + _NEWEST_AT + 8, starts[idx] + lengths[idx] - 4, newest,
                               int(params[5]), int(params[1]))
    ok[idx[~good]] = False
    idx, newest = idx[good], newest[good]
    if not idx.size:
        return ok, None
    held = held.take(np.flatnonzero(good))
    k = idx.size
    return ok, LpColumn(params, np.zeros(k + 1, dtype=np.int64), np.zeros((0, int(params[5]))), [], [], newest,
                        np.ones(k, dtype=bool), held, np.ones(k, dtype=bool))
