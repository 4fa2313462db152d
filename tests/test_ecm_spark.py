"""Frequencies and heavy hitters through every Spark entry point
(udaf/ecm_spec.py): column functions and SQL give the core's sketches and
answers, aggregate and sketch_table keep the guarantees against the exact
answer, sliding_over gives each row's own item's exact frequency, the
streaming state answers each key's heavy hitters, mistakes get one
message."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from frequencies import SlidingCountMin, SlidingHeavyHitters  # noqa: E402
from udaf import Count, Frequencies, HeavyHitters, Quantile, aggregate, sketch_table, sliding_over  # noqa: E402
from udaf import functions as U  # noqa: E402

pytestmark = pytest.mark.spark
WINDOW = 800
ROWS = 6000


@pytest.fixture(scope="module")
def events(spark):
    """Three keys; every fifth row is source 42 (a heavy hitter), key 2's
    sources also include 7 on a third of its rows; bytes 0..6."""
    return spark.range(0, ROWS, 1, 3).select(
        (F.col("id") % 3).alias("k"), F.col("id").alias("ts"),
        F.when(F.col("id") % 5 == 0, F.lit(42)).when((F.col("id") % 3 == 2) & (F.col("id") % 4 == 1), F.lit(7))
        .otherwise(F.abs(F.xxhash64("id")) % 100_000).alias("src"),
        (F.col("id") % 7).alias("b")).cache()


@pytest.fixture(scope="module")
def rows(events):
    got = events.orderBy("ts").collect()
    return {c: np.array([r[c] for r in got]) for c in ("k", "ts", "src", "b")}


def exact(rows, key, now, window, value=False):
    m = (rows["k"] == key) & (rows["ts"] > now - window) & (rows["ts"] <= now)
    w = rows["b"][m] if value else np.ones(int(m.sum()), dtype=np.int64)
    out = {}
    for x, v in zip(rows["src"][m].tolist(), w.tolist()):
        out[x] = out.get(x, 0) + v
    return out, int(w.sum())


def test_column_functions_are_the_core_sketches(events, rows):
    got = events.groupBy("k").agg(
        U.ecm_sketch_agg("ts", "src", WINDOW, 0.05, 0.05, seed=3, value="b").alias("cm"),
        U.sliding_hh_sketch_agg("ts", "src", WINDOW, 0.1, 32, eps=0.05, delta=0.05).alias("hh"),
    ).orderBy("k")
    answers = got.select("k", "cm", "hh", U.ecm_sketch_frequency("cm", F.lit(42)).alias("f42"),
                         U.ecm_sketch_bounds("cm").alias("total"),
                         U.sliding_hh_sketch_heavy_hitters("hh", F.lit(0.1)).alias("top"),
                         U.sliding_hh_sketch_frequency("hh", F.lit(42)).alias("h42")).collect()
    for r in answers:
        m = rows["k"] == r["k"]
        cm = SlidingCountMin(WINDOW, 0.05, 0.05, seed=3).update(rows["ts"][m], rows["src"][m], rows["b"][m])
        hh = SlidingHeavyHitters(WINDOW, 32, 0.05, 0.05).update(rows["ts"][m], rows["src"][m])
        assert bytes(r["cm"]) == cm.to_bytes() and bytes(r["hh"]) == hh.to_bytes()
        assert r["f42"] == cm.frequency(42) and r["h42"] == hh.frequency(42)
        assert (r["total"]["lower"], r["total"]["upper"]) == cm.bounds()
        assert [(h["item"], h["estimate"], h["lower"], h["upper"]) for h in r["top"]] == \
            [tuple(h) for h in hh.heavy_hitters(0.1)]
        truth, total = exact(rows, r["k"], int(rows["ts"][m].max()), WINDOW)
        assert {x for x, f in truth.items() if f >= 0.1 * total} <= {h["item"] for h in r["top"]}


def test_union_of_stored_sketches_keeps_the_bounds(events, rows):
    parts = events.groupBy("k", (F.col("ts") % 4).alias("part")).agg(
        U.ecm_sketch_agg("ts", "src", WINDOW, 0.05, 0.05).alias("cm"),
        U.sliding_hh_sketch_agg("ts", "src", WINDOW, 0.1, 32).alias("hh"))
    merged = parts.groupBy("k").agg(U.ecm_union_agg("cm").alias("cm"), U.sliding_hh_union_agg("hh").alias("hh"))
    got = merged.select("k", U.ecm_sketch_bounds("cm", F.lit(ROWS), 500).alias("total"),
                        U.sliding_hh_sketch_heavy_hitters("hh", F.lit(0.1), F.lit(ROWS), 500).alias("top")).collect()
    for r in got:
        truth, total = exact(rows, r["k"], ROWS, 500)
        assert r["total"]["lower"] <= total <= r["total"]["upper"]
        top = {h["item"]: h for h in r["top"]}
        assert {x for x, f in truth.items() if f >= 0.1 * total} <= set(top)
        assert all(h["upper"] >= truth.get(x, 0) for x, h in top.items())


@pytest.mark.parametrize("strategy", ["auto", "two_phase", "shuffle"])
def test_aggregate_gives_every_key_its_heavy_hitters(events, rows, strategy):
    """auto runs the native plan (the exact list from Spark's aggregates,
    as shuffle computes it in Python); two_phase builds sketches."""
    out = aggregate(events, "k", "ts", strategy=strategy, bounds=True, sketches=strategy == "two_phase",
                    f=Frequencies("src", WINDOW, value="b"), top=HeavyHitters("src", WINDOW, phi=0.1, bits=32))
    for r in out.collect():
        m = rows["k"] == r["k"]
        now = int(rows["ts"][m].max())
        truth, total = exact(rows, r["k"], now, WINDOW)
        _, byte_total = exact(rows, r["k"], now, WINDOW, value=True)
        assert r["f_lower"] <= byte_total <= r["f_upper"]
        heavy = {x: f for x, f in truth.items() if f >= 0.1 * total}
        assert set(heavy) <= {h["item"] for h in r["top"]}
        if strategy in ("auto", "shuffle"):  # the rows at hand: the exact list
            assert [(h["item"], h["lower"]) for h in r["top"]] == sorted(heavy.items(), key=lambda x: -x[1])
        if strategy == "two_phase":  # the merged sketch, and the answer read from it
            assert [tuple(h) for h in r["top"]] == \
                [tuple(h) for h in SlidingHeavyHitters.from_bytes(r["top_sketch"]).heavy_hitters(0.1)]


@pytest.mark.parametrize("now", [None, 5000])
def test_frequencies_totals_are_the_sums_of_the_partials_bounds(events, rows, now):
    """A key's window total from its partials is the sums of their bounds
    (Frequencies is additive: with a now, Spark sums them and no sketch is
    shuffled; without one, the union pass sums them as of the key's
    newest), each bracketing the exact total; the same numbers as the
    partials' own sketches give."""
    out = {r["k"]: r for r in aggregate(events, "k", "ts", strategy="two_phase", bounds=True, now=now,
                                        f=Frequencies("src", WINDOW, value="b")).collect()}
    for k, r in out.items():
        m = rows["k"] == k
        at = int(rows["ts"][m].max()) if now is None else now
        _, total = exact(rows, k, at, WINDOW, value=True)
        assert r["f_lower"] <= total <= r["f_upper"] and r["f"] == r["f_lower"] * 0.5 + r["f_upper"] * 0.5
    # the union pass itself: parts of one key in any number, every part's bounds as of the key's time, summed
    spec = Frequencies("src", WINDOW, value="b")
    cuts = [0, 1500, 2000, 4000, 6000]  # four parts of interleaved rows; the window cuts through their buckets
    parts = [SlidingCountMin(3000, 0.1, 0.1, 0.2).update(rows["ts"][a:z:2], rows["k"][a:z:2], rows["b"][a:z:2])
             for a, z in zip(cuts[:-1], cuts[1:])]  # three items: every counter holds many rows
    blobs = [p.to_bytes() for p in parts] + [None]
    starts = np.array([0, 1, 4])  # keys of one part, of three, and of a null part only
    got = spec.union(blobs, starts, None)
    for g, (a, z) in enumerate([(0, 1), (1, 4)]):
        at = max(p.newest for p in parts[a:z])
        want = [sum(x) for x in zip(*[p.bounds(at) for p in parts[a:z]])]
        assert [got.lower[g], got.upper[g]] == want
        stamps, values = rows["ts"][cuts[a]:cuts[z]:2], rows["b"][cuts[a]:cuts[z]:2]
        assert want[0] <= int(values[stamps > at - 3000].sum()) <= want[1]
    assert got.upper[1] > got.lower[1] and (got.lower[-1], got.upper[-1]) == (0, 0)
    # keys of different parameters in one batch: each key's own sums; a key whose parts differ is refused
    other = SlidingCountMin(3000, 0.2, 0.2, 0.2).update([5], [1], [9])
    mixed = spec.union([blobs[0], other.to_bytes()], np.array([0, 1]), None)
    assert [mixed.lower.tolist(), mixed.upper.tolist()] == [[got.lower[0], 9], [got.upper[0], 9]]
    from ehist import IncompatibleSketchError

    with pytest.raises(IncompatibleSketchError):
        spec.union([blobs[0], other.to_bytes()], np.array([0]), None)


def test_native_list_equals_the_python_one_with_nulls_and_null_keys(spark):
    """The native plan and the shuffle strategy's Python pass give the same
    lists, per-key newest or a common now, with null ids, null values,
    weights, a null key and a key without rows in the window."""
    from pyspark.sql import types as T

    rng = np.random.default_rng(6)
    data = [(None if i % 97 == 0 else int(rng.integers(0, 3)), i,
             None if i % 11 == 0 else int(rng.choice([5, 5, 9, int(rng.integers(0, 50))])),
             None if i % 13 == 0 else int(rng.integers(0, 9))) for i in range(3000)]
    data.append((7, 10, 5, 1))  # key 7: one old row, outside every window as of 2999
    schema = T.StructType([T.StructField(c, T.LongType()) for c in ("k", "ts", "src", "b")])
    df = spark.createDataFrame(data, schema)
    specs = dict(top=HeavyHitters("src", 400, phi=0.05, bits=8), wtop=HeavyHitters("src", 300, phi=0.1, value="b"))
    for now in (None, 2999):
        native = aggregate(df, "k", "ts", strategy="native", now=now, **specs).orderBy("k").collect()
        python = aggregate(df, "k", "ts", strategy="shuffle", now=now, **specs).orderBy("k").collect()
        assert native == python and any(r["top"] for r in native)
        assert {r["k"] for r in native} >= {None, 0, 1, 2}
    # lists only: one aggregation over grouping sets, no join with a per-key aggregation of the rows
    plan = aggregate(df, "k", "ts", strategy="native", now=2999, **specs)._jdf.queryExecution().optimizedPlan()
    assert "Join" not in plan.toString() and "Expand" in plan.toString()
    out = aggregate(df, "k", "ts", strategy="native", top=HeavyHitters("src", 400, bits=8)).collect()
    assert [[h.asDict() for h in r["top"]] for r in out if r["k"] == 7] == \
        [[{"item": 5, "estimate": 1.0, "lower": 1, "upper": 1}]]
    bad = df.withColumn("src", F.when(F.col("ts") == 2990, F.lit(300)).otherwise(F.col("src")))
    with pytest.raises(Exception, match=r"column src holds 300 \(key 2\): HeavyHitters needs ids in \[0, 2\*\*8\)"):
        aggregate(bad, "k", "ts", strategy="native", top=HeavyHitters("src", 400, bits=8)).collect()


@pytest.mark.parametrize("also", [{}, {"n": Count(window=100)}])
def test_native_threshold_is_the_python_float_one(spark, also):
    """phi * total in float64, as the Python pass computes it: 0.07 * 100
    is 7.000000000000001, so an item with 7 of 100 rows is listed by
    neither plan (a decimal 0.07 would list it)."""
    rows = [(1, t, 1 if t < 7 else 2 + t % 11) for t in range(100)]
    df = spark.createDataFrame(rows, "k long, ts long, src long")
    spec = HeavyHitters("src", 1000, phi=0.07, bits=8)
    native = aggregate(df, "k", "ts", strategy="native", top=spec, **also).collect()
    python = aggregate(df, "k", "ts", strategy="shuffle", top=spec, **also).collect()
    assert [r["top"] for r in native] == [r["top"] for r in python]
    assert sorted(h["item"] for h in native[0]["top"]) == list(range(2, 13))


def test_sketch_table_rows_are_sketches_of_each_key(events, rows):
    table = sketch_table(events, "k", "ts", top=HeavyHitters("src", WINDOW, bits=32), f=Frequencies("src", WINDOW))
    for r in table.collect():
        m = rows["k"] == r["k"]
        assert bytes(r["top"]) == SlidingHeavyHitters(WINDOW, 32, seed=0).update(rows["ts"][m],
                                                                                rows["src"][m]).to_bytes()
        assert bytes(r["f"]) == SlidingCountMin(WINDOW).update(rows["ts"][m], rows["src"][m]).to_bytes()


@pytest.mark.parametrize("strategy", ["auto", "shuffle"])
def test_sliding_over_gives_each_rows_own_item_frequency(events, rows, strategy):
    """auto: Spark's window functions within (key, item) (two growing
    frames); shuffle: the Python pass. Both exact, nulls skipped."""
    small = events.where("ts < 600")
    got = sliding_over(small, "k", "ts", strategy=strategy, f=Frequencies("src", 50),
                       fb=Frequencies("src", 50, value="b")).collect()
    for r in got:
        truth, _ = exact(rows, r["k"], r["ts"], 50)
        weighted, _ = exact(rows, r["k"], r["ts"], 50, value=True)
        assert r["f"] == truth[r["src"]] and r["fb"] == weighted[r["src"]]
    holes = small.withColumn("src", F.when(F.col("ts") % 7 == 0, None).otherwise(F.col("src"))) \
        .withColumn("b", F.when(F.col("ts") % 5 == 0, None).otherwise(F.col("b")))
    got = sliding_over(holes, "k", "ts", strategy=strategy, fb=Frequencies("src", 50, value="b")).collect()
    for r in got:
        inside = [x for x in got if x["k"] == r["k"] and r["ts"] - 50 < x["ts"] <= r["ts"]]
        want = None if r["src"] is None or r["b"] is None else \
            sum(x["b"] for x in inside if x["src"] == r["src"] and x["b"] is not None)
        assert r["fb"] == want
    negative = small.withColumn("b", F.when(F.col("ts") == 77, F.lit(-2)).otherwise(F.col("b")))
    with pytest.raises(Exception, match=r"column b holds -2 \(key 2\): Frequencies needs non-negative integers"):
        sliding_over(negative, "k", "ts", strategy=strategy, fb=Frequencies("src", 50, value="b")).collect()
    with pytest.raises(ValueError, match="no per-row answer for top \\(HeavyHitters\\)"):
        sliding_over(small, "k", "ts", strategy=strategy, top=HeavyHitters("src", 50))


def test_sql_calls_the_same_functions(spark, events):
    names = U.register(spark)
    assert {"ecm_sketch_agg", "ecm_union_agg", "ecm_sketch_estimate", "ecm_sketch_bounds", "ecm_sketch_frequency",
            "sliding_hh_sketch_agg", "sliding_hh_union_agg", "sliding_hh_sketch_heavy_hitters",
            "sliding_hh_sketch_frequency"} <= set(names)
    events.createOrReplaceTempView("ecm_events")
    sql = spark.sql(f"""
        SELECT k, ecm_sketch_frequency(ecm_sketch_agg(ts, src, {WINDOW}), 42) AS f,
               sliding_hh_sketch_heavy_hitters(sliding_hh_sketch_agg(ts, src, {WINDOW}, 0.01, 32), 0.1) AS top
        FROM ecm_events GROUP BY k ORDER BY k""").collect()
    python = events.groupBy("k").agg(
        U.ecm_sketch_frequency(U.ecm_sketch_agg("ts", "src", WINDOW), F.lit(42)).alias("f"),
        U.sliding_hh_sketch_heavy_hitters(U.sliding_hh_sketch_agg("ts", "src", WINDOW, 0.01, 32), F.lit(0.1))
        .alias("top")).orderBy("k").collect()
    assert sql == python


def test_mistakes_get_one_message(events):
    with pytest.raises(TypeError, match="column dst: HeavyHitters needs an integral column"):
        aggregate(events.withColumn("dst", F.lit("x")), "k", "ts", top=HeavyHitters("dst", WINDOW))
    negative = events.withColumn("src", F.when(F.col("ts") == 77, F.lit(-3)).otherwise(F.col("src")))
    with pytest.raises(Exception, match=r"column src holds -3 \(key 2\): HeavyHitters needs ids in \[0, 2\*\*32\)"):
        aggregate(negative, "k", "ts", strategy="two_phase", top=HeavyHitters("src", WINDOW, bits=32)).collect()
    with pytest.raises(ValueError, match="phi must be"):
        HeavyHitters("src", WINDOW, phi=0)
    with pytest.raises(ValueError, match="bits must be"):
        HeavyHitters("src", WINDOW, bits=65)
    # with bits=64 (the default) a negative bigint is an id: its 64-bit pattern
    out = aggregate(negative, "k", "ts", strategy="shuffle", top=HeavyHitters("src", WINDOW, phi=0.1)).collect()
    assert all(42 in {h["item"] for h in r["top"]} for r in out)


@pytest.mark.slow  # ~15 s; every family's streaming state against its core: tests/test_parity.py
def test_streaming_state_answers_heavy_hitters_and_quantiles(spark, tmp_path):
    """One stream through the state for the newest families (a stream costs
    about 10 s)."""
    import math

    from pyspark.sql import types as T

    from udaf.streaming import ROCKSDB_PROVIDER, sliding_window_state

    from .test_streaming import PROVIDER, write_batch

    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)
    src = str(tmp_path / "in")
    rng = np.random.default_rng(4)
    all_rows = []
    for b in range(2):
        batch = [{"k": "ab"[i % 2], "ts": 1000 * b + i, "src": 5 if i % 4 < 2 else int(rng.integers(0, 10**6)),
                  "delay": None if i % 9 == 0 else float(rng.lognormal(3 + b, 0.5))} for i in range(1000)]
        all_rows += batch
        write_batch(src, batch)
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("ts", T.LongType()),
                           T.StructField("src", T.LongType()), T.StructField("delay", T.DoubleType())])
    got = []
    try:
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(src)
        out = sliding_window_state(stream, "k", "ts", top=HeavyHitters("src", 700, phi=0.2, bits=32),
                                   f=Frequencies("src", 700), p99=Quantile("delay", 700, q=0.99))
        q = out.writeStream.outputMode("update").foreachBatch(lambda df, _: got.extend(df.collect())) \
            .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
        q.awaitTermination(300)
        q.stop()
    finally:
        spark.conf.unset(PROVIDER) if before is None else spark.conf.set(PROVIDER, before)
    assert len(got) == 4
    for r in got:
        sel = [x for x in all_rows if x["k"] == r["k"] and r["as_of"] - 700 < x["ts"] <= r["as_of"]]
        assert [h["item"] for h in r["top"]] == [5] and r["top"][0]["upper"] >= sum(x["src"] == 5 for x in sel)
        assert abs(r["f"] - len(sel)) <= 0.01 * len(sel)
        delays = np.sort([x["delay"] for x in sel if x["delay"] is not None])
        near = delays[max(0, math.floor(0.99 * delays.size / 1.02) - 1):math.ceil(0.99 * delays.size * 1.02) + 1]
        assert (np.abs(r["p99"] - near) <= 0.01 * near * (1 + 1e-9)).any(), (r, near)


def test_join_size_of_two_streams_from_their_sketches(events, rows):
    """ecm_sketch_inner_product: per key, the join size of the sources of
    two streams (even and odd rows) over the window."""
    both = events.groupBy("k").agg(
        U.ecm_sketch_agg("ts", F.when(F.col("ts") % 2 == 0, F.col("src")), WINDOW, 0.01, 0.05).alias("a"),
        U.ecm_sketch_agg("ts", F.when(F.col("ts") % 2 == 1, F.col("src")), WINDOW, 0.01, 0.05).alias("b"))
    got = both.select("k", "a", "b", U.ecm_sketch_inner_product("a", "b").alias("j")).collect()
    for r in got:
        a, b = SlidingCountMin.from_bytes(r["a"]), SlidingCountMin.from_bytes(r["b"])
        assert r["j"] == a.inner_product(b)[0]
        m = rows["k"] == r["k"]
        now = max(a.newest, b.newest)
        inside = m & (rows["ts"] > now - WINDOW) & (rows["ts"] <= now)
        even = rows["src"][inside & (rows["ts"] % 2 == 0)]
        odd = rows["src"][inside & (rows["ts"] % 2 == 1)]
        true = sum(int((odd == x).sum()) * n for x, n in zip(*np.unique(even, return_counts=True)))
        assert a.inner_product(b)[2] >= true and r["j"] >= 0.99**2 * true
