"""The input rules of every Spark entry point, and their one set of messages.

Every driver (:func:`udaf.aggregate`, :func:`udaf.sketch_table`,
:func:`udaf.sliding_over`, :func:`udaf.streaming.sliding_window_state`,
the column functions and their SQL registrations) reads its columns
through this module, so the same mistake gives the same exception class
and the same message everywhere:

========================  ===============================  ==========================================
mistake                   seen                             raises
========================  ===============================  ==========================================
column of the wrong type  on the driver (schema)           ``TypeError: column bytes: Sum needs an
                          or, for a column function, in    integral column (bigint, int, smallint,
                          the job                          tinyint), got double``
negative value to sum     in the job                       ``InvalidInputError: column bytes holds
                                                           -5 (key 'a'): Sum needs non-negative
                                                           integers``
NaN value                 in the job                       ``InvalidInputError: column v holds nan
                                                           (key 'a'): LpNorm needs ... (NaN is
                                                           never skipped: filter or fill it)``
null timestamp            in the job                       ``InvalidInputError: column ts holds
                                                           null (key 'a'): timestamps must not be
                                                           null``
========================  ===============================  ==========================================

Nulls in a value or item column are skipped (as Spark's ``sum`` and
``count(DISTINCT ...)`` skip them); NaN is a value, never skipped.

Time columns (as Arrow hands them to Python, or as Spark types on the
driver): ``TimestampType`` and ``TimestampNTZType`` become microseconds
since the epoch (``unix_micros``; NTZ: of the wall-clock value),
``DateType`` days since 1970-01-01 (``unix_date``), integral types are
taken as they are (count-based windows: an arrival index).  Windows are
ints in those units or interval strings (``'1 hour'``) converted to them.
"""

from __future__ import annotations

import numpy as np

from ehist.errors import InvalidInputError

__all__ = ["InvalidInputError", "bad_value", "wrong_type", "INTEGRAL", "TIME", "ITEM", "NUMERIC",
           "check_spark_type", "check_arrow_type", "times", "integers", "reals", "items", "parameter"]

# Accepted input kinds, by Spark simpleString (driver) and Arrow type (executors).
INTEGRAL = ("bigint", "int", "smallint", "tinyint")
TIME = ("timestamp", "timestamp_ntz", "date") + INTEGRAL
#: Event time of the streaming state (watermarks take no dates).
EVENT_TIME = ("timestamp", "timestamp_ntz") + INTEGRAL
ITEM = INTEGRAL + ("string", "binary", "boolean", "date", "timestamp", "timestamp_ntz")
NUMERIC = INTEGRAL + ("double", "float")

_ARROW_NAMES = {"int64": "bigint", "int32": "int", "int16": "smallint", "int8": "tinyint", "double": "double",
                "float": "float", "string": "string", "large_string": "string", "binary": "binary",
                "large_binary": "binary", "bool": "boolean", "date32[day]": "date", "null": "void"}


def bad_value(column: str, value, need: str, key=None) -> InvalidInputError:
    """The error for a value a synopsis cannot take, naming the column,
    the value and, where known, the key.

    >>> str(bad_value("bytes", -5, "Sum needs non-negative integers", key=("a",)))
    "column bytes holds -5 (key 'a'): Sum needs non-negative integers"
    """
    where = "" if key is None else f" (key {_key_text(key)})"
    shown = "null" if value is None else (repr(value.item()) if isinstance(value, np.generic) else repr(value))
    return InvalidInputError(f"column {column} holds {shown}{where}: {need}")


def wrong_type(column: str, need: str, accepted, found: str) -> TypeError:
    """The error for a column of a type an input does not take.

    >>> str(wrong_type("bytes", "Sum needs", INTEGRAL, "double"))
    'column bytes: Sum needs an integral column (bigint, int, smallint, tinyint), got double'
    """
    kinds = {INTEGRAL: "an integral column", TIME: "a timestamp, date or integral column",
             EVENT_TIME: "a timestamp or integral column",
             ITEM: "an integral, string, binary, boolean, date or timestamp column",
             NUMERIC: "a numeric column"}.get(tuple(accepted), "a column")
    listed = "" if tuple(accepted) == ITEM else f" ({', '.join(accepted)})"
    if tuple(accepted) in (TIME, EVENT_TIME):
        listed = ""
    return TypeError(f"column {column}: {need} {kinds}{listed}, got {found}")


def _key_text(key) -> str:
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    return repr(key)


def check_spark_type(column: str, dtype, accepted, need: str) -> None:
    """Driver side: raise :func:`wrong_type` unless ``dtype`` is accepted."""
    name = dtype.simpleString()
    if name not in accepted:
        raise wrong_type(column, need, accepted, name)


def arrow_type_name(atype) -> str:
    """The Spark name of an Arrow type as Spark sends it to Python."""
    import pyarrow as pa

    if pa.types.is_timestamp(atype):
        return "timestamp" if atype.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(atype):
        return f"decimal({atype.precision},{atype.scale})"
    return _ARROW_NAMES.get(str(atype), str(atype))


def check_arrow_type(column: str, array, accepted, need: str) -> None:
    """Executor side (column functions): the same check on an Arrow array;
    an all-null column of no type passes (it holds nothing to read)."""
    name = arrow_type_name(array.type)
    if name not in accepted and name != "void":
        raise wrong_type(column, need, accepted, name)


def _valid(array) -> np.ndarray:
    return array.is_valid().to_numpy(zero_copy_only=False)


def times(array, column: str, key_of=None) -> tuple[np.ndarray, str]:
    """(int64 times, unit) of an Arrow time column: 'us' for timestamps,
    'day' for dates, 'int' for integers; a null is an error naming the
    column (and the key: ``key_of(row)``).

    >>> import pyarrow as pa
    >>> times(pa.array([3, 5], type=pa.int16()), "ts")
    (array([3, 5]), 'int')
    """
    import pyarrow as pa

    check_arrow_type(column, array, TIME, TIME_NEEDS)
    if array.null_count:
        row = int(np.flatnonzero(~_valid(array))[0])
        raise bad_value(column, None, "timestamps must not be null", None if key_of is None else key_of(row))
    kind = array.type
    if pa.types.is_timestamp(kind):
        if kind.unit != "us":
            array = array.cast(pa.timestamp("us", tz=kind.tz))
        return array.view(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64, copy=False), "us"
    if pa.types.is_date32(kind):
        return array.view(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64), "day"
    if pa.types.is_null(kind):
        return np.zeros(0, dtype=np.int64), "int"
    return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), "int"


TIME_NEEDS = "the time column needs"


def integers(array, column: str, who: str, key_of=None) -> tuple[np.ndarray, np.ndarray]:
    """(present mask, int64 values, nulls as 0) of an integral Arrow column
    of non-negative values (``who``: the spec reading it, for messages); a
    negative value is an error naming it.

    >>> import pyarrow as pa
    >>> integers(pa.array([3, None, 5]), "bytes", "Sum")
    (array([ True, False,  True]), array([3, 0, 5]))
    >>> integers(pa.array([3, -5]), "bytes", "Sum", key_of=lambda row: "a")
    Traceback (most recent call last):
    ...
    ehist.errors.InvalidInputError: column bytes holds -5 (key 'a'): Sum needs non-negative integers
    """
    import pyarrow.compute as pc

    check_arrow_type(column, array, INTEGRAL, f"{who} needs")
    present = _valid(array)
    filled = pc.fill_null(array, 0) if array.null_count else array
    values = filled.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    negative = values < 0
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        raise bad_value(column, int(values[row]), f"{who} needs non-negative integers",
                        None if key_of is None else key_of(row))
    return present, values


def reals(array, column: str, who: str, key_of=None, signed: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(present mask, float64 values, nulls as 0) of a numeric Arrow column
    of finite non-negative values (any sign with ``signed``); NaN,
    infinities and negative values are errors naming them (NaN is never
    skipped).

    >>> import pyarrow as pa
    >>> reals(pa.array([1.5, float("nan")]), "v", "LpNorm")
    Traceback (most recent call last):
    ...
    ehist.errors.InvalidInputError: column v holds nan: LpNorm needs finite non-negative numbers (NaN is never skipped: filter or fill it)
    """
    import pyarrow.compute as pc

    check_arrow_type(column, array, NUMERIC, f"{who} needs")
    present = _valid(array)
    filled = pc.fill_null(array, 0) if array.null_count else array
    values = filled.to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(values) if signed else ~np.isfinite(values) | (values < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        kind = "finite numbers" if signed else "finite non-negative numbers"
        raise bad_value(column, float(values[row]), f"{who} needs {kind} (NaN is never skipped: filter or fill it)",
                        None if key_of is None else key_of(row))
    return present, values


def items(array, column: str, who: str) -> tuple[np.ndarray, np.ndarray]:
    """(present mask, items of the present rows) of an Arrow item column:
    integers (booleans as 0 / 1, dates and timestamps as their int64
    units) as int64, strings as str, binaries as bytes; what
    :func:`ehist.hashing.hash64` hashes alike in every process.

    >>> import pyarrow as pa
    >>> items(pa.array([True, None, False]), "flag", "Distinct")
    (array([ True, False,  True]), array([1, 0]))
    """
    import pyarrow as pa

    check_arrow_type(column, array, ITEM, f"{who} needs")
    present = _valid(array)
    kept = array.filter(pa.array(present)) if array.null_count else array
    kind = kept.type
    if pa.types.is_timestamp(kind):
        kept = kept.view(pa.int64())
    elif pa.types.is_date32(kind):
        kept = kept.view(pa.int32())
    kind = kept.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return present, kept.to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_null(kind):
        return present, np.zeros(0, dtype=np.int64)
    return present, np.array(kept.to_pylist(), dtype=object)


def parameter(value):
    """A parameter given as a SQL literal (an Arrow scalar's Python value:
    str, int, Decimal, timedelta) as the Python value the specs take.

    >>> from decimal import Decimal
    >>> parameter(Decimal("0.01")), parameter(Decimal("3600")), parameter("1 hour")
    (0.01, 3600, '1 hour')
    """
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
