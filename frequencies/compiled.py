"""The compiled walk of heavy hitters down their levels, and the reader of
the ECM-sketches' rows form (numba, optional).

:meth:`frequencies.columnar.HeavyHittersColumn.heavy_hitters` walks every
group's candidates down the prefix levels in numpy passes over all
groups at once, each candidate's counters looked up among the batch's
sorted counter keys.  When :func:`ehist.compiled.active`, :func:`walk`
does the same walk one group at a time in compiled code: candidates
hashed, their counters found by a binary search in their (group, level)
segment, pruned and expanded, with no array per step of the walk.  The
same candidates, estimates and bounds, to the last bit.
"""

from __future__ import annotations

import numpy as np

from ehist import compiled
from ehist.hashing import GOLDEN

__all__ = ["walk", "read_rows"]

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)


def walk(key, sum_lo, sum_up, bounds, slack, threshold, lengths, hash_key, row_keys, width: int, size: int):
    """Every group's heavy hitters: the walk of
    :meth:`~frequencies.columnar.HeavyHittersColumn.heavy_hitters`.

    Parameters
    ----------
    key, sum_lo, sum_up : int64 arrays
        The groups' summed counters, sorted by ``key = (group * depth +
        level) * size + counter``, and their bounds.
    bounds : int64 array
        ``groups * depth + 1`` offsets: the keys of (group, level) ``s``
        are ``key[bounds[s]:bounds[s + 1]]``.
    slack : int64 array (groups x depth)
        Each group's count-min slack at each level (taken off the lower bounds).
    threshold : float64 array
        Each group's threshold (an upper bound below it prunes).
    lengths : int64 array
        Each level's prefix length in bits, shortest first.
    hash_key : uint64
        :func:`ehist.hashing.int_hash_key` of the sketches' seed.
    row_keys : uint64 array
        The count-min rows' keys (one per row).
    width, size : int
        Counters per row, and per level (``rows * width``).

    Returns
    -------
    (group, item, estimate, lower, upper) of every heavy hitter, in group order.
    """
    key, sum_lo, sum_up, bounds, lengths = (np.ascontiguousarray(a, dtype=np.int64)
                                            for a in (key, sum_lo, sum_up, bounds, lengths))
    slack = np.ascontiguousarray(slack, dtype=np.int64)
    threshold = np.ascontiguousarray(threshold, dtype=np.float64)
    row_keys = np.ascontiguousarray(row_keys, dtype=np.uint64)
    groups, depth = slack.shape if slack.ndim == 2 else (0, 0)
    if not (key.shape == sum_lo.shape == sum_up.shape and bounds.shape == (groups * depth + 1,)
            and threshold.shape == (groups,) and lengths.shape == (depth,)):
        raise ValueError("key, sum_lo and sum_up must be of one length, with bounds, slack, threshold and "
                         "lengths for every group and level")
    if bounds.size and (bounds[0] < 0 or bounds[-1] > key.size or np.any(np.diff(bounds) < 0)):
        raise ValueError(f"bounds must run within the {key.size} keys without decreasing")
    if depth and (lengths[0] < 1 or lengths[-1] > 64 or np.any(np.diff(lengths) < 1) or np.any(np.diff(lengths) > 16)
                  or lengths[0] > 16):
        raise ValueError("lengths must rise from 1 to at most 64 bits, at most 16 bits a level")
    if int(width) < 1 or int(size) != int(width) * row_keys.size:
        raise ValueError("size must be width times the rows")
    return _kernel()(key, sum_lo, sum_up, bounds, slack, threshold, lengths, np.uint64(hash_key), row_keys,
                     np.int64(width), np.int64(size))


def _mix(x):
    x = x ^ (x >> np.uint64(33))
    x = x * _C1
    x = x ^ (x >> np.uint64(33))
    x = x * _C2
    return x ^ (x >> np.uint64(33))


def _walk(key, sum_lo, sum_up, bounds, slack, threshold, lengths, hash_key, row_keys, width, size):
    groups, depth = slack.shape
    rows = row_keys.size
    cap = 1024
    found = np.empty((cap, 3), dtype=np.int64)  # each heavy hitter's group, lower and upper bound
    items = np.empty(cap, dtype=np.uint64)
    estimates = np.empty(cap, dtype=np.float64)
    count = 0
    golden = np.uint64(GOLDEN)
    w = np.uint64(width)
    for g in range(groups):
        cand = np.arange(np.int64(1) << lengths[0]).astype(np.uint64)
        for j in range(depth):
            s = g * depth + j
            a, z = bounds[s], bounds[s + 1]
            segment = key[a:z]
            base = np.int64(s) * size
            keep = np.zeros(cand.size, dtype=np.bool_)
            est = np.empty(cand.size, dtype=np.float64)
            low = np.empty(cand.size, dtype=np.int64)
            up = np.empty(cand.size, dtype=np.int64)
            for c in range(cand.size):
                h = _mix((cand[c] ^ hash_key) + golden)
                e_min = np.inf
                lo_min = np.int64(0)
                up_min = np.int64(0)
                for r in range(rows):
                    want = base + np.int64(_mix(h ^ row_keys[r]) % w) + np.int64(r) * width
                    pos = _bisect(segment, want)
                    c_lo = np.int64(0)
                    c_up = np.int64(0)
                    if pos < segment.size and segment[pos] == want:
                        c_lo, c_up = sum_lo[a + pos], sum_up[a + pos]
                    e = c_lo * 0.5 + c_up * 0.5
                    if r == 0 or e < e_min:
                        e_min = e
                    if r == 0 or c_lo < lo_min:
                        lo_min = c_lo
                    if r == 0 or c_up < up_min:
                        up_min = c_up
                    if up_min < threshold[g]:  # pruned whatever the other rows hold (only the kept are read)
                        break
                est[c] = e_min
                low[c] = max(lo_min - slack[g, j], np.int64(0))
                up[c] = up_min
                keep[c] = up_min >= threshold[g]
            kept = np.flatnonzero(keep)
            if j + 1 < depth:
                step = lengths[j + 1] - lengths[j]
                fan = np.int64(1) << step
                nxt = np.empty(kept.size * fan, dtype=np.uint64)
                for i in range(kept.size):
                    for q in range(fan):
                        nxt[i * fan + q] = (cand[kept[i]] << np.uint64(step)) | np.uint64(q)
                cand = nxt
            else:
                while count + kept.size > cap:
                    cap *= 2
                    found, items, estimates = _grown(found, cap), _grown(items, cap), _grown(estimates, cap)
                for i in range(kept.size):
                    found[count, 0], found[count, 1], found[count, 2] = g, low[kept[i]], up[kept[i]]
                    items[count], estimates[count] = cand[kept[i]], est[kept[i]]
                    count += 1
    return found[:count, 0].copy(), items[:count], estimates[:count], found[:count, 1].copy(), found[:count, 2].copy()


def _grown(a, cap):
    """``a`` with room for ``cap`` rows, its rows kept."""
    out = np.empty((cap,) + a.shape[1:], dtype=a.dtype)
    out[:a.shape[0]] = a
    return out


_COMPILED = None
_bisect = None  # the compiled ehist.compiled.first_at_least


def _kernel():
    global _COMPILED, _bisect, _mix, _grown
    if _COMPILED is None:
        _bisect = compiled.jit(compiled.first_at_least)
        _mix = compiled.jit(_mix)
        _grown = compiled.jit(_grown)
        _COMPILED = compiled.kernel(_walk)
    return _COMPILED


# ---------------------------------------------------------------- the rows form


def read_rows(buf, starts, ends, newest, valued, width: int, window: int):
    """The rows of ECM-sketches in the rows form
    (:func:`frequencies.count_min.read_rows` of many, in one compiled
    pass): blob ``i``'s rows lie at ``buf[starts[i]:ends[i]]`` (after its
    newest time, before its checksum), ``valued[i]`` its values flag.
    Returns ``(ok, counts, ts, hashes, values)``: the blobs every check
    accepts, their row counts, and their rows one after the other (a
    rejected blob: no row; its own reader names what is wrong)."""
    buf = compiled.read_only(buf)
    starts, ends, newest = (np.ascontiguousarray(a, dtype=np.int64) for a in (starts, ends, newest))
    valued = np.ascontiguousarray(valued, dtype=np.bool_)
    if not (starts.shape == ends.shape == newest.shape == valued.shape) or (
            starts.size and (starts.min() < 0 or ends.max() > buf.size or np.any(ends < starts))):
        raise ValueError("starts, ends, newest and valued need one entry per blob, every span inside buf")
    if int(width) < 1 or int(window) < 1:
        raise ValueError(f"width and window must be at least 1, got {width} and {window}")
    return _rows_kernel()(buf, starts, ends, newest, valued, np.int64(width), np.uint64(window))


def _read_rows(buf, starts, ends, newest, valued, width, window):
    n = starts.size
    cap = 0
    for i in range(n):
        cap += (ends[i] - starts[i]) // 9 + 1  # a row takes 8 hash bytes and a varint at least
    ok = np.zeros(n, dtype=np.bool_)
    counts = np.zeros(n, dtype=np.int64)
    ts = np.empty(cap, dtype=np.int64)
    hs = np.empty(cap, dtype=np.uint64)
    vs = np.empty(cap, dtype=np.int64)
    at = 0
    for i in range(n):
        end = ends[i]
        m, pos, good = _rvarint(buf, starts[i], end)
        if not good or m > np.uint64(width) or np.uint64(end - pos) < m * np.uint64(9):
            continue
        k = np.int64(m)
        good, pos = _row_times(buf, pos + 8 * k, end, pos, k, newest[i], window, ts, hs, at)
        vs[at:at + k] = 1
        if not good:
            continue
        if valued[i]:
            good, pos = _row_values(buf, pos, end, k, vs, at)  # k == 0: no value, refused
            if not good:
                continue
        if pos != end:
            continue
        ok[i] = True
        counts[i] = k
        at += k
    return ok, counts, ts[:at].copy(), hs[:at].copy(), vs[:at].copy()


_ROWS = None
_rvarint = _row_times = _row_values = None  # the compiled read_varint, read_row_times and read_row_values


def _rows_kernel():
    global _ROWS, _rvarint, _row_times, _row_values
    if _ROWS is None:
        _rvarint = compiled.jit(compiled.read_varint)
        _row_times = compiled.row_times()
        _row_values = compiled.row_values()
        _ROWS = compiled.kernel(_read_rows)
    return _ROWS
