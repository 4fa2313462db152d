"""Sliding quantiles through every Spark entry point (udaf/quantile_spec.py):
column functions and SQL give the core's sketches and answers, aggregate
gives the exact quantile natively (percentile_disc) and the sketch's within
its guarantee, sliding_over gives each row's frame's exact quantile, mistakes get one
message (the streaming state: tests/test_ecm_spark.py, one stream for the
new families)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from quantiles import SlidingQuantiles  # noqa: E402
from udaf import Quantile, aggregate, sketch_table, sliding_over  # noqa: E402
from udaf import functions as U  # noqa: E402

pytestmark = pytest.mark.spark
WINDOW = 800
ROWS = 6000


@pytest.fixture(scope="module")
def probes(spark):
    """Three monitors; delays around 20 ms, key 2's jump to ~200 ms for
    the last third of the stream; a few negative clock skews."""
    return spark.range(0, ROWS, 1, 3).select(
        (F.col("id") % 3).alias("k"), F.col("id").alias("ts"),
        (F.when((F.col("id") % 3 == 2) & (F.col("id") > 4000), F.lit(200.0)).otherwise(F.lit(20.0))
         + (F.abs(F.xxhash64("id")) % 1000) / 50.0 - F.when(F.col("id") % 97 == 0, 30.0).otherwise(0.0))
        .alias("delay")).cache()


@pytest.fixture(scope="module")
def rows(probes):
    got = probes.orderBy("ts").collect()
    return {c: np.array([r[c] for r in got]) for c in ("k", "ts", "delay")}


def exact(rows, key, now, window, q):
    m = (rows["k"] == key) & (rows["ts"] > now - window) & (rows["ts"] <= now)
    w = np.sort(rows["delay"][m])
    return float(w[max(1, math.ceil(q * w.size)) - 1]) if w.size else math.nan


def test_column_functions_are_the_core_sketches(probes, rows):
    got = probes.groupBy("k").agg(U.sliding_quantile_sketch_agg("ts", "delay", WINDOW, 0.99, 0.05).alias("s"),
                                  U.sliding_quantile("ts", "delay", WINDOW, 0.99, 0.05).alias("p99"))
    answers = got.select("k", "s", "p99", U.sliding_quantile_sketch_quantile("s", F.lit(0.5)).alias("p50"),
                         U.sliding_quantile_sketch_quantile_bounds("s", F.lit(0.99)).alias("b99"),
                         U.sliding_quantile_sketch_rank("s", F.lit(25.0)).alias("r25"),
                         U.sliding_quantile_sketch_estimate("s").alias("n")).collect()
    assert len(answers) == 3
    for r in answers:
        m = rows["k"] == r["k"]
        s = SlidingQuantiles(WINDOW, 0.05).update(rows["ts"][m], rows["delay"][m])
        assert bytes(r["s"]) == s.to_bytes()
        assert r["p99"] == s.quantile(0.99) and r["p50"] == s.quantile(0.5) and r["r25"] == s.rank(25.0)
        assert (r["b99"]["lower"], r["b99"]["upper"]) == s.quantile_bounds(0.99) and r["n"] == s.estimate()
        truth = exact(rows, r["k"], int(rows["ts"][m].max()), WINDOW, 0.99)
        assert r["b99"]["lower"] <= truth <= r["b99"]["upper"]
        assert abs(r["p99"] - truth) <= 0.1 * abs(truth)


def test_union_of_stored_sketches_answers_any_window(probes, rows):
    parts = probes.groupBy("k", (F.col("ts") % 4).alias("part")).agg(
        U.sliding_quantile_sketch_agg("ts", "delay", WINDOW).alias("s"))
    merged = parts.groupBy("k").agg(U.sliding_quantile_union_agg("s").alias("s"))
    got = merged.select("k", U.sliding_quantile_sketch_quantile_bounds("s", F.lit(0.9), F.lit(ROWS), 500)
                        .alias("b")).collect()
    for r in got:
        truth = exact(rows, r["k"], ROWS, 500, 0.9)
        assert r["b"]["lower"] <= truth <= r["b"]["upper"]


@pytest.mark.parametrize("strategy", ["auto", "two_phase", "shuffle"])
def test_aggregate_gives_every_key_its_quantile(probes, rows, strategy):
    """auto runs Spark's percentile_disc (exact, as shuffle computes it in
    Python); two_phase builds sketches, within their guarantee."""
    out = aggregate(probes, "k", "ts", strategy=strategy, sketches=strategy == "two_phase",
                    p50=Quantile("delay", WINDOW, q=0.5), p99=Quantile("delay", WINDOW, q=0.99, eps=0.05))
    got = out.collect()
    assert len(got) == 3
    for r in got:
        now = int(rows["ts"][rows["k"] == r["k"]].max())
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            truth = exact(rows, r["k"], now, WINDOW, q)
            if strategy == "two_phase":
                assert abs(r[name] - truth) <= 0.1 * abs(truth)
                assert r[name] == SlidingQuantiles.from_bytes(r[name + "_sketch"]).quantile(q)
            else:
                assert r[name] == truth


def test_native_equals_python_with_nulls_and_a_common_now(spark):
    from pyspark.sql import types as T

    rng = np.random.default_rng(4)
    data = [(None if i % 89 == 0 else int(rng.integers(0, 3)), i,
             None if i % 7 == 0 else float(rng.choice([1.0, 2.0, -3.5, rng.lognormal(2, 1)]))) for i in range(2000)]
    data.append((7, 10, 5.0))  # key 7: nothing in the window as of 1999
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("ts", T.LongType()),
                           T.StructField("v", T.DoubleType())])
    df = spark.createDataFrame(data, schema)
    specs = dict(a=Quantile("v", 300, q=0.95), b=Quantile("v", 100, q=0.0), c=Quantile("v", 50, q=1.0))
    for now in (None, 1999):
        native = aggregate(df, "k", "ts", strategy="native", now=now, **specs).orderBy("k").collect()
        python = aggregate(df, "k", "ts", strategy="shuffle", now=now, **specs).orderBy("k").collect()
        for x, y in zip(native, python):
            assert x["k"] == y["k"]
            for name in specs:
                assert x[name] == y[name] or (x[name] is None and math.isnan(y[name])) \
                    or (math.isnan(y[name]) and x[name] is not None and math.isnan(x[name])), (x, y)


def test_sketch_table_rows_are_sketches_of_each_key(probes, rows):
    table = sketch_table(probes, "k", "ts", p=Quantile("delay", WINDOW, accuracy=0.02))
    for r in table.collect():
        m = rows["k"] == r["k"]
        assert bytes(r["p"]) == SlidingQuantiles(WINDOW, accuracy=0.02).update(rows["ts"][m],
                                                                              rows["delay"][m]).to_bytes()


@pytest.mark.parametrize("strategy", ["auto", "shuffle"])
def test_sliding_over_gives_each_rows_exact_frame_quantile(probes, rows, strategy):
    small = probes.where("ts < 900").withColumn("delay", F.when(F.col("ts") % 11 == 0, None)
                                                 .otherwise(F.col("delay")))
    got = sliding_over(small, "k", "ts", strategy=strategy, p95=Quantile("delay", 60, q=0.95),
                       p0=Quantile("delay", 3, q=0.0)).collect()
    assert len(got) == 900
    for r in got:
        m = (rows["k"] == r["k"]) & (rows["ts"] <= r["ts"]) & (rows["ts"] % 11 != 0)
        for name, q, w in (("p95", 0.95, 60), ("p0", 0.0, 3)):
            want = exact({**rows, "k": np.where(m, rows["k"], -1)}, r["k"], r["ts"], w, q)
            assert (r[name] is None and math.isnan(want)) or r[name] == want, (r, name, want)


def test_sql_calls_the_same_functions(spark, probes):
    names = U.register(spark)
    assert {"sliding_quantile_sketch_agg", "sliding_quantile_union_agg", "sliding_quantile_sketch_quantile",
            "sliding_quantile_sketch_rank", "sliding_quantile_sketch_quantile_bounds",
            "sliding_quantile_sketch_estimate", "sliding_quantile"} <= set(names)
    probes.createOrReplaceTempView("quantile_probes")
    sql = spark.sql(f"""
        SELECT k, sliding_quantile_sketch_quantile(sliding_quantile_sketch_agg(ts, delay, {WINDOW}), 0.99) AS p99,
               sliding_quantile(ts, delay, {WINDOW}, 0.5) AS p50
        FROM quantile_probes GROUP BY k ORDER BY k""").collect()
    python = probes.groupBy("k").agg(
        U.sliding_quantile_sketch_quantile(U.sliding_quantile_sketch_agg("ts", "delay", WINDOW), F.lit(0.99))
        .alias("p99"), U.sliding_quantile("ts", "delay", WINDOW, 0.5).alias("p50")).orderBy("k").collect()
    assert sql == python


def test_mistakes_get_one_message(probes):
    with pytest.raises(TypeError, match="column d: Quantile needs a numeric column"):
        aggregate(probes.withColumn("d", F.lit("x")), "k", "ts", p=Quantile("d", WINDOW))
    with pytest.raises(ValueError, match="q must be a number in \\[0, 1\\]"):
        Quantile("delay", WINDOW, q=1.5)
    with pytest.raises(ValueError, match="accuracy must be"):
        Quantile("delay", WINDOW, accuracy=0.9)
    nan = probes.withColumn("delay", F.when(F.col("ts") == 5900, F.lit(float("nan"))).otherwise(F.col("delay")))
    for strategy in ("native", "two_phase", "shuffle"):
        with pytest.raises(Exception, match=r"column delay holds nan \(key 2\): Quantile needs finite numbers"):
            aggregate(nan, "k", "ts", strategy=strategy, p=Quantile("delay", WINDOW)).collect()

