"""Flat arrays cut into segments: the one helper every columnar codec uses
to gather many slices at once.

>>> ranges(np.array([5, 0, 9]), np.array([7, 0, 10])).tolist()
[5, 6, 9]
"""

from __future__ import annotations

import numpy as np

from . import compiled

__all__ = ["gather", "ranges", "search_segments"]


def ranges(starts, ends) -> np.ndarray:
    """The positions ``starts[i]:ends[i]`` of every ``i``, concatenated
    (int64), without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(ends, dtype=np.int64) - starts
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths - starts, lengths)


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
