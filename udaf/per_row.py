"""Per-row sliding-window answers, one pass per key.

``count(*) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN w PRECEDING AND
CURRENT ROW)`` re-aggregates the whole frame for every row (Spark's
aggregates cannot retract a row), so its cost grows with rows x frame; a
pandas UDF over the same frame calls Python once per row.
:func:`sliding_over` shuffles the rows by key, sorts them by key and time
(in the JVM), and answers every row of each Arrow batch's complete keys at
once with the vectorized engines of :mod:`udaf.frames` (``mapInArrow``,
no pandas): exact counts, sums and distinct counts, and L_p norm
estimates from linear p-stable sketches.

Examples
--------
>>> from udaf import sliding_over, Count, Sum, Distinct      # doctest: +SKIP
>>> sliding_over(flows, "src", "ts",
...              packets_1h=Count(window="1 hour"),
...              bytes_1h=Sum("bytes", window="1 hour"),
...              dsts_1h=Distinct("dst", window="1 hour")).show()  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from lp_norms import rows_for

from ._convert import items_of, key_names
from ._arrow import complete_runs
from .frames import frame_bounds, frame_bounds_runs, frame_counts, frame_distinct, frame_lp_norms, frame_sums
from .two_phase import RUN_KEY_TYPES, Count, Distinct, LpNorm, Sum, _check

__all__ = ["sliding_over"]

_TYPES = {"count": T.LongType(), "sum": T.LongType(), "distinct": T.LongType(), "lp": T.DoubleType()}


def sliding_over(df: DataFrame, partition_by, order_by: str, **specs) -> DataFrame:
    """Add one column per spec: its value over each row's sliding frame.

    Row ``i``'s frame holds the rows of its key with ``order_by`` in
    ``(t_i - window, t_i]``, the window convention of every synopsis here
    (SQL: ``RANGE BETWEEN window - 1 PRECEDING AND CURRENT ROW`` in the
    column's units, so ``'1 hour'`` is ``INTERVAL 1 HOUR - 1 microsecond``
    preceding); rows with the same time (peers) share their frame, as in a
    ``RANGE`` frame.

    Parameters
    ----------
    df : DataFrame
    partition_by : str or list of str
        The key columns (``PARTITION BY``).
    order_by : str
        The event-time column (TimestampType, TimestampNTZType, DateType or integral).
    **specs : Count, Sum, Distinct or LpNorm
        New column name -> what to compute over each row's frame:

        * ``Count(window)``: rows in the frame, exact (bigint), as
          ``count(*)``;
        * ``Sum(column, window)``: exact sum of the non-null values (bigint;
          null when the frame has none), as ``sum(column)``;
        * ``Distinct(column, window)``: exact number of distinct non-null
          values (bigint), what ``size(collect_set(column))`` computes;
        * ``LpNorm(column, window, value, p, eps, delta, seed)``: the L_p
          norm of ``column -> sum(value)`` over the frame (double), within
          ``eps`` with probability ``1 - delta`` per row.

        With a key's rows at hand, exact counts, sums and distinct counts
        cost a sort and a few binary searches, less than querying a
        synopsis per row, so they are exact here (the specs' ``eps`` and
        ``precision`` apply to :func:`udaf.aggregate` and the streaming
        state, where rows are not kept).  L_p norms come from the p-stable
        sketch: each frame's sketch is a difference of two prefix sketches,
        ``rows_for(p, eps, delta)`` numbers per row whatever the frame.

    Returns
    -------
    DataFrame: the rows of ``df`` (sorted by time within each key) with the
    spec columns appended.

    Notes
    -----
    Each key's rows are shuffled to one partition; a Python worker holds
    one key's rows at a time (plus one Arrow batch): fine for millions of
    rows per key, not for a key larger than a worker's memory.  Keys with
    a floating-point or nested column go through ``applyInPandas`` instead
    (one pandas frame per key; same answers).

    Raises
    ------
    TypeError, ValueError
        On the driver, before any job: unknown columns, wrong types, bad
        parameters, a spec named like an existing column.
    """
    keys = key_names(partition_by, "sliding_over", "partition_by")
    time_expr, windows, _ = _check(df, keys, order_by, specs, "sliding_over",
                                   allowed=(Count, Sum, Distinct, LpNorm), appends=True)
    out_schema = T.StructType(list(df.schema.fields) +
                              [T.StructField(n, _TYPES[s.kind], s.kind in ("sum", "lp")) for n, s in specs.items()])
    lp_rows = {n: rows_for(s.p, s.eps, s.delta) for n, s in specs.items() if s.kind == "lp"}
    columns = list(df.columns)
    if all(isinstance(df.schema[k].dataType, RUN_KEY_TYPES) for k in keys):
        answer = _ArrowRuns(keys, order_by, columns, specs, windows, lp_rows)
        # an explicit partition count: adaptive execution would otherwise
        # coalesce small shuffles into fewer tasks than cores.  The time
        # column is sorted on and read as it is (Arrow int64 units, see
        # complete_runs): no extra column through the sort and into Python
        parts = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
        return df.repartition(parts, *keys).sortWithinPartitions(*keys, order_by).mapInArrow(answer, out_schema)
    if "__ts" in df.columns:
        raise ValueError("sliding_over uses the column name __ts internally for these keys; rename that column")
    prepared = df.withColumn("__ts", time_expr)

    def per_key(pdf: pd.DataFrame) -> pd.DataFrame:
        stamps = pdf["__ts"]
        if stamps.isna().any():
            raise ValueError(f"null timestamp in column {order_by}: timestamps must not be null")
        t = stamps.to_numpy(dtype=np.int64)
        order = np.argsort(t, kind="stable")
        t = t[order]
        pdf = pdf.iloc[order].reset_index(drop=True)
        frames = {}
        out = pdf[columns].copy()
        for name, spec in specs.items():
            w = windows[name]
            if w not in frames:
                frames[w] = frame_bounds(t, w)
            lo, hi = frames[w]
            out[name] = _answer(name, spec, _PandasColumns(pdf), lo, hi, lp_rows.get(name))
        return out

    return prepared.groupBy(*keys).applyInPandas(per_key, out_schema)


class _ArrowRuns:
    """``mapInArrow`` over a partition sorted by key and time: each batch's
    complete key runs are answered at once (one vectorized pass over many
    keys), the last run waits for the next batch (its key may continue)."""

    def __init__(self, keys, order_by, columns, specs, windows, lp_rows):
        self.keys, self.order_by, self.columns = keys, order_by, columns
        self.specs, self.windows, self.lp_rows = specs, windows, lp_rows

    def __call__(self, batches):
        for table, t, starts in complete_runs(batches, self.keys, self.order_by, self.order_by):
            yield self._answer(table, t, starts)

    def _answer(self, table, t, starts):
        import pyarrow as pa

        cols = _ArrowColumns(table)
        frames = {}
        out = {c: table.column(c).chunk(0) for c in self.columns}
        for name, spec in self.specs.items():
            w = self.windows[name]
            if w not in frames:
                frames[w] = frame_bounds_runs(t, starts, w)
            lo, hi = frames[w]
            result = _answer(name, spec, cols, lo, hi, self.lp_rows.get(name))
            out[name] = pa.array(result, type=pa.int64() if spec.kind != "lp" else pa.float64())
        return pa.RecordBatch.from_pydict(out)


class _PandasColumns:
    """A pandas frame's columns as _answer reads them."""

    def __init__(self, pdf):
        self.pdf = pdf

    def present(self, col):
        return self.pdf[col].notna().to_numpy()

    def numbers(self, col, dtype=None):
        return self.pdf[col].to_numpy() if dtype is None else self.pdf[col].to_numpy(dtype=dtype)

    def series(self, col, pos):
        return self.pdf[col].iloc[pos]


class _ArrowColumns:
    """An Arrow table's columns as _answer reads them (no pandas frame)."""

    def __init__(self, table):
        self.table = table

    def present(self, col):
        return self.table.column(col).chunk(0).is_valid().to_numpy(zero_copy_only=False)

    def numbers(self, col, dtype=None):
        import pyarrow as pa
        import pyarrow.compute as pc

        a = self.table.column(col).chunk(0)
        if pa.types.is_integer(a.type):  # exact int64, nulls as 0 (callers skip them)
            a = pc.fill_null(a, 0)
        a = a.to_numpy(zero_copy_only=False)
        return a if dtype is None else a.astype(dtype)

    def series(self, col, pos):
        import pyarrow as pa

        return self.table.column(col).chunk(0).take(pa.array(pos)).to_pandas()


def _present(cols, *names) -> np.ndarray:
    mask = None
    for c in names:
        if c is not None:
            m = cols.present(c)
            mask = m if mask is None else mask & m
    return mask


def _answer(name, spec, cols, lo, hi, lp_rows):
    if spec.kind == "count":
        return frame_counts(lo, hi)
    keep = _present(cols, spec.column, getattr(spec, "value", None))
    pos = np.flatnonzero(keep)
    sub_lo, sub_hi = np.searchsorted(pos, lo), np.searchsorted(pos, hi)
    if spec.kind == "sum":
        values = cols.numbers(spec.column)[pos]
        if values.dtype.kind == "f" and np.any(values != np.floor(values)):
            raise ValueError(f"spec {name}: column {spec.column} must hold integers")
        sums = frame_sums(values.astype(np.int64), sub_lo, sub_hi)
        return pd.arrays.IntegerArray(sums, mask=sub_hi <= sub_lo)  # null: no value in the frame
    if spec.kind == "distinct":
        codes, _ = pd.factorize(items_of(cols.series(spec.column, pos), spec.column)[1])
        return frame_distinct(codes, sub_lo, sub_hi)
    indices = items_of(cols.series(spec.column, pos), spec.column)[1]
    values = np.ones(pos.size) if spec.value is None else cols.numbers(spec.value, np.float64)[pos]
    return frame_lp_norms(spec.p, lp_rows, spec.seed, indices, values, sub_lo, sub_hi)
