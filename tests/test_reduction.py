"""Rows reduced before any synopsis sees them give the same bytes.

What Spark's own aggregation may do before Python builds a sketch (issue:
native work before Python in the two-phase path): counts and sums per
timestamp for the exponential histogram, and for the sliding distinct
counters each item's latest timestamp.  These are identities of the
synopses' state, so the sketches must be byte-identical, not only close.
(L_p sketches add floats: per-(timestamp, index) sums answer alike but
their bytes differ, so they are not reduced.)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import ExponentialHistogram
from tests.conftest import examples

streams = st.tuples(st.integers(1, 400), st.integers(1, 60), st.integers(0, 2**31), st.integers(1, 300))


def stream(n, spread, seed):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, spread, n))  # many rows per timestamp
    return rng, t


@settings(max_examples=examples(60), deadline=None)
@given(streams, st.sampled_from([0.01, 0.1, 0.5]))
def test_histograms_of_per_timestamp_counts_and_sums_equal_the_rows(params, eps):
    n, spread, seed, window = params
    rng, t = stream(n, spread, seed)
    v = rng.integers(0, 40, n)
    at, first = np.unique(t, return_index=True)
    counts = np.diff(np.append(first, n))
    sums = np.add.reduceat(v, first)
    rows = ExponentialHistogram(window, eps).update(t)
    assert ExponentialHistogram(window, eps).update(at, counts).to_bytes() == rows.to_bytes()
    rows = ExponentialHistogram(window, eps).update(t, v)
    assert ExponentialHistogram(window, eps).update(at, sums).to_bytes() == rows.to_bytes()


@settings(max_examples=examples(60), deadline=None)
@given(streams, st.integers(1, 50))
def test_distinct_counters_of_each_items_latest_time_equal_the_rows(params, universe):
    n, spread, seed, window = params
    rng, t = stream(n, spread, seed)
    items = rng.integers(0, universe, n)
    latest = {}
    for ti, x in zip(t.tolist(), items.tolist()):
        latest[x] = ti
    order = sorted(latest, key=lambda x: (latest[x], x))
    lt, li = np.array([latest[x] for x in order]), np.array(order)
    for make in (lambda: SlidingHyperLogLog(window, 6, seed=seed % 7), lambda: SlidingFM(window, 16, seed % 5)):
        assert make().update(lt, li).to_bytes() == make().update(t, items).to_bytes()


# ------------------------------------------------------------------ Spark
# The identities above, as udaf.sketch_table and aggregate use them: Spark's
# own aggregation reduces the rows (udaf.two_phase.reduce_rows) and the
# synopses come out byte-identical.


def _bursty(seed: int, n: int = 4_000):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "k": pd.array(np.where(rng.random(n) < 0.05, None, rng.choice(["a", "b", "c"], n)), dtype=object),
        "i": pd.array(np.where(rng.random(n) < 0.05, None, rng.integers(0, 3, n)), dtype="Int64"),
        "x": rng.choice([0.0, -0.0, float("nan"), 1.5], n),
        "ts": rng.integers(0, 60, n),  # ~20 rows per key and time
        "b": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 100, n)), dtype="Int64"),
        "d": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 50, n)), dtype="Int64"),
    })


def _specs():
    from udaf import Count, Distinct, DistinctFM, LpNorm, Sum

    return dict(n=Count(40, eps=0.1), n2=Count(20), s=Sum("b", 30, eps=0.05), u=Distinct("d", 40, precision=6),
                f=DistinctFM("d", 25, num_bitmaps=8), g=Distinct("b", 40, precision=5),
                lp=LpNorm("d", 40, value="b", eps=0.3, delta=0.3))


@pytest.mark.spark
@pytest.mark.parametrize("seed, by", [(1, "k"), (2, ["k", "i"]), (3, "x")])
def test_sketch_table_from_reduced_rows_is_byte_identical(spark, seed, by):
    """Every family, null values and items, string / composite-with-null /
    NaN and -0.0 keys: the reduced plan (one aggregation per grouping, L_p
    from the rows) writes the bytes of the plan without reduction."""
    from udaf import sketch_table

    df = spark.createDataFrame(_bursty(seed)).repartition(3)
    specs = _specs()
    keys = [by] if isinstance(by, str) else by

    def table(reduce):
        out = sketch_table(df, by, "ts", reduce=reduce, bounds=True, **specs).toPandas()
        for k in keys:  # NaN keys comparable; -0.0 and 0.0 are one key (either may stand for it)
            out[k] = (out[k] + 0.0 if out[k].dtype.kind == "f" else out[k]).astype(str)
        return out.sort_values(keys).reset_index(drop=True)

    reduced, rows = table(True), table(False)
    assert len(reduced) == len(rows) > 0
    for c in rows.columns:
        if c != "lp":
            assert reduced[c].tolist() == rows[c].tolist(), c
    # L_p is not reduced; its float sums follow the rows' order within a
    # timestamp, which a shuffle does not fix (with or without reduction)
    from lp_norms import SlidingLpNorm

    for a, b in zip(reduced.lp, rows.lp):
        assert SlidingLpNorm.from_bytes(a).estimate() == pytest.approx(SlidingLpNorm.from_bytes(b).estimate(), rel=1e-9)
    del specs["lp"]  # reduce=None reduces only when every spec can be reduced
    assert "partial_count" in _plan(sketch_table(df, by, "ts", reduce=None, **specs))  # ~20 rows per reduced row


@pytest.mark.spark
def test_aggregate_two_phase_from_reduced_rows(spark):
    """Partials of reduced rows: bounds still bracket the exact answers,
    distinct estimates (whose unions do not depend on the split) equal."""
    from udaf import Count, Distinct, DistinctFM, Sum, aggregate

    df = spark.createDataFrame(_bursty(4)).repartition(3)
    specs = dict(n=Count(40), s=Sum("b", 30), u=Distinct("d", 40, precision=6), f=DistinctFM("d", 25, num_bitmaps=8))
    got = {r: aggregate(df, "k", "ts", strategy="two_phase", reduce=r, bounds=True, **specs).toPandas()
           .set_index("k").sort_index() for r in (True, False)}
    exact = aggregate(df, "k", "ts", strategy="shuffle", **specs).toPandas().set_index("k").sort_index()
    for name in ("n", "s"):
        assert (got[True][f"{name}_lower"] <= exact[name]).all() and (exact[name] <= got[True][f"{name}_upper"]).all()
    assert got[True].u.tolist() == got[False].u.tolist() and got[True].f.tolist() == got[False].f.tolist()


@pytest.mark.spark
def test_reduced_rows_keep_the_messages(spark):
    pd = pytest.importorskip("pandas")
    from ehist.errors import InvalidInputError
    from udaf import Distinct, Sum, errors, sketch_table

    bad = spark.createDataFrame(pd.DataFrame({"k": ["a", "a", "a"], "ts": [1, 1, 2], "b": [3, -5, 4], "d": [1, 2, 3]}))
    with pytest.raises(InvalidInputError, match="^column b holds -5 .key 'a'.: Sum needs non-negative integers$"), \
            errors():
        sketch_table(bad, "k", "ts", reduce=True, s=Sum("b", 10)).collect()
    late = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": pd.array([1, None], dtype="Int64"), "d": [1, 1]}))
    with pytest.raises(InvalidInputError, match="^column ts holds null .key 'a'.: timestamps must not be null$"), \
            errors():
        sketch_table(late, "k", "ts", reduce=True, u=Distinct("d", 10)).collect()


@pytest.mark.spark
def test_reduce_none_reduces_only_bursty_rows(spark):
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, sketch_table

    unique = spark.range(3_000).select((F.col("id") % 3).alias("k"), F.col("id").alias("ts"), (F.col("id") % 7).alias("d"))
    # one row per (key, time): counts are not reduced, so neither are the
    # distinct counts (7 items per key), all or nothing
    plan = _plan(sketch_table(unique, "k", "ts", n=Count(100), u=Distinct("d", 100)))
    assert "partial_count" not in plan and "partial_max" not in plan
    # distinct counts alone: each item's latest time
    assert "partial_max(__ts" in _plan(sketch_table(unique, "k", "ts", u=Distinct("d", 100)))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.spark
def test_an_item_that_is_also_a_key(spark):
    """Distinct over a key column (the rollups example's phantom): its
    reduction groups by the key alone."""
    from udaf import Count, Distinct, sketch_table

    df = spark.createDataFrame(_bursty(5)).fillna({"d": 0})
    specs = dict(n=Count(40), u=Distinct("d", 40, precision=6))
    got = {r: sketch_table(df, ["k", "d"], "ts", reduce=r, **specs).toPandas().astype({"k": str})
           .sort_values(["k", "d"]).reset_index(drop=True) for r in (True, False)}
    assert got[True].equals(got[False])


@pytest.mark.spark
def test_reduce_takes_only_booleans_and_none(spark):
    from udaf import Count, aggregate, sketch_table

    df = spark.range(10).selectExpr("id % 2 AS k", "id AS ts")
    for call in (lambda: sketch_table(df, "k", "ts", reduce="yes", n=Count(5)),
                 lambda: aggregate(df, "k", "ts", strategy="two_phase", reduce=1, n=Count(5)),
                 lambda: aggregate(df, "k", "ts", reduce="no", n=Count(5))):  # the native plan too
        with pytest.raises(ValueError, match="reduce must be True, False or None"):
            call()
