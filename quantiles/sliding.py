"""Quantiles and ranks over a sliding window: an exponential histogram per
value bin.  See :class:`SlidingQuantiles`."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ehist.validation import INT64_MAX, INT64_MIN, batch_in_window, check_window, checked_total, coerce_timestamps
from ehist.counters import (KeyedHistograms, apply_keyed, empty, read_keyed, settle,
                            settled_total, write_counters)
from ehist.errors import CorruptSketchError, SumOverflowError
from ehist.serialization import Layout, check_newest
from ehist.synopsis import parameter

from .mapping import LogMapping, check_accuracy

__all__ = ["SlidingQuantiles", "quantiles_from_bounds", "cdf_from_bounds", "quantile_bounds_from_bounds"]

#: ``struct`` format of the parameters after the preamble: window, eps, accuracy.
_FLAG_HAS_NEWEST = 1
#: The byte layout (drawn in :meth:`SlidingQuantiles.to_bytes`): format 2
#: stores compact counters (:mod:`ehist.counters`); 1 is still read.
LAYOUT = Layout("SlidingQuantiles", version=2, read=(1, 2), flags=_FLAG_HAS_NEWEST, parameters="qdd",
                what="window, eps and accuracy")
#: The most value bins a sketch may hold (every finite float64 at accuracy
#: 1e-6 needs about 7.4e8; a window of them would not fit in memory anyway).
MAX_BINS = 1 << 22


def _check_eps(eps) -> float:
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real) or not 1e-6 <= float(eps) < 1.0:
        raise ValueError(f"eps must be a number in [1e-06, 1), got {eps!r}")
    return float(eps)


def _coerce_values(values, n: int) -> np.ndarray:
    if isinstance(values, (str, bytes)):
        raise ValueError(f"values must be numbers, got {type(values).__name__}")
    try:
        x = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values must be numbers: {exc}") from None
    if x.dtype == object or x.dtype.kind not in "biuf":
        raise ValueError(f"values must be numbers, got dtype {x.dtype}")
    x = x.reshape(-1).astype(np.float64)
    if x.shape[0] != n:
        raise ValueError(f"timestamps and values have different lengths ({n} and {x.shape[0]})")
    bad = ~np.isfinite(x)
    if bad.any():
        raise ValueError(f"values must be finite, found {x[bad][0]!r} at position {int(np.flatnonzero(bad)[0])}")
    return x


def _check_qs(qs) -> np.ndarray:
    q = np.asarray(qs, dtype=np.float64).reshape(-1)
    if q.size and not ((q >= 0) & (q <= 1)).all():
        raise ValueError(f"quantile ranks must be in [0, 1], got {q[~((q >= 0) & (q <= 1))][0]!r}")
    return q


class SlidingQuantiles(KeyedHistograms):
    r"""Quantiles and ranks of the values of the last ``w <= N`` time units.

    Values fall in bins of relative width ``accuracy`` (an order-preserving
    int64 key per finite float, :mod:`quantiles.mapping`); each bin keeps an
    :class:`~ehist.ExponentialHistogram` of its rows' timestamps, and all of
    them are held in one column updated in one vectorized rebuild (the
    counter machinery of the ECM-sketch, :mod:`ehist.counters`).  This is
    DGIM's recipe for sliding statistics, a sliding counter per cell of a
    synopsis (Sections 5-6), applied to a value histogram: bins merge by
    adding counts, so a sketch's only errors are the bins' width and their
    histograms' relative error, both deterministic.

    Parameters
    ----------
    window : int
        ``N``, the longest window, in timestamp units.
    eps : float, default 0.02
        Rank error: a quantile's rank is within a factor ``1 + eps`` of the
        asked one (so within ``eps`` times the window's count).  Each bin's
        histogram has relative error ``eh_eps = eps / (2 + eps)``.
    accuracy : float, default 0.01
        Relative value resolution ``a`` in ``[1e-6, 0.5]``: a reported value
        is within ``a |x|`` of a value ``x`` of the window.

    Notes
    -----
    **Guarantees.** Over the window ``(now - w, now]`` with ``T`` values, for any ``now``
    at or after the newest element and any ``w <= N``, deterministically:

    * :meth:`cdf` of ``v`` brackets ``r(v)``, the number of values ``<=
      v``, and its estimate is within ``eh_eps B(v) + c(v) / 2`` of it,
      where ``c(v)`` counts the values of ``v``'s bin (within a factor
      ``gamma = (1 + a) / (1 - a)`` of ``v``) and ``B(v) = r(v) + c(v)``;
    * :meth:`quantile` of ``q`` is within ``a |y|`` of a value ``y`` of the
      window whose rank (position in sorted order, from 1) lies in ``[q T
      / (1 + eps), q T (1 + eps) + 1]``;
    * :meth:`quantile_bounds` of ``q`` bracket the exact ``q``-quantile
      (the value at position ``max(1, ceil(q T))``);
    * :meth:`bounds` bracket ``T``; :meth:`estimate` is within ``eh_eps T``.

    :meth:`merge` keeps all of these (bins add; each bin's histograms merge
    with the same guarantee, :meth:`ExponentialHistogram.merge`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> ts = np.arange(10_000)
    >>> delay = np.where(ts < 5_000, 20.0, 80.0) + rng.exponential(5.0, ts.size)
    >>> s = SlidingQuantiles(window=1_000).update(ts, delay)
    >>> exact = np.quantile(delay[-1_000:], 0.99, method="inverted_cdf")
    >>> bool(abs(s.quantile(0.99) - exact) / exact < 0.05)     # the last 1000 only
    True
    >>> lo, hi = s.quantile_bounds(0.99)
    >>> bool(lo <= exact <= hi)
    True
    >>> round(s.rank(80.0), 2)         # none <= 80: half of the bin above 80
    0.12
    >>> s.cdf([80.0])[1:]                # but the bounds bracket the count
    (array([0]), array([235]))
    """

    def __init__(self, window: int, eps: float = 0.02, accuracy: float = 0.01):
        self._window = check_window(window)
        self._eps = _check_eps(eps)
        self._accuracy = check_accuracy(accuracy)
        self._eh_eps = self._eps / (2.0 + self._eps)
        self._mapping = LogMapping(self._accuracy)
        self._newest: int | None = None
        self._keys = np.zeros(0, dtype=np.int64)
        self._col = empty(self._window, self._eh_eps, 0)

    # ----------------------------------------------------------- properties
    eps = parameter("_eps")
    accuracy = parameter("_accuracy")
    eh_eps = parameter("_eh_eps", "Relative error of each bin's histogram: ``eps / (2 + eps)``.")
    mapping = parameter("_mapping")

    @property
    def keys(self) -> np.ndarray:
        """The bin keys holding units in the window, ascending (a view: do
        not change it)."""
        return self._keys

    _names = ("window", "eps", "accuracy")

    def _params(self) -> tuple:
        return self._window, self._eps, self._accuracy

    def _repr_params(self) -> list:
        return [f"window={self._window}", f"eps={self._eps:g}", f"accuracy={self._accuracy:g}"]

    def _repr_state(self) -> list:
        return [f"bins={self._keys.size}", f"buckets={len(self)}", f"newest={self._newest}"]

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 3000, 7)
        parts = [cls(500, eps=0.05).update(ts[p::3], (ts[p::3] % 97) - 40.5) for p in range(3)]
        return [cls(500, eps=0.05), parts[0], cls.merge_all(parts)]

    # --------------------------------------------------------------- update
    def update(self, timestamps, values) -> "SlidingQuantiles":
        """Insert a batch of ``(timestamp, value)`` rows, vectorized.

        Parameters
        ----------
        timestamps : array-like of int
            Need not be sorted; none older than :attr:`newest`.
        values : array-like of int or float
            Finite numbers (integers are taken as float64).

        Raises
        ------
        ValueError
            Mismatched lengths, non-finite values, a window count beyond
            int64; the sketch is unchanged.
        LateDataError
            A timestamp older than :attr:`newest` (nothing is inserted).
        """
        ts = coerce_timestamps(timestamps)
        x = _coerce_values(values, ts.shape[0])
        if not ts.size:
            return self
        ts, (x,), newest = batch_in_window(ts, (x,), self._newest, self._window)
        checked_total(None, ts.size, settled_total(self._col, self._keys.size))
        batch = self._mapping.keys(x)
        if self._keys.size + batch.size > MAX_BINS:  # the bound is cheap; the exact count when it may matter
            bins = np.union1d(self._keys, batch).size
            if bins > MAX_BINS:
                raise ValueError(f"the window would hold {bins} value bins; at most {MAX_BINS} are allowed "
                                 f"(raise accuracy)")
        # ---- validated: from here on the state changes ----
        self._keys, self._col = apply_keyed(self._keys, self._col, batch, ts, None, newest)
        self._newest = newest
        return self

    def add(self, timestamp: int, value) -> "SlidingQuantiles":
        """Insert one row."""
        return self.update([timestamp], [value])

    # ---------------------------------------------------------------- query
    def bin_bounds(self, now: int | None = None, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every bin's ``(lower, upper)`` count over the window as of
        ``now`` (int64 arrays aligned with :attr:`keys`)."""
        return self._keyed_bounds(now, window)

    def bounds(self, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """``(lower, upper)`` on the window's count of values."""
        lower, upper = self.bin_bounds(now, window)
        return int(lower.sum()), int(upper.sum())

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        """The window's count of values, within ``eh_eps`` of it (the
        midpoint of :meth:`bounds`)."""
        lower, upper = self.bounds(now, window)
        return lower * 0.5 + upper * 0.5

    def cdf(self, values, now: int | None = None, window: int | None = None):
        """``(estimate, lower, upper)`` of the number of window values at or
        below each of ``values`` (see the guarantees); float64, int64 and
        int64 arrays."""
        return cdf_from_bounds(self._mapping, self._keys, *self.bin_bounds(now, window),
                               _coerce_values(values, np.size(values)))

    def rank(self, value, now: int | None = None, window: int | None = None) -> float:
        """Estimated fraction of the window's values at or below ``value``
        (NaN for an empty window), Spark's normalized rank."""
        est, _, _ = self.cdf([value], now, window)
        total = self.estimate(now, window)
        return float(est[0] / total) if total > 0 else math.nan

    def quantiles(self, qs, now: int | None = None, window: int | None = None) -> np.ndarray:
        """Estimated ``q``-quantiles of the window's values, one per ``q``
        in ``[0, 1]`` (NaN for an empty window)."""
        return quantiles_from_bounds(self._mapping, self._keys, *self.bin_bounds(now, window), _check_qs(qs))

    def quantile(self, q: float, now: int | None = None, window: int | None = None) -> float:
        """Estimated ``q``-quantile of the window's values (see the
        guarantees)."""
        return float(self.quantiles([q], now, window)[0])

    def quantile_bounds(self, q: float, now: int | None = None, window: int | None = None) -> tuple[float, float]:
        """``(low, high)`` bracketing the exact ``q``-quantile, the value at
        position ``max(1, ceil(q T))`` of the window sorted (NaN, NaN for an
        empty window)."""
        low, high = quantile_bounds_from_bounds(self._mapping, self._keys, *self.bin_bounds(now, window),
                                                _check_qs([q]))
        return float(low[0]), float(high[0])

    @classmethod
    def union_bounds(cls, sketches, now: int | None = None, window: int | None = None):
        """``(keys, lower, upper)``: every bin's count bounds in the union of
        ``sketches`` (same parameters) without merging, the sums of their
        bounds at one cutoff as of ``now`` (default: the newest of them).
        Each part's bounds bracket its bins and its estimates are within
        ``eh_eps`` of them, so the sums keep both: the answers of a merged
        sketch (``quantiles_from_bounds(s.mapping, keys, lower, upper,
        qs)``...) for the price of a query.

        >>> a = SlidingQuantiles(10).update([1, 2], [5.0, 7.0])
        >>> b = SlidingQuantiles(10).update([2, 3], [1.0, 9.0])
        >>> keys, lower, upper = SlidingQuantiles.union_bounds([a, b])
        >>> [round(float(v), 2) for v in quantiles_from_bounds(a.mapping, keys, lower, upper, [0.25, 1.0])]
        [0.99, 8.94]
        """
        sk, now = cls._compatible_at(sketches, now)
        keys = np.unique(np.concatenate([np.zeros(0, dtype=np.int64)] + [s._keys for s in sk]))
        lower = np.zeros(keys.size, dtype=np.int64)
        upper = np.zeros(keys.size, dtype=np.int64)
        for s in sk:
            lo, up = s.bin_bounds(now, window)
            at = np.searchsorted(keys, s._keys)
            lower[at] += lo
            upper[at] += up
        return keys, lower, upper

    # ---------------------------------------------------------------- merge
    @classmethod
    def _check_union_total(cls, live: list, newest: int) -> None:
        """Bins add: their counts, settled at the union's newest, past
        int64 raise."""
        if sum(settled_total(settle(s._col, s._window, newest), s._keys.size) for s in live) > INT64_MAX:
            raise SumOverflowError("merged window count would overflow int64")

    # -------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """The value bins holding units and their histograms, as checked bytes.

        In :mod:`ehist.serialization`'s framing (family 8, version 2;
        flags: bit 0 has_newest)::

            offset  size    field
                 0       6  preamble
                 6      24  window (int64), eps, accuracy (float64 each)
                30       8  newest (int64)                [if has_newest]
                 .   varint m: value bins holding units
                 .   m x varint  bin keys: the first zigzag-encoded, then
                            key - previous key - 1
                 .   the bins' histograms, counters 0 .. m - 1
                            (ehist.counters.write_counters: varint m,
                            m gaps of 0, m byte lengths, m compact
                            histograms of window and eh_eps = eps /
                            (2 + eps), each ending at newest: a flags
                            byte and the payload; version 1, still
                            read, stored whole histogram bytes)
               end-4     4  CRC-32 of everything before
        """
        flags = _FLAG_HAS_NEWEST if self._newest is not None else 0
        w = LAYOUT.writer(flags, *self._params())
        if self._newest is None:
            return w.varints([0]).finish()
        k = self._keys
        w.struct("q", self._newest).varints([k.size])
        if k.size:
            first = int(k[0])
            gaps = np.empty(k.size, dtype=np.uint64)
            gaps[0] = (first << 1) ^ (first >> 63)  # zigzag
            gaps[1:] = np.diff(k) - 1
            w.varints(gaps)
        return write_counters(w, self._col).finish()

    @classmethod
    def from_bytes(cls, data) -> "SlidingQuantiles":
        name = "SlidingQuantiles"
        r, flags, s = LAYOUT.open(data, cls)
        newest = r.struct("q", "newest timestamp")[0] if flags & _FLAG_HAS_NEWEST else None
        m = r.varint("bin count")
        if newest is None:
            if m:
                raise CorruptSketchError(f"{name}: expected no bins without a newest timestamp, found {m}")
            r.expect_end()
            return s
        check_newest(newest, name)
        most = min(MAX_BINS, r.remaining // 2)
        if m > most:
            raise CorruptSketchError(f"{name}: expected at most {most} bins in the bytes left, found {m}")
        keys = np.zeros(0, dtype=np.int64)
        if m:
            gaps = r.varints(m, "bin keys")
            z = int(gaps[0])
            first = (z >> 1) ^ -(z & 1)
            steps = gaps[1:].astype(np.float64)  # a gap beyond int64 must not wrap
            if first < INT64_MIN or first + float(steps.sum()) + (m - 1) > INT64_MAX:
                raise CorruptSketchError(f"{name}: expected bin keys within int64")
            keys = first + np.concatenate([[0], np.cumsum(gaps[1:].astype(np.int64) + 1)])
            bad = ~s._mapping.valid(keys)
            if bad.any():
                raise CorruptSketchError(f"{name}: expected bin keys of finite values at accuracy "
                                         f"{s._accuracy}, found {int(keys[bad][0])}")
        s._newest = int(newest)
        ids, col = read_keyed(r, name, m, s._window, s._eh_eps, s._newest, compact=r.version >= 2)
        if ids.size != m:  # (indexes below m, increasing: then they are 0 .. m - 1)
            raise CorruptSketchError(f"{name}: expected a histogram for each of the {m} bins, found {ids.size}")
        if settled_total(col, m) > INT64_MAX:
            raise CorruptSketchError(f"{name}: expected a window count within int64")
        s._keys, s._col = keys, col
        return s


# -------------------------------------------------- answers from bin bounds
def _nonzero(keys, lower, upper):
    used = upper > 0
    return keys[used], lower[used], upper[used]


def cdf_from_bounds(mapping: LogMapping, keys, lower, upper, values):
    """``(estimate, lower, upper)`` of the count at or below each value from
    every bin's count bounds (a sketch's, or a union's): ``lower`` sums the
    bins below the value's bin (values below it), ``upper`` those up to
    its bin, the estimate the bins below and half of its bin."""
    k = mapping.keys(np.asarray(values, dtype=np.float64))
    below = np.searchsorted(keys, k, side="left")
    upto = np.searchsorted(keys, k, side="right")
    est = np.concatenate([[0.0], np.cumsum(lower * 0.5 + upper * 0.5)])
    lo = np.concatenate([[0], np.cumsum(lower)])[below]
    up = np.concatenate([[0], np.cumsum(upper)])[upto]
    return est[below] * 0.5 + est[upto] * 0.5, lo, up


def quantiles_from_bounds(mapping: LogMapping, keys, lower, upper, qs) -> np.ndarray:
    """Estimated quantiles from every bin's count bounds: the representative
    of the first bin whose estimated cumulative count reaches ``q`` times
    the estimated total."""
    keys, lower, upper = _nonzero(keys, lower, upper)
    qs = np.asarray(qs, dtype=np.float64)
    if keys.size == 0:
        return np.full(qs.shape, np.nan)
    cum = np.cumsum(lower * 0.5 + upper * 0.5)
    at = np.minimum(np.searchsorted(cum, qs * cum[-1], side="left"), keys.size - 1)
    return mapping.values(keys[at])


def quantile_bounds_from_bounds(mapping: LogMapping, keys, lower, upper, qs):
    """``(low, high)`` arrays bracketing each exact ``q``-quantile: the
    exact one's bin is at or after the first whose upper cumulative count
    reaches ``max(1, ceil(q L))`` and at or before the first whose lower
    cumulative count reaches ``max(1, ceil(q U))``, ``[L, U]`` bounding the
    window's count."""
    keys, lower, upper = _nonzero(keys, lower, upper)
    qs = np.asarray(qs, dtype=np.float64)
    if keys.size == 0:
        return np.full(qs.shape, np.nan), np.full(qs.shape, np.nan)
    cum_lo, cum_up = np.cumsum(lower), np.cumsum(upper)
    first = np.maximum(1, np.ceil(qs * cum_lo[-1]))
    last = np.maximum(1, np.ceil(qs * cum_up[-1]))
    a = np.minimum(np.searchsorted(cum_up, first, side="left"), keys.size - 1)
    b = np.minimum(np.searchsorted(cum_lo, last, side="left"), keys.size - 1)
    return mapping.edges(keys[a])[0], mapping.edges(keys[b])[1]
