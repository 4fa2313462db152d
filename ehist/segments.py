"""Flat arrays cut into segments: the one helper every columnar codec uses
to gather many slices at once.

>>> ranges(np.array([5, 0, 9]), np.array([7, 0, 10])).tolist()
[5, 6, 9]
"""

from __future__ import annotations

import numpy as np

from . import compiled

__all__ = ["gather", "ranges", "search_segments", "order_by", "every", "groups_checked"]


def ranges(starts, ends) -> np.ndarray:
    """The positions ``starts[i]:ends[i]`` of every ``i``, concatenated
    (int64), without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(ends, dtype=np.int64) - starts
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths - starts, lengths)


def every(indices, n: int) -> bool:
    """Whether ``indices`` are ``0 .. n - 1`` in order: a take of them
    changes nothing, and the caller may keep the arrays it has.

    >>> every(np.arange(4), 4), every(np.array([0, 2, 3]), 4), every(np.array([1, 0]), 2)
    (True, False, False)
    """
    idx = np.asarray(indices)
    if idx.size != n:
        return False
    return n == 0 or (int(idx[0]) == 0 and int(idx[-1]) == n - 1 and bool((np.diff(idx) == 1).all()))


def gather(src, starts, ends) -> np.ndarray:
    """``src[starts[i]:ends[i]]`` of every ``i``, concatenated: ``src[ranges(starts,
    ends)]``, copied span by span in compiled code where it runs
    (:func:`ehist.compiled.gather`) rather than through an index per element.

    >>> gather(np.arange(10, dtype=np.uint8), [5, 0, 9], [7, 0, 10]).tolist()
    [5, 6, 9]
    """
    if compiled.active():
        return compiled.gather(src, starts, ends)
    return np.asarray(src)[ranges(starts, ends)]


def search_segments(values, lo, hi, needles) -> np.ndarray:
    """Where each column of ``needles`` (``rows x n``) goes in sorted
    ``values``, each column known to fall in ``values[lo[c]:hi[c]]``
    (a segment of one key prefix, say): ``np.searchsorted(values,
    needles)`` clipped to the segment.  Compiled, each search stays in its
    segment (:func:`ehist.compiled.search_segments`); else one search of
    the whole array.

    >>> search_segments(np.array([1, 5, 9, 12, 14]), [0, 3], [3, 5], np.array([[5, 13], [10, 15]])).tolist()
    [[1, 4], [3, 5]]
    """
    if compiled.active():
        return compiled.search_segments(values, lo, hi, needles)
    needles = np.atleast_2d(needles)
    return np.clip(np.searchsorted(values, needles), np.asarray(lo)[None, :], np.asarray(hi)[None, :])


def order_by(major, minor) -> np.ndarray:
    """The stable order of rows by ``major``, then ``minor`` (integer
    arrays): ``np.lexsort((minor, major))``, by one stable argsort of the
    key ``(major - min) * span(minor) + (minor - min)`` where it fits 63
    bits (each run's rows by time, say: one sort pass where lexsort makes
    one per key: phase one of ``aggregate``, in process, ran ~16% faster
    with it), in the narrowest type that holds it (numpy's radix sort for
    16 bits); else by ``np.lexsort`` itself.

    >>> order_by(np.array([2, 1, 2, 1]), np.array([5, 7, 3, 7])).tolist()
    [1, 3, 2, 0]
    """
    major, minor = np.asarray(major), np.asarray(minor)
    if major.shape != minor.shape or major.ndim != 1:
        raise ValueError(f"major and minor must be one-dimensional and of one length, got {major.shape}, "
                         f"{minor.shape}")
    if major.size < 2 or major.dtype.kind not in "iub" or minor.dtype.kind not in "iub":
        return np.lexsort((minor, major))
    lo_major, lo_minor = int(major.min()), int(minor.min())
    span_major, span_minor = int(major.max()) - lo_major + 1, int(minor.max()) - lo_minor + 1
    bound = span_major * span_minor
    if bound >= 1 << 63:
        return np.lexsort((minor, major))
    # differences from the minimum in uint64 (wrapping is exact there; the key is below 2**63)
    key = (major.astype(np.uint64) - np.uint64(lo_major & 0xFFFFFFFFFFFFFFFF)) * np.uint64(span_minor) + (
        minor.astype(np.uint64) - np.uint64(lo_minor & 0xFFFFFFFFFFFFFFFF))
    return np.argsort(key.astype(np.uint16 if bound <= 1 << 16 else np.uint32 if bound <= 1 << 32 else np.int64),
                      kind="stable")


def order_by_three(major, minor, last) -> np.ndarray:
    """The stable order of rows by ``major``, then ``minor``, then
    ``last`` (integer arrays): ``np.lexsort((last, minor, major))``, by
    :func:`order_by` of the first two and a lexsort of the rows that tie
    on them alone (a sketch's rows by time, then item hash: few share a
    time; a union's parts, each already in order, merge in the stable
    sort).

    >>> order_by_three(np.array([1, 0, 1, 1]), np.array([5, 7, 5, 2]), np.array([9, 3, 4, 8])).tolist()
    [1, 3, 2, 0]
    """
    major, minor, last = np.asarray(major), np.asarray(minor), np.asarray(last)
    order = order_by(major, minor)
    if order.size < 2:
        return order
    m, n = major[order], minor[order]
    tied = np.flatnonzero((m[1:] == m[:-1]) & (n[1:] == n[:-1]))
    if tied.size:
        at = np.unique(np.concatenate([tied, tied + 1]))
        sub = order[at]
        order[at] = sub[np.lexsort((last[sub], minor[sub], major[sub]))]
    return order


def groups_checked(group_starts, count: int) -> np.ndarray:
    """``group_starts`` as int64; ValueError unless the groups start at 0
    and rise strictly below ``count`` (none when there is no sketch).

    >>> groups_checked([0, 2], 3).tolist()
    [0, 2]
    """
    group_starts = np.asarray(group_starts, dtype=np.int64)
    if group_starts.ndim != 1 or (count and (group_starts.size == 0 or group_starts[0] != 0 or np.any(
            np.diff(group_starts) <= 0) or group_starts[-1] >= count)) or (not count and group_starts.size):
        raise ValueError(f"group_starts must start at 0 and rise strictly below {count}, got "
                         f"{group_starts.tolist()[:8]}")
    return group_starts
