"""Shared test configuration.

EHIST_HYPOTHESIS_SCALE multiplies every property test's example count
(default 0.5: half of the count each test names, at least 10, so that
the suite stays inside CI's ten minutes on two cores; 1 runs the counts
written, ``EHIST_HYPOTHESIS_SCALE=20 python -m pytest tests`` is the
thorough run to do before touching a guarantee).

Tests marked ``slow`` are skipped unless asked for (``--slow``: the root
conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

SCALE = float(os.environ.get("EHIST_HYPOTHESIS_SCALE", "0.5"))

#: The test session's JVM (its ``Popen``), once the ``spark`` fixture started it.
_JVM: dict = {}

#: What an exit code of Spark's JVM says (SparkExitCode, the JVM's and the
#: kernel's signals; a negative code is the signal that ended it).
_JVM_EXITS = {
    0: "it read end-of-file on its stdin: the Python process's pipe to it was closed",
    50: "an uncaught exception in one of its threads",
    52: "an OutOfMemoryError in a task thread: the heap (spark.driver.memory) is too small",
    134: "it aborted: a fatal error in native code (RocksDB, the JIT): see its hs_err file",
    -6: "it aborted: a fatal error in native code (RocksDB, the JIT): see its hs_err file",
    -9: "SIGKILL: the kernel's OOM killer when the machine ran out of memory, or a person",
    137: "SIGKILL: the kernel's OOM killer when the machine ran out of memory, or a person",
}


def jvm_exit() -> str | None:
    """Why the session's JVM is gone (None while it runs): its exit code,
    what the code says, and the head of its crash report if it wrote one
    (hs_err_pid<pid>.log in its working directory).  A test of a dead JVM
    otherwise fails with py4j's ``ConnectionRefusedError``, which says
    nothing of the cause."""
    proc = _JVM.get("proc")
    if proc is None or proc.poll() is None:
        return None
    code = proc.returncode
    message = f"Spark's JVM exited with code {code} ({_JVM_EXITS.get(code, 'see its output')}; pid {proc.pid})"
    report = os.path.join(os.getcwd(), f"hs_err_pid{proc.pid}.log")
    if os.path.exists(report):
        with open(report, errors="replace") as f:
            head = [line.rstrip() for line in f.readlines()[:40] if line.strip() and line.strip() != "#"]
        message += f"\n{report}:\n" + "\n".join(head)
    return message


def pytest_runtest_setup(item):
    """A test of the shared session fails at once, saying why, when its JVM
    has exited."""
    if "spark" in getattr(item, "fixturenames", ()):
        gone = jvm_exit()
        if gone:
            pytest.fail(gone, pytrace=False)


def examples(n: int) -> int:
    """Number of hypothesis examples for a test written to run ``n``:
    ``n`` times :data:`SCALE`, at least 10 (or ``n`` where that is fewer)."""
    return max(min(n, 10), round(n * SCALE))


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
    cores; with C2, tests/test_native.py took 40% more CPU).  Its Python
    workers fork from ``udaf.daemon``, loaded once (the suite's refused
    inputs end a worker each: 581 s against 663 s with Spark's own daemon;
    ``EHIST_TEST_DAEMON=pyspark.daemon`` runs without it).
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
        .config("spark.python.daemon.module", os.environ.get("EHIST_TEST_DAEMON", "udaf.daemon"))
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _JVM["proc"] = getattr(session.sparkContext._gateway, "proc", None)
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
