"""Sliding-window synopses as PySpark column functions.

Named and shaped like Spark's sketch family (``hll_sketch_agg``,
``hll_union_agg``, ``hll_sketch_estimate``): builders aggregate a group into
a binary sketch, merges aggregate binary sketches (so sketches stored in
Parquet can be rolled up later), estimators read a sketch column, and the
one-step aggregates return a double.  Every function accepts column names
or Columns and returns a Column; parameters are checked on the driver
before any job runs.  Null values and items are skipped; a null timestamp
is an error naming the column.  Timestamp units: see :mod:`udaf._convert`.

Spark does not let a grouped-aggregate pandas UDF share one ``agg()`` with
built-in aggregates (``F.max`` ...): aggregate those separately and join.

The sketches are the plain bytes of :mod:`ehist`, :mod:`distinct` and
:mod:`lp_norms` (``ExponentialHistogram.from_bytes`` reads an
``eh_sketch`` value in plain Python).

Examples
--------
>>> from udaf import functions as U                         # doctest: +SKIP
>>> df.groupBy("src").agg(
...     U.sliding_count("ts", window="1 hour").alias("packets_1h"),
...     U.sliding_sum("ts", "bytes", window="1 hour").alias("bytes_1h"),
...     U.sliding_distinct("ts", "dst", window="1 hour").alias("dsts_1h"),
... ).show()                                                # doctest: +SKIP
+---+----------+--------+-------+
|src|packets_1h|bytes_1h|dsts_1h|
+---+----------+--------+-------+
...
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from distinct import SlidingFM, SlidingHyperLogLog
from distinct.columnar import sketches_from_bytes, union_estimates
from ehist import ExponentialHistogram
from ehist._validation import check_eps
from ehist.columnar import HistogramColumn
from ehist.serialization import FAMILIES
from lp_norms import SlidingLpNorm

from ._convert import Window, items_of, now_to_int64, to_int64

__all__ = [
    "eh_sketch", "eh_merge", "eh_estimate", "eh_bounds", "sliding_count", "sliding_sum",
    "fm_sketch", "fm_merge", "hll_sliding_sketch", "hll_sliding_merge", "distinct_estimate",
    "sliding_distinct", "lp_sketch", "lp_merge", "lp_estimate", "sliding_lp_norm",
]

def _col(c, what: str) -> Column:
    if isinstance(c, str):
        return F.col(c)
    if isinstance(c, Column):
        return c
    raise TypeError(f"{what} must be a column name or a Column, got {type(c).__name__}")


def _name(c) -> str:
    return c if isinstance(c, str) else str(c)


def _check_sketches(series: pd.Series, fn: str, column: str) -> pd.Series:
    """A batch of a sketch column, checked to be binary.  Spark does not
    type a pandas UDF's inputs, so another column type would otherwise fail
    deep in decoding ("'int' object is not subscriptable"); a column has one
    type, so its first non-null value tells."""
    want = f"{fn}: column {column} must be a binary sketch column (BinaryType, from a *_sketch or *_merge aggregate)"
    if series.dtype != object:
        raise TypeError(f"{want}, got pandas dtype {series.dtype}")
    first = series.first_valid_index()
    if first is not None and not isinstance(series[first], (bytes, bytearray, memoryview)):
        raise TypeError(f"{want}, got {type(series[first]).__name__} values")
    return series


def _values(series: pd.Series, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(mask of non-null rows, int64 values) of a value column."""
    mask = series.notna().to_numpy()
    vals = series[mask]
    if vals.dtype.kind == "f":
        arr = vals.to_numpy()
        if np.any(arr != np.floor(arr)) or np.any(arr < 0):
            raise ValueError(f"column {column} must hold non-negative integers")
        return mask, arr.astype(np.int64)
    if vals.dtype.kind not in "iub" and len(vals):
        raise ValueError(f"column {column} must be numeric, got pandas dtype {vals.dtype}")
    return mask, vals.to_numpy(dtype=np.int64)


# ------------------------------------------------------------ EH: counts, sums
def _eh_builder(ts_name, value_name, window: Window, eps: float):
    """build(ts, values=None) -> (ExponentialHistogram, unit) for one group."""

    def build(t: pd.Series, v: pd.Series | None = None):
        ts, unit = to_int64(t, ts_name)
        values = None
        if v is not None:
            mask, values = _values(v, value_name)
            ts = ts[mask]
        return ExponentialHistogram(window.resolve(unit, ts_name), eps).update(ts, values), unit

    return build


def eh_sketch(ts, value=None, *, window, eps: float = 0.01) -> Column:
    """Aggregate: a binary :class:`~ehist.ExponentialHistogram` of the group.

    Parameters
    ----------
    ts : str or Column
        TimestampType, TimestampNTZType, DateType or integral.
    value : str or Column, optional
        Non-negative integers to sum (default: count rows); nulls skipped.
    window : int or str
        Longest window queried later: an int in the column's units or an
        interval string ('1 hour').
    eps : float
        Relative error, in (0, 1).

    Returns
    -------
    Column of BinaryType.
    """
    w = Window(window)
    eps = check_eps(eps)
    ts_col = _col(ts, "ts")  # argument errors before any Spark call
    value_col = _col(value, "value") if value is not None else None
    build = _eh_builder(_name(ts), _name(value) if value is not None else None, w, eps)
    if value is None:

        @pandas_udf("binary")
        def eh_sketch_udf(t: pd.Series) -> bytes:
            return build(t)[0].to_bytes()

        return eh_sketch_udf(ts_col)

    @pandas_udf("binary")
    def eh_sketch_value_udf(t: pd.Series, v: pd.Series) -> bytes:
        return build(t, v)[0].to_bytes()

    return eh_sketch_value_udf(ts_col, value_col)


def _merge_udf(cls, name: str, column: str):
    @pandas_udf("binary")
    def merge_udf(s: pd.Series) -> bytes:
        # a group's rows arrive in shuffle order: merge in byte order, so the
        # result (float sums of L_p sketches, EH ties) is the same every run
        blobs = sorted(bytes(b) for b in _check_sketches(s, name, column) if b is not None)
        if not blobs:
            return None
        sketches = [cls.from_bytes(b) for b in blobs]
        if cls is ExponentialHistogram:
            return ExponentialHistogram.merge_all(sketches).to_bytes()
        out = sketches[0]
        for other in sketches[1:]:
            out = out.merge(other)
        return out.to_bytes()

    merge_udf.__name__ = name
    return merge_udf


def eh_merge(sketch) -> Column:
    """Aggregate: the merge of binary exponential histograms (BinaryType)."""
    return _merge_udf(ExponentialHistogram, "eh_merge", _name(sketch))(_col(sketch, "sketch"))


def _per_row(cls):
    """Decode a sketch column one value at a time (None for nulls)."""
    return lambda s: [None if b is None else cls.from_bytes(b) for b in s]


def _estimator(fn: str, sketch, decode, return_type: str, compute, now, window, unit: str,
               frame: bool = False) -> Column:
    """``fn``: a scalar UDF over the sketch column ``sketch``; ``now`` a
    literal or a Column.

    ``compute(decode(series), nows, window)``: ``nows`` an int64 array, one
    per row, or None (each sketch's newest).  ``frame``: the result is a
    struct (the UDF returns a DataFrame)."""
    w = Window(window, allow_none=True)
    column = _name(sketch)

    def checked(s):
        return decode(_check_sketches(s, fn, column))

    if isinstance(now, (str, Column)):
        now_col = _col(now, "now")
        now_name = _name(now)

        def run_now(s, n):
            nows, now_unit = to_int64(n, now_name)
            win = w.resolve(now_unit if now_unit != "int" else unit, "now")
            return compute(checked(s), nows, win)

        if frame:

            @pandas_udf(return_type)
            def est_now_frame(s: pd.Series, n: pd.Series) -> pd.DataFrame:
                return run_now(s, n)

            return est_now_frame(_col(sketch, "sketch"), now_col)

        @pandas_udf(return_type)
        def est_now(s: pd.Series, n: pd.Series) -> pd.Series:
            return run_now(s, n)

        return est_now(_col(sketch, "sketch"), now_col)
    literal = now_to_int64(now, unit)
    win = w.resolve(unit, "sketch")

    def run(s):
        return compute(checked(s), None if literal is None else np.full(len(s), literal, dtype=np.int64), win)

    if frame:

        @pandas_udf(return_type)
        def est_frame(s: pd.Series) -> pd.DataFrame:
            return run(s)

        return est_frame(_col(sketch, "sketch"))

    @pandas_udf(return_type)
    def est(s: pd.Series) -> pd.Series:
        return run(s)

    return est(_col(sketch, "sketch"))


def _estimates(sketches, nows, window):
    if nows is None:
        nows = [None] * len(sketches)
    return pd.Series(
        [None if h is None else h.estimate(None if n is None else int(n), window)
         for h, n in zip(sketches, nows)],
        dtype="float64",
    )


def _eh_bounds(blobs: pd.Series, nows, window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(non-null mask, lower, upper) of every ``eh_sketch`` in a batch.

    One :class:`~ehist.columnar.HistogramColumn` decode and one vectorized
    query per Arrow batch and (window, eps), not a Python object per row.
    Errors are ``ExponentialHistogram.from_bytes``'s and ``bounds``'s.
    Bounds are int64 (0 for null sketches), exact beyond 2**53.
    """
    present = blobs.notna().to_numpy()
    lower = np.zeros(len(blobs), dtype=np.int64)
    upper = np.zeros(len(blobs), dtype=np.int64)
    if not present.any():
        return present, lower, upper
    raw = blobs.to_numpy(dtype=object)[present]
    at = None if nows is None else np.asarray(nows, dtype=np.int64)[present]
    # sketches of one (window, eps) share header bytes 6..22: decode each such group at once
    groups, _ = pd.factorize(pd.Series([b[6:22] for b in raw], dtype=object))
    lo = np.empty(raw.size, dtype=np.int64)
    up = np.empty(raw.size, dtype=np.int64)
    for g in range(int(groups.max()) + 1):
        rows = np.flatnonzero(groups == g)
        column = HistogramColumn.from_bytes(raw[rows])
        if at is not None:
            late = column.has_newest & (at[rows] < column.newest)
            if late.any():
                i = int(np.flatnonzero(late)[0])
                raise ValueError(f"now ({int(at[rows][i])}) is earlier than the sketch's newest timestamp "
                                 f"({int(column.newest[i])}); queries must look at now >= newest")
        lo[rows], up[rows] = column.bounds(None if at is None else at[rows], window)
    lower[present] = lo
    upper[present] = up
    return present, lower, upper


def _eh_estimates(blobs, nows, window) -> pd.Series:
    present, lower, upper = _eh_bounds(blobs, nows, window)
    return pd.Series(np.where(present, lower * 0.5 + upper * 0.5, np.nan), dtype="float64")


def _eh_bounds_frame(blobs, nows, window) -> pd.DataFrame:
    present, lower, upper = _eh_bounds(blobs, nows, window)
    return pd.DataFrame({"lower": pd.arrays.IntegerArray(lower, ~present),
                         "upper": pd.arrays.IntegerArray(upper, ~present)})


def eh_estimate(sketch, now=None, window=None, *, unit: str = "us") -> Column:
    """Scalar: estimated windowed count or sum of an ``eh_sketch`` (DoubleType).

    ``now``: int, datetime, date, or a Column (default: the sketch's newest
    timestamp); ``window``: int in the sketch's units or an interval
    string, converted with ``unit`` ('us' for timestamp sketches, 'day' for
    date sketches).  Each Arrow batch is decoded and answered at once
    (:class:`~ehist.columnar.HistogramColumn`).
    """
    return _estimator("eh_estimate", sketch, lambda s: s, "double", _eh_estimates, now, window, unit)


def eh_bounds(sketch, now=None, window=None, *, unit: str = "us") -> Column:
    """Scalar: ``struct<lower: bigint, upper: bigint>`` bracketing the exact answer."""
    return _estimator("eh_bounds", sketch, lambda s: s, "struct<lower:bigint,upper:bigint>", _eh_bounds_frame,
                      now, window, unit, frame=True)


def _one_step(build_fn, answer_fn, cols):
    """Grouped aggregate returning a double from a freshly built synopsis."""
    if len(cols) == 1:

        @pandas_udf("double")
        def one(a: pd.Series) -> float:
            return answer_fn(build_fn(a))

        return one(*cols)
    if len(cols) == 2:

        @pandas_udf("double")
        def two(a: pd.Series, b: pd.Series) -> float:
            return answer_fn(build_fn(a, b))

        return two(*cols)

    @pandas_udf("double")
    def three(a: pd.Series, b: pd.Series, c: pd.Series) -> float:
        return answer_fn(build_fn(a, b, c))

    return three(*cols)


def _answer(now, window):
    def answer(built) -> float:
        synopsis, unit = built
        n = now_to_int64(now, unit)
        win = window.resolve(unit, "ts") if window.raw is not None else None
        return float(synopsis.estimate(n, win))

    return answer


def sliding_count(ts, *, window, eps: float = 0.01, now=None, query_window=None) -> Column:
    """Aggregate: estimated number of rows with ``now - window < ts <= now``
    (DoubleType), within ``eps``.  ``now`` defaults to the group's newest
    timestamp; ``query_window`` (default ``window``) may be shorter."""
    return _sliding_eh(ts, None, window, eps, now, query_window)


def sliding_sum(ts, value, *, window, eps: float = 0.01, now=None, query_window=None) -> Column:
    """Aggregate: estimated sum of ``value`` over the window (DoubleType)."""
    return _sliding_eh(ts, value, window, eps, now, query_window)


def _sliding_eh(ts, value, window, eps, now, query_window):
    q = Window(query_window, "query_window", allow_none=True)
    build = _eh_builder(_name(ts), _name(value) if value is not None else None, Window(window), check_eps(eps))
    cols = [_col(ts, "ts")] + ([_col(value, "value")] if value is not None else [])
    return _one_step(build, _answer(now, q), cols)


# ----------------------------------------------------------- distinct counts
def _distinct_builder(cls, ts_name, item_name, window: Window, kwargs):
    """build(ts, items) -> (sketch, unit) for one group; null items skipped."""

    def build(t: pd.Series, items: pd.Series):
        stamps, unit = to_int64(t, ts_name)
        mask, values = items_of(items, item_name)
        sketch = cls(window.resolve(unit, ts_name), **kwargs)
        return sketch.update(stamps[mask], values), unit

    return build


def fm_sketch(ts, item, *, window, num_bitmaps: int = 64, seed: int = 0) -> Column:
    """Aggregate: a binary :class:`~distinct.SlidingFM` of the group's items."""
    SlidingFM(1, num_bitmaps, seed)  # checks the parameters on the driver
    build = _distinct_builder(SlidingFM, _name(ts), _name(item), Window(window), {"num_bitmaps": num_bitmaps, "seed": seed})

    @pandas_udf("binary")
    def fm_sketch_udf(t: pd.Series, i: pd.Series) -> bytes:
        return build(t, i)[0].to_bytes()

    return fm_sketch_udf(_col(ts, "ts"), _col(item, "item"))


def hll_sliding_sketch(ts, item, *, window, precision: int = 12, seed: int = 0) -> Column:
    """Aggregate: a binary :class:`~distinct.SlidingHyperLogLog` of the items."""
    SlidingHyperLogLog(1, precision, seed)
    build = _distinct_builder(SlidingHyperLogLog, _name(ts), _name(item), Window(window), {"precision": precision, "seed": seed})

    @pandas_udf("binary")
    def hll_sliding_sketch_udf(t: pd.Series, i: pd.Series) -> bytes:
        return build(t, i)[0].to_bytes()

    return hll_sliding_sketch_udf(_col(ts, "ts"), _col(item, "item"))


def fm_merge(sketch) -> Column:
    """Aggregate: the merge of binary SlidingFM sketches."""
    return _merge_udf(SlidingFM, "fm_merge", _name(sketch))(_col(sketch, "sketch"))


def hll_sliding_merge(sketch) -> Column:
    """Aggregate: the merge of binary SlidingHyperLogLog sketches."""
    return _merge_udf(SlidingHyperLogLog, "hll_sliding_merge", _name(sketch))(_col(sketch, "sketch"))


def _distinct_estimates(blobs: pd.Series, nows, window) -> pd.Series:
    """Estimates of a batch of ``fm_sketch`` / ``hll_sliding_sketch``
    values (NaN for nulls).  The sliding HyperLogLogs are decoded and
    estimated together (:mod:`distinct.columnar`, per window, precision and
    seed), FM sketches one at a time; the errors are ``from_bytes``'s and
    ``estimate``'s (sliding HyperLogLogs checked first)."""
    out = np.full(len(blobs), np.nan)
    raw = blobs.to_numpy(dtype=object)
    at = None if nows is None else np.asarray(nows, dtype=np.int64)
    present = np.flatnonzero(blobs.notna().to_numpy()).tolist()
    fm = [i for i in present if len(raw[i]) > 2 and raw[i][2] == FAMILIES["SlidingFM"]]
    hll = sorted(set(present) - set(fm))
    sketches = sketches_from_bytes([raw[i] for i in hll])
    rows = np.array(hll, dtype=np.int64)
    params, _ = pd.factorize(pd.Series([(s.window, s.precision, s.seed) for s in sketches], dtype=object))
    for g in range(int(params.max()) + 1 if params.size else 0):
        mine = np.flatnonzero(params == g)
        out[rows[mine]] = union_estimates([sketches[i] for i in mine], np.arange(mine.size),
                                          now=None if at is None else at[rows[mine]], window=window)
    for i in fm:
        out[i] = SlidingFM.from_bytes(raw[i]).estimate(None if at is None else int(at[i]), window)
    return pd.Series(out, dtype="float64")


def distinct_estimate(sketch, now=None, window=None, *, unit: str = "us") -> Column:
    """Scalar: estimated distinct items of an ``fm_sketch`` or
    ``hll_sliding_sketch`` over the window (DoubleType).  Each Arrow batch's
    sliding HyperLogLogs are decoded and answered at once
    (:mod:`distinct.columnar`)."""
    return _estimator("distinct_estimate", sketch, lambda s: s, "double", _distinct_estimates, now, window, unit)


def sliding_distinct(ts, item, *, window, precision: int = 12, seed: int = 0, now=None,
                     query_window=None) -> Column:
    """Aggregate: estimated distinct items in the window (DoubleType), with a
    sliding HyperLogLog (relative standard error ``1.04 / sqrt(2**precision)``)."""
    SlidingHyperLogLog(1, precision, seed)
    q = Window(query_window, "query_window", allow_none=True)
    build = _distinct_builder(SlidingHyperLogLog, _name(ts), _name(item), Window(window), {"precision": precision, "seed": seed})
    return _one_step(build, _answer(now, q), [_col(ts, "ts"), _col(item, "item")])


# --------------------------------------------------------------- L_p norms
def _lp_builder(ts_name, index_name, window: Window, p, eps, delta, seed):
    """build(ts, index, value=None) -> (SlidingLpNorm, unit); null rows skipped."""

    def build(t, i, v=None):
        stamps, unit = to_int64(t, ts_name)
        mask = i.notna().to_numpy()
        vals = None
        if v is not None:
            mask &= v.notna().to_numpy()
            vals = v[mask].to_numpy(dtype=np.float64)
        indices = items_of(i[mask], index_name)[1]
        sketch = SlidingLpNorm(p, window.resolve(unit, ts_name), eps, delta, seed)
        return sketch.update(stamps[mask], indices, vals), unit

    return build


def _lp_columns(ts, index, value):
    return [_col(ts, "ts"), _col(index, "index")] + ([_col(value, "value")] if value is not None else [])


def lp_sketch(ts, index, value=None, *, p: float, window, eps: float = 0.05, delta: float = 0.05,
              seed: int = 0) -> Column:
    """Aggregate: a binary :class:`~lp_norms.SlidingLpNorm` of the group's
    ``(ts, index, value)`` rows (value: non-negative, default 1)."""
    SlidingLpNorm(p, 1, eps, delta, seed)
    build = _lp_builder(_name(ts), _name(index), Window(window), p, eps, delta, seed)
    cols = _lp_columns(ts, index, value)
    if value is None:

        @pandas_udf("binary")
        def lp_sketch_udf(t: pd.Series, i: pd.Series) -> bytes:
            return build(t, i)[0].to_bytes()

        return lp_sketch_udf(*cols)

    @pandas_udf("binary")
    def lp_sketch_value_udf(t: pd.Series, i: pd.Series, v: pd.Series) -> bytes:
        return build(t, i, v)[0].to_bytes()

    return lp_sketch_value_udf(*cols)


def lp_merge(sketch) -> Column:
    """Aggregate: the merge of binary SlidingLpNorm sketches."""
    return _merge_udf(SlidingLpNorm, "lp_merge", _name(sketch))(_col(sketch, "sketch"))


def lp_estimate(sketch, now=None, window=None, *, unit: str = "us") -> Column:
    """Scalar: estimated L_p norm of an ``lp_sketch`` over the window (DoubleType)."""
    return _estimator("lp_estimate", sketch, _per_row(SlidingLpNorm), "double", _estimates, now, window, unit)


def sliding_lp_norm(ts, index, value=None, *, p: float, window, eps: float = 0.05,
                    delta: float = 0.05, seed: int = 0, now=None, query_window=None) -> Column:
    """Aggregate: estimated L_p norm of the window's vector (DoubleType)."""
    SlidingLpNorm(p, 1, eps, delta, seed)
    q = Window(query_window, "query_window", allow_none=True)
    build = _lp_builder(_name(ts), _name(index), Window(window), p, eps, delta, seed)
    return _one_step(build, _answer(now, q), _lp_columns(ts, index, value))
