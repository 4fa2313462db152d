"""Unions of many groups of sliding HyperLogLogs at once.

:meth:`SlidingHyperLogLog.merge_all` unites a group's sketches: the
first's entries and every other's, the ones older than the group's newest
time less the window dropped (the first's too, as soon as another sketch
has a newest time), reduced to each register's list of future possible
maxima.  :func:`union_bytes` does it for every group of a batch in a few
numpy passes (entries sorted by group, register and time; one segmented
running maximum keeps the future maxima) and writes each union's bytes
with :func:`distinct.columnar.encode_entries`: byte for byte
``merge_all(group).to_bytes()`` (``tests/test_union_table.py``).

Examples
--------
>>> from distinct import SlidingHyperLogLog
>>> parts = [SlidingHyperLogLog(100, 8).update(range(p, 90, 3), range(p, 90, 3)) for p in range(3)]
>>> out = union_bytes(parts + parts[:1], [0, 3])
>>> out[0] == SlidingHyperLogLog.merge_all(parts).to_bytes(), out[1] == parts[0].to_bytes()
(True, True)
"""

from __future__ import annotations

import numpy as np

from ehist import compiled as ehist_compiled
from ehist.validation import INT64_MIN

from .columnar import SketchColumn, encode_entries, future_maxima_blocks
from .compiled import future_maxima

__all__ = ["union_bytes"]

_U64 = np.uint64


def union_bytes(sketches, group_starts) -> list:
    """``SlidingHyperLogLog.merge_all(group).to_bytes()`` of every group.

    Parameters
    ----------
    sketches : sequence of SlidingHyperLogLog, or a SketchColumn
        All of one window, precision and seed, each group's in the order
        ``merge_all`` takes them (a :class:`~distinct.columnar.SketchColumn`
        decoded from bytes skips the objects).
    group_starts : int array
        Group ``i`` is ``sketches[group_starts[i]:group_starts[i + 1]]``;
        ``group_starts[0] == 0`` and no group is empty.

    Raises
    ------
    IncompatibleSketchError (a ValueError)
        Sketches of different windows, precisions or seeds.
    """
    col = sketches if isinstance(sketches, SketchColumn) else SketchColumn.from_sketches(sketches)
    n = len(col)
    starts = np.asarray(group_starts, dtype=np.int64)
    if starts.ndim != 1 or (n and (starts.size == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0)
                                   or starts[-1] >= n)) or (not n and starts.size):
        raise ValueError(f"group_starts must start at 0 and increase strictly below {n}, got {starts!r}")
    if not n:
        return []
    window, p, seed = col.check_alike()
    groups = starts.size
    owner = np.repeat(np.arange(groups), np.diff(np.append(starts, n)))  # each sketch's group
    is_first = np.zeros(n, dtype=bool)
    is_first[starts] = True
    has, stamp = col.has, col.newest
    # merge_all leaves the first as it is unless another sketch has a newest time
    others = np.bincount(owner[has & ~is_first], minlength=groups) > 0
    newest = np.full(groups, INT64_MIN, dtype=np.int64)
    np.maximum.at(newest, owner[has], stamp[has])
    g_has = has[starts] | others

    if ehist_compiled.active():  # each group merged and reduced in one compiled loop
        entry_starts = np.concatenate([[0], np.cumsum(col.counts)])[np.append(starts, n)]
        group, reg, rank, age = future_maxima(entry_starts, col.reg, col.ts, col.rank, newest, window, ~others)
        return encode_entries(group, reg, rank, age, np.where(g_has, newest, 0), g_has, window, p, seed)
    group = np.repeat(owner, col.counts)
    reg, ts, rank = col.reg, col.ts, col.rank
    age = newest[group].view(_U64) - ts.view(_U64)  # exact: t <= the group's newest
    alive = ~others[group] | (age < _U64(window))
    group, reg, ts, rank, age = group[alive], reg[alive], ts[alive], rank[alive], age[alive]
    group, reg, rank, age = _future_maxima(group, reg, rank, age, p)
    return encode_entries(group, reg, rank, age, np.where(g_has, newest, 0), g_has, window, p, seed)


def _future_maxima(group, reg, rank, age, p: int):
    """The entries no entry of their group and register with a later or
    equal time matches or beats in rank, sorted by group, register and
    time (``age`` decreasing), as ``(group, register, rank, age)``."""
    if group.size == 0:
        return group, reg, rank, age
    top_age = int(age.max())
    age_bits = top_age.bit_length()
    if p + age_bits + 7 <= 63:
        # register, time (as the age below the largest) and rank in one key; then the group, stably
        key = (reg << (age_bits + 7)) | ((top_age - age.astype(np.int64)) << 7) | rank
        order = np.argsort(key, kind="stable")
        order = order[np.argsort(group[order], kind="stable")]
    else:
        order = np.lexsort((rank, ~age, reg, group))  # ~age ascending: time ascending
    group, reg, rank, age = group[order], reg[order], rank[order], age[order]
    at, top = future_maxima_blocks(np.r_[True, (group[1:] != group[:-1]) | (reg[1:] != reg[:-1])],
                                   np.r_[True, age[1:] != age[:-1]], rank)
    return group[at], reg[at], top, age[at]
