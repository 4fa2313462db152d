"""The exponential histogram of Datar, Gionis, Indyk and Motwani.

Counts and sums of non-negative integers over a sliding window, within a
relative error ``eps``, in ``O((1/eps) log^2 N)`` bits.  See
:class:`ExponentialHistogram`.
"""

from __future__ import annotations

import math

import numpy as np

from . import compress as _compress
from .validation import (
    INT64_MAX,
    INT64_MIN,
    batch_in_window,
    check_eps,
    check_window,
    checked_total,
    coerce_times,
    coerce_timestamps,
    coerce_values,
    k_of_eps,
    resolve_query,
)
from .canonical import canonical_exponents
from .errors import CorruptSketchError, QueryTimeError, SumOverflowError
from .flat_rows import row_times
from .serialization import Writer, check_newest, check_tick, scale_down
from .synopsis import Synopsis, parameter

from .eh_layout import BITS as _BITS
from .eh_layout import FLAG_HAS_NEWEST as _FLAG_HAS_NEWEST
from .eh_layout import FLAG_MERGED as _FLAG_MERGED
from .eh_layout import FLAG_SHARED as _FLAG_SHARED
from .eh_layout import FLAG_TICK as _FLAG_TICK
from .eh_layout import FLAG_VALUES as _FLAG_VALUES
from .eh_layout import ROWS_VERSION as _ROWS_VERSION
from .eh_layout import MAX_EXPONENT as _MAX_EXPONENT
from .eh_layout import LAYOUT as _LAYOUT

__all__ = ["ExponentialHistogram"]

_U64_MAX = 2**64 - 1


class ExponentialHistogram(Synopsis):
    r"""Sliding-window count and sum of non-negative integers.

    Elements are ``(timestamp, value)`` pairs with int64 timestamps and
    non-negative integer values (1 by default).  An element is inside the
    window of length ``w`` at time ``now`` iff ``now - w < timestamp <= now``.
    A value ``v`` counts as ``v`` unit elements with the same timestamp
    (DGIM, Section 4), so the same structure answers counts (values 0/1)
    and sums.  Zeros are allowed: they add nothing but advance time.

    Parameters
    ----------
    window : int
        ``N``, the longest window that can be queried, in timestamp units.
        Count-based windows (the last ``N`` elements, the paper's
        BasicCounting) are the case timestamp = arrival index.
    eps : float, default 0.01
        Relative error, in ``(0, 1)``.  ``k = ceil(1/eps)`` and
        ``l = ceil(k/2)``: the histogram keeps ``l`` or ``l + 1`` buckets of
        every size ``2**i`` but the largest.
    keep_rows : bool, default False
        Start in the rows form (below): the first update that leaves 1 to
        ``k`` rows in the window keeps them.  The family's Spark specs make
        their histograms so.  (An empty histogram's bytes do not say it:
        one read back starts with buckets.)

    Notes
    -----
    **Guarantees.** For any ``now >= newest`` and any window ``1 <= w <= N``, with
    ``exact`` the sum of the values inside the window:

    * ``lower <= exact <= upper`` where ``(lower, upper) = bounds(now, w)``;
    * ``|estimate(now, w) - exact| <= eps * exact`` (the estimate is the
      midpoint of the bounds; the straddling bucket of size ``C`` has at
      least ``l (C - 1)`` units newer than it, so the error is at most
      ``(C - 1) / 2 <= exact / (2 l) <= exact / k``);
    * at most ``(l + 1)(log2(2 N R / k + 1) + 1) + 1`` buckets, where ``N``
      is the number of elements in the window and ``R`` the largest value.

    Both guarantees survive :meth:`merge`, in any number and order
    (see :mod:`ehist.compress`); a merged histogram trades the canonical
    bucket count for that.

    **The rows form.** A histogram made with ``keep_rows`` or by
    :meth:`of_rows` (sketch tables, aggregates and the streaming state make
    theirs so: :func:`ehist.columnar.histogram_bytes`) keeps the window's
    rows themselves, one ``(timestamp, value)`` per
    timestamp, while they are at most ``k``: a key's 25 flows of a day
    take ~100 bytes where a sum's canonical buckets take ~900, and every
    answer is exact (``lower == upper``).  Updates and merges keep it while
    the rows fit (a merge of histograms all in the rows form is their
    rows); past ``k`` rows, or merged with a histogram of buckets, a
    histogram takes the buckets one batch of its rows builds and keeps
    buckets.  :attr:`rows` says which form a histogram holds.

    Examples
    --------
    Time-based window: events in the last 60 seconds.

    >>> import numpy as np
    >>> h = ExponentialHistogram(window=60, eps=0.1)
    >>> ts = np.array([1, 5, 5, 30, 61, 70, 90])
    >>> h.update(ts)                        # doctest: +ELLIPSIS
    ExponentialHistogram(window=60, eps=0.1, buckets=..., total=..., newest=90)
    >>> h.estimate()                         # ts 61, 70 and 90 are in (30, 90]
    3.0
    >>> lower, upper = h.bounds()
    >>> lower <= 3 <= upper
    True

    Sums: bytes in the last 10 time units.

    >>> s = ExponentialHistogram(window=10, eps=0.05).update([1, 2, 8], [100, 250, 40])
    >>> lower, upper = s.bounds(now=11)      # exact: 290 (ts 2 and 8)
    >>> lower <= 290 <= upper, abs(s.estimate(now=11) - 290) <= 0.05 * 290
    (True, True)

    Count-based window (the last 1000 bits), timestamps = arrival index:

    >>> bits = np.random.default_rng(0).integers(0, 2, 10_000)
    >>> c = ExponentialHistogram(window=1000, eps=0.01).update(np.arange(bits.size), bits)
    >>> exact = int(bits[-1000:].sum())
    >>> abs(c.estimate() - exact) <= 0.01 * exact
    True

    References
    ----------
    M. Datar, A. Gionis, P. Indyk, R. Motwani. Maintaining Stream Statistics
    over Sliding Windows. SIAM J. Computing 31(6), 2002. Sections 2 and 4.
    """

    __slots__ = (
        "_window",
        "_eps",
        "_k",
        "_l",
        "_exps",
        "_hi",
        "_lo",
        "_merged",
        "_newest",
        "_total",
        "_cache",
        "_rows",
        "_keep_rows",
    )

    def __init__(self, window: int, eps: float = 0.01, keep_rows: bool = False):
        self._window = check_window(window)
        self._eps = check_eps(eps)
        self._k = k_of_eps(self._eps)
        self._l = (self._k + 1) // 2
        self._exps = np.zeros(0, dtype=np.int8)
        self._hi = np.zeros(0, dtype=np.int64)
        self._lo = np.zeros(0, dtype=np.int64)
        self._merged = False
        self._newest: int | None = None
        self._total = 0
        self._cache = None
        self._rows: tuple | None = None
        self._keep_rows = bool(keep_rows)  # not state: what the first update does

    # ------------------------------------------------------------------ info
    eps = parameter("_eps", "The relative error bound.")
    k = parameter("_k", "``ceil(1 / eps)``.")
    l = parameter("_l", "``ceil(k / 2)``: buckets of each size (``l`` or ``l + 1``).")  # noqa: E741 - the paper's name

    @property
    def total(self) -> int:
        """Sum of the bucket sizes (units summarized, possibly including some
        expired units of the oldest bucket); of the rows' values in the
        rows form."""
        return self._total

    @property
    def merged(self) -> bool:
        """Whether this histogram came out of :meth:`merge` (explicit
        per-bucket time intervals, greedy compression)."""
        return self._merged

    @property
    def rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Copies of ``(timestamps, values)`` of the window's rows, oldest
        first, one per timestamp with its values summed, where the
        histogram keeps them (the rows form); None where it keeps buckets.

        >>> h = ExponentialHistogram.of_rows(100, 0.1, [5, 9, 9], [700, 20, 3])
        >>> [x.tolist() for x in h.rows], h.bounds(now=20, window=12)   # exact: the 23 at time 9
        ([[5, 9], [700, 23]], (23, 23))
        >>> ExponentialHistogram(100, 0.1).update([5]).rows is None
        True
        """
        return None if self._rows is None else (self._rows[0].copy(), self._rows[1].copy())

    def __len__(self) -> int:
        """Number of buckets (of rows, in the rows form)."""
        return int(self._exps.size if self._rows is None else self._rows[0].size)

    def buckets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of ``(sizes, newest_ts, oldest_ts_bound)``, newest bucket first
        (in the rows form, of the buckets its rows build).

        Every unit of bucket ``i`` has a timestamp in
        ``[oldest_ts_bound[i], newest_ts[i]]`` and one unit sits at
        ``newest_ts[i]``.
        """
        if self._rows is not None:
            return self._as_buckets().buckets()
        sizes = np.left_shift(np.int64(1), self._exps.astype(np.int64))
        return sizes, self._hi.copy(), self._lo.copy()

    @classmethod
    def of_rows(cls, window: int, eps: float, timestamps, values=None) -> "ExponentialHistogram":
        """The histogram of these elements in the rows form (the class
        docstring) where its window holds 1 to ``k`` rows; else the
        buckets :meth:`update` builds of them in one batch.  Same checks
        and errors as :meth:`update`.

        >>> h = ExponentialHistogram.of_rows(60, 0.5, [1, 2, 3])        # k = 2
        >>> h.rows is None, h == ExponentialHistogram(60, 0.5).update([1, 2, 3])
        (True, True)
        """
        return cls(window, eps, keep_rows=True).update(timestamps, values)

    def _first_rows(self, ts: np.ndarray, v, newest: int) -> "ExponentialHistogram":
        """The first update of a histogram made with ``keep_rows``: the rows
        form where 1 to ``k`` rows are left, else what :meth:`update` of a
        histogram of buckets gives."""
        checked_total(v, ts.shape[0], 0)
        ones = np.ones(ts.size, dtype=np.int64) if v is None else v.astype(np.int64)
        self._rows = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self._set_rows(ts, ones, newest)
        if self._rows is not None and self._rows[0].size == 0:  # no row: buckets (none), as every other
            self._take_buckets()
        return self

    def _as_buckets(self) -> "ExponentialHistogram":
        """A histogram in the rows form as the buckets its rows build in
        one batch (itself where it keeps buckets)."""
        if self._rows is None:
            return self
        h = ExponentialHistogram(self._window, self._eps)
        t, v = self._rows
        if t.size:
            h.update(t, v)
        h._newest = self._newest
        return h

    def _take_buckets(self) -> None:
        """In place: :meth:`_as_buckets`."""
        h = self._as_buckets()
        self._exps, self._hi, self._lo, self._total, self._merged = h._exps, h._hi, h._lo, h._total, False
        self._rows, self._cache = None, None

    def _set_rows(self, t: np.ndarray, v: np.ndarray, newest: int) -> None:
        """In place: the rows ``(t, v)`` (sorted by time, inside the window
        as of ``newest``, total within int64), one per time with values
        summed and zeros dropped, kept while at most ``k``, else their
        buckets."""
        if t.size > 1:
            first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
            if first.size < t.size:
                t, v = t[first], np.add.reduceat(v, first)
        keep = v > 0
        t, v = t[keep], v[keep]
        self._newest, self._cache, self._merged = newest, None, False
        self._exps, self._hi, self._lo = self._exps[:0], self._hi[:0], self._lo[:0]
        self._rows, self._total = (t, v), int(v.sum())
        if t.size > self._k:
            self._take_buckets()

    @staticmethod
    def bucket_bound(eps: float, n_elements: int, max_value: int = 1) -> float:
        """The bound ``(l + 1)(log2(2 N R / k + 1) + 1) + 1`` on ``len(h)``.

        Parameters
        ----------
        eps : float
        n_elements : int
            ``N``, the number of elements inside the window.
        max_value : int
            ``R``, the largest value.

        Examples
        --------
        >>> round(ExponentialHistogram.bucket_bound(0.01, 10**6), 1)
        780.7
        """
        k = k_of_eps(check_eps(eps))
        l = (k + 1) // 2
        return (l + 1) * (math.log2(2 * n_elements * max_value / k + 1) + 1) + 1

    _names = ("windows", "eps")
    _state = ("_newest", "_merged", "_exps", "_hi", "_lo", "_rows")
    _noun = "histograms"

    def _params(self) -> tuple:
        return self._window, self._eps

    def _repr_params(self) -> list:
        return [f"window={self._window}", f"eps={self._eps:g}"]

    def _repr_state(self) -> list:
        if self._rows is not None:
            return [f"rows={len(self)}", f"total={self._total}", f"newest={self._newest}"]
        return [f"buckets={len(self)}", f"total={self._total}", f"newest={self._newest}"] + (
            ["merged"] if self._merged else [])

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 3000, 7)
        parts = [cls(500, 0.1).update(ts[p::3], (ts[p::3] % 11)) for p in range(3)]
        rows = [cls.of_rows(500, 0.05, ts[p:20:2], (ts[p:20:2] % 11) * 100 + 1) for p in range(2)]
        return [cls(500, 0.1), cls(500, 0.05).update(ts), parts[0], cls.merge_all(parts),
                cls(2**62, 0.5).update(np.array([-2**63 + 1, 2**62])), rows[0], cls.merge_all(rows),
                cls.of_rows(2**62, 0.5, np.array([-2**63 + 1, 2**62]))]

    def copy(self) -> "ExponentialHistogram":
        """An independent copy (its query cache not carried over)."""
        out = super().copy()
        out._cache = None
        return out

    # ---------------------------------------------------------------- update
    def update(self, timestamps, values=None) -> "ExponentialHistogram":
        """Insert a batch of elements (vectorized l-canonical rebuild).

        The whole batch is validated before anything changes.  Timestamps
        inside the batch need not be sorted (they are stably sorted) but
        must all be ``>=`` :attr:`newest`.

        Implements the batch insertion of DGIM Section 4: expire buckets,
        compute the l-canonical representation of the new total
        ``S1 + S2`` and place every bucket boundary with cumulative sums and
        ``searchsorted``: ``O(batch + log N)`` numpy work, no per-element
        Python loop.  The result is the histogram that inserting the
        elements one at a time would give whenever no bucket expires during
        the batch; otherwise the batch drops expired units earlier (and can
        only be smaller).  Either way the guarantees hold.

        Parameters
        ----------
        timestamps : array-like of int
        values : array-like of non-negative int, optional
            Defaults to all ones.  Booleans count as 0/1.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Negative, NaN or non-integer values, lengths that differ.
        SumOverflowError
            A sum that would overflow int64 (also an OverflowError).
        LateDataError
            A timestamp older than :attr:`newest`.
        """
        ts = coerce_timestamps(timestamps)
        v = coerce_values(values, ts.shape[0])
        if ts.size == 0:
            return self
        # the new elements inside the window: a suffix of the sorted batch
        ts, (v,), newest = batch_in_window(ts, (v,), self._newest, self._window)
        if self._keep_rows and self._newest is None and self._rows is None:  # the first update: rows
            return self._first_rows(ts, v, newest)
        if self._rows is not None:
            t, old = self._rows
            alive = t > newest - self._window
            base = int(old[alive].sum())
            checked_total(v, ts.shape[0], base)
            ones = np.ones(ts.size, dtype=np.int64) if v is None else v.astype(np.int64)
            self._set_rows(np.concatenate([t[alive], ts]), np.concatenate([old[alive], ones]), newest)
            return self
        # old buckets still alive (hi is non-increasing: a prefix survives)
        n_keep = self._alive_prefix(newest - self._window)
        old_total = self._total - int(
            np.sum(np.left_shift(np.int64(1), self._exps[n_keep:].astype(np.int64)))
        )
        cum, total = checked_total(v, ts.shape[0], old_total)
        # ---- validated: from here on the state changes ----
        self._cache = None
        self._truncate(n_keep)
        self._newest = newest
        if total == old_total:
            return self
        if self._merged:
            fresh = ExponentialHistogram(self._window, self._eps)
            fresh._newest = newest
            fresh._rebuild(ts, cum, total - old_total)
            self._absorb([fresh])
        else:
            self._rebuild(ts, cum, total)
        return self

    def add(self, timestamp: int, value: int = 1) -> "ExponentialHistogram":
        """Insert one element; same rules as :meth:`update`."""
        return self.update([timestamp], [value])

    def _alive_prefix(self, cutoff: int) -> int:
        if self._hi.size == 0 or cutoff < INT64_MIN:
            return int(self._hi.size)
        # number of buckets with hi > cutoff (hi non-increasing)
        return int(self._hi.size - np.searchsorted(self._hi[::-1], cutoff, side="right"))

    def _truncate(self, n_keep: int) -> None:
        if n_keep < self._exps.size:
            dropped = np.left_shift(np.int64(1), self._exps[n_keep:].astype(np.int64))
            self._total -= int(dropped.sum())
            self._exps = self._exps[:n_keep].copy()
            self._hi = self._hi[:n_keep].copy()
            self._lo = self._lo[:n_keep].copy()

    def _rebuild(self, ts: np.ndarray, cum: np.ndarray | None, total: int) -> None:
        """l-canonical rebuild of an ordered histogram with a sorted batch.

        ``cum`` is the cumulative sum of the batch values (None: all ones)
        and ``total`` the new total including the surviving old buckets.
        Units are numbered 1..total from the oldest; the canonical sizes of
        ``total`` say where every bucket starts, and ``searchsorted`` finds
        the element (or old bucket) holding each bucket's newest unit.
        """
        old_ends = np.cumsum(np.left_shift(np.int64(1), self._exps[::-1].astype(np.int64)))
        s_old = int(old_ends[-1]) if old_ends.size else 0
        exps = canonical_exponents(total, self._l)  # newest first
        sizes = np.left_shift(np.int64(1), exps.astype(np.int64))
        newest_pos = total - np.cumsum(sizes) + sizes  # 1-based, from the oldest unit
        # newest_pos decreases along the targets: new data first, old data last
        n_new = int(np.searchsorted(-newest_pos, -s_old, side="left"))
        hi = np.empty(sizes.size, dtype=np.int64)
        if n_new:
            r = newest_pos[:n_new] - s_old
            if cum is None:
                idx = r - 1
            else:
                idx = np.searchsorted(cum, r.astype(cum.dtype), side="left")
            hi[:n_new] = ts[idx]
        if n_new < sizes.size:
            p = newest_pos[n_new:]
            idx = np.searchsorted(old_ends, p, side="left")
            # Section 4: an element not indexed now is never indexed later,
            # so every boundary inside old data is an old boundary.
            if not np.array_equal(old_ends[idx], p):
                raise AssertionError("l-canonical rebuild would split an old bucket")
            hi[n_new:] = self._hi[::-1][idx]
        lo = np.empty_like(hi)
        lo[:-1] = hi[1:]
        if s_old:
            lo[-1] = self._lo[-1]
        else:
            lo[-1] = ts[0] if cum is None else ts[int(np.searchsorted(cum, 1, side="left"))]
        _pin_unit_buckets(exps, hi, lo)
        self._exps, self._hi, self._lo, self._total = exps, hi, lo, total

    # ----------------------------------------------------------------- query
    def _resolve(self, now, window) -> tuple[int | None, int]:
        return resolve_query(now, window, self._newest, self._window)

    def _prepare(self):
        if self._cache is None:
            sizes = np.left_shift(np.int64(1), self._exps.astype(np.int64))
            csum = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            hi_asc = self._hi[::-1].copy()
            if self._merged:
                order = np.argsort(self._lo, kind="stable")
                lo_asc = self._lo[order]
                lo_suffix = np.concatenate([np.cumsum(sizes[order][::-1])[::-1], [0]])
            else:
                lo_asc = self._lo[::-1].copy()
                lo_suffix = None
            self._cache = (csum, hi_asc, lo_asc, lo_suffix)
        return self._cache

    def _bounds_at(self, cutoffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) int64 arrays for units with timestamp > cutoff."""
        if self._rows is not None:  # exact: the values of the rows after the cutoff
            t, v = self._rows
            inside = np.concatenate([[0], np.cumsum(v[::-1])]).astype(np.int64)
            got = inside[t.size - np.searchsorted(t, cutoffs, side="right")]
            return got, got.copy()
        n = self._exps.size
        if n == 0:
            z = np.zeros(cutoffs.shape, dtype=np.int64)
            return z, z.copy()
        csum, hi_asc, lo_asc, lo_suffix = self._prepare()
        count_hi = n - np.searchsorted(hi_asc, cutoffs, side="right")
        first_lo = np.searchsorted(lo_asc, cutoffs, side="right")
        count_lo = n - first_lo
        upper = csum[count_hi]
        if lo_suffix is None:
            mass_lo = csum[count_lo]  # ordered: lo is non-increasing too
        else:
            mass_lo = lo_suffix[first_lo]
        lower = mass_lo + (count_hi - count_lo)
        return lower, upper

    def _cutoff(self, now, window) -> int:
        now, window = self._resolve(now, window)
        if now is None:
            return INT64_MAX  # empty: nothing is in any window
        # a window starting past int64 holds nothing (every family answers 0)
        return min(max(now - window, INT64_MIN), INT64_MAX)

    def bounds(self, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """Lower and upper bounds on the exact windowed sum.

        Parameters
        ----------
        now : int, optional
            Query time, ``>=`` :attr:`newest` (default: :attr:`newest`).
        window : int, optional
            Window length in ``[1, N]`` (default: ``N``).

        Returns
        -------
        (lower, upper) : tuple of int
            ``lower <= exact <= upper``, always.

        Raises
        ------
        ValueError
            ``now`` before the newest timestamp, or a window outside ``[1, N]``.
        """
        cut = self._cutoff(now, window)
        lower, upper = self._bounds_at(np.array([cut], dtype=np.int64))
        return int(lower[0]), int(upper[0])

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        """Estimated sum of the values with ``now - window < ts <= now``.

        The midpoint of :meth:`bounds`; within ``eps`` of the exact sum.
        Same parameters and errors as :meth:`bounds`.
        """
        lower, upper = self.bounds(now, window)
        return lower * 0.5 + upper * 0.5

    def estimates(self, now, window: int | None = None) -> np.ndarray:
        """Vectorized :meth:`estimate` for an array of query times."""
        lower, upper = self.bounds_many(now, window)
        return lower * 0.5 + upper * 0.5

    def bounds_many(self, now, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`bounds` for an array of query times ``now``
        (each ``>= newest``) and one window."""
        _, window = self._resolve(None, window)
        now = coerce_times(now, "now")
        if self._newest is not None and now.size and int(now.min()) < self._newest:
            raise QueryTimeError.late(int(now.min()), self._newest)
        if now.size == 0:
            return np.zeros(0), np.zeros(0)
        # clip cutoffs at INT64_MIN: timestamps are > INT64_MIN, so exact
        cuts = np.maximum(now, np.int64(INT64_MIN + window)) - np.int64(window)
        lower, upper = self._bounds_at(cuts.astype(np.int64))
        return lower.astype(np.float64), upper.astype(np.float64)

    # ----------------------------------------------------------------- merge
    def merge(self, other: "ExponentialHistogram") -> "ExponentialHistogram":
        """Order-preserving union with a histogram of another stream.

        For two histograms over streams whose timestamps interleave (two
        Spark partitions of one key), returns a new histogram of the
        combined stream; neither argument changes.  The buckets of both are
        merged in timestamp order, each keeping its time interval, then
        adjacent equal-size buckets are combined while the error budget
        ``k * (upper - lower) <= 2 * lower`` holds at every legal cutoff
        (ECM-sketches' order-preserving aggregation, made budget-aware; see
        :mod:`ehist.compress`).

        Guarantee: :meth:`bounds` brackets the exact answer and
        ``|estimate - exact| <= eps * exact``, for any window and ``now``,
        after any number and any order of merges: the same contract as a
        histogram built by :meth:`update`.  The price is size: the bucket
        count is at most the sum of the inputs' but no longer the canonical
        bound (folding 16 interleaved partitions of a stream gives about 5x
        the buckets of the histogram of the whole stream; merging them in
        one :meth:`merge_all` call about 4.5x).

        Raises
        ------
        IncompatibleSketchError (a ValueError)
            Different ``window`` or ``eps``; the message names both values.
        TypeError
            ``other`` is not an ExponentialHistogram.
        """
        return ExponentialHistogram.merge_all([self, other])

    @classmethod
    def merge_all(cls, histograms) -> "ExponentialHistogram":
        """Merge any number of histograms in one union and one compression.

        Same guarantee as :meth:`merge`; faster and smaller than folding
        :meth:`merge` over the list.  None of the inputs changes.

        Examples
        --------
        >>> import numpy as np
        >>> parts = [ExponentialHistogram(100, 0.1).update(np.arange(p, 300, 3)) for p in range(3)]
        >>> m = ExponentialHistogram.merge_all(parts)
        >>> lower, upper = m.bounds()
        >>> lower <= 100 <= upper, abs(m.estimate() - 100) <= 0.1 * 100
        (True, True)
        """
        return super().merge_all(histograms)

    @classmethod
    def _union(cls, hs: list) -> "ExponentialHistogram":
        out = hs[0].copy()
        out._absorb(hs[1:])
        return out

    def _absorb(self, others) -> None:
        """In-place union with ``others`` (same parameters, already checked)."""
        self._cache = None
        others = [o for o in others if o._newest is not None]
        if not others:
            return
        if all(h._rows is not None for h in others) and (self._rows is not None or self._newest is None):
            self._absorb_rows(others)
            return
        if self._rows is not None:
            self._take_buckets()
        others = [o._as_buckets() for o in others]
        newest = max(o._newest for o in others)
        if self._newest is not None:
            newest = max(newest, self._newest)
        cutoff = newest - self._window
        parts = []
        for h in [self] + others:
            n = h._alive_prefix(cutoff)
            if n:
                parts.append((h._exps[:n], h._hi[:n], h._lo[:n], h._merged))
        self._newest = newest
        if not parts:
            self._exps, self._hi, self._lo = self._exps[:0], self._hi[:0], self._lo[:0]
            self._total, self._merged = 0, False
            return
        exps = np.concatenate([p[0] for p in parts])
        hi = np.concatenate([p[1] for p in parts])
        lo = np.concatenate([p[2] for p in parts])
        total = sum(
            int(np.sum(np.left_shift(np.int64(1), p[0].astype(np.int64)))) for p in parts
        )
        if total > INT64_MAX:
            raise SumOverflowError(f"merged total would overflow int64 ({total} > 2**63 - 1)")
        if len(parts) == 1:
            self._exps, self._hi, self._lo = exps.copy(), hi.copy(), lo.copy()
            self._total, self._merged = total, parts[0][3]
            return
        order = np.lexsort((lo, hi))[::-1]  # newest first; ties: larger lo first
        self._exps, self._hi, self._lo = _compress.compress(
            exps[order], hi[order], lo[order], self._k, max(cutoff, INT64_MIN)
        )
        self._total = total
        self._merged = True

    def _absorb_rows(self, others) -> None:
        """:meth:`_absorb` where every histogram with a newest time keeps
        its rows: the union of the rows inside the window as of the newest,
        kept while at most ``k`` (else their buckets)."""
        hs = ([self] if self._newest is not None else []) + list(others)
        newest = max(h._newest for h in hs)
        t = np.concatenate([h._rows[0] for h in hs])
        v = np.concatenate([h._rows[1] for h in hs])
        keep = t > newest - self._window
        t, v = t[keep], v[keep]
        if float(v.sum(dtype=np.float64)) >= 2.0 ** 62 and sum(v.tolist()) > INT64_MAX:
            raise SumOverflowError(f"merged total would overflow int64 ({sum(v.tolist())} > 2**63 - 1)")
        order = np.argsort(t, kind="stable")
        self._set_rows(t[order], v[order], newest)

    # --------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """Compact, versioned, little-endian serialization; the layout is
        drawn and declared in :mod:`ehist.eh_layout` (family id 1, format
        version 2, the rows form version 3; version 1 still read).
        """
        if self._rows is not None:
            return self._rows_bytes()
        flags = 0
        if self._newest is not None:
            flags |= _FLAG_HAS_NEWEST
        if self._merged:
            flags |= _FLAG_MERGED
        n = int(self._exps.size)
        if n == 0:
            w = _LAYOUT.writer(flags, self._window, self._eps)
            if self._newest is not None:
                w.struct("q", self._newest)
            return w.varints([0]).finish()
        hi = self._hi
        change = np.flatnonzero(np.diff(self._exps.astype(np.int64))) + 1
        starts = np.concatenate([[0], change])
        runs = np.empty(2 * starts.size, dtype=np.uint64)
        runs[0::2] = self._exps[starts].astype(np.uint64)
        runs[1::2] = np.diff(np.append(starts, n)).astype(np.uint64)
        shared = np.zeros(n, dtype=bool)
        shared[1:] = hi[1:] == hi[:-1]
        if _bitmap_pays(int(shared.sum()), n):
            flags |= _FLAG_SHARED
        else:
            shared[:] = False
        stamps = hi[~shared]
        stored = np.empty(stamps.size + (n if self._merged else 1), dtype=np.uint64)  # deltas, then widths
        stored[0] = np.uint64(self._newest - int(stamps[0]))
        stored[1:stamps.size] = (stamps[:-1] - stamps[1:]).view(np.uint64)
        stored[stamps.size:] = (self._hi - self._lo).view(np.uint64) if self._merged else \
            np.uint64(int(hi[-1]) - int(self._lo[-1]))
        tick, stored = scale_down(stored)
        if tick > 1:
            flags |= _FLAG_TICK
        w = _LAYOUT.writer(flags, self._window, self._eps).struct("q", self._newest)
        w.varints([n, starts.size]).varints(runs)
        if tick > 1:
            w.varints([tick])
        if flags & _FLAG_SHARED:
            w.raw(_pack_bits(shared))
        return w.varints(stored).finish()

    def _rows_bytes(self) -> bytes:
        """:meth:`to_bytes` of the rows form (format version 3)."""
        t, v = self._rows
        gaps = np.diff(t, prepend=t[:1]).view(np.uint64)
        if t.size:
            gaps[0] = np.uint64(self._newest - int(t[0]))
        tick, gaps = scale_down(gaps)
        ones = bool((v == 1).all())
        flags = _FLAG_HAS_NEWEST | (_FLAG_TICK if tick > 1 else 0) | (0 if ones else _FLAG_VALUES)
        w = Writer("ExponentialHistogram", _ROWS_VERSION, flags).struct(_LAYOUT.parameters, self._window, self._eps)
        w.struct("q", self._newest).varints([t.size])
        if tick > 1:
            w.varints([tick])
        w.varints(gaps)
        return (w if ones else w.varints(v)).finish()

    @classmethod
    def _read_rows(cls, r, flags: int, h: "ExponentialHistogram") -> "ExponentialHistogram":
        """The rows form after its head (format version 3), every check made."""
        name = "ExponentialHistogram"
        if flags & (_FLAG_MERGED | _FLAG_SHARED) or not flags & _FLAG_HAS_NEWEST:
            raise CorruptSketchError(f"{name}: expected the rows form's flags (has newest; tick, values), found "
                                     f"{flags}")
        (newest,) = r.struct("q", "newest timestamp")
        check_newest(newest, name)
        m = r.varint("row count")
        if m > h._k:
            raise CorruptSketchError(f"{name}: expected at most k = {h._k} rows, found {m}")
        tick = r.varint("timestamp tick") if flags & _FLAG_TICK else 1
        if flags & _FLAG_TICK and tick < 2:
            raise CorruptSketchError(f"{name}: expected a timestamp tick of at least 2, found {tick}")
        gaps = r.varints(m, "row times")
        valued = bool(flags & _FLAG_VALUES)
        v = r.varints(m, "row values") if valued else np.ones(m, dtype=np.uint64)
        r.expect_end()
        check_tick(gaps, tick, name, "gap", "gaps")
        if m and int(gaps.max()) > _U64_MAX // tick:
            raise CorruptSketchError(f"{name}: expected gaps below 2**64, found {int(gaps.max())} ticks of {tick}")
        if m and (int(v.min()) < 1 or sum(v.tolist()) > INT64_MAX):
            raise CorruptSketchError(f"{name}: expected row values >= 1 with a total within int64")
        if valued and bool((v == 1).all()):
            raise CorruptSketchError(f"{name}: expected a value other than 1 with the values flag")
        t = row_times(gaps * np.uint64(tick), np.zeros(m, dtype=np.uint64), newest, h._window, name, "rows")
        h._rows, h._newest, h._total = (t, v.astype(np.int64)), int(newest), int(v.sum()) if m else 0
        return h

    @classmethod
    def from_bytes(cls, data) -> "ExponentialHistogram":
        """Decode :meth:`to_bytes` output.

        Raises
        ------
        CorruptSketchError (a ValueError)
            Truncated, altered or foreign bytes; the message says what was
            expected and what was found.
        """
        name = "ExponentialHistogram"
        r, flags, h = _LAYOUT.open(data, cls)
        if r.version == _ROWS_VERSION:
            return cls._read_rows(r, flags, h)
        if flags & _FLAG_VALUES:
            raise CorruptSketchError(f"{name}: expected no values flag in format version {r.version}")
        shared_flag, tick_flag = bool(flags & _FLAG_SHARED), bool(flags & _FLAG_TICK)
        if (shared_flag or tick_flag) and r.version < 2:
            raise CorruptSketchError(f"{name}: expected no shared-timestamps or tick flag in format "
                                     f"version {r.version}")
        newest = None
        if flags & _FLAG_HAS_NEWEST:
            (newest,) = r.struct("q", "newest timestamp")
            check_newest(newest, name)
        n = r.varint("bucket count")
        if n and newest is None:
            raise CorruptSketchError(f"{name}: expected a newest timestamp with {n} buckets")
        # a bucket takes a byte, or a bit of seven when it shares a timestamp
        room = r.remaining * (_BITS if shared_flag else 1)
        if n > room:
            raise CorruptSketchError(
                f"{name}: expected at most {room} buckets in the bytes left, found {n}"
            )
        merged = bool(flags & _FLAG_MERGED)
        if n == 0:
            if merged or shared_flag or tick_flag:
                raise CorruptSketchError(f"{name}: expected no merged, shared-timestamps or tick flag on an "
                                         "empty histogram")
            r.expect_end()
            h._newest = None if newest is None else int(newest)
            return h
        n_runs = r.varint("run count")
        if not 1 <= n_runs <= n:
            raise CorruptSketchError(f"{name}: expected 1 to {n} size runs, found {n_runs}")
        runs = r.varints(2 * n_runs, "size runs").astype(object)
        run_exps, run_lens = runs[0::2], runs[1::2]
        if max(run_exps) > _MAX_EXPONENT or min(run_lens) < 1 or sum(run_lens) != n:
            raise CorruptSketchError(
                f"{name}: expected size runs with exponents <= {_MAX_EXPONENT} and "
                f"lengths summing to {n}, found exponents up to {max(run_exps)} "
                f"and lengths summing to {sum(run_lens)}"
            )
        if any(a == b for a, b in zip(run_exps[:-1], run_exps[1:])):
            raise CorruptSketchError(f"{name}: expected adjacent size runs of different exponents, found two of "
                                     f"exponent {next(a for a, b in zip(run_exps[:-1], run_exps[1:]) if a == b)}")
        exps = np.repeat(np.array(run_exps, dtype=np.int8), np.array(run_lens, dtype=np.int64))
        total = sum(int(c) << int(e) for e, c in zip(run_exps, run_lens))
        if total > INT64_MAX:
            raise CorruptSketchError(f"{name}: expected a total below 2**63, found {total}")
        tick = 1
        if tick_flag:
            tick = r.varint("timestamp tick")
            if tick < 2:
                raise CorruptSketchError(f"{name}: expected a timestamp tick of at least 2, found {tick}")
        if shared_flag:
            shared = _unpack_bits(r.raw(-(-n // _BITS), "shared-timestamps bitmap"), n, name)
        else:
            shared = np.zeros(n, dtype=bool)
        deltas = r.varints(n - int(shared.sum()), "timestamp deltas")
        widths = r.varints(n, "interval widths") if merged else r.varints(1, "oldest interval width")
        if shared_flag:
            if deltas.size > 1 and not deltas[1:].all():
                raise CorruptSketchError(f"{name}: expected a nonzero delta between timestamps the bitmap "
                                         "does not mark as shared, found 0")
            if not _bitmap_pays(n - deltas.size, n):
                raise CorruptSketchError(f"{name}: expected no bitmap for {n - deltas.size} shared timestamps "
                                         f"of {n} buckets (zero deltas are shorter)")
        elif r.version >= 2 and n > 1 and _bitmap_pays(n - int(np.count_nonzero(deltas[1:])) - 1, n):
            raise CorruptSketchError(f"{name}: expected the shared-timestamps bitmap for "
                                     f"{n - int(np.count_nonzero(deltas[1:])) - 1} zero deltas of {n} buckets")
        if r.version >= 2:
            deltas, widths = _unscale(deltas, widths, tick, name)
        hi = _undelta(int(newest), deltas, name)
        if shared_flag:
            hi = hi[np.cumsum(~shared) - 1]
        if merged:
            lo = _subtract(hi, widths, name)
        else:
            if exps[-1] == 0 and int(widths[-1]) != 0:  # one unit, at its newest time: the writer stores 0
                raise CorruptSketchError(f"{name}: expected a width of 0 for an oldest bucket of size 1, "
                                         f"found {int(widths[-1])}")
            lo = np.empty_like(hi)
            lo[:-1] = hi[1:]
            lo[-1:] = _subtract(hi[-1:], widths, name)
            _pin_unit_buckets(exps, hi, lo)
        r.expect_end()
        if int(hi[-1]) <= int(newest) - h._window:
            raise CorruptSketchError(
                f"{name}: expected every bucket inside the window, found one at "
                f"{int(hi[-1])} <= {int(newest) - h._window}"
            )
        if not merged and not np.array_equal(exps, canonical_exponents(total, h._l)):
            raise CorruptSketchError(
                f"{name}: expected the l-canonical bucket sizes of total {total} "
                f"(l={h._l}), found another sequence"
            )
        h._exps, h._hi, h._lo = exps, hi, lo
        h._newest, h._total, h._merged = int(newest), total, merged
        return h


def _unscale(deltas: np.ndarray, widths: np.ndarray, tick: int, name: str):
    """Deltas and widths times ``tick``, checking that the tick is their
    gcd (written exactly when it is 2 or more) and the products fit."""
    check_tick(np.concatenate([deltas, widths]), tick, name, "delta and width", "deltas and widths")
    if tick > 1:
        top = max(int(deltas.max(initial=0)), int(widths.max(initial=0)))
        if top > _U64_MAX // tick:
            raise CorruptSketchError(f"{name}: expected deltas below 2**64, found {top} ticks of {tick}")
    t = np.uint64(tick)
    return deltas * t, widths * t


def _bitmap_pays(shared: int, n: int) -> bool:
    """Whether the bitmap (a bit of 7 per bucket) is shorter than the zero
    deltas (a byte each) of ``shared`` buckets sharing a timestamp."""
    return shared > -(-n // _BITS)


def _pack_bits(bits: np.ndarray) -> bytes:
    """Bits, 7 to a byte, lowest first: every byte a one-byte varint."""
    padded = np.zeros(-(-bits.size // _BITS) * _BITS, dtype=np.uint8)
    padded[:bits.size] = bits
    return (padded.reshape(-1, _BITS) << np.arange(_BITS, dtype=np.uint8)).sum(axis=1, dtype=np.uint8).tobytes()


def _unpack_bits(data: bytes, n: int, name: str) -> np.ndarray:
    """Inverse of :func:`_pack_bits` for ``n`` bits, checking that every
    byte is below 128, the padding clear and bit 0 (the newest bucket,
    which has no previous one) clear."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size and int(raw.max()) >= 1 << _BITS:
        raise CorruptSketchError(f"{name}: expected bitmap bytes below 128, found {int(raw.max())}")
    bits = ((raw[:, None] >> np.arange(_BITS, dtype=np.uint8)) & 1).astype(bool).ravel()
    if bits[n:].any() or bits[0]:
        raise CorruptSketchError(f"{name}: expected a bitmap with clear padding and first bit, found another")
    return bits[:n]


def _pin_unit_buckets(exps: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> None:
    """A bucket of size 1 holds exactly one unit, at its newest timestamp."""
    unit = exps == 0
    lo[unit] = hi[unit]


def _undelta(newest: int, deltas: np.ndarray, name: str) -> np.ndarray:
    """``hi[i] = newest - sum(deltas[:i + 1])``, checked against int64."""
    if deltas.size and int(deltas.max()) < 2**62 // max(1, deltas.size) and newest - (2**62) > INT64_MIN:
        return newest - np.cumsum(deltas.astype(np.int64))
    out = []
    cur = newest
    for d in deltas.tolist():
        cur -= int(d)
        if cur < INT64_MIN:
            raise CorruptSketchError(f"{name}: expected timestamps within int64, found {cur}")
        out.append(cur)
    return np.array(out, dtype=np.int64)


def _subtract(hi: np.ndarray, widths: np.ndarray, name: str) -> np.ndarray:
    out = [int(h) - int(w) for h, w in zip(hi.tolist(), widths.tolist())]
    if out and min(out) < INT64_MIN:
        raise CorruptSketchError(f"{name}: expected timestamps within int64, found {min(out)}")
    return np.array(out, dtype=np.int64)

