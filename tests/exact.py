"""Brute-force exact sliding windows, the oracle of the property tests."""

from __future__ import annotations

import numpy as np


def exact_sums(ts: np.ndarray, values: np.ndarray, nows: np.ndarray, window: int) -> np.ndarray:
    """Exact sum of values with now - window < ts <= now, for each now (Python ints)."""
    order = np.argsort(ts, kind="stable")
    ts = np.asarray(ts, dtype=np.int64)[order]
    vals = [int(v) for v in np.asarray(values)[order]]
    prefix = [0]
    for v in vals:
        prefix.append(prefix[-1] + v)
    out = []
    for now in np.asarray(nows).tolist():
        hi = int(np.searchsorted(ts, now, side="right"))
        lo = int(np.searchsorted(ts, now - window, side="right"))
        out.append(prefix[hi] - prefix[lo])
    return out


def in_window_count(ts: np.ndarray, values: np.ndarray, now: int, window: int) -> tuple[int, int]:
    """(number of elements with a non-zero value in the window, largest value)."""
    ts = np.asarray(ts, dtype=np.int64)
    values = np.asarray(values)
    mask = (ts > now - window) & (ts <= now) & (values > 0)
    n = int(mask.sum())
    r = int(values[mask].max()) if n else 1
    return n, max(r, 1)
