"""Multiple aggregations from one fine-grained sketch table (Gigascope phantoms).

Zhang et al., *Multiple Aggregations Over Data Streams* (SIGMOD 2005):
queries that differ only in their grouping attributes share work when a
finer aggregation (a *phantom*, say per (source, destination, port)) is
computed once and feeds the coarser ones.  Sliding-window synopses
compose the same way:

1. one pass over the rows builds, per (src, dst, dport), a histogram of
   packets, one of bytes and a sliding HyperLogLog of destinations: the
   phantom table (``udaf.functions`` sketch builders);
2. per-source, per-destination and per-(source, destination) answers over
   the last hour come from the phantom table alone: windowed bounds of
   the fine histograms add up (Spark's ``sum`` of the bounds the phantom
   keeps), and the fine HyperLogLogs of a source, collected into an array
   (``collect_list``), are answered as their union
   (``sliding_hll_sketch_estimate`` of the array: no merged sketch is
   built), all in one aggregation.  No row is read again.

Compared with computing each grouping from the raw rows with Spark's own
aggregates (``udaf.aggregate`` runs the query a data engineer would
write, ``where(ts > end - w).groupBy(keys).agg(count, sum,
count(DISTINCT))``, one pass and shuffle per grouping), on time and on
error against the exact answers.  With the rows cached in memory the
native query is the faster one here; the phantom is what is left, and
answers every grouping, once the rows are gone (a retention limit, a
table per day, many sites rolled up later: benchmarks/bench_stored.py
measures that case).

Run:  python examples/rollups.py          (--rows N, default 600000)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from network_monitor import flow_trace, session  # noqa: E402

GROUPINGS = {"per source": ["src"], "per destination": ["dst"], "per (source, destination)": ["src", "dst"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600_000)
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from udaf import Count, Distinct, Sum, aggregate, sketch_table
    from udaf import functions as U

    spark = session()
    flows = spark.createDataFrame(flow_trace(args.rows)).repartition(8).cache()
    n = flows.count()
    end = flows.agg(F.max("ts")).first()[0]
    W, EPS = "1 hour", 0.02
    print(f"{n:,} flows, window {W} as of {end:%H:%M}, eps = {EPS} for packets and bytes")

    def timed(action):
        t = time.perf_counter()
        out = action()
        return out, time.perf_counter() - t

    # 1. the phantom: one pass over the rows, fine sketches (and their
    #    bounds as of `end`) kept, one numpy pass per partition
    phantom, t_phantom = timed(lambda: _cache(sketch_table(
        flows, ["src", "dst", "dport"], "ts", now=end, bounds=True,
        pk=Count(window=W, eps=EPS), octets=Sum("bytes", window=W, eps=EPS),
        ds=Distinct("dst", window=W, precision=12))))
    print(f"phantom (src, dst, dport): {phantom.count():,} groups, built in {t_phantom:.1f} s")
    fine = phantom

    exact_cut = F.col("ts") > F.lit(end) - F.expr(f"INTERVAL {W}")
    print(f"\n{'grouping':26s} {'groups':>7s} {'from rows':>10s} {'from phantom':>13s} "
          f"{'packets err':>12s} {'bytes err':>10s} {'dsts err':>9s}")
    totals = [0.0, t_phantom]
    for label, keys in GROUPINGS.items():
        def from_phantom():
            answers = [((F.sum("pk_lower") + F.sum("pk_upper")) / 2).alias("packets"),
                       ((F.sum("octets_lower") + F.sum("octets_upper")) / 2).alias("bytes")]
            if keys == ["src"]:  # distinct destinations per source: the union of the fine HLLs
                answers.append(U.sliding_hll_sketch_estimate(F.collect_list("ds"), now=end).alias("dsts"))
            return fine.groupBy(*keys).agg(*answers).toPandas()

        def from_rows():  # Spark's own aggregates over the window's rows (aggregate's native plan)
            specs = dict(packets=Count(window=W, eps=EPS), bytes=Sum("bytes", window=W, eps=EPS))
            if keys == ["src"]:
                specs["dsts"] = Distinct("dst", window=W, precision=12)
            return aggregate(flows, keys, "ts", now=end, **specs).toPandas()

        ours, t_ours = timed(from_phantom)
        _, t_rows = timed(from_rows)
        totals[0] += t_rows
        totals[1] += t_ours
        exact = flows.where(exact_cut).groupBy(*keys).agg(
            F.count(F.lit(1)).alias("packets_x"), F.sum("bytes").alias("bytes_x"),
            F.countDistinct("dst").alias("dsts_x")).toPandas()
        both = ours.merge(exact, on=keys, how="left").fillna(0)
        err = {}
        for m in ("packets", "bytes"):
            live = both[f"{m}_x"] > 0
            err[m] = float((both[m][live] / both[f"{m}_x"][live] - 1).abs().max())
            assert (both[m][~live].abs() < 1e-9).all()  # quiet groups answer 0
            assert err[m] <= EPS + 1e-9, (label, m, err[m])  # the guarantee, checked
        if "dsts" in both:  # HLL: a standard error, reported where counts are not tiny
            big = both["dsts_x"] >= 100
            err["dsts"] = float((both["dsts"][big] / both["dsts_x"][big] - 1).abs().mean())
        print(f"{label:26s} {len(ours):7,d} {t_rows:9.1f}s {t_ours:12.1f}s {err['packets']:12.2%} "
              f"{err['bytes']:10.2%} {err['dsts']:9.2%}" if "dsts" in err else
              f"{label:26s} {len(ours):7,d} {t_rows:9.1f}s {t_ours:12.1f}s {err['packets']:12.2%} "
              f"{err['bytes']:10.2%} {'-':>9s}")
    print(f"{'total':26s} {'':7s} {totals[0]:9.1f}s {totals[1]:12.1f}s   (phantom: built once, included)")
    print("\nerr: packets and bytes, the largest |relative error| against exact over all groups (within eps:")
    print("windowed bounds add up over the fine groups); dsts, the mean |relative error| of the merged")
    print("HyperLogLogs over sources with >= 100 destinations.  From the phantom, each grouping reads")
    print("only its sketches, never the rows; from rows is Spark's own exact aggregation over the cached rows.")
    spark.stop()


def _cache(df):
    df = df.cache()
    df.count()
    return df


if __name__ == "__main__":
    main()
