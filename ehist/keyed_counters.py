"""The keyed counters of many sketches at once, in flat arrays.

The ECM-sketch (:mod:`frequencies`) and the sliding quantiles
(:mod:`quantiles`) keep, per sketch, the counters holding units: sorted
int64 keys and one exponential histogram each (:mod:`ehist.counters`).  A
sketch table holds one such sketch per key and site; decoding, uniting and
encoding them one sketch at a time costs about a millisecond of numpy calls
each, minutes at a hundred thousand keys.  :class:`KeyedCounters` holds the
counters of many sketches as one :class:`~ehist.columnar.HistogramColumn`
(sketch ``s``'s counters ``offsets[s]:offsets[s + 1]``, sorted by key) and
does each step for all of them in a few numpy passes:

* :meth:`KeyedCounters.read`: the counter regions :func:`ehist.counters.write_counters`
  wrote (``varint n``, ``n`` gaps, ``n`` byte lengths, ``n`` compact
  histograms) of many sketches, with every check of
  :func:`ehist.counters.read_keyed`;
* :meth:`KeyedCounters.write`: those regions, byte for byte;
* :meth:`KeyedCounters.unite`: each group of sketches' union, as
  :func:`ehist.counters.merge_keyed` gives it, one
  :func:`~ehist.columnar_union.union_column` for every counter of every
  group.

The family modules wrap their own heads and checksums around the regions
(:mod:`frequencies.columnar`); what the vectorized checks reject is left to
the family's ``from_bytes``, which names what is wrong.

Examples
--------
>>> import numpy as np
>>> from ehist.counters import apply_keyed, empty, merge_keyed
>>> parts = [apply_keyed(np.zeros(0, np.int64), empty(100, 0.1, 0), np.array(ids), np.array(ts), None, 50)
...          for ids, ts in (([3, 7, 7], [10, 20, 30]), ([7, 9], [40, 50]))]
>>> kc = KeyedCounters.from_keyed(parts, [50, 50])
>>> united = kc.unite([0])                        # both sketches in one group
>>> keys, col = merge_keyed(parts, 50)
>>> united.keys.tolist() == keys.tolist(), united.col.to_bytes() == col.to_bytes()
(True, True)
>>> buf, offsets = kc.write()
>>> ok, again = KeyedCounters.read(buf, offsets[:-1], offsets[1:], 10, 100, 0.1, np.array([50, 50]))
>>> ok.tolist(), again.keys.tolist() == kc.keys.tolist()
([True, True], True)
"""

from __future__ import annotations

import numpy as np

from .validation import INT64_MIN, k_of_eps
from . import compiled
from .columnar import HistogramColumn, decode_compact_flat, region_varints
from .counters import MIN_COMPACT_BYTES, merge_keyed_groups
from .serialization import varint_stream
from .segments import every, gather

__all__ = ["KeyedCounters", "KeyedColumn"]

_U64 = np.uint64


def _segment_cumsum(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Inclusive running sums of ``x`` restarting at each ``offsets[i]``."""
    run = np.cumsum(x)
    before = np.concatenate([[0], run])[offsets[:-1]]
    return run - np.repeat(before, np.diff(offsets))


class KeyedCounters:
    """The keyed counters of many sketches of one window and eps.

    Sketch ``s`` holds counters ``offsets[s]:offsets[s + 1]`` (keys
    ``keys[...]``, strictly increasing, and histograms ``col[...]``, each
    holding units and ending at the sketch's newest) and has a newest time
    ``newest[s]`` when ``has_newest[s]`` (a sketch without one holds no
    counter).
    """

    __slots__ = ("offsets", "keys", "col", "newest", "has_newest")

    def __init__(self, offsets, keys, col: HistogramColumn, newest, has_newest):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.keys = np.asarray(keys, dtype=np.int64)
        self.col = col
        self.newest = np.asarray(newest, dtype=np.int64)
        self.has_newest = np.asarray(has_newest, dtype=bool)

    def __len__(self) -> int:
        return int(self.newest.size)

    def __repr__(self) -> str:
        return f"KeyedCounters(sketches={len(self)}, counters={self.keys.size}, window={self.col.window})"

    def sketch(self, s: int) -> tuple[np.ndarray, HistogramColumn]:
        """Sketch ``s``'s ``(keys, col)``, as :mod:`ehist.counters` holds them."""
        a, b = int(self.offsets[s]), int(self.offsets[s + 1])
        return self.keys[a:b].copy(), self.col.take(np.arange(a, b))

    @property
    def owner(self) -> np.ndarray:
        """Each counter's sketch."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))

    # ------------------------------------------------------------ building
    @classmethod
    def from_keyed(cls, parts: list, newest) -> "KeyedCounters":
        """Sketches given as ``[(keys, col), ...]`` (one window and eps) and
        their newest times (None: no newest, and no counter)."""
        cols = [c for _, c in parts]
        has = np.array([t is not None for t in newest], dtype=bool)
        counts = np.array([k.size for k, _ in parts], dtype=np.int64)
        keys = np.concatenate([np.asarray(k, dtype=np.int64) for k, _ in parts]) if parts else np.zeros(0, np.int64)
        return cls(np.concatenate([[0], np.cumsum(counts)]), keys, HistogramColumn.concat(cols), 
                   [0 if t is None else int(t) for t in newest], has)

    @classmethod
    def of_sketches(cls, sketches: list) -> "KeyedCounters":
        """The counters of keyed-histogram sketches
        (:class:`~ehist.counters.KeyedHistograms`, one window and eps), in
        order."""
        return cls.from_keyed([(s._keys, s._col) for s in sketches], [s.newest for s in sketches])

    @classmethod
    def concat(cls, parts: list) -> "KeyedCounters":
        """The sketches of several, in order."""
        shift = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        return cls(np.concatenate([[0]] + [p.offsets[1:] + s for p, s in zip(parts, shift)]),
                   np.concatenate([p.keys for p in parts]), HistogramColumn.concat([p.col for p in parts]),
                   np.concatenate([p.newest for p in parts]), np.concatenate([p.has_newest for p in parts]))

    @classmethod
    def placed(cls, a: "KeyedCounters", a_at, b: "KeyedCounters", b_at) -> "KeyedCounters":
        """One column of ``a``'s sketches at positions ``a_at`` and ``b``'s
        at ``b_at`` (together every position once): the vectorized
        decoder's sketches and those the family decoded itself, in the
        blobs' order."""
        position = np.empty(len(a) + len(b), dtype=np.int64)
        position[np.asarray(a_at, dtype=np.int64)] = np.arange(len(a))
        position[np.asarray(b_at, dtype=np.int64)] = len(a) + np.arange(len(b))
        return cls.concat([a, b]).take(position)

    def take(self, indices) -> "KeyedCounters":
        """The sketches at ``indices``, in that order (``self`` when they
        are all of them in order)."""
        idx = np.asarray(indices, dtype=np.int64)
        if every(idx, len(self)):
            return self
        a, b = self.offsets[idx], self.offsets[idx + 1]  # a sketch's counters (and their buckets) lie together
        return KeyedCounters(np.concatenate([[0], np.cumsum(b - a)]), gather(self.keys, a, b),
                             self.col.take_spans(a, b), self.newest[idx], self.has_newest[idx])

    # --------------------------------------------------------------- union
    def unite(self, group_starts) -> "KeyedCounters":
        """Each group's union (group ``i``: sketches ``group_starts[i]`` to
        the next start, in merge order), as :func:`ehist.counters.merge_keyed`
        unites the group's sketches holding a newest time, settled at the
        newest of them (a group with none: no newest)."""
        starts = np.asarray(group_starts, dtype=np.int64)
        groups = starts.size
        sizes = np.diff(np.append(starts, len(self)))
        group_of = np.repeat(np.arange(groups, dtype=np.int64), sizes)
        newest = np.full(groups, INT64_MIN, dtype=np.int64)
        np.maximum.at(newest, group_of[self.has_newest], self.newest[self.has_newest])
        has = np.bincount(group_of[self.has_newest], minlength=groups) > 0
        c = self.col
        if compiled.active():  # every group's keys merged and united in one pass; totals near int64: below
            ok, group, keys, counts, merged, exps, hi, lo = compiled.keyed_union(
                self.keys, c.offsets, c.exps, c.hi, c.lo, c.merged, self.offsets, np.append(starts, len(self)),
                newest, c.window, k_of_eps(c.eps))
            if ok:
                col = HistogramColumn(c.window, c.eps, np.concatenate([[0], np.cumsum(counts)]), exps, hi, lo,
                                      newest[group], np.ones(group.size, dtype=bool), merged)
                offsets = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=groups))])
                return KeyedCounters(offsets, keys, col, np.where(has, newest, 0), has)
        group, keys, col = merge_keyed_groups(group_of[self.owner], self.keys, c, newest)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=groups))])
        return KeyedCounters(offsets, keys, col, np.where(has, newest, 0), has)

    # ------------------------------------------------------------ the bytes
    def write(self) -> tuple[np.ndarray, np.ndarray]:
        """``(buf, offsets)``: each sketch's counter region as
        :func:`ehist.counters.write_counters` writes it (compact, keyed) at
        ``buf[offsets[s]:offsets[s + 1]]``."""
        sketches = len(self)
        if compiled.active():  # one compiled pass (compiled.keyed_payloads, without a prefix)
            c = self.col
            buf, starts, ends = compiled.keyed_payloads(
                np.zeros(0, dtype=np.uint64), np.zeros(sketches + 1, dtype=np.int64), self.keys, self.offsets, c.exps,
                c.hi, c.lo, c.offsets, c.newest, c.has_newest, c.merged, np.ones(sketches, dtype=bool))
            return buf, np.append(starts, ends[-1] if sketches else 0).astype(np.int64)
        counts = np.diff(self.offsets)
        cbuf, coff = self.col.compact_bytes()
        clen = np.diff(coff)
        owner = self.owner
        first = np.zeros(self.keys.size, dtype=bool)
        first[self.offsets[:-1][counts > 0]] = True
        prev = np.where(first, -1, np.concatenate([[0], self.keys[:-1]]))
        gaps = (self.keys - prev - 1).astype(_U64)
        # the varints of sketch s: n, then its gaps, then its lengths
        n_values = 1 + 2 * counts
        v_off = np.concatenate([[0], np.cumsum(n_values)])
        flat = np.empty(int(v_off[-1]), dtype=_U64)
        flat[v_off[:-1]] = counts.astype(_U64)
        local = np.arange(self.keys.size) - self.offsets[:-1][owner]
        flat[v_off[:-1][owner] + 1 + local] = gaps
        flat[v_off[:-1][owner] + 1 + counts[owner] + local] = clen.astype(_U64)
        vbuf, nbytes = varint_stream(flat)
        b_off = np.concatenate([[0], np.cumsum(nbytes)])[v_off]
        # each region: its varints, then its counters (consecutive in cbuf)
        src = np.concatenate([vbuf, cbuf])
        piece_starts = np.empty(2 * sketches, dtype=np.int64)
        piece_ends = np.empty(2 * sketches, dtype=np.int64)
        piece_starts[0::2], piece_ends[0::2] = b_off[:-1], b_off[1:]
        piece_starts[1::2] = vbuf.size + coff[self.offsets[:-1]]
        piece_ends[1::2] = vbuf.size + coff[self.offsets[1:]]
        lengths = (b_off[1:] - b_off[:-1]) + (coff[self.offsets[1:]] - coff[self.offsets[:-1]])
        return gather(src, piece_starts, piece_ends), np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    @classmethod
    def read(cls, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, size: int, window: int, eps: float,
             newest: np.ndarray) -> tuple[np.ndarray, "KeyedCounters"]:
        """``(accepted mask, the accepted sketches)``: counter regions at
        ``buf[starts[s]:ends[s]]`` of sketches ending at ``newest[s]``, keys
        below ``size`` (one bound, or one per sketch), each checked as :func:`ehist.counters.read_keyed`
        checks one (counts within the bytes and ``size``, gaps and lengths
        that add up, every histogram decoded and holding units); the
        rejected are left to the family's ``from_bytes``."""
        newest = np.asarray(newest, dtype=np.int64)
        col = HistogramColumn(window, eps, [0], [], [], [], [], [], [])
        if compiled.active():  # headers and histograms in one pass (the same checks)
            ok, n, keys, counts, merged, exps, hi, lo = compiled.read_keyed(buf, starts, ends, size, MIN_COMPACT_BYTES,
                                                                            newest, col.window, col._l)
            times = np.repeat(newest, n)
            col = HistogramColumn(window, eps, np.concatenate([[0], np.cumsum(counts)]), exps, hi, lo, times,
                                  np.ones(counts.size, dtype=bool), merged)
            return ok, cls(np.concatenate([[0], np.cumsum(n[ok])]), keys, col, newest[ok],
                           np.ones(int(ok.sum()), dtype=bool))

        def decode(c_start, c_len, sketch):
            nonlocal col
            got, col = decode_compact_flat(buf, c_start, c_len, window, eps, newest[sketch])
            return got, np.diff(col.offsets)

        ok, counts, keys, rows = _read(buf, starts, ends, size, decode)
        return ok, cls(np.concatenate([[0], np.cumsum(counts)]), keys,
                       col if every(rows, len(col)) else col.take(rows), newest[ok],
                       np.ones(int(ok.sum()), dtype=bool))

    @classmethod
    def read_bounds(cls, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, size: int, window: int, eps: float,
                    newest: np.ndarray, cutoffs: np.ndarray):
        """:meth:`read`, each counter bounded for the units after its
        sketch's ``cutoffs[s]`` as it is decoded, no column built (compiled
        only: :func:`ehist.compiled.read_keyed_bounds`, one pass).

        Returns
        -------
        (accepted mask, offsets, keys, lower, upper, units): the accepted
        sketches' counters, sketch ``s``'s at ``offsets[s]:offsets[s + 1]``.
        """
        col = HistogramColumn(window, eps, [0], [], [], [], [], [], [])  # window and eps checked
        ok, n, keys, lower, upper, units = compiled.read_keyed_bounds(
            buf, starts, ends, size, MIN_COMPACT_BYTES, newest, col.window, col._l, cutoffs)
        return ok, np.concatenate([[0], np.cumsum(n[ok])]).astype(np.int64), keys, lower, upper, units


def _read(buf, starts, ends, size, decode):
    """:meth:`KeyedCounters.read` without the compiled loops: every
    region's header read and checked in numpy, then its counters handed to
    ``decode(counter starts, lengths, sketch of each)``, which returns
    (accepted mask, bucket count of each accepted).  Returns (accepted
    sketches mask, their counter counts, their keys, and the positions of
    their counters among the accepted ones, in order)."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    count = starts.size
    ok = ends > starts
    idx = np.flatnonzero(ok)
    # only the count, gaps and lengths are read here (the counters are the histogram decoder's)
    rs, re = starts[idx], ends[idx]
    size = np.broadcast_to(np.asarray(size, dtype=np.int64), (count,))[idx]
    header = region_varints(buf, rs, re)
    zero = np.zeros(idx.size, dtype=np.int64)
    n, n_stop, bad = header(zero, np.arange(idx.size))
    remaining = re - n_stop - 1
    most = np.minimum(size, remaining // (2 + MIN_COMPACT_BYTES)).astype(_U64)
    bad |= n > most
    n = np.where(bad, 0, n).astype(np.int64)
    bad |= (n == 0) & (remaining != 0)  # no counter: nothing after the count
    # gaps, then lengths
    c_off = np.concatenate([[0], np.cumsum(n)])
    c_owner = np.repeat(np.arange(idx.size, dtype=np.int64), n)
    c_local = np.arange(int(c_off[-1])) - c_off[:-1][c_owner]
    gaps, _, bad_gap = header(1 + c_local, c_owner)
    c_len, c_stop, bad_len = header(1 + n[c_owner] + c_local, c_owner)
    bound = size[c_owner]
    bad[c_owner[bad_gap | bad_len | (gaps >= bound.astype(_U64)) | (c_len < _U64(MIN_COMPACT_BYTES))]] = True
    body = np.zeros(idx.size, dtype=np.int64)  # where each region's counters start
    has = n > 0
    body[has] = c_stop[c_off[1:][has] - 1] + 1
    gaps = np.minimum(gaps, bound.astype(_U64)).astype(np.int64)
    keys = _segment_cumsum(gaps + 1, c_off) - 1
    bad[c_owner[keys >= bound]] = True
    c_len = np.minimum(c_len, _U64(1 << 32)).astype(np.int64)
    has = n > 0
    sums = np.bincount(c_owner, weights=c_len, minlength=idx.size)
    bad |= has & (sums != re - body)
    # the counters, decoded together
    run = np.concatenate([[0], np.cumsum(c_len)])
    c_start = body[c_owner] + run[:-1] - run[c_off[:-1]][c_owner]
    live = ~bad[c_owner]
    accepted = np.zeros(c_owner.size, dtype=bool)
    rows = np.flatnonzero(live)
    if rows.size:
        got, buckets = decode(c_start[rows], c_len[rows], idx[c_owner[rows]])
        accepted[rows] = got
        bad[c_owner[rows[~got]]] = True
        bad[c_owner[rows[got][buckets == 0]]] = True  # a counter holds units
    ok[idx[bad]] = False
    good = ~bad
    take = good[c_owner]
    position = np.cumsum(accepted) - 1
    return ok, n[good], keys[take], position[take]


class KeyedColumn:
    """Base of a column of many keyed-histogram sketches
    (:class:`~ehist.counters.KeyedHistograms`: Count-Min counters, quantile
    bins) of one parameter set: ``params``, the sketches' counters flat in
    the :class:`KeyedCounters` a subclass names (``store``), and the
    sketch class (``sketch_type``, made as ``sketch_type(*params)``).
    Gives the length, the repr and each sketch as an object; a subclass
    adds its family's codec and answers."""

    __slots__ = ()
    #: The synopsis class of the column's sketches.
    sketch_type: type
    #: The attribute holding the :class:`KeyedCounters` (its name in the repr).
    store: str

    def _counters(self) -> KeyedCounters:
        return getattr(self, self.store)

    def __len__(self) -> int:
        return len(self._counters())

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(sketches={len(self)}, {self.store}={self._counters().keys.size}, "
                f"params={self.params})")

    def take(self, indices) -> "KeyedColumn":
        """The sketches at ``indices``, in that order (``self`` when they
        are all of them in order)."""
        counters = self._counters()
        taken = counters.take(indices)
        return self if taken is counters else type(self)(self.params, taken)

    def __getitem__(self, i: int):
        i = range(len(self))[i]
        counters = self._counters()
        s = self.sketch_type(*self.params)
        if counters.has_newest[i]:
            s._set_counters(int(counters.newest[i]), *counters.sketch(i))
        return s

    def _united(self, group_starts, units: np.ndarray) -> KeyedCounters:
        """Each group's union of the column's sketches (group ``i``: sketches
        ``group_starts[i]`` to the next start, in order), every counter of
        every group in one :meth:`KeyedCounters.unite`; a group whose rough
        total (``units``: each sketch's, as floats) reaches 2**62 by the
        sketch class's ``merge_all`` itself (which raises SumOverflowError
        past int64)."""
        starts = np.asarray(group_starts, dtype=np.int64)
        counters = self._counters()
        group_of = np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.append(starts, len(counters))))
        rough = np.bincount(group_of, weights=units, minlength=starts.size)
        heavy = np.flatnonzero(rough >= 2.0 ** 62)
        united = counters.unite(starts)
        if heavy.size:
            ends = np.append(starts[1:], len(counters))
            exact = [self.sketch_type.merge_all([self[i] for i in range(int(starts[g]), int(ends[g]))])
                     for g in heavy.tolist()]
            replaced = KeyedCounters.of_sketches(exact)
            light = np.setdiff1d(np.arange(starts.size), heavy)
            united = KeyedCounters.placed(united.take(light), light, replaced, heavy)
        return united
