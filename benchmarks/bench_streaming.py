"""Streaming state per key: udaf.streaming against Spark's native sliding windows.

Run:  python -m pytest benchmarks/bench_streaming.py -s
      (EHIST_BENCH_STREAM_ROWS, default 1,000,000; EHIST_BENCH_STREAM_KEYS, default 1,000;
      at scale: EHIST_BENCH_STREAM_SCALE_ROWS, default 2,000,000, and
      EHIST_BENCH_STREAM_SCALE_KEYS, default 100,000; 0 rows: not run)

One stream of (key, event time) rows over two hours, as Parquet files read
one per micro-batch (trigger availableNow), a 1-hour window:

* ``sliding_window_state(stream, "k", "ts", count=Count("1 hour", eps=0.05))``
  (RocksDB state store, as transformWithStateInPandas requires);
* ``groupBy("k", window("ts", "1 hour", slide)).count()`` with a
  10-minute watermark, slides of 1 minute and 10 seconds, on the same
  RocksDB store and on Spark's default (HDFS-backed, in-memory) store.

State bytes per key, four ways: the state values themselves (ours: the
stored bytes, read back with Spark's ``statestore`` data source; native:
state rows x the 32 bytes of their fields, key, window start and end,
count), and from the last micro-batch's progress the state store's
``memoryUsedBytes`` and, for RocksDB, ``rocksdbSstFileSize`` (the state as
written at commit), for the default store ``stateOnCurrentVersionSizeBytes``
(its own estimate of the current version's state; ``memoryUsedBytes`` there
counts every version it keeps in memory), each divided by the number of
keys.  Input
rows per second: rows over the summed ``triggerExecution`` time of the
batches after the first (which pays for start-up), all queries timed
after a warm-up run of both kinds on a small stream.

At scale (``test_state_at_scale``): ours and the native 1-minute slide,
both on RocksDB, over a second stream whose keys are drawn uniformly from
100,000 (sparse keys, as network sources are: about 20 events per key in
the two hours), so that the state per key is measured with every key
present, not a few heavy ones.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, spark_fixture

pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")
pytest.importorskip("google.protobuf")

ROWS = int(os.environ.get("EHIST_BENCH_STREAM_ROWS", "1000000"))
KEYS = int(os.environ.get("EHIST_BENCH_STREAM_KEYS", "1000"))
SCALE_ROWS = int(os.environ.get("EHIST_BENCH_STREAM_SCALE_ROWS", "2000000"))
SCALE_KEYS = int(os.environ.get("EHIST_BENCH_STREAM_SCALE_KEYS", "100000"))
FILES = 8
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


spark = spark_fixture("ehist-bench-streaming", **{"spark.driver.memory": "4g"})


def write_source(d, rows, keys=KEYS, uniform=False):
    """FILES Parquet files of 15 minutes each, in time order: Zipf-ish keys
    (``uniform``: keys drawn uniformly)."""
    d.mkdir()
    rng = np.random.default_rng(0)
    base = np.datetime64("2026-11-22T00:00:00", "us")
    span = 2 * 3600 // FILES
    for i in range(FILES):
        n = rows // FILES
        secs = np.sort(rng.uniform(i * span, (i + 1) * span, n))
        pd.DataFrame({
            "k": rng.integers(0, keys, n) if uniform else (rng.zipf(1.2, n) - 1) % keys,
            "ts": base + (secs * 1e6).astype("timedelta64[us]"),
        }).to_parquet(d / f"part-{i:03d}.parquet")
    return str(d)


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory):
    """The timed stream; made after a warm-up run of both kinds of query on
    a small stream, so that neither pays for the JVM's and the Python
    workers' first use (the queries run one after another in one session)."""
    from udaf.streaming import ROCKSDB_PROVIDER

    base = tmp_path_factory.mktemp("stream")
    small = write_source(base / "warm", 80_000)
    for build in (_count, _native("1 minute")):
        run(spark, None, build, small, base, ROCKSDB_PROVIDER)
    return write_source(base / "in", ROWS)


def run(spark, name, build, source, tmp, provider, label="streaming"):
    from pyspark.sql import functions as F

    spark.conf.set(PROVIDER, provider)
    checkpoint = str(tmp / re.sub(r"\W+", "_", name or "warm-up")) + f"-{time.time_ns()}"
    schema = spark.read.parquet(source).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source) \
        .withColumn("ts", F.col("ts").cast("timestamp"))
    q = build(stream).writeStream.outputMode("update").format("noop") \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    t0 = time.perf_counter()
    q.awaitTermination()
    wall = time.perf_counter() - t0
    if name is None:  # a warm-up run
        return
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    state = progress[-1]["stateOperators"][0]
    keys = spark.read.parquet(source).select("k").distinct().count()
    steady = progress[1:]
    rows = sum(p["numInputRows"] for p in steady)
    ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    if name.startswith("ehist"):
        # the stored state values themselves (Spark's state data source)
        v = spark.read.format("statestore").option("stateVarName", "synopses").load(checkpoint)
        fields = [f.name for f in v.schema["value"].dataType.fields if f.dataType.typeName() == "binary"]
        size = sum(F.coalesce(F.octet_length(f"value.{c}"), F.lit(0)) for c in fields)  # synopses and pending
        value_bytes = v.select(F.avg(size + 8)).first()[0]
    else:
        # key (k, window start, end) and value (count): 32 bytes of fields per row
        value_bytes = state["numRowsTotal"] / keys * 32
    RESULTS[f"{label}: {name}"] = {
        "value_bytes_per_key": value_bytes,
        "state_rows": state["numRowsTotal"], "keys": keys,
        "memory_bytes_per_key": state["memoryUsedBytes"] / keys,
        "sst_bytes_per_key": state.get("customMetrics", {}).get("rocksdbSstFileSize", 0) / keys,
        "current_version_bytes_per_key": state.get("customMetrics", {}).get("stateOnCurrentVersionSizeBytes", 0)
        / keys,
        "rows_per_second": rows / (ms / 1000), "wall_seconds": wall,
        "rows": spark.read.parquet(source).count(),
        "memory_bytes_by_batch": [p["stateOperators"][0]["memoryUsedBytes"] for p in progress],
    }
    r = RESULTS[f"{label}: {name}"]
    print(f"\n  {name}: {r['state_rows']:,} state rows, values {value_bytes:,.0f} B/key, "
          f"memory {r['memory_bytes_per_key']:,.0f} B/key, "
          f"sst {r['sst_bytes_per_key']:,.0f} B/key, current version {r['current_version_bytes_per_key']:,.0f} B/key, "
          f"{r['rows_per_second']:,.0f} rows/s, {wall:.1f} s wall",
          flush=True)


CACHE = "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB"


@pytest.mark.parametrize("name", ["ehist eps=0.05 (rocksdb)", "native 1-minute slide (rocksdb)",
                                  "native 10-second slide (rocksdb)", "native 1-minute slide (hdfs, default)",
                                  "native 10-second slide (hdfs, default)",
                                  "native 1-minute slide (rocksdb, 1 MB block cache)"])
def test_state_and_throughput(spark, source, tmp_path, name):
    """One query per parameter.  The last one shows what RocksDB's
    ``memoryUsedBytes`` measures: mostly its block cache (recently read
    blocks, up to ``blockCacheSizeMB`` per store instance), not the state."""
    from udaf.streaming import ROCKSDB_PROVIDER

    if name.startswith("ehist"):
        run(spark, name, _count, source, tmp_path, ROCKSDB_PROVIDER)
        return
    provider = HDFS if "hdfs" in name else ROCKSDB_PROVIDER
    if "block cache" in name:
        spark.conf.set(CACHE, "1")
    try:
        run(spark, name, _native("1 minute" if "1-minute" in name else "10 seconds"), source, tmp_path, provider)
    finally:
        spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)
        spark.conf.unset(CACHE)


def _count(s):
    from udaf import Count
    from udaf.streaming import sliding_window_state

    return sliding_window_state(s, "k", "ts", count=Count("1 hour", eps=0.05))


def _native(slide):
    from pyspark.sql import functions as F

    return lambda s: s.withWatermark("ts", "10 minutes").groupBy("k", F.window("ts", "1 hour", slide)).count()


@pytest.fixture(scope="module")
def scale_source(source, tmp_path_factory):
    """The stream at scale (after ``source``'s warm-up)."""
    if SCALE_ROWS <= 0:
        pytest.skip("EHIST_BENCH_STREAM_SCALE_ROWS=0")
    return write_source(tmp_path_factory.mktemp("scale") / "in", SCALE_ROWS, SCALE_KEYS, uniform=True)


@pytest.mark.parametrize("name", ["ehist eps=0.05 (rocksdb)", "native 1-minute slide (rocksdb)"])
def test_state_at_scale(spark, scale_source, tmp_path, name):
    """The issue's question at network scale: 100k sparse keys."""
    from udaf.streaming import ROCKSDB_PROVIDER

    run(spark, name, _count if name.startswith("ehist") else _native("1 minute"), scale_source, tmp_path,
        ROCKSDB_PROVIDER, label="streaming at scale")


def test_summary():
    names = [k for k in RESULTS if k.startswith("streaming: ")]
    if len(names) < 5:
        pytest.skip("run the whole file")
    ours = RESULTS["streaming: ehist eps=0.05 (rocksdb)"]
    lines = ["", f"{ROWS:,} rows, {ours['keys']:,} keys, 1-hour window, {FILES} micro-batches, local[2]",
             f"{'query':40s} {'state rows':>11s} {'values B/key':>13s} {'memory B/key':>13s} {'SST B/key':>10s} "
             f"{'rows/s':>9s}"]
    for k in names:
        r = RESULTS[k]
        lines.append(f"{k[11:]:40s} {r['state_rows']:11,d} {r['value_bytes_per_key']:13,.0f} "
                     f"{r['memory_bytes_per_key']:13,.0f} {r['sst_bytes_per_key']:10,.0f} {r['rows_per_second']:9,.0f}")
    one = RESULTS["streaming: native 1-minute slide (rocksdb)"]
    lines.append(f"state per key, native 1-minute / ours: memory {one['memory_bytes_per_key'] / ours['memory_bytes_per_key']:.0f}x, "
                 f"SST {one['sst_bytes_per_key'] / max(ours['sst_bytes_per_key'], 1):.0f}x; "
                 f"throughput ours / native 1-minute: {ours['rows_per_second'] / one['rows_per_second']:.2f}")
    print("\n".join(lines))
