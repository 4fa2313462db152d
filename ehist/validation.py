"""Input checks shared by every synopsis family: timestamps, values,
parameters and query times, with one message per mistake.

Public: the other packages (``distinct``, ``lp_norms``, ``frequencies``,
``quantiles``, ``udaf``) check their inputs with these, so a window, an
eps, a timestamp or a ``now`` is refused in the same words everywhere.

>>> check_window(3600), k_of_eps(0.1)
(3600, 10)
>>> resolve_query(None, 60, newest=100, max_window=3600)
(100, 60)
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

from .errors import InvalidInputError, LateDataError, QueryTimeError, SumOverflowError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


__all__ = ["INT64_MIN", "INT64_MAX", "check_window", "check_eps", "k_of_eps", "datetime_message", "integral_array",
           "coerce_times", "coerce_timestamps", "coerce_values", "sort_batch", "batch_in_window", "checked_total", "resolve_query",
           "check_positive_int"]


def check_window(window) -> int:
    """A window as a Python int in ``[1, 2**63 - 1]`` (timestamp units)."""
    if isinstance(window, (bool, np.bool_)) or not isinstance(window, numbers.Integral):
        raise ValueError(
            f"window must be a positive integer (timestamp units), got {window!r}"
        )
    window = int(window)
    if not 1 <= window <= INT64_MAX:
        raise ValueError(f"window must be in [1, 2**63 - 1], got {window}")
    return window


def check_eps(eps) -> float:
    """A relative error as a float in ``(0, 1)``."""
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real):
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}")
    eps = float(eps)
    if not (0.0 < eps < 1.0) or math.isnan(eps):
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    if eps < 1e-9:
        raise ValueError(f"eps must be >= 1e-9 (k = ceil(1/eps) buckets per size), got {eps}")
    return eps


def k_of_eps(eps: float) -> int:
    """``k = ceil(1/eps)`` computed exactly, so that ``1/k <= eps`` holds."""
    return math.ceil(1 / Fraction(eps))


def datetime_message(what: str, dtype) -> str:
    """The one message for datetime64 / timedelta64 input, every family."""
    return (
        f"{what} are {dtype}: the synopses take integer timestamps in the unit of their window, "
        f"and a {dtype} array's integers are {np.datetime_data(dtype)[0]} ticks, so convert explicitly: "
        f"ts.astype('datetime64[s]').astype('int64') for seconds, or 'datetime64[us]' for microseconds "
        f"(the unit udaf uses for Spark timestamps)"
    )


def integral_array(x, what: str) -> np.ndarray:
    """Coerce to an integer numpy array, rejecting NaN and fractions."""
    arr = np.asarray(x)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind in "iu":
        return arr
    if kind == "b":
        return arr
    if kind == "f":
        if arr.size and not np.all(np.isfinite(arr)):
            bad = arr[~np.isfinite(arr)][0]
            raise ValueError(f"{what} must be finite integers, found {bad}")
        if arr.size and not np.all(arr == np.floor(arr)):
            bad = arr[arr != np.floor(arr)][0]
            raise ValueError(f"{what} must be integers, found {bad}")
        if arr.size and (arr.min() < -(2.0**63) or arr.max() >= 2.0**63):
            raise ValueError(f"{what} must fit in int64")
        return arr.astype(np.int64)
    if kind in "mM":
        raise InvalidInputError(datetime_message(what, arr.dtype))
    if kind == "O":
        try:
            out = np.array([int(_one_int(v, what)) for v in arr.tolist()], dtype=object)
        except OverflowError:
            raise ValueError(f"{what} must fit in int64") from None
        if out.size and (min(out) < INT64_MIN or max(out) > INT64_MAX):
            raise ValueError(f"{what} must fit in int64")
        return out.astype(np.int64)
    raise ValueError(f"{what} must be integers, got an array of dtype {arr.dtype}")


def _one_int(v, what):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f) or f != math.floor(f):
            raise ValueError(f"{what} must be finite integers, found {v!r}")
        return int(f)
    raise ValueError(f"{what} must be integers, found {v!r}")


def coerce_times(values, what: str = "timestamps") -> np.ndarray:
    """Integral times as int64 (query times may be any int64)."""
    ts = integral_array(values, what)
    if ts.dtype.kind == "b":
        raise ValueError(f"{what} must be integers, got booleans")
    if ts.dtype == np.uint64 and ts.size and ts.max() > np.uint64(INT64_MAX):
        raise ValueError(f"{what} must fit in int64")
    return ts.astype(np.int64, copy=False)


def coerce_timestamps(timestamps) -> np.ndarray:
    """Timestamps of elements as int64: above -2**63, which no family
    stores (the one rule of every update and every decoder)."""
    ts = coerce_times(timestamps)
    if ts.size and int(ts.min()) == INT64_MIN:
        raise ValueError("timestamps must be > -2**63 (the smallest int64 is reserved)")
    return ts


def coerce_values(values, n: int) -> np.ndarray | None:
    """Non-negative integer values, or None meaning 'all ones'."""
    if values is None:
        return None
    v = integral_array(values, "values")
    if v.shape[0] != n:
        raise ValueError(
            f"timestamps and values have different lengths ({n} and {v.shape[0]})"
        )
    if n == 0:
        return v.astype(np.int64)
    kind = v.dtype.kind
    if kind == "b":
        return v
    if kind == "i" and v.min() < 0:
        bad = v[v < 0][0]
        raise ValueError(f"values must be non-negative integers, found {bad}")
    if v.dtype == np.uint64 and v.max() > INT64_MAX:
        raise ValueError(f"values must be < 2**63, found {v.max()}")
    return v


def sort_batch(ts: np.ndarray, v: np.ndarray | None, newest: int | None):
    """Stable-sort a batch by timestamp and reject late data.

    Returns the (possibly reordered) arrays. Raises LateDataError when the
    oldest timestamp of the batch is older than ``newest``.
    """
    if ts.size > 1 and not bool(np.all(ts[1:] >= ts[:-1])):
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        if v is not None:
            v = v[order]
    if ts.size and int(ts[0]) == INT64_MIN:
        raise ValueError("timestamps must be > -2**63 (the smallest int64 is reserved)")
    if newest is not None and ts.size and int(ts[0]) < newest:
        raise LateDataError(int(ts[0]), newest)
    return ts, v


def batch_in_window(ts: np.ndarray, columns: tuple, newest: int | None, window: int):
    """A non-empty batch sorted by time and checked against ``newest``
    (:func:`sort_batch`), then cut to its rows inside the window as of its
    end: ``(ts, columns, newest after the batch)``, each of ``columns``
    (an array of one value per row, or None) reordered and cut alike.

    >>> ts, (v,), newest = batch_in_window(np.array([9, 2, 5]), (np.array([90, 20, 50]),), None, 5)
    >>> ts.tolist(), v.tolist(), newest
    ([5, 9], [50, 90], 9)
    """
    rows = np.arange(ts.size)
    ts, order = sort_batch(ts, rows, newest)
    after = int(ts[-1]) if newest is None else max(newest, int(ts[-1]))
    cutoff = after - window
    first = int(np.searchsorted(ts, cutoff, side="right")) if int(ts[0]) <= cutoff else 0
    if order is rows and first == 0:  # in order, all inside: the columns as they are
        return ts, tuple(columns), after
    kept = order[first:]
    return ts[first:], tuple(None if c is None else c[kept] for c in columns), after


def checked_total(v: np.ndarray | None, n: int, base: int) -> tuple[np.ndarray | None, int]:
    """Cumulative sums of the values (None when all ones) and the new total.

    Raises SumOverflowError when ``base + sum(v)`` would not fit in int64.
    """
    if v is None:
        total = base + n
        if total > INT64_MAX:
            raise SumOverflowError("the sum of values would overflow int64")
        return None, total
    if n == 0:
        return np.zeros(0, dtype=np.int64), base
    if v.dtype.itemsize <= 2:
        # bool / 8- and 16-bit values: accumulate in int32 when it cannot
        # overflow (numpy casts small ints to int64 slowly inside cumsum).
        largest = 1 if v.dtype.kind == "b" else int(np.iinfo(v.dtype).max)
        acc = np.int32 if n * largest < 2**31 else np.int64
        cum = np.cumsum(v, dtype=acc)
    else:
        # Bound the sum before an int64 cumsum could wrap around.
        largest = int(v.max())
        if largest * n > INT64_MAX - base:
            high = v >> (np.uint64(32) if v.dtype.kind == "u" else 32)
            exact = int(np.sum(high, dtype=np.int64)) * 2**32 + int(
                np.sum(v & 0xFFFFFFFF, dtype=np.int64)
            )
            if base + exact > INT64_MAX:
                raise SumOverflowError(
                    f"the sum of values would overflow int64 ({base + exact} > 2**63 - 1)"
                )
        cum = np.cumsum(v, dtype=np.int64)
    total = base + int(cum[-1])
    if total > INT64_MAX:
        raise SumOverflowError(f"the sum of values would overflow int64 ({total} > 2**63 - 1)")
    return cum, total


def resolve_query(now, window, newest: int | None, max_window: int) -> tuple[int | None, int]:
    """Check a query's ``now`` and ``window``; fill in the defaults.

    ``window`` defaults to ``max_window`` and must lie in ``[1, max_window]``;
    ``now`` defaults to ``newest`` and must not be earlier than it.
    """
    if window is None:
        window = max_window
    else:
        if isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer)):
            raise ValueError(f"window must be an integer in [1, {max_window}], got {window!r}")
        window = int(window)
        if not 1 <= window <= max_window:
            raise QueryTimeError.wide(window, max_window)
    if now is None:
        now = newest
    else:
        if isinstance(now, (bool, np.bool_)) or not isinstance(now, (int, np.integer)):
            raise ValueError(f"now must be an integer timestamp, got {now!r}")
        now = int(now)
        if newest is not None and now < newest:
            raise QueryTimeError.late(now, newest)
    return now, window


def check_positive_int(value, name: str, low: int, high: int) -> int:
    """An integer parameter in ``[low, high]``, with a message naming the range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value
