"""Many sliding quantile sketches at once: decode, unite, encode, answer.

A stored table of :class:`~quantiles.SlidingQuantiles` (one per key and
site) is rolled up by uniting each key's sketches and answered by reading
each key's bins.  One sketch at a time, each step is a few dozen numpy
calls over its bins: about a millisecond per key.
:class:`QuantileColumn` holds many sketches of one parameter set as one
:class:`~ehist.keyed_counters.KeyedCounters` keyed by value bin, so that
each step runs once for all of them.

Contract (``tests/test_columnar_families.py``, under both engines of
:mod:`ehist.compiled`): ``from_bytes(blobs).to_bytes() == blobs`` for
sketches of one parameter set; ``from_bytes(blobs).union(starts)`` is,
byte for byte, ``merge_all`` of each group's sketches in order; the
quantiles and bounds are the sketches' own.  What the vectorized checks
leave out goes through ``SlidingQuantiles.from_bytes`` / ``merge_all``.

Examples
--------
>>> import numpy as np
>>> from quantiles import SlidingQuantiles
>>> parts = [SlidingQuantiles(100).update(np.arange(p, 90, 3), np.arange(p, 90, 3) * 1.5) for p in range(3)]
>>> col = QuantileColumn.from_bytes([s.to_bytes() for s in parts])
>>> col.union([0]).to_bytes() == [SlidingQuantiles.merge_all(parts).to_bytes()]
True
>>> col.quantiles(0.5).tolist() == [s.quantile(0.5) for s in parts]
True
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from ehist.errors import SumOverflowError
from ehist.validation import INT64_MIN
from ehist import compiled
from ehist.columnar import region_varints, sealed_blobs, sealed_heads
from ehist.keyed_counters import KeyedColumn, KeyedCounters
from ehist.serialization import FAMILIES, MAGIC, varint_stream
from ehist.segments import every, gather, order_by
from ehist.segments import ranges as _ranges

from . import sliding as _q
from .sliding import SlidingQuantiles

__all__ = ["QuantileColumn"]

_FIELDS = np.dtype([("window", "<i8"), ("eps", "<f8"), ("accuracy", "<f8"), ("newest", "<i8")])
_HEAD = struct.Struct(_q.LAYOUT.head.format + "q")  # preamble, parameters, newest
_PARAMS_AT = 6
_CRC = struct.Struct("<I")


class QuantileColumn(KeyedColumn):
    """Many :class:`~quantiles.SlidingQuantiles` of one parameter set
    (``params``: window, eps, accuracy), their bins flat (``bins``: each
    sketch's bin keys and histograms, newest time)."""

    __slots__ = ("params", "bins", "_probe")
    sketch_type = SlidingQuantiles
    store = "bins"

    def __init__(self, params: tuple, bins: KeyedCounters):
        self.params = tuple(params)
        self.bins = bins
        self._probe = SlidingQuantiles(*self.params)

    # ------------------------------------------------------------ building
    @classmethod
    def build(cls, timestamps, starts, values, params: tuple) -> "QuantileColumn":
        """One sketch per run of rows (``starts``: where each run begins;
        rows sorted by time within a run), as
        ``SlidingQuantiles(*params).update(run_ts, run_values)`` builds it:
        each run's rows older than its newest less the window left out,
        every (run, value bin)'s histogram built in one
        :meth:`~ehist.columnar.HistogramColumn.build`, then settled at the
        run's newest.  Raises what ``update`` raises (a run past the bin
        limit goes through ``update`` itself)."""
        from ehist.columnar import HistogramColumn
        from ehist.counters import settle

        from ehist.columnar import check_starts
        from ehist.validation import coerce_times

        probe = SlidingQuantiles(*params)
        ts = coerce_times(timestamps)
        x = np.asarray(values, dtype=np.float64)
        if x.shape != ts.shape:
            raise ValueError(f"timestamps and values have different lengths ({ts.size} and {x.size})")
        starts = check_starts(starts, ts.size)
        runs = starts.size
        lengths = np.diff(np.append(starts, ts.size))
        run = np.repeat(np.arange(runs, dtype=np.int64), lengths)
        if ts.size and (not np.isfinite(x).all() or int(ts.min()) == INT64_MIN
                        or np.any((ts[1:] < ts[:-1]) & (run[1:] == run[:-1]))):
            return cls._one_by_one(ts, x, starts, params)  # update's messages, and its sort
        has = lengths > 0
        newest = np.zeros(runs, dtype=np.int64)
        newest[has] = ts[np.append(starts[1:], ts.size)[has] - 1]
        window = probe.window
        everything = newest[run] < INT64_MIN + window  # a cutoff below int64: every row stays
        cutoff = np.where(everything, INT64_MIN, newest[run] - np.where(everything, 0, window))
        keep = everything | (ts > cutoff)
        ts, x, run = ts[keep], x[keep], run[keep]
        bins = probe.mapping.keys(x)
        order = order_by(run, bins)  # stable: time order within a (run, bin)
        ts, bins, run = ts[order], bins[order], run[order]
        first = np.flatnonzero(np.r_[True, (bins[1:] != bins[:-1]) | (run[1:] != run[:-1])]) if ts.size \
            else np.zeros(0, dtype=np.int64)
        per_run = np.bincount(run[first], minlength=runs)
        if per_run.size and per_run.max() > _q.MAX_BINS:
            return cls._one_by_one(np.asarray(timestamps, dtype=np.int64), np.asarray(values, dtype=np.float64),
                                   starts, params)
        col = HistogramColumn.build(ts, first, window=window, eps=probe.eh_eps)
        counter_run = run[first]
        col = settle(col, window, newest[counter_run])
        kept = np.flatnonzero(np.diff(col.offsets) > 0)
        counts = np.bincount(counter_run[kept], minlength=runs)
        return cls(params, KeyedCounters(np.concatenate([[0], np.cumsum(counts)]), bins[first][kept], col.take(kept),
                                         np.where(has, newest, 0), has))

    @classmethod
    def _one_by_one(cls, ts, x, starts, params) -> "QuantileColumn":
        ends = np.append(starts[1:], ts.size)
        sketches = [SlidingQuantiles(*params).update(ts[a:b], x[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]
        return cls(params, KeyedCounters.of_sketches(sketches))

    # ------------------------------------------------------------ decoding
    @classmethod
    def from_bytes(cls, blobs: list) -> "QuantileColumn | None":
        """Decode many :meth:`SlidingQuantiles.to_bytes` outputs (None when
        they hold different parameters); raises what
        ``SlidingQuantiles.from_bytes`` raises, for the first blob it
        rejects."""
        if not len(blobs):
            return None
        ok, buf, starts, lengths, params, probe, newest = _heads(blobs)
        idx = np.flatnonzero(ok)
        fast = None
        if idx.size:
            fast, accepted = _decode(buf, starts[idx] + _HEAD.size, starts[idx] + lengths[idx] - _CRC.size, newest,
                                     probe)
            ok[idx[~accepted]] = False
        slow = np.flatnonzero(~ok)
        if slow.size == 0:
            return cls(params, fast)
        sketches = [SlidingQuantiles.from_bytes(bytes(blobs[i])) for i in slow.tolist()]
        if params is None:
            params = sketches[0]._params()
        if any(s._params() != params for s in sketches):
            return None
        slow_part = KeyedCounters.of_sketches(sketches)
        if fast is None or len(fast) == 0:
            return cls(params, slow_part)
        return cls(params, KeyedCounters.placed(fast, np.flatnonzero(ok), slow_part, slow))

    @classmethod
    def quantiles_of_bytes(cls, blobs, q: float, now=None, window: int | None = None, *,
                           groups=None) -> np.ndarray | None:
        """``from_bytes(blobs).quantiles(q, now, window)``, each sketch's
        bins decoded and bounded in one compiled pass (the column never
        built: :meth:`KeyedCounters.read_bounds`); with ``groups`` (the
        first sketch of each group), ``union_quantiles(groups, q, now,
        window)``.  None where that path must decide instead (no numba,
        sketches of different parameters, a blob the vectorized checks
        refuse, a query late or too wide: it raises what is wrong)."""
        got = _bin_bounds_of_bytes(blobs, now, window, groups)
        if got is None:
            return None
        mapping, keys, lower, upper, owner, n = got
        if groups is not None:
            return _union_quantiles(mapping, owner, keys, lower, upper, n, q)
        return _quantiles(mapping, keys, lower, upper, owner, n, q)

    @classmethod
    def counts_of_bytes(cls, blobs, now=None, window: int | None = None, *,
                        groups=None) -> tuple[np.ndarray, np.ndarray] | None:
        """``from_bytes(blobs).bounds(now, window)`` as
        :meth:`quantiles_of_bytes` reads them (each sketch's window count);
        with ``groups``, each group's sums of its sketches' bounds as of
        the group's time (the bins' histograms' bounds add up, as a merged
        histogram's would: within eps of the union's count, no merge).
        None where :meth:`quantiles_of_bytes` is.

        >>> import numpy as np
        >>> a = SlidingQuantiles(100, 0.05, 0.01).update(np.arange(10), np.arange(10.0))
        >>> b = SlidingQuantiles(100, 0.05, 0.01).update(np.arange(5, 15), np.ones(10))
        >>> a.bounds(), b.bounds()                  # each sketch's window count
        ((10, 10), (10, 10))
        >>> got = QuantileColumn.counts_of_bytes([a.to_bytes(), b.to_bytes()], groups=[0])
        >>> got is None or [x.tolist() for x in got] == [[20], [20]]     # None without numba
        True
        >>> [x.tolist() for x in QuantileColumn.from_bytes([a.to_bytes(), b.to_bytes()]).union_bounds([0])]
        [[20], [20]]
        """
        got = _bin_bounds_of_bytes(blobs, now, window, groups)
        if got is None:
            return None
        _, _, lower, upper, owner, n = got
        if np.bincount(owner, weights=upper.astype(np.float64), minlength=n).max(initial=0.0) >= 2.0 ** 62:
            return None  # a count near int64: the merge decides (and refuses past it)
        return _owner_sums(lower, upper, owner, n)

    # -------------------------------------------------------------- union
    def union(self, group_starts) -> "QuantileColumn":
        """Each group's :meth:`SlidingQuantiles.merge_all` (group ``i``:
        sketches ``group_starts[i]`` to the next start, in order), every
        bin of every group in one
        :meth:`~ehist.keyed_counters.KeyedCounters.unite`; a group whose
        count comes near int64 by ``merge_all`` itself (which raises
        SumOverflowError past it)."""
        return QuantileColumn(self.params, self._united(group_starts, _units(self.bins)))

    # ------------------------------------------------------------- answers
    def bin_bounds(self, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every bin's :meth:`SlidingQuantiles.bin_bounds` (aligned with
        ``bins.keys``): ``now`` None (each sketch's newest) or one time per
        sketch, never earlier than its newest."""
        b = self.bins
        full = self.params[0]
        at = b.newest if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), (len(b),))
        late = b.has_newest & (at < b.newest)
        if late.any() or _wide(window, full):  # the sketch's own query raises what is wrong
            i = int(np.flatnonzero(late)[0]) if late.any() else 0
            self[i].bin_bounds(None if now is None else int(at[i]), window)
        return b.col.bounds(at[b.owner], full if window is None else int(window))

    def bounds(self, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every sketch's :meth:`SlidingQuantiles.bounds`: its window count."""
        lo, up = self.bin_bounds(now, window)
        return _sums(lo, self.bins.offsets), _sums(up, self.bins.offsets)

    def quantiles(self, q: float, now=None, window: int | None = None) -> np.ndarray:
        """Every sketch's :meth:`SlidingQuantiles.quantile` of ``q``
        (NaN for an empty window)."""
        lo, up = self.bin_bounds(now, window)
        b = self.bins
        return _quantiles(self._probe.mapping, b.keys, lo, up, b.owner, len(b), q)

    def union_quantiles(self, group_starts, q: float, now=None, window: int | None = None) -> np.ndarray:
        """Each group's quantile from its sketches' summed bin bounds,
        without merging (:meth:`SlidingQuantiles.union_bounds`, then
        :func:`~quantiles.quantiles_from_bounds`), as of ``now`` (one time
        per group; default: the group's newest)."""
        group_of, lo, up = self._group_bin_bounds(group_starts, now, window)
        b = self.bins
        return _union_quantiles(self._probe.mapping, group_of[b.owner], b.keys, lo, up,
                                int(np.asarray(group_starts).size), q)

    def union_bounds(self, group_starts, now=None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each group's window count as the sums of its sketches' bounds as
        of ``now`` (one time per group; default: the group's newest):
        :meth:`QuantileColumn.counts_of_bytes` with groups, from a column."""
        starts = np.asarray(group_starts, dtype=np.int64)
        group_of, lo, up = self._group_bin_bounds(starts, now, window)
        owner = group_of[self.bins.owner]
        total = np.bincount(owner, weights=up.astype(np.float64), minlength=starts.size).max(initial=0.0)
        if total >= 2.0 ** 63:  # as merge_all refuses the union's count
            raise SumOverflowError("merged window count would overflow int64")
        return _owner_sums(lo, up, owner, starts.size)

    def _group_bin_bounds(self, group_starts, now, window):
        """``(each sketch's group, every bin's lower, upper)``, each sketch
        bounded as of its group's time (``now``: one per group; None: the
        group's newest)."""
        starts = np.asarray(group_starts, dtype=np.int64)
        b = self.bins
        group_of = np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.append(starts, len(b))))
        if now is None:
            group_now = np.full(starts.size, INT64_MIN, dtype=np.int64)
            np.maximum.at(group_now, group_of[b.has_newest], b.newest[b.has_newest])
        else:
            group_now = np.broadcast_to(np.asarray(now, dtype=np.int64), starts.shape)
        at = group_now[group_of]
        lo, up = self.bin_bounds(np.where(b.has_newest, at, b.newest), window)
        return group_of, lo, up

    # ------------------------------------------------------------ encoding
    def to_bytes(self) -> list:
        """``[self[i].to_bytes() for i in range(len(self))]``, in one pass."""
        n = len(self)
        if n == 0:
            return []
        b = self.bins
        if compiled.active():  # the bin keys' varints, then the counters, in one compiled pass; framed in another
            from .compiled import key_varints

            flat, v_off, local = key_varints(b.keys, b.offsets)
            c = b.col
            payload, starts, ends = compiled.keyed_payloads(flat, v_off, local, b.offsets, c.exps, c.hi, c.lo,
                                                            c.offsets, c.newest, c.has_newest, c.merged, b.has_newest)
            head = _q.LAYOUT.head.pack(MAGIC, FAMILIES["SlidingQuantiles"], _q.LAYOUT.version, 0, *self.params)
            return sealed_blobs(head, b.has_newest.astype(np.uint16), b.newest, b.has_newest, payload, starts, ends)
        counts = np.diff(b.offsets)
        owner = b.owner
        local = np.arange(b.keys.size) - b.offsets[:-1][owner]
        regions, r_off = KeyedCounters(b.offsets, local, b.col, b.newest, b.has_newest).write()
        # the bin keys: m, then the first zigzag-encoded, then key - previous key - 1
        flat, v_off = _key_varints(b, counts, owner, local)
        vbuf, nbytes = varint_stream(flat)
        k_off = np.concatenate([[0], np.cumsum(nbytes)])[v_off]
        heads = np.zeros(n, dtype=np.dtype([("magic", "S2"), ("family", "u1"), ("version", "u1"), ("flags", "<u2")]
                                           + _FIELDS.descr))
        heads["magic"], heads["family"], heads["version"] = MAGIC, FAMILIES["SlidingQuantiles"], _q.LAYOUT.version
        heads["flags"] = b.has_newest.astype(np.uint16)
        heads["window"], heads["eps"], heads["accuracy"] = self.params
        heads["newest"] = b.newest
        head_buf = np.frombuffer(heads.tobytes(), dtype=np.uint8)
        size = _HEAD.size
        has = b.has_newest
        head_len = np.where(has, size, size - 8)
        src = np.concatenate([head_buf, vbuf, regions])
        pieces = np.empty((n, 3, 2), dtype=np.int64)
        pieces[:, 0, 0] = np.arange(n) * size
        pieces[:, 0, 1] = pieces[:, 0, 0] + head_len
        pieces[:, 1, 0], pieces[:, 1, 1] = head_buf.size + k_off[:-1], head_buf.size + k_off[1:]
        # a sketch never updated: its bin count only (no counter region)
        pieces[:, 2, 0] = head_buf.size + vbuf.size + r_off[:-1]
        pieces[:, 2, 1] = np.where(has, head_buf.size + vbuf.size + r_off[1:], pieces[:, 2, 0])
        flat_pieces = pieces.reshape(-1, 2)
        lengths = (pieces[:, :, 1] - pieces[:, :, 0]).sum(axis=1)
        joined = gather(src, flat_pieces[:, 0], flat_pieces[:, 1]).tobytes()
        ends = np.cumsum(lengths).tolist()
        crc32, pack = zlib.crc32, _CRC.pack
        out = []
        for a, e in zip([0] + ends[:-1], ends):
            body = joined[a:e]
            out.append(body + pack(crc32(body)))
        return out


def _key_varints(b: KeyedCounters, counts, owner, local) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)``: each sketch's bin-key varints, ``m``, then
    the first key zigzag-encoded, then each key - the previous one - 1, at
    ``values[offsets[s]:offsets[s + 1]]``."""
    first = local == 0
    gaps = np.empty(b.keys.size, dtype=np.uint64)
    k = b.keys
    gaps[first] = ((k[first] << 1) ^ (k[first] >> 63)).view(np.uint64)
    rest = ~first
    gaps[rest] = (k[rest] - np.concatenate([[0], k[:-1]])[rest] - 1).astype(np.uint64)
    v_off = np.concatenate([[0], np.cumsum(1 + counts)])
    flat = np.empty(int(v_off[-1]), dtype=np.uint64)
    flat[v_off[:-1]] = counts.astype(np.uint64)
    flat[v_off[:-1][owner] + 1 + local] = gaps
    return flat, v_off


def _bin_bounds_of_bytes(blobs, now, window, groups):
    """Every bin's bounds, decoded and bounded in one compiled pass:
    ``(mapping, bin keys, lower, upper, each bin's sketch or group, how
    many)``, each sketch as of its group's time with ``groups``; None where
    :meth:`QuantileColumn.quantiles_of_bytes` says."""
    if not (compiled.active() and len(blobs)):
        return None
    ok, buf, starts, lengths, params, probe, newest = _heads(blobs)
    if not ok.all():
        return None
    full = params[0]
    group_of = None
    if groups is not None:  # each sketch as of its group's time
        groups = np.asarray(groups, dtype=np.int64)
        group_of = np.repeat(np.arange(groups.size, dtype=np.int64), np.diff(np.append(groups, newest.size)))
        if now is None:
            group_now = np.full(groups.size, INT64_MIN, dtype=np.int64)
            np.maximum.at(group_now, group_of, newest)
        else:
            group_now = np.broadcast_to(np.asarray(now, dtype=np.int64), groups.shape)
        now = group_now[group_of]
    at = newest if now is None else np.broadcast_to(np.asarray(now, dtype=np.int64), newest.shape)
    if (at < newest).any() or _wide(window, full):
        return None
    w = full if window is None else int(window)
    cutoffs = np.maximum(at, np.int64(INT64_MIN + w)) - np.int64(w)
    accepted, offsets, keys, lower, upper = _decode_bounds(buf, starts + _HEAD.size, starts + lengths - _CRC.size,
                                                           newest, probe, cutoffs)
    if not accepted.all():
        return None
    owner = np.repeat(np.arange(newest.size, dtype=np.int64), np.diff(offsets))
    if groups is not None:
        return probe.mapping, keys, lower, upper, group_of[owner], groups.size
    return probe.mapping, keys, lower, upper, owner, newest.size


def _owner_sums(lower, upper, owner, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 sums of the bins' bounds per owner (``owner``
    non-decreasing; an owner without bins sums to 0)."""
    out = []
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else owner
    for x in (lower, upper):
        sums = np.zeros(n, dtype=np.int64)
        if owner.size:
            sums[owner[first]] = np.add.reduceat(np.asarray(x, dtype=np.int64), first)
        out.append(sums)
    return out[0], out[1]


def _wide(window, full: int) -> bool:
    """Whether ``window`` is not a query window of sketches of window
    ``full`` (None is: the whole)."""
    return window is not None and (isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer))
                                   or not 1 <= int(window) <= full)


def _union_quantiles(mapping, group, keys, lo, up, groups: int, q: float) -> np.ndarray:
    """Each group's quantile from its bins' bounds summed by bin key
    (``group``: each bin's group)."""
    order = order_by(group, keys)
    g, k = group[order], keys[order]
    first = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (k[1:] != k[:-1])]) if g.size else np.zeros(0, np.int64)
    lower = np.add.reduceat(lo[order], first) if first.size else lo[:0]
    upper = np.add.reduceat(up[order], first) if first.size else up[:0]
    return _quantiles(mapping, k[first], lower, upper, g[first], groups, q)


def _quantiles(mapping, keys, lo, up, owner, n: int, q: float) -> np.ndarray:
    """Each owner's :func:`~quantiles.quantiles_from_bounds` of ``q`` from
    its bins (``owner`` non-decreasing, keys increasing within an owner):
    the representative of the first bin whose estimated cumulative count
    reaches ``q`` times the estimated total, each owner's bins summed
    apart as the one-sketch function sums them."""
    used = up > 0
    keys, mid, owner = keys[used], (lo * 0.5 + up * 0.5)[used], owner[used]
    out = np.full(n, np.nan)
    if keys.size == 0:
        return out
    counts = np.bincount(owner, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    run = np.cumsum(mid)  # halves and integers: exact below 2**52
    local = run - np.concatenate([[0.0], run])[offsets[:-1]][owner]
    has = counts > 0
    total = np.zeros(n)
    total[has] = local[offsets[1:][has] - 1]
    reach = local >= float(q) * total[owner]
    # the first bin reaching the target (the last when rounding leaves none)
    none = np.iinfo(np.int64).max
    first = np.full(n, none)
    np.minimum.at(first, owner[reach], np.flatnonzero(reach))
    first = np.where(first == none, offsets[1:] - 1, first)
    out[has] = mapping.values(keys[first[has]])
    return out


def _sums(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each segment's int64 sum (0 for an empty one)."""
    out = np.zeros(offsets.size - 1, dtype=np.int64)
    has = np.diff(offsets) > 0
    if has.any():
        out[has] = np.add.reduceat(x, offsets[:-1][has])
    return out


def _units(b: KeyedCounters) -> np.ndarray:
    """Each sketch's units, as floats."""
    owner = np.repeat(np.arange(len(b)), np.diff(b.col.offsets[b.offsets]))  # each bucket's sketch
    return np.bincount(owner, weights=np.ldexp(1.0, b.col.exps), minlength=len(b))


def _heads(blobs):
    """``(possible mask, buf, starts, lengths, params, probe, newest)``:
    the sealed blobs of the current version, of the first one's parameters
    (``probe``: an empty sketch of them) with a newest time; params and
    probe None when none is."""
    ok, buf, starts, lengths = sealed_heads(blobs, FAMILIES["SlidingQuantiles"], _HEAD.size + 2 + _CRC.size, 0)
    ok &= buf[starts + 3] == _q.LAYOUT.version
    idx = np.flatnonzero(ok)
    params, probe, newest = None, None, np.zeros(0, dtype=np.int64)
    if idx.size:
        at = starts[idx] + _PARAMS_AT
        fields = np.frombuffer(gather(buf, at, at + _FIELDS.itemsize).tobytes(), dtype=_FIELDS)
        first = fields[0]
        params = (int(first["window"]), float(first["eps"]), float(first["accuracy"]))
        keep = ((fields["window"] == first["window"]) & (fields["eps"] == first["eps"])
                & (fields["accuracy"] == first["accuracy"]) & (fields["newest"] != INT64_MIN))
        try:
            probe = SlidingQuantiles(*params)
        except ValueError:
            keep[:], params = False, None
        ok[idx[~keep]] = False
        newest = fields["newest"][keep].astype(np.int64)
    return ok, buf, starts, lengths, params, probe, newest


def _decode(buf, starts, ends, newest, probe) -> tuple[KeyedCounters, np.ndarray]:
    """The bin keys and counter regions after the heads (``buf[starts[i]:
    ends[i]]``): ``(the accepted sketches, accepted mask)``, every check of
    ``SlidingQuantiles.from_bytes``."""
    bad, m, k_off, keys, region = _bins(buf, starts, ends, probe)
    live = np.flatnonzero(~bad)
    read, bins = KeyedCounters.read(buf, region[live], ends[live], m[live], probe.window, probe.eh_eps, newest[live])
    got = np.diff(bins.offsets) == m[live][read]
    accepted = np.zeros(starts.size, dtype=bool)
    accepted[live[read][got]] = True
    kept = live[read][got]
    bins = bins.take(np.flatnonzero(got))
    # bin keys in place of the counter ids; a window count near int64: from_bytes decides
    every_key = every(kept, starts.size) and keys.size == k_off[-1]  # every sketch accepted: the keys as read
    bins = KeyedCounters(bins.offsets, keys if every_key else keys[_ranges(k_off[kept], k_off[kept + 1])], bins.col,
                         bins.newest, bins.has_newest)
    heavy = _units(bins) >= 2.0 ** 62
    if heavy.any():
        accepted[kept[heavy]] = False
        bins = bins.take(np.flatnonzero(~heavy))
    return bins, accepted


def _decode_bounds(buf, starts, ends, newest, probe, cutoffs):
    """:func:`_decode` with every bin bounded for the units after its
    sketch's cutoff as it is decoded (:meth:`KeyedCounters.read_bounds`):
    ``(accepted mask, offsets, bin keys, lower, upper)`` of the accepted
    sketches."""
    bad, m, k_off, keys, region = _bins(buf, starts, ends, probe)
    live = np.flatnonzero(~bad)
    read, offsets, _, lower, upper, units = KeyedCounters.read_bounds(
        buf, region[live], ends[live], m[live], probe.window, probe.eh_eps, newest[live], cutoffs[live])
    counts = np.diff(offsets)
    got = counts == m[live][read]
    kept = live[read][got]
    totals = np.bincount(np.repeat(np.arange(counts.size), counts), weights=units.astype(np.float64),
                         minlength=counts.size)
    keep = got & (totals < 2.0 ** 62)  # a window count near int64: from_bytes decides
    accepted = np.zeros(starts.size, dtype=bool)
    accepted[live[read][keep]] = True
    rows = _ranges(offsets[:-1][keep], offsets[1:][keep])
    kept = live[read][keep]
    return (accepted, np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64),
            keys[_ranges(k_off[kept], k_off[kept + 1])], lower[rows], upper[rows])


def _bins(buf, starts, ends, probe):
    """Each sketch's bin keys (the gaps after the head) and where its
    counter region starts: ``(bad mask, bin counts, key offsets, keys,
    region starts)``; bad ones are left to ``from_bytes``."""
    count = starts.size
    if compiled.active():  # one compiled pass per sketch, the same checks (quantiles.compiled)
        from .compiled import bin_keys

        bad, m, k_off, keys, region = bin_keys(buf, starts, ends, _q.MAX_BINS)
        bad[np.repeat(np.arange(count), m)[~probe.mapping.valid(keys)]] = True
        return bad, m, k_off, keys, region
    varint = region_varints(buf, starts, ends)

    every = np.arange(count)
    m, m_stop, bad = varint(np.zeros(count, dtype=np.int64), every)
    most = np.minimum(_q.MAX_BINS, (ends - m_stop - 1) // 2).astype(np.uint64)
    bad |= (m > most) | (m == 0)  # no bin: left to from_bytes (rare)
    m = np.where(bad, 0, m).astype(np.int64)
    k_off = np.concatenate([[0], np.cumsum(m)])
    owner = np.repeat(every, m)
    local = np.arange(int(k_off[-1])) - k_off[:-1][owner]
    gaps, g_stop, g_bad = varint(1 + local, owner)
    bad[owner[g_bad]] = True
    is_first = local == 0
    z = gaps[is_first]
    first_key = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    steps = np.where(is_first, 0.0, gaps.astype(np.float64))
    span = np.bincount(owner, weights=steps, minlength=count) + np.maximum(m - 1, 0)
    base = np.zeros(count, dtype=np.int64)
    base[owner[is_first]] = first_key
    bad |= (m > 0) & (base + span.astype(np.float64) > 2.0 ** 62)  # near int64's edge: from_bytes decides
    step = np.where(is_first, 0, np.minimum(gaps, np.uint64(1 << 62)).astype(np.int64) + 1)
    run = np.cumsum(step)
    keys = base[owner] + run - np.concatenate([[0], run])[k_off[:-1]][owner]
    bad[owner[~probe.mapping.valid(keys)]] = True
    # the counter region: m counters, ids 0 .. m - 1
    region = np.where(m > 0, g_stop[np.maximum(k_off[1:] - 1, 0)] + 1, ends) if owner.size else ends.copy()
    return bad, m, k_off, keys, region
