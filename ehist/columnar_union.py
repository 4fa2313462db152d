"""Unions of many groups of exponential histograms at once.

A stored sketch table rolled up to coarser keys (sites to global, hours to
days) unites each key's histograms: :meth:`ExponentialHistogram.merge_all`
takes the order-preserving union of their live buckets and re-compresses it
under the error budget (:func:`ehist.compress.compress`, a greedy pass over
adjacent equal-size buckets, oldest first, repeated until nothing merges).
That pass is sequential within a histogram, and in Python it costs 0.5-3 ms
per key: hours at a million keys.

:func:`union_column` runs the same passes for every group of a
:class:`~ehist.columnar.HistogramColumn` in lockstep: step ``s`` makes
every group's ``s``-th pair decision at once, with numpy over the groups
still compressing.  Each group's decisions, and so its buckets and bytes,
are those of ``merge_all`` over the group's histograms in order
(``tests/test_columnar_union.py`` compares them byte for byte).  The cost is
a few numpy passes per step over the active groups: the number of steps is
the largest group's number of pair checks (a few hundred for keys with tens
to hundreds of events), not the number of groups.

Examples
--------
>>> import numpy as np
>>> from ehist import ExponentialHistogram
>>> from ehist.columnar import HistogramColumn
>>> parts = [ExponentialHistogram(100, 0.1).update(np.arange(p, 300, 3)) for p in range(3)]
>>> col = HistogramColumn.from_histograms(parts + parts[:2])
>>> united = union_column(col, [0, 3])              # groups: histograms 0-2, 3-4
>>> united[0] == ExponentialHistogram.merge_all(parts)
True
>>> united[1] == ExponentialHistogram.merge_all(parts[:2])
True
"""

from __future__ import annotations

import numpy as np

from .validation import INT64_MAX, INT64_MIN, k_of_eps
from . import compiled
from .compress import MARGIN, compress
from .errors import SumOverflowError
from .segments import ranges as _ranges

__all__ = ["union_column", "union_bytes", "union_blobs"]


def union_column(column, group_starts):
    """Each group's union, as :meth:`ExponentialHistogram.merge_all` gives it.

    Parameters
    ----------
    column : HistogramColumn
        The histograms, each group's in the order ``merge_all`` would take
        them (the first one's parameters and flags lead, as there).
    group_starts : array of int
        Group ``i`` is histograms ``group_starts[i]`` to
        ``group_starts[i + 1]`` (the last up to the end); ``group_starts[0]
        == 0`` and no group is empty.

    Returns
    -------
    HistogramColumn
        One histogram per group.

    Raises
    ------
    SumOverflowError
        A group's merged total would pass int64 (as ``merge_all`` raises).
    """
    from .columnar import HistogramColumn

    n = len(column)
    starts = np.asarray(group_starts, dtype=np.int64)
    if starts.ndim != 1 or (n and (starts.size == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0)
                                   or starts[-1] >= n)):
        raise ValueError(f"group_starts must start at 0 and increase strictly below {n}, got {starts!r}")
    groups = starts.size
    if groups == 0:
        return HistogramColumn(column.window, column.eps, [0], [], [], [], [], [], [])
    if compiled.active():  # one compiled pass over the groups; totals near int64's edge below
        ok, exps, hi, lo, counts, newest, has, merged = compiled.union_groups(
            column.exps, column.hi, column.lo, column.offsets, column.newest, column.has_newest, column.merged,
            np.append(starts, n), column.window, k_of_eps(column.eps))
        if ok:
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return HistogramColumn(column.window, column.eps, offsets, exps.astype(np.int8), hi, lo, newest, has,
                                   merged)
    sizes = np.diff(np.append(starts, n))
    owner = np.repeat(np.arange(groups), sizes)  # each histogram's group
    first = np.zeros(n, dtype=bool)
    first[starts] = True
    # the newest of each group: its first histogram's and every other one's with a newest
    counts = np.diff(column.offsets)
    others = column.has_newest & ~first
    copy_first = np.bincount(owner[others], minlength=groups) == 0  # merge_all leaves the first as it is
    has = column.has_newest & (others | first)
    newest = np.full(groups, INT64_MIN, dtype=np.int64)
    np.maximum.at(newest, owner[has], column.newest[has])

    # each histogram's live prefix: buckets with hi > its group's cutoff (all when the cutoff is below int64)
    all_alive = newest < INT64_MIN + column.window
    cutoff = np.where(all_alive, INT64_MIN, newest - np.where(all_alive, 0, column.window))
    b_owner = np.repeat(np.arange(n), counts)  # each bucket's histogram
    b_group = owner[b_owner]
    live = all_alive[b_group] | (column.hi > cutoff[b_group])
    live &= ~copy_first[b_group]
    parts = np.bincount(owner, weights=np.bincount(b_owner[live], minlength=n) > 0, minlength=groups).astype(np.int64)

    # totals past int64, as merge_all refuses them (floats screen, exact ints decide)
    sizes_f = np.ldexp(1.0, column.exps[live].astype(np.int64))
    rough = np.bincount(b_group[live], weights=sizes_f, minlength=groups)
    for g in np.flatnonzero(rough >= 2.0 ** 62):
        total = sum(1 << int(e) for e in column.exps[live & (b_group == g)])
        if total > INT64_MAX:
            raise SumOverflowError(f"merged total would overflow int64 ({total} > 2**63 - 1)")

    # the groups' buckets: the first histogram's own (copy), one live prefix (kept as is), or a compressed union
    keep_first = copy_first[b_group] & first[b_owner]
    single = live & (parts[b_group] == 1)
    united = live & (parts[b_group] >= 2)
    pick = np.flatnonzero(keep_first | single)
    u_idx = np.flatnonzero(united)
    k = k_of_eps(column.eps)
    if compiled.active():  # each group sorted and compressed in one compiled loop (numba)
        c_exps, c_group, c_hi, c_lo = _compiled(column.exps[u_idx].astype(np.int64), column.hi[u_idx],
                                                column.lo[u_idx], b_group[u_idx], cutoff, k)
    else:
        u_idx = u_idx[_newest_first(column.hi[u_idx], column.lo[u_idx], b_group[u_idx])]
        c_exps, c_group, c_hi, c_lo = _compress(column.exps[u_idx].astype(np.int64), column.hi[u_idx],
                                                column.lo[u_idx], b_group[u_idx], cutoff, k)
    out_group = np.concatenate([b_group[pick], c_group])
    out_order = np.argsort(out_group, kind="stable")
    exps = np.concatenate([column.exps[pick].astype(np.int64), c_exps])[out_order].astype(np.int8)
    hi = np.concatenate([column.hi[pick], c_hi])[out_order]
    lo = np.concatenate([column.lo[pick], c_lo])[out_order]
    offsets = np.concatenate([[0], np.cumsum(np.bincount(out_group, minlength=groups))]).astype(np.int64)

    merged = parts >= 2
    one = parts == 1
    if one.any():  # the one part's own flag
        part_of = np.full(groups, -1, dtype=np.int64)
        part_of[b_group[single]] = b_owner[single]
        merged[one] = column.merged[part_of[one]]
    merged[copy_first] = column.merged[starts[copy_first]]
    out_newest = np.where(copy_first, column.newest[starts], newest)
    out_has = np.where(copy_first, column.has_newest[starts], True)
    return HistogramColumn(column.window, column.eps, offsets, exps, hi, lo, out_newest, out_has, merged)


def union_bytes(blobs, group_starts) -> list | None:
    """``union_column(HistogramColumn.from_bytes(blobs), group_starts).to_bytes()``
    group by group in one compiled pass, or None where that path must decide.

    A stored table's union reads every key's histograms and writes one per
    key: through a column, every bucket of the batch is written out and
    read back twice (a day's sums of 100k sources at 4 sites hold 171
    million buckets, 2.9 GB).  :func:`ehist.compiled.union_payloads`
    unites each group in scratch the size of one group (its ordered
    histograms read as runs of equal buckets, ~200 for a source's sums at
    four sites) and writes its bytes: the same bytes
    (``tests/test_union_table.py``).

    Parameters
    ----------
    blobs : list of bytes or Blobs
        Histograms, each group's in merge order.
    group_starts : array of int
        Where each group begins (the first 0, strictly increasing).

    Returns
    -------
    list of bytes, or None
        None without numba, for an empty batch or one with a null, mixed
        windows or eps, a head or checksum the checks refuse, a histogram
        only ``ExponentialHistogram.from_bytes`` decodes (it raises for
        corrupt bytes) or a total near int64's edge: the general path
        then answers, or raises, as it does.

    Examples
    --------
    >>> from ehist import ExponentialHistogram
    >>> parts = [ExponentialHistogram(100, 0.1).update(range(p, 90, 3), [7] * 30) for p in range(3)]
    >>> got = union_bytes([h.to_bytes() for h in parts], [0])
    >>> got is None or got == [ExponentialHistogram.merge_all(parts).to_bytes()]
    True
    """
    from . import eh_layout as L
    from .blobs import Blobs
    from .columnar import _CRC, sealed_blobs, sealed_heads
    from .serialization import MAGIC
    from .validation import check_eps, check_window

    blobs = Blobs.of(blobs)
    if not compiled.active() or not len(blobs) or not blobs.present.all():
        return None
    ok, buf, starts, lengths = sealed_heads(blobs, L.FAMILY, L.HEAD_BYTES + 1 + _CRC.size,
                                            L.FLAG_SHARED | L.FLAG_TICK | L.FLAG_MERGED)
    if not ok.all():
        return None
    w, eps, newest = L.head_fields(buf, starts)
    if not ((w == w[0]).all() and (eps == eps[0]).all()):
        return None
    try:
        window, e = check_window(int(w[0])), check_eps(float(eps[0]))
    except ValueError:
        return None
    k = k_of_eps(e)
    done, payload, byte_starts, byte_ends, flags, united_newest = compiled.union_payloads(
        buf, starts + L.HEAD_BYTES, starts + lengths - _CRC.size, L.flags_of(buf, starts),
        L.version_of(buf, starts) == L.FORMAT_VERSION, newest, np.append(group_starts, len(blobs)), window,
        (k + 1) // 2, k)
    if not done:
        return None
    head = L.HEAD.pack(MAGIC, L.FAMILY, L.FORMAT_VERSION, 0, window, e)
    return sealed_blobs(head, flags, united_newest, np.ones(flags.size, dtype=bool), payload, byte_starts, byte_ends)


def _compress(exps, hi, lo, group, cutoff, k: int):
    """:func:`ehist.compress.compress` of every group's buckets at once.

    ``exps``, ``hi``, ``lo``: the buckets, grouped (``group``,
    non-decreasing) and newest first within a group; ``cutoff``: each
    group's smallest legal cutoff (indexed by group number).  Returns
    ``(exps, group, hi, lo)`` of the surviving buckets, in order.

    A group's times and cuts are compared as one int64 key (the group's
    number above the time less its cutoff: one sort for all groups), so
    groups go in chunks that fit; a group whose span does not fit 62 bits
    (a cutoff at the int64 minimum) is compressed alone.
    """
    if exps.size == 0:
        return exps, group, hi, lo
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.append(starts[1:], exps.size)
    g_ids = group[starts]
    span = hi[starts] - cutoff[g_ids]  # every key of a group lies in (cutoff - 1, newest]
    fits = (cutoff[g_ids] > INT64_MIN) & (span < 2**61)
    bits = int(span[fits].max()).bit_length() + 1 if fits.any() else 0
    per_chunk = 1 << max(0, 62 - bits)
    out = []
    fast = np.flatnonzero(fits)
    for c in range(0, fast.size, per_chunk):
        chosen = fast[c:c + per_chunk]
        rows = _ranges(starts[chosen], ends[chosen])
        local = np.repeat(np.arange(chosen.size, dtype=np.int64), ends[chosen] - starts[chosen])
        e, g, h, lw = _lockstep(exps[rows], hi[rows], lo[rows], local, cutoff[g_ids[chosen]], k, bits)
        out.append((e, g_ids[chosen][g], h, lw))
    for i in np.flatnonzero(~fits):
        a, b = int(starts[i]), int(ends[i])
        e, h, lw = compress(exps[a:b].astype(np.int8), hi[a:b], lo[a:b], k, int(cutoff[g_ids[i]]))
        out.append((e.astype(np.int64), np.full(e.size, g_ids[i]), h, lw))
    e, g, h, lw = (np.concatenate(x) for x in zip(*out))
    order = np.argsort(g, kind="stable")
    return e[order], g[order], h[order], lw[order]


def _newest_first(hi, lo, group) -> np.ndarray:
    """The order of grouped buckets (``group`` non-decreasing, each group's
    histograms one after the other) that ``merge_all`` unites them in:
    newest first within a group; ties: larger lo, then the later histogram
    first (its reversed lexsort), by stable sorts from the last key to the
    first (~x orders as -x, without overflow)."""
    order = np.arange(group.size)[::-1]
    for by in (~lo, ~hi, group):
        order = order[np.argsort(by[order], kind="stable")]
    return order


def _compiled(exps, hi, lo, group, cutoff, k: int):
    """:func:`_compress` of buckets grouped but not yet in ``merge_all``'s
    order, by the compiled loop (:mod:`ehist.compiled`, which orders each
    group as :func:`_newest_first` does); groups of totals near int64's
    edge by :func:`ehist.compress.compress`."""
    if exps.size == 0:
        return exps, group, hi, lo
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    total = np.add.reduceat(np.ldexp(1.0, exps), starts)
    heavy = total >= compiled.TOTAL_LIMIT / 2
    if not heavy.any():
        e, h, lw, counts = compiled.compress_groups(exps, hi, lo, np.append(starts, exps.size), cutoff[group[starts]],
                                                    k, order=True)
        return e, np.repeat(group[starts], counts), h, lw
    light = ~heavy[np.cumsum(np.r_[True, group[1:] != group[:-1]]) - 1]
    out = [_compiled(exps[light], hi[light], lo[light], group[light], cutoff, k)]
    rows = np.flatnonzero(~light)
    rows = rows[_newest_first(hi[rows], lo[rows], group[rows])]
    ends = np.append(np.flatnonzero(group[rows][1:] != group[rows][:-1]) + 1, rows.size)
    for a, b in zip(np.r_[0, ends[:-1]].tolist(), ends.tolist()):
        r = rows[a:b]
        e, h, lw = compress(exps[r].astype(np.int8), hi[r], lo[r], k, int(cutoff[group[r[0]]]))
        out.append((e.astype(np.int64), np.full(e.size, group[r[0]]), h, lw))
    e, g, h, lw = (np.concatenate(x) for x in zip(*out))
    order = np.argsort(g, kind="stable")
    return e[order], g[order], h[order], lw[order]


def _lockstep(exps, hi, lo, group, cutoff, k: int, bits: int):
    """:func:`_compress` of groups whose times fit ``bits`` above their
    cutoff (``group`` numbered from 0 here).

    Sweep by sweep, as :func:`ehist.compress.compress` runs them: first
    every pair the sweep would check is tested at once against the
    profiles as the sweep starts.  A merge only lowers ``L`` and raises
    ``D``, so a pair refused then is refused when the sweep reaches it,
    unless one of its buckets changed by then (only the pair right after a
    merge, whose older bucket is the merged one).  What is left runs in
    lockstep: step ``s`` checks every group's ``s``-th remaining pair.
    """
    nb = exps.size
    size = np.left_shift(np.int64(1), exps)
    base = cutoff[group] - 1  # times at or below the cutoff all count as the cutoff - 1

    def key(v):
        return (group << bits) + (np.maximum(v, base) - base)

    item_lo, item_hi = key(lo), key(hi)
    cut_key, lower, width, c_lo, c_hi = _profiles(size, item_hi, item_lo, group, bits)
    idx = np.arange(nb, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.append(starts[1:], nb)
    prev = idx - 1
    prev[starts] = -1
    nxt = idx + 1
    nxt[ends - 1] = -1
    alive = np.ones(nb, dtype=bool)
    changed_in = np.zeros(nb, dtype=np.int64)
    tail = ends - 1
    factor = 2.0 * (1.0 - MARGIN)

    def check(x, y):
        """Whether merging each pair (x newer than y) keeps the budget at
        every cut it straddles, and the cuts' new L and D."""
        a = np.minimum(c_lo[x], c_lo[y])
        b = c_hi[x]
        t = _ranges(a, b)
        owner = np.repeat(np.arange(x.size), b - a)
        c = cut_key[t]
        s = np.left_shift(np.int64(1), exps[x])[owner]  # the pair's size (a merged bucket's has grown)
        dl = np.ones(t.size, dtype=np.int64)
        dw = 2 * s - 1
        for lo_b, hi_b in ((item_lo[x][owner], item_hi[x][owner]), (item_lo[y][owner], item_hi[y][owner])):
            below = c < lo_b
            inside = ~below & (c < hi_b)
            dl -= np.where(below, s, inside)
            dw -= np.where(inside, s - 1, 0)
        new_l = lower[t] + dl
        new_w = width[t] + dw
        bad = k * new_w.astype(np.float64) > factor * new_l.astype(np.float64)
        return np.bincount(owner[bad], minlength=x.size) == 0, t, owner, new_l, new_w, a

    todo = np.flatnonzero(ends - starts >= 2)
    next_pair = np.full(nb, -1, dtype=np.int64)
    sweep = 1
    while todo.size:
        # the pairs this sweep would check (equal sizes, a bucket changed in this sweep or the last), tested
        # now; each sweep touches only the buckets of the groups still changing
        rows = _ranges(starts[todo], ends[todo])
        q = rows[alive[rows] & (prev[rows] >= 0)]
        p = prev[q]
        recent = sweep - 1
        pairs = (exps[p] == exps[q]) & ((changed_in[p] >= recent) | (changed_in[q] >= recent))
        q, p = q[pairs], p[pairs]
        maybe = q[check(p, q)[0]]
        marker = np.full(rows.size, -1, dtype=np.int64)
        marker[np.searchsorted(rows, maybe)] = maybe
        # the nearest such pair at or newer than a bucket: its older one (or an earlier group's: not taken)
        next_pair[rows] = np.maximum.accumulate(marker)
        changed = np.zeros(starts.size, dtype=bool)
        gid = todo
        y = next_pair[tail[gid]]
        going = y >= starts[gid]
        gid, y = gid[going], y[going]
        while gid.size:
            x = prev[y]
            ok, t, owner, new_l, new_w, a = check(x, y)
            if ok.any():
                keep = ok[owner]
                lower[t[keep]] = new_l[keep]
                width[t[keep]] = new_w[keep]
                ax, ay = x[ok], y[ok]
                exps[ax] += 1
                lo[ax] = np.minimum(lo[ax], lo[ay])
                item_lo[ax] = np.minimum(item_lo[ax], item_lo[ay])
                c_lo[ax] = a[ok]
                changed_in[ax] = sweep
                after = nxt[ay]
                nxt[ax] = after
                has_after = after >= 0
                prev[after[has_after]] = ax[has_after]
                alive[ay] = False
                changed[gid[ok]] = True
                was_tail = tail[gid[ok]] == ay
                tail[gid[ok][was_tail]] = ax[was_tail]
            # next: after a merge, the pair ending at the merged bucket if its sizes match; else the
            # nearest pair that passed the test (its buckets unchanged since: all newer than x)
            px = prev[x]
            again = ok & (px >= 0)
            again[again] = exps[px[again]] == exps[x[again]]
            y = np.where(again, x, next_pair[np.where(ok, np.maximum(px, 0), x)])
            y[ok & (px < 0)] = -1
            going = y >= starts[gid]
            gid, y = gid[going], y[going]
        todo = np.flatnonzero(changed)
        sweep += 1
    keep = np.flatnonzero(alive)
    return exps[keep], group[keep], hi[keep], lo[keep]


def _profiles(size, item_hi, item_lo, group, bits):
    """Every group's cuts (its distinct ``lo``, ``hi`` and cutoff keys in
    ``[cutoff, newest)``), the lower bound ``L`` and width ``D`` there, as
    :func:`ehist.compress._profiles` computes them per histogram, and each
    bucket's ``bisect_left`` of its ``lo`` and ``hi`` among the cuts (flat
    positions).  One sort of every key serves all of them."""
    nb = size.size
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    groups = starts.size
    g_ids = np.arange(groups, dtype=np.int64)
    cutoff_key = (g_ids << bits) + 1  # keys count from the cutoff - 1 (0) within a group
    keys = np.concatenate([item_lo, item_hi, cutoff_key])
    order = np.argsort(keys)
    sk = keys[order]
    first = np.r_[True, sk[1:] != sk[:-1]]
    owner = sk >> bits
    is_cut = first & (sk >= cutoff_key[owner]) & (sk < item_hi[starts][owner])
    # per sorted entry: weights of lo items (mass, count, size - 1) and of hi items (count, size - 1)
    from_lo = order < nb
    from_hi = (order >= nb) & (order < 2 * nb)
    bucket = np.where(order < 2 * nb, order % max(nb, 1), 0)
    s_sorted = size[bucket]

    # each cut's last sorted entry of its value, and its group's last entry
    at_cut = (np.append(np.flatnonzero(first)[1:], sk.size) - 1)[np.cumsum(first)[is_cut] - 1]
    end_of_cut = (np.searchsorted(sk, (g_ids + 1) << bits, side="left") - 1)[owner[is_cut]]

    def above(weights):
        """At each cut: the sum of its group's weights on keys strictly above it."""
        run = np.cumsum(weights)
        return run[end_of_cut] - run[at_cut]

    count_hi = above(from_hi.astype(np.int64))
    mass_lo = above(np.where(from_lo, s_sorted, 0))
    count_lo = above(from_lo.astype(np.int64))
    width = above(np.where(from_hi, s_sorted - 1, 0)) - above(np.where(from_lo, s_sorted - 1, 0))
    # bisect_left among the cuts: the cuts strictly before each key's first occurrence
    cuts_before = np.cumsum(is_cut) - is_cut
    first_at = np.maximum.accumulate(np.where(first, np.arange(sk.size), 0))
    position = np.empty(keys.size, dtype=np.int64)
    position[order] = cuts_before[first_at]
    return (sk[is_cut], (mass_lo + count_hi - count_lo).astype(np.int64), width.astype(np.int64),
            position[:nb], position[nb:2 * nb])


def union_blobs(blobs, group_starts) -> list:
    """Each group's :meth:`ExponentialHistogram.merge_all`, as bytes, of
    histograms given as bytes (each group's in merge order), byte for byte.

    Groups whose histograms all keep their rows (:mod:`ehist.eh_rows`;
    histograms never updated aside) unite their rows: kept while at most
    ``k``, else the buckets they build; one such histogram alone keeps its
    bytes (the reader took them: they are what it writes).  In the other groups a histogram
    in the rows form enters as its buckets, and every group of buckets is
    united by :func:`union_bytes` (or :func:`union_column`).

    >>> from ehist import ExponentialHistogram
    >>> parts = [ExponentialHistogram.of_rows(100, 0.1, [p, p + 3], [700, 5]) for p in range(3)]
    >>> got = union_blobs([h.to_bytes() for h in parts], [0])
    >>> got == [ExponentialHistogram.merge_all(parts).to_bytes()], ExponentialHistogram.from_bytes(got[0]).rows[1]
    (True, array([700, 700, 700,   5,   5,   5]))
    """
    from . import eh_layout as L
    from .blobs import Blobs
    from .columnar import HistogramColumn, read_rows_blobs, rows_form

    blobs = Blobs.of(blobs)
    group_starts = np.asarray(group_starts, dtype=np.int64)
    n = len(blobs)
    rows = rows_form(blobs) if n and blobs.present.all() else np.zeros(n, dtype=bool)
    if not rows.any():
        return _union_of_buckets(blobs, group_starts)
    group_of = np.repeat(np.arange(group_starts.size, dtype=np.int64), np.diff(np.append(group_starts, n)))
    head = np.flatnonzero(~rows & (blobs.lengths > L.FLAGS_AT))
    empty = np.zeros(n, dtype=bool)  # histograms never updated (no newest): every union leaves them out
    empty[head] = (blobs.buf[blobs.starts[head] + L.FLAGS_AT] & L.FLAG_HAS_NEWEST) == 0
    r_idx = np.flatnonzero(rows)
    kept, newest, window, eps = read_rows_blobs(blobs.take(r_idx))
    rows_only = (np.bincount(group_of[~rows & ~empty], minlength=group_starts.size) == 0) \
        & (np.bincount(group_of[rows], minlength=group_starts.size) > 0)
    out = [None] * group_starts.size
    lone = rows_only & (np.bincount(group_of[rows], minlength=group_starts.size) == 1)
    alone = lone[group_of[r_idx]]  # a group's one histogram of rows (read and checked above): its bytes
    for grp, blob in zip(group_of[r_idx[alone]].tolist(), blobs.take(r_idx[alone]).tolist()):
        out[grp] = blob
    mine = rows_only[group_of[r_idx]] & ~alone
    if mine.any():  # the unions of rows
        sub = kept.take(np.flatnonzero(mine))
        g = group_of[r_idx[mine]]
        firsts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        g_newest = np.maximum.reduceat(newest[mine], firsts)
        if float(np.bincount(g, weights=sub.totals()).max()) >= 2.0 ** 62:  # near int64: the class decides
            for grp in np.unique(g).tolist():
                out[grp] = _merge_one(blobs, group_starts, grp)
        else:
            united = sub.united(firsts, g_newest, window)
            groups = g[firsts]
            big = united.counts > k_of_eps(eps)
            small_at = np.flatnonzero(~big)
            for grp, blob in zip(groups[small_at].tolist(), united.take(small_at).to_bytes(window, eps,
                                                                                            g_newest[small_at])):
                out[grp] = blob
            big_at = np.flatnonzero(big)
            if big_at.size:
                built = HistogramColumn.from_rows(united.take(big_at), window, eps, g_newest[big_at]).to_bytes()
                for grp, blob in zip(groups[big_at].tolist(), built):
                    out[grp] = blob
    rest = np.flatnonzero(~rows_only)
    if rest.size:  # the others: rows as their buckets, then the unions of buckets
        members = _ranges(group_starts[rest], np.append(group_starts, n)[rest + 1])
        parts = blobs.take(members).tolist()
        dense = np.flatnonzero(rows[members])
        if dense.size:
            at = np.searchsorted(r_idx, members[dense])
            for j, blob in zip(dense.tolist(), HistogramColumn.from_rows(kept.take(at), window, eps,
                                                                         newest[at]).to_bytes()):
                parts[j] = blob
        sizes = np.diff(np.append(group_starts, n))[rest]
        for grp, blob in zip(rest.tolist(), _union_of_buckets(Blobs.of(parts),
                                                              np.concatenate([[0], np.cumsum(sizes)[:-1]]))):
            out[grp] = blob
    return out


def _union_of_buckets(blobs, group_starts) -> list:
    """:func:`union_blobs` of histograms of buckets."""
    from .columnar import HistogramColumn

    united = union_bytes(blobs, group_starts)  # group by group, no column built; else the column's path
    if united is not None:
        return united
    return union_column(HistogramColumn.from_bytes(blobs), group_starts).to_bytes()


def _merge_one(blobs, group_starts, g: int) -> bytes:
    """Group ``g``'s union by the class (SumOverflowError past int64)."""
    from .exponential_histogram import ExponentialHistogram

    ends = np.append(group_starts[1:], len(blobs))
    return ExponentialHistogram.merge_all([ExponentialHistogram.from_bytes(blobs[i])
                                           for i in range(int(group_starts[g]), int(ends[g]))]).to_bytes()
