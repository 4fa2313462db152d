"""udaf.aggregate against the query a data engineer would write.

Run:  python -m pytest benchmarks/bench_udaf.py -s
      (EHIST_BENCH_ROWS sets the row count, default 10,000,000;
      EHIST_BENCH_REPEATS the runs per path, default 3 or more: the best is kept)

One question, "count, sum (and distinct count) per key over the last
window, as of now" (and the p99 of bytes: :func:`test_p99_as_of_now`; heavy
hitters: :func:`test_heavy_hitters_as_of_now`; item frequencies' totals:
:func:`test_item_totals_as_of_now`), on
a cached DataFrame of (k, ts, bytes, dst) rows with 1k and 100k keys and a
window of a quarter of the stream, answered by:

* the native query: ``df.where(ts > now - w).groupBy(k).agg(count, sum,
  countDistinct | approx_count_distinct)`` (the baseline, ratio 1.0);
* ``aggregate(strategy="auto")``: with Count/Sum/Distinct it runs the
  native plan (:mod:`udaf.native`): the claim is that it never loses to
  the query above by more than 1.2x;
* ``aggregate(strategy="two_phase")``: partial sketches per partition, only
  sketches shuffled (what sketches cost when the rows are at hand);
* the column functions (``groupBy(k).agg(sliding_count, sliding_sum)``,
  every row of a key to one Python call): a secondary row, once.

And the per-key variant (each key's window ends at its own newest row, no
global now): a window ``max(ts) OVER (PARTITION BY k)`` and the join with
per-key maxima, against ``aggregate`` without ``now``.

And where sketches are built (``sketch_table``, ``aggregate(...,
sketches=True)``) on a bursty stream: 1,000 keys, ~50 rows per key and
second, 200 items (destinations): Spark's own aggregation first (``reduce=True``: rows
per key and second, each item's latest second; byte-identical sketches)
against every row into Python (``reduce=False``, the baseline), and the
default (``reduce=None``: one JVM pass decides).  The unique-timestamp
questions above run the default too, which declines to reduce there.

Wall time is the best of the repeats, each question's paths run in
turn, every round in the reverse order of the last; shuffle bytes come
from Spark's status REST API (loopback).  The load of the machine is printed with the
summary.

The 1.2x claim itself is read from :func:`tie`: for count + sum, + distinct
and the L_2 norm, auto and the native query (and the native query again, an
A/A control) alternate ``EHIST_BENCH_UDAF_ROUNDS`` (11) rounds after two
warm-up rounds; the median of the rounds' auto / native ratios is the
number (a best of a few runs of a 0.2 s query is not).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from benchmarks.conftest import RESULTS, alternating, note_load, rounds_text, spark_fixture

pytest.importorskip("pyspark")

ROWS = int(os.environ.get("EHIST_BENCH_ROWS", "10000000"))
REPEATS = int(os.environ.get("EHIST_BENCH_REPEATS", "3"))
WINDOW = ROWS // 4
NOW = ROWS - 1  # the newest timestamp: "as of now"


# the UI serves shuffle bytes; it keeps 1,000 stages by default, and a
# total over fewer stages than before made one path's bytes negative
# (-173,154,371 in the 10:04 run of 2026-11-25, after the alternating ties)
spark = spark_fixture("ehist-bench-udaf", **{"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "true",
                                             "spark.ui.retainedStages": "1000000", "spark.ui.retainedJobs": "1000000",
                                             "spark.driver.memory": "6g"})


def shuffle_bytes(spark) -> int:
    """Total shuffle-write bytes of every completed stage so far."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url, timeout=30) as r:
        stages = json.load(r)
    return sum(int(st.get("shuffleWriteBytes", 0)) for st in stages)


def data(spark, keys):
    from pyspark.sql import functions as F

    df = spark.range(ROWS).select(
        (F.abs(F.xxhash64("id")) % keys).alias("k"),
        F.col("id").alias("ts"),
        (F.rand(7) * 1500).cast("long").alias("bytes"),
        (F.abs(F.xxhash64(F.col("id") + 1)) % 50_000).alias("dst"),
    ).repartition(4).cache()
    df.count()
    return df


def run(spark, question, keys, path, action, repeats=REPEATS):
    """Best wall time of ``repeats`` runs (shuffle bytes of the last)."""
    return runs(spark, question, keys, {path: action}, repeats)[path]


def runs(spark, question, keys, paths: dict, repeats=REPEATS) -> dict:
    """Each path's best wall time over ``repeats`` (or more) alternating rounds
    (:func:`benchmarks.conftest.alternating`: the ratios against the native
    query are of times measured side by side) and the shuffle bytes of its
    last run.  Returns each path's rows."""
    moved, total = {}, [shuffle_bytes(spark)]

    def settle(path):  # outside the timed run: the status store read after the run
        time.sleep(1)  # let the status store catch up
        now = shuffle_bytes(spark)
        moved[path], total[0] = now - total[0], now

    best, rounds, rows = alternating(paths, repeats, settle=settle)
    for path in paths:
        RESULTS[f"{question} | {keys:,} keys | {path}"] = {
            "question": question, "keys": keys, "path": path, "seconds": best[path], "shuffle_bytes": moved[path],
            "rows": ROWS, "repeats": rounds[path]}
    return rows


#: Rounds of :func:`tie` after its two warm-up rounds (``EHIST_BENCH_UDAF_ROUNDS``).
TIE_ROUNDS = int(os.environ.get("EHIST_BENCH_UDAF_ROUNDS", "11"))


def tie(question, keys, native, auto, rounds=TIE_ROUNDS):
    """``aggregate(strategy="auto")`` against the native query for one
    question, the way ``bench_per_row`` settles its ties: the native query,
    auto and the native query again, run in alternation ``rounds`` times
    after two warm-up rounds, each round in the reverse order of the last.
    Recorded under ``"one-shot tie: question | keys"``: each path's median
    and minimum, the median of the rounds' auto / native ratios (the
    target's number: a best of a few runs of a 0.2 s query swung from
    0.94x to 1.41x between runs of an identical plan on this machine) and
    of native / native again (A/A: the scale to read it against)."""
    import statistics

    paths = {"native": native, "auto": auto, "again": native}
    seconds = {p: [] for p in paths}
    for round_ in range(2 + rounds):
        for p in (list(paths) if round_ % 2 == 0 else list(paths)[::-1]):
            t = time.perf_counter()
            paths[p]()
            if round_ >= 2:
                seconds[p].append(time.perf_counter() - t)
    n, a, again = seconds["native"], seconds["auto"], seconds["again"]
    row = RESULTS[f"one-shot tie: {question} | {keys:,} keys"] = {
        "one_shot": question, "keys": keys, "rows": ROWS, "rounds": rounds,
        "native_median": statistics.median(n), "auto_median": statistics.median(a),
        "native_min": min(n), "auto_min": min(a),
        "ratio_median": statistics.median(x / y for x, y in zip(a, n)),
        "aa_ratio_median": statistics.median(x / y for x, y in zip(n, again)),
        "load": list(note_load("bench_udaf"))}
    print(f"\n  {question}, {keys:,} keys: native {row['native_median']:.3f} s, auto {row['auto_median']:.3f} s "
          f"(medians of {rounds}); auto / native {row['ratio_median']:.2f}, A/A {row['aa_ratio_median']:.2f}",
          flush=True)


def answers(rows, *names):
    return {r.k: tuple(r[n] for n in names) for r in rows}


@pytest.mark.parametrize("keys", [1_000, 100_000])
def test_count_and_sum_as_of_now(spark, keys):
    from pyspark.sql import functions as F

    from udaf import Count, Sum, aggregate
    from udaf import functions as U

    q = "count + sum, as of now"
    df = data(spark, keys)
    specs = dict(c=Count(WINDOW, 0.01), s=Sum("bytes", WINDOW, 0.01))
    got = runs(spark, q, keys, {
        "native query": lambda: df.where(F.col("ts") > NOW - WINDOW).groupBy("k").agg(
            F.count(F.lit(1)).alias("c"), F.sum("bytes").alias("s")).collect(),
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **specs).collect(),
        "aggregate two_phase": lambda: aggregate(df, "k", "ts", now=NOW, strategy="two_phase", **specs).collect()})
    native, auto = got["native query"], got["aggregate auto"]
    if keys <= 1_000:  # one Python call per key and function: minutes at 100k keys
        run(spark, q, keys, "column functions", lambda: df.groupBy("k").agg(
            U.sliding_count("ts", WINDOW, now=NOW).alias("c"),
            U.sliding_sum("ts", "bytes", WINDOW, now=NOW).alias("s")).collect(), repeats=1)
    exact = answers(native, "c", "s")
    got = answers(auto, "c", "s")
    assert {k: v for k, v in got.items() if v[0]} == {k: (float(c), float(s)) for k, (c, s) in exact.items()}
    tie(q, keys, lambda: df.where(F.col("ts") > NOW - WINDOW).groupBy("k").agg(
        F.count(F.lit(1)).alias("c"), F.sum("bytes").alias("s")).collect(),
        lambda: aggregate(df, "k", "ts", now=NOW, **specs).collect())

    q = "count + sum, per-key newest"
    from pyspark.sql import Window

    def window_max():
        newest = F.max("ts").over(Window.partitionBy("k"))
        return df.withColumn("now", newest).where(F.col("ts") > F.col("now") - WINDOW).groupBy("k").agg(
            F.count(F.lit(1)).alias("c"), F.sum("bytes").alias("s")).collect()

    def join_max():
        newest = df.groupBy("k").agg(F.max("ts").alias("now"))
        return df.join(F.broadcast(newest), "k").where(F.col("ts") > F.col("now") - WINDOW).groupBy("k").agg(
            F.count(F.lit(1)).alias("c"), F.sum("bytes").alias("s")).collect()

    runs(spark, q, keys, {"native window max": window_max, "native broadcast join": join_max,
                          "aggregate auto": lambda: aggregate(df, "k", "ts", **specs).collect(),
                          "aggregate two_phase": lambda: aggregate(df, "k", "ts", strategy="two_phase",
                                                                   **specs).collect()})

    q = "count + sum + distinct, as of now"
    from udaf import Distinct

    specs["d"] = Distinct("dst", WINDOW)
    recent = df.where(F.col("ts") > NOW - WINDOW).groupBy("k")
    distinct = {
        "native countDistinct": lambda: recent.agg(F.count(F.lit(1)), F.sum("bytes"), F.countDistinct("dst")).collect(),
        "native approx_count_distinct": lambda: recent.agg(
            F.count(F.lit(1)), F.sum("bytes"), F.approx_count_distinct("dst")).collect(),
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **specs).collect(),
        "aggregate two_phase": lambda: aggregate(df, "k", "ts", now=NOW, strategy="two_phase", **specs).collect()}
    runs(spark, q, keys, distinct)
    tie(q, keys, distinct["native countDistinct"], distinct["aggregate auto"])

    q = "L_2 norm of bytes per dst, as of now"
    from udaf import LpNorm

    def per_dst():  # the exact query: each item's sum, then the key's norm
        f = df.where(F.col("ts") > NOW - WINDOW).groupBy("k", "dst").agg(
            F.sum("bytes").alias("f"))
        return f.groupBy("k").agg(F.sqrt(F.sum(F.col("f").cast("double") * F.col("f"))).alias("l")).collect()

    l2 = dict(l=LpNorm("dst", WINDOW, value="bytes"))
    got = runs(spark, q, keys, {
        "native query": per_dst,
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **l2).collect(),
        # what auto ran before LpNorm.native_items: the exact Python pass
        "aggregate shuffle": lambda: aggregate(df, "k", "ts", now=NOW, strategy="shuffle", **l2).collect()})
    exact, auto = answers(got["native query"], "l"), answers(got["aggregate auto"], "l")
    assert all(abs(auto[k][0] - v[0]) <= 1e-9 * v[0] for k, v in exact.items())
    tie(q, keys, per_dst, lambda: aggregate(df, "k", "ts", now=NOW, **l2).collect())
    df.unpersist()


@pytest.mark.parametrize("keys", [1_000, 100_000])
def test_p99_as_of_now(spark, keys):
    """Issue 40's two-phase target for the quantiles: each key's p99 of
    bytes over the window as of now, against the queries Spark offers
    (``percentile_approx``, and its own KLL sketches); ``aggregate`` with a
    ``Quantile`` (auto and two_phase).  Answers checked on a sample of keys:
    within the sketch's accuracy of the window's top 2% of values."""
    import numpy as np
    from pyspark.sql import functions as F

    from udaf import Quantile, aggregate

    q = "p99 of bytes, as of now"
    df = data(spark, keys)
    recent = df.where(F.col("ts") > NOW - WINDOW).groupBy("k")
    spec = dict(p=Quantile("bytes", WINDOW, q=0.99))
    got = runs(spark, q, keys, {
        "native percentile_approx": lambda: recent.agg(F.percentile_approx("bytes", 0.99).alias("p")).collect(),
        "native kll sketch": lambda: recent.agg(F.kll_sketch_get_quantile_bigint(
            F.kll_sketch_agg_bigint("bytes"), F.lit(0.99)).alias("p")).collect(),
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **spec).collect(),
        "aggregate two_phase": lambda: aggregate(df, "k", "ts", now=NOW, strategy="two_phase", **spec).collect()})
    sample = sorted(answers(got["native percentile_approx"], "p"))[:50]
    values = {}
    for r in df.where((F.col("ts") > NOW - WINDOW) & F.col("k").isin(sample)).select("k", "bytes").collect():
        values.setdefault(r.k, []).append(r.bytes)
    accuracy = spec["p"].accuracy
    for path in ("aggregate auto", "aggregate two_phase"):
        mine = answers(got[path], "p")
        for k, v in values.items():
            low, high = np.quantile(v, 0.98), max(v)
            assert low * (1 - accuracy) - 1 <= mine[k][0] <= high * (1 + accuracy) + 1, (path, k)
    df.unpersist()


#: Heavy hitters' share of a key's window (:func:`test_heavy_hitters_as_of_now`).
PHI = 0.05


@pytest.mark.parametrize("keys", [1_000, 100_000])
def test_heavy_hitters_as_of_now(spark, keys):
    """Issue 40's two-phase target for heavy hitters: each key's items at
    or above ``PHI`` of its window as of now (items Zipf(1.2) over a
    million ids, as destinations of a source are), against the exact query
    (``groupBy(k, item)`` joined with each key's total) and Spark's
    ``approx_top_k``; ``aggregate`` with a ``HeavyHitters`` (auto and
    two_phase).  Checked: no exact heavy hitter missed, upper bounds hold."""
    from pyspark.sql import functions as F

    from udaf import HeavyHitters, aggregate

    q = "heavy hitters, as of now"
    df = data(spark, keys)
    zipf = df.withColumn("item", F.floor(F.least(F.pow(F.rand(3), F.lit(-1 / 0.2)), F.lit(1e6))).cast("long")).cache()
    zipf.count()
    df.unpersist()
    recent = zipf.where(F.col("ts") > NOW - WINDOW)

    def exact():
        total = recent.groupBy("k").agg(F.count(F.lit(1)).alias("total"))
        return recent.groupBy("k", "item").agg(F.count(F.lit(1)).alias("n")).join(total, "k").where(
            F.col("n") >= PHI * F.col("total")).collect()

    spec = dict(h=HeavyHitters("item", WINDOW, phi=PHI, bits=32))
    got = runs(spark, q, keys, {
        "native exact query": exact,
        "native approx_top_k": lambda: recent.groupBy("k").agg(
            F.expr(f"approx_top_k(item, {round(1 / PHI)}, 10000)").alias("top"),
            F.count(F.lit(1)).alias("total")).collect(),
        "aggregate auto": lambda: aggregate(zipf, "k", "ts", now=NOW, **spec).collect(),
        "aggregate two_phase": lambda: aggregate(zipf, "k", "ts", now=NOW, strategy="two_phase", **spec).collect()})
    heavy = {}
    for r in got["native exact query"]:
        heavy.setdefault(r.k, {})[r.item] = r.n
    for path in ("aggregate auto", "aggregate two_phase"):
        mine = {r.k: {h["item"]: h for h in r.h} for r in got[path]}
        for k, items in heavy.items():
            assert set(items) <= set(mine[k]), (path, k)
            assert all(mine[k][i]["upper"] >= n for i, n in items.items()), (path, k)
    zipf.unpersist()


@pytest.mark.parametrize("keys", [1_000, 100_000])
def test_item_totals_as_of_now(spark, keys):
    """Issue 40's two-phase target for item frequencies: each key's window
    total as of now from ``Frequencies`` (what ``aggregate`` answers per key;
    the sketch, stored, answers any item), against the native count;
    ``aggregate`` auto (Spark's own plan) and two_phase (ECM-sketches per
    partition, their total bounds summed by Spark: the family is additive).
    Checked: the two-phase bounds bracket the exact count."""
    from pyspark.sql import functions as F

    from udaf import Frequencies, aggregate

    q = "item frequencies' window total, as of now"
    df = data(spark, keys)
    spec = dict(f=Frequencies("dst", WINDOW))
    got = runs(spark, q, keys, {
        "native count": lambda: df.where(F.col("ts") > NOW - WINDOW).groupBy("k").agg(
            F.count("dst").alias("f")).collect(),
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **spec).collect(),
        "aggregate two_phase": lambda: aggregate(df, "k", "ts", now=NOW, strategy="two_phase", bounds=True,
                                                 **spec).collect()})
    exact = answers(got["native count"], "f")
    two = {r.k: (r.f_lower, r.f_upper) for r in got["aggregate two_phase"]}
    assert all(two[k][0] <= n <= two[k][1] for k, (n,) in exact.items())
    df.unpersist()


@pytest.mark.parametrize("keys", [100_000])
def test_l2_norms_as_of_now(spark, keys):
    """Issue 40's two-phase target for L_p norms: each key's L2 norm of bytes
    per destination in the window as of now, against the native query (each
    destination's bytes summed, then the norm) and ``aggregate`` auto (that
    plan, with the package's checks) and two_phase (an L_p sketch per key
    and partition, added per key). At 100k keys a partial holds ~6 rows:
    the elements form, exact (checked); at 1k keys partials of ~2,500 rows
    take buckets of 2,300 floats each, minutes a run, so that case is left
    out (``auto`` answers it natively)."""
    from pyspark.sql import functions as F

    from udaf import LpNorm, aggregate

    q = "L2 norm of bytes per destination, as of now"
    df = data(spark, keys)
    spec = dict(l=LpNorm("dst", WINDOW, value="bytes"))

    def native():
        per = df.where(F.col("ts") > NOW - WINDOW).groupBy("k", "dst").agg(F.sum("bytes").alias("f"))
        return per.groupBy("k").agg(F.sqrt(F.sum(F.col("f") * F.col("f"))).alias("l")).collect()

    got = runs(spark, q, keys, {
        "native query": native,
        "aggregate auto": lambda: aggregate(df, "k", "ts", now=NOW, **spec).collect(),
        "aggregate two_phase": lambda: aggregate(df, "k", "ts", now=NOW, strategy="two_phase", **spec).collect()})
    exact = {r.k: r.l for r in got["native query"]}
    two = {r.k: r.l for r in got["aggregate two_phase"]}
    assert all(abs(two[k] - v) <= 1e-9 * max(v, 1.0) for k, v in exact.items())
    df.unpersist()


def test_bursty_stream_reduction(spark):
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, LpNorm, Sum, aggregate, sketch_table

    keys, per_second = 1_000, 50
    df = spark.range(ROWS).select(
        (F.abs(F.xxhash64("id")) % keys).alias("k"),
        (F.col("id") / (keys * per_second)).cast("long").alias("ts"),
        (F.rand(7) * 1500).cast("long").alias("bytes"),
        (F.abs(F.xxhash64(F.col("id") + 1)) % 200).alias("dst"),
    ).withColumn("port", F.col("dst") % 16).repartition(4).cache()
    df.count()
    window = ROWS // (keys * per_second) // 4
    specs = dict(c=Count(window, 0.01), s=Sum("bytes", window, 0.01), d=Distinct("dst", window))
    reduced = {"rows": ROWS, "per (key, second)": df.select("k", "ts").distinct().count(),
               "per (key, item)": df.select("k", "dst").distinct().count(),
               "per (key, second, index)": df.select("k", "ts", "port").distinct().count()}
    q = "sketch_table, bursty stream"
    tables = {r: run(spark, q, keys, f"reduce={r}", lambda r=r: sketch_table(df, "k", "ts", reduce=r, **specs)
                     .orderBy("k").collect()) for r in (False, True, None)}
    assert [tuple(x) for x in tables[True]] == [tuple(x) for x in tables[False]]  # byte-identical sketches
    q = "aggregate sketches=True, bursty stream"
    for r in (False, True, None):
        run(spark, q, keys, f"reduce={r}", lambda r=r: aggregate(df, "k", "ts", sketches=True, reduce=r, **specs)
            .collect())
    # the L_p norm of bytes per port class (16 indexes): Spark sums bytes per
    # (key, second, port) first, about 3 rows each
    lp = dict(l2=LpNorm("port", window, value="bytes", p=2.0, eps=0.1, delta=0.1))
    q = "sketch_table L_2 of bytes per port, bursty stream"
    tables = {r: run(spark, q, keys, f"reduce={r}", lambda r=r: sketch_table(df, "k", "ts", reduce=r, **lp)
                     .orderBy("k").collect()) for r in (False, True, None)}
    assert [tuple(x) for x in tables[True]] == [tuple(x) for x in tables[False]]  # byte-identical sketches
    RESULTS["bursty stream rows into Python"] = reduced
    print(f"\n  rows into Python: {ROWS:,} without reduction; {reduced['per (key, second)']:,} per (key, second) "
          f"for counts and sums, {reduced['per (key, item)']:,} per (key, item) for distinct counts", flush=True)
    df.unpersist()


def test_summary():
    # RESULTS holds every benchmark file's results in a whole run: this file's have keys and shuffle bytes
    labels = [k for k in RESULTS if "keys" in RESULTS[k] and "shuffle_bytes" in RESULTS[k]]
    if not labels:
        pytest.skip("run the whole file")
    load = note_load("bench_udaf")
    rounds = rounds_text([RESULTS[k] for k in labels])
    lines = ["", f"{ROWS:,} rows, window {WINDOW:,}, local[2], best of {rounds} rounds; load average "
                 f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
             f"{'question':36s} {'keys':>8s} {'path':30s} {'seconds':>8s} {'x base':>7s} {'shuffle bytes':>15s}"]
    base = {}
    for k in labels:
        r = RESULTS[k]
        base.setdefault((r["question"], r["keys"]), r["seconds"])  # the first path of a question: native
        ratio = r["seconds"] / base[(r["question"], r["keys"])]
        lines.append(f"{r['question']:36s} {r['keys']:8,d} {r['path']:30s} {r['seconds']:8.2f} {ratio:7.2f} "
                     f"{r['shuffle_bytes']:15,d}")
    for k, r in RESULTS.items():
        if k.startswith("one-shot tie: "):
            lines.append(f"{r['one_shot']:36s} {r['keys']:8,d} {'auto / native, median of ' + str(r['rounds']):30s} "
                         f"{r['ratio_median']:8.2f} (A/A {r['aa_ratio_median']:.2f})")
    print("\n".join(lines))
