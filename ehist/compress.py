"""Compression of merged exponential histograms under an error budget.

A merged histogram is the order-preserving union of the buckets of several
histograms (ECM-sketches, Papapetrou, Garofalakis and Deligiannakis, VLDB
2012).  Each bucket ``b`` carries its size ``C_b = 2**e_b``, the exact
timestamp ``hi_b`` of its newest unit (one unit is known to sit there) and a
lower bound ``lo_b`` on the timestamps of its other units.  For a cutoff
``c`` (a unit is in the window iff its timestamp is ``> c``) that gives

* ``U(c) = sum(C_b for hi_b > c)``, an upper bound on the exact count,
* ``L(c) = sum(C_b for lo_b > c) + #{b : lo_b <= c < hi_b}``, a lower bound,
* ``D(c) = U(c) - L(c) = sum(C_b - 1 for lo_b <= c < hi_b)``.

If ``k * D(c) <= 2 * L(c)`` for every cutoff then the midpoint estimate
``(L + U) / 2`` is within ``D / 2 <= L / k <= eps * exact`` of the exact
count.  Every histogram built by insertion satisfies it (its single
straddling bucket has ``C - 1 <= S / l``), and the property is additive, so
the plain union of the buckets of two histograms satisfies it too.
:func:`compress` then merges adjacent equal-size buckets greedily, oldest
first, accepting a merge only when the budget still holds at every cutoff
it affects.  The guarantee therefore survives any number and order of
merges, at the price of a bucket count that is no longer the canonical one
(it is at most the sum of the inputs', and measured in the tests).
"""

from __future__ import annotations

import numpy as np

__all__ = ["compress", "budget_ok"]

# Relative margin on the float comparison k * D <= 2 * L (see budget_ok).
_MARGIN = 1e-9


def _per_bucket(size, lo, hi, cuts):
    """Lower-bound and width contributions of one bucket at each cutoff."""
    straddle = (lo <= cuts) & (cuts < hi)
    lower = np.where(cuts < lo, size, np.where(straddle, 1, 0))
    width = np.where(straddle, size - 1, 0)
    return lower, width


def _profiles(sizes, lo, hi, cuts):
    """L and D at every cutoff in ``cuts`` (vectorized over buckets)."""
    order_hi = np.sort(hi)
    n = len(sizes)
    count_hi = n - np.searchsorted(order_hi, cuts, side="right")
    lo_order = np.argsort(lo, kind="stable")
    lo_sorted = lo[lo_order]
    sizes_by_lo = sizes[lo_order]
    # sum of sizes with lo > c: suffix sums over ascending lo
    suffix = np.concatenate([np.cumsum(sizes_by_lo[::-1])[::-1], [0]])
    first_gt = np.searchsorted(lo_sorted, cuts, side="right")
    mass_lo = suffix[first_gt]
    count_lo = n - first_gt
    lower = mass_lo + count_hi - count_lo
    # D = sum(C - 1) over straddlers = sum_{hi>c}(C-1) - sum_{lo>c}(C-1)
    hi_order = np.argsort(hi, kind="stable")
    suffix_hi = np.concatenate([np.cumsum((sizes[hi_order] - 1)[::-1])[::-1], [0]])
    first_gt_hi = np.searchsorted(hi[hi_order], cuts, side="right")
    suffix_lo1 = np.concatenate([np.cumsum((sizes_by_lo - 1)[::-1])[::-1], [0]])
    width = suffix_hi[first_gt_hi] - suffix_lo1[first_gt]
    return lower.astype(np.int64), width.astype(np.int64)


def budget_ok(k: int, lower, width) -> np.ndarray:
    """``k * width <= 2 * lower`` elementwise, conservatively in float."""
    return k * np.asarray(width, dtype=np.float64) <= 2.0 * np.asarray(
        lower, dtype=np.float64
    ) * (1.0 - _MARGIN)


def compress(exps, hi, lo, k: int, cutoff: int):
    """Greedily merge adjacent equal-size buckets within the error budget.

    Parameters
    ----------
    exps, hi, lo : numpy.ndarray
        Buckets sorted newest first (``hi`` non-increasing).
    k : int
        ``ceil(1 / eps)``.
    cutoff : int
        The smallest cutoff any legal query can ask for
        (``newest - window``); cutoffs below it are not constrained.

    Returns
    -------
    (exps, hi, lo) as new arrays.
    """
    n = len(exps)
    if n < 2:
        return exps.copy(), hi.copy(), lo.copy()
    sizes = np.left_shift(np.int64(1), exps.astype(np.int64))
    top = int(hi[0])
    cuts = np.unique(np.concatenate([lo, hi, np.array([cutoff], dtype=np.int64)]))
    cuts = cuts[(cuts >= cutoff) & (cuts < top)]
    lower, width = _profiles(sizes, lo, hi, cuts)

    e_l = exps.tolist()
    hi_l = hi.tolist()
    lo_l = lo.tolist()
    changed = True
    while changed:
        changed = False
        i = len(e_l) - 2
        while i >= 0:
            if e_l[i] == e_l[i + 1]:
                size = 1 << e_l[i]
                lo_z = min(lo_l[i], lo_l[i + 1])
                hi_z = hi_l[i]
                a = int(np.searchsorted(cuts, lo_z, side="left"))
                b = int(np.searchsorted(cuts, hi_z, side="left"))
                accept = True
                if a < b:
                    c = cuts[a:b]
                    lz, wz = _per_bucket(2 * size, lo_z, hi_z, c)
                    lx, wx = _per_bucket(size, lo_l[i], hi_l[i], c)
                    ly, wy = _per_bucket(size, lo_l[i + 1], hi_l[i + 1], c)
                    new_lower = lower[a:b] + (lz - lx - ly)
                    new_width = width[a:b] + (wz - wx - wy)
                    accept = bool(np.all(budget_ok(k, new_lower, new_width)))
                    if accept:
                        lower[a:b] = new_lower
                        width[a:b] = new_width
                if accept:
                    e_l[i] += 1
                    lo_l[i] = lo_z
                    del e_l[i + 1], hi_l[i + 1], lo_l[i + 1]
                    changed = True
            i -= 1
    return (
        np.array(e_l, dtype=np.int8),
        np.array(hi_l, dtype=np.int64),
        np.array(lo_l, dtype=np.int64),
    )
