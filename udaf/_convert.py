"""Windows and intervals in a time column's units, and key names.

Units are decided by the time column's type (:func:`udaf.inputs.times`
reads the values): TimestampType and TimestampNTZType in **microseconds**,
DateType in **days** since 1970-01-01, integral types as they are
(count-based windows: an arrival index).

Windows are ints in those units, or interval strings (``'1 hour'``,
``'30 minutes'``, ``'7 days'``, ``'1 day 12 hours'``) converted to the
column's unit (whole days for dates; not allowed for integral columns).
"""

from __future__ import annotations

import datetime as _dt
import re

import numpy as np

from ehist.errors import QueryTimeError

__all__ = ["parse_interval", "interval_text", "time_text", "window_text", "in_user_terms", "Window", "key_names"]

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


def interval_text(micros: int) -> str:
    """Microseconds as the interval a reader would write (the inverse of
    :func:`parse_interval`, largest units first, weeks left as days).

    >>> interval_text(7_200_000_000), interval_text(90 * 60_000_000), interval_text(86_400_000_000 + 1_500)
    ('2 hours', '1 hour 30 minutes', '1 day 1 millisecond 500 microseconds')
    """
    micros = int(micros)
    if micros <= 0:
        return f"{micros} microseconds"
    terms = []
    for unit in ("day", "hour", "minute", "second", "millisecond", "microsecond"):
        amount, micros = divmod(micros, _UNITS_US[unit])
        if amount:
            terms.append(f"{amount} {unit}{'s' if amount != 1 else ''}")
    return " ".join(terms)


def time_text(unit: str):
    """A function writing a time in ``unit`` as the column's type shows it:
    ISO-8601 (UTC) for timestamps, a date for dates, the integer itself.

    >>> time_text("us")(1_767_225_600_000_000), time_text("day")(20_454), time_text("int")(7)
    ('2026-01-01T00:00:00Z', '2026-01-01', '7')
    """
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

    def text(value) -> str:
        try:
            if unit == "us":
                at = epoch + _dt.timedelta(microseconds=int(value))
                return at.strftime("%Y-%m-%dT%H:%M:%S") + (f".{at.microsecond:06d}" if at.microsecond else "") + "Z"
            if unit == "day":
                return (epoch + _dt.timedelta(days=int(value))).date().isoformat()
        except OverflowError:  # beyond datetime's years: the number itself
            pass
        return str(int(value))

    return text


def window_text(unit: str):
    """A function writing a window in ``unit`` as an interval ('2 hours',
    '7 days') for timestamps and dates, the integer itself otherwise.

    >>> window_text("us")(7_200_000_000), window_text("day")(1), window_text("int")(50)
    ('2 hours', '1 day', '50')
    """
    if unit == "us":
        return interval_text
    if unit == "day":
        return lambda days: f"{int(days)} day{'s' if int(days) != 1 else ''}"
    return lambda value: str(int(value))


class in_user_terms:  # noqa: N801 - a context manager, used as a statement
    """Re-raise a query's :class:`~ehist.errors.QueryTimeError` with its
    times and windows in ``unit`` (:func:`time_text`, :func:`window_text`).

    >>> from ehist.errors import QueryTimeError
    >>> with in_user_terms("us"):
    ...     raise QueryTimeError.late(1_735_689_600_000_000, 1_767_232_773_889_081)
    Traceback (most recent call last):
    ...
    ehist.errors.QueryTimeError: now (2025-01-01T00:00:00Z) is earlier than the newest timestamp (2026-01-01T01:59:33.889081Z); queries must look at now >= newest
    """

    def __init__(self, unit: str):
        self.unit = unit

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):

        if isinstance(error, QueryTimeError) and self.unit in ("us", "day"):
            raise QueryTimeError(error.described(time_text(self.unit), window_text(self.unit)), error.now,
                                 error.newest, error.window, error.max_window, error.where) from error
        return False


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

    def resolve(self, unit: str, column: str, bare: bool = False) -> int | None:
        """The window in ``unit`` ('us', 'day' or 'int').  A bare integer
        is the column's own unit only for an integral column: over a
        timestamp or a date it is refused, saying how to write it (3600 was
        3600 microseconds), unless ``bare`` (the unit given explicitly,
        as the sketch functions' ``unit=`` does).

        >>> Window("1 hour").resolve("us", "ts"), Window(3).resolve("int", "seq"), Window(3).resolve("us", "ts", True)
        (3600000000, 3, 3)
        >>> Window(3600).resolve("us", "ts")
        Traceback (most recent call last):
        ...
        ValueError: window 3600 is a bare number but column ts is a timestamp: write the window as an interval, e.g. '3600 seconds' or '1 hour' (INTERVAL 1 HOUR in SQL)
        """
        if self.raw is None:
            return None
        if self.micros is None:
            if unit in ("us", "day") and not bare:
                kind, example = ("a timestamp", f"'{int(self.raw)} seconds' or '1 hour' (INTERVAL 1 HOUR in SQL)") \
                    if unit == "us" else ("a date", f"'{int(self.raw)} days' (INTERVAL {int(self.raw)} DAYS in SQL)")
                raise ValueError(f"{self.name} {self.raw!r} is a bare number but column {column} is {kind}: "
                                 f"write the {self.name} as an interval, e.g. {example}")
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
