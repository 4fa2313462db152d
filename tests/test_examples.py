"""The examples run as a new user runs them (a fresh process each; the
network monitor's job also on the test session, as the default run's
check), on small inputs; their own asserts check the guarantees on what
they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *args: str, timeout: int = 600, stderr: list | None = None) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"))
    assert done.returncode == 0, done.stderr[-4000:]
    if stderr is not None:
        stderr.append(done.stderr)
    return done.stdout


def test_core_sliding_counts():
    out = run("core_sliding_counts.py")
    assert "commits" in out


def readme_output() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("python examples/network_monitor.py\n```\n\n```\n", 1)[1].split("\n```", 1)[0]


def check_network_monitor(out: str, png: Path) -> None:
    """The README's sample output, line for line (the run's seconds aside)."""
    def steady(text):
        return [re.sub(r"[\d.]+ s\)$", "N s)", line) for line in text.splitlines()
                if not line.startswith("plot written")]

    assert steady(out) == steady(readme_output())
    # the generator's fixed address map puts the scanner at 10.1.225.99: it leads
    assert "10.1.225.99      995 estimated" in out
    assert png.stat().st_size > 10_000


@pytest.mark.spark
def test_network_monitor_prints_what_the_readme_shows(spark, tmp_path, monkeypatch, capsys):
    """The README's main command's job (``main()`` with its defaults) on
    the test session, configured as the example configures its own: its
    output is the README's sample output; the job asserts its bounds on
    every source itself.  (A fresh process, JVM included, costs 30-50 s
    more: the slow test below runs the command as printed.)"""
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import network_monitor
    finally:
        sys.path.remove(str(ROOT / "examples"))
    own = {"spark.sql.shuffle.partitions": "8", "spark.sql.execution.arrow.pyspark.enabled": "true"}
    before = {key: spark.conf.get(key, None) for key in own}
    for key, value in own.items():
        spark.conf.set(key, value)
    monkeypatch.setattr(network_monitor, "session", lambda: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)  # the shared session outlives the job
    png = tmp_path / "plot.png"
    try:
        network_monitor.main(["--out", str(png)])
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    check_network_monitor(capsys.readouterr().out, png)


@pytest.mark.spark
@pytest.mark.slow  # a fresh JVM and the whole job: 30-50 s
def test_network_monitor_command_as_printed(tmp_path):
    """The README's main command, run as printed, in a fresh process."""
    pytest.importorskip("pyspark")
    pytest.importorskip("matplotlib")
    png = tmp_path / "plot.png"
    check_network_monitor(run("network_monitor.py", "--out", str(png)), png)


@pytest.mark.spark
@pytest.mark.slow  # 24 s of wall clock by design, plus a JVM: python -m pytest --slow (streaming: tests/test_streaming.py)
def test_live_counts():
    pytest.importorskip("pyspark")
    pytest.importorskip("google.protobuf")
    err = []
    # 8 seconds: events are folded into the histograms once the watermark
    # (2 seconds behind the previous batch) passes them, so from the third
    # micro-batch on the window starts among folded events and bounds open
    out = run("live_counts.py", "--seconds", "24", "--rate", "500", "--window", "8 seconds", stderr=err)
    # stopped between micro-batches: an interrupted foreachBatch call makes
    # PySpark 4.3's stream thread die with a StackOverflowError on stop
    assert "Exception in thread" not in err[0], err[0][-4000:]
    batches = [x for x in out.splitlines() if x.startswith("batch ")]
    assert len(batches) >= 3, out
    line = re.compile(r"\s*sensor-\d+\s+\S+\s+([\d,]+)\s+\[\s*([\d,]+),\s*([\d,]+)\]\s+[\d,]+\s+(\d+)$")
    rows = [line.match(x) for x in out.splitlines() if x.strip().startswith("sensor-")]
    assert rows and all(rows), out
    widths = []
    for m in rows:
        est, lower, upper, late = (int(g.replace(",", "")) for g in m.groups())
        assert lower <= est <= upper and late == 0
        widths.append(upper - lower)
    assert max(widths) > 0, out  # the window slid: answers are estimates, not whole-stream counts


def test_loss_alarms():
    out = run("loss_alarms.py")
    assert "0 extra, 0 missed" in out  # the same alarms as the exact computation


def test_delay_alarms(tmp_path):
    """No Spark by default (3 s): the p99 bounds and the alarms are asserted
    by the example itself on every check."""
    pytest.importorskip("matplotlib")
    png = tmp_path / "delay.png"
    out = run("delay_alarms.py", "--out", str(png))
    assert "exact alarms: 4 (4 identical)" in out and "1920 of 1920" in out
    assert png.stat().st_size > 10_000


@pytest.mark.spark
@pytest.mark.slow  # ~30 s: a JVM for the last hour through aggregate (native and sketches)
def test_delay_alarms_through_spark(tmp_path):
    pytest.importorskip("pyspark")
    pytest.importorskip("matplotlib")
    out = run("delay_alarms.py", "--out", str(tmp_path / "delay.png"), "--spark")  # asserts sketch == stream's
    assert "native exact plan | sliding sketches" in out and "M3-D4" in out


@pytest.mark.spark
@pytest.mark.slow  # ~30 s (a JVM, two sketch tables): the heavy-hitter guarantees are tested in test_ecm_spark.py
def test_top_talkers(tmp_path):
    pytest.importorskip("pyspark")
    pytest.importorskip("matplotlib")
    png = tmp_path / "top.png"
    out = run("top_talkers.py", "--rows", "40000", "--out", str(png))  # asserts recall and bounds itself
    # the generator's scanner (network_monitor's address map) shows on every link's list, then leaves it
    assert "The scan: 10.1.225.99 is a top talker by flows on 4 of 4 links at 05:35" in out
    assert "at 06:00 it is gone" in out
    assert png.stat().st_size > 10_000


@pytest.mark.spark
@pytest.mark.slow  # ~30 s (a JVM, every plan of the phantom); the plans are tested in test_reduction.py
def test_rollups():
    pytest.importorskip("pyspark")
    out = run("rollups.py", "--rows", "12000")  # asserts the eps guarantee on every group itself
    assert "per (source, destination)" in out and "total" in out
