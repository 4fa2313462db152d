"""Sketch tables at many keys: unite four sites and answer, against Spark's rollups.

Run:  python -m pytest benchmarks/bench_scale.py -s
      (EHIST_BENCH_SCALE: data sets as name:keys:events per key and
      site[:zipf exponent of the destinations, default uniform[:share of
      the sources seen at every site, default 1: the others are seen at
      one site each]], default "sparse:100000:25";
      EHIST_BENCH_SCALE_ROUNDS, default 5 alternating rounds after one
      warm-up round; EHIST_BENCH_SCALE_SUMS=0 leaves out
      the sums; EHIST_BENCH_SCALE_WINDOWS,
      default "1 hour,1 day": the windows asked; EHIST_BENCH_SCALE_KINDS,
      default "count + distinct,p99,sums": the answers asked, "heavy
      hitters" too (of the data sets with a Zipf exponent only), e.g.
      EHIST_BENCH_SCALE="dense:2000:5000:1.3"; EHIST_BENCH_SCALE_TIERS=0
      leaves out the hourly sketch tables)

The setting of issue 40: network sources seen at 4 sites, tens of events
per source and site in a day.  What a data engineer keeps per site is a
per-minute rollup (``count(*)``, ``sum(bytes)``, Spark's own
``hll_sketch_agg(dst)`` per source and minute); what ehist keeps is one row
per source and site (``sketch_table``: Count and Sum at eps 0.01, Distinct
at precision 12, windows up to a day).  Measured side by side, medians of
alternating rounds (each round in the reverse order of the last), each
ehist path as a ratio to the native one in the same round:

* *unite 4 sites, then answer the last hour*: native ``where(slot in
  window).groupBy(src).agg(sum(n), hll_sketch_estimate(hll_union_agg(h)))``;
  ehist ``union_table(sites, "src")`` then ``eh_sketch_estimate`` /
  ``sliding_hll_sketch_estimate`` (the united table is a sketch table again,
  to store or unite further), and the same with ``groupBy(src).agg(
  eh_union_agg(n), sliding_hll_union_agg(d))`` (the column functions);
  the answers take their time, window and other parameters as Python
  values, as the docs write them, so Spark chains each answer's UDF after
  the union's: one Python pass unites and answers;
* *answer the union without building it*: ``*_sketch_estimate`` of each
  source's ``collect_list`` of sketches;
* *answer one site's table*: the estimates per row, against the rollup's
  query on that site.

Each question is asked of the last hour and of the last day (the whole
trace).  The rollup is a table of time slots: a short window reads few of
its rows (Parquet skips the older slots' row groups) and a long one reads
them all; a sketch table has one row per source and site whatever the
window, so its cost is the same for both.

Four kinds of answers: counts and distinct counts; the p99 of the flows'
bytes (``Quantile`` against Spark's own ``kll_sketch_agg_bigint`` per
minute, united with ``kll_merge_agg_bigint``); sums; the heavy
destinations of each source (``HeavyHitters`` at phi 0.05 against Spark's
``approx_top_k_accumulate`` per minute, combined with
``approx_top_k_combine`` and read with ``approx_top_k_estimate`` of the
top 1 / phi), asked only where it is named (its sketches are large on
sparse keys: 14 KB for a key's 25 events).

Sparse keys (tens of events per source and site in a day, as most network
sources are) are the rollup's ground: a minute's row per event, where a
sketch keeps buckets for every size class.  Dense keys (thousands of
events per source and site, destinations drawn from a Zipf law so that
some are heavy) are the sketches': the rollup keeps a row per minute
whatever happens in it.

Sources seen at one site (``EHIST_BENCH_SCALE="lone:100000:25:0:0.1"``: a
tenth of the sources at every site, each other one at one site): what
real network tables look like, most sources showing up at one site; their
keys take the unions' path for a lone sketch (read, checked, bytes kept).

Tiered tables, the rollup's own trick for short windows: beside the
day's table, one sketch table per hour (``sketch_table`` by source, site
and ``date_trunc("hour", ts)``, written partitioned by that hour, the same
specs, so that ``union_table`` rolls the hours of a day up into the day's
table).  A window shorter than a day is then answered from the hourly
tables it can overlap (for the last hour, the two newest hours: a window
of an hour spans two slots unless it starts on the hour), each source's
sketches of those hours united (``union_table``) or answered as arrays
(``collect_list``), as the day's table is for the day (heavy hitters
too where they are asked: a dense key's hour, 167 of its 4,000 flows,
takes a sketch of ~26 KB against the day's ~175 KB).

L_p norms (``EHIST_BENCH_SCALE_KINDS=l2``, asked alone and of a few
thousand keys: a sketch holds ``rows_for(2, 0.1, 0.1)`` = 405 doubles per
bucket, ~48 KB for a key's 25 flows): the L2 norm of each source's bytes
per destination, ``LpNorm("dst", value="bytes", p=2, eps=0.1,
delta=0.1)`` against the rollup that answers it exactly, per source,
destination and minute the ``sum(bytes)``, read as ``sqrt(sum(f * f))``
over each destination's ``f = sum(b)`` in the window.

Item frequencies (``EHIST_BENCH_SCALE_KINDS=frequency``): how many flows
each source sent to one destination (``dst`` 1, the most frequent of the
Zipf data sets), from ``Frequencies("dst")`` (the ECM-sketch, eps and
delta 0.01) with ``ecm_sketch_frequency``, against the same
per-destination rollup's ``count`` of that destination in the window.

Count + distinct and sums are measured apart: a sum's histogram at eps 0.01
holds ``l log(total / l)`` buckets (~430 for 25 flows of ~800 bytes),
more than the flows themselves, so sums of sparse keys are where sketches
cost most.  Each ehist answer is checked against the exact one on a sample
of sources before timing.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, median_interval, note_load, spark_fixture

pytest.importorskip("pyspark")

DATA_SETS = [(name, int(keys), int(per), float(rest[0]) if rest else 0.0, float(rest[1]) if len(rest) > 1 else 1.0)
             for name, keys, per, *rest in
             (item.split(":") for item in os.environ.get("EHIST_BENCH_SCALE", "sparse:100000:25").split(","))]
ROUNDS = int(os.environ.get("EHIST_BENCH_SCALE_ROUNDS", "5"))
SUMS = os.environ.get("EHIST_BENCH_SCALE_SUMS", "1") != "0"
TIERS = os.environ.get("EHIST_BENCH_SCALE_TIERS", "1") != "0"
SITES = 4
WINDOWS = os.environ.get("EHIST_BENCH_SCALE_WINDOWS", "1 hour,1 day").split(",")
KINDS = {"count + distinct": ["n", "d"], "p99": ["q"], "sums": ["b"], "heavy hitters": ["h"], "l2": ["l"],
         "frequency": ["f"]}
ASKED = [k.strip() for k in os.environ.get("EHIST_BENCH_SCALE_KINDS", "count + distinct,p99,sums").split(",")]
HEAVY = "heavy hitters" in ASKED  # asked of the data sets with a Zipf law only (dense keys, heavy items)
L2 = "l2" in ASKED  # L2 norms of bytes per destination (sketches of ~48 KB per key and site: a few thousand keys)
FREQUENCY = "frequency" in ASKED  # flows to one destination (ECM-sketches)
ITEM = 1  # the destination asked of
PHI = 0.05  # heavy destinations: at least 5% of a source's flows in the window
TOP = round(1 / PHI)  # approx_top_k's k: at most 1 / phi items reach phi
START = dt.datetime(2026, 1, 1)
NOW = START + dt.timedelta(days=1, seconds=43)  # after every event, mid-minute
HOUR = dt.timedelta(hours=1)

spark = spark_fixture("ehist-bench-scale", **{"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "6g",
                                              "spark.ui.showConsoleProgress": "false",
                                              # the generated events go in through Arrow (not timed)
                                              "spark.sql.execution.arrow.pyspark.enabled": "true"})


@pytest.fixture(scope="module", params=DATA_SETS, ids=[d[0] for d in DATA_SETS])
def tables(spark, request, tmp_path_factory):
    """Per-minute rollups and sketch tables of 4 sites, in Parquet."""
    import pandas as pd
    from pyspark.sql import functions as F

    from udaf import Count, Distinct, Frequencies, HeavyHitters, LpNorm, Quantile, Sum, sketch_table

    name, keys, per, skew, shared = request.param
    heavy_asked = HEAVY and skew > 0
    base = tmp_path_factory.mktemp(f"scale-{name}")
    rng = np.random.default_rng(40)
    common = round(keys * shared)  # sources 0..common at every site, each other one at one site only
    for site in range(SITES):
        seen = np.concatenate([np.arange(common), np.arange(common + site, keys, SITES)])
        n = seen.size * per
        pdf = pd.DataFrame({"src": seen[rng.integers(0, seen.size, n)],
                            "ts": pd.Timestamp(START) + pd.to_timedelta(rng.integers(0, 86_400 * 10**6, n), unit="us"),
                            "bytes": rng.integers(40, 1500, n),
                            "dst": rng.zipf(skew, n) % 5000 if skew else rng.integers(0, 5000, n)})
        spark.createDataFrame(pdf).write.parquet(str(base / "events" / f"site={site}"))
    events = spark.read.parquet(str(base / "events"))
    t = time.perf_counter()
    top = [F.expr("approx_top_k_accumulate(dst, 10000)").alias("t")] if heavy_asked else []
    events.groupBy("site", "src", F.date_trunc("minute", "ts").alias("slot")).agg(
        F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.hll_sketch_agg("dst").alias("h"),
        F.kll_sketch_agg_bigint("bytes").alias("k"), *top).write.parquet(str(base / "rollup"))
    if L2 or FREQUENCY:  # the rollup that answers L2 norms and frequencies exactly: per source, destination, minute
        events.groupBy("site", "src", "dst", F.date_trunc("minute", "ts").alias("slot")).agg(
            F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b")).write.parquet(str(base / "items"))
    native_build = time.perf_counter() - t
    t = time.perf_counter()
    heavy = {"h": HeavyHitters("dst", "1 day", phi=PHI, bits=32)} if heavy_asked else {}
    if L2:
        heavy["l"] = LpNorm("dst", "1 day", value="bytes", p=2.0, eps=0.1, delta=0.1)
    if FREQUENCY:
        heavy["f"] = Frequencies("dst", "1 day")
    sketch_table(events, ["site", "src"], "ts", n=Count("1 day", eps=0.01), b=Sum("bytes", "1 day", eps=0.01),
                 d=Distinct("dst", "1 day"), q=Quantile("bytes", "1 day", q=0.99), **heavy).write.parquet(
        str(base / "sketches"))
    ehist_build = time.perf_counter() - t
    hourly_build = None
    if TIERS:  # the same specs per hour, so that the hours of a day unite into the day's table
        t = time.perf_counter()
        sketch_table(events.withColumn("hour", F.date_trunc("hour", "ts")), ["site", "src", "hour"], "ts",
                     n=Count("1 day", eps=0.01), b=Sum("bytes", "1 day", eps=0.01), d=Distinct("dst", "1 day"),
                     q=Quantile("bytes", "1 day", q=0.99), **heavy).write.partitionBy("hour").parquet(
                         str(base / "hourly"))
        hourly_build = time.perf_counter() - t
    size = {t: sum(p.stat().st_size for p in (base / t).rglob("*.parquet"))
            for t in ("rollup", "sketches", "hourly", "items")}
    events_n = (common * SITES + keys - common) * per
    RESULTS[f"scale build | {name}"] = {"data": name, "keys": keys, "events": events_n, "skew": skew,
                                        "per_key_and_site": per, "shared": shared,
                                        "heavy": heavy_asked,
                                        "native_seconds": native_build, "ehist_seconds": ehist_build,
                                        "rollup_bytes": size["rollup"], "sketch_bytes": size["sketches"],
                                        "hourly_seconds": hourly_build, "hourly_bytes": size["hourly"] or None,
                                        "items_bytes": size["items"] or None}
    hourly = spark.read.parquet(str(base / "hourly")) if TIERS else None
    items = spark.read.parquet(str(base / "items")) if L2 or FREQUENCY else None  # the per-destination rollup
    return (name, keys, per, skew, shared, events, spark.read.parquet(str(base / "rollup")),
            spark.read.parquet(str(base / "sketches")), hourly, items)


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def _recent_hours(hourly, window: str):
    """The hourly tables a window ending now can overlap: the hours from
    the one holding ``now - window`` on, and the one before it (a window
    not starting on the hour spans one slot more than its length in hours;
    this trace's ``now`` is 43 s past the hour, so reading the older one
    costs what a window in mid-hour costs)."""
    import pandas as pd
    from pyspark.sql import functions as F

    first = pd.Timestamp(NOW - pd.Timedelta(window).to_pytimedelta()).floor("h") - pd.Timedelta(hours=1)
    return hourly.where(F.col("hour") >= F.lit(first.to_pydatetime()))


def _paths(roll, sketches, columns: list, window: str, hourly=None, items=None) -> dict:
    """(question -> {path -> action}) of the last ``window``; ``native``
    first in each; with ``hourly`` tables and a window under a day, the
    tiered paths after the day's table's."""
    import pandas as pd
    from pyspark.sql import functions as F

    from udaf import functions as U
    from udaf import union_table

    start = F.lit(NOW - pd.Timedelta(window).to_pytimedelta())

    def answers(df):
        # the parameters as Python values, as the docs write them: Spark chains each answer's UDF after the
        # union's (union_table, *_union_agg), one Python pass for both
        est = {"n": U.eh_sketch_estimate, "b": U.eh_sketch_estimate, "d": U.sliding_hll_sketch_estimate,
               "q": lambda c, *a: U.sliding_quantile_sketch_quantile(c, 0.99, *a),
               "h": lambda c, *a: U.sliding_hh_sketch_heavy_hitters(c, PHI, *a),
               "l": U.sliding_lp_sketch_estimate,
               "f": lambda c, *a: U.ecm_sketch_frequency(c, ITEM, *a)}
        return df.select("src", *[est[c](c, NOW, window).alias(c) for c in columns])

    if columns in (["l"], ["f"]):  # L2 norms and frequencies: the rollup per source and destination
        roll = items

    def native(rows):
        if columns == ["l"]:  # each destination's bytes in the window, then the norm per source
            return rows.where(F.col("slot") > start).groupBy("src", "dst").agg(F.sum("b").alias("f")).groupBy(
                "src").agg(F.sqrt(F.sum(F.col("f") * F.col("f"))).alias("l"))
        if columns == ["f"]:
            return rows.where((F.col("slot") > start) & (F.col("dst") == ITEM)).groupBy("src").agg(
                F.sum("n").alias("f"))
        aggs = {"n": F.sum("n").alias("n"), "b": F.sum("b").alias("b"),
                "d": F.hll_sketch_estimate(F.hll_union_agg("h")).alias("d"),
                "q": F.kll_sketch_get_quantile_bigint(F.kll_merge_agg_bigint("k"), F.lit(0.99)).alias("q"),
                "h": F.expr(f"approx_top_k_estimate(approx_top_k_combine(t, 10000), {TOP})").alias("h")}
        return rows.where(F.col("slot") > start).groupBy("src").agg(*[aggs[c] for c in columns])

    def arrays(df):
        return df.groupBy("src").agg(*[F.collect_list(c).alias(c) for c in columns])

    def union_aggs(df):  # the column functions' union: the path issue 40 first measured (99x at 20k keys)
        unite = {"n": U.eh_union_agg, "b": U.eh_union_agg, "d": U.sliding_hll_union_agg,
                 "q": U.sliding_quantile_union_agg, "h": U.sliding_hh_union_agg, "l": U.sliding_lp_union_agg,
                 "f": U.ecm_union_agg}
        return df.groupBy("src").agg(*[unite[c](c).alias(c) for c in columns])

    site = F.col("site") == 0
    paths = {
        "unite 4 sites, then answer": {
            "native": lambda: _noop(native(roll)),
            "union_table, then estimates": lambda: _noop(answers(union_table(sketches, "src", *columns))),
            "*_union_agg, then estimates": lambda: _noop(answers(union_aggs(sketches))),
        },
        "answer the union without building it": {
            "native": lambda: _noop(native(roll)),
            "estimates of collect_list": lambda: _noop(answers(arrays(sketches))),
        },
        "answer one site's table": {
            "native": lambda: _noop(native(roll.where(site))),
            "estimates": lambda: _noop(answers(sketches.where(site))),
        },
    }
    if hourly is not None and pd.Timedelta(window) < pd.Timedelta("1 day"):
        recent = _recent_hours(hourly, window)
        paths["unite 4 sites, then answer"]["hourly tables: union_table, then estimates"] = \
            lambda: _noop(answers(union_table(recent, "src", *columns)))
        paths["answer the union without building it"]["hourly tables: estimates of collect_list"] = \
            lambda: _noop(answers(arrays(recent)))
        # one site's hours: a source's sketches of the hours overlapping the window, answered as one
        paths["answer one site's table"]["hourly tables: estimates of collect_list"] = \
            lambda: _noop(answers(arrays(recent.where(site))))
    return paths


def _check(events, sketches, keys: int, hourly=None, heavy_asked: bool = False) -> None:
    """The answers bracket the exact ones on a sample of sources (bounds of
    the counts and sums, the distinct counts within 5 standard errors, the
    p99 a value of the window within the bins' accuracy; no heavy
    destination missed), from the day's table and from the hourly ones."""
    from pyspark.sql import functions as F

    from udaf import functions as U
    from udaf import union_table

    sample = [int(k) for k in np.random.default_rng(1).choice(keys, 50, replace=False)]
    now = F.lit(NOW)
    recent = events.where(F.col("src").isin(sample) & (F.col("ts") > F.lit(NOW - HOUR)))
    exact = {r.src: r for r in recent.groupBy("src").agg(
        F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.countDistinct("dst").alias("d"),
        F.min("bytes").alias("low"), F.max("bytes").alias("high")).collect()}
    per_dst = recent.groupBy("src", "dst").count().collect() if heavy_asked else []
    tables = [(sketches, heavy_asked)] + ([(_recent_hours(hourly, "1 hour"), heavy_asked)] if hourly is not None
                                          else [])
    for table, heavy in tables:
        hh = [U.sliding_hh_sketch_heavy_hitters("h", F.lit(PHI), now, "1 hour").alias("h")] if heavy else []
        got = union_table(table.where(F.col("src").isin(sample)), "src", "n", "b", "d", "q", *(["h"] if heavy else [])
                          ).select(
            "src", U.eh_sketch_bounds("n", now, "1 hour").alias("n"), U.eh_sketch_bounds("b", now, "1 hour").alias("b"),
            U.sliding_hll_sketch_estimate("d", now, "1 hour").alias("d"),
            U.sliding_quantile_sketch_quantile("q", 0.99, now, "1 hour").alias("q"), *hh).collect()
        assert len(got) >= min(len(exact), 1)
        for r in got:
            e = exact.get(r.src)
            if e is None:
                continue
            assert r.n.lower <= e.n <= r.n.upper and r.b.lower <= e.b <= r.b.upper
            assert abs(r.d - e.d) <= max(2.0, 5 * 1.04 / 64 * e.d)
            assert e.low * 0.99 <= r.q <= e.high * 1.01  # a value of the window, within the bins' accuracy
            if heavy:
                want = {x.dst for x in per_dst if x.src == r.src and x["count"] >= PHI * e.n}
                assert want <= {h.item for h in r.h}
    if L2:  # the L2 norms of the last hour within the sketches' accuracy (eps 0.1 with probability 0.9)
        per_item = recent.groupBy("src", "dst").agg(F.sum("bytes").alias("f")).groupBy("src").agg(
            F.sqrt(F.sum(F.col("f") * F.col("f"))).alias("l")).collect()
        norms = {r.src: r.l for r in per_item}
        for table in [sketches] + ([_recent_hours(hourly, "1 hour")] if hourly is not None else []):
            got = union_table(table.where(F.col("src").isin(sample)), "src", "l").select(
                "src", U.sliding_lp_sketch_estimate("l", now, "1 hour").alias("l")).collect()
            ratios = [r.l / norms[r.src] for r in got if norms.get(r.src)]
            assert ratios and 0.8 <= float(np.median(ratios)) <= 1.2 and min(ratios) >= 0.5 and max(ratios) <= 1.5
    if FREQUENCY:  # flows to ITEM in the last hour: never under the exact count, over it by at most eps of the total
        flows = {r.src: (r.f, r.n) for r in recent.groupBy("src").agg(
            F.sum((F.col("dst") == ITEM).cast("long")).alias("f"), F.count(F.lit(1)).alias("n")).collect()}
        for table in [sketches] + ([_recent_hours(hourly, "1 hour")] if hourly is not None else []):
            got = union_table(table.where(F.col("src").isin(sample)), "src", "f").select(
                "src", U.ecm_sketch_frequency("f", F.lit(ITEM), now, "1 hour").alias("f")).collect()
            assert got
            for r in got:
                f, n = flows.get(r.src, (0, 0))
                assert f * 0.99 - 1 <= r.f <= f + 0.02 * n + 1


def test_scale(tables):
    name, keys, per, skew, shared, events, roll, sketches, hourly, items = tables
    heavy_asked = HEAVY and skew > 0
    _check(events, sketches, keys, hourly, heavy_asked)
    kinds = [(k, KINDS[k]) for k in ASKED if (SUMS or k != "sums") and (heavy_asked or k != "heavy hitters")]
    for window, (kind, columns) in ((w, k) for w in WINDOWS for k in kinds):
        for question, paths in _paths(roll, sketches, columns, window, hourly, items).items():
            # the heavy hitters' unions run once (minutes at dense keys); the sums' took minutes before
            # their rows form (f373314) and now take about as long as the other families'
            rounds = ROUNDS if not (columns == ["h"] and question.startswith("unite")) else 1
            seconds = {p: [] for p in paths}
            for round_ in range(1 + rounds):  # one warm-up round, not counted
                for p in (list(paths) if round_ % 2 == 0 else list(paths)[::-1]):
                    t = time.perf_counter()
                    paths[p]()
                    if round_:
                        seconds[p].append(time.perf_counter() - t)
            for ours in (p for p in paths if p != "native"):
                ratios = [x / y for x, y in zip(seconds[ours], seconds["native"])]
                row = {"data": name, "keys": keys, "per_key_and_site": per, "skew": skew, "shared": shared,
                       "kind": kind, "question": question, "window": window, "path": ours, "rounds": rounds,
                       "native_median": statistics.median(seconds["native"]),
                       "ehist_median": statistics.median(seconds[ours]), "ratio_median": statistics.median(ratios),
                       "ratio_interval": list(median_interval(ratios))}
                RESULTS[f"scale | {name} | {window} | {kind} | {question} | {ours}"] = row
                print(f"\n  {name} {keys:,} keys, last {window}, {kind}: {question}: native "
                      f"{row['native_median']:.2f} s, {ours} {row['ehist_median']:.2f} s (medians of {rounds}); "
                      f"ratio {row['ratio_median']:.2f}", flush=True)
    note_load(f"scale {name}")

