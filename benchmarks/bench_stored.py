"""Stored data: rollup tables against a table of sliding-window sketches.

Run:  python -m pytest benchmarks/bench_stored.py -s
      (EHIST_BENCH_STORED: the data sets as name:events:keys, default
      "dense:20000000:10,sparse:5000000:200"; EHIST_BENCH_REPEATS, default 3
      rounds or more that answer each window every way in turn, the best kept)

Two data sets: *dense* keys (10 keys, ~0.8 events per second each, a
busy link or monitor) and *sparse* ones (200 keys, one event per ~100 s):
a per-second rollup shrinks the rows only where a key has several events
per second, while a sketch's size grows with the log of its events, so
the dense set is where rollups cost most and the sparse one where they
cost least.

When the rows are gone (a retention limit, a table per day, many sources
rolled up later), what a data engineer keeps is a rollup table: per key
and minute (or second), ``count(*)``, ``sum(bytes)`` and Spark's own
``hll_sketch_agg(dst)``, written to Parquet; a window's answer is
``where(slot > now - w).groupBy(k).agg(sum, sum, hll_union_agg)``.  The
ehist answer is one row per key (``udaf.sketch_table``) with an
exponential histogram of counts, one of sums and a sliding HyperLogLog,
each for windows up to 30 days at one-second resolution, queried with
``eh_sketch_estimate(sketch, now, w)`` / ``sliding_hll_sketch_estimate``.

Also the two answers without rollups: rescanning the raw rows
(``where(ts in window).groupBy(k).agg(count, sum,
approx_count_distinct)``, what the rollups exist to avoid), and the
Gigascope use: one sketch table per site (4 sites, each a quarter of the
events) united per key at query time, with no row read again: each key's
sketches collected (``collect_list``) and the array answered as their
union (``eh_sketch_estimate`` of an array: the sums of the parts'
bounds; ``sliding_hll_sketch_estimate``: each register's largest live
rank), and, as a secondary row, the merged sketches built first
(``eh_union_agg``, ``sliding_hll_union_agg``) and then answered.

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
from pathlib import Path

import pytest

from benchmarks.conftest import RESULTS, alternating, note_load, rounds_text, spark_fixture

pytest.importorskip("pyspark")

DATA_SETS = [(name, int(rows), int(keys)) for name, rows, keys in
             (item.split(":") for item in os.environ.get(
                 "EHIST_BENCH_STORED", "dense:20000000:10,sparse:5000000:200").split(","))]
REPEATS = int(os.environ.get("EHIST_BENCH_REPEATS", "3"))
SITES = 4
DAYS = 30
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
END = START + dt.timedelta(days=DAYS)
NOW = END + dt.timedelta(seconds=43)  # after the last event (sketches answer at or after it), mid-minute
WINDOWS = {"1 minute": 60, "1 hour": 3600, "1 day": 86_400, "30 days": DAYS * 86_400}

spark = spark_fixture("ehist-bench-stored", **{"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "6g"})


def disk_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*.parquet"))


@pytest.fixture(scope="module", params=DATA_SETS, ids=[d[0] for d in DATA_SETS])
def tables(spark, request):
    """The events (the raw rows), a per-minute and a per-second rollup
    table, the ehist sketch table and one sketch table per site, all in
    Parquet."""
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, Sum, sketch_table

    label, rows, keys = request.param
    where = tempfile.mkdtemp(prefix="ehist-stored-")
    span = DAYS * 86_400
    events = spark.range(rows, numPartitions=4).select(
        (F.col("id") % SITES).alias("site"),
        (F.abs(F.xxhash64("id")) % keys).alias("k"),
        F.timestamp_seconds(F.lit(int(START.timestamp()))
                            + (F.abs(F.xxhash64(F.col("id") + 7)) % span)).alias("ts"),
        (F.abs(F.xxhash64(F.col("id") + 3)) % 1500).alias("bytes"),
        (F.abs(F.xxhash64(F.col("id") + 5)) % 20_000).alias("dst"),
    )
    paths = {name: os.path.join(where, name) for name in ("events", "minute", "second", "ehist", "sites")}
    events.write.parquet(paths["events"])
    events = spark.read.parquet(paths["events"])
    for name, unit in (("minute", "minute"), ("second", "second")):
        events.groupBy("k", F.date_trunc(unit, "ts").alias("slot")).agg(
            F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.hll_sketch_agg("dst").alias("d"),
        ).write.parquet(paths[name])
    specs = dict(n=Count(f"{DAYS} days", 0.01), b=Sum("bytes", f"{DAYS} days", 0.01),
                 d=Distinct("dst", f"{DAYS} days", precision=12))
    sketch_table(events, "k", "ts", **specs).write.parquet(paths["ehist"])
    # each site writes its own table (here one table, a row per site and key)
    sketch_table(events, ["site", "k"], "ts", **specs).write.parquet(paths["sites"])
    yield dict(paths, label=label, rows=rows, keys=keys)
    shutil.rmtree(where, ignore_errors=True)


def test_storage_and_windows(spark, tables):
    from pyspark.sql import functions as F

    from udaf import functions as U

    label, rows, keys = tables["label"], tables["rows"], tables["keys"]
    events = spark.read.parquet(tables["events"])
    for name in ("events", "minute", "second", "ehist", "sites"):
        RESULTS[f"stored bytes per key | {label} | {name}"] = {
            "data": label, "table": name, "bytes_per_key": disk_bytes(tables[name]) / keys,
            "rows": spark.read.parquet(tables[name]).count(), "events": rows, "keys": keys}
    now = F.lit(NOW)
    for window, seconds in WINDOWS.items():
        start = NOW - dt.timedelta(seconds=seconds)
        w = f"{seconds} seconds"  # an interval: the sketches hold timestamps
        exact = {r.k: r for r in events.where((F.col("ts") > start) & (F.col("ts") <= NOW)).groupBy("k").agg(
            F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.countDistinct("dst").alias("d")).collect()}
        minute, second = (spark.read.parquet(tables[name]) for name in ("minute", "second"))
        stored = spark.read.parquet(tables["ehist"])
        sites = spark.read.parquet(tables["sites"])

        def rollup(table):  # whole slots: the per-minute table cannot cut inside a minute
            return table.where((F.col("slot") > F.lit(start)) & (F.col("slot") <= now)).groupBy("k").agg(
                F.sum("n").alias("n"), F.sum("b").alias("b"), F.hll_sketch_estimate(F.hll_union_agg("d")).alias("d"))

        seconds, rounds, found = alternating({
            # the raw rows again: what rollups and sketches exist to avoid
            "events": lambda: events.where((F.col("ts") > start) & (F.col("ts") <= now)).groupBy("k").agg(
                F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.approx_count_distinct("dst").alias("d"))
                .collect(),
            "minute": lambda: rollup(minute).collect(),
            "second": lambda: rollup(second).collect(),
            "ehist": lambda: stored.select(
                "k", U.eh_sketch_estimate("n", NOW, w).alias("n"), U.eh_sketch_estimate("b", NOW, w).alias("b"),
                U.sliding_hll_sketch_estimate("d", NOW, w).alias("d")).collect(),
            # each key's site sketches collected, the union answered without building it
            "sites": lambda: sites.groupBy("k").agg(*[F.collect_list(c).alias(c) for c in ("n", "b", "d")])
                .select("k", U.eh_sketch_estimate("n", NOW, w).alias("n"), U.eh_sketch_estimate("b", NOW, w).alias("b"),
                        U.sliding_hll_sketch_estimate("d", NOW, w).alias("d")).collect(),
            # the merged sketches built first (what a rollup table would store), then answered
            "sites, union_agg": lambda: sites.groupBy("k").agg(
                U.eh_union_agg("n").alias("n"), U.eh_union_agg("b").alias("b"), U.sliding_hll_union_agg("d").alias("d"))
                .select("k", U.eh_sketch_estimate("n", NOW, w).alias("n"), U.eh_sketch_estimate("b", NOW, w).alias("b"),
                        U.sliding_hll_sketch_estimate("d", NOW, w).alias("d")).collect(),
        }, REPEATS)
        answers = {name: (found[name], seconds[name]) for name in found}
        for name, (got_rows, t) in answers.items():
            err = {m: 0.0 for m in ("n", "b", "d")}
            got = {r.k: r for r in got_rows}
            for k, x in exact.items():  # a key the table does not answer answers 0
                for m in err:
                    if x[m]:
                        mine = got[k][m] if k in got and got[k][m] is not None else 0
                        err[m] = max(err[m], abs(mine / x[m] - 1))
            RESULTS[f"stored window | {label} | {window} | {name}"] = {
                "data": label, "window": window, "table": name, "seconds": t, "max_err_count": err["n"],
                "max_err_sum": err["b"], "max_err_distinct": err["d"], "rows": rows, "keys": keys, "repeats": rounds[name]}


def test_summary():
    sizes = [v for k, v in RESULTS.items() if k.startswith("stored bytes")]
    windows = [v for k, v in RESULTS.items() if k.startswith("stored window")]
    if not windows:
        pytest.skip("run the whole file")
    load = note_load("bench_stored")
    lines = ["", f"{DAYS} days at one-second resolution, local[2], best of {rounds_text(windows)} rounds; "
                 f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
             f"{'data':7s} {'table':8s} {'rows':>12s} {'bytes/key':>12s}"]
    lines += [f"{v['data']:7s} {v['table']:8s} {v['rows']:12,d} {v['bytes_per_key']:12,.0f}" for v in sizes]
    lines += ["", f"{'data':7s} {'window':10s} {'table':8s} {'seconds':>8s} {'err count':>10s} {'err sum':>8s} "
                  f"{'err distinct':>13s}"]
    lines += [f"{v['data']:7s} {v['window']:10s} {v['table']:8s} {v['seconds']:8.2f} {v['max_err_count']:10.2%} "
              f"{v['max_err_sum']:8.2%} {v['max_err_distinct']:13.2%}" for v in windows]
    print("\n".join(lines))
