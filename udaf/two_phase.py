"""Windowed aggregates per key: :func:`aggregate` and :func:`sketch_table`.

Grouped-aggregate Python UDFs have no partial aggregation: every row of a
key is shuffled to one Python worker.  :func:`aggregate` either builds one
partial sketch per key in each partition (``mapInArrow``, one numpy sort
by key and time, no shuffle), shuffles those sketches and unites them per
key (``two_phase``), or shuffles the rows and answers exactly from them
(``shuffle``); both answer every key of an Arrow batch in one numpy pass.
Because it sees the DataFrame, it checks column types on the driver and
converts timestamps on the JVM side exactly (TimestampType: epoch
microseconds; DateType: epoch days; integral: as is).

Both drivers ask the specs (:mod:`udaf.spec`) for everything that depends
on the synopsis; nothing here knows which families exist.

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

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ehist.segments import order_by

from ._convert import Window, key_names
from .eh_spec import Count, Sum
from .exact_answers import ExactAnswers
from .fm_spec import DistinctFM
from .hll_spec import Distinct
from .inputs import TIME, TIME_NEEDS, check_spark_type, times
from .keys import by_key, run_columns
from .lp_spec import LpNorm
from .native import has_native, key_text, native_answers
from .spec import Spec, load_families, read_spec
from .sql_text import checked_sum, quote
from .union import UnionAnswers

__all__ = ["aggregate", "sketch_table", "Count", "Sum", "Distinct", "DistinctFM", "LpNorm", "min_rows_per_partial",
           "reduce_rows", "REDUCE_TWO_PHASE", "REDUCE_SKETCH_TABLE"]


def ntz_micros(column):
    """Microseconds since 1970-01-01 00:00 of a TimestampNTZ column's
    wall-clock values (no time zone involved)."""
    return F.timestamp_diff("MICROSECOND", _NTZ_EPOCH(), column)


def micros_to_ntz(column):
    """The inverse of :func:`ntz_micros`: TimestampNTZ values."""
    return F.timestamp_add("MICROSECOND", column, _NTZ_EPOCH())


def _NTZ_EPOCH():  # noqa: N802 - a constant, built lazily (needs an active session)
    return F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")


def time_unit(df: DataFrame, ts: str) -> str:
    """The time column's unit (``"us"``, ``"day"`` or ``"int"``), its type checked."""
    dtype = df.schema[ts].dataType
    check_spark_type(ts, dtype, TIME, TIME_NEEDS)
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return "us"
    return "day" if isinstance(dtype, T.DateType) else "int"


def time_expression(df: DataFrame, ts: str):
    """(JVM expression of the time column in int64 units, unit)."""
    dtype = df.schema[ts].dataType
    check_spark_type(ts, dtype, TIME, TIME_NEEDS)
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(F.col(ts)), "us"
    if isinstance(dtype, T.TimestampNTZType):
        return ntz_micros(F.col(ts)), "us"
    if isinstance(dtype, T.DateType):
        return F.unix_date(F.col(ts)).cast("long"), "day"
    return F.col(ts).cast("long"), "int"


def time_range(df: DataFrame, ts: str, unit: str, lo: int | None, hi: int):
    """``lo < ts <= hi`` (``lo`` None: no lower end) on the raw time column
    against literals of its own type, so Spark pushes it down to the data
    source (Parquet row groups outside it are not read); rows with a null
    time pass, to be reported.  One SQL expression: built from Column
    calls it cost about 5 ms more of plan building (a JVM call each)."""

    ntz = unit == "us" and isinstance(df.schema[ts].dataType, T.TimestampNTZType)
    literal = ("timestampadd(MICROSECOND, {}L, TIMESTAMP_NTZ '1970-01-01 00:00:00')" if ntz else  # micros_to_ntz
               {"us": "timestamp_micros({}L)", "day": "date_from_unix_date({})", "int": "{}L"}[unit])
    column = quote(ts)
    inside = f"{column} <= {literal.format(hi)}"
    if lo is not None:
        inside = f"{column} > {literal.format(lo)} AND {inside}"
    return F.expr(f"({inside}) OR {column} IS NULL")


def check_specs(df: DataFrame, keys: list, ts: str, specs: dict, caller: str, appends: bool = False):
    """Check columns, types and specs on the driver, before any job.

    Returns (unit of the time column, {name: window in that unit}, sorted
    input columns the specs read); the plans that read the time in int64
    units build it with :func:`time_expression` (a JVM call or two the
    native plans skip).
    """
    if not specs:
        raise ValueError(f"{caller} needs at least one spec, e.g. packets=Count(window='1 hour')")
    names = set(df.columns)
    for c in keys + [ts]:
        if not isinstance(c, str):
            raise TypeError(f"{caller} takes column names, got {c!r}")
        if c not in names:
            raise ValueError(f"column {c!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    unit = time_unit(df, ts)
    windows = {}
    for name, spec in specs.items():
        if not isinstance(spec, Spec):
            raise TypeError(f"spec {name} must be a spec ({', '.join(c.__name__ for c in all_specs())}), "
                            f"got {type(spec).__name__}")
        if name in (names if appends else keys):
            raise ValueError(f"spec {name}: the {'DataFrame' if appends else 'grouping'} already has a column {name!r}")
        for role, c in spec.inputs().items():
            if c not in names:
                raise ValueError(f"spec {name}: column {c!r} is not in the DataFrame")
            if c == ts:
                raise ValueError(f"spec {name}: column {c!r} is the time column")
            check_spark_type(c, df.schema[c].dataType, spec.accepts[role], f"{spec.who} needs")
        windows[name] = Window(spec.window).resolve(unit, ts)
    needed = sorted({c for s in specs.values() for c in s.inputs().values()} - set(keys))
    return unit, windows, needed


def all_specs() -> list:
    """Every registered spec class."""
    return [c for classes in load_families().values() for c in classes]


def min_rows_per_partial(specs: dict) -> int:
    """Rows per key and partition from which ``auto`` builds partials: the
    largest the specs ask for (:meth:`Spec.min_rows_per_partial`: 64 for
    counts, sums and distinct counts, 131,072 for an L_p norm at the
    defaults)."""
    return max(spec.min_rows_per_partial() for spec in specs.values())


def aggregate(df: DataFrame, by, ts: str, *, now=None, bounds: bool = False, sketches: bool = False,
              strategy: str = "auto", reduce: bool | None = None, **specs) -> DataFrame:
    """Windowed aggregates per key, in two phases or from the rows.

    Parameters
    ----------
    df : DataFrame
    by : str or list of str
        Grouping columns.
    ts : str
        The event-time column (TimestampType, TimestampNTZType, DateType or
        integral); every spec's window is measured on it.
    now : datetime, date or int, optional
        Answer every key as of this time (the end of the monitoring
        period): only rows with ``now - window < ts <= now`` for the widest
        spec window are read (a range Spark pushes down to the source), so
        keys with no row there are left out, as in ``df.where(ts > now -
        w).groupBy(k)``, and rows after ``now`` do not count.  A datetime
        is epoch time as PySpark reads it (naive: the Python process's
        local time, as ``collect()`` returns timestamps).  Default: each
        key's newest timestamp.
    bounds : bool, default False
        Also return ``<name>_lower`` and ``<name>_upper`` (bigint) for the
        specs with deterministic bounds (Count, Sum, Frequencies' total):
        the exact value always lies between them.
    sketches : bool, default False
        Also return each spec's merged binary sketch as ``<name>_sketch``
        (always two-phase: each key's partials are united in columns, all
        keys of a batch at once; measured per key of 4 partials of 25
        rows each: 0.02-0.2 ms for counts, sums, distinct counts and
        quantiles, 0.5 ms for Frequencies and 4.5 ms for heavy hitters
        counting rows (19 ms and 146 ms weighted by a value column of 40 to
        1500), 24 ms for L_p norms; prefer the default when only estimates
        are needed).
    strategy : {"auto", "native", "two_phase", "shuffle"}
        ``native`` answers exactly with Spark's own aggregates (``count``,
        ``sum``, ``count(DISTINCT)`` conditioned on each spec's window; no
        Python in the plan: :mod:`udaf.native`), the query a data engineer
        would write, for specs that have one (Count, Sum, Distinct,
        DistinctFM, Frequencies; HeavyHitters: the exact list from a
        ``groupBy`` by key and item).  ``two_phase`` builds partial sketches per partition
        and shuffles only them (with ``now`` and no ``sketches``, a Count's
        or Sum's partial goes as its bounds as of ``now``, which Spark sums
        per key: the same answers as its sketches' union); ``shuffle`` sends the rows by key and, with
        a key's rows at hand, answers exactly (bounds equal to the answer),
        all keys of an Arrow batch in one numpy pass (:mod:`udaf.exact`).
        ``auto`` (default) runs ``native`` when every spec has a native
        form and no sketches are asked for; otherwise it counts rows,
        approximate keys and partitions first (one cheap JVM-side pass)
        and picks two-phase when partitions hold at least
        :func:`min_rows_per_partial` rows per key on average, where it
        shuffles far fewer bytes.
    reduce : bool or None, default None
        Whether Spark's own aggregation reduces the rows before any enters
        Python in the two-phase path (:func:`reduce_rows`: counts and sums
        per key and time, each distinct item's latest time per key; the
        synopses come out byte-identical).  None: when a cheap JVM pass
        finds at least :data:`REDUCE_TWO_PHASE` rows per reduced row (a
        bursty stream), since the reduced rows are shuffled once.
    **specs : Count, Sum, Distinct, DistinctFM, LpNorm, Frequencies or HeavyHitters
        Output column name -> what to compute (HeavyHitters: an
        ``array<struct<item, estimate, lower, upper>>`` column).  Estimates are as of each
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
        parameters.  In the job: :class:`~ehist.errors.InvalidInputError`
        for bad values (see :mod:`udaf.inputs`).
    """
    keys = key_names(by, "aggregate", "by")
    unit, windows, needed = check_specs(df, keys, ts, specs, "aggregate")
    at = now_in_unit(now, unit, isinstance(df.schema[ts].dataType, T.TimestampNTZType))
    if strategy not in ("auto", "native", "two_phase", "shuffle"):
        raise ValueError(f"strategy must be 'auto', 'native', 'two_phase' or 'shuffle', got {strategy!r}")
    check_reduce(reduce)

    if sketches:
        if strategy in ("native", "shuffle"):
            raise ValueError(f"sketches=True builds synopses: strategy {strategy!r} answers from the rows "
                             "without any; use strategy='two_phase' or 'auto'")
        strategy = "two_phase"
    if strategy == "native" and not has_native(specs, df.schema):
        missing = [f"{n} ({s.who})" for n, s in specs.items() if not has_native({n: s}, df.schema)]
        raise ValueError(f"strategy 'native': no native Spark plan for {', '.join(missing)}; "
                         "use 'auto', 'two_phase' or 'shuffle'")
    if strategy == "auto" and has_native(specs, df.schema):
        strategy = "native"
    with_bounds = [n for n, s in specs.items() if bounds and s.bounded]
    if at is not None:
        # only rows in the widest window as of `now` can count: every
        # strategy reads those alone (a range pushed down to the source),
        # so keys with no row there are not answered, as in
        # df.where(ts > now - w).groupBy(k)
        lo = at - max(windows.values())
        df = df.where(time_range(df, ts, unit, lo if lo >= np.iinfo(np.int64).min else None, at))
    if strategy == "native":
        # Spark's own aggregates answer exactly, no Python in the plan (udaf/native.py)
        return native_answers(df, keys, ts, specs, windows, at, with_bounds)
    if strategy == "auto":
        # partitions from the data, not df.rdd (Spark Connect has no rdd)
        stats = df.select(*keys, F.spark_partition_id().alias("__part")).agg(
            F.count(F.lit(1)).alias("n"), F.approx_count_distinct(F.struct(*keys)).alias("keys"),
            (F.max("__part") + 1).alias("parts")).collect()[0]
        per_partial = (stats["n"] or 0) / max(1, stats["keys"] or 0) / max(1, stats["parts"] or 0)
        strategy = "two_phase" if per_partial >= min_rows_per_partial(specs) else "shuffle"
    runs, run_exprs = run_columns(df, keys)
    extra = [r for r in runs if r not in keys]
    time_expr, _ = time_expression(df, ts)
    prepared = df.select(*[F.col(k) for k in keys], *run_exprs, time_expr.alias("__ts"),
                         *[F.col(c) for c in needed])
    key_fields = [df.schema[k] for k in keys]
    fields = list(key_fields)
    for name, spec in specs.items():
        fields.append(T.StructField(name, spec.answer_spark_type()))
        if name in with_bounds:
            fields += [T.StructField(f"{name}_lower", T.LongType()), T.StructField(f"{name}_upper", T.LongType())]
        if sketches:
            fields.append(T.StructField(f"{name}_sketch", T.BinaryType()))

    if strategy == "shuffle":
        # every row of a key meets in one place: exact answers, all keys of
        # an Arrow batch in one numpy pass (udaf/exact.py)
        return by_key(prepared, runs).sortWithinPartitions(*runs, "__ts").mapInArrow(
            ExactAnswers(keys, runs, ts, specs, windows, at, with_bounds), T.StructType(fields))
    # a histogram's answer from partials is the sums of their bounds as of `now` (Spec.union): with a `now`
    # and no sketch asked for, phase one sends those bounds and Spark sums them (no sketch shuffled, and
    # no Python pass after when every spec is such)
    summed = [n for n, s in specs.items() if at is not None and not sketches and s.additive]
    united = [n for n in specs if n not in summed]
    partial_fields = key_fields + [T.StructField(n, T.BinaryType()) for n in united]
    for n in summed:
        partial_fields += [T.StructField(f"{n}_lower", T.LongType()), T.StructField(f"{n}_upper", T.LongType())]
    rows, builds, groups = reduce_rows(prepared, keys, extra, specs, reduce, REDUCE_TWO_PHASE)
    partials = rows.mapInArrow(PartialSketches(keys, [], ts, builds, windows, at if summed else None, summed,
                                               groups=groups, runs=runs, sketchless=summed),
                               T.StructType(partial_fields))
    # the partials meet by key (Spark's grouping: NaN with NaN, -0.0 with 0.0),
    # unions of all keys of an Arrow batch at once (udaf/union.py)
    carried = [f"{n}_{end}" for n in summed for end in ("lower", "upper")]
    text = key_text(keys, df.schema) if summed else ""
    sums = [F.expr(checked_sum(quote(c), text)).alias(c) for c in carried]  # past int64: refused, key named
    lists = partials.groupBy(*[F.col(k) for k in keys]).agg(*[F.collect_list(n).alias(n) for n in united], *sums)
    if not summed:
        return lists.mapInArrow(UnionAnswers(keys, specs, at, with_bounds, sketches), T.StructType(fields))
    if united:
        middle = list(key_fields)  # UnionAnswers' columns (no sketches: none are asked for here), then the sums
        for n in united:
            middle.append(T.StructField(n, specs[n].answer_spark_type()))
            if n in with_bounds:
                middle += [T.StructField(f"{n}_lower", T.LongType()), T.StructField(f"{n}_upper", T.LongType())]
        middle += [T.StructField(c, T.LongType()) for c in carried]
        lists = lists.mapInArrow(UnionAnswers(keys, {n: specs[n] for n in united}, at, with_bounds, sketches,
                                              carried), T.StructType(middle))

    def col(name):
        return F.col(quote(name))

    out = [col(k) for k in keys]
    for name in specs:  # the columns in the order of the other plans
        if name in summed:  # the estimate as the Python answers compute it: lower / 2 + upper / 2
            out.append((col(f"{name}_lower") * 0.5 + col(f"{name}_upper") * 0.5).alias(name))
        else:
            out.append(col(name))
        if name in with_bounds:
            out += [col(f"{name}_lower"), col(f"{name}_upper")]
    return lists.select(*out)


def now_in_unit(now, unit: str, ntz: bool = False):
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


#: Rows a phase-one or ``sketch_table`` task holds in memory (about 400 MB
#: of Arrow columns, numpy scratch and builders at the most, measured):
#: past it the partition is spilled to local files by key hash, and each
#: file's keys are built in turn (:class:`PartialSketches`).
CHUNK_ROWS = 1 << 21
#: Files a partition past :data:`CHUNK_ROWS` is spilled to.
SPILL_FILES = 32


def _chained(held: list, batches):
    """The batches held, then the rest, each held one let go once passed on."""
    while held:
        yield held.pop(0)
    yield from batches


class PartialSketches:
    """``mapInArrow`` function of phase one: one sketch per key of each
    partition and spec, from one numpy sort by (key, time) and the specs'
    many-keys builders (:meth:`Spec.partials`); with ``at``/``with_bounds``
    the bounded specs also get ``<name>_lower`` / ``<name>_upper``, and
    the ``sketchless`` ones only those (their sketch is not sent).

    Memory: a partition of up to :data:`CHUNK_ROWS` rows is built in one
    pass.  A larger one streams to :data:`SPILL_FILES` Arrow files in
    Spark's local directory, each row to the file of its key's hash (on
    ``runs``, the columns Spark's grouping equality is found on), and the
    files are built one after another: every key's rows meet in one file,
    so the sketches are the same, and a task holds a file's rows at a
    time."""

    def __init__(self, keys, carried, ts, specs, windows, at=None, with_bounds=(), groups=None, runs=None,
                 sketchless=()):
        self.keys, self.carried, self.ts, self.specs, self.windows = keys, carried, ts, specs, windows
        self.at, self.with_bounds, self.groups = at, list(with_bounds), groups
        self.sketchless = list(sketchless)  # specs whose bounds go out without their sketch
        self.runs = list(keys if runs is None else runs)
        self.chunk_rows, self.spill_files = CHUNK_ROWS, SPILL_FILES  # read on the driver: what the tasks hold

    def __call__(self, batches):
        held, n = [], 0
        batches = iter(batches)
        for batch in batches:
            if batch.num_rows:
                held.append(batch)
                n += batch.num_rows
            if n > self.chunk_rows:
                yield from self._spilled(held, batches)
                return
        if held:
            yield from self._partials(*self._sorted(held))

    def _spilled(self, held, batches):
        """The partials of a partition too large to hold: its rows spilled
        to files by key hash, then each file's keys built."""
        import os
        import tempfile

        import pandas as pd
        import pyarrow as pa

        local = os.environ.get("SPARK_LOCAL_DIRS", tempfile.gettempdir()).split(",")[0]
        with tempfile.TemporaryDirectory(prefix="ehist-spill-", dir=local) as spill:
            paths = [os.path.join(spill, f"{i}.arrow") for i in range(self.spill_files)]
            schema = held[0].schema
            sinks = [pa.ipc.new_stream(p, schema) for p in paths]
            try:
                for batch in _chained(held, batches):
                    if not batch.num_rows:
                        continue
                    keys = batch.select(self.runs).to_pandas()
                    file = pd.util.hash_pandas_object(keys, index=False).to_numpy() % np.uint64(self.spill_files)
                    order = np.argsort(file, kind="stable")
                    cuts = np.searchsorted(file[order], np.arange(self.spill_files + 1))
                    batch = batch.take(pa.array(order))
                    for i in np.flatnonzero(np.diff(cuts)).tolist():
                        sinks[i].write_batch(batch.slice(int(cuts[i]), int(cuts[i + 1] - cuts[i])))
                    del batch, keys
            finally:
                for sink in sinks:
                    sink.close()
            for path in paths:
                with pa.ipc.open_stream(path) as reader:
                    rows = [b for b in reader if b.num_rows]
                if rows:
                    yield from self._partials(*self._sorted(rows))
                del rows
                os.remove(path)

    def _sorted(self, batches):
        """The rows of ``batches`` sorted by key and time: ``(table, t,
        starts)`` as :func:`udaf._arrow.complete_runs` gives them."""
        import pyarrow as pa

        table = pa.Table.from_batches(batches).combine_chunks()
        # on the run columns: pandas would group a null float key with NaN
        codes = table.select(self.runs).to_pandas().groupby(self.runs, sort=False, dropna=False).ngroup().to_numpy()
        t, _ = times(table.column("__ts").chunk(0), self.ts,
                     lambda row: tuple(table.column(k)[int(row)].as_py() for k in self.keys))
        order = order_by(codes, t)
        codes, t = codes[order], t[order]
        table = table.take(pa.array(order)).combine_chunks()
        return table, t, np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))

    def _partials(self, table, t, starts):
        import pyarrow as pa

        out = {k: table.column(k).chunk(0).take(pa.array(starts)) for k in self.keys + self.carried}

        def key_of(row):
            return tuple(table.column(k)[int(row)].as_py() for k in self.keys)

        bounds = {}  # after every sketch column, as the schema has them
        group = None if self.groups is None else table.column("__group").chunk(0).to_numpy()
        for name, spec in self.specs.items():
            if group is None:
                data = read_spec(spec, table, key_of)
            else:  # rows of several reductions (reduce_rows): the spec reads its own
                rows = np.flatnonzero(group == self.groups[name])
                data = read_spec(spec, table.take(pa.array(rows)), lambda row, rows=rows: key_of(rows[row]))
                present = np.zeros(table.num_rows, dtype=bool)
                present[rows] = data.present
                data.present = present
            bounded = self.at is not None and name in self.with_bounds  # (the other specs' are not read)
            blobs, answers = spec.partials(t, starts, data, self.windows[name],
                                           np.full(starts.size, self.at) if bounded else None)
            if name not in self.sketchless:
                out[name] = pa.array(blobs, type=pa.binary())
            if name in self.with_bounds:
                bounds[f"{name}_lower"], bounds[f"{name}_upper"] = pa.array(answers.lower), pa.array(answers.upper)
        out.update(bounds)
        result = pa.Table.from_pydict(out)
        yield from result.to_batches(max_chunksize=10_000)


#: Rows per reduced row from which the two-phase path of :func:`aggregate`
#: reduces first (the reduced rows are shuffled once; the rows never are).
REDUCE_TWO_PHASE = 4.0
#: The same for :func:`sketch_table`, which shuffles the rows anyway.
REDUCE_SKETCH_TABLE = 1.5


def check_reduce(reduce) -> None:
    """``reduce`` is True, False or None, whichever plan runs."""
    if reduce is not None and not isinstance(reduce, bool):
        raise ValueError(f"reduce must be True, False or None (decide from the rows), got {reduce!r}")


def reduce_rows(prepared: DataFrame, keys: list, carried: list, specs: dict, reduce, threshold: float):
    """The rows phase one reads, reduced by Spark where it pays.

    Each spec's :meth:`~udaf.spec.Spec.reduction` names the columns a
    reduced row is unique on besides the key (``__ts`` for counts and sums,
    the item for distinct counts), SQL aggregates, and the spec that builds
    the same synopsis from the reduced rows.  Specs sharing a grouping
    share one ``groupBy(key, grouping).agg(...)``: Spark aggregates each
    partition's rows before the shuffle (partial aggregation), so on a
    bursty stream few rows move and fewer reach Python.  With ``reduce``
    None the rows are reduced when every spec has a reduction and one JVM
    pass (``approx_count_distinct`` of a hash of the key and grouping: 1.4 s
    on 10M cached rows, against 1.8 s for a struct) finds at least
    ``threshold`` rows per reduced row in every grouping; on a stream known
    to be bursty, ``True`` saves that pass (and reduces what it can).

    Returns (rows, {name: spec that reads them}, {name: group} or None):
    with several groupings the rows are their union with a ``__group``
    column, each spec reading its own group's rows.
    """
    check_reduce(reduce)
    named = key_text(keys, prepared.schema)
    plans = {name: (spec.reduction(prepared.schema, named) if reduce is not False else None)
             for name, spec in specs.items()}
    groupings = list(dict.fromkeys(p[0] for p in plans.values() if p is not None))
    if reduce is None and groupings:
        # all or nothing: rows of some specs and reduced rows of others in
        # one pass cost more than either (measured: the rollups example's
        # phantom, 3.1 s from the rows, 6.6 s with only its distinct counts
        # reduced); so every spec must have a reduction that pays
        worth = None not in plans.values()
        if worth:
            base = [*keys, *carried]
            stats = prepared.agg(F.count(F.lit(1)).alias("__n"), *[
                F.approx_count_distinct(F.xxhash64(*base, *[c for c in g if c not in base])).alias(f"__g{i}")
                for i, g in enumerate(groupings)]
            ).collect()[0]
            worth = all(stats["__n"] >= threshold * max(1, stats[f"__g{i}"] or 0) for i in range(len(groupings)))
        if not worth:
            return prepared, specs, None
    if not groupings:
        return prepared, specs, None
    parts, builds, groups = [], {}, {}
    raw = [name for name, p in plans.items() if p is None]
    for i, g in enumerate(groupings):
        aggs = {}
        for name, p in plans.items():
            if p is not None and p[0] == g:
                aggs.update(p[1])
                builds[name], groups[name] = p[2], i
        by = [*keys, *carried, *[c for c in g if c not in keys and c not in carried]]  # an item may be a key
        parts.append(prepared.groupBy(*by).agg(*[F.expr(f"{sql} AS `{out}`") for out, sql in aggs.items()])
                     .withColumn("__group", F.lit(i)))
    if raw:
        parts.append(prepared.withColumn("__group", F.lit(len(groupings))))
        for name in raw:
            builds[name], groups[name] = specs[name], len(groupings)
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part, allowMissingColumns=True)
    return rows, {name: builds[name] for name in specs}, groups


def sketch_table(df: DataFrame, by, ts: str, *, now=None, bounds: bool = False, reduce: bool | None = None,
                 **specs) -> DataFrame:
    """One row per key with each spec's binary sketch, built without
    grouped-aggregate UDFs: the rows are repartitioned by key and every
    partition builds its keys' sketches in one numpy pass (``mapInArrow``).

    For many small keys this is far cheaper than ``groupBy(...).agg(
    eh_sketch_agg(...))``, which pays a Python call per key and sketch.  The
    table is what :mod:`udaf.functions` reads and unites
    (``eh_union_agg``, ``eh_sketch_bounds``, ``sliding_hll_union_agg``...):
    a fine-grained sketch table (a Gigascope *phantom*) from which coarser
    groupings are answered without the rows (``examples/rollups.py``).

    Parameters
    ----------
    by, ts, specs
        As for :func:`aggregate`: column ``<name>`` holds the spec's sketch.
    now, bounds
        With ``bounds=True``, Count and Sum specs also get ``<name>_lower``
        and ``<name>_upper`` (bigint) as of ``now`` (default: each key's
        newest row), computed while the histogram is at hand.
    reduce : bool or None
        Whether Spark's own aggregation reduces the rows first
        (:func:`reduce_rows`; the sketches are byte-identical either way);
        None: when one JVM pass finds at least :data:`REDUCE_SKETCH_TABLE`
        rows per reduced row.
    """
    keys = key_names(by, "sketch_table", "by")
    unit, windows, needed = check_specs(df, keys, ts, specs, "sketch_table")
    time_expr, _ = time_expression(df, ts)
    at = now_in_unit(now, unit, isinstance(df.schema[ts].dataType, T.TimestampNTZType))
    with_bounds = [n for n, s in specs.items() if bounds and s.bounded]
    runs, run_exprs = run_columns(df, keys)
    prepared = df.select(*[F.col(k) for k in keys], *run_exprs, time_expr.alias("__ts"),
                         *[F.col(c) for c in needed])
    fields = [df.schema[k] for k in keys] + [T.StructField(n, T.BinaryType()) for n in specs]
    for name in with_bounds:
        fields += [T.StructField(f"{name}_lower", T.LongType()), T.StructField(f"{name}_upper", T.LongType())]
    rows, builds, groups = reduce_rows(prepared, keys, [r for r in runs if r not in keys], specs, reduce,
                                       REDUCE_SKETCH_TABLE)
    return by_key(rows, runs).mapInArrow(
        PartialSketches(keys, [], ts, builds, windows, at, with_bounds, groups, runs), T.StructType(fields))
