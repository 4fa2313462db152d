"""Stored data: rollup tables against a table of sliding-window sketches.

Run:  python -m pytest benchmarks/bench_stored.py -s
      (EHIST_BENCH_STORED_ROWS, default 5,000,000 events; EHIST_BENCH_STORED_KEYS,
      default 200; EHIST_BENCH_REPEATS,
      default 3 runs per query, the best kept)

When the rows are gone (a retention limit, a table per day, many sources
rolled up later), what a data engineer keeps is a rollup table: per key
and minute (or second), ``count(*)``, ``sum(bytes)`` and Spark's own
``hll_sketch_agg(dst)``, written to Parquet; a window's answer is
``where(slot > now - w).groupBy(k).agg(sum, sum, hll_union_agg)``.  The
ehist answer is one row per key (``udaf.sketch_table``) with an
exponential histogram of counts, one of sums and a sliding HyperLogLog,
each for windows up to 30 days at one-second resolution, queried with
``eh_sketch_estimate(sketch, now, w)`` / ``sliding_hll_sketch_estimate``.

Measured in one run: bytes on disk per key of each table, seconds to
answer windows of a minute, an hour, a day and 30 days as of a ``now``
that is not on a minute boundary, and the largest relative error per key
against the exact answer from the rows (the per-minute rollup answers
whole minutes: its error is the partial minute at the window's start).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from benchmarks.conftest import RESULTS, spark_fixture

pytest.importorskip("pyspark")

ROWS = int(os.environ.get("EHIST_BENCH_STORED_ROWS", "5000000"))
REPEATS = int(os.environ.get("EHIST_BENCH_REPEATS", "3"))
KEYS = int(os.environ.get("EHIST_BENCH_STORED_KEYS", "200"))
DAYS = 30
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
END = START + dt.timedelta(days=DAYS)
NOW = END + dt.timedelta(seconds=43)  # after the last event (sketches answer at or after it), mid-minute
WINDOWS = {"1 minute": 60, "1 hour": 3600, "1 day": 86_400, "30 days": DAYS * 86_400}

spark = spark_fixture("ehist-bench-stored", **{"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "6g"})


def disk_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*.parquet"))


def best(action):
    out, t = None, float("inf")
    for _ in range(REPEATS):
        s = time.perf_counter()
        out = action()
        t = min(t, time.perf_counter() - s)
    return out, t


@pytest.fixture(scope="module")
def tables(spark):
    """The events (kept only to compute exact answers), a per-minute and a
    per-second rollup table and the ehist sketch table, all in Parquet."""
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, Sum, sketch_table

    where = tempfile.mkdtemp(prefix="ehist-stored-")
    span = DAYS * 86_400
    events = spark.range(ROWS, numPartitions=4).select(
        (F.abs(F.xxhash64("id")) % KEYS).alias("k"),
        F.timestamp_seconds(F.lit(int(START.timestamp()))
                            + (F.abs(F.xxhash64(F.col("id") + 7)) % span)).alias("ts"),
        (F.abs(F.xxhash64(F.col("id") + 3)) % 1500).alias("bytes"),
        (F.abs(F.xxhash64(F.col("id") + 5)) % 20_000).alias("dst"),
    )
    paths = {name: os.path.join(where, name) for name in ("events", "minute", "second", "ehist")}
    events.write.parquet(paths["events"])
    events = spark.read.parquet(paths["events"])
    for name, unit in (("minute", "minute"), ("second", "second")):
        events.groupBy("k", F.date_trunc(unit, "ts").alias("slot")).agg(
            F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.hll_sketch_agg("dst").alias("d"),
        ).write.parquet(paths[name])
    sketch_table(events, "k", "ts", n=Count(f"{DAYS} days", 0.01), b=Sum("bytes", f"{DAYS} days", 0.01),
                 d=Distinct("dst", f"{DAYS} days", precision=12)).write.parquet(paths["ehist"])
    yield paths
    shutil.rmtree(where, ignore_errors=True)


def test_storage_and_windows(spark, tables):
    from pyspark.sql import functions as F

    from udaf import functions as U

    events = spark.read.parquet(tables["events"])
    for name in ("minute", "second", "ehist"):
        RESULTS[f"stored bytes per key | {name}"] = {"table": name, "bytes_per_key": disk_bytes(tables[name]) / KEYS,
                                                     "rows": spark.read.parquet(tables[name]).count()}
    now = F.lit(NOW)
    for label, seconds in WINDOWS.items():
        start = NOW - dt.timedelta(seconds=seconds)
        exact = {r.k: r for r in events.where((F.col("ts") > start) & (F.col("ts") <= NOW)).groupBy("k").agg(
            F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.countDistinct("dst").alias("d")).collect()}
        answers = {}
        for name in ("minute", "second"):
            table = spark.read.parquet(tables[name])
            # whole slots: the per-minute table cannot cut inside a minute
            answers[name] = best(lambda t=table: t.where((F.col("slot") > F.lit(start)) & (F.col("slot") <= now))
                                 .groupBy("k").agg(F.sum("n").alias("n"), F.sum("b").alias("b"),
                                                   F.hll_sketch_estimate(F.hll_union_agg("d")).alias("d")).collect())
        stored = spark.read.parquet(tables["ehist"])
        answers["ehist"] = best(lambda: stored.select(
            "k", U.eh_sketch_estimate("n", NOW, seconds * 1_000_000).alias("n"),
            U.eh_sketch_estimate("b", NOW, seconds * 1_000_000).alias("b"),
            U.sliding_hll_sketch_estimate("d", NOW, seconds * 1_000_000).alias("d")).collect())
        for name, (rows, t) in answers.items():
            err = {m: 0.0 for m in ("n", "b", "d")}
            got = {r.k: r for r in rows}
            for k, x in exact.items():  # a key the table does not answer answers 0
                for m in err:
                    if x[m]:
                        mine = got[k][m] if k in got and got[k][m] is not None else 0
                        err[m] = max(err[m], abs(mine / x[m] - 1))
            RESULTS[f"stored window | {label} | {name}"] = {
                "window": label, "table": name, "seconds": t, "max_err_count": err["n"], "max_err_sum": err["b"],
                "max_err_distinct": err["d"], "rows": ROWS, "keys": KEYS, "repeats": REPEATS}


def test_summary():
    sizes = [v for k, v in RESULTS.items() if k.startswith("stored bytes")]
    windows = [v for k, v in RESULTS.items() if k.startswith("stored window")]
    if not windows:
        pytest.skip("run the whole file")
    load = os.getloadavg()
    lines = ["", f"{ROWS:,} events, {KEYS} keys, {DAYS} days at one-second resolution, local[2], best of {REPEATS}; "
                 f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
             f"{'table':8s} {'rows':>12s} {'bytes/key':>12s}"]
    lines += [f"{v['table']:8s} {v['rows']:12,d} {v['bytes_per_key']:12,.0f}" for v in sizes]
    lines += ["", f"{'window':10s} {'table':8s} {'seconds':>8s} {'err count':>10s} {'err sum':>8s} {'err distinct':>13s}"]
    lines += [f"{v['window']:10s} {v['table']:8s} {v['seconds']:8.2f} {v['max_err_count']:10.2%} "
              f"{v['max_err_sum']:8.2%} {v['max_err_distinct']:13.2%}" for v in windows]
    print("\n".join(lines))
