"""L_p norms over sliding windows: p-stable sketches inside EH-style buckets.

DGIM, Section 5.  See :class:`SlidingLpNorm`.
"""

from __future__ import annotations

import math

import numpy as np

from ehist.validation import (
    INT64_MIN,
    batch_in_window,
    check_eps,
    check_window,
    coerce_timestamps,
    resolve_query,
)
from ehist.errors import CorruptSketchError
from ehist.hashing import as_hashes, check_seed, hash64
from ehist.serialization import Layout, Writer, check_newest, times_before
from ehist.synopsis import Synopsis

from ehist.flat_rows import row_times

from .elements import Elements, cutoff, no_elements

from .stable import check_p, median_abs_stable, stable_variates
from .stable_sketch import float_values, rows_for

__all__ = ["SlidingLpNorm"]

#: The format, declared here once (its only codec is this module's; the
#: table is drawn in :meth:`SlidingLpNorm.to_bytes`): version, flag and the
#: ``struct`` format of the parameters (p, window, eps, delta, seed, rows).
_FLAG_HAS_NEWEST = 1
#: The elements form (version 2): the sketch holds its elements, not buckets.
FLAG_ELEMENTS = 2
LAYOUT = Layout("SlidingLpNorm", version=1, read=(1, 2), flags=_FLAG_HAS_NEWEST | FLAG_ELEMENTS,
                parameters="dqddQI", what="parameters")
#: The version of the elements form's bytes (buckets keep :data:`LAYOUT`'s).
ELEMENTS_VERSION = 2
_BLOCK_CELLS = 1 << 22  # atoms x rows per block of new data


class SlidingLpNorm(Synopsis):
    r"""L_p norm of the vector of a sliding window, ``p`` in (0, 2].

    Elements are ``(timestamp, index, value)``: value ``>= 0`` added to
    coordinate ``index`` (the restricted model of DGIM Section 5 and Indyk).
    The window ``(now - w, now]`` defines a vector ``v``; the answer is
    ``||v||_p = (sum_i |v_i|**p)**(1/p)``.

    The window is cut into buckets, each carrying a :class:`StableSketch`
    of its elements, its newest and oldest timestamps.  With
    ``f = L_p**q``, ``q = max(p, 1)`` (superadditive on non-negative
    vectors: property P3; P4 holds with ``C_f = 2**(p-1)`` for ``p >= 1``
    and ``2**(1/p - 1)`` for ``p < 1``), the buckets keep the paper's

    * Invariant 3: ``f(B_{n+1}) <= (C_f / k) sum_{i<=n} f(B_i)``
    * Invariant 4: ``f(B_{n+1}) + f(B_{n+2}) > (1/k) sum_{i<=n} f(B_i)``

    with ``k = ceil(1/eps)``.  Insertion builds, from the newest unit to
    the oldest, each bucket as large as Invariant 3 allows (a timestamp is
    never split); a maximal bucket also satisfies Invariant 4 by P4.  A
    query composes the sketches of the buckets entirely inside the window
    (all but the oldest, straddling one).

    Guarantee (Theorem 6 turned into the norm, with the sketch error):
    with probability at least ``1 - delta`` for a given query,

    .. math:: \frac{1 - \epsilon}{\left(C_f + C_f^2 \rho / k\right)^{1/q}}
              \, L \;\le\; \widehat L \;\le\; (1 + \epsilon)\, L,
              \qquad \rho = \left(\frac{1+\epsilon}{1-\epsilon}\right)^{q}

    (:meth:`guarantee` returns the two factors; ``rho`` accounts for the
    invariants being kept on sketched, not exact, values of ``f``).  At
    p = 1 this is ``(1 +/- ~2 eps)``; for other p the paper's bound allows
    an underestimate by up to ``C_f**(1/q)`` (about 1.41 at p = 2).

    **The elements form.** While the window holds at most ``rows``
    elements (one per time and index, values summed: a sparse key), the
    sketch keeps them rather than buckets of ``rows`` floats each, and
    :meth:`estimate` is the exact norm (:meth:`sketch` the exact sketch of
    the window).  Past ``rows`` elements, at an update or a merge, it takes
    the buckets those elements build (one update of them into a new
    sketch) and keeps buckets.  :attr:`elements` says which form it holds.

    Parameters
    ----------
    p : float in (0, 2]
    window : int
        ``N``, the longest window (timestamp units).
    eps, delta : float, default 0.05
        Accuracy of each sketch (``rows_for(p, eps, delta)`` rows) and
        ``k = ceil(1/eps)``.
    seed : int, default 0
        Seed of the stable variables and of the index hash; sketches merge
        only with the same seed.
    rows : int, optional
        Override the number of rows.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ts = np.arange(5000)
    >>> idx = rng.integers(0, 100, 5000)
    >>> s = SlidingLpNorm(p=1.0, window=2000, eps=0.1, delta=0.05, seed=1)
    >>> s.update(ts, idx, np.ones(5000))                # doctest: +ELLIPSIS
    SlidingLpNorm(p=1, window=2000, eps=0.1, delta=0.05, rows=1043, seed=1, buckets=...)
    >>> low, high = s.guarantee()
    >>> low * 1000 <= s.estimate(window=1000) <= high * 1000      # L_1 of the last 1000 = 1000
    True
    """

    __slots__ = ("_p", "_window", "_eps", "_delta", "_seed", "_rows", "_k", "_q", "_cf",
                 "_sk", "_hi", "_lo", "_newest", "_median", "_elements")

    def __init__(self, p: float, window: int, eps: float = 0.05, delta: float = 0.05,
                 seed: int = 0, rows: int | None = None):
        self._p = check_p(p)
        self._window = check_window(window)
        self._eps = check_eps(eps)
        delta = float(delta)
        if not (0.0 < delta < 1.0):
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        self._delta = delta
        self._seed = check_seed(seed)
        self._rows = rows_for(self._p, self._eps, delta) if rows is None else int(rows)
        if not 1 <= self._rows <= 1 << 20:
            raise ValueError(f"rows must be in [1, {1 << 20}], got {rows}")
        self._k = math.ceil(1.0 / self._eps)
        self._q = max(self._p, 1.0)
        self._cf = 2.0 ** (self._p - 1.0) if self._p >= 1.0 else 2.0 ** (1.0 / self._p - 1.0)
        self._median = median_abs_stable(self._p)
        self._sk = np.zeros((0, self._rows), dtype=np.float64)
        self._hi = np.zeros(0, dtype=np.int64)
        self._lo = np.zeros(0, dtype=np.int64)
        self._newest: int | None = None
        # the elements form's (times, index hashes, values), or None once the sketch holds buckets
        self._elements: tuple | None = no_elements()

    # ------------------------------------------------------------------ info
    p = property(lambda self: self._p)
    eps = property(lambda self: self._eps)
    delta = property(lambda self: self._delta)
    seed = property(lambda self: self._seed)
    rows = property(lambda self: self._rows)

    def __len__(self) -> int:
        """Number of buckets (of elements, in the elements form)."""
        return int(self._elements[0].size) if self._elements is not None else int(self._hi.size)

    @property
    def elements(self) -> int | None:
        """The elements held in the elements form (None once the sketch
        holds buckets).

        >>> s = SlidingLpNorm(2.0, 100, eps=0.3, delta=0.3).update([1, 2, 2], ["a", "b", "b"], [3.0, 2.0, 2.0])
        >>> s.elements, s.estimate()                 # sqrt(3**2 + 4**2), exact
        (2, 5.0)
        """
        return None if self._elements is None else int(self._elements[0].size)

    def _as_buckets(self) -> "SlidingLpNorm":
        """This sketch holding buckets: itself when it does, else a new
        sketch holding what its elements build (one update of them into a
        sketch holding buckets from the start, as of its newest time)."""
        if self._elements is None:
            return self
        out = self.copy()
        out._elements = None
        out._newest = None
        if self._newest is not None:
            ts, h, v = self._elements
            # a zero at the newest time: the batch's newest is the sketch's (a zero adds nothing)
            out.update_hashes(np.append(ts, self._newest), np.append(h, np.uint64(0)), np.append(v, 0.0))
        return out

    def guarantee(self) -> tuple[float, float]:
        """``(low, high)``: with probability ``>= 1 - delta``,
        ``low * L <= estimate <= high * L`` (see the class docstring)."""
        eps, q, cf = self._eps, self._q, self._cf
        rho = ((1 + eps) / (1 - eps)) ** q
        low = (1 - eps) / (cf + cf * cf * rho / self._k) ** (1 / q)
        return low, 1 + eps

    _names = ("p", "windows", "eps", "delta", "seeds", "rows")
    _state = ("_newest", "_hi", "_lo", "_sk", "_elements")

    def _params(self):
        return (self._p, self._window, self._eps, self._delta, self._seed, self._rows)

    def _repr_params(self) -> list:
        return [f"p={self._p:g}", f"window={self._window}", f"eps={self._eps:g}", f"delta={self._delta:g}",
                f"rows={self._rows}", f"seed={self._seed}"]

    def _repr_state(self) -> list:
        if self._elements is not None:
            return [f"elements={len(self)}", f"newest={self._newest}"]
        return [f"buckets={len(self)}", f"newest={self._newest}"]

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 400, 3)
        parts = [cls(1.5, 200, eps=0.3, delta=0.3, seed=2).update(ts[p::2], ts[p::2] % 17, (ts[p::2] % 5) * 1.0)
                 for p in range(2)]
        few = [cls(1.5, 200, eps=0.3, delta=0.3, seed=2).update(ts[p:20:2], ts[p:20:2] % 7, (ts[p:20:2] % 4) * 1.5)
               for p in range(2)]
        return [cls(0.5, 50, eps=0.3, delta=0.3), parts[0]._as_buckets(), cls.merge_all(parts), few[0],
                cls.merge_all(few)]

    # ----------------------------------------------------------- primitives
    def _fhat(self, sketches: np.ndarray) -> np.ndarray:
        """Estimated f = L_p**q of each row-vector sketch (2-D: one per row)."""
        norm = np.median(np.abs(sketches), axis=-1) / self._median
        with np.errstate(over="ignore"):  # a norm**q beyond float64 is inf: the bucket compares as largest
            return norm**self._q

    def _atoms(self, ts: np.ndarray, hashes: np.ndarray, vals: np.ndarray):
        """Sketches of the batch's timestamp groups, newest first, in blocks.

        Yields (sketches [a, rows], newest ts, oldest ts) per block.  A
        timestamp's sketch is the sum, over its distinct index hashes in
        increasing order, of the index's variates times the sum of its
        values at that timestamp: its float bits depend on those
        (timestamp, index) sums alone, not on the rows' order nor on how
        the rows were grouped before (Spark's per-(key, time, index)
        reduction, :func:`udaf.two_phase.reduce_rows`, gives the same
        bytes while the sums are exact in float64, integers below 2**53).
        The variates are generated once per distinct index of a block.
        """
        order = np.lexsort((hashes, ts))  # stable: a pair's values summed in the rows' order
        ts, hashes, vals = ts[order], hashes[order], vals[order]
        pair = np.flatnonzero(np.concatenate([[True], (ts[1:] != ts[:-1]) | (hashes[1:] != hashes[:-1])]))
        vals = np.add.reduceat(vals, pair)
        ts, hashes = ts[pair], hashes[pair]
        starts = np.flatnonzero(np.concatenate([[True], ts[1:] != ts[:-1]]))
        ends = np.concatenate([starts[1:], [ts.size]])
        atoms_per_block = max(1, _BLOCK_CELLS // self._rows)
        for b_end in range(starts.size, 0, -atoms_per_block):
            b_start = max(0, b_end - atoms_per_block)
            e0, e1 = int(starts[b_start]), int(ends[b_end - 1])
            uniq, inverse = np.unique(hashes[e0:e1], return_inverse=True)
            x = stable_variates(self._p, self._seed, self._rows, uniq)  # rows x U
            contrib = x.T[inverse] * vals[e0:e1, None]  # (timestamp, index) pairs x rows
            sk = np.add.reduceat(contrib, starts[b_start:b_end] - e0, axis=0)
            t = ts[starts[b_start:b_end]]
            yield sk[::-1], t[::-1], t[::-1]

    def _rebuild(self, blocks) -> None:
        """Greedy bucketing of units, newest first: each bucket absorbs older
        units while Invariant 3 still holds for it.  ``blocks`` yields
        ``(sketches, newest_ts, oldest_ts)`` arrays of units (a unit is a
        timestamp group of new data, or an old bucket)."""
        limit = self._cf / self._k
        out_sk, out_hi, out_lo = [], [], []
        total = 0.0  # f of the finished (newer) buckets
        cur = None  # [sketch, hi, lo] of the open bucket

        def close():
            f = float(self._fhat(cur[0]))
            out_sk.append(cur[0])
            out_hi.append(cur[1])
            out_lo.append(cur[2])
            return f

        for sk, hi, lo in blocks:
            n = sk.shape[0]
            prefix = np.zeros((n + 1, self._rows))
            np.cumsum(sk, axis=0, out=prefix[1:])
            i = 0
            while i < n:
                if cur is None:
                    cur = [sk[i].copy(), int(hi[i]), int(lo[i])]
                    i += 1
                    continue
                bound = limit * total
                base = cur[0] - prefix[i]

                def fits(j):  # cur plus units i..j-1
                    return self._fhat(base + prefix[j]) <= bound

                best, step = i, 1
                while best + step <= n and fits(best + step):
                    best += step
                    step *= 2
                top = min(n, best + step - 1)
                while best < top:
                    mid = (best + top + 1) // 2
                    if fits(mid):
                        best = mid
                    else:
                        top = mid - 1
                if best > i:
                    cur[0] = base + prefix[best]
                    cur[2] = int(lo[best - 1])
                    i = best
                if i < n:  # unit i does not fit: the bucket is finished
                    total += close()
                    cur = None
        if cur is not None:
            close()
        if out_sk:
            self._sk = np.vstack(out_sk)
            self._hi = np.array(out_hi, dtype=np.int64)
            self._lo = np.array(out_lo, dtype=np.int64)
        else:
            self._sk = np.zeros((0, self._rows))
            self._hi = np.zeros(0, dtype=np.int64)
            self._lo = np.zeros(0, dtype=np.int64)

    # ---------------------------------------------------------------- update
    def update(self, timestamps, indices, values=None) -> "SlidingLpNorm":
        """Insert ``(timestamp, index, value)`` elements (vectorized).

        Indexes are integers or strings (hashed with the seed); values are
        non-negative finite numbers (default 1): the restricted model.  The
        batch is validated whole before anything changes; it is stably
        sorted by timestamp, whose oldest must be ``>=`` :attr:`newest`.

        Raises
        ------
        ValueError
            Negative, NaN or non-numeric values, mismatched lengths, bad indexes.
        LateDataError
            A timestamp older than :attr:`newest`.
        """
        return self.update_hashes(timestamps, hash64(indices, self._seed), values)

    def update_hashes(self, timestamps, hashes, values=None) -> "SlidingLpNorm":
        """Insert elements whose indexes are already hashed with
        ``ehist.hashing.hash64(indices, seed)`` (uint64, or their int64 bit
        patterns): the same result as :meth:`update` on the indexes.

        >>> from ehist.hashing import hash64
        >>> a = SlidingLpNorm(2.0, 100, seed=3).update([1, 2], ["x", "y"], [2.0, 5.0])
        >>> a == SlidingLpNorm(2.0, 100, seed=3).update_hashes([1, 2], hash64(["x", "y"], 3), [2.0, 5.0])
        True
        """
        ts = coerce_timestamps(timestamps)
        hashes = as_hashes(hashes)
        if hashes.size != ts.size:
            raise ValueError(
                f"timestamps and indices have different lengths ({ts.size} and {hashes.size})"
            )
        vals = float_values(values, ts.size, nonnegative=True, against="timestamps")
        if ts.size == 0:
            return self
        ts, (hashes, vals), newest = batch_in_window(ts, (hashes, vals), self._newest, self._window)
        prior = (self._elements, self._newest)  # restored if the buckets' sums overflow
        if self._elements is not None:
            old_ts, old_h, old_v = self._elements
            held = Elements.canonical(np.zeros(old_ts.size + ts.size, dtype=np.int64), np.concatenate([old_ts, ts]),
                                      np.concatenate([old_h, hashes]), np.concatenate([old_v, vals]),
                                      np.array([newest]), self._window, 1)
            with np.errstate(over="ignore"):
                finite = bool(np.isfinite(np.abs(held.values).sum()))
            if not finite:
                raise ValueError("values too large: the window's p-stable sums overflow float64 (keep values and "
                                 "their sums within about 1e300)")
            if held.ts.size <= self._rows:
                self._elements, self._newest = (held.ts, held.hashes, held.values), newest
                return self
            # past rows elements: the buckets of every element held, as one batch at the newest time
            self._elements, self._newest = None, None
            ts, hashes, vals = (np.append(held.ts, newest), np.append(held.hashes, np.uint64(0)),
                                np.append(held.values, 0.0))
        cutoff = newest - self._window
        keep = vals > 0
        ts, hashes, vals = ts[keep], hashes[keep], vals[keep]
        alive = self._hi > cutoff
        old = (self._sk[alive], self._hi[alive], self._lo[alive])
        before = {f: getattr(self, f) for f in ("_sk", "_hi", "_lo", "_newest")}
        self._newest = newest

        def blocks():
            if ts.size:
                yield from self._atoms(ts, hashes, vals)
            if old[1].size:
                yield old

        with np.errstate(over="ignore", invalid="ignore"):
            self._rebuild(blocks())
            finite = bool(np.isfinite(np.abs(self._sk).sum(axis=0)).all())  # every window's sum, too
        if not finite:  # a state its own bytes could not hold: refuse the batch, unchanged
            for f, v in before.items():
                setattr(self, f, v)
            self._elements, self._newest = prior
            raise ValueError("values too large: the window's p-stable sums overflow float64 (keep values and "
                             "their sums within about 1e300)")
        return self

    def add(self, timestamp: int, index, value: float = 1.0) -> "SlidingLpNorm":
        """Insert one element."""
        return self.update([timestamp], [index], [value])

    # ----------------------------------------------------------------- query
    def sketch(self, now: int | None = None, window: int | None = None) -> np.ndarray:
        """The composed row sketch of the buckets entirely inside the window."""
        now, window = resolve_query(now, window, self._newest, self._window)
        if self._elements is not None:  # the window's elements, exactly
            if now is None:
                return np.zeros(self._rows)
            ts, h, v = self._elements
            inside = ts > cutoff(now, window)
            uniq, inverse = np.unique(h[inside], return_inverse=True)
            x = stable_variates(self._p, self._seed, self._rows, uniq)
            return (x.T[inverse] * v[inside, None]).sum(axis=0) if uniq.size else np.zeros(self._rows)
        if now is None or not self._hi.size:
            return np.zeros(self._rows)
        inside = self._lo > max(now - window, INT64_MIN)
        return self._sk[inside].sum(axis=0)

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        """Estimated L_p norm of the window ``(now - window, now]``: the
        median of the window's sketch values over the stable law's.
        ValueError for a ``now`` before :attr:`newest` or a window outside
        ``[1, N]``.  In the elements form: the exact norm."""
        if self._elements is not None:
            return self.union_estimate([self], now, window)
        y = self.sketch(now, window)
        return float(np.median(np.abs(y))) / self._median

    @classmethod
    def union_estimate(cls, sketches, now: int | None = None, window: int | None = None) -> float:
        """The L_p norm of the union of ``sketches`` (same parameters) over
        the window ending at ``now`` (default: their newest), without
        merging them: where every sketch that saw an element is in the
        elements form, the exact norm of their elements (each index's
        values summed over the sketches in order,
        :meth:`~lp_norms.elements.Elements.norms`); otherwise the estimate
        of their sketches added (the sketch is linear).

        >>> a = SlidingLpNorm(2.0, 100).update([1], ["x"], [3.0])
        >>> b = SlidingLpNorm(2.0, 100).update([2], ["y"], [4.0])
        >>> SlidingLpNorm.union_estimate([a, b])
        5.0
        """
        sk, now = cls._compatible_at(sketches, now)
        live = [s for s in sk if s._newest is not None]
        if any(s._elements is None for s in live):
            y = sum(s.sketch(now, window) for s in sk)
            return float(np.median(np.abs(y))) / sk[0]._median
        for s in sk:
            at, w = resolve_query(now, window, s._newest, s._window)
        if not live:
            return 0.0
        held = Elements.of([s._elements for s in live])
        return float(held.norms(sk[0]._p, np.full(len(live), cutoff(at, w), dtype=np.int64), np.array([0]))[0])

    def inner_product(self, other: "SlidingLpNorm", now: int | None = None,
                      window: int | None = None) -> float:
        """Sliding-window join size: estimate of ``<u, v>`` for the windowed
        vectors of two p = 2 sketches built with the same seed and rows.

        ``mean_r(y_r z_r) / 2`` over the composed sketches (AGMS with
        Gaussian variables of variance 2).  For the composed vectors its
        standard deviation is ``sqrt((|u|^2 |v|^2 + <u,v>^2) / rows)``; the
        oldest, straddling bucket of each side is left out, as for norms.
        """
        self._check_compatible(other)
        if self._p != 2.0:
            raise ValueError(f"inner products need p = 2, got p = {self._p:g}")
        if now is None:
            newest = [x for x in (self._newest, other._newest) if x is not None]
            now = max(newest) if newest else None
        y = self.sketch(now, window)
        z = other.sketch(now, window)
        return float(np.dot(y, z)) / (2.0 * self._rows)

    # ----------------------------------------------------------------- merge
    @classmethod
    def _union(cls, sketches: list) -> "SlidingLpNorm":
        """Order-preserving unions, one sketch after the other: the buckets
        of both, sorted by newest timestamp, re-bucketed by the same greedy
        rule (a bucket's time interval is the union of its parts').  A
        query composes every bucket whose interval lies inside the window,
        so the merged estimate leaves out at most one straddling bucket of
        each input's history: the same kind of underestimate as
        :meth:`estimate`, measured in the tests."""
        live = [s for s in sketches if s._newest is not None]
        if len(live) > 1 and all(s._elements is not None for s in live):  # elements that fit stay elements
            newest = max(s._newest for s in live)
            held = Elements.canonical(np.zeros(sum(s._elements[0].size for s in live), dtype=np.int64),
                                      *(np.concatenate(c) for c in zip(*(s._elements for s in live))),
                                      np.array([newest]), live[0]._window, 1)
            with np.errstate(over="ignore"):
                finite = bool(np.isfinite(np.abs(held.values).sum()))
            if held.ts.size <= live[0]._rows and finite:  # (sums past float64: the buckets' merge decides)
                out = live[0].copy()
                out._elements, out._newest = (held.ts, held.hashes, held.values), newest
                return out
        if len(live) <= 1 and (live[0] if live else sketches[0])._elements is not None:
            return (live[0] if live else sketches[0]).copy()  # one sketch's elements: themselves
        if len(sketches) == 1:
            return sketches[0].copy()
        parts = [s._as_buckets() for s in sketches]
        out = parts[0]
        for other in parts[1:]:
            out = out._merge_two(other)
        out._elements = None
        return out

    def _merge_two(self, other: "SlidingLpNorm") -> "SlidingLpNorm":
        out = self.copy()
        if other._newest is None:
            return out
        newest = other._newest if out._newest is None else max(out._newest, other._newest)
        cutoff = newest - self._window
        sk = np.vstack([self._sk, other._sk])
        hi = np.concatenate([self._hi, other._hi])
        lo = np.concatenate([self._lo, other._lo])
        alive = hi > cutoff
        sk, hi, lo = sk[alive], hi[alive], lo[alive]
        order = np.lexsort((lo, hi))[::-1]
        sk, hi, lo = sk[order], hi[order], lo[order]
        # a unit's oldest timestamp is the min over everything absorbed:
        # carry interval lower ends through a running minimum
        out._newest = newest
        out._rebuild([(sk, hi, lo)])
        out._fix_intervals(hi, lo)
        return out

    def _fix_intervals(self, unit_hi, unit_lo) -> None:
        """After re-bucketing overlapping units, widen each bucket's oldest
        timestamp to the minimum over the units it absorbed."""
        if not self._hi.size:
            return
        # units are newest first; bucket b absorbed the units between its
        # first unit (hi == bucket hi) and the next bucket's first unit
        starts = np.searchsorted(-unit_hi, -self._hi, side="left")
        mins = np.minimum.reduceat(unit_lo, starts)
        self._lo = np.minimum(self._lo, mins)

    # --------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """Versioned bytes (family id 3, format version 1).

        ::

            offset  size  field
                 0     6  preamble (magic b"EH", family 3, version 1,
                          flags: bit 0 has_newest)
                 6     8  p (float64)
                14     8  window (int64)
                22     8  eps (float64)
                30     8  delta (float64)
                38     8  seed (uint64)
                46     4  rows (uint32)
                50     8  newest (int64)                   [if has_newest]
                 .     *  varint n_buckets
                 .     *  n varints: newest - hi[0], hi[i-1] - hi[i], ...
                 .     *  n varints: hi[i] - lo[i]
                 .  8n*r  bucket sketches, float64, newest bucket first
             end-4     4  CRC-32

        A sketch in the elements form (updated, at most ``rows`` elements)
        is version 2, flags bit 0 and bit 1 (elements): the parameters and
        newest as above, then varint m, m x 8 index hashes (uint64), m
        varints (newest - the first element's time, then each time - the
        previous one) and m x 8 values (float64, > 0), by time, then hash.
        """
        if self._elements is not None and self._newest is not None:
            ts, h, v = self._elements
            w = Writer("SlidingLpNorm", ELEMENTS_VERSION, _FLAG_HAS_NEWEST | FLAG_ELEMENTS)
            w.struct(LAYOUT.parameters, *self._params()).struct("q", self._newest).varints([ts.size])
            gaps = np.diff(ts, prepend=ts[:1])
            if ts.size:
                gaps[0] = self._newest - ts[0]
            return w.raw(h.astype("<u8").tobytes()).varints(gaps).raw(v.astype("<f8").tobytes()).finish()
        flags = _FLAG_HAS_NEWEST if self._newest is not None else 0
        w = LAYOUT.writer(flags, self._p, self._window, self._eps, self._delta, self._seed, self._rows)
        if self._newest is None:
            return w.finish()
        w.struct("q", self._newest)
        n = len(self)
        w.varints([n])
        if n:
            deltas = np.empty(n, dtype=np.int64)
            deltas[0] = self._newest - self._hi[0]
            deltas[1:] = self._hi[:-1] - self._hi[1:]
            w.varints(deltas.view(np.uint64))
            w.varints((self._hi - self._lo).view(np.uint64))
            w.raw(self._sk.astype("<f8").tobytes())
        return w.finish()

    @classmethod
    def from_bytes(cls, data) -> "SlidingLpNorm":
        name = "SlidingLpNorm"
        r, flags, out = LAYOUT.open(data, cls)
        rows = out._rows
        if (flags == _FLAG_HAS_NEWEST | FLAG_ELEMENTS) != (r.version == ELEMENTS_VERSION) or (
                flags & FLAG_ELEMENTS and not flags & _FLAG_HAS_NEWEST):
            raise CorruptSketchError(f"{name}: expected the elements flag with version {ELEMENTS_VERSION} only, "
                                     f"found flags {flags:#06x} in version {r.version}")
        if not flags & _FLAG_HAS_NEWEST:
            r.expect_end()
            return out
        newest = check_newest(r.struct("q", "newest timestamp")[0], name)
        if flags & FLAG_ELEMENTS:
            out._elements, out._newest = _read_elements(r, name, out, int(newest)), int(newest)
            r.expect_end()
            return out
        out._elements = None
        n = r.varint("bucket count")
        if n * (8 * rows + 2) > r.remaining:
            raise CorruptSketchError(
                f"{name}: expected at most {r.remaining // (8 * rows + 2)} buckets in the "
                f"bytes left, found {n}"
            )
        if n:
            deltas = r.varints(n, "timestamp deltas")
            widths = r.varints(n, "interval widths")
            if int(deltas.max()) >= out._window:
                raise CorruptSketchError(f"{name}: expected bucket timestamps within the window")
            ages = np.cumsum(deltas)
            if (ages[1:] < ages[:-1]).any():  # each delta is below 2**63: a wrap of the sum shows as a decrease
                raise CorruptSketchError(f"{name}: expected bucket timestamps within int64")
            hi = times_before(newest, ages, name, "bucket timestamps")
            lo = (hi.view(np.uint64) - widths).view(np.int64)  # modular: a width past int64 wraps above hi
            if (lo > hi).any() or (lo == -2**63).any():
                raise CorruptSketchError(f"{name}: expected bucket timestamps within int64")
            sk = np.frombuffer(r.raw(8 * rows * n, "bucket sketches"), dtype="<f8")
            r.expect_end()
            if hi[-1] <= newest - out._window or not np.all(np.isfinite(sk)):
                raise CorruptSketchError(f"{name}: expected live buckets with finite sketches")
            out._sk = sk.astype(np.float64).reshape(n, rows)
            out._hi, out._lo = hi, lo
        else:
            r.expect_end()
        out._newest = int(newest)
        return out


def _read_elements(r, name: str, s: SlidingLpNorm, newest: int) -> tuple:
    """The elements form's elements after the newest time, with every
    check: at most ``rows``, times inside the window and in order, one per
    time and hash, finite values above 0."""
    m = r.varint("element count")
    if m > s.rows:
        raise CorruptSketchError(f"{name}: expected at most rows = {s.rows} elements, found {m}")
    h = np.frombuffer(r.raw(8 * m, f"{m} element hashes"), dtype="<u8").astype(np.uint64)
    gaps = r.varints(m, "element times")
    v = np.frombuffer(r.raw(8 * m, f"{m} element values"), dtype="<f8").astype(np.float64)
    ts = row_times(gaps, h, newest, s.window, name, "elements")
    with np.errstate(over="ignore"):
        if m and not (np.all(v > 0) and np.isfinite(np.abs(v).sum())):
            raise CorruptSketchError(f"{name}: expected finite element values above 0")
    return ts, h, v
