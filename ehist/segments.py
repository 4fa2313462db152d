"""Flat arrays cut into segments: the one helper every columnar codec uses
to gather many slices at once.

>>> ranges(np.array([5, 0, 9]), np.array([7, 0, 10])).tolist()
[5, 6, 9]
"""

from __future__ import annotations

import numpy as np

__all__ = ["ranges"]


def ranges(starts, ends) -> np.ndarray:
    """The positions ``starts[i]:ends[i]`` of every ``i``, concatenated
    (int64), without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(ends, dtype=np.int64) - starts
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths - starts, lengths)
