"""A real Spark standalone cluster on loopback: a master and two workers
launched from the installed pyspark, the same aggregations as on the local
session, identical results (hashing and seeds agree across executors)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pandas")

from . import cluster_job  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # about 110 s: python -m pytest --slow
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path: Path, text: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise RuntimeError(f"{path.name}: no {text!r} (exit {proc.poll()}):\n{path.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """spark://127.0.0.1:<port> with two registered workers; torn down after."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    logs = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(logs / "work"), SPARK_NO_DAEMONIZE="1")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = []

    def launch(name, *args):
        log = logs / f"{name}.log"
        proc = subprocess.Popen([str(spark_class), *args], env=env, stdout=log.open("w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc, log

    try:
        master, master_log = launch("master", "org.apache.spark.deploy.master.Master",
                                    "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()))
        wait_for(master_log, "I have been elected leader", master)
        for i in range(2):
            w, log = launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", master_url,
                            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                            "--webui-port", str(free_port()))
            wait_for(log, "Successfully registered with master", w)
        yield master_url, logs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_cluster_results_equal_local(cluster, spark):
    master_url, logs = cluster
    out = logs / "result.json"
    done = subprocess.run([sys.executable, "-m", "tests.cluster_job", master_url, str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert done.returncode == 0, done.stderr[-4000:]
    remote = json.loads(out.read_text())
    local = json.loads(json.dumps(cluster_job.run(spark)))
    assert remote["executors"] == 2
    assert len(local["sketches"]) == 7
    assert remote["sketches"] == local["sketches"]
    assert remote["two_phase"] == local["two_phase"]
