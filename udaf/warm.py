"""``python -m udaf.warm``: compile the loops every Spark path calls, once per machine.

The columnar paths run loops that numba compiles on their first call and
caches on disk (:mod:`ehist.compiled`; where: ``docs/install.md``): a fresh
environment's first job of a sketch table of counts, sums, distinct counts
and p99, its ``union_table`` and their estimates took 48 s on 2 cores, the
same job 1 s after.  :func:`warm` runs every registered family's paths on a
few rows in a local Spark session (the Python workers compile and cache
what a job's workers would, with the same argument types), so that no job
pays it: run it on each machine after installing (an image build, a
cluster's init script), with the cache where the jobs will find it (the
installed package's ``__pycache__``, numba's per-user cache, or
``NUMBA_CACHE_DIR``).

What it runs, each family at once: ``sketch_table`` of every family's specs
over two sites, ``union_table`` of it, every scalar function of every
family (``*_sketch_estimate``, ``*_sketch_bounds``, the estimators such as
``*_sketch_frequency`` and ``*_sketch_quantile``, ``*_union``) over the
stored sketches and over their ``collect_list``, every ``*_union_agg``,
``aggregate`` (two-phase, with and without ``now``, with its sketches;
the exact pass) and ``sliding_over``'s Python pass.

From Python, in a session of one's own (it returns what each step took):

>>> from udaf.warm import warm
>>> report = warm(spark)                                   # doctest: +SKIP
>>> sorted(report) == ["families", "seconds", "steps"]     # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from . import functions as U
from .per_row import sliding_over
from .spec import load_families
from .two_phase import aggregate, sketch_table
from .union import union_table

__all__ = ["warm", "main"]

#: Literal arguments of the estimators (``*_sketch_<estimator>``) by name;
#: a column argument is the literal 1 (an item, a value), or for those of
#: :data:`_SKETCH_ARGS` a sketch of the column asked of.
_LITERALS = {"phi": 0.2, "q": 0.5}
_SKETCH_ARGS = {"other"}


def _specs() -> dict:
    """One spec of every registered family's classes, on the warm-up rows
    (``item`` an id, ``v`` a value), keyed by a column name: a ``column``
    that takes strings is ``item``, a numeric one ``v``; a ``value`` is
    ``v``; the window 1,000."""
    specs = {}
    for family, classes in sorted(load_families().items()):
        for cls in classes:
            fields = {f.name for f in dataclasses.fields(cls)}
            kwargs = {"window": 1000}
            if "column" in fields:
                kwargs["column"] = "item" if "string" in cls.accepts.get("column", ()) else "v"
            if "value" in fields and "value" in cls.accepts:
                kwargs["value"] = "v"
            specs[f"{family}__{cls.__name__}".lower()] = cls(**kwargs)
            if {"p", "eps", "delta"} <= fields:  # L_p: the warm-up's keys keep their elements at the defaults
                # (at most rows_for(p, eps, delta) of them); a coarse twin holds buckets, so both forms compile
                specs[f"{family}__{cls.__name__}_buckets".lower()] = cls(**kwargs, eps=0.3, delta=0.3)
    return specs


def _rows(spark):
    """Two sites' rows of three keys: integral times, an id, a value.  Key 0
    is dense at site 0 (~470 rows: past an ECM-sketch's ``width``, counters)
    and sparse at site 1, keys 1 and 2 sparse at both (the rows form), so
    that both forms and their unions are compiled."""
    k = F.when(F.col("id") % 10 < 8, 0).otherwise(1 + F.col("id") % 2)
    site = F.when(k == 0, (F.col("id") % 50 == 0).cast("long")).otherwise(F.col("id") % 2)
    return spark.range(600).select(site.alias("site"), k.alias("k"),
                                   F.col("id").alias("ts"), (F.col("id") * 7 % 23).alias("item"),
                                   (F.col("id") % 11 + 1).alias("v"))


def warm(spark=None) -> dict:
    """Run every family's Spark paths once on a few rows (see the module
    docstring), in ``spark`` or a local session; returns ``{"seconds",
    "steps", "families"}``: the time taken, each step's and the families
    warmed."""
    own = spark is None
    if own:
        spark = _local_session()
    started = time.perf_counter()
    steps = {}

    def run(step, action):
        t = time.perf_counter()
        action()
        steps[step] = steps.get(step, 0.0) + time.perf_counter() - t

    try:
        specs = _specs()
        names = list(specs)
        rows = _rows(spark).cache()
        table = sketch_table(rows, ["site", "k"], "ts", **specs)  # recomputed by each step: cheaper than a cache
        run("sketch_table", table.collect)
        run("union_table", lambda: union_table(table, "k", *names).collect())
        arrays = table.groupBy("k").agg(*[F.collect_list(c).alias(c) for c in names])
        run("scalar functions of sketches", lambda: table.select(*_scalars(specs, False)).collect())
        run("scalar functions of arrays", lambda: arrays.select(*_scalars(specs, True)).collect())
        run("*_union_agg", lambda: table.groupBy("k").agg(
            *[getattr(U, f"{_family(n)}_union_agg")(n).alias(n) for n in names]).collect())
        for options in ({"now": 599, "strategy": "two_phase"}, {"strategy": "two_phase", "sketches": True},
                        {"now": 599, "strategy": "shuffle"}):
            run(f"aggregate {options['strategy']}", lambda: aggregate(rows, "k", "ts", **options, **specs).collect())
        framed = {n: s for n, s in specs.items() if getattr(type(s), "has_frames", True)}
        run("sliding_over", lambda: sliding_over(rows, "k", "ts", strategy="shuffle", **framed).collect())
        rows.unpersist()
    finally:
        if own:
            spark.stop()
    return {"seconds": time.perf_counter() - started, "steps": steps, "families": sorted(load_families())}


def _family(name: str) -> str:
    return name.split("__")[0]


def _scalars(specs, arrays: bool) -> list:
    """Every scalar function of every family, on each sketch column (a
    stored sketch, or with ``arrays`` a ``collect_list`` of them)."""
    out = []
    for name, spec in specs.items():
        family = _family(name)
        col = F.col(name)
        out.append(getattr(U, f"{family}_sketch_estimate")(col, F.lit(599), F.lit(500)).alias(f"{name}_e"))
        if any(c.bounded for c in load_families()[family]):
            out.append(getattr(U, f"{family}_sketch_bounds")(col, F.lit(599), F.lit(500)).alias(f"{name}_b"))
        if arrays:
            out.append(getattr(U, f"{family}_union")(col).alias(f"{name}_u"))
        for estimator, est in type(spec).estimators.items():
            one = F.element_at(col, 1) if arrays else col  # a sketch argument (``other``): one sketch
            args = [F.lit(_LITERALS[a]) if not is_col else (one if a in _SKETCH_ARGS else F.lit(1))
                    for a, is_col in est.args]
            out.append(getattr(U, f"{family}_sketch_{estimator}")(col, *args, F.lit(599), F.lit(500))
                       .alias(f"{name}_{estimator}"))
    return out


def _local_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (SparkSession.builder.master("local[2]").appName("udaf.warm")
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.showConsoleProgress", "false").config("spark.ui.enabled", "false")
            .getOrCreate())


def main(argv=None) -> int:
    """``python -m udaf.warm``: :func:`warm` in a local session, its report printed."""
    report = warm()
    print(f"udaf.warm: {len(report['families'])} families ({', '.join(report['families'])}) in "
          f"{report['seconds']:.1f} s")
    for step, seconds in report["steps"].items():
        print(f"  {step}: {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
