"""Rows reduced before any synopsis sees them give the same bytes.

What Spark's own aggregation may do before Python builds a sketch (issue:
native work before Python in the two-phase path): counts and sums per
timestamp for the exponential histogram, and for the sliding distinct
counters each item's latest timestamp, for the L_p sketches each
(timestamp, index)'s sum of integral values.  These are identities of the
synopses' state, so the sketches must be byte-identical, not only close.
(Float values are not reduced: Spark would add them in another order.)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import ExponentialHistogram
from lp_norms import SlidingLpNorm
from tests.conftest import ansi_mode, examples

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


@settings(max_examples=examples(40), deadline=None)
@given(streams, st.integers(1, 30), st.sampled_from([0.5, 1.0, 1.5, 2.0]), st.booleans())
def test_lp_sketches_of_per_time_and_index_sums_equal_the_rows(params, universe, p, weighted):
    """A timestamp's sketch depends on its (index, sum of values) pairs
    alone: per-pair sums (integers, exact in float64) and the rows in any
    order within a timestamp give the same bytes."""
    n, spread, seed, window = params
    rng, t = stream(n, spread, seed)
    idx = rng.integers(0, universe, n)
    v = rng.integers(0, 2**40, n).astype(np.float64) if weighted else np.ones(n)
    pairs = {}
    for ti, i, vi in zip(t.tolist(), idx.tolist(), v.tolist()):
        pairs[ti, i] = pairs.get((ti, i), 0) + int(vi)  # exact integer sums
    keys = list(pairs)
    rng.shuffle(keys)  # any order of the reduced rows (a shuffle's)
    pt, pi = np.array([k[0] for k in keys]), np.array([k[1] for k in keys])
    ps = np.array([pairs[k] for k in keys], dtype=np.float64)

    def make():
        return SlidingLpNorm(p, window, eps=0.3, delta=0.3, seed=seed % 5)

    rows = make().update(t, idx, v).to_bytes()
    assert make().update(pt, pi, ps).to_bytes() == rows
    within = np.lexsort((rng.random(n), t))  # the rows reordered within each timestamp
    assert make().update(t[within], idx[within], v[within]).to_bytes() == rows


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
                lp=LpNorm("d", 40, value="b", eps=0.3, delta=0.3), lp1=LpNorm("b", 30, p=1.0, eps=0.3, delta=0.3))


@pytest.mark.spark
@pytest.mark.parametrize("seed, by", [(1, "k"), (2, ["k", "i"]), (3, "x")])
def test_sketch_table_from_reduced_rows_is_byte_identical(spark, seed, by):
    """Every family, null values and items, string / composite-with-null /
    NaN and -0.0 keys: the reduced plan (one aggregation per grouping; the
    float-valued L_p from the rows) writes the bytes of the plan without
    reduction."""
    from udaf import LpNorm, sketch_table

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
        assert reduced[c].tolist() == rows[c].tolist(), c
    # reduce=None reduces when every grouping pays: ~20 rows per (key, time),
    # not per (key, time, index) with 50-100 indexes (all or nothing)
    assert "partial_count" not in _plan(sketch_table(df, by, "ts", reduce=None, **specs))
    del specs["lp"], specs["lp1"]
    specs["lp2"] = LpNorm("i", 40, value="b", eps=0.3, delta=0.3)  # 3 indexes: ~7 rows per reduced row
    assert "partial_count" in _plan(sketch_table(df, by, "ts", reduce=None, **specs))
    # a float value column is not reduced, so reduce=None (all or nothing) reads the rows
    floats = dict(specs, lp=LpNorm("d", 40, value="x2", eps=0.3, delta=0.3))
    plan = _plan(sketch_table(df.withColumn("x2", df.b * 0.5), by, "ts", reduce=None, **floats))
    assert "partial_count" not in plan and "partial_max" not in plan


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
    from udaf import Distinct, LpNorm, Sum, errors, sketch_table

    bad = spark.createDataFrame(pd.DataFrame({"k": ["a", "a", "a"], "ts": [1, 1, 2], "b": [3, -5, 4], "d": [1, 2, 3]}))
    with pytest.raises(InvalidInputError, match="^column b holds -5 .key 'a'.: Sum needs non-negative integers$"), \
            errors():
        sketch_table(bad, "k", "ts", reduce=True, s=Sum("b", 10)).collect()
    with pytest.raises(InvalidInputError, match="^column b holds -5(.0)? .key 'a'.: LpNorm needs finite non-negative"), \
            errors():
        sketch_table(bad, "k", "ts", reduce=True, lp=LpNorm("d", 10, value="b")).collect()
    late = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": pd.array([1, None], dtype="Int64"), "d": [1, 1]}))
    with pytest.raises(InvalidInputError, match="^column ts holds null .key 'a'.: timestamps must not be null$"), \
            errors():
        sketch_table(late, "k", "ts", reduce=True, u=Distinct("d", 10)).collect()
    # a time's sum past int64: refused, key named, in either ANSI mode (a
    # plain sum wraps around without it, into a sketch of wrong values)
    big = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": [1, 1], "b": [2**62, 2**62], "d": [1, 2]}))
    for ansi in (True, False):
        with ansi_mode(spark, ansi), \
                pytest.raises(OverflowError, match=r"^the sum of a key's values exceeds int64 \(key 'a'\)$"), errors():
            sketch_table(big, "k", "ts", reduce=True, s=Sum("b", 10)).collect()
    # a key's total past int64 over several times, reduced or not: the
    # histogram would hold it, so it is refused as the other Python passes
    # refuse it (the core's ValueError before)
    spread = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": [1, 2], "b": [2**62, 2**62], "d": [1, 2]}))
    for reduce in (True, False):
        with pytest.raises(OverflowError, match=r"^the sum of a key's values exceeds int64$"), errors():
            sketch_table(spread, "k", "ts", reduce=reduce, s=Sum("b", 10)).collect()


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


@pytest.mark.spark
def test_two_phase_groups_float_and_null_keys_as_spark_does(spark):
    """Phase two gathers a key's partials with Spark's own grouping: NaN
    with NaN, -0.0 with 0.0, null with null; one row per group, whose
    bounds bracket the exact count of the shuffle strategy."""
    from pyspark.sql import functions as F

    from udaf import Count, aggregate

    df = spark.createDataFrame(_bursty(5)).repartition(3)
    df = df.withColumn("x", F.when(F.col("i") == 1, F.lit(float("nan"))).otherwise(F.col("x")))  # NaN as a value
    two = aggregate(df, ["x", "k"], "ts", strategy="two_phase", bounds=True, n=Count(40)).collect()
    exact = aggregate(df, ["x", "k"], "ts", strategy="shuffle", n=Count(40)).collect()

    def key(r):  # -0.0 + 0.0 is 0.0; NaN reprs alike (pandas' NaN may reach Spark as null)
        return (None if r.x is None else repr(r.x + 0.0), r.k)

    assert len(two) == len(exact) == df.select("x", "k").distinct().count()
    counts = {key(r): r.n for r in exact}
    assert {key(r) for r in two} == set(counts)
    for r in two:
        assert r.n_lower <= counts[key(r)] <= r.n_upper


def test_two_phase_as_of_now_sums_the_partials_bounds_in_spark(spark, monkeypatch):
    """With a ``now`` and no sketch asked for, phase one sends a histogram
    spec's bounds as of ``now`` (not its sketch) and Spark sums them per
    key: the answers and bounds of the Python union of the sketches
    (``Spec.union``) to the last bit, beside a spec that still ships its
    sketch, on keys Spark groups (null, NaN, -0.0) spread over partitions;
    a key's summed bounds past int64 refused in either ANSI mode, key
    named (each partial within it)."""
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, Sum, aggregate
    from udaf.eh_spec import _Histogram

    df = spark.createDataFrame(_bursty(6)).repartition(4)
    specs = dict(n=Count(40, eps=0.1), s=Sum("b", 30, eps=0.05), u=Distinct("d", 40))

    def rows(**kw):
        out = aggregate(df, ["x", "k"], "ts", strategy="two_phase", now=55, bounds=True, **kw).collect()
        return sorted((tuple(map(repr, r)) for r in out))

    summed = rows(**specs)
    counts_only = rows(n=specs["n"], s=specs["s"])  # no Python pass after the sums
    monkeypatch.setattr(_Histogram, "additive", False)  # the sketches shipped and united in Python
    assert rows(**specs) == summed
    assert rows(n=specs["n"], s=specs["s"]) == counts_only
    monkeypatch.undo()
    assert len(summed) == df.select("x", "k").distinct().count()
    assert [c for c in aggregate(df, "k", "ts", strategy="two_phase", now=55, bounds=True, **specs).columns] == \
        ["k", "n", "n_lower", "n_upper", "s", "s_lower", "s_upper", "u"]
    big = spark.createDataFrame([("a", t, 2**62) for t in (1, 2)] + [("b", 2, 1)], "k string, ts long, b long") \
        .repartition(2, F.col("ts"))  # a's rows in two partitions: each partial holds 2**62
    for ansi in (True, False):
        with ansi_mode(spark, ansi), pytest.raises(Exception, match=r"the sum of a key's values exceeds int64 "
                                                                    r"\(key 'a'\)"):
            aggregate(big, "k", "ts", strategy="two_phase", now=5, s=Sum("b", 10)).collect()
