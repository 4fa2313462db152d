"""Bad input gets a clear error and changes nothing."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ehist import EhistError, ExponentialHistogram, LateDataError
from ehist.errors import SumOverflowError


@pytest.fixture
def h():
    return ExponentialHistogram(100, 0.1).update(np.arange(50), np.arange(50) % 3)


def unchanged(h, action, exc, match):
    before = h.to_bytes()
    with pytest.raises(exc, match=match):
        action()
    assert h.to_bytes() == before


@pytest.mark.parametrize(
    "values, match",
    [
        ([1, -2, 3], "values must be non-negative integers, found -2"),
        ([1.0, float("nan"), 2.0], "values must be finite integers, found nan"),
        ([1.0, 2.5, 2.0], "values must be integers, found 2.5"),
        ([1, float("inf"), 2], "finite integers, found inf"),
        (["a", "b", "c"], "values must be integers"),
        (np.array([1, 2**63, 3], dtype=np.uint64), "values must be < 2\\*\\*63"),
        ([1, 2], "different lengths \\(3 and 2\\)"),
        (np.ones((3, 1)), "one-dimensional"),
    ],
)
def test_bad_values(h, values, match):
    unchanged(h, lambda: h.update([60, 61, 62], values), ValueError, match)


def test_sum_overflow(h):
    """A sum past int64 is a SumOverflowError: a ValueError as every bad
    input, and an OverflowError, what the Spark layer raises for it."""
    big = np.array([2**62, 2**62], dtype=np.int64)
    unchanged(h, lambda: h.update([60, 61], big), SumOverflowError, "overflow int64")
    unchanged(h, lambda: h.update([60, 61], [2**62, 2**62]), ValueError, "overflow int64")
    unchanged(h, lambda: h.update([60, 61], [2**62, 2**62]), OverflowError, "overflow int64")
    full = ExponentialHistogram(100, 0.1).update([1], [2**62])
    unchanged(full, lambda: full.merge(ExponentialHistogram(100, 0.1).update([2], [2**62])), SumOverflowError,
              "merged total would overflow int64")


def test_late_data(h):
    before = h.to_bytes()
    with pytest.raises(LateDataError) as info:
        h.update([60, 48, 70])
    assert info.value.timestamp == 48 and info.value.newest == 49
    assert "timestamp 48 is older than the newest timestamp already summarized (49)" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, EhistError)
    assert h.to_bytes() == before
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.timestamp, again.newest) == (48, 49)
    unchanged(h, lambda: h.add(10), LateDataError, "older than")


def test_equal_to_newest_is_not_late(h):
    h.add(49)
    assert h.newest == 49


def test_unsorted_batch_is_stably_sorted():
    ts = np.array([5, 3, 9, 3, 7, 5])
    vs = np.array([1, 2, 3, 4, 5, 6])
    a = ExponentialHistogram(10, 0.2).update(ts, vs)
    order = np.argsort(ts, kind="stable")
    b = ExponentialHistogram(10, 0.2).update(ts[order], vs[order])
    assert a == b


@pytest.mark.parametrize(
    "ts, match",
    [
        ([60.5, 61, 62], "timestamps must be integers, found 60.5"),
        ([60, float("nan"), 62], "finite integers, found nan"),
        ([True, False, True], "timestamps must be integers, got booleans"),
        (np.array([-(2**63), 0, 1], dtype=np.int64), "timestamps must be > -2\\*\\*63"),
        (np.array([2**63, 0, 1], dtype=np.uint64), "fit in int64"),
        ([["a"], ["b"], ["c"]], "one-dimensional"),
    ],
)
def test_bad_timestamps(ts, match):
    h = ExponentialHistogram(100, 0.1)
    unchanged(h, lambda: h.update(ts), ValueError, match)


@pytest.mark.parametrize(
    "window, eps, match",
    [
        (0, 0.1, "window must be in \\[1, 2\\*\\*63 - 1\\], got 0"),
        (-5, 0.1, "window must be in"),
        (10.5, 0.1, "window must be a positive integer"),
        (True, 0.1, "window must be a positive integer"),
        ("60", 0.1, "window must be a positive integer"),
        (10, 0.0, "eps must be in \\(0, 1\\), got 0.0"),
        (10, 1.0, "eps must be in \\(0, 1\\), got 1.0"),
        (10, -0.1, "eps must be in \\(0, 1\\)"),
        (10, float("nan"), "eps must be in \\(0, 1\\), got nan"),
        (10, "0.1", "eps must be a number"),
        (10, 1e-12, "eps must be >= 1e-9"),
    ],
)
def test_bad_parameters(window, eps, match):
    with pytest.raises(ValueError, match=match):
        ExponentialHistogram(window, eps)


@pytest.mark.parametrize(
    "now, window, match",
    [
        (48, None, "now \\(48\\) is earlier than the newest timestamp \\(49\\)"),
        (None, 0, "window must be in \\[1, 100\\]"),
        (None, 101, "window must be in \\[1, 100\\]"),
        (None, 5.5, "window must be an integer"),
        (50.5, None, "now must be an integer"),
    ],
)
def test_bad_queries(h, now, window, match):
    with pytest.raises(ValueError, match=match):
        h.estimate(now, window)
    with pytest.raises(ValueError, match=match):
        h.bounds(now, window)


def test_bad_vectorized_queries(h):
    with pytest.raises(ValueError, match="earlier than the newest"):
        h.bounds_many([60, 30])
    with pytest.raises(ValueError, match="window must be in"):
        h.estimates([60], window=0)


def test_accepted_input_kinds():
    """Lists, numpy ints of any width, bools as 0/1, integral floats; not
    datetime64, whose ticks would silently be read in its own unit."""
    ref = ExponentialHistogram(100, 0.1).update([1, 2, 3], [1, 0, 1])
    assert ExponentialHistogram(100, 0.1).update(np.array([1, 2, 3], dtype=np.int16),
                                                  np.array([True, False, True])) == ref
    assert ExponentialHistogram(100, 0.1).update([1.0, 2.0, 3.0], [1.0, 0.0, 1.0]) == ref
    assert ExponentialHistogram(100, 0.1).update(np.array([1, 2, 3], dtype=np.uint32),
                                                  np.array([1, 0, 1], dtype=np.uint8)) == ref
    d = np.array(["1970-01-01T00:00:01", "1970-01-01T00:00:02", "1970-01-01T00:00:03"],
                 dtype="datetime64[s]")
    with pytest.raises(ValueError, match=r"timestamps are datetime64\[s\].*convert explicitly"):
        ExponentialHistogram(100, 0.1).update(d, [1, 0, 1])
    assert ExponentialHistogram(100, 0.1).update(d.astype(np.int64), [1, 0, 1]) == ref
    assert ExponentialHistogram(100, 0.1).update([], []) == ExponentialHistogram(100, 0.1)
    one = ExponentialHistogram(100, 0.1).add(1).add(2, 0).add(3, np.int64(1))
    assert one == ref


def test_union_bounds_past_int64_are_refused():
    """Parts that each fit, a union that does not: the summed bounds would
    wrap around (two-phase aggregation of a key split across partitions
    answered -4.6e18), so they raise as the merge does."""
    from ehist.columnar import HistogramColumn

    parts = [ExponentialHistogram(100, 0.1).update([t], [2**62]).to_bytes() for t in (1, 2)]
    column = HistogramColumn.from_bytes(parts)
    assert column.union_bounds([0, 1])[1].tolist() == [2**62, 2**62]  # apart: each fits
    with pytest.raises(SumOverflowError, match="the union's total would overflow int64"):
        column.union_bounds([0])
