"""Validation shared by the distinct sketches' batch updates."""

from __future__ import annotations

import numpy as np

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
