"""Two-phase aggregation: partial sketches per partition, shuffle only sketches.

Grouped-aggregate pandas UDFs have no partial aggregation: every row of a
key is shuffled to one Python worker.  :func:`aggregate` builds one sketch
per key in each partition (``mapInPandas``, one numpy sort by key and
time, no shuffle), shuffles those sketches, merges them per key and
estimates.  Because it sees the DataFrame, it checks column types on the
driver and converts timestamps on the JVM side exactly (TimestampType:
epoch microseconds; DateType: epoch days; integral: as is).

Examples
--------
>>> from udaf import aggregate, Count, Sum, Distinct            # doctest: +SKIP
>>> aggregate(flows, "src", "ts",
...           packets=Count(window="1 hour"),
...           bytes=Sum("bytes", window="1 hour"),
...           dsts=Distinct("dst", window="1 hour")).show()     # doctest: +SKIP
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from distinct import SlidingHyperLogLog
from distinct.columnar import sliding_hll_bytes
from ehist import ExponentialHistogram
from ehist.columnar import histogram_bytes
from ehist.hashing import hash64
from ehist._validation import check_eps
from lp_norms import SlidingLpNorm, rows_for

from . import functions as U
from .exact import ExactAnswers
from .union import UnionAnswers, merged_estimate
from ._convert import Window, items_of, key_names

__all__ = ["aggregate", "sketch_table", "Count", "Sum", "Distinct", "LpNorm"]


class _Spec:
    """Base of the aggregate specs (each a frozen dataclass)."""

    kind = ""

    def check(self):
        Window(self.window)


class _HistogramSpec(_Spec):
    """Specs answered by an exponential histogram (within ``eps``)."""

    def check(self):
        Window(self.window)
        check_eps(self.eps)

    def make(self, window):
        return ExponentialHistogram(window, self.eps)


@dataclass(frozen=True)
class Count(_HistogramSpec):
    """Sliding count of rows (exponential histogram, within ``eps``)."""

    window: object
    eps: float = 0.01
    kind = "count"


@dataclass(frozen=True)
class Sum(_HistogramSpec):
    """Sliding sum of a non-negative integral column (within ``eps``)."""

    column: str
    window: object
    eps: float = 0.01
    kind = "sum"


@dataclass(frozen=True)
class Distinct(_Spec):
    """Sliding distinct count of a column (sliding HyperLogLog)."""

    column: str
    window: object
    precision: int = 12
    seed: int = 0
    kind = "distinct"

    def check(self):
        Window(self.window)
        SlidingHyperLogLog(1, self.precision, self.seed)

    def make(self, window):
        return SlidingHyperLogLog(window, self.precision, self.seed)


@dataclass(frozen=True)
class LpNorm(_Spec):
    """Sliding L_p norm of the vector ``column -> sum(value)`` (value default 1)."""

    column: str
    window: object
    value: str | None = None
    p: float = 2.0
    eps: float = 0.05
    delta: float = 0.05
    seed: int = 0
    kind = "lp"

    def check(self):
        Window(self.window)
        SlidingLpNorm(self.p, 1, self.eps, self.delta, self.seed)

    def make(self, window):
        return SlidingLpNorm(self.p, window, self.eps, self.delta, self.seed)


_MERGES = {"count": U.eh_merge, "sum": U.eh_merge, "distinct": U.hll_sliding_merge, "lp": U.lp_merge}
_ESTIMATES = {"count": U.eh_estimate, "sum": U.eh_estimate, "distinct": U.distinct_estimate,
              "lp": U.lp_estimate}


def ntz_micros(column):
    """Microseconds since 1970-01-01 00:00 of a TimestampNTZ column's
    wall-clock values (no time zone involved)."""
    return F.timestamp_diff("MICROSECOND", _NTZ_EPOCH(), column)


def micros_to_ntz(column):
    """The inverse of :func:`ntz_micros`: TimestampNTZ values."""
    return F.timestamp_add("MICROSECOND", column, _NTZ_EPOCH())


def _NTZ_EPOCH():  # noqa: N802 - a constant, built lazily (needs an active session)
    return F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")


def _time_expression(df: DataFrame, ts: str):
    dtype = df.schema[ts].dataType
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(F.col(ts)), "us"
    if isinstance(dtype, T.TimestampNTZType):
        return ntz_micros(F.col(ts)), "us"
    if isinstance(dtype, T.DateType):
        return F.unix_date(F.col(ts)).cast("long"), "day"
    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return F.col(ts).cast("long"), "int"
    raise TypeError(f"column {ts} must be a timestamp (with or without time zone), date or integral column, "
                    f"got {dtype.simpleString()}")


def _check(df: DataFrame, keys: list, ts: str, specs: dict, caller: str, allowed=None,
           appends: bool = False):
    """Check columns, types and specs on the driver.

    Returns (JVM time expression, {name: window in the column's unit},
    sorted value columns the specs read).
    """
    allowed = allowed or (Count, Sum, Distinct, LpNorm)
    if not specs:
        raise ValueError(f"{caller} needs at least one spec, e.g. packets=Count(window='1 hour')")
    names = set(df.columns)
    for c in keys + [ts]:
        if not isinstance(c, str):
            raise TypeError(f"{caller} takes column names, got {c!r}")
        if c not in names:
            raise ValueError(f"column {c!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    time_expr, unit = _time_expression(df, ts)
    windows = {}
    for name, spec in specs.items():
        if not isinstance(spec, allowed):
            raise TypeError(f"spec {name} must be one of {', '.join(a.__name__ for a in allowed)}, "
                            f"got {type(spec).__name__}")
        if name in (names if appends else keys):
            raise ValueError(f"spec {name}: the {'DataFrame' if appends else 'grouping'} already has a column {name!r}")
        spec.check()
        for c in (getattr(spec, "column", None), getattr(spec, "value", None)):
            if c is not None and c not in names:
                raise ValueError(f"spec {name}: column {c!r} is not in the DataFrame")
            if c is not None and (c == ts or (c in keys and spec.kind != "distinct")):
                raise ValueError(f"spec {name}: column {c!r} is a grouping or the time column")
        if spec.kind == "sum":
            dtype = df.schema[spec.column].dataType
            if not isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
                raise TypeError(f"spec {name}: column {spec.column} must be integral, got {dtype.simpleString()}")
        windows[name] = Window(spec.window).resolve(unit, ts)
    needed = sorted({c for s in specs.values() for c in (getattr(s, "column", None), getattr(s, "value", None)) if c})
    return time_expr, windows, [c for c in needed if c not in keys and c != ts]


# Key types whose runs pyarrow finds exactly (equality kernels; Spark's sort
# puts equal keys together): these keys take the mapInArrow paths (exact
# answers here, sliding_over).  Floating keys keep the grouped paths: Spark
# groups NaN with NaN and -0.0 with 0.0, which Arrow's equality and a hash
# repartition need not.
RUN_KEY_TYPES = (T.StringType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
                 T.LongType, T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType)


# Below this many rows per key per partition, partial sketches cost more
# than the rows they summarize (measured: benchmarks/bench_udaf.py).
_MIN_ROWS_PER_PARTIAL = 64
# Bytes of one row of the shuffle (key, time, an index and a value as an
# UnsafeRow), against which an L_p partial's size is weighed.
_ROW_BYTES = 48


def _lp_partial_bytes(spec: LpNorm, n: int) -> float:
    """An upper estimate of an L_p partial's bytes over ``n`` rows:
    ``rows_for(p, eps, delta)`` float64s per bucket, at most
    ``k (log2(n / k) + 2)`` buckets (``k = ceil(1/eps)``; measured counts
    stay below it)."""
    k = math.ceil(1 / spec.eps)
    return rows_for(spec.p, spec.eps, spec.delta) * 8.0 * k * (math.log2(max(n / k, 1.0)) + 2)


def min_rows_per_partial(specs: dict) -> int:
    """Rows per key and partition from which ``auto`` builds partials:
    64 for counts, sums and distinct counts (a histogram or sketch of that
    many rows is smaller than they are), and for an L_p norm the first
    power of two of rows whose shuffle bytes exceed the partial's estimated
    bytes (dense p-stable sketches in every bucket: tens of thousands of
    rows at the default eps and delta)."""
    need = _MIN_ROWS_PER_PARTIAL
    for spec in specs.values():
        if spec.kind == "lp":
            n = _MIN_ROWS_PER_PARTIAL
            while n * _ROW_BYTES < _lp_partial_bytes(spec, n):
                n *= 2
            need = max(need, n)
    return need


def aggregate(df: DataFrame, by, ts: str, *, now=None, bounds: bool = False, sketches: bool = False,
              strategy: str = "auto", **specs) -> DataFrame:
    """Windowed aggregates per key in two phases (partial sketches, then merge).

    Parameters
    ----------
    df : DataFrame
    by : str or list of str
        Grouping columns.
    ts : str
        The event-time column (TimestampType, DateType or integral); every
        spec's window is measured on it.
    now : datetime, date or int, optional
        Answer every key as of this time (the end of the monitoring
        period: keys that went quiet then count only what is left in their
        window).  A datetime is epoch time as PySpark reads it (naive:
        the Python process's local time, as ``collect()`` returns
        timestamps); it must not be older than any row's time.  Default:
        each key's newest timestamp.
    bounds : bool, default False
        Also return ``<name>_lower`` and ``<name>_upper`` (bigint) for the
        Count and Sum specs: the exact value always lies between them.
    sketches : bool, default False
        Also return each spec's merged binary sketch as ``<name>_sketch``
        (always two-phase; merging costs about 5 ms per key and partition
        in Python, so prefer the default when only estimates are needed).
    strategy : {"auto", "two_phase", "shuffle"}
        ``two_phase`` builds partial sketches per partition and shuffles
        only them; ``shuffle`` sends the rows by key and, with a key's rows
        at hand, answers exactly (counts, sums, distinct counts, L_p norms;
        bounds equal to the answer), all keys of an Arrow batch in one
        numpy pass (:mod:`udaf.exact`; floating-point keys: one
        grouped-aggregate UDF per key, Spark's plain path).
        ``auto`` (default) counts rows and approximate keys first (one
        cheap JVM-side pass) and picks two-phase when partitions hold at
        least 64 rows per key on average, where it shuffles far fewer bytes;
        with an LpNorm spec, only from the row count where its partials
        (a dense sketch per bucket) are smaller than the rows
        (:func:`min_rows_per_partial`: 131,072 at the defaults).
    **specs : Count, Sum, Distinct or LpNorm
        Output column name -> what to compute.  Estimates are as of each
        key's newest timestamp (for a spec reading a column: the newest
        row where that column is not null, the rows its synopsis holds;
        every strategy answers so), over the spec's window.

    Returns
    -------
    DataFrame with the ``by`` columns and one DoubleType column per spec.

    Raises
    ------
    TypeError, ValueError
        On the driver, before any job: unknown columns, wrong types, bad
        parameters.
    """
    keys = key_names(by, "aggregate", "by")
    time_expr, windows, needed = _check(df, keys, ts, specs, "aggregate")
    at = _now_in_unit(now, _time_expression(df, ts)[1], isinstance(df.schema[ts].dataType, T.TimestampNTZType))
    prepared = df.select(*[F.col(k) for k in keys], time_expr.alias("__ts"), *[F.col(c) for c in needed])
    key_fields = [df.schema[k] for k in keys]
    out_schema = T.StructType(key_fields + [T.StructField(n, T.BinaryType()) for n in specs])

    partial = _partial_builder(keys, specs, windows, needed)

    if strategy not in ("auto", "two_phase", "shuffle"):
        raise ValueError(f"strategy must be 'auto', 'two_phase' or 'shuffle', got {strategy!r}")
    if strategy == "auto" and not sketches:
        stats = df.agg(F.count(F.lit(1)).alias("n"),
                       F.approx_count_distinct(F.struct(*keys)).alias("keys")).collect()[0]
        per_partial = stats.n / max(1, stats["keys"]) / max(1, df.rdd.getNumPartitions())
        strategy = "two_phase" if per_partial >= min_rows_per_partial(specs) else "shuffle"
    with_bounds = {n for n, s in specs.items() if bounds and s.kind in ("count", "sum")}
    columns = [F.col(k) for k in keys]
    if not sketches:
        if all(isinstance(df.schema[k].dataType, RUN_KEY_TYPES) for k in keys):
            fields = list(key_fields)
            for name in specs:
                fields.append(T.StructField(name, T.DoubleType()))
                if name in with_bounds:
                    fields += [T.StructField(f"{name}_lower", T.LongType()),
                               T.StructField(f"{name}_upper", T.LongType())]
            parts = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
            if strategy == "shuffle":
                # every row of a key meets in one place: exact answers, all
                # keys of an Arrow batch in one numpy pass (udaf/exact.py)
                return prepared.repartition(parts, *keys).sortWithinPartitions(*keys, "__ts").mapInArrow(
                    ExactAnswers(keys, ts, specs, windows, at, with_bounds), T.StructType(fields))
            # the partials meet by key: unions of all keys of an Arrow
            # batch at once (udaf/union.py)
            return prepared.mapInPandas(partial, out_schema).repartition(parts, *keys).sortWithinPartitions(
                *keys).mapInArrow(UnionAnswers(keys, specs, windows, at, with_bounds), T.StructType(fields))
        if strategy == "shuffle":
            answers = prepared.groupBy(*keys).agg(*[
                (_rows_interval(spec, windows[name], at) if name in with_bounds
                 else _one_step_column(spec, windows[name], at)).alias(name)
                for name, spec in specs.items()
            ])
        else:
            # Estimates straight from the partials: no merged sketch is built.
            answers = prepared.mapInPandas(partial, out_schema).groupBy(*keys).agg(
                *[_union_estimate(spec, at, name in with_bounds)(F.col(name)).alias(name)
                  for name, spec in specs.items()]
            )
        for name in specs:
            if name in with_bounds:  # [lower, estimate, upper]
                columns += [F.col(name)[1].alias(name), F.col(name)[0].cast("long").alias(f"{name}_lower"),
                            F.col(name)[2].cast("long").alias(f"{name}_upper")]
            else:
                columns.append(F.col(name))
        return answers.select(*columns)
    partials = prepared.mapInPandas(partial, out_schema)
    merged = partials.groupBy(*keys).agg(*[_MERGES[s.kind](n).alias(n) for n, s in specs.items()])
    for name, spec in specs.items():
        columns.append(_ESTIMATES[spec.kind](name, now=at).alias(name))
        if name in with_bounds:
            b = U.eh_bounds(name, now=at)
            columns += [b["lower"].alias(f"{name}_lower"), b["upper"].alias(f"{name}_upper")]
        columns.append(F.col(name).alias(f"{name}_sketch"))
    return merged.select(*columns)


def _now_in_unit(now, unit: str, ntz: bool = False):
    """A literal ``now`` in the time column's unit (epoch micros, days or as
    is); against a TimestampNTZ column (``ntz``) a datetime is wall-clock
    time, its time zone if any dropped."""
    if now is None:
        return None
    if isinstance(now, _dt.datetime):
        if unit != "us":
            raise ValueError(f"now is a datetime but the time column is {'a date' if unit == 'day' else 'integral'}")
        if ntz:
            return (now.replace(tzinfo=None) - _EPOCH.replace(tzinfo=None)) // _dt.timedelta(microseconds=1)
        aware = now if now.tzinfo is not None else now.astimezone()  # naive: local, as PySpark reads it
        return (aware - _EPOCH) // _dt.timedelta(microseconds=1)
    if isinstance(now, _dt.date):
        if unit != "day":
            raise ValueError("now is a date but the time column is not")
        return (now - _EPOCH.date()).days
    if isinstance(now, bool) or not isinstance(now, (int, np.integer)):
        raise TypeError(f"now must be a datetime, a date or an int, got {type(now).__name__}")
    if unit != "int":
        raise ValueError(f"now is an int but the time column is a {'timestamp' if unit == 'us' else 'date'}")
    return int(now)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _partial_builder(keys, specs, windows, value_columns, at=None, with_bounds=()):
    """mapInPandas function: one sketch per key of each partition, from one
    numpy sort by (key, time) and slices; ``with_bounds`` names also get
    ``<name>_lower`` and ``<name>_upper`` as of ``at`` (default: the key's
    newest row)."""
    names = list(specs)
    for name in with_bounds:
        names += [f"{name}_lower", f"{name}_upper"]

    def partial(batches):
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        part = pd.concat(frames, ignore_index=True)
        # one vectorized pass: group codes, one sort by (code, time), then
        # numpy slices per key (no sort on the JVM side)
        codes = part.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
        order = np.lexsort((part["__ts"].to_numpy(), codes))
        codes = codes[order]
        starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
        ends = np.concatenate([starts[1:], [codes.size]])
        ts_all = part["__ts"].to_numpy(dtype=np.int64)[order]
        used = set(value_columns) | {getattr(x, "column", None) for x in specs.values()} - {None}
        columns = {c: part[c].to_numpy()[order] for c in used}
        key_frame = part[keys].iloc[order[starts]].reset_index(drop=True)
        key_newest = ts_all[ends - 1]
        out = {}
        for name, spec in specs.items():
            if spec.kind in ("count", "sum"):
                # every key's histogram in a few numpy passes (ehist.columnar)
                t, vals, runs = ts_all, None, starts
                if spec.kind == "sum":
                    vals = columns[spec.column]
                    keep = ~pd.isna(vals)
                    if not keep.all():
                        t, vals = t[keep], vals[keep]
                        runs = np.concatenate([[0], np.cumsum(keep)])[starts]
                    vals = vals.astype(np.int64)
                blobs, lower, upper = histogram_bytes(t, runs, vals, window=windows[name], eps=spec.eps,
                                                      now=key_newest if at is None else at)
                out[name] = blobs
                if name in with_bounds:
                    out[f"{name}_lower"], out[f"{name}_upper"] = lower, upper
            elif spec.kind == "distinct":  # every key's sketch in a few numpy passes (distinct.columnar)
                keep, items = items_of(pd.Series(columns[spec.column]), spec.column)
                runs = np.concatenate([[0], np.cumsum(keep)])[starts]
                out[name] = sliding_hll_bytes(ts_all[keep], runs, hash64(items, spec.seed), window=windows[name],
                                              precision=spec.precision, seed=spec.seed)
            else:
                out[name] = [_lp_sketch(spec, windows[name], ts_all[a:b], columns, a, b).to_bytes()
                             for a, b in zip(starts.tolist(), ends.tolist())]
        for a in range(0, len(key_frame), 10_000):
            chunk = key_frame.iloc[a:a + 10_000].reset_index(drop=True)
            for name in names:
                chunk[name] = out[name][a:a + 10_000]
            yield chunk

    return partial


def sketch_table(df: DataFrame, by, ts: str, *, now=None, bounds: bool = False, **specs) -> DataFrame:
    """One row per key with each spec's binary sketch, built without
    grouped-aggregate UDFs: the rows are repartitioned by key and every
    partition builds its keys' sketches in one numpy pass (``mapInPandas``).

    For many small keys this is far cheaper than ``groupBy(...).agg(
    eh_sketch(...))``, which pays a Python call per key and sketch.  The
    table is what :mod:`udaf.functions` reads and merges (``eh_merge``,
    ``eh_bounds``, ``hll_sliding_merge``...): a fine-grained sketch table
    (a Gigascope *phantom*) from which coarser groupings are answered
    without the rows (``examples/rollups.py``).

    Parameters
    ----------
    by, ts, specs
        As for :func:`aggregate`: column ``<name>`` holds the spec's sketch.
    now, bounds
        With ``bounds=True``, Count and Sum specs also get ``<name>_lower``
        and ``<name>_upper`` (bigint) as of ``now`` (default: each key's
        newest row), computed while the histogram is at hand.
    """
    keys = key_names(by, "sketch_table", "by")
    time_expr, windows, needed = _check(df, keys, ts, specs, "sketch_table")
    at = _now_in_unit(now, _time_expression(df, ts)[1], isinstance(df.schema[ts].dataType, T.TimestampNTZType))
    with_bounds = [n for n, s in specs.items() if bounds and s.kind in ("count", "sum")]
    prepared = df.select(*[F.col(k) for k in keys], time_expr.alias("__ts"), *[F.col(c) for c in needed])
    fields = [df.schema[k] for k in keys] + [T.StructField(n, T.BinaryType()) for n in specs]
    for name in with_bounds:
        fields += [T.StructField(f"{name}_lower", T.LongType()), T.StructField(f"{name}_upper", T.LongType())]
    return prepared.repartition(*[F.col(k) for k in keys]).mapInPandas(
        _partial_builder(keys, specs, windows, needed, at, with_bounds), T.StructType(fields))


def _union_estimate(spec, at=None, with_bounds=False):
    """Grouped aggregate: the estimate of the union of a key's partial
    sketches, as of ``at`` (default: the key's newest timestamp), without
    merging them; ``[lower, estimate, upper]`` when ``with_bounds``.

    Exponential histograms: lower and upper bounds add up over the
    partials, and the union of in-budget histograms is in budget
    (:mod:`ehist.compress`), so the midpoint is within eps, as after a
    merge.  Distinct counts: the exact merge (cheap).  L_p norms: the sum
    of the partials' composed sketches (linearity).
    """
    from pyspark.sql.functions import pandas_udf

    kind = spec.kind

    def union_bounds(s: pd.Series):
        hs = [ExponentialHistogram.from_bytes(b) for b in s if b is not None]
        stamps = [h.newest for h in hs if h.newest is not None]
        if not stamps:
            return 0, 0
        now = max(stamps) if at is None else at
        lower = upper = 0
        for h in hs:
            lo, up = h.bounds(now=now)
            lower += lo
            upper += up
        return lower, upper

    if with_bounds:
        @pandas_udf("array<double>")
        def union_interval(s: pd.Series) -> list:
            lower, upper = union_bounds(s)
            return [float(lower), lower * 0.5 + upper * 0.5, float(upper)]

        return union_interval

    @pandas_udf("double")
    def union_estimate(s: pd.Series) -> float:
        blobs = [b for b in s if b is not None]
        if kind in ("count", "sum"):
            lower, upper = union_bounds(s)
            return lower * 0.5 + upper * 0.5
        return merged_estimate(spec, blobs, at)

    return union_estimate


def _lp_sketch(spec, window, t, columns, a, b):
    """One key's L_p sketch from rows a..b of the partition's sorted columns
    (counts, sums and distinct counts are built for all keys at once)."""
    idx = columns[spec.column][a:b]
    mask = ~pd.isna(idx)
    vals = None
    if spec.value is not None:
        v = columns[spec.value][a:b]
        mask &= ~pd.isna(v)
        vals = v[mask].astype(np.float64)
    return spec.make(window).update(t[mask], items_of(pd.Series(idx[mask]), spec.column)[1], vals)


def _rows_interval(spec, window, at):
    """The plain-path ``[lower, estimate, upper]`` of a Count or Sum spec."""
    from pyspark.sql.functions import pandas_udf

    def interval(t: pd.Series, v: pd.Series | None = None) -> list:
        ts = t.to_numpy(dtype=np.int64)
        values = None
        if v is not None:
            mask = v.notna().to_numpy()
            ts, values = ts[mask], v[mask].to_numpy(dtype=np.int64)
        h = ExponentialHistogram(window, spec.eps).update(ts, values)
        if h.newest is None:
            return [0.0, 0.0, 0.0]
        lower, upper = h.bounds(now=h.newest if at is None else at)
        return [float(lower), lower * 0.5 + upper * 0.5, float(upper)]

    if spec.kind == "count":
        @pandas_udf("array<double>")
        def count_interval(t: pd.Series) -> list:
            return interval(t)

        return count_interval(F.col("__ts"))

    @pandas_udf("array<double>")
    def sum_interval(t: pd.Series, v: pd.Series) -> list:
        return interval(t, v)

    return sum_interval(F.col("__ts"), F.col(spec.column))


def _one_step_column(spec, window, at=None):
    """The plain-path aggregate for a spec, on the prepared int64 '__ts'."""
    if spec.kind == "count":
        return U.sliding_count("__ts", window=window, eps=spec.eps, now=at)
    if spec.kind == "sum":
        return U.sliding_sum("__ts", spec.column, window=window, eps=spec.eps, now=at)
    if spec.kind == "distinct":
        return U.sliding_distinct("__ts", spec.column, window=window, precision=spec.precision, seed=spec.seed,
                                  now=at)
    return U.sliding_lp_norm("__ts", spec.column, spec.value, p=spec.p, window=window, eps=spec.eps,
                             delta=spec.delta, seed=spec.seed, now=at)
