"""Heavy hitters and item frequencies: the frequencies family against what a
data engineer would write with Spark.

Run:  python -m pytest benchmarks/bench_frequencies.py -s
      (EHIST_BENCH_FREQ_ROWS sets the row count, default 4,000,000;
      EHIST_BENCH_REPEATS the runs per path, default 3 or more: the best is kept)

The stream: (k, ts, src, bytes) rows, 100 keys (links), one row per time
unit, sources Zipf(1.2) over a million ids, a window of a quarter of the
stream, phi = 1%.  Questions and paths, measured side by side:

* "heavy hitters per key, as of now": the exact query (``where(ts > now -
  w).groupBy(k, src).count()`` joined with each key's total, filtered at
  ``phi``; the baseline) against Spark's ``approx_top_k(src, 1 / phi)``
  over the same rows (filtered at ``phi`` of the key's count), and
  ``aggregate(strategy="two_phase", HeavyHitters(...))`` and
  ``strategy="auto"``;
* "stored, any window": one sketch table per key built once, then the
  heavy hitters of windows of 1%, 10% and 100% of N from the stored
  sketches, against rescanning the raw rows (cached) with the exact query
  for each window and against Spark's own stored answer, a per-slot
  ``approx_top_k_accumulate`` rollup combined over the window's slots
  (``approx_top_k_combine`` / ``_estimate``); storage bytes per key of the
  sketch table, of the raw rows (Parquet), of a per-1000-units rollup (k,
  slot, src, count) and of the approx_top_k rollup;
* "per-row own-item frequency": ``sliding_over(Frequencies)`` (auto: the
  native plan, two growing frames within (k, src); shuffle: the Python
  pass) against Spark's ``count(*) OVER (PARTITION BY k, src ORDER BY ts
  RANGE BETWEEN w - 1 PRECEDING AND CURRENT ROW)`` and the bare
  two-growing-frames query.

* the core alone (no Spark): update throughput of ``SlidingCountMin`` and
  ``SlidingHeavyHitters``, and error against memory as ``eps`` varies,
  with the Count-Min guarantee drawn.

Spark has no sliding aggregate to compare with; ``count_min_sketch``
builds Spark's Count-Min sketch of a whole group, with no SQL function to
query it (Scala's ``CountMinSketch.readFrom``), so it is not a path a
PySpark user has.  No sliding-window frequency package installs from the
registry (count-min-sketch, pyprobables and datasketches summarize whole
streams).
"""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.conftest import (
    RESULTS,
    best_in_rounds,
    best_of,
    note_load,
    parquet_bytes_per_key,
    rounds_text,
    spark_fixture,
)

pytest.importorskip("pyspark")

ROWS = int(os.environ.get("EHIST_BENCH_FREQ_ROWS", "4000000"))
REPEATS = int(os.environ.get("EHIST_BENCH_REPEATS", "3"))
KEYS = 100
WINDOW = ROWS // 4
NOW = ROWS - 1
PHI = 0.01

spark = spark_fixture("ehist-bench-frequencies", **{"spark.sql.shuffle.partitions": "8",
                                                    "spark.driver.memory": "6g"})


def data(spark):
    from pyspark.sql import functions as F

    df = spark.range(ROWS).select(
        (F.abs(F.xxhash64("id")) % KEYS).alias("k"), F.col("id").alias("ts"),
        # Zipf(1.2) source ids by inverse transform of a uniform, over ~1M ids
        F.floor(F.least(F.pow(F.rand(3), F.lit(-1 / 0.2)), F.lit(1e6))).cast("long").alias("src"),
        (F.rand(5) * 1500).cast("long").alias("bytes"),
    ).repartition(4).cache()
    df.count()
    return df


def timed(question, path, action, repeats=REPEATS, rows=ROWS, **extra):
    return best_of(question, path, action, rows, repeats, **extra)


def exact_heavy(df, now, window, phi=PHI):
    """{key: {src: count}} of the sources at or above phi of the key's window."""
    from pyspark.sql import functions as F

    recent = df.where((F.col("ts") > now - window) & (F.col("ts") <= now))
    per = recent.groupBy("k", "src").agg(F.count(F.lit(1)).alias("n"))
    total = recent.groupBy("k").agg(F.count(F.lit(1)).alias("total"))
    out = {}
    for r in per.join(F.broadcast(total), "k").where(F.col("n") >= phi * F.col("total")).collect():
        out.setdefault(r["k"], {})[r["src"]] = r["n"]
    return out


TOP_K = int(round(1 / PHI))  # at most 1 / phi items reach phi of the total


def top_k_heavy(grouped, phi=PHI):
    """{key: {src: count}} from rows (k, top: approx_top_k's array, total):
    the items whose estimated count reaches phi of the key's total."""
    out = {}
    for r in grouped.collect():
        out[r["k"]] = {h["item"]: h["count"] for h in r["top"] if h["count"] >= phi * r["total"]}
    return out


def recall(name, got, exact):
    """Share of the exact heavy hitters a path reported, recorded."""
    want = sum(len(v) for v in exact.values())
    found = sum(len(set(v) & set(got.get(k, {}))) for k, v in exact.items())
    RESULTS[f"heavy hitters recall | {name}"] = {"recall": found / max(want, 1), "exact": want}


def listed(rows, column):
    return {r["k"]: {h["item"]: h for h in r[column]} for r in rows}


def test_heavy_hitters_as_of_now(spark):
    from pyspark.sql import functions as F

    from udaf import HeavyHitters, aggregate

    df = data(spark)
    q = "heavy hitters per key, as of now"
    spec = HeavyHitters("src", WINDOW, phi=PHI, bits=32, eps=0.002, eh_eps=0.05)

    def heavy_hitters(strategy):
        return listed(aggregate(df, "k", "ts", now=NOW, strategy=strategy, top=spec).collect(), "top")

    got = best_in_rounds(q, {
        "exact query (filter, groupBy k, src)": lambda: exact_heavy(df, NOW, WINDOW),
        "Spark approx_top_k (filter, groupBy k)": lambda: top_k_heavy(
            df.where((F.col("ts") > NOW - WINDOW) & (F.col("ts") <= NOW)).groupBy("k").agg(
                F.expr(f"approx_top_k(src, {TOP_K}, 10000)").alias("top"), F.count(F.lit(1)).alias("total"))),
        "aggregate two_phase": lambda: heavy_hitters("two_phase"),
        "aggregate auto": lambda: heavy_hitters("auto")}, ROWS, REPEATS)
    exact = got["exact query (filter, groupBy k, src)"]
    recall("approx_top_k, as of now", got["Spark approx_top_k (filter, groupBy k)"], exact)
    for strategy in ("two_phase", "auto"):
        mine = got[f"aggregate {strategy}"]
        for k, heavy in exact.items():  # none missed, bounds hold
            assert set(heavy) <= set(mine[k]) and all(mine[k][s]["upper"] >= n for s, n in heavy.items())
    df.unpersist()


def test_stored_sketches_any_window(spark):
    from pyspark.sql import functions as F

    from udaf import HeavyHitters, sketch_table
    from udaf import functions as U

    df = data(spark)
    q = "stored, any window"
    spec = HeavyHitters("src", WINDOW, phi=PHI, bits=32, eps=0.002, eh_eps=0.05)
    def build():
        out = sketch_table(df, "k", "ts", top=spec).cache()
        out.count()
        return out

    table = timed(q, "build sketch table (once)", build, repeats=1)
    tops = df.groupBy("k", (F.col("ts") / 1000).cast("long").alias("slot")).agg(
        F.expr("approx_top_k_accumulate(src, 10000)").alias("acc"), F.count(F.lit(1)).alias("n")).cache()
    timed(q, "build approx_top_k rollup table (once)", lambda: tops.count(), repeats=1)
    size = parquet_bytes_per_key({
        "rows": df,
        "rollup": df.groupBy("k", (F.col("ts") / 1000).cast("long").alias("slot"), "src").agg(
            F.count(F.lit(1)).alias("n")),
        "approx_top_k rollup": tops, "sketches": table}, KEYS)
    RESULTS["stored heavy hitters: bytes per key"] = size
    for frac in (0.01, 0.1, 1.0):
        w = max(1000, int(WINDOW * frac) // 1000 * 1000)  # whole slots of the rollups
        first = (NOW - w + 1) // 1000  # the slots of (NOW - w, NOW]: whole slots (NOW + 1 is a multiple of 1000)
        rescan, stored, rollup = (f"rescan rows, window {frac:.0%} of N", f"stored sketches, window {frac:.0%} of N",
                                  f"approx_top_k rollup combined, window {frac:.0%} of N")
        got = best_in_rounds(q, {
            rescan: lambda w=w: exact_heavy(df, NOW, w),
            stored: lambda w=w: listed(table.select("k", U.sliding_hh_sketch_heavy_hitters(
                "top", F.lit(PHI), F.lit(NOW), w).alias("top")).collect(), "top"),
            rollup: lambda first=first: top_k_heavy(tops.where(F.col("slot") >= first).groupBy("k").agg(
                F.expr(f"approx_top_k_estimate(approx_top_k_combine(acc, 10000), {TOP_K})").alias("top"),
                F.sum("n").alias("total")))}, ROWS, REPEATS)
        exact, combined = got[rescan], got[rollup]
        for k, heavy in exact.items():
            assert set(heavy) <= set(got[stored][k])
        recall(f"approx_top_k rollup, window {frac:.0%}", combined, exact)
    tops.unpersist()
    table.unpersist()
    df.unpersist()


def test_per_row_own_item_frequency(spark):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from udaf import Frequencies, sliding_over

    rows = min(ROWS, 1_000_000)
    df = data(spark).where(F.col("ts") < rows).cache()
    df.count()
    q = "per-row own-item frequency"
    w = 1000
    by_item = Window.partitionBy("k", "src").orderBy("ts")
    got = best_in_rounds(q, {
        "exact two growing frames": lambda: df.select(
            "k", "ts", "src", (F.count(F.lit(1)).over(by_item.rangeBetween(Window.unboundedPreceding, 0))
                               - F.coalesce(F.count(F.lit(1)).over(by_item.rangeBetween(Window.unboundedPreceding, -w)),
                                            F.lit(0))).alias("f")).agg(F.sum("f")).first()[0],
        "RANGE frame count(*)": lambda: df.select(
            "k", "ts", "src", F.count(F.lit(1)).over(by_item.rangeBetween(-(w - 1), 0)).alias("f"))
            .agg(F.sum("f")).first()[0],
        "sliding_over Frequencies (auto: native)": lambda: sliding_over(
            df, "k", "ts", f=Frequencies("src", w)).agg(F.sum("f")).first()[0],
        "sliding_over Frequencies (shuffle: Python)": lambda: sliding_over(
            df, "k", "ts", strategy="shuffle", f=Frequencies("src", w)).agg(F.sum("f")).first()[0]}, rows, REPEATS)
    growing, frame, ours, python = got.values()
    assert frame == growing == ours == python
    df.unpersist()


# ------------------------------------------------------------- the core alone
def test_core_update_throughput():
    import numpy as np

    from frequencies import SlidingCountMin, SlidingHeavyHitters

    rng = np.random.default_rng(0)
    n = 1_000_000
    ts = np.sort(rng.integers(0, n, n))
    src = (rng.zipf(1.2, n) % 1_000_000).astype(np.int64)
    for name, make in (("SlidingCountMin eps 0.001", lambda: SlidingCountMin(n // 4, eps=0.001, delta=0.01,
                                                                                eh_eps=0.05)),
                       ("SlidingHeavyHitters bits 32, eps 0.002", lambda: SlidingHeavyHitters(
                           n // 4, bits=32, eps=0.002, delta=0.01, eh_eps=0.05))):
        for batch in (50_000, n):
            t = time.perf_counter()
            s = make()
            for a in range(0, n, batch):
                s.update(ts[a:a + batch], src[a:a + batch])
            seconds = time.perf_counter() - t
            RESULTS[f"core update | {name}, batches of {batch:,}"] = {
                "seconds": seconds, "elements": n, "per_second": n / seconds, "bytes": len(s.to_bytes())}


def test_core_error_against_memory():
    """Overestimates of the 1,000 most frequent items over the window
    total, and bytes, as eps varies.  The Count-Min guarantee is per item:
    an estimate exceeds the truth by more than (1 + eh_eps) eps T with
    probability at most delta, so the share of items beyond it is
    recorded (and asserted within delta plus three standard errors) with
    the largest and the 99th-percentile overestimate.  Exact state is a
    counter per distinct item of the window (16 bytes each) or 16 bytes a
    row for the window's rows."""
    import numpy as np

    from frequencies import SlidingCountMin

    rng = np.random.default_rng(1)
    n, delta, trials = 1_000_000, 0.01, 1000
    ts = np.sort(rng.integers(0, n, n))
    src = (rng.zipf(1.2, n) % 1_000_000).astype(np.int64)
    window = n // 4
    inside = ts > ts[-1] - window
    total = int(inside.sum())
    items, counts = np.unique(src[inside], return_counts=True)
    top = np.argsort(counts)[-trials:]
    for eps in (0.0005, 0.001, 0.002, 0.005, 0.01, 0.05):
        s = SlidingCountMin(window, eps=eps, delta=delta, eh_eps=0.05)
        for a in range(0, n, 50_000):
            s.update(ts[a:a + 50_000], src[a:a + 50_000])
        est, _, _ = s.frequencies(items[top])
        over = (est - counts[top]) / total
        beyond = float(np.mean(over > (1 + 0.05) * eps + 0.05 * counts[top] / total))
        RESULTS[f"core error | SlidingCountMin eps {eps}"] = {
            "eps": eps, "bytes": len(s.to_bytes()), "max_over_total": float(over.max()),
            "p99_over_total": float(np.quantile(over, 0.99)), "share_beyond_bound": beyond,
            "distinct_in_window": int(items.size), "exact_item_bytes": 16 * int(items.size),
            "exact_row_bytes": 16 * total}
        assert beyond <= delta + 3 * np.sqrt(delta * (1 - delta) / trials)


def test_summary():
    labels = [k for k in RESULTS if "question" in RESULTS[k] and RESULTS[k]["question"] in (
        "heavy hitters per key, as of now", "stored, any window", "per-row own-item frequency")]
    core = [k for k in RESULTS if k.startswith(("core update | Sliding", "core error | Sliding", "heavy hitters recall"))]
    if not labels and not core:
        pytest.skip("run the whole file")
    load = note_load("bench_frequencies")
    rounds = rounds_text([RESULTS[k] for k in labels])
    print(f"\n{ROWS:,} rows, {KEYS} keys, window {WINDOW:,}, phi {PHI}, local[2], best of {rounds} rounds; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for k in labels:
        r = RESULTS[k]
        print(f"  {r['question']:36s} {r['path']:42s} {r['seconds']:8.2f} s")
    size = RESULTS.get("stored heavy hitters: bytes per key")
    if size:
        print("  bytes per key (Parquet): " + ", ".join(f"{n} {v / 1024:,.0f} KiB" for n, v in size.items()))
    for k in core:
        print(f"  {k:60s} " + ", ".join(f"{a} {b:,.4g}" if isinstance(b, float) else f"{a} {b:,}"
                                        for a, b in RESULTS[k].items()))
