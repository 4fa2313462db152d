"""Compiled loops for the union of many keys' histograms (numba, optional).

The greedy compression of a merged histogram (:func:`ehist.compress.compress`)
is sequential within a histogram: each pair decision depends on the ones
before it.  :func:`ehist.columnar_union.union_column` runs it for every group
of a column at once, in numpy, step by step in lockstep; that costs a few
numpy passes per step, so a key with many buckets (a sum's histogram holds
~``l log2(total / l)``: 1,700 buckets for four sites' 25 flows) costs
milliseconds.  Here the same decisions run as one compiled loop over the
groups, a few nanoseconds per bucket and cut.

numba is the tool for this loop: the algorithm is scalar, data-dependent
control flow that numpy can only express in lockstep, and numba compiles the
Python below (no build step at install, wheels for every platform pandas
and Spark support).  It is optional: ``pip install "ehist[fast]"`` (the
``spark`` extra includes it); without it :data:`AVAILABLE` is False and the
numpy lockstep runs.  Both give the bytes of
:meth:`ExponentialHistogram.merge_all` (``tests/test_union_table.py``
checks each against it).  Compiled code is cached beside the module (or in
numba's user cache) after the first call in an environment.
"""

from __future__ import annotations

import os

import numpy as np

from .compress import MARGIN

__all__ = ["AVAILABLE", "compress_groups"]

try:  # optional: ehist[fast]
    if os.environ.get("EHIST_NO_NUMBA"):
        raise ImportError("EHIST_NO_NUMBA is set")
    import numba
except ImportError:  # pragma: no cover - depends on the environment
    numba = None

#: Whether the compiled union runs (numba importable and not disabled by the
#: ``EHIST_NO_NUMBA`` environment variable).
AVAILABLE = numba is not None

#: Groups whose total is this large or more are left to the exact Python
#: compression (the compiled loop's int64 sums of sizes stay below 2**63).
TOTAL_LIMIT = 2**61


def compress_groups(exps, hi, lo, group_starts, cutoff, k: int, order: bool = False):
    """:func:`ehist.compress.compress` of every group, compiled.

    Parameters
    ----------
    exps, hi, lo : numpy.ndarray
        Every group's merged buckets, newest first within a group (int64);
        with ``order``, each group's histograms one after the other, to be
        put in ``merge_all``'s order first (newest first; ties: larger lo,
        then the later histogram first).
    group_starts : numpy.ndarray
        Group ``g`` is buckets ``group_starts[g]:group_starts[g + 1]``
        (``groups + 1`` entries).
    cutoff : numpy.ndarray
        Each group's smallest legal cutoff.
    k : int
        ``ceil(1 / eps)``.
    order : bool
        Order each group's buckets first (see above).

    Returns
    -------
    (exps, hi, lo, counts): the surviving buckets of every group in order,
    and how many each group kept.  Every group's total must be below
    :data:`TOTAL_LIMIT`.
    """
    return _kernel()(np.ascontiguousarray(exps, dtype=np.int64), np.ascontiguousarray(hi, dtype=np.int64),
                     np.ascontiguousarray(lo, dtype=np.int64), np.ascontiguousarray(group_starts, dtype=np.int64),
                     np.ascontiguousarray(cutoff, dtype=np.int64), int(k), 2.0 * (1.0 - MARGIN), bool(order))


_COMPILED = None
_one = None  # the compiled _compress_one, which the compiled _compress_all calls


def _kernel():
    global _COMPILED, _one
    if _COMPILED is None:
        if numba is None:
            raise RuntimeError("the compiled union needs numba: pip install \"ehist[fast]\"")
        jit = numba.njit(cache=True, nogil=True)
        _one = jit(_compress_one)
        _COMPILED = jit(_compress_all)
    return _COMPILED


def _compress_one(exps, hi, lo, cutoff, k, factor, out_e, out_hi, out_lo, at):
    """One group's compression (the steps of ehist.compress.compress, on
    arrays: a linked list for the deletions); writes the survivors at
    ``at`` of the outputs and returns how many."""
    n = exps.size
    if n < 2:
        for i in range(n):
            out_e[at + i], out_hi[at + i], out_lo[at + i] = exps[i], hi[i], lo[i]
        return n
    top = hi[0]
    # the cuts: distinct lo, hi and the cutoff in [cutoff, top)
    every = np.empty(2 * n + 1, dtype=np.int64)
    every[:n] = lo
    every[n:2 * n] = hi
    every[2 * n] = cutoff
    every.sort()
    cuts = np.empty(2 * n + 1, dtype=np.int64)
    m = 0
    for j in range(every.size):
        c = every[j]
        if c >= cutoff and c < top and (m == 0 or cuts[m - 1] != c):
            cuts[m] = c
            m += 1
    cuts = cuts[:m]
    # L and D at every cut: sums over buckets with lo > c and hi > c
    size = np.empty(n, dtype=np.int64)
    for i in range(n):
        size[i] = np.int64(1) << exps[i]
    lo_sorted = np.argsort(lo)
    hi_sorted = np.argsort(hi)
    mass_lo = 0
    count_lo = 0
    less_lo = 0
    for i in range(n):
        mass_lo += size[i]
    count_lo = n
    less_lo = mass_lo - n  # sum of (C - 1) over lo > c
    count_hi = n
    less_hi = mass_lo - n  # sum of (C - 1) over hi > c
    lower = np.empty(m, dtype=np.int64)
    width = np.empty(m, dtype=np.int64)
    p = 0
    q = 0
    for t in range(m):
        c = cuts[t]
        while p < n and lo[lo_sorted[p]] <= c:
            b = lo_sorted[p]
            mass_lo -= size[b]
            count_lo -= 1
            less_lo -= size[b] - 1
            p += 1
        while q < n and hi[hi_sorted[q]] <= c:
            b = hi_sorted[q]
            count_hi -= 1
            less_hi -= size[b] - 1
            q += 1
        lower[t] = mass_lo + count_hi - count_lo
        width[t] = less_hi - less_lo
    # the greedy passes, oldest pair first, until nothing merges
    e = exps.copy()
    blo = lo.copy()
    nxt = np.empty(n, dtype=np.int64)
    prv = np.empty(n, dtype=np.int64)
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    nxt[n - 1] = -1
    changed_in = np.zeros(n, dtype=np.int64)
    new_l = np.empty(m, dtype=np.int64)
    new_w = np.empty(m, dtype=np.int64)
    oldest = n - 1
    changed = True
    sweep = 0
    while changed:
        changed = False
        sweep += 1
        x = prv[oldest]
        while x >= 0:
            y = nxt[x]
            if e[x] == e[y] and (changed_in[x] >= sweep - 1 or changed_in[y] >= sweep - 1):
                s = np.int64(1) << e[x]
                lo_x, hi_x, lo_y, hi_y = blo[x], hi[x], blo[y], hi[y]
                lo_z = lo_x if lo_x < lo_y else lo_y
                a = np.searchsorted(cuts, lo_z)
                b = np.searchsorted(cuts, hi_x)
                accept = True
                for t in range(a, b):  # lo_z <= c < hi_x: the merged bucket straddles
                    c = cuts[t]
                    dl = 1
                    dw = 2 * s - 1
                    if c < lo_x:
                        dl -= s
                    elif c < hi_x:
                        dl -= 1
                        dw -= s - 1
                    if c < lo_y:
                        dl -= s
                    elif c < hi_y:
                        dl -= 1
                        dw -= s - 1
                    new_l[t] = lower[t] + dl
                    new_w[t] = width[t] + dw
                    if k * float(new_w[t]) > factor * float(new_l[t]):
                        accept = False
                        break
                if accept:
                    for t in range(a, b):
                        lower[t] = new_l[t]
                        width[t] = new_w[t]
                    e[x] += 1
                    blo[x] = lo_z
                    changed_in[x] = sweep
                    after = nxt[y]
                    nxt[x] = after
                    if after >= 0:
                        prv[after] = x
                    else:
                        oldest = x
                    changed = True
            x = prv[x]
    count = 0
    i = 0
    while i >= 0:
        out_e[at + count], out_hi[at + count], out_lo[at + count] = e[i], hi[i], blo[i]
        count += 1
        i = nxt[i]
    return count


def _compress_all(exps, hi, lo, starts, cutoff, k, factor, order):
    groups = starts.size - 1
    out_e = np.empty(exps.size, dtype=np.int64)
    out_hi = np.empty(exps.size, dtype=np.int64)
    out_lo = np.empty(exps.size, dtype=np.int64)
    counts = np.empty(groups, dtype=np.int64)
    at = 0
    for g in range(groups):
        a, b = starts[g], starts[g + 1]
        if order:  # merge_all's order: stable sorts by the last key first (~x orders as -x)
            idx = np.arange(b - a - 1, -1, -1)
            idx = idx[np.argsort(~lo[a:b][idx], kind="mergesort")]
            idx = idx[np.argsort(~hi[a:b][idx], kind="mergesort")]
            kept = _one(exps[a:b][idx], hi[a:b][idx], lo[a:b][idx], cutoff[g], k, factor, out_e, out_hi, out_lo, at)
        else:
            kept = _one(exps[a:b], hi[a:b], lo[a:b], cutoff[g], k, factor, out_e, out_hi, out_lo, at)
        counts[g] = kept
        at += kept
    return out_e[:at], out_hi[:at], out_lo[:at], counts
