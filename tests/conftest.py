"""Shared test configuration.

EHIST_HYPOTHESIS_SCALE multiplies every property test's example count
(default 1): ``EHIST_HYPOTHESIS_SCALE=20 python -m pytest tests`` is the
thorough run to do before touching a guarantee.
"""

from __future__ import annotations

import os

SCALE = max(1, int(os.environ.get("EHIST_HYPOTHESIS_SCALE", "1")))


def examples(n: int) -> int:
    """Number of hypothesis examples for a test that runs ``n`` by default."""
    return n * SCALE
