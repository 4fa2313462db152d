"""Network monitoring on Spark: per-source sliding counts, bytes and distinct
destinations over the last hour, with bounds.

The trace is generated but shaped like real flow records (the settings of
the Gigascope and DataDepot papers): six hours of flows whose sources are
Zipf-distributed over a few thousand addresses, diurnal-free but bursty
arrivals (each source alternates quiet and busy spells), heavy-tailed
bytes per flow, and one incident: a port scan (one quiet source probing
thousands of destinations for twenty minutes in the last hour).

For every source, as of the end of the trace, the job answers

* packets in the last hour        (sliding sum, exponential histogram, bounds)
* bytes in the last hour          (sliding sum, exponential histogram, bounds)
* distinct destinations, last hour (sliding HyperLogLog)

from sketches built in two phases (``udaf.aggregate``: partial sketches
per partition, only sketches shuffled), prints the top sources
with the exact values beside the estimates (computed by brute force for
comparison), and writes a plot: per-source bytes with their bounds, and the
per-flow sliding distinct destinations of the scanner and of the busiest
source (``udaf.sliding_over``).

Run (local Spark, embedded):   python examples/network_monitor.py
On a cluster:                  see "Run it on a cluster" in the README
Options: --rows N (default 600000), --out PATH (default network_monitor.png),
         --strategy two_phase|auto|native|shuffle (default two_phase: the
         sketches.  ``auto``, aggregate's default, runs Spark's own
         aggregates here and answers exactly: the rows are at hand and the
         question is one window as of one time)
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
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false"))
    spark = builder.config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "8") \
        .getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--out", default="network_monitor.png")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--strategy", default="two_phase", choices=["two_phase", "auto", "native", "shuffle"])
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from udaf import Distinct, Sum, aggregate, sliding_over

    spark = session()
    t0 = time.perf_counter()
    flows = spark.createDataFrame(flow_trace(args.rows)).repartition(8).cache()
    n = flows.count()
    end = flows.agg(F.max("ts")).first()[0]
    print(f"{n:,} flows from {flows.select('src').distinct().count():,} sources, "
          f"{flows.agg(F.min('ts')).first()[0]:%H:%M} to {end:%H:%M} UTC, master {spark.sparkContext.master}")

    # Per source, as of the end of the trace: sketches per partition, only
    # sketches shuffled, estimates with bounds from their union.
    answers = aggregate(
        flows, "src", "ts", now=end, bounds=True, strategy=args.strategy,
        packets=Sum("packets", window="1 hour", eps=0.02),
        bytes=Sum("bytes", window="1 hour", eps=0.02),
        dsts=Distinct("dst", window="1 hour", precision=12),
    ).cache()
    # the exact answers, for comparison only (a monitoring job would not compute them)
    cutoff = F.lit(end) - F.expr("INTERVAL 1 HOUR")
    exact = flows.where(F.col("ts") > cutoff).groupBy("src").agg(
        F.sum("packets").alias("packets_exact"), F.sum("bytes").alias("bytes_exact"),
        F.countDistinct("dst").alias("dsts_exact"))
    both = answers.join(exact, "src").cache()
    table = both.orderBy(F.desc("bytes")).limit(args.top).toPandas()
    scan = both.orderBy(F.desc("dsts")).limit(3).toPandas()
    elapsed = time.perf_counter() - t0

    print(f"\nTop {args.top} sources by bytes in the last hour (as of {end:%H:%M}); eps = 0.02 for sums")
    print(f"{'source':>14s} {'packets [lower, upper]':>30s} {'exact':>9s} "
          f"{'bytes estimate':>15s} {'exact':>13s} {'err':>6s} {'dsts':>6s} {'exact':>6s}")
    for r in table.itertuples():
        print(f"{r.src:>14s} {r.packets:10,.0f} [{r.packets_lower:8,d}, {r.packets_upper:8,d}] "
              f"{r.packets_exact:9,d} {r.bytes:15,.0f} {r.bytes_exact:13,d} "
              f"{r.bytes / r.bytes_exact - 1:+6.1%} {r.dsts:6,.0f} {r.dsts_exact:6,d}")
        # the guarantee, checked on every printed row
        assert r.packets_lower <= r.packets_exact <= r.packets_upper
        assert r.bytes_lower <= r.bytes_exact <= r.bytes_upper
    print("\nMost distinct destinations in the last hour (a scan shows here):")
    for r in scan.itertuples():
        print(f"{r.src:>14s} {r.dsts:8,.0f} estimated, {r.dsts_exact:8,d} exact, {r.packets_exact:8,d} packets")
    print(f"\n(sketch job and exact comparison: {elapsed:.1f} s)")

    # Per flow: distinct destinations of its source over the previous 10 minutes.
    watch = [scan.src.iloc[0], table.src.iloc[0]]
    per_flow = sliding_over(flows.where(F.col("src").isin(watch)), "src", "ts",
                            dsts_10m=Distinct("dst", window="10 minutes")).select("src", "ts", "dsts_10m")
    plot(table, per_flow.toPandas(), watch, args.out)
    print(f"plot written to {args.out}")
    spark.stop()


def plot(table: pd.DataFrame, per_flow: pd.DataFrame, watch, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    x = np.arange(len(table))
    exact = table.bytes_exact.to_numpy(dtype=float)
    rel = lambda v: (np.asarray(v, dtype=float) / exact - 1) * 100  # noqa: E731
    est, lower, upper = rel(table.bytes), rel(table.bytes_lower), rel(table.bytes_upper)
    a.errorbar(x, est, yerr=[est - lower, upper - est], fmt="o", capsize=4,
               label="estimate, with [lower, upper]")
    a.axhline(0, color="black", lw=1, label="exact")
    for y in (-2, 2):
        a.axhline(y, color="grey", ls="--", lw=1)
    a.set_xticks(x, table.src, rotation=60, ha="right", fontsize=8)
    a.set_ylabel("relative to exact (%)")
    a.set_title("Bytes in the last hour, top sources: EH eps = 2% (dashed)")
    a.legend(loc="lower right")
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
