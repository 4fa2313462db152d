"""The numpy commit stream (data/, a copy of the shared data set): real, bursty timestamps."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

PATH = Path(__file__).resolve().parents[1] / "data" / "numpy-commit-stream.csv.gz"


def load_commits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ts, author, message_bytes) as int64 arrays, sorted by ts."""
    with gzip.open(PATH, "rt") as f:
        data = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, 0], data[:, 1], data[:, 2]
