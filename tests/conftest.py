"""Shared test configuration.

EHIST_HYPOTHESIS_SCALE multiplies every property test's example count
(default 1): ``EHIST_HYPOTHESIS_SCALE=20 python -m pytest tests`` is the
thorough run to do before touching a guarantee.

Tests marked ``slow`` are skipped unless asked for (``--slow``: the root
conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

SCALE = max(1, int(os.environ.get("EHIST_HYPOTHESIS_SCALE", "1")))


def examples(n: int) -> int:
    """Number of hypothesis examples for a test that runs ``n`` by default."""
    return n * SCALE


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (about 5 s to start).

    Spark's Python workers must run this interpreter (or they will not find
    pandas and the project), so PYSPARK_PYTHON is set before the JVM starts.
    Skips when pyspark is not installed: the core packages test without it.

    Settings for a short-lived JVM on small data, none of which changes an
    answer: two shuffle partitions and two default slices, one per core of
    a CI machine (on small data every task is overhead; two still split
    keys across partitions, so every merge path runs); the JIT's first tier
    only and the serial collector, which spend less CPU than C2 and G1 do
    in a run this short (the README's ``-n 2`` runs two such JVMs on two
    cores; with C2, tests/test_native.py took 40% more CPU).
    """
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("ehist-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@contextlib.contextmanager
def ansi_mode(spark, enabled: bool):
    """``spark.sql.ansi.enabled`` set for the block, then back to the
    default (Spark 4: on): without it Spark's integer arithmetic and
    ``sum`` wrap around silently, the case the native plans must refuse."""
    spark.conf.set("spark.sql.ansi.enabled", "true" if enabled else "false")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def through_state(spark, schema, frames: list, tmp_path, state) -> list:
    """Run ``state(stream)`` (a :func:`udaf.streaming.sliding_window_state`
    query) on RocksDB over ``frames`` (pandas), one file and one
    micro-batch each, in order; returns ``[(batch id, row as a dict)]``."""
    from udaf.streaming import ROCKSDB_PROVIDER

    (tmp_path / "in").mkdir()
    for i, rows in enumerate(frames):
        rows.to_parquet(tmp_path / "in" / f"{i}.parquet")
    provider = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(provider, None)
    spark.conf.set(provider, ROCKSDB_PROVIDER)
    got = []
    try:
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
        q = state(stream).writeStream.outputMode("update") \
            .foreachBatch(lambda df, batch: got.extend((batch, r.asDict()) for r in df.collect())) \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
        q.awaitTermination(300)
        q.stop()
        assert q.exception() is None
    finally:
        spark.conf.unset(provider) if before is None else spark.conf.set(provider, before)
    return got
