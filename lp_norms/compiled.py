"""Compiled loops over many stored sliding L_p sketches (numba, optional).

A :class:`~lp_norms.SlidingLpNorm` is a few dozen buckets of ``rows``
float64 sums each.  One at a time, a key's union (``merge_all``) costs
milliseconds: each of the ~60 bucket decisions of a re-bucketing computes a
median through half a dozen numpy calls, 5 ms per key for four sites' 25
flows at eps 0.1 (measured).  Here the same decisions run in one compiled
loop over the groups, with the same float operations in the same order, so
the bytes are those of ``merge_all``:

* :func:`decode` reads every sketch's bucket times with the checks of
  ``SlidingLpNorm.from_bytes``;
* :func:`union` is ``SlidingLpNorm.merge_all`` of every group (the
  sketches united one after the other, each union re-bucketed by the
  greedy rule of ``SlidingLpNorm._rebuild``), and :func:`build` the same
  rule over fresh sketches' timestamps;
* :func:`window_estimates` composes each sketch's buckets inside a window,
  or each group's sketches' (``LpNorm.union``), and estimates the norm;
* :func:`payloads` writes the bytes after each sketch's head.

The medians are numpy's (the mean of the two middle values of an even
count) and the powers the C library's ``pow``, as numpy calls it.  Used by
:class:`lp_norms.columnar.LpColumn` when :func:`ehist.compiled.active`.
"""

from __future__ import annotations

import numpy as np

from ehist import compiled
from ehist.segments import groups_checked  # shared with the other families' columns
from ehist.validation import INT64_MIN

__all__ = ["decode", "union", "build", "window_estimates", "payloads", "groups_checked"]


def decode(buf, starts, ends, newest, rows: int, window: int):
    """Read the bytes ``buf[starts[i]:ends[i]]`` of stored sliding L_p
    sketches after their newest time, before the CRC (the head, checksum
    and parameters checked by the caller), given their newest times.

    A sketch is accepted only when every check ``SlidingLpNorm.from_bytes``
    makes of these bytes passes: the bucket count, deltas within the
    window, times within int64, interval widths, exactly the sketch's
    sums left, the oldest bucket live and every sum finite.

    Returns
    -------
    (accepted mask, buckets per accepted sketch, hi, lo, sums at): the
    buckets' newest and oldest times of the accepted sketches in order,
    and where each accepted sketch's float64 sums start in ``buf``.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> from lp_norms import SlidingLpNorm
    >>> s = SlidingLpNorm(1.0, 100, rows=3).update([5, 9], [1, 2])._as_buckets()   # buckets (version 1)
    >>> b = np.frombuffer(s.to_bytes(), dtype=np.uint8)
    >>> ok, n, hi, lo, at = decode(b, [58], [b.size - 4], [9], 3, 100)
    >>> ok.tolist(), n.tolist(), hi.tolist() == s._hi.tolist(), lo.tolist() == s._lo.tolist()
    ([True], [2], True, True)
    >>> b[at[0]:at[0] + 48].view("<f8").reshape(2, 3).tolist() == s._sk.tolist()
    True
    """
    buf, starts, ends = compiled.spans(buf, starts, ends, newest=newest)
    if not 1 <= rows <= 1 << 20 or window < 1:
        raise ValueError(f"rows must be in [1, {1 << 20}] and window positive, got {rows} and {window}")
    newest = np.ascontiguousarray(newest, dtype=np.int64)
    ok, n, at = _kernels()["read"](buf, starts, ends, newest, np.int64(rows), np.int64(window))
    offsets = np.concatenate([[0], np.cumsum(np.where(ok, n, 0))]).astype(np.int64)
    read = ok.copy()
    hi, lo = _kernels()["times"](buf, starts, ends, newest, ok, offsets)
    if not np.array_equal(ok, read):  # an interval past int64: its sketch's buckets dropped
        keep = np.repeat(ok[read], n[read])
        hi, lo = hi[keep], lo[keep]
    return ok, n[ok], hi, lo, at[ok]


def union(data, at, hi, lo, offsets, newest, has_newest, group_starts, window: int, rows: int, limit: float,
          q: float, median: float):
    """Every group's ``SlidingLpNorm.merge_all``: group ``g`` is sketches
    ``group_starts[g]`` to ``group_starts[g + 1]`` (the last to the end),
    united in that order.  Sketch ``s`` has buckets ``offsets[s]`` to
    ``offsets[s + 1]``, newest first: times ``hi`` and ``lo``, and
    ``rows`` float64 sums each, one bucket after the other from byte
    ``at[s]`` of ``data`` (native byte order).  ``limit`` is Invariant
    3's ``C_f / k``, ``q`` the power of the norm compared and ``median``
    the stable law's ``median |X_p|``.

    Returns
    -------
    (bucket offsets, sums (buckets x rows), hi, lo, newest, has_newest) of
    the unions.
    """
    sources = _sources(data, at, offsets, rows)
    hi, lo, newest, group_starts = _ints(hi, lo, newest, group_starts)
    _aligned(sources[2], hi=hi, lo=lo, newest=newest, has_newest=has_newest)
    groups_checked(group_starts, newest.size)
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    return _kernels()["union"](*sources, hi, lo, newest, np.ascontiguousarray(has_newest, dtype=np.bool_),
                               group_starts, np.int64(window), float(limit), float(q), float(median))


def build(atoms, atom_t, key_offsets, per_block: int, limit: float, q: float, median: float):
    """The buckets of fresh sketches of many keys: key ``k``'s units are the
    rows ``key_offsets[k]`` to ``key_offsets[k + 1]`` of ``atoms`` (each a
    timestamp's sketch, ``SlidingLpNorm._atoms``), oldest first, at times
    ``atom_t``, bucketed newest first by ``SlidingLpNorm._rebuild`` in its
    blocks of ``per_block`` units (``limit``, ``q``, ``median`` as for
    :func:`union`).

    Returns
    -------
    (bucket offsets, sums (buckets x rows), hi, lo) per key.
    """
    atoms = np.ascontiguousarray(atoms, dtype=np.float64)
    atom_t, key_offsets = _ints(atom_t, key_offsets)
    if atoms.ndim != 2 or atom_t.shape != atoms.shape[:1] or per_block < 1:
        raise ValueError(f"atoms must be 2-d with one time each and per_block positive, got shapes {atoms.shape} "
                         f"and {atom_t.shape}, per_block {per_block}")
    _offsets(key_offsets, atoms.shape[0])
    return _kernels()["build"](atoms, atom_t, key_offsets, np.int64(per_block), float(limit), float(q),
                               float(median))


def window_estimates(data, at, lo, offsets, cutoffs, group_starts, rows: int, median: float) -> np.ndarray:
    """The estimate of each group's sketches composed over a window:
    sketch ``s``'s buckets (sums as :func:`union` takes them) whose oldest
    time is after ``cutoffs[s]``, summed newest first (as
    ``SlidingLpNorm.sketch`` sums them), the group's sketches' sums added
    in order (as ``sum`` adds them in ``LpNorm.union``), then
    ``np.median(np.abs(sum)) / median``: the same floats.  One group per
    sketch (``group_starts`` ``0, 1, ...``) gives each sketch's
    ``estimate``."""
    sources = _sources(data, at, offsets, rows)
    lo, cutoffs, group_starts = _ints(lo, cutoffs, group_starts)
    _aligned(sources[2], lo=lo, cutoffs=cutoffs)
    groups_checked(group_starts, cutoffs.size)
    return _kernels()["estimates"](*sources, lo, cutoffs, group_starts, float(median))


def payloads(data, at, hi, lo, offsets, newest, has_newest, rows: int):
    """The bytes after each sketch's newest time and before its CRC, as
    ``SlidingLpNorm.to_bytes`` writes them (a sketch without a newest
    time: none), of sketches as :func:`union` takes them (sums in
    little-endian byte order): ``(payload, byte offsets)``."""
    sources = _sources(data, at, offsets, rows)
    hi, lo, newest = _ints(hi, lo, newest)
    _aligned(sources[2], hi=hi, lo=lo, newest=newest, has_newest=has_newest)
    return _kernels()["write"](*sources, hi, lo, newest, np.ascontiguousarray(has_newest, dtype=np.bool_))


def _ints(*arrays) -> list:
    return [np.ascontiguousarray(x, dtype=np.int64) for x in arrays]


def _sources(data, at, offsets, rows: int) -> tuple:
    """``(data, at, offsets, rows)`` checked before a loop reads the sums
    of sketch ``s`` at ``data[at[s]:at[s] + 8 * rows * buckets]`` (compiled
    code does not check its indices)."""
    data = compiled.read_only(data)
    at, offsets = _ints(at, offsets)
    if not 1 <= rows <= 1 << 20:
        raise ValueError(f"rows must be in [1, {1 << 20}], got {rows}")
    if offsets.size != at.size + 1:
        raise ValueError(f"offsets must have one more entry than at ({at.size + 1}), got {offsets.size}")
    _offsets(offsets, int(offsets[-1]))
    if at.size and (at.min() < 0 or np.any(at + 8 * rows * np.diff(offsets) > data.size)):
        raise ValueError("each sketch's sums must lie in the data")
    return data, at, offsets, np.int64(rows)


def _offsets(offsets: np.ndarray, total: int) -> None:
    """ValueError unless ``offsets`` run from 0 to ``total`` without falling."""
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != total or np.any(
            np.diff(offsets) < 0):
        raise ValueError(f"offsets must run from 0 to {total} without falling, got {offsets.tolist()[:8]}")


def _aligned(offsets: np.ndarray, **arrays) -> None:
    """ValueError unless each array has one value per bucket (``hi``,
    ``lo``) or per sketch (the others)."""
    for name, values in arrays.items():
        want = int(offsets[-1]) if name in ("hi", "lo") else offsets.size - 1
        if np.shape(values) != (want,):
            raise ValueError(f"{name} must have {want} values, got shape {np.shape(values)}")


# ----------------------------------------------------------------- the loops
def _read_all(buf, starts, ends, newest, rows, window):
    count = starts.size
    ok = np.zeros(count, dtype=np.bool_)
    n_out = np.zeros(count, dtype=np.int64)
    at = np.zeros(count, dtype=np.int64)
    per_bucket = 8 * rows + 2
    room_top = np.uint64(0)
    for i in range(count):
        v, pos, good = _varint(buf, starts[i], ends[i])
        end = ends[i]
        if not good or v > np.uint64((end - pos) // per_bucket):
            continue
        n = np.int64(v)
        if n == 0:
            if pos == end:
                ok[i] = True
                at[i] = pos
            continue
        # newest - (INT64_MIN + 1): the largest age a bucket may have
        room_top = np.uint64(newest[i]) - np.uint64(INT64_MIN) - np.uint64(1)
        age = np.uint64(0)
        bad = False
        for j in range(n):
            d, pos, good = _varint(buf, pos, end)
            if not good or d >= np.uint64(window):
                bad = True
                break
            grown = age + d
            if grown < age:
                bad = True
                break
            age = grown
        if bad or age > room_top:
            continue
        # the oldest bucket is live: newest - age > newest - window
        if age >= np.uint64(window):
            continue
        for j in range(n):
            w, pos, good = _varint(buf, pos, end)
            if not good:
                bad = True
                break
        if bad or end - pos != 8 * rows * n:
            continue
        sums = buf[pos:end].view(np.float64)  # (x86 and ARM load unaligned floats)
        for r in range(sums.size):
            if not np.isfinite(sums[r]):
                bad = True
                break
        if bad:
            continue
        ok[i] = True
        n_out[i] = n
        at[i] = pos
    return ok, n_out, at


def _times_all(buf, starts, ends, newest, ok, offsets):
    total = offsets[offsets.size - 1]
    hi = np.zeros(total, dtype=np.int64)
    lo = np.zeros(total, dtype=np.int64)
    k = 0
    for i in range(starts.size):
        if not ok[i]:
            continue
        end = ends[i]
        v, pos, good = _varint(buf, starts[i], end)
        n = np.int64(v)
        top = np.uint64(newest[i])
        a = k
        for j in range(n):
            d, pos, good = _varint(buf, pos, end)
            top -= d
            hi[k] = np.int64(top)
            k += 1
        for j in range(n):
            w, pos, good = _varint(buf, pos, end)
            low = np.int64(np.uint64(hi[a + j]) - w)  # modular: a width past int64 wraps above hi
            if low > hi[a + j] or low == INT64_MIN:
                ok[i] = False
            lo[a + j] = low
    return hi, lo


def _fhat(v, a, b, median, q):
    """``(np.median(np.abs(v)) / median) ** q`` (NaN where ``v`` has one);
    ``a``, ``b``: room for ``v``."""
    return (_median_abs_c(v, a, b) / median) ** q


def _median_abs(v, a, b):
    """``np.median(np.abs(v))``, NaN where ``v`` has one (``a``, ``b``:
    room for ``v``): the value below which half of them lie, or the mean
    of the two middle ones of an even count, as numpy computes it.

    A quickselect whose partition has no branch on the data: each value is
    written to both ends of the other buffer and one end advances.  The
    values of stored sketches are random, so a partition that branches
    mispredicts every other value: numba's ``np.median`` took ~5 us for
    405 of them, this ~1.9 us (measured on stored sums)."""
    n = v.size
    for i in range(n):
        x = abs(v[i])
        if x != x:
            return np.nan
        a[i] = x
    half = n >> 1
    k = half  # the upper middle (the middle of an odd count)
    src, dst = a, b
    off = 0
    left_max = -1.0  # the largest value put below the k-th (none yet)
    while n > 16:
        x0, x1, x2 = src[off], src[off + (n >> 1)], src[off + n - 1]
        pivot = max(min(x0, x1), min(max(x0, x1), x2))
        lo, hi = 0, n - 1
        for i in range(off, off + n):
            x = src[i]
            c = x < pivot
            dst[lo] = x
            dst[hi] = x
            lo += c
            hi -= 1 - c
        if lo == 0:  # the pivot is the least value: take its copies out instead
            lo, hi = 0, n - 1
            for i in range(off, off + n):
                x = src[i]
                c = x <= pivot
                dst[lo] = x
                dst[hi] = x
                lo += c
                hi -= 1 - c
            if k < lo:
                return _mid_c(pivot, left_max if k == 0 else pivot, v.size)
        if k < lo:
            n = lo
            off = 0
        else:
            m = dst[0]
            for i in range(1, lo):
                m = max(m, dst[i])
            left_max = max(left_max, m)
            k -= lo
            n -= lo
            off = lo
        src, dst = dst, src
    # insertion sort of the last few
    for i in range(off + 1, off + n):
        x = src[i]
        j = i - 1
        while j >= off and src[j] > x:
            src[j + 1] = src[j]
            j -= 1
        src[j + 1] = x
    up = src[off + k]
    low = src[off + k - 1] if k > 0 else left_max
    return _mid_c(up, low, v.size)

def _mid(up, low, count):
    """The median of ``count`` values from its upper and lower middle."""
    if count & 1:
        return up
    return (low + up) / 2


def _rebuild(sk, bounds, hi, lo, limit, q, median, out_sk, out_hi, out_lo, prefix, work):
    """``SlidingLpNorm._rebuild`` of units ``sk`` (newest first) given in
    blocks (block ``j`` ends at unit ``bounds[j]``; the last at the last
    unit), into ``out_*``; returns the number of buckets.  ``prefix``:
    room for the largest block and one row more, ``work``: five rows."""
    rows = sk.shape[1]
    a, b, cand, base, cur = work[0], work[1], work[2], work[3], work[4]
    prefix[0] = 0.0
    total = 0.0
    open_ = False
    cur_hi = cur_lo = np.int64(0)
    out = 0
    s0 = 0
    for blk in range(bounds.size):
        n = bounds[blk] - s0
        for u in range(n):
            for r in range(rows):
                prefix[u + 1, r] = prefix[u, r] + sk[s0 + u, r] if u else sk[s0 + u, r]
        i = 0
        while i < n:
            if not open_:
                cur[:] = sk[s0 + i]
                cur_hi, cur_lo = hi[s0 + i], lo[s0 + i]
                open_ = True
                i += 1
                continue
            bound = limit * total
            for r in range(rows):
                base[r] = cur[r] - prefix[i, r]
            best, step = i, 1
            while best + step <= n:
                for r in range(rows):
                    cand[r] = base[r] + prefix[best + step, r]
                if not _fhat_c(cand, a, b, median, q) <= bound:
                    break
                best += step
                step *= 2
            top = min(n, best + step - 1)
            while best < top:
                mid = (best + top + 1) // 2
                for r in range(rows):
                    cand[r] = base[r] + prefix[mid, r]
                if _fhat_c(cand, a, b, median, q) <= bound:
                    best = mid
                else:
                    top = mid - 1
            if best > i:
                for r in range(rows):
                    cur[r] = base[r] + prefix[best, r]
                cur_lo = lo[s0 + best - 1]
                i = best
            if i < n:  # unit i does not fit: the bucket is finished
                total += _fhat_c(cur, a, b, median, q)
                out_sk[out] = cur
                out_hi[out] = cur_hi
                out_lo[out] = cur_lo
                out += 1
                open_ = False
        s0 = bounds[blk]
    if open_:
        out_sk[out] = cur
        out_hi[out] = cur_hi
        out_lo[out] = cur_lo
        out += 1
    return out


def _build_all(atoms, atom_t, key_off, per_block, limit, q, median):
    keys = key_off.size - 1
    rows = atoms.shape[1]
    most = 0
    for k in range(keys):
        most = max(most, key_off[k + 1] - key_off[k])
    block = np.empty((most, rows))
    b_t = np.empty(most, dtype=np.int64)
    prefix = np.empty((min(most, per_block) + 1, rows))
    work = np.empty((5, rows))
    bounds = np.empty(most // per_block + 2, dtype=np.int64)
    out_off = np.zeros(keys + 1, dtype=np.int64)
    out_sk = np.empty((atoms.shape[0], rows))
    out_hi = np.empty(atoms.shape[0], dtype=np.int64)
    out_lo = np.empty(atoms.shape[0], dtype=np.int64)
    for k in range(keys):
        a, z = key_off[k], key_off[k + 1]
        n = z - a
        for u in range(n):  # newest first
            block[u] = atoms[z - 1 - u]
            b_t[u] = atom_t[z - 1 - u]
        # SlidingLpNorm._atoms' blocks: per_block atoms at a time from the newest
        nb = 0
        e = per_block
        while e < n:
            bounds[nb] = e
            nb += 1
            e += per_block
        bounds[nb] = n
        nb += 1
        at = out_off[k]
        built = _rebuild_c(block[:n], bounds[:nb], b_t[:n], b_t[:n], limit, q, median, out_sk[at:], out_hi[at:],
                           out_lo[at:], prefix, work) if n else 0
        out_off[k + 1] = at + built
    total = out_off[keys]
    return out_off, out_sk[:total], out_hi[:total].copy(), out_lo[:total].copy()


def _sums(data, at, offsets, rows, s, b):
    """The sums of bucket ``b`` (of sketch ``s``) in ``data``, a view."""
    p = at[s] + 8 * rows * (b - offsets[s])
    return data[p:p + 8 * rows].view(np.float64)


def _union_all(data, at_s, offsets, rows, hi, lo, newest, has_newest, gstarts, window, limit, q, median):
    count = newest.size
    groups = gstarts.size
    out_off = np.zeros(groups + 1, dtype=np.int64)
    # room for every bucket (the pages past the unions' are never touched)
    out_sk = np.empty((hi.size, rows))
    out_hi = np.empty(hi.size, dtype=np.int64)
    out_lo = np.empty(hi.size, dtype=np.int64)
    out_newest = np.zeros(groups, dtype=np.int64)
    out_has = np.zeros(groups, dtype=np.bool_)
    most = 0  # the most buckets of a group: room for any union of its sketches
    for g in range(groups):
        z = gstarts[g + 1] if g + 1 < groups else count
        most = max(most, offsets[z] - offsets[gstarts[g]])
    block = np.empty((most, rows))
    prefix = np.empty((most + 1, rows))
    work = np.empty((5, rows))
    one = np.empty(1, dtype=np.int64)  # a union is one block of units
    units = np.empty(most, dtype=np.int64)  # positions: < m ours (at + u), else theirs
    u_hi = np.empty(most, dtype=np.int64)
    u_lo = np.empty(most, dtype=np.int64)
    b_hi = np.empty(most, dtype=np.int64)
    b_lo = np.empty(most, dtype=np.int64)
    for g in range(groups):
        a = gstarts[g]
        z = gstarts[g + 1] if g + 1 < groups else count
        at = out_off[g]
        # the first sketch as it is; each next one united into it
        m = offsets[a + 1] - offsets[a]
        for b in range(m):
            out_sk[at + b] = _sums_c(data, at_s, offsets, rows, a, offsets[a] + b)
        out_hi[at:at + m] = hi[offsets[a]:offsets[a + 1]]
        out_lo[at:at + m] = lo[offsets[a]:offsets[a + 1]]
        has = has_newest[a]
        new = newest[a]
        for s in range(a + 1, z):
            if not has_newest[s]:
                continue
            new = max(new, newest[s]) if has else newest[s]
            has = True
            all_live = new < INT64_MIN + window
            cut = INT64_MIN if all_live else new - window
            b0, b1 = offsets[s], offsets[s + 1]
            n = 0
            for u in range(m):
                if all_live or out_hi[at + u] > cut:
                    units[n] = u
                    u_hi[n] = out_hi[at + u]
                    u_lo[n] = out_lo[at + u]
                    n += 1
            for u in range(b1 - b0):
                if all_live or hi[b0 + u] > cut:
                    units[n] = m + u
                    u_hi[n] = hi[b0 + u]
                    u_lo[n] = lo[b0 + u]
                    n += 1
            # np.lexsort((lo, hi))[::-1]: hi, then lo, descending; of equal
            # pairs the later unit first
            by_lo = np.argsort(u_lo[:n], kind="mergesort")
            order = by_lo[np.argsort(u_hi[:n][by_lo], kind="mergesort")][::-1]
            for j in range(n):
                u = units[order[j]]
                if u < m:
                    block[j] = out_sk[at + u]
                else:
                    block[j] = _sums_c(data, at_s, offsets, rows, s, b0 + u - m)
                b_hi[j] = u_hi[order[j]]
                b_lo[j] = u_lo[order[j]]
            one[0] = n
            built = _rebuild_c(block[:n], one, b_hi[:n], b_lo[:n], limit, q, median, out_sk[at:], out_hi[at:],
                               out_lo[at:], prefix, work)
            # _fix_intervals: each bucket's oldest time widened to the
            # minimum over the units from the first of its newest time on
            first = np.searchsorted(-b_hi[:n], -out_hi[at:at + built])
            for b in range(built):
                f = first[b]
                e = first[b + 1] if b + 1 < built else n
                low = b_lo[f]
                for u in range(f + 1, e):
                    low = min(low, b_lo[u])
                out_lo[at + b] = min(out_lo[at + b], low)
            m = built
        out_off[g + 1] = at + m
        out_newest[g] = new if has else 0
        out_has[g] = has
    total = out_off[groups]
    return out_off, out_sk[:total], out_hi[:total].copy(), out_lo[:total].copy(), out_newest, out_has


def _estimates_all(data, at_s, offsets, rows, lo, cutoffs, gstarts, median):
    count = offsets.size - 1
    groups = gstarts.size
    out = np.empty(groups)
    acc = np.empty(rows)
    own = np.empty(rows)
    a_ = np.empty(rows)
    b_ = np.empty(rows)
    for g in range(groups):
        a = gstarts[g]
        z = gstarts[g + 1] if g + 1 < groups else count
        acc[:] = 0.0
        for s in range(a, z):
            own[:] = 0.0
            for b in range(offsets[s], offsets[s + 1]):
                if lo[b] > cutoffs[s]:
                    v = _sums_c(data, at_s, offsets, rows, s, b)
                    for r in range(rows):
                        own[r] += v[r]
            for r in range(rows):
                acc[r] += own[r]
        out[g] = _median_abs_c(acc, a_, b_) / median
    return out


def _write_all(data, at_s, offsets, rows, hi, lo, newest, has):
    count = newest.size
    ends = np.zeros(count + 1, dtype=np.int64)
    for s in range(count):
        size = 0
        if has[s]:
            a, z = offsets[s], offsets[s + 1]
            size = _vsize_c(np.uint64(z - a)) + 8 * rows * (z - a)
            for b in range(a, z):
                top = newest[s] if b == a else hi[b - 1]
                size += _vsize_c(np.uint64(top) - np.uint64(hi[b])) + _vsize_c(np.uint64(hi[b]) - np.uint64(lo[b]))
        ends[s + 1] = ends[s] + size
    out = np.empty(ends[count], dtype=np.uint8)
    for s in range(count):
        if not has[s]:
            continue
        a, z = offsets[s], offsets[s + 1]
        p = _wvarint(out, ends[s], np.uint64(z - a))
        for b in range(a, z):
            top = newest[s] if b == a else hi[b - 1]
            p = _wvarint(out, p, np.uint64(top) - np.uint64(hi[b]))
        for b in range(a, z):
            p = _wvarint(out, p, np.uint64(hi[b]) - np.uint64(lo[b]))
        nbytes = 8 * rows * (z - a)
        out[p:p + nbytes] = data[at_s[s]:at_s[s] + nbytes]
    return out, ends


def _vsize(v):
    size = 1
    while v >= np.uint64(0x80):
        v >>= np.uint64(7)
        size += 1
    return size


def read_elements(buf, starts, ends, newest, most: int, window: int):
    """The elements of L_p sketches in the elements form
    (:meth:`lp_norms.elements.Elements.read` in one compiled pass): blob
    ``i``'s at ``buf[starts[i]:ends[i]]`` (after its newest time, before
    its checksum), with every check of ``SlidingLpNorm.from_bytes``; a
    blob whose values sum to 1e300 or more is left to it (as the numpy
    reader leaves it).  Returns ``(ok, counts, ts, hashes, values)``: the
    accepted blobs, their element counts and their elements one after the
    other.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> from lp_norms import SlidingLpNorm
    >>> s = SlidingLpNorm(2.0, 100, rows=8).update([5, 9], [1, 2], [3.0, 4.0])
    >>> b = np.frombuffer(s.to_bytes(), dtype=np.uint8)
    >>> ok, counts, ts, h, v = read_elements(b, [58], [b.size - 4], [9], 8, 100)
    >>> ok.tolist(), counts.tolist(), ts.tolist(), v.tolist()
    ([True], [2], [5, 9], [3.0, 4.0])
    """
    buf = compiled.read_only(buf)
    starts, ends, newest = (np.ascontiguousarray(a, dtype=np.int64) for a in (starts, ends, newest))
    if not (starts.shape == ends.shape == newest.shape) or (
            starts.size and (starts.min() < 0 or ends.max() > buf.size or np.any(ends < starts))):
        raise ValueError("starts, ends and newest need one entry per blob, every span inside buf")
    if int(most) < 0 or int(window) < 1:
        raise ValueError(f"most must be at least 0 and window at least 1, got {most} and {window}")
    return _elements_kernel()(buf, starts, ends, newest, np.int64(most), np.uint64(window))


def _read_elements_all(buf, starts, ends, newest, most, window):
    n = starts.size
    cap = 0
    for i in range(n):
        cap += (ends[i] - starts[i]) // 17 + 1  # an element takes 8 + 8 bytes and a varint at least
    ok = np.zeros(n, dtype=np.bool_)
    counts = np.zeros(n, dtype=np.int64)
    ts = np.empty(cap, dtype=np.int64)
    hs = np.empty(cap, dtype=np.uint64)
    vs = np.empty(cap, dtype=np.float64)
    at = 0
    for i in range(n):
        end = ends[i]
        m, pos, good = _varint(buf, starts[i], end)
        if not good or m > np.uint64(most) or np.uint64(end - pos) < m * np.uint64(17):
            continue
        k = np.int64(m)
        v_at = end - 8 * k
        good, pos = _row_times_c(buf, pos + 8 * k, v_at, pos, k, newest[i], window, ts, hs, at)
        total = 0.0
        for j in range(k if good else 0):
            bits = np.uint64(0)
            for b in range(8):
                bits |= np.uint64(buf[v_at + 8 * j + b]) << np.uint64(8 * b)
            v = _as_float_c(bits)
            if not (v > 0.0) or not (v < np.inf):
                good = False
                break
            total += v
            vs[at + j] = v
        if not good or pos != v_at or not (total < 1e300):
            continue
        ok[i] = True
        counts[i] = k
        at += k
    return ok, counts, ts[:at].copy(), hs[:at].copy(), vs[:at].copy()


def _as_float(bits):
    return np.array([bits], dtype=np.uint64).view(np.float64)[0]


_ELEMENTS = None
_as_float_c = _row_times_c = None


def _elements_kernel():
    global _ELEMENTS, _as_float_c, _row_times_c
    if _ELEMENTS is None:
        _kernels()  # the compiled read_varint
        _as_float_c = compiled.jit(_as_float)
        _row_times_c = compiled.row_times()
        _ELEMENTS = compiled.kernel(_read_elements_all)
    return _ELEMENTS


_KERNELS: dict = {}
# the compiled helpers the loops call
_varint = _wvarint = _fhat_c = _rebuild_c = _vsize_c = _median_abs_c = _mid_c = _sums_c = None


def _kernels() -> dict:
    global _varint, _wvarint, _fhat_c, _rebuild_c, _vsize_c, _median_abs_c, _mid_c, _sums_c
    if not _KERNELS:
        _sums_c = compiled.jit(_sums)
        _varint, _wvarint = compiled.jit(compiled.read_varint), compiled.jit(compiled.write_varint)
        _mid_c = compiled.jit(_mid)
        _median_abs_c = compiled.jit(_median_abs)
        _fhat_c = compiled.jit(_fhat)
        _rebuild_c = compiled.jit(_rebuild)
        _vsize_c = compiled.jit(_vsize)
        _KERNELS.update(read=compiled.kernel(_read_all), times=compiled.kernel(_times_all),
                        union=compiled.kernel(_union_all), estimates=compiled.kernel(_estimates_all),
                        build=compiled.kernel(_build_all),
                        write=compiled.kernel(_write_all))
    return _KERNELS
