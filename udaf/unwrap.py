"""The project's errors out of Spark's wrappers.

A bad value found in an executor reaches the driver wrapped: as PySpark's
``PythonException`` (a worker traceback whose last line is the project's
error, ``ehist.errors.InvalidInputError: column bytes holds -5 ...``), or
from the native plan as Spark's ``SparkRuntimeException``
(``[USER_RAISED_EXCEPTION] InvalidInputError: column bytes holds -5 ...``).
:func:`errors` turns either back into the project's exception class with
the plain message, the Spark exception kept as its ``__cause__``:

>>> from udaf import errors                                     # doctest: +SKIP
>>> with errors():                                              # doctest: +SKIP
...     aggregate(df, "k", "ts", b=Sum("bytes", "1 hour")).collect()
Traceback (most recent call last):
...
ehist.errors.InvalidInputError: column bytes holds -5 (key 'a'): Sum needs non-negative integers

Exceptions that carry no project error pass through unchanged.
"""

from __future__ import annotations

import builtins
import contextlib
import re

import ehist.errors

__all__ = ["errors", "project_error"]

_WORKER_LINE = re.compile(r"^(?:ehist\.errors\.)?(\w+Error): (.+)$", re.M)
_RAISED = re.compile(r"\[USER_RAISED_EXCEPTION\] (\w+Error): (.+?)(?: SQLSTATE: \w+)?$", re.M)
_SPARK = ("PythonException", "SparkRuntimeException", "StreamingQueryException")


def _class(name: str):
    cls = getattr(ehist.errors, name, None) or getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else None


def project_error(exc: BaseException) -> Exception | None:
    """The project's exception a Spark exception carries, or None.

    >>> class PythonException(Exception): pass
    >>> e = project_error(PythonException("Traceback ...\\n  File ...\\n"
    ...     "ehist.errors.InvalidInputError: column v holds -5: Sum needs non-negative integers\\n"))
    >>> type(e).__name__, str(e)
    ('InvalidInputError', 'column v holds -5: Sum needs non-negative integers')
    >>> class SparkRuntimeException(Exception): pass
    >>> str(project_error(SparkRuntimeException("[USER_RAISED_EXCEPTION] InvalidInputError: column ts "
    ...     "holds null (key 'b'): timestamps must not be null SQLSTATE: P0001")))
    "column ts holds null (key 'b'): timestamps must not be null"
    >>> project_error(ValueError("plain")) is None
    True
    """
    if type(exc).__name__ not in _SPARK:
        return None
    text = str(exc)
    found = _RAISED.findall(text) or [m for m in _WORKER_LINE.findall(text) if _class(m[0])]
    if not found:
        return None
    name, message = found[-1]
    cls = _class(name)
    if cls is None:
        return None
    try:
        return cls(message.strip())
    except TypeError:  # an error class with its own constructor (LateDataError): keep the message
        return ehist.errors.EhistError(f"{name}: {message.strip()}")


@contextlib.contextmanager
def errors():
    """Re-raise a Spark-wrapped project error as itself (see the module)."""
    try:
        yield
    except Exception as exc:
        mine = project_error(exc)
        if mine is None:
            raise
        raise mine from exc
