"""benchmarks.conftest.median_interval against brute force: the coverage
of its order statistics, counted over every way the draws can fall."""

from __future__ import annotations

import itertools
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

bench = pytest.importorskip("benchmarks.conftest")


def coverage(n: int, j: int) -> float:
    """P(the j-th smallest of n draws <= median <= the j-th largest), 0-based
    j: each draw falls below the median with probability 1/2, so count the
    patterns with more than j draws on each side."""
    hits = sum(1 for below in itertools.product((0, 1), repeat=n) if j < sum(below) < n - j)
    return hits / 2 ** n


@pytest.mark.parametrize("n", range(1, 15))
def test_interval_is_the_narrowest_with_the_coverage(n):
    values = [float(v) for v in range(n)]  # sorted: index j is the j-th order statistic
    lo, hi = bench.median_interval(values[::-1])
    j = int(lo)
    assert hi == n - 1 - j
    if n >= 6:
        assert coverage(n, j) >= 0.95
    else:  # too few values to reach 95%: the widest there is
        assert j == 0
    if j + 1 < n - j - 1:  # one step narrower would fall short
        assert coverage(n, j + 1) < 0.95


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=60))
def test_interval_holds_the_sample_median(values):
    lo, hi = bench.median_interval(values)
    assert lo in values and hi in values
    assert lo <= statistics.median(values) <= hi


def test_no_values_is_an_error():
    with pytest.raises(ValueError, match="no values"):
        bench.median_interval([])
