"""Exceptions shared by every synopsis in the project.

All of them subclass :class:`ValueError`, so ``except ValueError`` keeps
working for callers that do not care which mistake was made.
"""

from __future__ import annotations

__all__ = [
    "EhistError",
    "LateDataError",
    "CorruptSketchError",
    "IncompatibleSketchError",
    "InvalidInputError",
    "SumOverflowError",
    "QueryTimeError",
    "require_same",
]


class EhistError(ValueError):
    """Base class of the errors raised by ehist, lp_norms and distinct."""


class LateDataError(EhistError):
    """A timestamp is older than data the synopsis has already summarized.

    Sliding-window synopses keep only summaries of old data, so an element
    older than the newest timestamp seen cannot be placed correctly.

    Attributes
    ----------
    timestamp : int
        The offending (oldest late) timestamp of the batch.
    newest : int
        The newest timestamp the synopsis had summarized.
    """

    def __init__(self, timestamp: int, newest: int, context: str = ""):
        self.timestamp = int(timestamp)
        self.newest = int(newest)
        self.context = context
        super().__init__(
            (f"{context}: " if context else "")
            + f"late data: timestamp {self.timestamp} is older than the newest "
            f"timestamp already summarized ({self.newest}); timestamps must be "
            f">= {self.newest}"
        )

    def __reduce__(self):
        return (type(self), (self.timestamp, self.newest, self.context))


class QueryTimeError(EhistError):
    """A query that asks before a synopsis' newest timestamp, or for a
    window outside ``[1, N]``.

    The core knows no time unit: it keeps the numbers (``now``,
    ``newest``, ``window``, ``max_window``) and :meth:`described` says them
    again through a layer's formatters (the Spark functions print
    timestamps as ISO-8601 times and windows as intervals).

    >>> print(QueryTimeError.late(1_000, 2_000))
    now (1000) is earlier than the newest timestamp (2000); queries must look at now >= newest
    >>> print(QueryTimeError.wide(7200, 3600).described(str, lambda w: f"{w} s"))
    window must be in [1 s, 3600 s] (the synopsis's window), got 7200 s
    """

    def __init__(self, message: str, now=None, newest=None, window=None, max_window=None, where: str = ""):
        super().__init__(message)
        self.now, self.newest, self.window, self.max_window, self.where = now, newest, window, max_window, where

    def __reduce__(self):
        return (type(self), (str(self), self.now, self.newest, self.window, self.max_window, self.where))

    @classmethod
    def late(cls, now: int, newest: int, where: str = "") -> "QueryTimeError":
        """``now`` earlier than the newest timestamp (``where``: which synopsis)."""
        out = cls("", int(now), int(newest), where=where)
        out.args = (out.described(str, str),)
        return out

    @classmethod
    def wide(cls, window, max_window: int) -> "QueryTimeError":
        """A window outside ``[1, max_window]``."""
        out = cls("", window=window, max_window=int(max_window))
        out.args = (out.described(str, str),)
        return out

    def described(self, time_text, window_text) -> str:
        """The message with times and windows written by ``time_text`` and
        ``window_text`` (each a function of an int)."""
        if self.window is not None:
            return (f"window must be in [{window_text(1)}, {window_text(self.max_window)}] (the synopsis's window), "
                    f"got {window_text(self.window)}")
        return (f"now ({time_text(self.now)}) is earlier than the newest timestamp ({time_text(self.newest)})"
                f"{self.where}; queries must look at now >= newest")


class CorruptSketchError(EhistError):
    """Bytes that do not decode to a valid synopsis.

    The message says what was expected and what was found (truncated
    buffers, a foreign magic number, an unknown format version, a failed
    checksum, inconsistent lengths...).
    """


class InvalidInputError(EhistError):
    """Input data a synopsis cannot take: a negative or NaN value to sum,
    a null timestamp, a datetime64 array, a column of the wrong type.

    Raised by the core for arrays and by :mod:`udaf` for columns; there the
    message names the column, the offending value and, where known, the
    key, and is the same in every entry point (``udaf.inputs``).
    """


class SumOverflowError(EhistError, OverflowError):
    """A sum that int64 cannot hold: a batch or a merge whose window total
    (of values, or of counts) would pass ``2**63 - 1``.  The synopsis is
    left unchanged.  Also an :class:`OverflowError`, what the Spark layer
    raises for a key's sum past int64 (:mod:`udaf`), so one ``except``
    catches the mistake from every entry point.

    >>> from ehist import ExponentialHistogram
    >>> ExponentialHistogram(10).update([1, 2], [2**62, 2**62])
    Traceback (most recent call last):
    ...
    ehist.errors.SumOverflowError: the sum of values would overflow int64 (9223372036854775808 > 2**63 - 1)
    """


class IncompatibleSketchError(EhistError):
    """Two synopses with different parameters cannot be merged."""


def require_same(kind: str, pairs) -> None:
    """Raise IncompatibleSketchError naming both values of the first
    parameter that differs; ``pairs`` holds ``(name, ours, theirs)``."""
    for name, ours, theirs in pairs:
        if ours != theirs:
            raise IncompatibleSketchError(
                f"cannot merge {kind} sketches with different {name}: {ours} and {theirs}"
            )
