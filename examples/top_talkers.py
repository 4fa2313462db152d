"""Top talkers per link over the last 5 minutes, from stored sliding sketches.

The flow trace of network_monitor.py (six hours of Zipf sources, bursty
arrivals, heavy-tailed bytes, and a port scan: one quiet source probing
thousands of destinations for twenty minutes in the last hour), split over
four links by destination.  The monitor keeps one small sketch per link
(``udaf.sketch_table`` with ``HeavyHitters``: an ECM-sketch per prefix
level of the source address, one hour long) and asks, as of two times:

* 05:35, while the scan runs: which sources sent at least 5% of each
  link's flows in the last 5 minutes?  The scanner is among them, with
  almost no bytes per flow;
* 06:00, the end of the trace: the same question, and by bytes over the
  last hour; the scan is over and gone from the 5-minute list.

Each answer is checked against the exact one (pandas on the generated
trace, computed only for the comparison): every source at or above 5% is
reported (the sketch's guarantee, whatever the seed), with bounds that hold
its exact count.  A plot shows the 05:35 lists.

Run:      python examples/top_talkers.py [--rows N] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

from ehist.hashing import hash64

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from network_monitor import flow_trace, session  # noqa: E402

PHI = 0.05
SCAN_TIME = np.datetime64("2026-11-22T05:35:00", "us")


def ip_text(n: int) -> str:
    return ".".join(str((int(n) >> s) & 255) for s in (24, 16, 8, 0))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--out", default="top_talkers.png")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from udaf import HeavyHitters, sketch_table
    from udaf import functions as U

    spark = session()
    t0 = time.perf_counter()
    trace = flow_trace(args.rows)
    # the source address as a 32-bit id (what HeavyHitters counts), the link by destination
    octets = trace["src"].str.split(".", expand=True).astype(np.int64).to_numpy()
    trace["src_id"] = ((octets[:, 0] * 256 + octets[:, 1]) * 256 + octets[:, 2]) * 256 + octets[:, 3]
    trace["link"] = np.char.add("link-", (hash64(trace["dst"].to_numpy(dtype=str)) % np.uint64(4)).astype(str))
    flows = spark.createDataFrame(trace[["ts", "src_id", "bytes", "link"]]).repartition(8).cache()
    end = trace["ts"].max()
    print(f"{flows.count():,} flows on 4 links, until {end:%H:%M} UTC")

    table = {}
    for label, upto in (("05:35", pd.Timestamp(SCAN_TIME)), ("06:00", end)):
        seen = flows.where(F.col("ts") <= F.lit(upto.to_pydatetime()))  # what the monitor had seen by then
        # one row per link: the stored sketches (binary), an hour of flows and of bytes each
        table[label] = sketch_table(seen, "link", "ts",
                                    flows=HeavyHitters("src_id", "1 hour", bits=32, eps=0.005, eh_eps=0.05),
                                    bytes=HeavyHitters("src_id", "1 hour", bits=32, eps=0.005, eh_eps=0.05,
                                                       value="bytes")).cache()
        size = table[label].select(F.sum(F.length("flows")) + F.sum(F.length("bytes"))).first()[0]
        print(f"sketch table as of {label}: {size / 4 / 1024:,.0f} KiB per link")

    results = {}
    for label, upto, what, window in (("05:35", pd.Timestamp(SCAN_TIME), "flows", "5 minutes"),
                                      ("06:00", end, "flows", "5 minutes"), ("06:00", end, "bytes", "1 hour")):
        # the window (upto - window, upto]: the same rows for the sketch and the exact answer
        got = {r["link"]: r["top"] for r in table[label].select(
            "link", U.sliding_hh_sketch_heavy_hitters(what, F.lit(PHI), F.lit(upto.to_pydatetime()), window)
            .alias("top")).collect()}
        # the exact answer, for comparison only (pandas on the trace the job generated)
        inside = trace[(trace.ts > upto - pd.Timedelta(window)) & (trace.ts <= upto)]
        weight = inside["bytes"] if what == "bytes" else pd.Series(1, index=inside.index)
        counts = weight.groupby([inside["link"], inside["src_id"]]).sum().to_dict()
        totals = weight.groupby(inside["link"]).sum().to_dict()
        results[(label, what)] = got
        print(f"\nAs of {label}: sources with >= {PHI:.0%} of a link's {what} in the last {window} "
              f"(estimate [lower, upper], exact)")
        for link in sorted(got):
            for h in got[link]:
                n = counts.get((link, h["item"]), 0)
                print(f"  {link}  {ip_text(h['item']):>15s}  {h['estimate']:>13,.0f} [{h['lower']:>11,d}, "
                      f"{h['upper']:>11,d}]  {n:>11,d}  ({n / totals[link]:.1%})")
                assert h["upper"] >= n  # the upper bound always holds
            # the guarantee: every source at or above phi is reported
            heavy = {s for (k, s), n in counts.items() if k == link and n >= PHI * totals[link]}
            assert heavy <= {h["item"] for h in got[link]}, (link, heavy)

    # the scan: of the sources listed at 05:35, the one with the fewest bytes per flow
    during = results[("05:35", "flows")]
    listed = {h["item"] for link in during for h in during[link]}
    per_flow = trace[trace.src_id.isin(listed)].groupby("src_id")["bytes"].mean()
    scanner = int(per_flow.idxmin())
    links = sum(scanner in {h["item"] for h in during[k]} for k in during)
    after = results[("06:00", "flows")]
    gone = not any(scanner in {h["item"] for h in after[k]} for k in after)
    print(f"\nThe scan: {ip_text(scanner)} is a top talker by flows on {links} of 4 links at 05:35 with "
          f"{per_flow[scanner]:.0f} bytes per flow; at 06:00 {'it is gone' if gone else 'it is still listed'}")
    print(f"(job: {time.perf_counter() - t0:.1f} s)")
    plot(during, trace, scanner, args.out)
    print(f"plot written to {args.out}")
    spark.stop()


def plot(during, trace, scanner, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(during), figsize=(4 * len(during), 3.6), sharey=True)
    for ax, link in zip(np.atleast_1d(axes), sorted(during)):
        hits = during[link]
        x = np.arange(len(hits))
        est = np.array([h["estimate"] for h in hits])
        lo = np.array([h["lower"] for h in hits])
        up = np.array([h["upper"] for h in hits])
        colors = ["tab:red" if h["item"] == scanner else "tab:blue" for h in hits]
        ax.bar(x, est, color=colors, alpha=0.7)
        ax.errorbar(x, est, yerr=[est - lo, up - est], fmt="none", ecolor="k", capsize=3)
        inside = trace[(trace.ts > pd.Timestamp(SCAN_TIME) - pd.Timedelta("5 minutes"))
                       & (trace.ts <= pd.Timestamp(SCAN_TIME)) & (trace.link == link)]
        ax.plot(x, [int((inside.src_id == h["item"]).sum()) for h in hits], "k_", markersize=14, label="exact")
        ax.set_xticks(x, [ip_text(h["item"]) for h in hits], rotation=60, fontsize=7)
        ax.set_title(f"{link}, 05:30-05:35")
    np.atleast_1d(axes)[0].set_ylabel("flows (estimate, bounds; red: the scan)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
