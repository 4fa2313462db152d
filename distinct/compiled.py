"""The compiled decoder of stored sliding HyperLogLogs (numba, optional).

:func:`distinct.columnar.sketches_from_bytes` and
:meth:`~distinct.columnar.SketchColumn.from_bytes` decode many stored
sketches in numpy passes over every byte; :func:`decode_entries` reads each
sketch's payload once, with the same checks, when :func:`ehist.compiled.active`
(numba installed, the compiled loops not switched off).  Layout:
:mod:`distinct.hll_layout`.
"""

from __future__ import annotations

import numpy as np

from ehist import compiled

__all__ = ["decode_entries"]


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


_COMPILED = None
_varint = None  # the compiled ehist.compiled.read_varint and gcd, which _decode_all calls
_gcd = None


def _kernel():
    global _COMPILED, _varint, _gcd
    if _COMPILED is None:
        _varint, _gcd = compiled.jit(compiled.read_varint), compiled.jit(compiled.gcd)
        _COMPILED = compiled.jit(_decode_all)
    return _COMPILED


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
    top_bit = np.uint64(1) << np.uint64(63)
    at = 0
    for b in range(count):
        n = declared[b]
        if n == 0 or newest[b] == np.iinfo(np.int64).min:
            continue
        end = ends[b]
        _, pos, _ = _varint(buf, starts[b], end)
        tick = np.uint64(1)
        if ticked[b]:
            tick, pos, good = _varint(buf, pos, end)
            if not good or tick < np.uint64(2):
                continue
        m = np.int64(1) << precision[b]
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
            continue
        top_rank = 65 - precision[b]
        for i in range(n):  # ranks: one byte each, in [1, 65 - p]
            k = np.int64(buf[pos + i])
            if k < 1 or k > top_rank:
                fine = False
                break
            rank[at + i] = k
        if not fine:
            continue
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
            continue
        w = np.uint64(window[b])
        if version_2[b]:
            # the tick is the ages' gcd exactly when that is 2 or more; every age below the window
            if (tick > np.uint64(1) and g != np.uint64(1)) or (tick == np.uint64(1) and g >= np.uint64(2)):
                continue
            if top >= w // tick + (np.uint64(1) if w % tick != np.uint64(0) else np.uint64(0)):
                continue
        if top * tick >= w:
            continue
        room = (np.uint64(newest[b]) ^ top_bit) - np.uint64(1)  # every time above -2**63 (from_bytes' rule)
        for i in range(n):
            age = np.uint64(ts[at + i]) * tick
            if age > room:
                fine = False
                break
            ts[at + i] = newest[b] - np.int64(age)
        if not fine:
            continue
        for i in range(1, n):  # inside each register: times increasing, ranks decreasing
            if reg[at + i] == reg[at + i - 1] and (ts[at + i] <= ts[at + i - 1] or rank[at + i] >= rank[at + i - 1]):
                fine = False
                break
        if not fine:
            continue
        ok[b] = True
        counts[b] = n
        at += n
    return ok, counts, reg[:at], ts[:at], rank[:at]
