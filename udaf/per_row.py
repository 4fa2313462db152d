"""Per-row sliding-window answers, one pass per key.

``count(*) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN w PRECEDING AND
CURRENT ROW)`` re-aggregates the whole frame for every row (Spark's
aggregates cannot retract a row), so its cost grows with rows x frame; a
pandas UDF over the same frame calls Python once per row.
:func:`sliding_over` answers counts and sums with Spark's own window
functions as a difference of two growing frames (one pass, no Python:
:func:`udaf.native.native_frames`); otherwise it shuffles the rows by key,
sorts them by key and time (in the JVM), and answers every row of each
Arrow batch's complete keys at once through each spec's
:meth:`~udaf.spec.Spec.frames` (``mapInArrow``, no pandas): exact counts,
sums and distinct counts, and L_p norm estimates from linear p-stable
sketches (exact L_p norms for p = 1 or 2 and integral values come from
Spark's windows too: :meth:`udaf.LpNorm.native_per_row`).

Examples
--------
>>> from udaf import sliding_over, Count, Sum, Distinct      # doctest: +SKIP
>>> sliding_over(flows, "src", "ts",
...              packets_1h=Count(window="1 hour"),
...              bytes_1h=Sum("bytes", window="1 hour"),
...              dsts_1h=Distinct("dst", window="1 hour")).show()  # doctest: +SKIP
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ._arrow import complete_runs
from ._convert import key_names
from .frames import frame_bounds_runs
from .keys import by_key, run_columns
from .native import has_native_frames, native_frames
from .spec import read_spec
from .two_phase import check_specs

__all__ = ["sliding_over"]


def sliding_over(df: DataFrame, partition_by, order_by: str, *, strategy: str = "auto", **specs) -> DataFrame:
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
    **specs : Count, Sum, Distinct, DistinctFM or LpNorm
        New column name -> what to compute over each row's frame:

        * ``Count(window)``: rows in the frame, exact (bigint), as
          ``count(*)``;
        * ``Sum(column, window)``: exact sum of the non-null values (bigint;
          null when the frame has none), as ``sum(column)``;
        * ``Distinct(column, window)`` / ``DistinctFM``: exact number of
          distinct non-null values (bigint), what
          ``size(collect_set(column))`` computes;
        * ``LpNorm(column, window, value, p, eps, delta, seed)``: the L_p
          norm of ``column -> sum(value)`` over the frame (double): exact
          for p = 1 or 2 with integral values or none (the native plan),
          otherwise within ``eps`` with probability ``1 - delta`` per row;
        * ``Frequencies(column, window, ..., value)``: the exact frequency
          of the row's own item over the frame (bigint: rows, or the sum
          of ``value``; null for a row without an item).
          ``HeavyHitters`` has no per-row form (a ValueError says so).

        With a key's rows at hand, exact counts, sums and distinct counts
        cost a sort and a few binary searches, less than querying a
        synopsis per row, so they are exact here (the specs' ``eps`` and
        ``precision`` apply to :func:`udaf.aggregate` and the streaming
        state, where rows are not kept).  So are L_p norms for p = 1 or 2
        and integral values (:meth:`udaf.LpNorm.native_per_row`: a running
        sum of each item's change of ``|f|^p``, 25x faster than the
        sketches at 100k rows); otherwise they come from the p-stable
        sketch: each frame's sketch is a difference of two prefix sketches,
        ``rows_for(p, eps, delta)`` numbers per row whatever the frame.

    strategy : {"auto", "native", "shuffle"}
        ``native`` computes each frame with Spark's own window functions
        (no Python in the plan: :func:`udaf.native.native_frames`), for
        specs that have a native per-row form (Count, Sum, Frequencies:
        within the row's own item; LpNorm as above): the frame
        ``(t - w, t]`` is the rows up to ``t`` less the rows up to ``t -
        w``, two frames Spark grows in one pass, where the built-in
        ``RANGE BETWEEN w PRECEDING`` frame re-aggregates every frame.
        ``shuffle`` sends each key's rows through Python once
        (``mapInArrow``) and answers every spec there.  ``auto`` (default)
        runs ``native`` when every spec has a native form (measured faster
        at every frame length: benchmarks/bench_per_row.py), else
        ``shuffle``.  Both give the same answers.

    Returns
    -------
    DataFrame: the rows of ``df`` (sorted by time within each key) with the
    spec columns appended.

    Notes
    -----
    Each key's rows are shuffled to one partition; a Python worker holds
    one key's rows at a time (plus one Arrow batch): fine for millions of
    rows per key, not for a key larger than a worker's memory.

    Raises
    ------
    TypeError, ValueError
        On the driver, before any job: unknown columns, wrong types, bad
        parameters, a spec named like an existing column.  In the job:
        :class:`~ehist.errors.InvalidInputError` for bad values.
    """
    keys = key_names(partition_by, "sliding_over", "partition_by")
    _, windows, _ = check_specs(df, keys, order_by, specs, "sliding_over", appends=True)
    if strategy not in ("auto", "native", "shuffle"):
        raise ValueError(f"strategy must be 'auto', 'native' or 'shuffle', got {strategy!r}")

    if strategy == "native" and not has_native_frames(specs, df):
        missing = [f"{n} ({s.who})" for n, s in specs.items() if not has_native_frames({n: s}, df)]
        raise ValueError(f"strategy 'native': no native Spark plan for {', '.join(missing)}; use 'auto' or 'shuffle'")
    no_frames = [f"{n} ({s.who})" for n, s in specs.items() if not s.has_frames]
    if no_frames:
        raise ValueError(f"sliding_over: no per-row answer for {', '.join(no_frames)}; per key, use "
                         "aggregate, sketch_table or the streaming state")
    types = {n: T.DoubleType() if s.frame_type == "double" else T.LongType() for n, s in specs.items()}
    if strategy != "shuffle" and has_native_frames(specs, df):
        # Spark's window functions answer exactly, no Python in the plan
        return native_frames(df, keys, order_by, specs, windows, types)
    out_schema = T.StructType(list(df.schema.fields) + [T.StructField(n, types[n], True) for n in specs])
    runs, run_exprs = run_columns(df, keys)
    prepared = df.select("*", *run_exprs) if run_exprs else df
    # the time column is sorted on and read as it is (Arrow int64 units):
    # no extra column through the sort and into Python
    return by_key(prepared, runs).sortWithinPartitions(*runs, order_by).mapInArrow(
        _FrameAnswers(keys, runs, order_by, list(df.columns), specs, windows), out_schema)


class _FrameAnswers:
    """``mapInArrow`` over a partition sorted by key and time: each batch's
    complete key runs are answered at once (one vectorized pass over many
    keys), the last run waits for the next batch (its key may continue)."""

    def __init__(self, keys, runs, order_by, columns, specs, windows):
        self.keys, self.runs, self.order_by, self.columns = keys, runs, order_by, columns
        self.specs, self.windows = specs, windows

    def __call__(self, batches):
        for table, t, starts in complete_runs(batches, self.runs, self.order_by, self.order_by):
            yield self._answer(table, t, starts)

    def _answer(self, table, t, starts):
        import pyarrow as pa

        frames = {}
        out = {c: table.column(c).chunk(0) for c in self.columns}

        def key_of(row):
            return tuple(table.column(k)[int(row)].as_py() for k in self.keys)

        for name, spec in self.specs.items():
            w = self.windows[name]
            if w not in frames:
                frames[w] = frame_bounds_runs(t, starts, w)
            lo, hi = frames[w]
            result = spec.frames(lo, hi, read_spec(spec, table, key_of), w)
            out[name] = pa.array(result, type=pa.float64() if spec.frame_type == "double" else pa.int64())
        return pa.RecordBatch.from_pydict(out)
