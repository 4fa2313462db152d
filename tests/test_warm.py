"""``python -m udaf.warm``: every family's Spark paths run once, so that a
job after it compiles nothing (numba's cache holds every loop it calls)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pandas")

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parent.parent

#: A job unlike the warm-up's rows: timestamps and windows as intervals,
#: string items, int values, every family's table united and answered, and
#: aggregate as of a datetime.
JOB = """
import datetime as dt, sys, os
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false").getOrCreate())
from udaf import (Count, Sum, Distinct, DistinctFM, Quantile, Frequencies, HeavyHitters, LpNorm, sketch_table,
                  union_table, aggregate, functions as U)
df = spark.range(3000).select((F.col("id") % 40).alias("src"), (F.col("id") % 4).alias("site"),
    F.timestamp_seconds(F.col("id") * 7).alias("ts"), (F.col("id") % 1500).cast("int").alias("bytes"),
    F.concat(F.lit("h"), (F.col("id") % 97).cast("string")).alias("dst"), (F.col("id") % 31).alias("port"))
table = sketch_table(df, ["site", "src"], "ts", n=Count("1 hour"), b=Sum("bytes", "1 hour"),
                     d=Distinct("dst", "1 hour"), fm=DistinctFM("dst", "1 hour"), q=Quantile("bytes", "1 hour"),
                     f=Frequencies("dst", "1 hour"), h=HeavyHitters("port", "1 hour", phi=0.1),
                     l=LpNorm("port", "1 hour", value="bytes"))
now = dt.datetime(1970, 1, 1, 6)
union_table(table, "src").select("src", U.eh_sketch_estimate("n", F.lit(now), "30 minutes"),
    U.sliding_quantile_sketch_quantile("q", 0.5), U.ecm_sketch_frequency("f", F.lit("h3")),
    U.sliding_hh_sketch_heavy_hitters("h", F.lit(0.2)), U.sliding_lp_sketch_estimate("l"),
    U.sliding_fm_sketch_estimate("fm"), U.sliding_hll_sketch_estimate("d"), U.eh_sketch_bounds("b")).collect()
aggregate(df, "src", "ts", now=now, strategy="two_phase", n=Count("1 hour"), h=HeavyHitters("port", "1 hour"),
          q=Quantile("bytes", "1 hour")).collect()
spark.stop()
"""


def test_warm_runs_every_family_in_a_session(spark):
    """``warm(spark)`` runs every registered family's paths in the given
    session and says which and how long each step took."""
    from udaf.spec import load_families
    from udaf.warm import warm

    report = warm(spark)
    assert report["families"] == sorted(load_families())
    assert set(report["steps"]) >= {"sketch_table", "union_table", "scalar functions of sketches",
                                    "scalar functions of arrays", "*_union_agg", "aggregate two_phase",
                                    "aggregate shuffle", "sliding_over"}
    assert 0 < sum(report["steps"].values()) <= report["seconds"]


def _cache_files(where: Path) -> dict:
    return {p.relative_to(where): (p.stat().st_size, p.stat().st_mtime_ns) for p in where.rglob("*") if p.is_file()}


@pytest.mark.slow  # a cold compilation of every loop: about 80 s on 2 cores, then a job
def test_a_job_after_warm_compiles_nothing(tmp_path):
    """In a fresh numba cache, ``python -m udaf.warm`` compiles the loops;
    a different job after it (other types, every family) adds nothing to
    the cache: every loop it calls was compiled by the warm-up."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": str(ROOT)}
    warmed = subprocess.run([sys.executable, "-m", "udaf.warm"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=900)
    assert warmed.returncode == 0, warmed.stderr[-3000:]
    assert "udaf.warm: " in warmed.stdout
    before = _cache_files(tmp_path / "numba")
    assert len(before) > 50  # the loops' index and data files
    job = subprocess.run([sys.executable, "-c", JOB], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    after = _cache_files(tmp_path / "numba")
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:10]
