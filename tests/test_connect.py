"""The Spark face from a Spark Connect client: column functions, every
aggregate strategy, sketch_table, sliding_over, SQL registration, the
messages of mistakes and the streaming state, run through a Connect server
(started in the test session's JVM; the client in a subprocess:
tests/connect_job.py) and on the classic session; the results must be
equal, sketch bytes included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pandas")
pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect] (pip install 'ehist[connect]')")
pytest.importorskip("google.protobuf")

from . import connect_job  # noqa: E402

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parent.parent


def connect_server(spark) -> str:
    """A Spark Connect server inside the test session's own JVM, on a free
    loopback port (the server a ``spark.plugins=...SparkConnectPlugin``
    session starts; started here on the running context, it saves the
    second JVM a ``remote("local[2]")`` client would start: about 15 s).
    Returns its ``sc://`` URL; it stops with the session's JVM."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = spark._jsc.sc()
    conf = context.conf()  # the live driver conf, where the service reads its binding from
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", str(port))
    spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(context)
    return f"sc://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory, request):
    """(through Spark Connect, on the classic session)."""
    work = tmp_path_factory.mktemp("connect")
    out = work / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_REMOTE", "SPARK_CONNECT"))}
    full = request.config.getoption("--slow")  # the default run keeps one path through every entry point
    url = connect_server(spark)
    # the client runs while the classic session runs the same job: the
    # Connect server's session is its own (its settings apart), and much
    # of either run is waiting (RPCs, Python workers), not the two cores
    # its output goes to a file: a pipe nobody reads until the classic run
    # ends would stop the client once Spark's log filled the pipe's buffer
    log = work / "client.log"
    with open(log, "w") as sink:
        client = subprocess.Popen([sys.executable, "-m", "tests.connect_job", str(out), f"--url={url}",
                                   *(["--full"] if full else [])], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                  env=dict(env, SPARK_LOCAL_IP="127.0.0.1"))
    try:
        # the classic run with the client's shuffle partitions; the settings
        # the job changes are put back after it
        keys = ("spark.sql.streaming.stateStore.providerClass", "spark.sql.shuffle.partitions")
        before = {key: spark.conf.get(key, None) for key in keys}
        spark.conf.set("spark.sql.shuffle.partitions", str(connect_job.SHUFFLE_PARTITIONS))
        try:
            local = json.loads(json.dumps(connect_job.run(spark, str(work / "classic"), full)))
        finally:
            for key, value in before.items():
                spark.conf.unset(key) if value is None else spark.conf.set(key, value)
        client.wait(timeout=600)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, log.read_text()[-4000:]
    remote = json.loads(out.read_text())
    return remote, local


def test_the_job_ran_through_a_connect_client(results):
    remote, _ = results
    assert remote["remote"] is True and remote["client"].startswith("pyspark.sql.connect")


PARTS = ["sketches", "estimates", "unions", "one_step", "frequencies", "frequencies_aggregate", "frequencies_lists",
         "frequencies_aggregate_two_phase", "aggregate_auto", "aggregate_two_phase",
         "aggregate_shuffle", "aggregate_auto_per_key", "sketch_table", "sketch_table_union", "union_table", "sliding_over",
         "registered", "sql", "streaming"]


@pytest.mark.parametrize("part", [pytest.param(p, marks=pytest.mark.slow) if p in connect_job.FULL else p
                                  for p in PARTS])
def test_connect_equals_classic(results, part):
    remote, local = results
    assert local[part], f"{part}: no rows"
    assert remote[part] == local[part]


def test_mistakes_give_the_same_message_through_connect(results):
    remote, local = results
    assert remote["errors"] == local["errors"]
    driver, in_executor, in_function = remote["errors"]
    assert driver == ("TypeError: column dst: Sum needs an integral column (bigint, int, smallint, tinyint), "
                      "got string")
    assert "column bytes holds -5 (key 2): Sum needs non-negative integers" in in_executor
    assert "column value (argument 2 of sliding_sum) holds -5" in in_function or "column bytes holds -5" in in_function
