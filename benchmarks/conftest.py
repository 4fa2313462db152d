"""Benchmarks share one results table and print a summary at the end."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest

RESULTS: dict[str, dict] = {}
OUT = Path(__file__).parent / "results"


def record(name: str, benchmark, elements: int, **extra) -> None:
    """Keep the best time of a benchmark (the least noisy statistic)."""
    best = benchmark.stats.stats.min
    RESULTS[name] = {"seconds": best, "elements": elements, "per_second": elements / best, **extra}
    benchmark.extra_info.update(RESULTS[name])


def machine() -> dict:
    import ehist

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ehist": ehist.__version__,
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
    }


@pytest.fixture(scope="session")
def results():
    return RESULTS


def pytest_sessionfinish(session, exitstatus):
    if not RESULTS:
        return
    OUT.mkdir(exist_ok=True)
    (OUT / "latest.json").write_text(json.dumps({"machine": machine(), "results": RESULTS}, indent=2))
