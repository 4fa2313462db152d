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

from bisect import bisect_left

import numpy as np

__all__ = ["compress"]

# Relative margin on the float comparison k * D <= 2 * L (conservative).
MARGIN = 1e-9


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


def compress(exps, hi, lo, k: int, cutoff: int, recheck_all: bool = False):
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
    recheck_all : bool
        Check every adjacent equal-size pair in every pass, refused before
        or not (the reference the default's skipping is tested against:
        same output).

    Returns
    -------
    (exps, hi, lo) as new arrays.

    The profiles ``L`` and ``D`` are computed once with numpy; each
    candidate merge then touches only the cutoffs inside the merged
    interval (a handful: median 3 in the benchmark), so the loop runs on
    Python scalars, where numpy's per-call overhead would dominate.
    """
    n = len(exps)
    if n < 2:
        return exps.copy(), hi.copy(), lo.copy()
    sizes = np.left_shift(np.int64(1), exps.astype(np.int64))
    top = int(hi[0])
    cuts_arr = np.unique(np.concatenate([lo, hi, np.array([cutoff], dtype=np.int64)]))
    cuts_arr = cuts_arr[(cuts_arr >= cutoff) & (cuts_arr < top)]
    lower_arr, width_arr = _profiles(sizes, lo, hi, cuts_arr)
    cuts = cuts_arr.tolist()
    lower = lower_arr.tolist()
    width = width_arr.tolist()
    factor = 2.0 * (1.0 - MARGIN)  # budget: k * width <= 2 * lower, conservatively

    e_l = exps.tolist()
    hi_l = hi.tolist()
    lo_l = lo.tolist()
    # A merge only lowers L and raises D (at every cut it touches), so a
    # pair refused once is refused again while both its buckets stay as
    # they were: a pass checks only pairs with a bucket changed in this
    # pass or the last one (the decisions, hence the output, are those of
    # checking every pair: for 4 histograms of sums merged, 2,954 checks
    # instead of 7,769, 1.5x faster).
    changed_in = [0] * len(e_l)  # the pass that last changed each bucket
    changed, sweep = True, 0
    while changed:
        changed = False
        sweep += 1
        i = len(e_l) - 2
        while i >= 0:
            if e_l[i] == e_l[i + 1] and (recheck_all or changed_in[i] >= sweep - 1 or changed_in[i + 1] >= sweep - 1):
                size = 1 << e_l[i]
                lo_x, hi_x, lo_y, hi_y = lo_l[i], hi_l[i], lo_l[i + 1], hi_l[i + 1]
                lo_z = lo_x if lo_x < lo_y else lo_y
                a = bisect_left(cuts, lo_z)
                b = bisect_left(cuts, hi_x)
                accept = True
                updates = []
                for t in range(a, b):  # lo_z <= c < hi_x: the merged bucket straddles
                    c = cuts[t]
                    dl = 1
                    dw = 2 * size - 1
                    if c < lo_x:
                        dl -= size
                    elif c < hi_x:
                        dl -= 1
                        dw -= size - 1
                    if c < lo_y:
                        dl -= size
                    elif c < hi_y:
                        dl -= 1
                        dw -= size - 1
                    new_l = lower[t] + dl
                    new_w = width[t] + dw
                    if k * float(new_w) > factor * float(new_l):
                        accept = False
                        break
                    updates.append((t, new_l, new_w))
                if accept:
                    for t, new_l, new_w in updates:
                        lower[t] = new_l
                        width[t] = new_w
                    e_l[i] += 1
                    lo_l[i] = lo_z
                    changed_in[i] = sweep
                    del e_l[i + 1], hi_l[i + 1], lo_l[i + 1], changed_in[i + 1]
                    changed = True
            i -= 1
    return (
        np.array(e_l, dtype=np.int8),
        np.array(hi_l, dtype=np.int64),
        np.array(lo_l, dtype=np.int64),
    )
