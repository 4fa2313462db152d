"""Many sliding Flajolet-Martin sketches at once, in flat numpy arrays.

A stored table of :class:`~distinct.SlidingFM` sketches (one per key and
site) is united and answered one sketch at a time by the class: decoding
one costs a table of ``m x 64`` timestamps and a dozen numpy calls (~0.15
ms), uniting a key's four about 0.65 ms.  :class:`FMColumn` keeps only
the set bits of many sketches (sketch ``s``: cells ``offsets[s]:offsets[s
+ 1]``, ``cell = bitmap * 64 + bit`` ascending, each with its timestamp)
and does each step for all of them in a few numpy passes:

* :meth:`FMColumn.build`: each run of rows' sketch, as ``update``
  builds it;
* :meth:`FMColumn.from_bytes`: decode, with every check of
  ``SlidingFM.from_bytes`` (what the vectorized checks do not pass goes
  to it, and it names what is wrong);
* :meth:`FMColumn.union`: each group's ``SlidingFM.merge_all`` (the
  newest timestamp of every bit over the group, then the bits the
  group's window has left behind dropped);
* :meth:`FMColumn.to_bytes`: ``SlidingFM.to_bytes`` of each, byte for
  byte;
* :meth:`FMColumn.estimates`: ``SlidingFM.estimate`` of each, to the
  last bit (the same floats: the logarithms and powers of the few
  distinct bit counts are Python's).

For instance, two sketches of one stream's halves, united:

>>> import numpy as np
>>> from distinct import SlidingFM
>>> parts = [SlidingFM(100, 8).update(np.arange(p, 60, 2), np.arange(p, 60, 2) % 17) for p in range(2)]
>>> col = FMColumn.from_bytes([s.to_bytes() for s in parts])
>>> united = col.union([0])
>>> united.to_bytes() == [SlidingFM.merge_all(parts).to_bytes()]
True
>>> united.estimates(now=[70]).tolist() == [SlidingFM.merge_all(parts).estimate(now=70)]
True
"""

from __future__ import annotations

import math

import numpy as np

from ehist.columnar import check_starts, payload_varints, sealed_blobs, sealed_heads
from ehist.errors import IncompatibleSketchError
from ehist.hashing import as_hashes
from ehist.serialization import MAGIC, PREAMBLE_BYTES, varint_stream
from ehist.validation import INT64_MIN, coerce_times, coerce_timestamps
from ehist.segments import ranges

from . import fm as _fm
from .fm import LAYOUT, SlidingFM

__all__ = ["FMColumn"]

_U64 = np.uint64
_BITS = 64
_NEWEST_AT = LAYOUT.head.size  # the newest timestamp follows the preamble and parameters
_PARAMS = np.dtype([("window", "<i8"), ("m", "<u4"), ("seed", "<u8")])


class FMColumn:
    """The set bits of many :class:`~distinct.SlidingFM` sketches of one
    window, ``num_bitmaps`` and seed.

    Sketch ``s`` has cells ``offsets[s]:offsets[s + 1]`` (``cell = bitmap
    * 64 + bit``, strictly increasing) whose bits hold timestamps ``ts``,
    and a newest time ``newest[s]`` where ``has_newest[s]`` (a sketch
    without one holds no bit).
    """

    __slots__ = ("window", "m", "seed", "offsets", "cell", "ts", "newest", "has_newest")

    def __init__(self, window: int, m: int, seed: int, offsets, cell, ts, newest, has_newest):
        self.window, self.m, self.seed = int(window), int(m), int(seed)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.cell = np.asarray(cell, dtype=np.int64)
        self.ts = np.asarray(ts, dtype=np.int64)
        self.newest = np.asarray(newest, dtype=np.int64)
        self.has_newest = np.asarray(has_newest, dtype=bool)

    def __len__(self) -> int:
        return int(self.newest.size)

    def __repr__(self) -> str:
        return f"FMColumn(sketches={len(self)}, bits={self.cell.size}, window={self.window}, m={self.m})"

    @property
    def owner(self) -> np.ndarray:
        """Each cell's sketch."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))

    def __getitem__(self, s: int) -> SlidingFM:
        """Sketch ``s`` as a :class:`~distinct.SlidingFM`."""
        out = SlidingFM(self.window, self.m, self.seed)
        if self.has_newest[s]:
            a, b = int(self.offsets[s]), int(self.offsets[s + 1])
            out._writable().reshape(-1)[self.cell[a:b]] = self.ts[a:b]
            out._newest = int(self.newest[s])
        return out

    # ------------------------------------------------------------ building
    @classmethod
    def from_sketches(cls, sketches) -> "FMColumn":
        """The column of sketches of one window, ``num_bitmaps`` and seed."""
        sketches = list(sketches)
        if not sketches:
            raise ValueError("from_sketches needs at least one sketch")
        params = {(s.window, s.num_bitmaps, s.seed) for s in sketches}
        if len(params) > 1:
            raise IncompatibleSketchError(f"a column holds sketches of one window, num_bitmaps and seed, got "
                                          f"{sorted(params)}")
        cells, stamps = [], []
        for s in sketches:
            flat = np.asarray(s._table).reshape(-1)
            at = np.flatnonzero(flat != _fm._UNSET) if s.newest is not None else np.zeros(0, dtype=np.int64)
            cells.append(at)
            stamps.append(flat[at])
        counts = [c.size for c in cells]
        first = sketches[0]
        return cls(first.window, first.num_bitmaps, first.seed, np.concatenate([[0], np.cumsum(counts)]),
                   np.concatenate(cells), np.concatenate(stamps),
                   [0 if s.newest is None else s.newest for s in sketches], [s.newest is not None for s in sketches])

    @classmethod
    def build(cls, timestamps, starts, hashes, *, window: int, m: int, seed: int = 0) -> "FMColumn":
        """One sketch per run of rows (run ``i``: rows ``starts[i]`` to
        ``starts[i + 1]``, the last to the end), each ``SlidingFM(window,
        m, seed).update_hashes(ts, hashes)`` of its rows, in a few numpy
        passes over the batch: each row's cell (bitmap ``hash % m``, bit
        the trailing zeros of ``hash // m``), the newest time of each run
        and cell, the bits at or before the run's newest less the window
        dropped.

        >>> from ehist.hashing import hash64
        >>> ts, h = np.array([5, 9, 2]), hash64(np.array([7, 8, 9]), 0)
        >>> col = FMColumn.build(ts, [0, 2], h, window=100, m=8)
        >>> col.to_bytes() == [SlidingFM(100, 8).update_hashes(ts[:2], h[:2]).to_bytes(),
        ...                    SlidingFM(100, 8).update_hashes(ts[2:], h[2:]).to_bytes()]
        True
        """
        SlidingFM(window, m, seed)  # the parameters' checks
        ts = coerce_timestamps(timestamps)
        h = as_hashes(hashes)
        if h.shape != ts.shape:
            raise ValueError(f"timestamps and hashes have different lengths ({ts.size} and {h.size})")
        starts = check_starts(starts, ts.size)
        runs = starts.size
        ends = np.append(starts[1:], ts.size)
        if ts.size and int(ts.min()) == INT64_MIN:  # update refuses it: its message
            return cls.from_sketches([SlidingFM(window, m, seed).update_hashes(ts[a:z], h[a:z])
                                      for a, z in zip(starts.tolist(), ends.tolist())])
        has = ends > starts
        newest = np.zeros(runs, dtype=np.int64)
        if has.any():
            newest[has] = np.maximum.reduceat(ts, starts[has])
        run_of = np.repeat(np.arange(runs, dtype=np.int64), ends - starts)
        cells = (h % _U64(m)).astype(np.int64) * _BITS + _fm.trailing_zeros(h // _U64(m), _BITS - 1)
        key = run_of * (m * _BITS) + cells
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, dtype=np.int64)
        stamp = np.maximum.reduceat(ts[order], first) if key.size else ts[:0]
        run, cell = run_of[order][first], cells[order][first]
        # SlidingFM._expire: bits at or before newest - window (when that is a time) unset
        g_new = newest[run]
        low = g_new < INT64_MIN + window
        live = low | (stamp > g_new - np.where(low, 0, window))
        run, cell, stamp = run[live], cell[live], stamp[live]
        return cls(window, m, seed, np.concatenate([[0], np.cumsum(np.bincount(run, minlength=runs))]), cell, stamp,
                   newest, has)

    @classmethod
    def from_bytes(cls, blobs) -> "FMColumn":
        """Decode many ``SlidingFM.to_bytes`` outputs of one window,
        ``num_bitmaps`` and seed at once.

        Raises
        ------
        CorruptSketchError
            As ``SlidingFM.from_bytes`` raises it, for the first blob (in
            order) the vectorized checks do not pass and it refuses.
        IncompatibleSketchError
            Sketches of different windows, ``num_bitmaps`` or seeds.
        """
        blobs = [bytes(b) for b in blobs]
        ok, parsed = _decode_fast(blobs)
        slow = np.flatnonzero(~ok)
        slow_sketches = [SlidingFM.from_bytes(blobs[i]) for i in slow.tolist()]  # raises for corrupt bytes
        if not slow.size:
            if parsed is None:
                raise ValueError("from_bytes needs at least one blob")
            return parsed
        slow_col = cls.from_sketches(slow_sketches)
        if parsed is None:
            return slow_col
        position = np.empty(len(blobs), dtype=np.int64)
        position[np.flatnonzero(ok)] = np.arange(len(parsed))
        position[slow] = len(parsed) + np.arange(slow.size)
        return cls.concat([parsed, slow_col]).take(position)

    @classmethod
    def concat(cls, columns) -> "FMColumn":
        """The sketches of several columns of one window, ``num_bitmaps`` and seed, in order."""
        cols = list(columns)
        params = {(c.window, c.m, c.seed) for c in cols}
        if len(params) > 1:
            raise IncompatibleSketchError(f"a column holds sketches of one window, num_bitmaps and seed, got "
                                          f"{sorted(params)}")
        shift = np.cumsum([0] + [int(c.offsets[-1]) for c in cols[:-1]])
        return cls(cols[0].window, cols[0].m, cols[0].seed,
                   np.concatenate([[0]] + [c.offsets[1:] + s for c, s in zip(cols, shift)]),
                   *(np.concatenate([getattr(c, a) for c in cols]) for a in ("cell", "ts", "newest", "has_newest")))

    def take(self, indices) -> "FMColumn":
        """The sketches at ``indices``, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        a, b = self.offsets[idx], self.offsets[idx + 1]
        lengths = b - a
        rows = ranges(a, b)
        return FMColumn(self.window, self.m, self.seed, np.concatenate([[0], np.cumsum(lengths)]), self.cell[rows],
                        self.ts[rows], self.newest[idx], self.has_newest[idx])

    # --------------------------------------------------------------- union
    def union(self, group_starts) -> "FMColumn":
        """Each group's ``SlidingFM.merge_all`` (group ``i``: sketches
        ``group_starts[i]`` to the next start, the first one's as is when
        no other has a newest time): every bit's newest timestamp over the
        group, the bits at or before the group's newest less the window
        dropped."""
        n = len(self)
        starts = np.asarray(group_starts, dtype=np.int64)
        if starts.ndim != 1 or (n and (starts.size == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0)
                                       or starts[-1] >= n)) or (not n and starts.size):
            raise ValueError(f"group_starts must start at 0 and increase strictly below {n}, got {starts!r}")
        groups = starts.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, n)))
        has = self.has_newest
        newest = np.full(groups, INT64_MIN, dtype=np.int64)
        np.maximum.at(newest, group_of[has], self.newest[has])
        g_has = np.bincount(group_of[has], minlength=groups) > 0
        # the newest timestamp of each (group, cell): one stable sort of group and cell as one key (each
        # sketch's cells arrive sorted, a run the sort merges), then the largest of each run of one key
        group = group_of[self.owner]
        key = group * (self.m * _BITS) + self.cell
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, dtype=np.int64)
        ts = np.maximum.reduceat(self.ts[order], first) if key.size else self.ts[:0]
        group, cell = group[order][first], self.cell[order][first]
        # SlidingFM._expire: bits at or before newest - window (when that is a time) are unset
        g_new = newest[group]
        live = (g_new < INT64_MIN + self.window) | (ts > g_new - np.where(g_new < INT64_MIN + self.window, 0,
                                                                          self.window))
        group, cell, ts = group[live], cell[live], ts[live]
        return FMColumn(self.window, self.m, self.seed,
                        np.concatenate([[0], np.cumsum(np.bincount(group, minlength=groups))]), cell, ts,
                        np.where(g_has, newest, 0), g_has)

    # --------------------------------------------------------- serialization
    def to_bytes(self) -> list:
        """``[self[s].to_bytes() for s in range(len(self))]``, in one pass."""
        count = len(self)
        if count == 0:
            return []
        m = self.m
        owner = self.owner
        bitmap, bit = self.cell // _BITS, self.cell % _BITS
        # kept bits per bitmap: 1 + its highest set bit
        kept = np.zeros((count, m), dtype=np.int64)
        np.maximum.at(kept, (owner, bitmap), bit + 1)
        age = self.newest[owner].view(_U64) - self.ts.view(_U64)  # exact: ts <= newest
        tick = np.zeros(count, dtype=_U64)
        if age.size:
            first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            tick[owner[first]] = np.gcd.reduceat(age, first)
        ticked = tick >= _U64(2)
        tick[~ticked] = _U64(1)
        has = self.has_newest
        codes = kept.sum(axis=1)
        n_values = np.where(has, ticked + m + codes, 0)
        v_off = np.concatenate([[0], np.cumsum(n_values)])
        flat = np.zeros(int(v_off[-1]), dtype=_U64)
        flat[v_off[:-1][ticked & has]] = tick[ticked & has]
        body = v_off[:-1] + ticked  # where each sketch's kept counts start
        rows = np.flatnonzero(has)
        flat[(body[rows][:, None] + np.arange(m)).ravel()] = kept[rows].ravel().astype(_U64)
        code_off = np.cumsum(kept, axis=1) - kept  # each bitmap's first code, within the sketch's codes
        flat[body[owner] + m + code_off[owner, bitmap] + bit] = age // tick[owner] + _U64(1)
        payload, nbytes = varint_stream(flat)
        ends = np.concatenate([[0], np.cumsum(nbytes)])[v_off]
        flags = np.where(has, 1, 0) | np.where(ticked & has, 2, 0)
        head = LAYOUT.head.pack(MAGIC, LAYOUT.family_id, LAYOUT.version, 0, self.window, m, self.seed)
        return sealed_blobs(head, flags, self.newest, has, payload, ends[:-1], ends[1:])

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
        w = self.window if window is None else window
        if window is not None or now is not None:  # the checks estimate makes, on the first that fails
            at = None if now is None else np.broadcast_to(coerce_times(now, "now"), (count,))
            late = np.zeros(count, dtype=bool) if at is None else (at < self.newest) & self.has_newest
            bad = int(np.argmax(late)) if late.any() else 0
            if count and (late.any() or window is not None):
                self[bad].estimate(None if at is None else int(at[bad]), window)
        at = self.newest if now is None else np.broadcast_to(coerce_times(now, "now"), (count,)).astype(np.int64)
        cutoff = np.where(at < INT64_MIN + w, INT64_MIN, at - np.where(at < INT64_MIN + w, 0, w))
        owner = self.owner
        live = self.ts > cutoff[owner]
        bitmap, bit = self.cell // _BITS, self.cell % _BITS
        m = self.m
        # bit 0 unset in a bitmap: linear counting, as SlidingFM._estimate_at
        empty_low = m - np.bincount(owner[live & (bit == 0)], minlength=count)
        # R of a bitmap: its live bits 0, 1, ... in a row (a live bit j is in that run iff it is the j-th live one)
        l_owner, l_map, l_bit = owner[live], bitmap[live], bit[live]
        start = np.r_[True, (l_owner[1:] != l_owner[:-1]) | (l_map[1:] != l_map[:-1])] if l_owner.size else \
            np.zeros(0, dtype=bool)
        first = np.flatnonzero(start)
        rank = np.arange(l_owner.size) - np.repeat(first, np.diff(np.append(first, l_owner.size)))
        z = np.bincount(l_owner[rank == l_bit], minlength=count)
        out = np.empty(count, dtype=np.float64)
        for e in np.unique(empty_low[empty_low > 0]).tolist():
            linear = 2.0 * m * math.log(m / e)
            out[empty_low == e] = linear if linear <= _fm._LINEAR_COUNTING_LIMIT * m else np.nan
        pcsa = (empty_low == 0) | np.isnan(out)
        for zz in np.unique(z[pcsa]).tolist():
            out[pcsa & (z == zz)] = (m / _fm._PHI) * (2.0 ** (zz / m) - 2.0 ** (-_fm._KAPPA * zz / m))
        out[~self.has_newest] = 0.0
        return out


def _decode_fast(blobs: list):
    """``(accepted mask, column of the accepted)``: blobs with a newest
    timestamp whose every check of ``SlidingFM.from_bytes`` passes here;
    the rest (empty sketches, anything suspicious, parameters other than
    the first accepted blob's) are left to it."""
    ok, buf, starts, lengths = sealed_heads(blobs, LAYOUT.family_id, _NEWEST_AT + 8 + 2 + 4, 2)
    idx = np.flatnonzero(ok) if ok.size else np.zeros(0, dtype=np.int64)
    if idx.size == 0:
        return ok, None
    fields = np.ascontiguousarray(buf[starts[idx][:, None] + np.arange(PREAMBLE_BYTES, _NEWEST_AT)]).view(
        _PARAMS).ravel()
    window, m, seed = int(fields["window"][0]), int(fields["m"][0]), int(fields["seed"][0])
    try:
        SlidingFM(window, m, seed)
    except ValueError:
        ok[:] = False  # from_bytes names the bad parameter
        return ok, None
    same = (fields["window"] == window) & (fields["m"] == m) & (fields["seed"] == seed)
    newest = np.ascontiguousarray(buf[starts[idx][:, None] + np.arange(_NEWEST_AT, _NEWEST_AT + 8)]).view(
        "<i8").ravel().astype(np.int64)
    version_2 = buf[starts[idx] + 3] == 2
    ticked = (buf[starts[idx] + 4] & 2) > 0
    bad = ~same | (newest == INT64_MIN)
    values, n_vals, v_first, value = payload_varints(buf, starts[idx], lengths[idx], _NEWEST_AT + 8, bad)
    tick = value(v_first, ticked)
    bad |= ticked & (tick < _U64(2))
    tick = np.where(ticked & ~bad, tick, _U64(1))
    t_int = ticked.astype(np.int64)
    enough = n_vals >= t_int + m
    bad |= ~enough
    local = np.arange(m)
    kept = value((v_first + t_int)[:, None] + local, enough[:, None])  # (blobs, m)
    bad |= (kept > _U64(_BITS)).any(axis=1)
    kept = np.where(bad[:, None], 0, kept).astype(np.int64)
    total = kept.sum(axis=1)
    bad |= n_vals != t_int + m + total
    kept[bad] = 0
    total[bad] = 0
    # the codes: bitmap j's kept bits, in order
    c_owner = np.repeat(np.arange(idx.size, dtype=np.int64), total)
    c_first = np.concatenate([[0], np.cumsum(total)])
    c_local = np.arange(int(c_first[-1])) - c_first[:-1][c_owner]
    codes = value(v_first[c_owner] + t_int[c_owner] + m + c_local, np.ones(c_owner.size, dtype=bool))
    per_map = kept.ravel()
    map_first = np.cumsum(per_map) - per_map
    c_map = np.repeat(np.tile(local, idx.size), per_map)
    c_bit = np.arange(c_owner.size) - np.repeat(map_first[per_map > 0], per_map[per_map > 0])
    set_bits = codes != _U64(0)
    # the last kept bit of each bitmap is set
    last = (map_first + per_map - 1)[per_map > 0]
    bad[c_owner[last[~set_bits[last]]]] = True
    ages = codes - _U64(1)  # (set bits only: 0 -> 2**64 - 1 is never read)
    # version 2: the tick is the ages' gcd (written exactly when it is 2 or more), and no tick without set bits
    s_owner, s_ages = c_owner[set_bits], ages[set_bits]
    g = np.zeros(idx.size, dtype=_U64)
    if s_owner.size:
        first = np.flatnonzero(np.r_[True, s_owner[1:] != s_owner[:-1]])
        g[s_owner[first]] = np.gcd.reduceat(s_ages, first)
    n_set = np.bincount(s_owner, minlength=idx.size)
    bad |= version_2 & ticked & (n_set == 0)
    bad |= version_2 & np.where(tick > _U64(1), g != _U64(1), g >= _U64(2))
    # ages below the window (in ticks: below ceil(window / tick)), then times within int64
    top = np.zeros(idx.size, dtype=_U64)
    np.maximum.at(top, s_owner, s_ages)
    bad |= top >= (_U64(window) - _U64(1)) // tick + _U64(1)  # ceil(window / tick); version 1: no tick
    scaled = top * tick  # below the window, so no wrap
    room = newest.view(_U64) - _U64(1 << 63) - _U64(1)  # newest - (INT64_MIN + 1), exactly
    bad |= scaled > room
    keep = set_bits & ~bad[c_owner]
    good = ~bad
    ok[idx[bad]] = False
    k_owner = c_owner[keep]
    ts = (newest[k_owner].view(_U64) - ages[keep] * tick[k_owner]).view(np.int64)
    cell = c_map[keep] * _BITS + c_bit[keep]
    renumber = np.cumsum(good) - 1
    counts = np.bincount(renumber[k_owner], minlength=int(good.sum()))
    return ok, FMColumn(window, m, seed, np.concatenate([[0], np.cumsum(counts)]), cell, ts, newest[good],
                        np.ones(int(good.sum()), dtype=bool))
