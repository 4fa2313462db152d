"""Network monitoring on Spark: a sketch table of per-source packets, bytes
and distinct destinations, built once and answered at several windows.

The trace is generated but shaped like real flow records (the settings of
the Gigascope and DataDepot papers): six hours of flows whose sources are
Zipf-distributed over a few thousand addresses, diurnal-free but bursty
arrivals (each source alternates quiet and busy spells), heavy-tailed
bytes per flow, and one incident: a port scan (one quiet source probing
thousands of destinations for twenty minutes in the last hour).

The job builds one row per source (``udaf.sketch_table``): exponential
histograms of packets and bytes (eps = 0.02, with deterministic bounds)
and a sliding HyperLogLog of destinations, for windows up to an hour.
That table is what a monitoring job keeps; the flows can go.  From it
alone it answers

* the last hour as of the trace's end,
* the last 5 minutes as of the end,
* the last hour twenty minutes later (the window slides on with no new
  flows: a dashboard refreshing after the feed stopped),

with ``eh_sketch_estimate`` / ``eh_sketch_bounds`` /
``sliding_hll_sketch_estimate``, prints the top sources with the exact
values beside the estimates (computed from the flows by Spark, for
comparison only), asserts on every source that the bounds bracket the
exact bytes within eps, and writes a plot: every source's bytes error in
each window, and the per-flow sliding distinct destinations of the
scanner and of the busiest source (``udaf.sliding_over``).

Run (local Spark, embedded):   python examples/network_monitor.py
On a cluster:                  see "Run it on a cluster" in the README
Options: --rows N (default 100000), --top N (default 5),
         --out PATH (default network_monitor.png)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

HOUR_US = 3_600_000_000
START = np.datetime64("2026-11-22T00:00:00", "us")


def flow_trace(rows: int, seed: int = 7) -> pd.DataFrame:
    """Six hours of flows: Zipf sources, bursty arrivals, heavy-tailed bytes."""
    rng = np.random.default_rng(seed)
    sources = 5_000
    span = 6 * HOUR_US
    src = (rng.zipf(1.3, rows) - 1) % sources
    # bursty: each source is busy in some 10-minute spells (phase per source)
    spell = 10 * 60 * 1_000_000
    t = rng.integers(0, span, rows)
    busy = ((t // spell + src) % 3) == 0
    t = np.where(busy | (rng.random(rows) < 0.3), t, rng.integers(0, span, rows))
    dst = (rng.zipf(1.6, rows) - 1) % 20_000
    packets = 1 + rng.geometric(0.08, rows)
    bytes_ = packets * rng.integers(60, 1500, rows)
    # the incident: a port scan from one quiet source, 20 minutes in the
    # last hour, one small probe to each of thousands of fresh destinations
    n_scan = rows // 100
    scan_t = 5 * HOUR_US + 15 * 60 * 1_000_000 + rng.integers(0, 20 * 60 * 1_000_000, n_scan)
    frame = pd.DataFrame({
        "ts": np.concatenate([t, scan_t]),
        "src": np.concatenate([src, np.full(n_scan, sources - 1)]),
        "dst": np.concatenate([dst, 100_000 + rng.permutation(n_scan)]),
        "dport": np.concatenate([rng.choice([53, 80, 443, 8080], rows), rng.integers(1, 65536, n_scan)]),
        "packets": np.concatenate([packets, np.ones(n_scan, np.int64)]),
        "bytes": np.concatenate([bytes_, np.full(n_scan, 60)]),
    })
    frame["ts"] = START + frame["ts"].to_numpy().astype("timedelta64[us]")
    # addresses: a fixed random map (whatever the row count), so popularity
    # does not follow the numbering
    names = np.random.default_rng(seed + 1)
    frame["src"] = _ip("10.", names.permutation(1 << 16)[frame["src"].to_numpy()] + (1 << 16))
    frame["dst"] = _ip("172.", names.permutation(1 << 18)[frame["dst"].to_numpy()])
    return frame.sort_values("ts", kind="stable").reset_index(drop=True)


def _ip(prefix: str, n: np.ndarray) -> np.ndarray:
    a, b, c = (n >> 16) & 255, (n >> 8) & 255, n & 255
    return np.char.add(np.char.add(np.char.add(prefix, a.astype(str)), np.char.add(".", b.astype(str))),
                       np.char.add(".", c.astype(str)))


def session():
    """The embedded local Spark by default; spark-submit supplies its master."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("ehist-network-monitor")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = (builder.master("local[*]").config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
    # Arrow moves the generated pandas trace into Spark in one pass (without it: a Python object per value)
    spark = builder.config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "8") \
        .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: The questions asked of the one sketch table: (label, minutes after the
#: trace's end, window).  The later ``now`` is a dashboard refreshing after
#: the feed stopped: the hour slides on, and the sketches still answer.
QUERIES = [("last hour", 0, "1 hour"), ("last 5 minutes", 0, "5 minutes"), ("last hour, 20 min later", 20, "1 hour")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--out", default="network_monitor.png")
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args(argv)

    import datetime as dt

    from pyspark.sql import functions as F

    from udaf import Distinct, Sum, sketch_table, sliding_over
    from udaf import functions as U

    spark = session()
    t0 = time.perf_counter()
    flows = spark.createDataFrame(flow_trace(args.rows)).repartition(8).cache()
    n = flows.count()
    end = flows.agg(F.max("ts")).first()[0]
    print(f"{n:,} flows from {flows.select('src').distinct().count():,} sources, "
          f"{flows.agg(F.min('ts')).first()[0]:%H:%M} to {end:%H:%M} UTC")

    # One row per source, built once: each column a sketch of the source's
    # flows that answers any window up to an hour, as of any later time.
    # This table is what a monitoring job keeps (in Parquet, say): the rows
    # can go.
    table = sketch_table(flows, "src", "ts",
                         packets=Sum("packets", window="1 hour", eps=0.02),
                         bytes=Sum("bytes", window="1 hour", eps=0.02),
                         dsts=Distinct("dst", window="1 hour", precision=12)).cache()
    stored = table.select(sum(F.length(c) for c in ("packets", "bytes", "dsts")).alias("b")).agg(F.sum("b")).first()[0]
    print(f"sketch table: {table.count():,} rows (one per source), {stored / 1e6:.1f} MB of sketches "
          f"for {n:,} flows; windows up to 1 hour, eps 0.02 for sums")
    print("estimates [lower, upper] come from the sketches; 'exact' is computed from the flows, for comparison;\n"
          "a bound of width 0 is exact: no flow of the source falls in the sketch's uncertain edge of the window")

    scans, answered = None, {}
    for label, later, window in QUERIES:
        now = end + dt.timedelta(minutes=later)
        at = F.lit(now)
        answers = table.select(
            "src",
            U.eh_sketch_estimate("packets", at, window).alias("packets"),
            U.eh_sketch_bounds("bytes", at, window).alias("b"),
            U.eh_sketch_estimate("bytes", at, window).alias("bytes"),
            U.sliding_hll_sketch_estimate("dsts", at, window).alias("dsts"))
        # the exact answers from the rows, only to show the errors (the job would not keep the rows)
        start = now - pd.Timedelta(window).to_pytimedelta()
        exact = flows.where((F.col("ts") > F.lit(start)) & (F.col("ts") <= at)).groupBy("src").agg(
            F.sum("packets").alias("packets_exact"), F.sum("bytes").alias("bytes_exact"),
            F.countDistinct("dst").alias("dsts_exact"))
        both = answers.join(exact, "src").select("*", "b.lower", "b.upper").drop("b").toPandas()
        # the guarantees, on every source: bounds bracket the exact bytes, within eps
        assert (both.lower <= both.bytes_exact).all() and (both.bytes_exact <= both.upper).all()
        worst = float((both.bytes / both.bytes_exact - 1).abs().max())
        assert worst <= 0.02
        top = both.sort_values(["bytes", "src"], ascending=[False, True]).head(args.top)
        print(f"\n{label} ({window} to {now:%H:%M}): {len(both):,} active sources, largest bytes error "
              f"{worst:.2%} (bound 2%), every exact value within its bounds")
        print(f"{'source':>14s} {'bytes estimate [lower, upper]':>42s} {'exact':>12s} {'err':>6s} "
              f"{'packets':>8s} {'dsts':>5s} {'exact':>5s}")
        for r in top.itertuples():
            print(f"{r.src:>14s} {r.bytes:12,.0f} [{r.lower:12,d}, {r.upper:12,d}] {r.bytes_exact:12,d} "
                  f"{r.bytes / r.bytes_exact - 1:+6.2%} {r.packets:8,.0f} {r.dsts:5,.0f} {r.dsts_exact:5,d}")
        answered[label] = both
        if scans is None:
            scans = both.sort_values(["dsts", "src"], ascending=[False, True]).head(3)
            table_top = top
    print("\nMost distinct destinations in the last hour (a scan shows here):")
    for r in scans.itertuples():
        print(f"{r.src:>14s} {r.dsts:8,.0f} estimated, {r.dsts_exact:8,d} exact, {r.packets_exact:8,d} packets")
    print(f"\n(sketch table, {len(QUERIES)} windows and the exact comparison: {time.perf_counter() - t0:.1f} s)")

    # Per flow: distinct destinations of its source over the previous 10 minutes.
    watch = [scans.src.iloc[0], table_top.src.iloc[0]]
    per_flow = sliding_over(flows.where(F.col("src").isin(watch)), "src", "ts",
                            dsts_10m=Distinct("dst", window="10 minutes")).select("src", "ts", "dsts_10m")
    plot(answered, per_flow.toPandas(), watch, args.out)
    print(f"plot written to {args.out}")
    spark.stop()


def plot(answered: dict, per_flow: pd.DataFrame, watch, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    for label, both in answered.items():
        exact = both.bytes_exact.to_numpy(dtype=float)
        a.scatter(exact, (both.bytes.to_numpy(dtype=float) / exact - 1) * 100, s=6, alpha=0.5, label=label)
    for y in (-2, 2):
        a.axhline(y, color="grey", ls="--", lw=1)
    a.axhline(0, color="black", lw=1)
    a.set_xscale("log")
    a.set_xlabel("exact bytes of the source in the window")
    a.set_ylabel("estimate relative to exact (%)")
    a.set_title("Every source, three windows from one sketch table: eps = 2% (dashed)")
    a.legend(loc="lower right", markerscale=3)
    for src in watch:
        g = per_flow[per_flow.src == src].sort_values("ts")
        b.plot(g.ts, g.dsts_10m, label=src, lw=1, drawstyle="steps-post")
    b.set_yscale("symlog")
    b.set_ylabel("distinct destinations, previous 10 min")
    b.set_title("Per flow (sliding_over): the scan stands out")
    b.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
