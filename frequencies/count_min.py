"""The ECM-sketch: a Count-Min sketch whose counters are exponential histograms.

Papapetrou, Garofalakis and Deligiannakis (VLDB 2012); DGIM Section 6 sketches
the idea (a hash table with an exponential histogram per counter).  See
:class:`SlidingCountMin`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ehist.validation import (INT64_MAX, INT64_MIN, batch_in_window, check_eps, check_window, checked_total,
                              coerce_timestamps, coerce_values, resolve_query)
from ehist.columnar import HistogramColumn
from ehist.counters import (KeyedHistograms, apply_keyed, dense, empty, read_keyed, settle,
                            settled_total, write_counters)
from ehist.errors import CorruptSketchError, SumOverflowError
from ehist.flat_rows import FlatRows, row_times
from ehist.hashing import as_hashes, check_seed, hash64, mix64
from ehist.serialization import Layout, Writer, check_newest
from ehist.synopsis import parameter

__all__ = ["SlidingCountMin", "dimensions", "live_rows", "read_rows", "write_rows"]

#: ``struct`` format of the parameters after the preamble: window, eps,
#: delta, eh_eps, seed.
_FLAG_HAS_NEWEST = 1
#: The rows form (version 3): the sketch holds its rows, not counters.
FLAG_ROWS = 2
#: Rows form with values other than 1 (a varint each after the times).
FLAG_VALUES = 4
#: The byte layout (drawn in :meth:`SlidingCountMin.to_bytes`): format 2
#: stores compact counters (:mod:`ehist.counters`), 3 the rows form
#: (:data:`ROWS_VERSION`); 1 is still read.
LAYOUT = Layout("SlidingCountMin", version=2, read=(1, 2, 3), flags=_FLAG_HAS_NEWEST | FLAG_ROWS | FLAG_VALUES,
                parameters="qdddQ", what="window, eps, delta, eh_eps and seed")
#: The version of the rows form's bytes (counters keep :data:`LAYOUT`'s).
ROWS_VERSION = 3
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


def in_window(ts: np.ndarray, now: int, window: int) -> np.ndarray:
    """Which of the int64 times ``ts`` lie in ``(now - window, now]``
    (``now`` never earlier than any of them; Python ints past int64 allowed)."""
    cut = int(now) - int(window)
    if cut < INT64_MIN:
        return np.ones(ts.shape, dtype=bool)
    if cut >= INT64_MAX:
        return np.zeros(ts.shape, dtype=bool)
    return ts > cut


def live_rows(ts: np.ndarray, hashes: np.ndarray, values: np.ndarray, newest: int, window: int) -> tuple:
    """The rows form's rows of ``(ts, hashes, values)`` (int64, uint64,
    int64; any order) as of ``newest``: those inside the window, none of
    value 0, one per ``(time, hash)`` with their values summed, sorted by
    time, then hash.

    >>> ts, h, v = live_rows(np.array([5, 1, 5, 9]), np.array([7, 3, 7, 2], np.uint64), np.array([1, 1, 2, 0]), 9, 8)
    >>> ts.tolist(), h.tolist(), v.tolist()
    ([5], [7], [3])
    """
    rows = _OneSketch.canonical(np.zeros(ts.size, dtype=np.int64), ts, hashes, values, np.array([newest]), window, 1)
    return rows.ts, rows.hashes, rows.values


class _OneSketch(FlatRows):
    """A sketch's rows (:func:`live_rows`)."""

    __slots__ = ()


def rows_frequencies(held: np.ndarray, values: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Each of ``hashes``' total value among rows of hashes ``held``
    (int64; sums within int64 as a sketch's total is)."""
    order = np.argsort(held, kind="stable")
    sorted_held = held[order]
    run = np.concatenate([[0], np.cumsum(values[order], dtype=np.int64)])
    return run[np.searchsorted(sorted_held, hashes, "right")] - run[np.searchsorted(sorted_held, hashes, "left")]


def exact_frequencies(rows: tuple, keys: np.ndarray, now, window, newest, full: int):
    """``(estimate, lower, upper)`` of items (``keys``: the values the rows
    hold, hashes or ids) from a sketch's rows in the window as of ``now``
    (checked as every query checks it against ``newest`` and the longest
    window ``full``): their exact frequencies, all three alike."""
    now, window = resolve_query(now, window, newest, full)
    exact = np.zeros(keys.size, dtype=np.int64)
    if now is not None:
        ts, held, v = rows
        inside = in_window(ts, now, window)
        exact = rows_frequencies(held[inside], v[inside], keys)
    return exact.astype(np.float64), exact, exact.copy()


def same_rows(a: tuple | None, b: tuple | None) -> bool:
    """Whether two sketches' rows (None: counters) are alike."""
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def _no_rows() -> tuple:
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)


def write_rows(w, ts: np.ndarray, h: np.ndarray, v: np.ndarray, newest: int, ones: bool):
    """The rows form's rows after the newest time (``w`` a
    :class:`~ehist.serialization.Writer`): count, hashes, times, values
    (``ones``: every value 1, none written)."""
    gaps = np.diff(ts, prepend=ts[:1])
    if ts.size:
        gaps[0] = newest - ts[0]
    w.varints([ts.size]).raw(h.astype("<u8").tobytes()).varints(gaps)
    return w if ones else w.varints(v)


def read_rows(r, name: str, s: "SlidingCountMin", newest: int, valued: bool) -> tuple:
    """The rows form's rows after the newest time (``r`` a
    :class:`~ehist.serialization.Reader`), with every check: at most
    ``width`` rows, times inside the window and in order, one row per time
    and hash, values >= 1 (not all 1 when ``valued``) and a total within
    int64."""
    m = r.varint("row count")
    if m > s.width:
        raise CorruptSketchError(f"{name}: expected at most width = {s.width} rows, found {m}")
    h = np.frombuffer(r.raw(8 * m, f"{m} row hashes"), dtype="<u8").astype(np.uint64)
    gaps = r.varints(m, "row times")
    v = r.varints(m, "row values") if valued else np.ones(m, dtype=np.uint64)
    ts = row_times(gaps, h, newest, s.window, name, "rows")
    if m and (int(v.min()) < 1 or int(v.max()) > INT64_MAX or (float(v.sum(dtype=np.float64)) >= 2.0 ** 62
                                                                and sum(v.tolist()) > INT64_MAX)):
        raise CorruptSketchError(f"{name}: expected row values >= 1 with a total within int64")
    if valued and bool((v == 1).all()):
        raise CorruptSketchError(f"{name}: expected a value other than 1 with the values flag")
    return ts, h, v.astype(np.int64)


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

    **The rows form.** While the window holds at most ``width`` rows (one
    per time and item, values summed), the sketch keeps those rows
    themselves rather than counters (as HyperLogLog++ keeps a sparse list
    before its registers): a few bytes a row against ``depth`` histograms
    a row, and every answer exact (``lower == upper`` == the frequency or
    total).  Past ``width`` rows, at an update or a merge, it takes the
    counters those rows build (as one ``update`` of them into a new
    sketch) and keeps counters from then on.  :attr:`rows` says which
    form it is in.  A union of sketches in the rows form stays in it while
    its rows fit; otherwise each part in the rows form becomes counters
    first and the counters merge.

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
        # the rows form's rows (see live_rows), or None once the sketch holds counters
        self._rows: tuple | None = _no_rows()

    _state = ("_newest", "_keys", "_col", "_rows")

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
    def rows(self) -> int | None:
        """The rows held in the rows form (None once the sketch holds
        counters).

        >>> s = SlidingCountMin(100, eps=0.1).update([1, 2, 2], ["a", "b", "b"])
        >>> s.width, s.rows                   # (2, "b") twice: one row of value 2
        (28, 2)
        >>> s.update(range(3, 40), range(37)).rows is None
        True
        """
        return None if self._rows is None else int(self._rows[0].size)

    @property
    def column(self) -> HistogramColumn:
        """Every counter's histogram, counter ``r * width + c`` for row
        ``r`` and column ``c`` (built on each call: the sketch keeps only
        the counters holding units; a sketch in the rows form: the
        counters its rows build)."""
        s = self._as_counters()
        return dense(s._keys, s._col, self.counters)

    def _as_counters(self) -> "SlidingCountMin":
        """This sketch in the counter form: itself when it is, else a new
        sketch holding the counters its rows build (one ``update`` of them,
        settled at its newest)."""
        if self._rows is None:
            return self
        out = self._counters_only()
        if self._newest is not None:
            ts, h, v = self._rows
            ids = counter_ids(h, self._width, self._depth).ravel()
            out._keys, out._col = apply_keyed(out._keys, out._col, ids, np.tile(ts, self._depth),
                                              None if bool((v == 1).all()) else np.tile(v, self._depth),
                                              self._newest, self.counters)
            out._newest = self._newest
        return out

    def _counters_only(self) -> "SlidingCountMin":
        """A new empty sketch of these parameters that holds counters from
        the start (the heavy hitters' levels)."""
        out = type(self)(*self._params())
        out._rows = None
        return out

    def _set_counters(self, newest: int, keys, col) -> None:
        self._rows = None
        super()._set_counters(newest, keys, col)

    def _same_state(self, other) -> bool:
        return same_rows(self._rows, other._rows) and super()._same_state(other)

    _names = ("window", "eps", "delta", "eh_eps", "seed")

    def _params(self) -> tuple:
        return self._window, self._eps, self._delta, self._eh_eps, self._seed

    def _repr_params(self) -> list:
        return [f"window={self._window}", f"eps={self._eps:g}", f"delta={self._delta:g}", f"width={self._width}",
                f"depth={self._depth}"]

    def _repr_state(self) -> list:
        if self._rows is not None:
            return [f"rows={self._rows[0].size}", f"newest={self._newest}"]
        return [f"counters used={self._keys.size}", f"buckets={len(self)}", f"newest={self._newest}"]

    def __len__(self) -> int:
        """Buckets kept over all counters (rows kept in the rows form)."""
        return int(self._rows[0].size) if self._rows is not None else super().__len__()

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 3000, 7)
        parts = [cls(500, eps=0.1, delta=0.1, seed=4).update(ts[p::3], ts[p::3] % 23, (ts[p::3] % 5))
                 for p in range(3)]
        few = [cls(500, eps=0.1, delta=0.1, seed=4).update(ts[p:30:3], ts[p:30:3] % 3, ts[p:30:3] % 4)
               for p in range(2)]
        # parts[0] holds 24 rows: its counters are example 1 (what update built before the rows form, and a
        # sketch holds once past width rows), the rows themselves example 3
        return [cls(500, eps=0.1, delta=0.1, seed=4), parts[0]._as_counters(), cls.merge_all(parts), parts[0],
                cls.merge_all(few)]

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
        if self._rows is not None:
            old_ts, old_h, old_v = self._rows
            rows = live_rows(np.concatenate([old_ts, ts]), np.concatenate([old_h, hashes]),
                             np.concatenate([old_v, np.ones(ts.size, np.int64) if v is None else v]), newest,
                             self._window)
            if rows[0].size <= self._width:
                self._rows, self._newest = rows, newest
                return self
            self._rows = None  # past width rows: the counters of every row held
            ts, hashes, v = rows
            v = None if bool((v == 1).all()) else v
        ids = counter_ids(hashes, self._width, self._depth).ravel()  # row-major: time order within a counter
        self._keys, self._col = apply_keyed(self._keys, self._col, ids, np.tile(ts, self._depth),
                                            None if v is None else np.tile(v, self._depth), newest, self.counters)
        self._newest = newest
        return self

    def _row_total(self) -> int:
        """Units held by row 0 (the window's total, up to expiry)."""
        if self._rows is not None:
            return int(self._rows[2].sum())
        c = self._col
        end = int(c.offsets[np.searchsorted(self._keys, self._width)])
        return int(np.sum(np.left_shift(np.int64(1), c.exps[:end].astype(np.int64)), dtype=np.int64))

    # ---------------------------------------------------------------- query
    def _counter_bounds(self, now, window) -> tuple[np.ndarray, np.ndarray]:
        """Every counter's (lower, upper) over the window as of ``now``."""
        if self._rows is not None:  # exact: each counter's rows summed
            now, window = resolve_query(now, window, self._newest, self._window)
            exact = np.zeros(self.counters, dtype=np.int64)
            if now is not None:
                ts, h, v = self._rows
                inside = in_window(ts, now, window)
                np.add.at(exact, counter_ids(h[inside], self._width, self._depth).ravel(),
                          np.tile(v[inside], self._depth))
            return exact, exact.copy()
        lower = np.zeros(self.counters, dtype=np.int64)
        upper = np.zeros(self.counters, dtype=np.int64)
        lower[self._keys], upper[self._keys] = self._keyed_bounds(now, window)
        return lower, upper

    def _by_row(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(self._depth, self._width)

    def bounds(self, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """Bounds on the total of the ``window`` (default ``N``) ending at
        ``now`` (default :attr:`newest`): the sum of every row's counters
        brackets it, and the tightest row bounds are taken."""
        lower, upper = self._counter_bounds(now, window)
        return int(self._by_row(lower).sum(axis=1).max()), int(self._by_row(upper).sum(axis=1).min())

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
        if self._rows is not None:  # exact: each item's rows in the window summed
            return exact_frequencies(self._rows, as_hashes(hashes), now, window, self._newest, self._window)
        return self.answers_from_bounds(as_hashes(hashes), *self._counter_bounds(now, window))

    def answers_from_bounds(self, hashes: np.ndarray, lower: np.ndarray, upper: np.ndarray):
        """(estimate, lower, upper) of items (``hash64`` values) from every
        counter's bounds: this sketch's, or :meth:`union_bounds` of several."""
        ids = counter_ids(hashes, self._width, self._depth)
        lo, up = lower[ids], upper[ids]
        estimate = (lo * 0.5 + up * 0.5).min(axis=0)
        total = int(self._by_row(upper).sum(axis=1).min())
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
        rows = lambda x: self._by_row(x.astype(np.float64))  # noqa: E731 - products beyond int64 stay finite
        estimate = float((rows(ea) * rows(eb)).sum(axis=1).min())
        upper = float((rows(ua) * rows(ub)).sum(axis=1).min())
        lower_rows = float((rows(la) * rows(lb)).sum(axis=1).min())
        totals = float(self._by_row(ua).sum(axis=1).min()) * float(other._by_row(ub).sum(axis=1).min())
        return estimate, max(0.0, lower_rows - self._eps * totals), upper

    def total_from_bounds(self, lower: np.ndarray, upper: np.ndarray) -> tuple[int, int]:
        """:meth:`bounds` from every counter's bounds (a union's, whose
        rows may sum past int64: :class:`~ehist.errors.SumOverflowError`)."""
        if float(self._by_row(upper).sum(axis=1, dtype=np.float64).max()) >= 2.0**62:  # a row's int64 sum may wrap
            low = max(sum(row) for row in self._by_row(lower).tolist())
            total = min(sum(row) for row in self._by_row(upper).tolist())
            if total > INT64_MAX:
                raise SumOverflowError(f"the union's window total would overflow int64 ({total} > 2**63 - 1)")
            return low, total
        return int(self._by_row(lower).sum(axis=1).max()), int(self._by_row(upper).sum(axis=1).min())

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

    @classmethod
    def union_frequencies_of_hashes(cls, sketches, hashes, now: int | None = None, window: int | None = None):
        """:meth:`frequencies_of_hashes` of the union of ``sketches`` (same
        parameters) without merging them, as of ``now`` (default: the
        newest of them): where every sketch that saw a row is in the rows
        form, their rows summed (exact); otherwise
        :meth:`answers_from_bounds` of :meth:`union_bounds` (the merge's
        guarantees).  A frequency past int64 raises
        :class:`~ehist.errors.SumOverflowError`.

        >>> a = SlidingCountMin(10).update([1, 2], ["x", "y"])
        >>> b = SlidingCountMin(10).update([2, 3], ["x", "x"])
        >>> [x.tolist() for x in SlidingCountMin.union_frequencies_of_hashes([a, b], hash64(["x"], 0))]
        [[3.0], [3], [3]]
        """
        sk, now = cls._compatible_at(sketches, now)
        h = as_hashes(hashes)
        live = [s for s in sk if s._newest is not None]
        if any(s._rows is None for s in live):
            return sk[0].answers_from_bounds(h, *cls.union_bounds(sk, now, window))
        exact = [0] * h.size
        for s in live:
            at, w = resolve_query(now, window, s._newest, s._window)
            ts, held, v = s._rows
            inside = in_window(ts, at, w)
            exact = [a + b for a, b in zip(exact, rows_frequencies(held[inside], v[inside], h).tolist())]
        if not live:
            resolve_query(now, window, None, sk[0]._window)
        if exact and max(exact) > INT64_MAX:
            raise SumOverflowError(f"the union's frequency would overflow int64 ({max(exact)} > 2**63 - 1)")
        out = np.array(exact, dtype=np.int64)
        return out.astype(np.float64), out, out.copy()

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
    def _union(cls, sk: list) -> "SlidingCountMin":
        """Rows form parts whose rows fit: their rows (:func:`live_rows` at
        the union's newest); otherwise the counters' union, each part in
        the rows form taking its counters first."""
        live = [s for s in sk if s._newest is not None]
        if len(live) > 1 and all(s._rows is not None for s in live):
            newest = max(s._newest for s in live)
            cls._check_union_total(live, newest)
            rows = live_rows(*(np.concatenate(parts) for parts in zip(*(s._rows for s in live))), newest,
                             live[0]._window)
            if rows[0].size <= live[0]._width:
                out = cls(*live[0]._params())
                out._rows, out._newest = rows, newest
                return out
        if len(live) <= 1:
            return (live[0] if live else sk[0]).copy()
        out = super()._union([s._as_counters() for s in sk])
        out._rows = None
        return out

    @classmethod
    def _check_union_total(cls, live: list, newest: int) -> None:
        """One row's total (every row holds the stream's), settled at the
        union's newest, past int64 raises."""
        if sum(s._row_total() for s in live) > INT64_MAX:
            first = live[0]
            totals = [int(s._rows[2][in_window(s._rows[0], newest, first._window)].sum()) if s._rows is not None
                      else settled_total(settle(s._col, first._window, newest),
                                         int(np.searchsorted(s._keys, first._width)))
                      for s in live]
            if sum(totals) > INT64_MAX:
                raise SumOverflowError(f"merged window total would overflow int64 ({sum(totals)} > 2**63 - 1)")

    # -------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """The parameters and the counters holding units (or the rows), as
        checked bytes.

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

        A sketch in the rows form (updated, at most ``width`` rows) is
        version 3, flags bit 0 and bit 1 (rows), bit 2 when a value is
        not 1::

                46       8  newest (int64)
                 .   varint m: rows (at most width)
                 .   m x 8  their item hashes (uint64), rows ordered by
                            time, then hash
                 .   m x varint  newest - the first row's time, then
                            each row's time - the previous row's
                 .   m x varint  each row's value (>= 1) [if bit 2]
               end-4     4  CRC-32 of everything before

        A sketch never updated is version 2's (no newest, no counter) in
        either form.
        """
        if self._rows is not None and self._newest is not None:
            ts, h, v = self._rows
            ones = bool((v == 1).all())
            w = Writer("SlidingCountMin", ROWS_VERSION, _FLAG_HAS_NEWEST | FLAG_ROWS | (0 if ones else FLAG_VALUES))
            w.struct(LAYOUT.parameters, *self._params()).struct("q", self._newest)
            return write_rows(w, ts, h, v, self._newest, ones).finish()
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
        if (flags & FLAG_ROWS) != (FLAG_ROWS if r.version == ROWS_VERSION else 0) or (
                flags & FLAG_VALUES and not flags & FLAG_ROWS):
            raise CorruptSketchError(f"{name}: expected the rows flag with version {ROWS_VERSION} only, found "
                                     f"flags {flags:#06x} in version {r.version}")
        if flags & FLAG_ROWS:
            s._rows, s._newest = read_rows(r, name, s, int(newest), bool(flags & FLAG_VALUES)), int(newest)
            r.expect_end()
            return s
        s._newest = int(newest)
        s._rows = None
        keys, col = read_keyed(r, name, s.counters, s._window, s._eh_eps, s._newest, compact=r.version >= 2)
        if settled_total(col, int(np.searchsorted(keys, s._width))) > INT64_MAX:
            raise CorruptSketchError(f"{name}: expected a window total within int64")
        s._keys, s._col = keys, col
        return s
