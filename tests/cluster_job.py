"""The aggregations run both on the local test session and on a standalone
cluster (tests/test_cluster.py); ``python -m tests.cluster_job MASTER OUT``
runs them against MASTER and writes the rows to OUT as JSON.

The data comes from ``spark.range`` with a fixed number of partitions and
columns computed from the id, so both runs see the same rows in the same
partitions: every sketch byte must then agree, which holds only if hashing
and seeds agree across executor processes.
"""

from __future__ import annotations

import json
import os
import sys
import time

ROWS = 40_000
PARTITIONS = 4


def data(spark):
    from pyspark.sql import functions as F

    return spark.range(0, ROWS, 1, PARTITIONS).select(
        (F.col("id") % 7).alias("src"),
        F.col("id").alias("ts"),  # unique per key: the batch order is the time order
        (F.abs(F.xxhash64("id")) % 1500).alias("bytes"),
        F.concat(F.lit("10.0."), (F.abs(F.xxhash64(F.col("id") + 1)) % 900).cast("string")).alias("dst"),
    )


def run(spark) -> dict:
    """Sketches and estimates per source, as JSON-ready rows sorted by key."""
    from udaf import Count, Distinct, LpNorm, Sum, aggregate
    from udaf import functions as U

    df = data(spark)
    window = ROWS // 2
    one_step = df.groupBy("src").agg(
        U.eh_sketch_agg("ts", window=window, eps=0.02, value="bytes").alias("eh"),
        U.sliding_hll_sketch_agg("ts", "dst", window=window, precision=10, seed=3).alias("hll"),
        U.sliding_fm_sketch_agg("ts", "dst", window=window, num_bitmaps=32, seed=5).alias("fm"),
        U.sliding_lp_sketch_agg("ts", "dst", window=window, p=1.0, eps=0.2, delta=0.1, seed=9,
                                value="bytes").alias("lp"),
    ).orderBy("src").collect()
    two_phase = aggregate(
        df, "src", "ts", strategy="two_phase",
        packets=Count(window=window, eps=0.02), bytes_=Sum("bytes", window=window, eps=0.02),
        dsts=Distinct("dst", window=window, precision=10, seed=3),
        l2=LpNorm("dst", window=window, value="bytes", p=2.0, eps=0.2, delta=0.1, seed=9),
    ).orderBy("src").collect()
    return {
        "sketches": [[r.src] + [bytes(r[c]).hex() for c in ("eh", "hll", "fm", "lp")] for r in one_step],
        "two_phase": [[r.src, r.packets, r.bytes_, r.dsts, r.l2] for r in two_phase],
    }


def main(master: str, out: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("ehist-cluster-test")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        # executors register asynchronously: wait for both before the jobs
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
        deadline = time.monotonic() + 120
        while status().size() - 1 < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        executors = status().size() - 1
        result = run(spark)
        result["executors"] = executors
        with open(out, "w") as f:
            json.dump(result, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
