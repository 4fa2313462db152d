"""Per-row sliding-window answers for one key's rows, in one vectorized pass.

These are the engines of :func:`udaf.sliding_over` and need only numpy:
given one key's rows sorted by time, each function answers, for every row
``i``, over its frame: the rows ``j`` with ``t[i] - window < t[j] <= t[i]``
(the window's convention everywhere in this project; the SQL frame
``RANGE BETWEEN window - 1 PRECEDING AND CURRENT ROW`` on integral time,
peers of the current row included).

When a key's rows are all at hand, exact per-row counts, sums and distinct
counts cost one sort and a few ``searchsorted`` calls, less than querying
a synopsis per row, so they are exact here.  Spark's built-in frame
re-aggregates the whole frame for every row (its aggregates cannot
retract), ``O(rows x frame)``; these are ``O(rows log rows)``.  The L_p
norm for p = 1 or 2 and integral values is exact too
(:func:`frame_lp_norms_exact`: each row's change of ``sum |f|^p`` as it
enters and leaves the frames); otherwise it comes from the p-stable
sketch, whose linearity makes each frame's sketch a difference of two
prefix sketches.

Examples
--------
>>> import numpy as np
>>> t = np.array([1, 2, 2, 5, 9])
>>> lo, hi = frame_bounds(t, window=4)
>>> frame_counts(lo, hi).tolist()
[1, 3, 3, 3, 1]
>>> frame_sums(np.array([10, 1, 2, 5, 7]), lo, hi).tolist()
[10, 13, 13, 8, 7]
>>> frame_distinct(np.array([7, 7, 8, 7, 7]), lo, hi).tolist()
[1, 2, 2, 2, 1]
"""

from __future__ import annotations

import numpy as np

from ehist.validation import check_window
from lp_norms.stable import check_p, median_abs_stable, stable_variates
from lp_norms.stable_sketch import index_hashes

from .exact import sum_past_int64

__all__ = ["frame_bounds", "frame_bounds_runs", "frame_counts", "frame_sums", "frame_distinct", "frame_lp_norms",
           "frame_lp_norms_exact"]

# rows of p-stable contributions generated at once (x sketch rows, float64)
_BLOCK_CELLS = 1 << 21


def frame_bounds(t: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's frame as ``[lo, hi)`` row positions of the sorted ``t``.

    ``hi`` includes the row's peers (equal timestamps), as SQL's ``RANGE``
    frames do.  Both arrays are non-decreasing.
    """
    t = np.asarray(t, dtype=np.int64)
    window = check_window(window)
    if t.size > 1 and np.any(t[1:] < t[:-1]):
        raise ValueError("timestamps must be sorted (non-decreasing)")
    # t - window can only overflow below INT64_MIN (it wraps above t): then
    # the frame starts at the first row
    with np.errstate(over="ignore"):
        start = t - np.int64(window)
    lo = np.where(start > t, 0, np.searchsorted(t, start, side="right"))
    hi = np.searchsorted(t, t, side="right")
    return lo, hi


def frame_bounds_runs(t: np.ndarray, starts: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`frame_bounds` of several keys at once: rows ``starts[r]`` to
    ``starts[r + 1]`` are key ``r``'s, each run sorted by time; no frame
    crosses a run.  Every engine here then works on the concatenation
    (prefix sums and previous occurrences never reach into a frame from
    another run), so many small keys cost one vectorized pass.

    >>> t = np.array([5, 6, 9, 1, 2])            # key 0: 5 6 9, key 1: 1 2
    >>> lo, hi = frame_bounds_runs(t, np.array([0, 3]), window=4)
    >>> frame_counts(lo, hi).tolist()
    [1, 2, 2, 1, 2]
    """
    t = np.asarray(t, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    window = check_window(window)
    n = t.size
    if starts.size <= 1:
        return frame_bounds(t, window)
    ends = np.append(starts[1:], n)
    first, last = t[starts], t[ends - 1]
    # shift each run so that it begins window + 1 after the previous one
    # ends: the frames stay the same and never reach across; when the
    # shifted times would not fit int64, one run at a time instead
    span = last.astype(np.float64) - first.astype(np.float64) + float(window) + 1.0
    if float(span.sum()) < 2.0**62:
        width = last - first + np.int64(window) + 1
        offset = np.zeros(starts.size, dtype=np.int64)
        np.cumsum(width[:-1], out=offset[1:])
        run = np.repeat(np.arange(starts.size), ends - starts)
        return frame_bounds(t - first[run] + offset[run], window)
    lo, hi = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        a, b = frame_bounds(t[s:e], window)
        lo[s:e], hi[s:e] = a + s, b + s
    return lo, hi


def frame_counts(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Rows in each frame (``count(*)``)."""
    return (np.asarray(hi) - np.asarray(lo)).astype(np.int64)


def frame_sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact sum of ``values`` (int64) in each frame, by prefix sums.

    Integer prefix sums are exact (no cancellation); they overflow only when
    the key's total exceeds int64, which is checked.
    """
    v = np.asarray(values, dtype=np.int64)
    if np.any(v < 0):
        raise ValueError("values must be non-negative")
    prefix = np.zeros(v.size + 1, dtype=np.int64)
    np.cumsum(v, out=prefix[1:])
    if np.any(prefix[1:] < prefix[:-1]):  # non-negative terms: a wrap shows as a decrease
        raise sum_past_int64()
    return prefix[hi] - prefix[lo]


def frame_distinct(codes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact number of distinct ``codes`` (integer labels) in each frame.

    Row ``j`` is the first of its code in frame ``[lo_i, hi_i)`` iff
    ``lo_i <= j < hi_i`` and its previous occurrence ``prev_j < lo_i``.  As
    ``lo`` and ``hi`` are non-decreasing, the rows ``i`` with ``j < hi_i``
    and ``prev_j < lo_i`` form a suffix starting at ``s_j``; so the number
    of rows ``j < hi_i`` with ``prev_j < lo_i`` is a cumulative count of the
    ``s_j``, and every ``j < lo_i`` is among them (``prev_j < j``): subtract
    ``lo_i``.  One stable sort, two ``searchsorted``, one ``bincount``.
    """
    codes = np.asarray(codes)
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    n = codes.size
    if n == 0:
        return np.zeros(lo.size, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    prev = np.full(n, -1, dtype=np.int64)
    same = sorted_codes[1:] == sorted_codes[:-1]
    prev[order[1:][same]] = order[:-1][same]
    j = np.arange(n, dtype=np.int64)
    first_hi = np.searchsorted(hi, j, side="right")     # first i with hi_i > j
    first_lo = np.searchsorted(lo, prev, side="right")  # first i with lo_i > prev_j
    s = np.maximum(first_hi, first_lo)
    starts = np.bincount(s, minlength=lo.size + 1)[: lo.size]
    return np.cumsum(starts) - lo


class _PrefixSketch:
    """Prefix sums of the rows' p-stable contributions, read at positions
    that never decrease, generated block by block (bounded memory)."""

    def __init__(self, p, seed, rows, hashes, values):
        self._p, self._seed, self._rows = p, seed, rows
        self._hashes, self._values = hashes, values
        self._pos = 0
        self._acc = np.zeros(rows, dtype=np.float64)
        self._block = max(1, _BLOCK_CELLS // rows)

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Sketch of rows ``[0, q)`` for each ``q`` of ``positions``."""
        out = np.empty((positions.size, self._rows), dtype=np.float64)
        i = 0
        while i < positions.size:
            end = int(min(positions[-1], self._pos + self._block))
            j = i + int(np.searchsorted(positions[i:], end, side="right"))
            if end > self._pos:
                x = stable_variates(self._p, self._seed, self._rows, self._hashes[self._pos:end])
                running = np.cumsum((x * self._values[self._pos:end]).T, axis=0)
                running += self._acc
                q = positions[i:j] - self._pos
                out[i:j] = np.where((q == 0)[:, None], self._acc, running[np.maximum(q - 1, 0)])
                self._acc = running[-1].copy()
                self._pos = end
            else:
                out[i:j] = self._acc
            i = j
        return out


def frame_lp_norms_exact(p: float, codes: np.ndarray, values: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray) -> np.ndarray | None:
    """Exact L_p norm, ``p`` 1 or 2, of each frame's frequency vector
    (``codes``: integer labels of the items; ``values``: non-negative
    integral weights; ``lo``, ``hi``: each answered row's frame, as
    positions in them), what the native plan computes
    (:meth:`udaf.LpNorm.native_per_row`); None for another ``p``,
    fractional values, or totals whose ``sum f^2`` could pass int64 (the
    sketch answers those).

    Row ``j`` enters the frames at the first row ``i`` with ``hi_i > j``
    and leaves at the first with ``lo_i > j``; within an item, in that
    order, a running sum gives ``f`` after each change, and each change of
    ``|f|^p`` is summed over the rows: ``sum |f|^p`` of every frame, in
    int64 (whose nearest double is the native plan's).

    >>> lo, hi = frame_bounds(np.array([1, 2, 2, 5, 9]), window=4)
    >>> frame_lp_norms_exact(2.0, np.array([7, 7, 8, 7, 7]), np.array([3, 1, 2, 4, 1]), lo, hi).tolist()
    [3.0, 4.47213595499958, 4.47213595499958, 5.385164807134504, 1.0]
    """
    if p not in (1.0, 2.0):
        return None
    v = np.asarray(values, dtype=np.float64)
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    m = lo.size
    if not (np.all(np.isfinite(v)) and np.all(v >= 0) and np.all(v == np.floor(v))) or \
            float(v.sum()) ** p >= 2.0 ** 62:
        return None
    v = v.astype(np.int64)
    rows = np.arange(v.size, dtype=np.int64)
    # each entry's change at the first answered row whose frame holds it (+v)
    # and the first whose frame has passed it (-v; m: none)
    step = np.concatenate([np.searchsorted(hi, rows, side="right"), np.searchsorted(lo, rows, side="right")])
    delta = np.concatenate([v, -v])
    code = np.concatenate([np.asarray(codes), np.asarray(codes)])
    order = np.lexsort((step, code))
    code, step, delta = code[order], step[order], delta[order]
    f = np.cumsum(delta)
    first = np.r_[True, code[1:] != code[:-1]]
    starts = np.flatnonzero(first)
    f -= np.repeat(np.r_[0, f[starts[1:] - 1]], np.diff(np.r_[starts, f.size]))  # each item's own running sum
    before = f - delta
    change = (f - before) if p == 1.0 else (f * f - before * before)
    total = np.zeros(m + 1, dtype=np.int64)  # each row's sum of the changes at it (exact int64)
    np.add.at(total, step, change)
    out = np.cumsum(total)[:m].astype(np.float64)
    return out if p == 1.0 else np.sqrt(out)


def frame_lp_norms(p: float, rows: int, seed: int, indices, values, lo: np.ndarray, hi: np.ndarray,
                   chunk: int = 4096) -> np.ndarray:
    """Estimated L_p norm of the vector ``index -> sum(value)`` of each frame.

    Each frame's sketch is the difference of the prefix sketches at ``hi``
    and ``lo`` (the sketch is linear), so every row costs ``rows`` variates
    and a median, whatever the frame's length; each estimate is within
    ``eps`` of the norm with probability ``1 - delta`` when ``rows =
    rows_for(p, eps, delta)``.  Same variables (``seed``) as
    :class:`lp_norms.StableSketch`.
    """
    p = check_p(p)
    hashes = index_hashes(indices, seed)
    vals = np.asarray(values, dtype=np.float64)
    if vals.shape != hashes.shape:
        raise ValueError(f"values has {vals.size} entries, indices {hashes.size}")
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    head = _PrefixSketch(p, seed, rows, hashes, vals)
    tail = _PrefixSketch(p, seed, rows, hashes, vals)
    med = median_abs_stable(p)
    out = np.empty(lo.size, dtype=np.float64)
    for a in range(0, lo.size, chunk):
        b = min(lo.size, a + chunk)
        y = head.at(hi[a:b]) - tail.at(lo[a:b])
        out[a:b] = np.median(np.abs(y), axis=1) / med
    return out
