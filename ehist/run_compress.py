"""The greedy compression of a merged histogram, run on runs of equal buckets.

A sum's histogram puts each row's value into one timestamp: ``l`` buckets
of size 1, ``l`` of size 2, and so on, all at that row's time.  Merged and
put in ``merge_all``'s order, four sites' histograms of 25 flows hold
~1,700 buckets but ~200 runs of equal ``(size, hi, lo)``.
:func:`compress_runs` makes the decisions of
:func:`ehist.compress.compress` (and of ``ehist.compiled``'s compiled copy)
for a whole run at once, so a pass costs the runs, not the buckets.

Why a run can be decided at once.  A pass walks the buckets oldest first;
each bucket ``x`` is checked against the bucket just older than it, as the
pass has left it (merged or not), and merges into it when both have one
size, one of them changed in this pass or the last, and the error budget
holds at every cut the merged bucket straddles.  Inside a run of ``m``
equal buckets whose oldest is already placed, the checks are the pairs
(2nd, 1st), (4th, 3rd), ...: after a merge the next bucket meets a bucket
twice its size and is placed as it is.  Each such pair changes the
profiles by the same amounts (lower bound -1, width +1 at each cut the run
straddles), so once one pair is refused every later pair of the run is
refused too.  A run therefore leaves a pass as ``q`` merged buckets (the
oldest ``2q``) followed by ``m - 2q`` unchanged ones, ``q`` found by
checking the pairs in order until one is refused; for buckets of one
timestamp (``lo == hi``, most of a sum's) no cut is straddled and every
pair merges.  The first bucket of a run meets the end of the pass so far,
a bucket of any kind: that one check is made as the bucket loop makes it.

Every array is the caller's (no allocation: the compiled unions call this
once per key with scratch they hold across keys).  The function is plain
Python over numpy arrays, which numba compiles (``ehist.compiled``); the
tests also run it uncompiled against :func:`ehist.compress.compress`.
Measured on the day's sums of 100k sources at 4 sites (eps 0.01: ~1,700
buckets and ~200 runs per source): the compiled compression 0.43 s ->
0.29 s per 10k sources, the whole union 6.9 s -> 5.5 s, the same bytes.

Examples
--------
Four buckets of size 1 at time 9 and two at time 5 (runs ``(0, 9, 9) x 4``
and ``(0, 5, 5) x 2``), compressed with ``k = 2``:

>>> import numpy as np
>>> from ehist.compress import MARGIN, compress
>>> out = [np.empty(6, dtype=np.int64) for _ in range(3)]
>>> kept = compress_runs(np.array([0, 0]), np.array([9, 5]), np.array([9, 5]), np.array([4, 2]), 2,
...                      0, 2, 2 * (1 - MARGIN), *out, 0, np.zeros((RUN_ROWS, 14), dtype=np.int64))
>>> out[0][:kept].tolist(), out[1][:kept].tolist()   # sizes 4 and 2
([2, 1], [9, 5])
>>> hi = np.array([9, 9, 9, 9, 5, 5])
>>> compress(np.zeros(6, dtype=np.int8), hi, hi, 2, 0)[0].tolist()   # bucket by bucket: the same
[2, 1]
"""

from __future__ import annotations

import numpy as np

__all__ = ["compress_runs", "compiled", "RUN_ROWS"]

#: Rows of the scratch :func:`compress_runs` takes (``2 * buckets + 2`` columns).
RUN_ROWS = 20

# scratch rows: two run lists (a pass's input and output, rows 0-6 and 7-13: seven fields each), then the cuts'
# arrays (_DL and _DW also hold a check's candidate profile; _NEW the wide lower bounds, sorted)
_CUTS, _LOWER, _WIDTH, _DL, _DW, _NEW = 14, 15, 16, 17, 18, 19
_INT64_MAX = np.int64(2**63 - 1)


def _first_at_least(a, m, v):
    """The first position of sorted ``a[:m]`` holding ``v`` or more."""
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _push(r_e, r_hi, r_lo, r_cnt, r_ch, r_bl, r_bh, nb, e, hi, lo, cnt, ch, bl, bh):
    """Append ``cnt`` buckets to a run list (``nb`` runs long, one array
    per field), joining its last run when equal in every field; returns
    the new length."""
    if cnt <= 0:
        return nb
    if nb > 0:
        t = nb - 1
        if r_e[t] == e and r_hi[t] == hi and r_lo[t] == lo and r_ch[t] == ch and r_bl[t] == bl:
            r_cnt[t] += cnt
            return nb
    r_e[nb], r_hi[nb], r_lo[nb], r_cnt[nb], r_ch[nb], r_bl[nb], r_bh[nb] = e, hi, lo, cnt, ch, bl, bh
    return nb + 1


def compress_runs(re, rh, rl, rc, nr, cutoff, k, factor, out_e, out_hi, out_lo, at, w):
    """:func:`ehist.compress.compress` of the buckets given as runs.

    Parameters
    ----------
    re, rh, rl, rc : numpy.ndarray (int64)
        Runs ``0..nr - 1``, newest first: run ``r`` is ``rc[r]`` buckets of
        exponent ``re[r]``, newest timestamp ``rh[r]`` and lower bound
        ``rl[r]`` (the buckets, expanded, sorted as ``compress`` takes them).
    cutoff, k, factor
        As the compiled compression takes them (``factor``: ``2 * (1 -
        MARGIN)``).
    out_e, out_hi, out_lo : numpy.ndarray (int64)
        The surviving buckets are written from ``at``, newest first.
    w : numpy.ndarray (int64)
        Scratch of :data:`RUN_ROWS` rows and at least ``2 * buckets + 2``
        columns.

    Returns
    -------
    int
        How many buckets were written.

    Nothing is checked here: this is the loop compiled code calls once
    per key, on runs it has just built (``ehist.compiled``'s public
    wrappers check their input before that).  A direct caller keeps the
    contract above: runs newest first as ``compress`` takes buckets,
    counts of 1 or more, exponents in [0, 62], scratch wide enough.
    """
    n = 0
    for r in range(nr):
        n += rc[r]
    if n < 2:
        for r in range(nr):
            for _ in range(rc[r]):
                out_e[at], out_hi[at], out_lo[at] = re[r], rh[r], rl[r]
                at += 1
        return n
    top = rh[0]
    # the cuts: distinct hi, lo and the cutoff in [cutoff, top), ascending.  hi never rises: read backwards; a lo
    # below its run's hi (few) sorted apart; the three merged
    wide, cuts = w[_NEW], w[_CUTS]
    nw = 0
    for r in range(nr):
        if rl[r] != rh[r] and rl[r] >= cutoff:
            wide[nw] = rl[r]
            nw += 1
    wide[:nw].sort()
    m = 0
    q = nr - 1
    p = 0
    took_cutoff = False
    while q >= 0 or p < nw or not took_cutoff:
        c_hi = rh[q] if q >= 0 else _INT64_MAX
        c_w = wide[p] if p < nw else _INT64_MAX
        c = min(c_hi, c_w)
        if not took_cutoff and cutoff <= c:
            c = cutoff
            took_cutoff = True
        elif q >= 0 and (p >= nw or c_hi <= c_w):
            q -= 1
        else:
            p += 1
        if c >= cutoff and c < top and (m == 0 or cuts[m - 1] != c):
            cuts[m] = c
            m += 1
    # the pass's input: runs oldest first, each with its cut range [bl, bh); L and D at every cut from
    # difference arrays
    a_e, a_hi, a_lo, a_cnt, a_ch, a_bl, a_bh = w[0], w[1], w[2], w[3], w[4], w[5], w[6]
    b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh = w[7], w[8], w[9], w[10], w[11], w[12], w[13]
    dl, dw = w[_DL], w[_DW]
    dl[:m + 1] = 0
    dw[:m + 1] = 0
    na = 0
    z = 0  # cuts below the run's hi: hi never rises, walked from the oldest
    for r in range(nr - 1, -1, -1):
        s = np.int64(1) << re[r]
        c = rc[r]
        while z < m and cuts[z] < rh[r]:
            z += 1
        bl = z if rl[r] == rh[r] else _first_at_least(cuts, m, rl[r])
        dl[0] += c * s
        dl[bl] += c * (1 - s)
        dl[z] -= c
        dw[bl] += c * (s - 1)
        dw[z] -= c * (s - 1)
        na = _push(a_e, a_hi, a_lo, a_cnt, a_ch, a_bl, a_bh, na, re[r], rh[r], rl[r], c, 0, bl, z)
    lower, width = w[_LOWER], w[_WIDTH]
    run_l = np.int64(0)
    run_w = np.int64(0)
    for t in range(m):
        run_l += dl[t]
        run_w += dw[t]
        lower[t] = run_l
        width[t] = run_w
    changed = True
    sweep = 0
    while changed:
        changed = False
        sweep += 1
        nb = 0
        for r in range(na):
            e, hi_r, lo_r, rem, ch, bl, bh = a_e[r], a_hi[r], a_lo[r], a_cnt[r], a_ch[r], a_bl[r], a_bh[r]
            if nb > 0:  # the run's oldest bucket against the newest bucket placed
                y = nb - 1
                if b_e[y] == e and (ch >= sweep - 1 or b_ch[y] >= sweep - 1):
                    s = np.int64(1) << e
                    lo_y, hi_y = b_lo[y], b_hi[y]
                    lo_z = lo_r if lo_r < lo_y else lo_y
                    a = bl if bl < b_bl[y] else b_bl[y]
                    accept = True
                    for t in range(a, bh):  # the cuts the merged bucket straddles
                        c = cuts[t]
                        d_l = 1
                        d_w = 2 * s - 1
                        if c < lo_r:
                            d_l -= s
                        elif c < hi_r:
                            d_l -= 1
                            d_w -= s - 1
                        if c < lo_y:
                            d_l -= s
                        elif c < hi_y:
                            d_l -= 1
                            d_w -= s - 1
                        dl[t] = lower[t] + d_l
                        dw[t] = width[t] + d_w
                        if k * float(dw[t]) > factor * float(dl[t]):
                            accept = False
                            break
                    if accept:
                        for t in range(a, bh):
                            lower[t] = dl[t]
                            width[t] = dw[t]
                        b_cnt[y] -= 1  # the bucket placed is merged into the run's oldest
                        if b_cnt[y] == 0:
                            nb -= 1
                        nb = _push(b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh, nb, e + 1, hi_r, lo_z, 1, sweep, a, bh)
                        changed = True
                        rem -= 1
                        if rem == 0:
                            continue
            # one bucket placed as it is (after a merge the next meets twice its size), then the pairs
            nb = _push(b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh, nb, e, hi_r, lo_r, 1, ch, bl, bh)
            rem -= 1
            if rem == 0:
                continue
            both = rem + 1  # the bucket just placed and the rest of the run
            q = 0
            if ch >= sweep - 1:
                pairs = both // 2
                if bl == bh:
                    q = pairs
                else:
                    while q < pairs:  # each pair: lower -1, width +1 at every cut in [bl, bh)
                        fits = True
                        for t in range(bl, bh):
                            if k * float(width[t] + 1) > factor * float(lower[t] - 1):
                                fits = False
                                break
                        if not fits:
                            break
                        for t in range(bl, bh):
                            lower[t] -= 1
                            width[t] += 1
                        q += 1
            if q == 0:
                b_cnt[nb - 1] += rem
            else:
                b_cnt[nb - 1] -= 1
                if b_cnt[nb - 1] == 0:
                    nb -= 1
                nb = _push(b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh, nb, e + 1, hi_r, lo_r, q, sweep, bl, bh)
                nb = _push(b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh, nb, e, hi_r, lo_r, both - 2 * q, ch, bl, bh)
                changed = True
        a_e, a_hi, a_lo, a_cnt, a_ch, a_bl, a_bh, b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh = (
            b_e, b_hi, b_lo, b_cnt, b_ch, b_bl, b_bh, a_e, a_hi, a_lo, a_cnt, a_ch, a_bl, a_bh)
        na = nb
    # the survivors, newest first
    count = 0
    for r in range(na - 1, -1, -1):
        for _ in range(a_cnt[r]):
            out_e[at], out_hi[at], out_lo[at] = a_e[r], a_hi[r], a_lo[r]
            at += 1
        count += a_cnt[r]
    return count

def compiled(jit):
    """:func:`compress_runs` compiled with ``jit`` (``ehist.compiled.jit``),
    its helpers first: compiled code calls compiled functions only."""
    global _first_at_least, _push
    _first_at_least, _push = (jit(getattr(f, "py_func", f)) for f in (_first_at_least, _push))
    return jit(compress_runs)
