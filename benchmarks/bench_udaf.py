"""Two-phase aggregation against the plain grouped-aggregate pandas UDF path.

Run:  python -m pytest benchmarks/bench_udaf.py -s
      (EHIST_BENCH_ROWS sets the row count; default 10,000,000)

The same windowed count and sum per key, on a cached DataFrame of
(k, ts, bytes) rows, with 1k and 100k keys: the plain path
(groupBy(k).agg(sliding_count, sliding_sum), every row shuffled to Python)
against udaf.aggregate with strategy="two_phase" (partial sketches per
partition, only sketches shuffled) and with the default "auto" (which picks
one of the two from rows per key).  Shuffle bytes are read from Spark's status REST API (loopback),
wall time from one timed run each (they take tens of seconds).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from benchmarks.conftest import RESULTS, spark_fixture

pytest.importorskip("pyspark")

ROWS = int(os.environ.get("EHIST_BENCH_ROWS", "10000000"))
WINDOW = ROWS // 4


spark = spark_fixture("ehist-bench-udaf", **{"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "true",
                                             "spark.driver.memory": "6g"})  # the UI serves shuffle bytes


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
    ).repartition(4).cache()
    df.count()
    return df


def run(spark, label, action):
    before = shuffle_bytes(spark)
    t = time.perf_counter()
    rows = action()
    seconds = time.perf_counter() - t
    time.sleep(1)  # let the status store catch up
    RESULTS[label] = {"seconds": seconds, "shuffle_bytes": shuffle_bytes(spark) - before, "rows": ROWS}
    return rows


@pytest.mark.parametrize("keys", [1_000, 100_000])
def test_plain_against_two_phase(spark, keys):
    from udaf import Count, Sum, aggregate
    from udaf import functions as U

    df = data(spark, keys)
    plain = run(spark, f"plain grouped-agg, {keys:,} keys", lambda: df.groupBy("k").agg(
        U.sliding_count("ts", window=WINDOW, eps=0.01).alias("c"),
        U.sliding_sum("ts", "bytes", window=WINDOW, eps=0.01).alias("s"),
    ).collect())
    two = run(spark, f"two_phase, {keys:,} keys", lambda: aggregate(
        df, "k", "ts", strategy="two_phase",
        c=Count(window=WINDOW, eps=0.01), s=Sum("bytes", window=WINDOW, eps=0.01),
    ).collect())
    run(spark, f"auto, {keys:,} keys", lambda: aggregate(
        df, "k", "ts", c=Count(window=WINDOW, eps=0.01), s=Sum("bytes", window=WINDOW, eps=0.01)
    ).collect())
    df.unpersist()
    a = {r.k: (r.c, r.s) for r in plain}
    b = {r.k: (r.c, r.s) for r in two}
    assert a.keys() == b.keys()
    for k in list(a)[:200]:  # both within eps of the exact answer, so of each other
        assert abs(a[k][0] - b[k][0]) <= 0.021 * max(a[k][0], b[k][0]) + 1


def test_summary():
    labels = [k for k in RESULTS if "shuffle_bytes" in RESULTS[k]]
    if not labels:
        pytest.skip("run the whole file")
    lines = ["", f"{ROWS:,} rows, windowed count + sum per key, local[2]",
             f"{'path':32s} {'seconds':>8s} {'shuffle bytes':>15s}"]
    for k in labels:
        r = RESULTS[k]
        lines.append(f"{k:32s} {r['seconds']:8.1f} {r['shuffle_bytes']:15,d}")
    print("\n".join(lines))
