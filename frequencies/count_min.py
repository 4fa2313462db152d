"""The ECM-sketch: a Count-Min sketch whose counters are exponential histograms.

Papapetrou, Garofalakis and Deligiannakis (VLDB 2012); DGIM Section 6 sketches
the idea (a hash table with an exponential histogram per counter).  See
:class:`SlidingCountMin`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ehist.validation import (INT64_MAX, batch_in_window, check_eps, check_window, checked_total, coerce_timestamps,
                              coerce_values)
from ehist.columnar import HistogramColumn
from ehist.counters import (KeyedHistograms, apply_keyed, dense, empty, read_keyed, settle,
                            settled_total, write_counters)
from ehist.errors import CorruptSketchError, SumOverflowError
from ehist.hashing import as_hashes, check_seed, hash64, mix64
from ehist.serialization import Layout, check_newest
from ehist.synopsis import parameter

__all__ = ["SlidingCountMin", "dimensions"]

#: ``struct`` format of the parameters after the preamble: window, eps,
#: delta, eh_eps, seed.
_FLAG_HAS_NEWEST = 1
#: The byte layout (drawn in :meth:`SlidingCountMin.to_bytes`): format 2
#: stores compact counters (:mod:`ehist.counters`); 1 is still read.
LAYOUT = Layout("SlidingCountMin", version=2, read=(1, 2), flags=_FLAG_HAS_NEWEST, parameters="qdddQ",
                what="window, eps, delta, eh_eps and seed")
#: The most counters (width x depth) a sketch may have: 4 Mi histograms.
MAX_COUNTERS = 1 << 22
# Row r's columns come from mix64(hash ^ _ROW_KEYS[r]): one key per row.
_ROW_KEYS = mix64(np.arange(1, 65, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))


def _fraction(x, name: str, smallest: float) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real) or not smallest <= float(x) < 1.0:
        raise ValueError(f"{name} must be a number in [{smallest:g}, 1), got {x!r}")
    return float(x)


def dimensions(eps: float, delta: float) -> tuple[int, int]:
    """``(width, depth)`` of a Count-Min sketch with additive error ``eps``
    times the total, with probability ``1 - delta``: ``ceil(e / eps)`` and
    ``ceil(ln(1 / delta))`` (Cormode and Muthukrishnan, 2005).

    >>> dimensions(0.01, 0.01)
    (272, 5)
    """
    eps, delta = _fraction(eps, "eps", 1e-6), _fraction(delta, "delta", 1e-12)
    return math.ceil(math.e / eps), max(1, math.ceil(math.log(1.0 / delta)))


def counter_ids(hashes: np.ndarray, width: int, depth: int) -> np.ndarray:
    """Counter of each item in each row, ``(depth, n)`` int64: row ``r``'s
    counters are ``r * width`` to ``r * width + width - 1``."""
    h = np.asarray(hashes, dtype=np.uint64)
    with np.errstate(over="ignore"):
        cols = mix64(h[None, :] ^ _ROW_KEYS[:depth, None]) % np.uint64(width)
    return cols.astype(np.int64) + (np.arange(depth, dtype=np.int64) * width)[:, None]


class SlidingCountMin(KeyedHistograms):
    r"""Frequencies of items over a sliding window (the ECM-sketch).

    A Count-Min sketch of ``depth`` rows of ``width`` counters, each counter
    an :class:`~ehist.ExponentialHistogram` of the ``(timestamp, value)``
    pairs hashed to it.  ``frequency(x)`` is the sum of the values of item
    ``x`` in the window (its count, when values are 1); the histograms
    answer any window ``w <= N`` as of any time at or after the newest
    element.

    Parameters
    ----------
    window : int
        ``N``, the longest window, in timestamp units.
    eps : float, default 0.01
        Count-Min error: an estimate exceeds the true frequency by at most
        ``eps`` times the window's total, with probability ``1 - delta``.
        ``width = ceil(e / eps)``.
    delta : float, default 0.01
        Failure probability per query; ``depth = ceil(ln(1 / delta))``.
    eh_eps : float, optional
        Relative error of each counter's histogram (default ``eps``).
    seed : int, default 0
        Seed of :func:`ehist.hashing.hash64` (part of the format; sketches
        merge only with the same seed).

    Notes
    -----
    **Guarantees.** For an item ``x`` with true frequency ``f`` in the window ``(now - w,
    now]`` and ``T`` the window's total:

    * ``upper >= f`` always, where ``(lower, upper) = frequency_bounds(x)``
      (every counter of ``x`` holds ``f`` plus collisions, and its
      histogram's upper bound is never below its content);
    * ``estimate >= (1 - eh_eps) f`` always;
    * with probability at least ``1 - delta``: ``estimate <= (1 + eh_eps)
      (f + eps T)`` and ``lower <= f`` (Markov's inequality on each row's
      collisions, rows independent);
    * :meth:`bounds` brackets ``T`` always, and :meth:`estimate` is within
      ``eh_eps T`` of it.

    :meth:`merge` keeps all of these (the histograms' order-preserving
    merge keeps their bounds; Count-Min counters add).

    Examples
    --------
    >>> import numpy as np
    >>> s = SlidingCountMin(window=100, eps=0.01, delta=0.01)
    >>> ts = np.arange(1000)
    >>> items = np.where(ts % 4 == 0, "scan", np.char.add("host", (ts % 37).astype(str)))
    >>> s = s.update(ts, items)
    >>> lower, upper = s.frequency_bounds("scan")   # 25 in (899, 999]
    >>> upper >= 25, round(s.frequency("scan"))
    (True, 25)
    >>> round(s.estimate())                          # the window's total
    100
    """

    def __init__(self, window: int, eps: float = 0.01, delta: float = 0.01, eh_eps: float | None = None,
                 seed: int = 0):
        self._window = check_window(window)
        self._width, self._depth = dimensions(eps, delta)
        self._eps, self._delta = float(eps), float(delta)
        self._eh_eps = check_eps(self._eps if eh_eps is None else eh_eps)
        self._seed = check_seed(seed)
        if self._width * self._depth > MAX_COUNTERS:
            raise ValueError(f"eps and delta give {self._width} x {self._depth} counters; at most "
                             f"{MAX_COUNTERS} are allowed (raise eps or delta)")
        self._newest: int | None = None
        # the counters holding units: sorted indexes and their histograms
        # (memory, updates and bytes follow the counters used, not width x depth)
        self._keys = np.zeros(0, dtype=np.int64)
        self._col = empty(self._window, self._eh_eps, 0)

    # ----------------------------------------------------------- properties
    eps = parameter("_eps")
    delta = parameter("_delta")
    eh_eps = parameter("_eh_eps")
    seed = parameter("_seed")
    width = parameter("_width")
    depth = parameter("_depth")

    @property
    def counters(self) -> int:
        """``width * depth``."""
        return self._width * self._depth

    @property
    def column(self) -> HistogramColumn:
        """Every counter's histogram, counter ``r * width + c`` for row
        ``r`` and column ``c`` (built on each call: the sketch keeps only
        the counters holding units)."""
        return dense(self._keys, self._col, self.counters)

    _names = ("window", "eps", "delta", "eh_eps", "seed")

    def _params(self) -> tuple:
        return self._window, self._eps, self._delta, self._eh_eps, self._seed

    def _repr_params(self) -> list:
        return [f"window={self._window}", f"eps={self._eps:g}", f"delta={self._delta:g}", f"width={self._width}",
                f"depth={self._depth}"]

    def _repr_state(self) -> list:
        return [f"counters used={self._keys.size}", f"buckets={len(self)}", f"newest={self._newest}"]

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 3000, 7)
        parts = [cls(500, eps=0.1, delta=0.1, seed=4).update(ts[p::3], ts[p::3] % 23, (ts[p::3] % 5))
                 for p in range(3)]
        return [cls(500, eps=0.1, delta=0.1, seed=4), parts[0], cls.merge_all(parts)]

    # --------------------------------------------------------------- update
    def update(self, timestamps, items, values=None) -> "SlidingCountMin":
        """Insert a batch of ``(timestamp, item, value)`` rows, vectorized.

        Parameters
        ----------
        timestamps : array-like of int
            Need not be sorted; none older than :attr:`newest`.
        items : array-like of int, str or bytes
            Hashed with :func:`ehist.hashing.hash64` and the sketch's seed.
        values : array-like of non-negative int, optional
            What each row adds to its item's frequency (default 1: counts).

        Raises
        ------
        ValueError
            Mismatched lengths, bad items or values, a window total beyond
            int64; the sketch is unchanged.
        LateDataError
            A timestamp older than :attr:`newest`.
        """
        ts = coerce_timestamps(timestamps)
        hashes = hash64(items, self._seed)
        if hashes.shape[0] != ts.shape[0]:
            raise ValueError(f"timestamps and items have different lengths ({ts.shape[0]} and {hashes.shape[0]})")
        return self._insert(ts, hashes, coerce_values(values, ts.shape[0]))

    def update_hashes(self, timestamps, hashes, values=None) -> "SlidingCountMin":
        """Insert items already hashed with ``hash64(items, seed)`` (uint64
        or their int64 bit patterns); the same result as :meth:`update`.

        >>> from ehist.hashing import hash64
        >>> a = SlidingCountMin(10).update([1, 2], ["x", "y"])
        >>> a == SlidingCountMin(10).update_hashes([1, 2], hash64(["x", "y"], 0))
        True
        """
        ts = coerce_timestamps(timestamps)
        hashes = as_hashes(hashes)
        if hashes.shape != ts.shape:
            raise ValueError(f"timestamps and hashes have different lengths ({ts.size} and {hashes.size})")
        return self._insert(ts, hashes, coerce_values(values, ts.shape[0]))

    def add(self, timestamp: int, item, value: int = 1) -> "SlidingCountMin":
        """Insert one row."""
        return self.update([timestamp], [item], [value])

    def _insert(self, ts: np.ndarray, hashes: np.ndarray, v: np.ndarray | None) -> "SlidingCountMin":
        if ts.size == 0:
            return self
        ts, (hashes, v), newest = batch_in_window(ts, (hashes, v), self._newest, self._window)
        v = None if v is None else v.astype(np.int64)
        # every counter holds at most the window's total: keep that in int64
        checked_total(v, ts.size, self._row_total())
        # ---- validated: from here on the state changes ----
        ids = counter_ids(hashes, self._width, self._depth).ravel()  # row-major: time order within a counter
        self._keys, self._col = apply_keyed(self._keys, self._col, ids, np.tile(ts, self._depth),
                                            None if v is None else np.tile(v, self._depth), newest, self.counters)
        self._newest = newest
        return self

    def _row_total(self) -> int:
        """Units held by row 0 (the window's total, up to expiry)."""
        c = self._col
        end = int(c.offsets[np.searchsorted(self._keys, self._width)])
        return int(np.sum(np.left_shift(np.int64(1), c.exps[:end].astype(np.int64)), dtype=np.int64))

    # ---------------------------------------------------------------- query
    def _counter_bounds(self, now, window) -> tuple[np.ndarray, np.ndarray]:
        """Every counter's (lower, upper) over the window as of ``now``."""
        lower = np.zeros(self.counters, dtype=np.int64)
        upper = np.zeros(self.counters, dtype=np.int64)
        lower[self._keys], upper[self._keys] = self._keyed_bounds(now, window)
        return lower, upper

    def _rows(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(self._depth, self._width)

    def bounds(self, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """Bounds on the total of the ``window`` (default ``N``) ending at
        ``now`` (default :attr:`newest`): the sum of every row's counters
        brackets it, and the tightest row bounds are taken."""
        lower, upper = self._counter_bounds(now, window)
        return int(self._rows(lower).sum(axis=1).max()), int(self._rows(upper).sum(axis=1).min())

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        """The window's total, within ``eh_eps`` of it (the midpoint of
        :meth:`bounds`)."""
        lower, upper = self.bounds(now, window)
        return lower * 0.5 + upper * 0.5

    def frequencies(self, items, now: int | None = None, window: int | None = None):
        """Estimates and bounds of many items' frequencies at once.

        Returns
        -------
        (estimate, lower, upper) : float64, int64 and int64 arrays
            One entry per item; see the class's guarantees.
        """
        return self.frequencies_of_hashes(hash64(items, self._seed), now, window)

    def frequencies_of_hashes(self, hashes, now: int | None = None, window: int | None = None):
        """:meth:`frequencies` of items given by their ``hash64`` values."""
        return self.answers_from_bounds(as_hashes(hashes), *self._counter_bounds(now, window))

    def answers_from_bounds(self, hashes: np.ndarray, lower: np.ndarray, upper: np.ndarray):
        """(estimate, lower, upper) of items (``hash64`` values) from every
        counter's bounds: this sketch's, or :meth:`union_bounds` of several."""
        ids = counter_ids(hashes, self._width, self._depth)
        lo, up = lower[ids], upper[ids]
        estimate = (lo * 0.5 + up * 0.5).min(axis=0)
        total = int(self._rows(upper).sum(axis=1).min())
        slack = math.ceil(self._eps * total)
        return estimate, np.maximum(lo.min(axis=0) - slack, 0), up.min(axis=0)

    def inner_product(self, other: "SlidingCountMin", now: int | None = None,
                      window: int | None = None) -> tuple[float, float, float]:
        r"""The join size :math:`\sum_x f(x) g(x)` of two streams over the
        same window as of ``now`` (default: the newer sketch's newest), from
        two sketches of the same parameters (Cormode and Muthukrishnan's
        Count-Min inner product, each counter's histogram answering the
        window).

        Returns
        -------
        (estimate, lower, upper) : floats
            ``upper >= f . g`` and ``estimate >= (1 - eh_eps)**2 f . g``
            always; with probability ``1 - delta``: ``estimate <= (1 +
            eh_eps)**2 (f . g + eps T_f T_g)`` (``T``: the windows'
            totals), and ``lower`` (the smallest row sum of the products
            of the counters' lower bounds, less ``eps`` times the product
            of the totals' upper bounds, floored at 0) ``<= f . g``.

        >>> a = SlidingCountMin(100, eps=0.01).update([1, 2, 3], ["x", "x", "y"])
        >>> b = SlidingCountMin(100, eps=0.01).update([2, 3], ["x", "z"])
        >>> a.inner_product(b)[0]     # 2 x's joined with 1 x
        2.0
        """
        self._check_compatible(other)
        stamps = [s._newest for s in (self, other) if s._newest is not None]
        if now is None and stamps:
            now = max(stamps)
        la, ua = self._counter_bounds(now, window)
        lb, ub = other._counter_bounds(now, window)
        ea, eb = la * 0.5 + ua * 0.5, lb * 0.5 + ub * 0.5
        rows = lambda x: self._rows(x.astype(np.float64))  # noqa: E731 - products beyond int64 stay finite
        estimate = float((rows(ea) * rows(eb)).sum(axis=1).min())
        upper = float((rows(ua) * rows(ub)).sum(axis=1).min())
        lower_rows = float((rows(la) * rows(lb)).sum(axis=1).min())
        totals = float(self._rows(ua).sum(axis=1).min()) * float(other._rows(ub).sum(axis=1).min())
        return estimate, max(0.0, lower_rows - self._eps * totals), upper

    def total_from_bounds(self, lower: np.ndarray, upper: np.ndarray) -> tuple[int, int]:
        """:meth:`bounds` from every counter's bounds (a union's, whose
        rows may sum past int64: :class:`~ehist.errors.SumOverflowError`)."""
        if float(self._rows(upper).sum(axis=1, dtype=np.float64).max()) >= 2.0**62:  # a row's int64 sum may wrap
            low = max(sum(row) for row in self._rows(lower).tolist())
            total = min(sum(row) for row in self._rows(upper).tolist())
            if total > INT64_MAX:
                raise SumOverflowError(f"the union's window total would overflow int64 ({total} > 2**63 - 1)")
            return low, total
        return int(self._rows(lower).sum(axis=1).max()), int(self._rows(upper).sum(axis=1).min())

    @classmethod
    def union_bounds(cls, sketches, now: int | None = None, window: int | None = None):
        """Every counter's bounds in the union of ``sketches`` (same
        parameters), without merging: the sums of their bounds at one
        cutoff, as of ``now`` (default: the newest of them).  Each part's
        bounds bracket its counter, so the sums bracket the union's, with
        the parts' errors adding up (each within ``eh_eps`` of its part):
        the guarantees of a merged sketch, for the price of a query.  A
        counter whose sum passes int64 raises
        :class:`~ehist.errors.SumOverflowError`, as the merge does.

        >>> a = SlidingCountMin(10).update([1, 2], ["x", "y"])
        >>> b = SlidingCountMin(10).update([2, 3], ["x", "x"])
        >>> lower, upper = SlidingCountMin.union_bounds([a, b])
        >>> est, lo, up = a.answers_from_bounds(hash64(["x"], 0), lower, upper)
        >>> int(up[0])
        3
        """
        sk, now = cls._compatible_at(sketches, now)
        lower = np.zeros(sk[0].counters, dtype=np.int64)
        upper = np.zeros(sk[0].counters, dtype=np.int64)
        wide = np.zeros(sk[0].counters, dtype=np.float64)  # the sums again in float: int64 ones wrap silently
        for s in sk:
            lo, up = s._counter_bounds(now, window)
            lower += lo
            upper += up
            wide += up
        if wide.size and wide.max() >= 2.0**62:
            flagged = np.flatnonzero(wide >= 2.0**62)
            exact = [0] * flagged.size
            for s in sk:
                exact = [e + u for e, u in zip(exact, s._counter_bounds(now, window)[1][flagged].tolist())]
            if max(exact) > INT64_MAX:
                raise SumOverflowError(f"the union's counter would overflow int64 ({max(exact)} > 2**63 - 1)")
        return lower, upper

    def frequency(self, item, now: int | None = None, window: int | None = None) -> float:
        """Estimated frequency of ``item`` over the window as of ``now``:
        the smallest of its counters' estimates."""
        return float(self.frequencies([item], now, window)[0][0])

    def frequency_bounds(self, item, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """``(lower, upper)`` on ``item``'s frequency: ``upper`` always
        holds, ``lower`` with probability ``1 - delta``."""
        _, lower, upper = self.frequencies([item], now, window)
        return int(lower[0]), int(upper[0])

    # ---------------------------------------------------------------- merge
    @classmethod
    def _check_union_total(cls, live: list, newest: int) -> None:
        """One row's total (every row holds the stream's), settled at the
        union's newest, past int64 raises."""
        if sum(s._row_total() for s in live) > INT64_MAX:
            first = live[0]
            totals = [settled_total(settle(s._col, first._window, newest), int(np.searchsorted(s._keys, first._width)))
                      for s in live]
            if sum(totals) > INT64_MAX:
                raise SumOverflowError(f"merged window total would overflow int64 ({sum(totals)} > 2**63 - 1)")

    # -------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """The parameters and the counters holding units, as checked bytes.

        In :mod:`ehist.serialization`'s framing (family 6, version 2;
        flags: bit 0 has_newest)::

            offset  size    field
                 0       6  preamble
                 6      40  window (int64), eps, delta, eh_eps (float64
                            each), seed (uint64)
                46       8  newest (int64)                [if has_newest]
                 .   varint n: counters holding a unit in the window
                 .   n x varint  counter gaps: the first counter's index,
                            then index - previous index - 1
                 .   n x varint  byte length of each counter
                 .   the n counters: each its histogram's flags byte and
                            payload (ExponentialHistogram.to_bytes() less
                            the preamble, window, eps, newest and CRC
                            every counter shares: window, eh_eps, the
                            sketch's newest)
               end-4     4  CRC-32 of everything before

        Counter ``r * width + c`` is row ``r``, column ``c``.  The reader
        rebuilds each counter's full histogram bytes and decodes them
        together with every check of :mod:`ehist`
        (:func:`ehist.counters.read_keyed`, vectorized by
        :class:`ehist.columnar.HistogramColumn`).  Version 1 (still read)
        stored each counter as the whole ``ExponentialHistogram.to_bytes()``
        (34 bytes more a counter).
        """
        flags = _FLAG_HAS_NEWEST if self._newest is not None else 0
        w = LAYOUT.writer(flags, *self._params())
        if self._newest is None:
            return w.varints([0]).finish()
        return write_counters(w.struct("q", self._newest), self._col, self._keys).finish()

    @classmethod
    def from_bytes(cls, data) -> "SlidingCountMin":
        name = "SlidingCountMin"
        r, flags, s = LAYOUT.open(data, cls)
        newest = r.struct("q", "newest timestamp")[0] if flags & _FLAG_HAS_NEWEST else None
        if newest is None:
            n = r.varint("counter count")
            if n:
                raise CorruptSketchError(f"{name}: expected no counters without a newest timestamp, found {n}")
            r.expect_end()
            return s
        check_newest(newest, name)
        s._newest = int(newest)
        keys, col = read_keyed(r, name, s.counters, s._window, s._eh_eps, s._newest, compact=r.version >= 2)
        if settled_total(col, int(np.searchsorted(keys, s._width))) > INT64_MAX:
            raise CorruptSketchError(f"{name}: expected a window total within int64")
        s._keys, s._col = keys, col
        return s
