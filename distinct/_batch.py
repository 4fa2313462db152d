"""What the distinct sketches share: batch updates of hashed items."""

from __future__ import annotations

import math

import numpy as np

from ehist.synopsis import Synopsis
from ehist.validation import coerce_timestamps, sort_batch
from ehist.hashing import as_hashes, hash64


def hashed_batch(timestamps, items, seed: int, newest: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``(timestamps, hashes)`` of a batch, validated whole.

    Raises ValueError on mismatched lengths or bad items and LateDataError
    on timestamps older than ``newest``; the arrays are empty for an empty
    batch.
    """
    ts = coerce_timestamps(timestamps)
    hashes = hash64(items, seed)
    if hashes.shape[0] != ts.shape[0]:
        raise ValueError(
            f"timestamps and items have different lengths ({ts.shape[0]} and {hashes.shape[0]})"
        )
    if ts.size == 0:
        return ts, hashes
    return sort_batch(ts, hashes, newest)


def checked_hashes(timestamps, hashes, newest: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``(timestamps, hashes)`` of a batch of items already hashed
    (uint64, or int64 bit patterns), validated whole."""
    ts = coerce_timestamps(timestamps)
    hashes = as_hashes(hashes)
    if hashes.shape != ts.shape:
        raise ValueError(f"timestamps and hashes have different lengths ({ts.size} and {hashes.size})")
    if ts.size == 0:
        return ts, hashes
    return sort_batch(ts, hashes, newest)


class _HashedItems(Synopsis):
    """Base of the sketches of distinct items (:class:`~distinct.SlidingFM`,
    :class:`~distinct.SlidingHyperLogLog`): items are hashed with the
    sketch's seed, then inserted by the family's ``_insert(ts, hashes)``
    (sorted, checked)."""

    __slots__ = ()
    #: ``c`` of the relative standard error ``c / sqrt(m)``.
    _error_constant = 0.0

    seed = property(lambda self: self._seed, doc="The hash seed.")

    @property
    def relative_standard_error(self) -> float:
        """``c / sqrt(m)`` of ``m`` registers or bitmaps: ``c`` 0.78 for
        Flajolet-Martin, 1.04 for HyperLogLog."""
        return self._error_constant / math.sqrt(self._m)

    def update(self, timestamps, items):
        """Insert a batch of ``(timestamp, item)`` pairs, vectorized.

        Items are integers, strings or bytes (arrays, lists, pandas Series),
        hashed with :func:`ehist.hashing.hash64` and the sketch's seed.  The
        batch is validated whole before anything changes; it is stably
        sorted by timestamp, whose oldest must be ``>=`` :attr:`newest`.

        Raises
        ------
        ValueError
            Mismatched lengths, items of mixed or unsupported kinds.
        LateDataError
            A timestamp older than :attr:`newest`.
        """
        ts, hashes = hashed_batch(timestamps, items, self._seed, self._newest)
        return self._insert(ts, hashes)

    def update_hashes(self, timestamps, hashes):
        """Insert items already hashed with ``ehist.hashing.hash64(items,
        seed)`` (uint64, or their int64 bit patterns): the same result as
        :meth:`update` on the items, for callers that keep hashes (the
        streaming state buffers rows not yet in order as hashes).

        >>> from distinct import SlidingFM, SlidingHyperLogLog
        >>> from ehist.hashing import hash64
        >>> all(cls(100).update([1, 2], ["x", "y"]) == cls(100).update_hashes([1, 2], hash64(["x", "y"], 0))
        ...     for cls in (SlidingFM, SlidingHyperLogLog))
        True
        """
        ts, hashes = checked_hashes(timestamps, hashes, self._newest)
        return self._insert(ts, hashes)

    def add(self, timestamp: int, item):
        """Insert one item."""
        return self.update([timestamp], [item])
