"""Sliding-window counts and sums over a real event stream, with guarantees.

The stream: every commit of the numpy repository (2001-2026), bursty
timestamps and heavy-tailed message sizes (data/numpy-commit-stream.csv.gz).
The questions a monitoring job asks, answered from a few kilobytes:

* how many commits in the last 30 days?          (a sliding count)
* how many message bytes in the last 7 days?     (a sliding sum)

Each answer comes with bounds that always bracket the exact value; the exact
value (computed here by brute force for comparison) is printed beside it.
The stream is fed in batches, split across two "partitions" that are merged
at the end, and the merged sketch goes through bytes, as it would between
Spark stages.

Run:  python examples/core_sliding_counts.py
"""

from __future__ import annotations

import gzip
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ehist import ExponentialHistogram

DATA = Path(__file__).resolve().parents[1] / "data" / "numpy-commit-stream.csv.gz"
DAY = 86_400


def load():
    with gzip.open(DATA, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.int64)
    return rows[:, 0], rows[:, 1], rows[:, 2]


def exact(ts, values, now, window):
    mask = (ts > now - window) & (ts <= now)
    return int(values[mask].sum())


def day(t: int) -> str:
    return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%d")


def main(eps: float = 0.02) -> None:
    ts, author, size = load()
    print(f"{len(ts):,} commits from {day(ts[0])} to {day(ts[-1])}, eps = {eps}\n")

    commits = ExponentialHistogram(window=365 * DAY, eps=eps)
    msg_bytes = ExponentialHistogram(window=365 * DAY, eps=eps)

    header = (f"{'as of':10s}  {'commits/30d':>11s} {'[lower, upper]':>17s} {'exact':>6s}"
              f"   {'msg bytes/7d':>12s} {'[lower, upper]':>19s} {'exact':>7s}")
    print(header)
    print("-" * len(header))
    checkpoints = np.linspace(0, len(ts), 13).astype(int)[1:]
    start = 0
    for stop in checkpoints:
        commits.update(ts[start:stop])
        msg_bytes.update(ts[start:stop], size[start:stop])
        start = stop
        now = commits.newest
        c_lo, c_hi = commits.bounds(window=30 * DAY)
        b_lo, b_hi = msg_bytes.bounds(window=7 * DAY)
        print(
            f"{day(now):10s}  {commits.estimate(window=30 * DAY):11.1f} "
            f"{f'[{c_lo}, {c_hi}]':>17s} {exact(ts, np.ones_like(ts), now, 30 * DAY):6d}"
            f"   {msg_bytes.estimate(window=7 * DAY):12.1f} {f'[{b_lo}, {b_hi}]':>19s} "
            f"{exact(ts, size, now, 7 * DAY):7d}"
        )

    # Two partitions of the same stream (authors split by hash parity),
    # summarized separately, shipped as bytes, merged.
    parts = [author % 2 == p for p in (0, 1)]
    blobs = [ExponentialHistogram(365 * DAY, eps).update(ts[m], size[m]).to_bytes() for m in parts]
    merged = ExponentialHistogram.from_bytes(blobs[0]).merge(ExponentialHistogram.from_bytes(blobs[1]))
    now = int(ts[-1])
    lo, hi = merged.bounds(window=90 * DAY)
    print(
        f"\nmerged from 2 partitions ({len(blobs[0])} + {len(blobs[1])} bytes): message bytes in "
        f"the last 90 days = {merged.estimate(window=90 * DAY):.0f} in [{lo}, {hi}], "
        f"exact {exact(ts, size, now, 90 * DAY)}"
    )
    print(
        f"whole-history sketch: {len(msg_bytes)} buckets, {len(msg_bytes.to_bytes())} bytes "
        f"(exact answers for any window up to a year would need all "
        f"{int(np.sum(ts > now - 365 * DAY)):,} timestamps)"
    )


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.02)
