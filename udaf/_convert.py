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

__all__ = ["parse_interval", "interval_text", "Window", "key_names"]

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
