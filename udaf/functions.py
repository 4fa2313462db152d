"""Sliding-window synopses as PySpark column functions, and in Spark SQL.

Every function here is generated from the specs (:mod:`udaf.spec`), so a
new synopsis family gets its functions, in Python and SQL, without an
edit to this module.  The names follow Spark's sketch families
(``hll_sketch_agg``, ``hll_union_agg``, ``hll_sketch_estimate``):

==================================  ===========================================
function                            what
==================================  ===========================================
``<family>_sketch_agg``             aggregate: a binary sketch of the group
``<family>_union_agg``              aggregate: the union of binary sketches
                                    (stored sketch tables rolled up later)
``<family>_union``                  scalar: the union of an array of
                                    sketches (``collect_list``)
``<family>_sketch_estimate``        scalar: a sketch's estimate (double)
``<family>_sketch_bounds``          scalar: ``struct<lower, upper>`` (bigint),
                                    for families with deterministic bounds
                                    (every scalar function also takes an
                                    array of sketches, ``collect_list``,
                                    and answers their union without
                                    building it)
``sliding_count``, ``sliding_sum``  aggregate in one step: the estimate
``sliding_distinct``...             (double)
==================================  ===========================================

Families: ``eh`` (counts and sums: exponential histograms), ``sliding_hll``
(distinct counts: sliding HyperLogLog), ``sliding_fm`` (distinct counts:
sliding Flajolet-Martin), ``sliding_lp`` (L_p norms).  Arguments come in
one order in Python and in SQL: the time column, the input columns, the
window, the spec's parameters, then optional inputs (``value`` of
``eh_sketch_agg``: given for sums, left out for counts).  Parameters reach
Spark as literals, so a result column prints as Spark prints a built-in
call (``eh_sketch_agg(ts, 1 hour, 0.01)``), and :func:`register` makes the
same calls work in ``spark.sql``.  :func:`signature` shows a function's
arguments.

Every function accepts column names or Columns and returns a Column;
Python calls check their parameters on the driver.  Null values and items
are skipped; a null time, a negative value or NaN is an
:class:`~ehist.errors.InvalidInputError` naming the column, the value and
(from :func:`udaf.aggregate` and the other drivers) the key, with the
message every entry point gives (:mod:`udaf.inputs`).  Time columns:
TimestampType and TimestampNTZType as epoch microseconds, DateType as
days, integral types as they are; windows are ints in those units or
interval strings ('1 hour').

Spark does not let a Python aggregate UDF share one ``agg()`` with
built-in aggregates (``F.max`` ...): aggregate those separately and join.
The ``<family>_union_agg`` functions are the exception in Python: there
they are Spark's ``collect_list`` under a scalar Arrow UDF that unites
every group of a batch at once (in SQL, a grouped UDF: a call per group).

Examples
--------
>>> from udaf import functions as U                             # doctest: +SKIP
>>> df.groupBy("src").agg(U.sliding_count("ts", "1 hour"),
...                       U.sliding_sum("ts", "bytes", "1 hour")).show()  # doctest: +SKIP
+---+-------------------------------+-------------------------------------+
|src|sliding_count(ts, 1 hour, 0.01)|sliding_sum(ts, bytes, 1 hour, 0.01)|
+---+-------------------------------+-------------------------------------+
...
>>> signature("eh_sketch_agg")
'eh_sketch_agg(ts, window, eps=0.01, value=None)'
"""

from __future__ import annotations

import warnings
from dataclasses import MISSING, fields

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

from ehist.blobs import Blobs
from ehist.segments import ranges
from ehist.serialization import FAMILIES as FAMILY_IDS

from ._arrow import blobs_of, list_blobs_of
from ._convert import Window, in_user_terms
from .family import FAMILIES, load_families, spec_for_bytes
from .inputs import arrow_type_name, bad_value, check_arrow_type, parameter, times, wrong_type
from .two_phase import now_in_unit
from .union import merged

_FUNCTIONS: dict = {}  # name -> _Function


class _Function:
    """One generated function: its arguments (name, default, is a column)
    and how its Arrow arrays are answered (``body``)."""

    def __init__(self, name, args, body, return_type, grouped, doc):
        self.name, self.args, self.body = name, args, body
        self.return_type, self.grouped, self.doc = return_type, grouped, doc
        self.family = None  # the family it serves (udaf.spec.FAMILIES), set by _generate

    def signature(self) -> str:
        parts = [a if d is _REQUIRED else f"{a}={d!r}" for a, d, _ in self.args]
        return f"{self.name}({', '.join(parts)})"

    def sql_signature(self) -> str:
        """The call in SQL: positional arguments, the optional ones in
        brackets (trailing ones may be left out)."""
        required = [a for a, d, _ in self.args if d is _REQUIRED]
        optional = [a for a, d, _ in self.args if d is not _REQUIRED]
        tail = "".join(f"[, {a}" for a in optional) + "]" * len(optional)
        return f"{self.name}({', '.join(required)}{tail})"

    def sql_names(self) -> dict:
        """How SQL calls name their column arguments in messages: Spark
        hands a registered function no column names, so each argument is
        named with its position, ``value (argument 2 of sliding_sum)``."""
        return {a: f"{a} (argument {i} of {self.name})" for i, (a, _, is_column) in enumerate(self.args, 1)
                if is_column}

    def python_signature(self):
        """An :class:`inspect.Signature` of the arguments (for help() and the docs)."""
        import inspect

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter(a, kind, default=inspect.Parameter.empty if d is _REQUIRED else d)
                                  for a, d, _ in self.args], return_annotation=Column)

    def udf(self, names=None, passed=None, bound=None):
        """An Arrow UDF over the arguments given (every one a column:
        data or a literal); ``names``: column names for messages;
        ``passed``: the arguments the columns are, in order (default: the
        first ones of the signature); ``bound``: the others, as Arrow
        scalars each batch repeats (:func:`_literal_scalar`)."""
        from pyspark.sql.functions import arrow_udf
        import pyarrow as pa

        body, arg_names = self.body, list(passed) if passed is not None else [a for a, _, _ in self.args]
        shown = names or {}
        bound = dict(bound or {})

        def run(*arrays):
            given = dict(zip(arg_names, arrays))
            for arg, scalar in bound.items():
                given[arg] = pa.repeat(scalar, len(arrays[0]))
            return body(given, shown)

        # real objects, not strings: PySpark reads the hints to pick the UDF kind
        run.__annotations__ = {"arrays": pa.Array, "return": {"binary": bytes, "double": float}[self.return_type]
                               if self.grouped else pa.Array}
        run.__name__ = run.__qualname__ = self.name
        return arrow_udf(run, self.return_type)

    def __call__(self, *args, **kwargs) -> Column:
        """The call as a Column.  A scalar function's parameters given as
        Python values (a window, a time, a quantile, an item) travel with
        the UDF, not as literal columns: a call whose only column is its
        sketch is then one Spark can chain after the UDF that made the
        sketch (``eh_union_agg``, ``union_table``), uniting and answering
        in one Python pass.  Such a call is named as Spark names one with
        literal columns (``eh_sketch_estimate(n, 2026-01-02 00:00:43, 1 hour)``)."""
        given = self.bind(args, kwargs)
        self.check(given)
        names, columns, passed, bound, parts = {}, [], [], {}, []
        for arg, _, is_column in self.args:
            if arg not in given:
                continue
            value = given[arg]
            scalar = None if self.grouped or arg == "sketch" or isinstance(value, Column) or (
                is_column and isinstance(value, str)) else _literal_scalar(value)
            if scalar is not None:
                bound[arg] = scalar
                parts.append(_shown_literal(value))
                continue
            if is_column and isinstance(value, (str, Column)):
                names[arg] = value if isinstance(value, str) else str(value)
                columns.append(_col(value, arg))
                parts.append(_shown_column(value))
            elif is_column and arg != "now":
                values = "" if self.grouped or arg == "sketch" else " or a value (bool, int, float, datetime, date)"
                raise TypeError(f"{self.name}: {arg} must be a column name or a Column{values}, "
                                f"got {type(value).__name__}")
            else:
                columns.append(value if isinstance(value, Column) else F.lit(value))
                parts.append(_shown_column(columns[-1]))
            passed.append(arg)
        if not bound:
            return self.udf(names)(*columns)
        return self.udf(names, passed, bound)(*columns).alias(f"{self.name}({', '.join(parts)})")

    def bind(self, args, kwargs) -> dict:
        """Python arguments by name, trailing ones left out while unset
        (the UDF sees only the arguments given)."""
        names = [a for a, _, _ in self.args]
        inputs = [a for a, d, c in self.args if c and d is _REQUIRED]
        optional = [a for a, d, c in self.args if c and d is None and a != "now"]
        if "window" in kwargs and len(args) > len(inputs) and optional:
            # the old shape: optional inputs right after the required ones,
            # parameters as keywords (sliding_lp_norm(ts, index, value, window=...))
            extra = args[len(inputs):]
            if len(extra) > len(optional):
                raise TypeError(f"{self.signature()}: too many positional arguments")
            kwargs = {**dict(zip(optional, extra)), **kwargs}
            args = args[:len(inputs)]
        if len(args) > len(names):
            raise TypeError(f"{self.signature()} takes at most {len(names)} arguments, got {len(args)}")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{self.signature()} has no argument {k!r}")
            if k in given:
                raise TypeError(f"{self.name}: argument {k!r} given twice")
            given[k] = v
        for a, d, _ in self.args:
            if d is _REQUIRED and a not in given:
                raise TypeError(f"{self.signature()} is missing its argument {a!r}")
            if d is _REQUIRED and given[a] is None and not self.grouped:  # not a trailing argument left unset
                kinds = "a column name or a Column" if a == "sketch" else "a column name, a Column or a value"
                raise TypeError(f"{self.name}: {a} must be {kinds}, got None")
        # every argument up to the last one set is passed (defaults filled in)
        last = max((i for i, a in enumerate(names) if given.get(a) is not None), default=-1)
        out = {}
        for i, (a, d, _) in enumerate(self.args):
            if i <= last:
                out[a] = given.get(a, d if d is not _REQUIRED else None)
        return out

    def check(self, given: dict) -> None:
        """Driver-side checks of a Python call's literal parameters."""
        checker = getattr(self.body, "check", None)
        if checker is not None:
            checker(given)


_REQUIRED = object()


def _literal_scalar(value):
    """The Arrow scalar a Python parameter reaches a scalar UDF as when
    given as ``F.lit(value)`` (Spark's literal type; times as Spark
    converts them: a naive datetime in the driver's time zone, or as it
    is where the session prefers TIMESTAMP_NTZ), or None for values left
    to ``F.lit`` (other types, integers past int64).

    >>> import datetime as dt
    >>> [_literal_scalar(v).type for v in (None, True, 5, 0.5, "1 hour", dt.date(2026, 1, 2))]
    [DataType(null), DataType(bool), DataType(int64), DataType(double), DataType(string), DataType(date32[day])]
    >>> _literal_scalar(dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)).value, _literal_scalar(2**64)
    (1767312000000000, None)
    """
    import datetime as dt

    import pyarrow as pa
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    if value is None:
        return pa.scalar(None, pa.null())
    if isinstance(value, bool):
        return pa.scalar(value, pa.bool_())
    if isinstance(value, int):
        return pa.scalar(value, pa.int64()) if -2**63 <= value < 2**63 else None
    if isinstance(value, float):
        return pa.scalar(value, pa.float64())
    if isinstance(value, str):
        return pa.scalar(value, pa.string())
    if isinstance(value, dt.datetime):
        from pyspark.sql.utils import is_timestamp_ntz_preferred

        if value.tzinfo is None and is_timestamp_ntz_preferred():
            return pa.scalar(TimestampNTZType().toInternal(value), pa.timestamp("us"))
        return pa.scalar(TimestampType().toInternal(value), pa.timestamp("us", tz="UTC"))
    if isinstance(value, dt.date):
        return pa.scalar(DateType().toInternal(value), pa.date32())
    return None


def _shown_literal(value) -> str:
    """A literal as Spark shows it in a call's column name: ``1 hour``,
    ``NULL``, ``true``, ``2026-01-02 00:00:43``.

    >>> import datetime as dt
    >>> _shown_literal("1 hour"), _shown_literal(None), _shown_literal(dt.datetime(2026, 1, 2, 0, 0, 43))
    ('1 hour', 'NULL', '2026-01-02 00:00:43')
    """
    import datetime as dt

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ")
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _shown_column(c) -> str:
    """A column argument as its call's name shows it: its name, or the
    expression pyspark prints (``Column<'collect_list(b)'>``)."""
    if isinstance(c, str):
        return c
    text = str(c)
    return text[8:-2] if text.startswith("Column<'") and text.endswith("'>") else text


def _col(c, what: str) -> Column:
    if isinstance(c, str):
        return F.col(c)
    if isinstance(c, Column):
        return c
    raise TypeError(f"{what} must be a column name or a Column, got {type(c).__name__}")


def _literal(arrays: dict, name: str):
    a = arrays.get(name)
    if a is None or len(a) == 0:
        return None
    return parameter(a[0].as_py())


# ------------------------------------------------------------ signatures
def _inputs(cls) -> tuple[list, list]:
    """(required, optional) input fields of a spec class."""
    required, optional = [], []
    for f in fields(cls):
        if f.name in cls.accepts:
            (required if f.default is MISSING else optional).append(f.name)
    return required, optional


def _arg(cls, field: str) -> str:
    """An input's argument name: the spec's ``arg_names`` (``value``,
    ``item``, ``index``) or the field's."""
    return cls.arg_names.get(field, field)


def _param_args(cls) -> list:
    defaults = {f.name: f.default for f in fields(cls)}
    return [(p, defaults[p], False) for p in cls.params]


def _spec_args(cls) -> list:
    """Arguments of a spec class's functions after the time column:
    required inputs, window, parameters, optional inputs."""
    required, optional = _inputs(cls)
    return ([(_arg(cls, f), _REQUIRED, True) for f in required] + [("window", _REQUIRED, False)]
            + _param_args(cls) + [(_arg(cls, f), None, True) for f in optional])


def _family_args(classes) -> list:
    """A family's builder arguments: its widest class's, inputs that not
    every class reads moved to the end as optional (``eh_sketch_agg(ts,
    window, eps, value)``: a Sum when ``value`` is given, else a Count)."""
    widest = max(classes, key=lambda c: len(c.accepts))
    required, optional = _inputs(widest)
    shared = [f for f in required if all(f in c.accepts for c in classes)]
    trailing = [f for f in required if f not in shared] + optional
    return ([(_arg(widest, f), _REQUIRED, True) for f in shared] + [("window", _REQUIRED, False)]
            + _param_args(widest) + [(_arg(widest, f), None, True) for f in trailing])


def _spec(classes, values: dict, names: dict):
    """The spec a call asks for: the class with most inputs whose required
    inputs are all given; input fields get the columns' names (for
    messages), parameters their values (checked by the spec)."""
    for cls in sorted(classes, key=lambda c: -len(c.accepts)):
        required, _ = _inputs(cls)
        if all(values.get(_arg(cls, f)) is not None for f in required):
            kwargs = {}
            for f in fields(cls):
                arg = _arg(cls, f.name)
                if f.name in cls.accepts:
                    if values.get(arg) is not None:
                        kwargs[f.name] = names.get(arg, arg)
                elif values.get(arg) is not None:
                    kwargs[f.name] = values[arg]
            return cls(**kwargs)
    raise TypeError(f"no spec of {', '.join(c.__name__ for c in classes)} takes these inputs")


# ------------------------------------------------------------- builders
def _build(classes, args, one_step=False):
    """Body of a builder (``<family>_sketch_agg``) or one-step aggregate."""
    columns = {a for a, _, c in args if c}

    def values_of(arrays):
        """Argument -> True for a column given (not a NULL literal), the
        Python value for a literal."""
        return {a: (not _null_type(arrays[a])) or None if a in columns else _literal(arrays, a) for a in arrays}

    def body(arrays, names):
        values = values_of(arrays)
        spec = _spec(classes, values, names)
        ts_name = names.get("ts", "ts")
        t, unit = times(arrays["ts"], ts_name)
        data = spec.read({f: arrays[_arg(type(spec), f)] for f in spec.inputs()}, len(t))
        order = np.argsort(t, kind="stable")
        kept = order[data.present[order]]
        rank = np.cumsum(data.present) - 1
        # the group's partial, as sketch_table and aggregate build it (the rows form where it fits...)
        blobs, _ = spec.partials(t[kept], np.zeros(1, dtype=np.int64), data.take(rank[kept]),
                                 Window(spec.window).resolve(unit, ts_name))
        if not one_step:
            return blobs[0]
        sketch = spec.sketch_type.from_bytes(blobs[0])
        if sketch.newest is None:
            return 0.0
        now = values.get("now")
        now = None if now is None else _now_literal(now, unit)
        query = values.get("query_window")
        query = None if query is None else Window(query, "query_window").resolve(unit, ts_name)
        with in_user_terms(unit):
            return float(spec.answer(sketch, now, query)[0])

    def check(given):
        if any(isinstance(v, Column) for a, v in given.items() if a not in columns):
            return  # a parameter given as a Column: checked in the job
        values = {a: (True if a in columns else v) for a, v in given.items() if v is not None}
        spec = _spec(classes, values, {})
        for a in ("query_window",):
            if given.get(a) is not None:
                Window(given[a], a)
        del spec

    body.check = check
    return body


def _null_type(array) -> bool:
    import pyarrow as pa

    return pa.types.is_null(array.type)


def _now_literal(now, unit: str) -> int:
    """A ``now`` literal (datetime, date or int) in a time unit."""
    import datetime as dt


    if isinstance(now, dt.datetime) and now.tzinfo is None and unit == "us":
        now = now.replace(tzinfo=dt.timezone.utc)  # Arrow hands timestamps over in UTC
    return now_in_unit(now, unit)


# ------------------------------------------------------- sketch readers
_SKETCH_NEEDS = "needs a binary sketch column (from *_sketch_agg or *_union_agg)"


def _check_blobs(blobs: Blobs, column, fn: str, classes) -> None:
    wanted = {c.sketch_type.__name__ for c in classes}
    bad = blobs.present & ~np.isin(blobs.families(), [FAMILY_IDS[w] for w in wanted])
    if bad.any():
        cls = spec_for_bytes(blobs[int(np.argmax(bad))])
        if cls is None or cls.sketch_type.__name__ not in wanted:
            found = "bytes of no ehist sketch" if cls is None else f"a {cls.sketch_type.__name__} sketch"
            raise bad_value(column, _Shown(f"<{found}>"), f"{fn} needs {' or '.join(sorted(wanted))} sketches")


def _sketch_blobs(arrays, names, fn: str, classes, need: str = _SKETCH_NEEDS) -> Blobs:
    """The sketch column of a call as :class:`~ehist.blobs.Blobs` over its
    Arrow buffers (None for null), checked to be binary and of the
    family's sketches."""
    column = names.get("sketch", "sketch")
    array = arrays["sketch"]
    check_arrow_type(column, array, ("binary",), f"{fn} {need}, that is")
    blobs = blobs_of(array)
    _check_blobs(blobs, column, fn, classes)
    return blobs


def _sketch_groups(arrays, names, fn: str, classes):
    """The sketch column of a reader: ``(blobs, None)`` for a binary column
    (:func:`_sketch_blobs`), or for an array of sketches (``collect_list``
    of a stored sketch column) ``(blobs, starts)``: every row's non-null
    sketches, row ``i`` the union of ``blobs[starts[i]:starts[i + 1]]``."""
    import pyarrow as pa

    array = arrays["sketch"]
    need = f"{_SKETCH_NEEDS}, or an array of them"
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        return _sketch_blobs(arrays, names, fn, classes, need), None
    column = names.get("sketch", "sketch")
    inner = arrow_type_name(array.type.value_type)
    if inner not in ("binary", "void"):
        raise wrong_type(column, f"{fn} {need}, that is", ("binary", "array<binary>"), f"array<{inner}>")
    blobs, starts = list_blobs_of(array)
    _check_blobs(blobs, column, fn, classes)
    return blobs, starts


def _merged_rows(blobs, starts) -> list:
    """One sketch per row (bytes, None for a row without any): each row's
    union, by its family's merge."""

    return merged(spec_for_bytes(blobs[0]), blobs, starts) if blobs else [None] * starts.size


class _Shown(str):
    def __repr__(self):
        return str(self)


def _union(fn, classes):
    """Body of ``<family>_union_agg`` as a grouped UDF (SQL): one call per
    group."""
    def body(arrays, names):
        blobs = [b for b in _sketch_blobs(arrays, names, fn, classes) if b is not None]
        if not blobs:
            return None
        by_class = {spec_for_bytes(b) for b in blobs}
        return next(iter(by_class)).merge(blobs)

    return body


def _union_of_lists(fn, classes, aggregate: bool = False):
    """Body of ``<family>_union``: a scalar UDF over an array of sketches
    per row (``collect_list``), every row of an Arrow batch united at once
    (:func:`udaf.union.merged`); a binary column is read as one sketch per
    row.  ``aggregate``: the body of ``<family>_union_agg`` in Python, over
    ``collect_list`` of the user's column, whose own type errors name."""
    def body(arrays, names):
        import pyarrow as pa

        array = arrays["sketch"]
        if aggregate:
            inner = arrow_type_name(array.type.value_type)
            if inner not in ("binary", "void"):  # the column the user named, not the list Spark made of it
                raise wrong_type(names.get("sketch", "sketch"), f"{fn} {_SKETCH_NEEDS}, that is", ("binary",), inner)
        blobs, starts = _sketch_groups(arrays, names, fn, classes)
        if starts is None:  # one sketch per row
            starts = np.arange(len(blobs), dtype=np.int64)
        return pa.array(_merged_rows(blobs, starts), type=pa.binary())

    return body


class _UnionAggregate(_Function):
    """``<family>_union_agg``: in SQL a grouped UDF (:func:`_union`, one
    Python call per group); in Python ``collect_list`` of the column under
    a scalar Arrow UDF (:func:`_union_of_lists`): Spark groups the sketches,
    one Python call unites every group of a batch.  The same bytes either
    way; measured over 518k sketch rows of 100k keys (counts and distinct
    counts), the Python form took 1.9 s where the grouped UDF took 64.8 s."""

    def __init__(self, name, args, classes, doc):
        super().__init__(name, args, _union(name, classes), "binary", True, doc)
        self.of_lists = _Function(name, args, _union_of_lists(name, classes, aggregate=True), "binary", False, doc)

    def __call__(self, *args, **kwargs) -> Column:
        sketch = self.bind(args, kwargs)["sketch"]
        name = sketch if isinstance(sketch, str) else str(sketch)
        lists = F.collect_list(_col(sketch, "sketch"))
        return self.of_lists.udf({"sketch": name})(lists).alias(f"{self.name}({name})")


def _query(arrays, names, fn: str):
    """(query times or None, window or None) of a scalar sketch function:
    ``now`` a column of times (every row set), ``window`` a literal in the
    time unit of ``now`` or of ``unit``."""
    unit = _literal(arrays, "unit") or "us"
    nows = None
    if "now" in arrays and not _null_type(arrays["now"]):
        now = arrays["now"]
        if now.null_count:
            raise bad_value(names.get("now", "now"), None, f"{fn} needs a time in every row of now "
                                                           "(leave now out to answer at each sketch's newest)")
        nows, unit = times(now, names.get("now", "now"))
    window = _literal(arrays, "window")
    # a bare number: the unit's own, where the unit was given (unit=) rather than read from now
    window = None if window is None else Window(window).resolve(unit, names.get("now", "now") if nows is not None
                                                                else "sketch", bare=nows is None)
    return nows, window, unit


def _check_query(given):
    if given.get("window") is not None and not isinstance(given["window"], Column):
        Window(given["window"])
    unit = given.get("unit")
    if unit is not None and unit not in ("us", "day", "int"):
        raise ValueError(f"unit must be 'us' (timestamp sketches), 'day' (date sketches) or 'int', got {unit!r}")


def _estimator(fn, classes, name: str, estimator):
    """Body of a family's own scalar function (:class:`udaf.spec.Estimator`)."""
    owner = next(c for c in classes if name in c.estimators)

    def body(arrays, names):
        blobs, starts = _sketch_groups(arrays, names, fn, classes)
        nows, window, unit = _query(arrays, names, fn)
        extra = {a: arrays[a] if is_column else _literal(arrays, a) for a, is_column in estimator.args}
        with in_user_terms(unit):
            if starts is not None:  # arrays of sketches: the family's union answer, else the merge's
                of_unions = getattr(owner, f"estimate_{name}_of_unions", None)
                got = None if of_unions is None else of_unions(blobs, starts, extra, nows, window)
                if got is not None:
                    return got
                blobs = _merged_rows(blobs, starts)
            return getattr(owner, f"estimate_{name}")(blobs, extra, nows, window)

    body.check = _check_query
    return body


def _answers(fn, classes, bounds: bool):
    def body(arrays, names):
        blobs, starts = _sketch_groups(arrays, names, fn, classes)
        nows, window, unit = _query(arrays, names, fn)
        with in_user_terms(unit):
            return _answered(blobs, starts, nows, window, bounds)

    body.check = _check_query
    return body


def _answered(blobs, starts, nows, window, bounds: bool):
    """The answers of :func:`_answers` (an Arrow array)."""
    import pyarrow as pa

    blobs = Blobs.of(blobs)
    if starts is None:  # one sketch per row
        starts, sizes = np.arange(len(blobs), dtype=np.int64), blobs.present.astype(np.int64)
    else:  # an array of sketches per row: their union's answer
        sizes = np.diff(np.append(starts, len(blobs)))
    n = starts.size
    estimate = np.full(n, np.nan)
    lower = np.zeros(n, dtype=np.int64)
    upper = np.zeros(n, dtype=np.int64)
    families = np.where(sizes > 0, blobs.families()[np.minimum(starts, max(len(blobs) - 1, 0))] if len(blobs) else -1,
                        -1)
    for family in np.unique(families[families >= 0]).tolist():
        rows = np.flatnonzero(families == family)
        cls = spec_for_bytes(blobs[int(starts[rows[0]])])
        when = None if nows is None else nows[rows]
        if sizes.size and sizes.max() <= 1:  # no unions: each row its sketch
            got = cls.answers(blobs.take(starts[rows]), when, window)
        else:
            parts = ranges(starts[rows], starts[rows] + sizes[rows])
            got = cls.union_answers(blobs.take(parts), np.concatenate([[0], np.cumsum(sizes[rows])[:-1]])
                                    .astype(np.int64), when, window)
        estimate[rows] = got.estimate
        if bounds:
            lower[rows], upper[rows] = got.lower, got.upper
    if not bounds:
        return pa.array(estimate, type=pa.float64(), from_pandas=True)
    missing = families < 0  # null sketch (or none): null bounds
    return pa.StructArray.from_arrays([pa.array(lower, mask=missing), pa.array(upper, mask=missing)],
                                      names=["lower", "upper"])


# ------------------------------------------------------------- the table
def _define(name, args, body, return_type, grouped, doc) -> _Function:
    fn = _Function(name, args, body, return_type, grouped, doc)
    _FUNCTIONS[name] = fn
    return fn


_GENERATED: set = set()  # families whose functions are defined


def _generate() -> list:
    """Define the functions of every registered family not yet served
    (all of them at import; a family registered later, from another
    package or a test, on the next :func:`register`, :func:`signature` or
    attribute lookup); returns the families served now."""
    load_families()
    query = [("now", None, False), ("query_window", None, False)]
    estimate_args = [("sketch", _REQUIRED, True), ("now", None, True), ("window", None, False), ("unit", "us", False)]
    new = [f for f in FAMILIES if f not in _GENERATED]
    for family in new:
        classes = FAMILIES[family]
        _GENERATED.add(family)
        before = set(_FUNCTIONS)
        names = " / ".join(c.__name__ for c in classes)
        sketches = " or ".join(sorted({c.sketch_type.__name__ for c in classes}))
        _define(f"{family}_sketch_agg", [("ts", _REQUIRED, True)] + _family_args(classes), _build(classes,
                _family_args(classes)), "binary", True,
                f"Aggregate: a binary {sketches} of the group ({names} spec), BinaryType.")
        union = f"{family}_union_agg"
        _FUNCTIONS[union] = _UnionAggregate(union, [("sketch", _REQUIRED, True)], classes,
                                            f"Aggregate: the union of binary {sketches} sketches (BinaryType). In "
                                            f"Python every group of a batch at once (``collect_list`` under an "
                                            f"Arrow UDF); in SQL a Python call per group: "
                                            f"``{family}_union(collect_list(sketch))`` is the one-pass form there.")
        _define(f"{family}_union", [("sketch", _REQUIRED, True)], _union_of_lists(f"{family}_union", classes),
                "binary", False, f"Scalar: the union of an array of binary {sketches} sketches (``collect_list`` of "
                                 f"a stored column; a binary column is one sketch per row), every row of a batch at "
                                 f"once, BinaryType: in SQL, ``{family}_union(collect_list(s)) ... GROUP BY`` "
                                 f"unites without a Python call per group.")
        _define(f"{family}_sketch_estimate", estimate_args, _answers(f"{family}_sketch_estimate", classes, False),
                "double", False, f"Scalar: the estimate of a {sketches} sketch over the window as of now "
                                 "(default: the sketch's window, at its newest time), DoubleType.")
        if any(c.bounded for c in classes):
            _define(f"{family}_sketch_bounds", estimate_args, _answers(f"{family}_sketch_bounds", classes, True),
                    "struct<lower:bigint,upper:bigint>", False,
                    "Scalar: struct<lower: bigint, upper: bigint> bracketing the exact answer.")
        estimators = {}
        for cls in classes:
            estimators.update(cls.estimators)
        for name, est in estimators.items():
            fn = f"{family}_sketch_{name}"
            args = [("sketch", _REQUIRED, True)] + [(a, _REQUIRED, c) for a, c in est.args] + estimate_args[1:]
            _define(fn, args, _estimator(fn, classes, name, est), est.return_type, False, est.doc)
        for cls in classes:
            if not cls.one_step:
                continue
            args = [("ts", _REQUIRED, True)] + _spec_args(cls) + query
            _define(cls.one_step, args, _build([cls], args, one_step=True), "double", True,
                    f"Aggregate: the {cls.__name__} spec's estimate over the window as of now (default: the "
                    "group's newest time), within the spec's error, DoubleType.")
        for name in set(_FUNCTIONS) - before:
            _FUNCTIONS[name].family = family
    return new


_generate()


# -------------------------------------------------------------- aliases
_DEPRECATED = {
    # old name: (new name, old keyword -> new keyword)
    "eh_sketch": "eh_sketch_agg", "eh_merge": "eh_union_agg", "eh_estimate": "eh_sketch_estimate",
    "eh_bounds": "eh_sketch_bounds", "fm_sketch": "sliding_fm_sketch_agg", "fm_merge": "sliding_fm_union_agg",
    "hll_sliding_sketch": "sliding_hll_sketch_agg", "hll_sliding_merge": "sliding_hll_union_agg",
    "lp_sketch": "sliding_lp_sketch_agg", "lp_merge": "sliding_lp_union_agg", "lp_estimate": "sliding_lp_sketch_estimate",
}


def _deprecated(old: str, new: str):
    target = _FUNCTIONS[new]

    def alias(*args, **kwargs):
        warnings.warn(f"udaf.functions.{old} is deprecated and will be removed in the next minor version: "
                      f"use {new} ({target.signature()})", DeprecationWarning, stacklevel=2)
        return target(*args, **kwargs)

    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{new}`."
    return alias


def _old_builder(old: str, new: str, inputs: tuple):
    """The old builders took inputs right after ts and parameters as
    keywords: ``eh_sketch(ts, value=None, *, window, eps)``."""
    target = _FUNCTIONS[new]

    def alias(ts, *columns, **params):
        warnings.warn(f"udaf.functions.{old} is deprecated and will be removed in the next minor version: "
                      f"use {new} ({target.signature()})", DeprecationWarning, stacklevel=2)
        given = dict(zip(inputs, columns))
        for k in inputs:
            if k in params:
                given[k] = params.pop(k)
        return target(ts, **{k: v for k, v in given.items() if v is not None}, **params)

    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of :func:`{new}`."
    return alias


def distinct_estimate(sketch, now=None, window=None, *, unit: str = "us") -> Column:
    """Deprecated: :func:`sliding_hll_sketch_estimate` or
    :func:`sliding_fm_sketch_estimate` (this one reads either)."""
    warnings.warn("udaf.functions.distinct_estimate is deprecated and will be removed in the next minor version: "
                  "use sliding_hll_sketch_estimate or sliding_fm_sketch_estimate", DeprecationWarning, stacklevel=2)
    fn = _Function("distinct_estimate", _FUNCTIONS["sliding_hll_sketch_estimate"].args,
                   _answers("distinct_estimate", FAMILIES["sliding_hll"] + FAMILIES["sliding_fm"], False),
                   "double", False, "")
    return fn(sketch, now, window, unit)


def register(spark) -> list:
    """Register every function for Spark SQL in ``spark`` (a classic or a
    Spark Connect session); returns their names.

    Arguments in SQL are those of the Python functions, in the same order
    (:func:`signature`), parameters as literals; messages name a column
    argument by its name and position (``column value (argument 2 of
    sliding_sum) holds -5 ...``: Spark passes no column names to Python)::

        SELECT k, eh_sketch_agg(ts, '1 hour', 0.01) AS s FROM t GROUP BY k
        SELECT k, eh_sketch_estimate(s), eh_sketch_bounds(s, now(), '10 minutes') FROM stored
        SELECT k, sliding_sum(ts, bytes, INTERVAL 1 HOUR) FROM t GROUP BY k
    """
    _refresh()
    for name, fn in _FUNCTIONS.items():
        spark.udf.register(name, fn.udf(fn.sql_names()))
    return sorted(_FUNCTIONS)


def signature(name: str) -> str:
    """A function's arguments, as Python and SQL take them."""
    _refresh()
    return _FUNCTIONS[name].signature()


def _refresh() -> None:
    """The functions of families registered since the last call, defined
    and exported."""
    if any(f not in _GENERATED for f in FAMILIES) and _generate():
        _export()


def __getattr__(name):
    # a function of a family registered after this module was imported
    _refresh()
    if name in _FUNCTIONS:
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _export() -> list:
    names = []
    for name, fn in _FUNCTIONS.items():
        if name in globals():
            names.append(name)
            continue
        def python(*args, _fn=fn, **kwargs) -> Column:
            return _fn(*args, **kwargs)
        python.__name__ = python.__qualname__ = name
        python.__signature__ = fn.python_signature()
        python.__doc__ = (f"{fn.doc}\n\nPython: ``{fn.signature()}``\n\n"
                          f"SQL, after :func:`register`: ``{fn.sql_signature()}``")
        globals()[name] = python
        names.append(name)
    for old, new in _DEPRECATED.items():
        inputs = {"eh_sketch": ("value",), "fm_sketch": ("item",), "hll_sliding_sketch": ("item",),
                  "lp_sketch": ("index", "value")}.get(old)
        globals()[old] = _old_builder(old, new, inputs) if inputs else _deprecated(old, new)
    return names


__all__ = sorted(_export()) + ["register", "signature", "distinct_estimate"] + sorted(_DEPRECATED)
