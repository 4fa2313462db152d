"""The compiled decoder and union of stored sliding HyperLogLogs (numba, optional).

:func:`distinct.columnar.sketches_from_bytes` and
:meth:`~distinct.columnar.SketchColumn.from_bytes` decode many stored
sketches in numpy passes over every byte; :func:`decode_entries` reads each
sketch's payload once, with the same checks, when :func:`ehist.compiled.active`
(numba installed, the compiled loops not switched off).  Layout:
:mod:`distinct.hll_layout`.  :func:`future_maxima` is the union's step
(:func:`distinct.columnar_union.union_bytes`): every group's entries put in
register and time order and reduced to each register's future possible
maxima, one group at a time, without the two stable sorts of the whole
batch the numpy path makes.
"""

from __future__ import annotations

import numpy as np

from ehist import compiled
from ehist.validation import INT64_MIN

__all__ = ["decode_entries", "future_maxima", "window_rank_counts", "encode_payloads"]


def decode_entries(buf, starts, ends, ticked, version_2, newest, window, precision):
    """Decode the payloads ``buf[starts[i]:ends[i]]`` of sliding
    HyperLogLogs (after the head fields, before the CRC) whose head,
    checksum and parameters were checked, given their tick flags, versions,
    newest times, windows and precisions.

    A sketch is accepted only when every check of
    ``SlidingHyperLogLog.from_bytes`` passes on it with the same result;
    the rest are left for the caller to hand to ``from_bytes``.

    Returns
    -------
    (accepted mask, entries per accepted sketch, reg, ts, rank): the
    entries of the accepted sketches in order, each sorted by register and
    time.
    """
    buf, starts, ends = compiled.spans(buf, starts, ends, ticked=ticked, version_2=version_2, newest=newest,
                                       window=window, precision=precision)
    if np.size(precision) and not 4 <= int(np.min(precision)) <= int(np.max(precision)) <= 18:
        raise ValueError(f"precisions must be in [4, 18], got {np.min(precision)} to {np.max(precision)}")
    ok, counts, reg, ts, rank = _kernel()(
        buf, starts, ends, np.ascontiguousarray(ticked, dtype=np.bool_),
        np.ascontiguousarray(version_2, dtype=np.bool_), np.ascontiguousarray(newest, dtype=np.int64),
        np.ascontiguousarray(window, dtype=np.int64), np.ascontiguousarray(precision, dtype=np.int64))
    return ok, counts[ok], reg, ts, rank


def future_maxima(group_starts, reg, ts, rank, newest, window: int, keep_all):
    """Each group's entries (``group_starts``: ``groups + 1`` offsets of
    ``reg``, ``ts``, ``rank``; each group's sketches one after the other)
    reduced as :meth:`SlidingHyperLogLog.merge_all` reduces them: entries
    with an age of ``window`` or more from the group's ``newest`` dropped
    (unless ``keep_all[g]``: a group whose first sketch stands alone),
    then of each register only the entries no entry of a later or equal
    time matches or beats in rank (of equal times, the largest rank).

    Returns
    -------
    (group, reg, rank, age): the surviving entries, sorted by group,
    register and time, ``age`` the group's newest less the time (uint64).

    >>> _ = __import__("pytest").importorskip("numba")
    >>> g, r, k, a = future_maxima([0, 4], np.array([1, 1, 1, 2]), np.array([5, 7, 6, 7]),
    ...                            np.array([3, 2, 4, 1]), np.array([7]), 100, np.array([False]))
    >>> r.tolist(), k.tolist(), a.tolist()          # register 1: rank 4 at time 6 beats 3 at 5; 2 at 7 stays
    ([1, 1, 2], [4, 2, 1], [1, 0, 0])
    """
    starts = np.ascontiguousarray(group_starts, dtype=np.int64)
    reg, ts, rank = (np.ascontiguousarray(a, dtype=np.int64) for a in (reg, ts, rank))
    newest = np.ascontiguousarray(newest, dtype=np.int64)
    keep_all = np.ascontiguousarray(keep_all, dtype=np.bool_)
    if not (reg.shape == ts.shape == rank.shape and reg.ndim == 1):
        raise ValueError("reg, ts and rank must be one-dimensional and of one length")
    if starts.ndim != 1 or starts.size < 1 or starts[0] != 0 or starts[-1] != reg.size or np.any(np.diff(starts) < 0):
        raise ValueError(f"group_starts must run from 0 to {reg.size} without decreasing")
    if newest.shape != (starts.size - 1,) or keep_all.shape != newest.shape or int(window) < 1:
        raise ValueError("newest and keep_all need one value per group, and window must be at least 1")
    if reg.size and (rank.min() < 0 or rank.max() > 127 or reg.min() < 0 or reg.max() >= 1 << 18):
        raise ValueError("ranks must be in [0, 127] and registers in [0, 2**18)")
    return _union_kernel()(starts, reg, ts, rank, newest, int(window), keep_all)


def encode_payloads(offsets, reg, rank, age, has):
    """The payloads of :meth:`SlidingHyperLogLog.to_bytes` (after the head
    fields, before the CRC; layout in :mod:`distinct.hll_layout`) of many
    sketches' canonical entries in one compiled pass: sketch ``s``'s
    entries at ``offsets[s]:offsets[s + 1]`` of ``reg``, ``rank`` and
    ``age`` (``newest - t``, uint64), sorted by register and time; ``has``
    its newest time.  What :func:`distinct.columnar.encode_entries`
    writes: the count, the tick (the ages' gcd, where 2 or more), the
    register deltas, a byte per rank, the ages over the tick.

    Returns
    -------
    (payload, byte_starts, byte_ends, ticked): sketch ``s``'s payload at
    ``payload[byte_starts[s]:byte_ends[s]]`` and whether it has a tick.

    Examples
    --------
    Two entries (registers 3 and 9, ages 4 and 0: a tick of 4), then a
    sketch without a newest time:

    >>> _ = __import__("pytest").importorskip("numba")
    >>> payload, starts, ends, ticked = encode_payloads([0, 2, 2], [3, 9], [1, 2], [4, 0], [True, False])
    >>> payload.tolist(), starts.tolist(), ends.tolist(), ticked.tolist()
    ([2, 4, 3, 6, 1, 2, 1, 0], [0, 8], [8, 8], [True, False])
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    reg, rank = np.ascontiguousarray(reg, dtype=np.int64), np.ascontiguousarray(rank, dtype=np.int64)
    age, has = np.ascontiguousarray(age, dtype=np.uint64), np.ascontiguousarray(has, dtype=np.bool_)
    if not (offsets.size == has.size + 1 and offsets[0] == 0 and offsets[-1] == reg.size == rank.size == age.size
            and np.all(np.diff(offsets) >= 0)):
        raise ValueError("offsets must cut reg, rank and age into one run per sketch")
    if rank.size and (rank.min() < 0 or rank.max() > 255):
        raise ValueError(f"ranks must fit a byte, got {rank.min()} to {rank.max()}")
    return _encode_kernel()(offsets, reg, rank, age, has)


def _encode_all(offsets, reg, rank, age, has):
    runs = has.size
    n = reg.size
    out = np.empty(20 * runs + 21 * n + 1, dtype=np.uint8)  # per sketch two varints, per entry two and a byte
    byte_starts = np.empty(runs, dtype=np.int64)
    byte_ends = np.empty(runs, dtype=np.int64)
    ticked = np.zeros(runs, dtype=np.bool_)
    at = 0
    for r in range(runs):
        a, b = offsets[r], offsets[r + 1]
        byte_starts[r] = at
        tick = np.uint64(0)
        for i in range(a, b):
            tick = _gcd(tick, age[i])
        if tick >= np.uint64(2):
            ticked[r] = True
        else:
            tick = np.uint64(1)
        if has[r]:
            at = _wvarint(out, at, np.uint64(b - a))
            if ticked[r]:
                at = _wvarint(out, at, tick)
            for i in range(a, b):
                at = _wvarint(out, at, np.uint64(reg[i] - (reg[i - 1] if i > a else 0)))
        for i in range(a, b):
            out[at] = np.uint8(rank[i])
            at += 1
        for i in range(a, b):
            at = _wvarint(out, at, age[i] // tick)
        byte_ends[r] = at
    return out[:at], byte_starts, byte_ends, ticked


def _future_maxima(starts, reg, ts, rank, newest, window, keep_all):
    groups = starts.size - 1
    n = reg.size
    out_g = np.empty(n, dtype=np.int64)
    out_r = np.empty(n, dtype=np.int64)
    out_k = np.empty(n, dtype=np.int64)
    out_a = np.empty(n, dtype=np.uint64)
    at = 0
    for g in range(groups):
        a, b = starts[g], starts[g + 1]
        if a == b:
            continue
        top = np.uint64(newest[g])
        idx = np.empty(b - a, dtype=np.int64)
        m = 0
        for i in range(a, b):
            age = top - np.uint64(ts[i])
            if keep_all[g] or age < np.uint64(window):
                idx[m] = i
                m += 1
        if m == 0:
            continue
        idx = idx[:m]
        # by register, then time: one sort of a packed key where the times' span fits 38 bits
        t_lo, t_hi = ts[idx[0]], ts[idx[0]]
        for i in idx:
            t_lo = min(t_lo, ts[i])
            t_hi = max(t_hi, ts[i])
        if np.uint64(t_hi) - np.uint64(t_lo) < np.uint64(1 << 38):
            key = np.empty(m, dtype=np.int64)
            for q in range(m):
                i = idx[q]
                key[q] = (reg[i] << 45) | (np.int64(np.uint64(ts[i]) - np.uint64(t_lo)) << 7) | rank[i]
            neg = -key  # each sketch's entries arrive sorted by key: their runs merged, not sorted
            idx = idx[_runs_sort(neg, neg)]
        else:
            idx = idx[np.argsort(ts[idx], kind="mergesort")]
            idx = idx[np.argsort(reg[idx], kind="mergesort")]
        # each register's list from its latest time back: a time's largest rank survives iff it beats every later
        start = at
        j = m - 1
        while j >= 0:
            r = reg[idx[j]]
            best = -1
            while j >= 0 and reg[idx[j]] == r:
                t = ts[idx[j]]
                block = -1
                while j >= 0 and reg[idx[j]] == r and ts[idx[j]] == t:
                    if rank[idx[j]] > block:
                        block = rank[idx[j]]
                    j -= 1
                if block > best:
                    out_g[at] = g
                    out_r[at] = r
                    out_k[at] = block
                    out_a[at] = top - np.uint64(t)
                    at += 1
                    best = block
        # written latest first (registers descending): put the group's entries in order
        lo, hi = start, at - 1
        while lo < hi:
            for arr in (out_r, out_k):
                x = arr[lo]
                arr[lo] = arr[hi]
                arr[hi] = x
            y = out_a[lo]
            out_a[lo] = out_a[hi]
            out_a[hi] = y
            lo += 1
            hi -= 1
    return out_g[:at], out_r[:at], out_k[:at], out_a[:at]


_UNION = None
_runs_sort = None  # ehist's compiled _desc_order (natural runs merged), which _future_maxima calls


def _union_kernel():
    global _UNION, _runs_sort
    if _UNION is None:
        _runs_sort = compiled.run_merge_order()
        _UNION = compiled.kernel(_future_maxima)
    return _UNION


_COMPILED = None
_COUNTS = None
_ENCODE = None
_wvarint = None  # the compiled ehist.compiled.write_varint, which _encode_all calls
_varint = None  # the compiled ehist.compiled.read_varint and gcd, and _decode_one, which _decode_all calls
_gcd = None
_dec1 = None


def _kernel():
    global _COMPILED, _varint, _gcd, _dec1
    if _COMPILED is None:
        _varint, _gcd = compiled.jit(compiled.read_varint), compiled.jit(compiled.gcd)
        _dec1 = compiled.jit(_decode_one)
        _COMPILED = compiled.kernel(_decode_all)
    return _COMPILED


def _encode_kernel():
    global _ENCODE, _wvarint
    if _ENCODE is None:
        _kernel()  # the compiled gcd
        _wvarint = compiled.jit(compiled.write_varint)
        _ENCODE = compiled.kernel(_encode_all)
    return _ENCODE


def _counts_kernel():
    global _COUNTS
    if _COUNTS is None:
        _kernel()
        _COUNTS = compiled.kernel(_window_counts)
    return _COUNTS


def window_rank_counts(buf, starts, ends, ticked, version_2, newest, window, precision: int, group_starts, at,
                       query_window: int):
    """Decode sliding HyperLogLogs (their payloads ``buf[starts[i]:ends[i]]``,
    as :func:`decode_entries` takes them, all of one ``precision``) and
    count, for each group of consecutive sketches
    (``group_starts``: ``groups + 1`` offsets), how many of its ``2**precision``
    registers hold each value over the window ``(at[g] - query_window,
    at[g]]``: each register's largest rank of an entry that young in any
    sketch of the group, the union's registers without merging, nothing
    built per entry.

    Returns
    -------
    (accepted mask, counts): ``counts[g, k]`` registers of value ``k``
    (``k = 0``: empty); a group with a rejected sketch is to be answered
    by the caller another way.

    >>> _ = __import__("pytest").importorskip("numba")
    >>> from distinct import SlidingHyperLogLog, hll_layout as L
    >>> b = np.frombuffer(SlidingHyperLogLog(100, 4).update([1, 2, 3], [7, 8, 9]).to_bytes(), dtype=np.uint8)
    >>> ticked = L.flags_of(b, np.array([0])) & L.FLAG_TICK > 0
    >>> ok, counts = window_rank_counts(b, [L.HEAD_BYTES], [b.size - 4], ticked, [True], [3], [100], 4, [0, 1],
    ...                                 [3], 100)
    >>> bool(ok[0]), int(counts.sum()), int(counts[0, 0])  # 16 registers, the sketch's 2 entries set 2
    (True, 16, 14)
    """
    buf, starts, ends = compiled.spans(buf, starts, ends, ticked=ticked, version_2=version_2, newest=newest,
                                       window=window)
    if not 4 <= int(precision) <= 18:
        raise ValueError(f"precision must be in [4, 18], got {precision}")
    group_starts = np.ascontiguousarray(group_starts, dtype=np.int64)
    at = np.ascontiguousarray(at, dtype=np.int64)
    if (group_starts.ndim != 1 or group_starts.size < 1 or group_starts[0] != 0 or group_starts[-1] != starts.size
            or np.any(np.diff(group_starts) < 0) or at.shape != (group_starts.size - 1,)):
        raise ValueError(f"group_starts must run from 0 to {starts.size} without decreasing, with one time per group")
    if int(query_window) < 1:
        raise ValueError(f"query_window must be at least 1, got {query_window}")
    return _counts_kernel()(buf, starts, ends, np.ascontiguousarray(ticked, dtype=np.bool_),
                            np.ascontiguousarray(version_2, dtype=np.bool_), np.ascontiguousarray(newest, dtype=np.int64),
                            np.ascontiguousarray(window, dtype=np.int64), np.int64(precision), group_starts, at,
                            np.uint64(query_window))


def _window_counts(buf, starts, ends, ticked, version_2, newest, window, precision, group_starts, at, query_window):
    count = starts.size
    groups = group_starts.size - 1
    big = np.uint64(1) << np.uint64(40)
    most = 0
    declared = np.zeros(count, dtype=np.int64)
    for b in range(count):
        n, pos, good = _varint(buf, starts[b], ends[b])
        if good and n >= np.uint64(1) and n < big and np.int64(n) * 3 <= ends[b] - pos:
            declared[b] = np.int64(n)
            most = max(most, declared[b])
    reg = np.empty(most, dtype=np.int64)
    ts = np.empty(most, dtype=np.int64)
    rank = np.empty(most, dtype=np.int64)
    m = np.int64(1) << precision
    ranks = 66 - precision
    top = np.zeros(m, dtype=np.int64)
    touched = np.empty(m, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    counts = np.zeros((groups, ranks), dtype=np.int64)
    for g in range(groups):
        used = 0
        now = np.uint64(at[g])
        for b in range(group_starts[g], group_starts[g + 1]):
            n = declared[b]
            if not _dec1(buf, starts[b], ends[b], n, ticked[b], version_2[b], newest[b], window[b], precision,
                         reg, ts, rank, 0):
                continue
            ok[b] = True
            for i in range(n):  # live: at - t < window, exact as uint64 (every t <= at)
                if now - np.uint64(ts[i]) < query_window:
                    r = reg[i]
                    if top[r] == 0:
                        touched[used] = r
                        used += 1
                    if rank[i] > top[r]:
                        top[r] = rank[i]
        for j in range(used):
            counts[g, top[touched[j]]] += 1
            top[touched[j]] = 0
        counts[g, 0] = m - used
    return ok, counts


def _decode_all(buf, starts, ends, ticked, version_2, newest, window, precision):
    count = starts.size
    big = np.uint64(1) << np.uint64(40)
    # an entry takes 3 bytes at least (a delta, a rank, an age): the room for each sketch's entries
    declared = np.zeros(count, dtype=np.int64)
    for b in range(count):
        n, pos, good = _varint(buf, starts[b], ends[b])
        if good and n >= np.uint64(1) and n < big and np.int64(n) * 3 <= ends[b] - pos:
            declared[b] = np.int64(n)
    cap = declared.sum()
    reg = np.empty(cap, dtype=np.int64)
    ts = np.empty(cap, dtype=np.int64)
    rank = np.empty(cap, dtype=np.int64)
    ok = np.zeros(count, dtype=np.bool_)
    counts = np.zeros(count, dtype=np.int64)
    at = 0
    for b in range(count):
        n = declared[b]
        if not _dec1(buf, starts[b], ends[b], n, ticked[b], version_2[b], newest[b], window[b], precision[b],
                    reg, ts, rank, at):
            continue
        ok[b] = True
        counts[b] = n
        at += n
    return ok, counts, reg[:at], ts[:at], rank[:at]


def _decode_one(buf, start, end, n, ticked, version_2, newest, window, precision, reg, ts, rank, at):
    """One sketch's payload ``buf[start:end]`` (``n`` entries declared)
    into ``reg``, ``ts`` and ``rank`` at ``at``; whether every check of
    ``SlidingHyperLogLog.from_bytes`` passed."""
    top_bit = np.uint64(1) << np.uint64(63)
    if n == 0 or newest == INT64_MIN:
        return False
    _, pos, _ = _varint(buf, start, end)
    tick = np.uint64(1)
    if ticked:
        tick, pos, good = _varint(buf, pos, end)
        if not good or tick < np.uint64(2):
            return False
    m = np.int64(1) << precision
    fine = True
    r = np.int64(0)
    for i in range(n):  # register deltas: registers below m
        d, pos, good = _varint(buf, pos, end)
        if not good or d >= np.uint64(m):
            fine = False
            break
        r += np.int64(d)
        if r >= m:
            fine = False
            break
        reg[at + i] = r
    if not fine or end - pos < n:
        return False
    top_rank = 65 - precision
    for i in range(n):  # ranks: one byte each, in [1, 65 - p]
        k = np.int64(buf[pos + i])
        if k < 1 or k > top_rank:
            fine = False
            break
        rank[at + i] = k
    if not fine:
        return False
    pos += n
    g = np.uint64(0)
    top = np.uint64(0)
    for i in range(n):  # ages: newest - t, in ticks
        a, pos, good = _varint(buf, pos, end)
        if not good:
            fine = False
            break
        g = _gcd(g, a)
        if a > top:
            top = a
        ts[at + i] = np.int64(a)  # the age for now
    if not fine or pos != end:
        return False
    w = np.uint64(window)
    if version_2:
        # the tick is the ages' gcd exactly when that is 2 or more; every age below the window
        if (tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2)):
            return False
        if top >= w // tick + (np.uint64(1) if w % tick != np.uint64(0) else np.uint64(0)):
            return False
    if top * tick >= w:
        return False
    room = (np.uint64(newest) ^ top_bit) - np.uint64(1)  # every time above -2**63 (from_bytes' rule)
    for i in range(n):
        age = np.uint64(ts[at + i]) * tick
        if age > room:
            fine = False
            break
        ts[at + i] = newest - np.int64(age)
    if not fine:
        return False
    for i in range(1, n):  # inside each register: times increasing, ranks decreasing
        if reg[at + i] == reg[at + i - 1] and (ts[at + i] <= ts[at + i - 1] or rank[at + i] >= rank[at + i - 1]):
            fine = False
            break
    if not fine:
        return False
    return True
