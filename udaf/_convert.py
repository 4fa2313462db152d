"""Conversions between Spark-side values and the synopses' int64 timestamps.

Timestamp units, decided by the column's type as it reaches pandas:

* ``TimestampType`` arrives as tz-naive ``datetime64[ns]`` in the session
  time zone: it becomes **microseconds** of that wall-clock time (the
  same precision as Spark's).  Around a daylight-saving change wall-clock
  time jumps; set ``spark.sql.session.timeZone`` to ``UTC`` for windows of
  exact elapsed time.
* ``DateType`` arrives as ``datetime.date`` objects: **days** since
  1970-01-01.
* integral types are taken as they are (count-based windows: an arrival
  index).

Windows are ints in those units, or interval strings (``'1 hour'``,
``'30 minutes'``, ``'7 days'``, ``'1 day 12 hours'``) converted to the
column's unit (whole days for dates; not allowed for integral columns).
"""

from __future__ import annotations

import datetime as _dt
import re

import numpy as np

__all__ = ["parse_interval", "to_int64", "now_to_int64", "Window"]

_UNITS_US = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}
_ALIASES = {
    "us": "microsecond", "ms": "millisecond", "s": "second", "sec": "second",
    "min": "minute", "h": "hour", "hr": "hour", "d": "day", "w": "week",
}
_TERM = re.compile(r"\s*(\d+)\s*([a-zA-Z]+)\s*")
_EPOCH = _dt.date(1970, 1, 1)


def parse_interval(text: str) -> int:
    """Microseconds in an interval string such as ``'1 hour 30 minutes'``.

    >>> parse_interval("1 hour"), parse_interval("2 days 12 hours") == 60 * 3_600_000_000
    (3600000000, True)
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"window must be a positive int or an interval string like '1 hour', got {text!r}")
    s = text.strip().lower()
    if s.startswith("interval "):
        s = s[len("interval "):]
    total, pos = 0, 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if not m:
            raise ValueError(
                f"cannot read interval {text!r}: expected terms like '1 hour', '30 minutes', '7 days'"
            )
        amount, unit = int(m.group(1)), m.group(2)
        unit = _ALIASES.get(unit, unit.rstrip("s") if unit not in ("s", "ms", "us") else unit)
        unit = _ALIASES.get(unit, unit)
        if unit not in _UNITS_US:
            raise ValueError(
                f"cannot read interval {text!r}: unknown unit {m.group(2)!r} "
                f"(use one of {', '.join(sorted(_UNITS_US))})"
            )
        total += amount * _UNITS_US[unit]
        pos = m.end()
    if total <= 0:
        raise ValueError(f"window must be positive, got {text!r}")
    return total


class Window:
    """A window parameter checked on the driver, resolved per column unit."""

    def __init__(self, window, name: str = "window", allow_none: bool = False):
        self.name = name
        self.raw = window
        self.micros = None
        if window is None:
            if not allow_none:
                raise ValueError(f"{name} is required")
            return
        if isinstance(window, bool) or not isinstance(window, (int, np.integer, str, _dt.timedelta)):
            raise ValueError(f"{name} must be a positive int or an interval string, got {window!r}")
        if isinstance(window, _dt.timedelta):
            self.micros = window // _dt.timedelta(microseconds=1)
            if self.micros <= 0:
                raise ValueError(f"{name} must be positive, got {window!r}")
        elif isinstance(window, str):
            self.micros = parse_interval(window)
        elif int(window) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {window}")

    def resolve(self, unit: str, column: str) -> int | None:
        """The window in ``unit`` ('us', 'day' or 'int')."""
        if self.raw is None:
            return None
        if self.micros is None:
            return int(self.raw)
        if unit == "us":
            return self.micros
        if unit == "day":
            days, rest = divmod(self.micros, _UNITS_US["day"])
            if rest:
                raise ValueError(f"{self.name} {self.raw!r} is not a whole number of days (column {column} is a date)")
            return days
        raise ValueError(
            f"{self.name} {self.raw!r} is an interval but column {column} is integral: "
            "give the window as an int in the column's units"
        )


def key_names(keys, caller: str, what: str) -> list:
    """``keys`` (one column name or a list or tuple of names) as a list;
    anything else (a Column, say) is a TypeError naming the parameter.

    >>> key_names("src", "aggregate", "by")
    ['src']
    >>> key_names(("src", "dst"), "aggregate", "by")
    ['src', 'dst']
    >>> key_names(3, "aggregate", "by")
    Traceback (most recent call last):
    ...
    TypeError: aggregate takes column names for by (a name or a list of names), got int
    """
    if isinstance(keys, str):
        return [keys]
    if not isinstance(keys, (list, tuple)):
        raise TypeError(f"{caller} takes column names for {what} (a name or a list of names), "
                        f"got {type(keys).__name__}")
    return list(keys)


def to_int64(series, column: str) -> tuple[np.ndarray, str]:
    """(int64 timestamps, unit) of a pandas Series; nulls are an error."""
    if series.isna().any():
        row = int(np.flatnonzero(series.isna().to_numpy())[0])
        raise ValueError(f"null timestamp in column {column} (row {row} of its group): timestamps must not be null")
    dtype = series.dtype
    if np.issubdtype(dtype, np.datetime64) or str(dtype).startswith("datetime64"):
        values = series.to_numpy(dtype="datetime64[us]")
        return values.astype(np.int64), "us"
    if dtype.kind in "iu":
        return series.to_numpy(dtype=np.int64), "int"
    if dtype.kind == "O" and len(series) and isinstance(series.iloc[0], _dt.date):
        days = np.array([(d - _EPOCH).days for d in series], dtype=np.int64)
        return days, "day"
    if dtype.kind == "O" and len(series) == 0:
        return np.zeros(0, dtype=np.int64), "int"
    raise ValueError(
        f"column {column} must be a timestamp, date or integral column, got pandas dtype {dtype}"
    )


def now_to_int64(now, unit: str) -> int | None:
    """A literal ``now`` (int, datetime, date) in the column's unit."""
    if now is None:
        return None
    if isinstance(now, _dt.datetime):
        if unit != "us":
            raise ValueError("now is a datetime but the sketch's timestamps are not")
        naive = now.replace(tzinfo=None)
        return (naive - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1)
    if isinstance(now, _dt.date):
        if unit != "day":
            raise ValueError("now is a date but the sketch's timestamps are not")
        return (now - _EPOCH).days
    return int(now)


def items_of(series, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(mask of non-null rows, their items as a numpy array) of a pandas Series.

    An integral Spark column with nulls reaches pandas as float64 (NaN for
    null): its values go back to int64, so an item hashes the same whether
    or not its batch held a null (sketches built on different partitions
    must agree to merge).
    """
    mask = series.notna().to_numpy()
    items = series[mask].to_numpy()
    if items.dtype.kind == "f":
        if np.any(items != np.floor(items)):
            raise ValueError(f"column {column} holds non-integral numbers: items must be integers, strings or bytes")
        items = items.astype(np.int64)
    elif items.dtype.kind == "O" and items.size and isinstance(items[0], (int, np.integer)):
        items = items.astype(np.int64)
    return mask, items
