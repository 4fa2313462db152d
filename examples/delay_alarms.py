"""Delay alarms over a probe feed: p95 / p99 per (monitor, destination) over
the last hour, from sliding quantile sketches.

The DataDepot setting (Golab et al., PAM 2012, in ../shared/papers): probes
between monitors and destinations report round-trip delays; operators watch
each pair's tail delay over the last hour and want an alarm when it crosses
the pair's threshold.  An exact answer keeps every probe of the hour; here
each pair keeps one :class:`quantiles.SlidingQuantiles` (one hour long,
``eps`` 0.02, values to 1%), fed the probes interval by interval as a
stream would, and every 15 minutes:

* the pair's p95 and p99 over the last hour come from the sketch, with
  bounds that always bracket the exact p99 (checked on every query);
* a pair is red when its p99 is above its threshold (three times its
  base delay); two red checks in a row raise an alarm ``(start, end,
  monitor, destination, peak p99)``.

The feed is generated: 4 monitors x 5 destinations, one probe per pair
every 2 seconds for a day, delays lognormal around a base of 5-80 ms, and
injected congestion on a few pairs (delays x 3-6 with a heavy tail, for
one to three hours).  The exact p99 and alarms, computed from the raw
probes only for comparison, are printed beside the sketches'.  With
``--spark`` the last hour's p95 / p99 per pair also come from Spark
(``udaf.aggregate``: the native exact plan and the sliding sketches).

Run:  python examples/delay_alarms.py [--out delay_alarms.png] [--spark]
"""

from __future__ import annotations

import argparse
import math
from datetime import datetime, timedelta, timezone

import numpy as np

from quantiles import SlidingQuantiles

INTERVAL = 900  # seconds between checks
HOUR = 3600
START = datetime(2026, 11, 20, tzinfo=timezone.utc)
RED_RUN = 2


def probe_feed(seed: int = 5, hours: int = 24, every: int = 2):
    """{(monitor, dst): (times, delays in ms)}, base delays and the injected
    congestion spells."""
    rng = np.random.default_rng(seed)
    pairs = [(f"M{m}", f"D{d}") for m in range(4) for d in range(5)]
    spells = {pairs[i]: (int(rng.integers(2, hours - 4)) * HOUR + int(rng.integers(0, 4)) * INTERVAL,
                         int(rng.integers(1, 4)) * HOUR, float(rng.uniform(3, 6)))
              for i in rng.choice(len(pairs), 4, replace=False)}
    feed, base = {}, {}
    times = np.arange(0, hours * HOUR, every)
    for p in pairs:
        base[p] = float(rng.uniform(5, 80))
        jitter = rng.integers(0, every, times.size)
        delay = base[p] * np.exp(rng.normal(0, 0.25, times.size))
        if p in spells:
            start, length, factor = spells[p]
            hot = (times >= start) & (times < start + length)
            delay[hot] *= factor * np.exp(rng.exponential(0.3, int(hot.sum())))
        feed[p] = (times + jitter, delay)
    return feed, base, spells


def exact_quantile(values: np.ndarray, q: float) -> float:
    """The value at position max(1, ceil(q n)) of the values sorted."""
    return float(np.partition(values, max(1, math.ceil(q * values.size)) - 1)[max(1, math.ceil(q * values.size)) - 1])


def alarms(red: dict, p99: dict) -> list:
    """(start, end, pair, peak p99) of every run of RED_RUN or more red checks."""
    out = []
    for pair, flags in red.items():
        run = 0
        for i, hot in enumerate(flags + [False]):
            if hot:
                run += 1
                continue
            if run >= RED_RUN:
                out.append((i - run, i - 1, pair, max(p99[pair][i - run:i])))
            run = 0
    return sorted(out)


def at(i: int) -> str:
    return f"{START + timedelta(seconds=(i + 1) * INTERVAL):%H:%M}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="delay_alarms.png")
    ap.add_argument("--spark", action="store_true", help="also answer the last hour with udaf.aggregate")
    args = ap.parse_args(argv)

    feed, base, spells = probe_feed()
    sketches = {p: SlidingQuantiles(HOUR, eps=0.02, accuracy=0.01) for p in feed}
    checks = int(max(t.max() for t, _ in feed.values()) // INTERVAL) + 1
    est = {p: {"p95": [], "p99": []} for p in feed}
    truth = {p: {"p95": [], "p99": []} for p in feed}
    red, red_exact = {p: [] for p in feed}, {p: [] for p in feed}
    for i in range(checks):
        now = (i + 1) * INTERVAL - 1  # the check at the end of interval i
        for p, (t, d) in feed.items():
            fresh = (t > now - INTERVAL) & (t <= now)
            s = sketches[p].update(t[fresh], d[fresh])
            hour = d[(t > now - HOUR) & (t <= now)]
            p95, p99 = s.quantiles([0.95, 0.99], now=now)
            low, high = s.quantile_bounds(0.99, now=now)
            exact99 = exact_quantile(hour, 0.99)
            assert low <= exact99 <= high  # the bounds always hold
            est[p]["p95"].append(p95)
            est[p]["p99"].append(p99)
            truth[p]["p95"].append(exact_quantile(hour, 0.95))
            truth[p]["p99"].append(exact99)
            red[p].append(p99 > 3 * base[p])
            red_exact[p].append(exact99 > 3 * base[p])

    rows = sum(t.size for t, _ in feed.values())
    size = np.mean([len(s.to_bytes()) for s in sketches.values()])
    per_hour = np.mean([(t > t.max() - HOUR).sum() for t, _ in feed.values()])
    print(f"{len(feed)} pairs, {rows:,} probes over {checks * INTERVAL / HOUR:.0f} hours; one sketch per pair: "
          f"{size / 1024:.1f} KiB (the hour's probes: {per_hour * 16 / 1024:.1f} KiB as (time, delay) pairs)")
    worst = max(abs(e - x) / x for p in feed for e, x in zip(est[p]["p99"], truth[p]["p99"]))
    print(f"p99 over the last hour, every 15 minutes: largest relative error against the exact p99 {worst:.2%}")

    ours = alarms(red, {p: est[p]["p99"] for p in feed})
    exact = alarms(red_exact, {p: truth[p]["p99"] for p in feed})
    print(f"\nAlarms (p99 over the last hour above 3x the pair's base delay, {RED_RUN} checks in a row):")
    print(f"  {'from':>5s}  {'to':>5s}  {'pair':8s}  {'peak p99 (sketch)':>17s}  {'threshold':>9s}")
    for a, b, p, peak in ours:
        print(f"  {at(a):>5s}  {at(b):>5s}  {p[0]}-{p[1]:5s}  {peak:14.1f} ms  {3 * base[p]:6.1f} ms")
    same = sum(x == y for p in feed for x, y in zip(red[p], red_exact[p]))
    print(f"exact alarms: {len(exact)} ({sum(a[:3] == b[:3] for a, b in zip(ours, exact))} identical); red checks "
          f"agreeing with the exact p99: {same} of {len(feed) * checks}")
    print("injected congestion: " + ", ".join(
        f"{p[0]}-{p[1]} {START + timedelta(seconds=s):%H:%M} for {n // HOUR} h" for p, (s, n, _) in
        sorted(spells.items())))
    assert {a[2] for a in ours} == set(spells)  # every congested pair raised an alarm, no other pair did

    if args.spark:
        spark_answers(feed, sketches)
    plot(est, truth, base, spells, args.out)
    print(f"plot written to {args.out}")


def spark_answers(feed, sketches) -> None:
    """The last hour's p95 and p99 per pair from Spark: ``aggregate`` with
    the native exact plan (percentile_disc) and with sliding sketches."""
    import pandas as pd

    from udaf import Quantile, aggregate
    from udaf.streaming import local_session

    spark = local_session("ehist-delay-alarms")
    frame = pd.concat([pd.DataFrame({"monitor": p[0], "dst": p[1], "ts": t, "delay_ms": d})
                       for p, (t, d) in feed.items()])
    probes = spark.createDataFrame(frame).cache()
    specs = dict(p95=Quantile("delay_ms", HOUR, q=0.95), p99=Quantile("delay_ms", HOUR, q=0.99))
    native = {(r["monitor"], r["dst"]): r for r in aggregate(probes, ["monitor", "dst"], "ts", **specs).collect()}
    sketch = {(r["monitor"], r["dst"]): r for r in aggregate(probes, ["monitor", "dst"], "ts",
                                                               strategy="two_phase", **specs).collect()}
    print("\nThe last hour per pair from Spark (udaf.aggregate): native exact plan | sliding sketches")
    for p in sorted(feed):
        n, s = native[p], sketch[p]
        print(f"  {p[0]}-{p[1]:3s}  p95 {n['p95']:7.1f} | {s['p95']:7.1f} ms   p99 {n['p99']:7.1f} | "
              f"{s['p99']:7.1f} ms")
        assert s["p99"] == sketches[p].quantile(0.99)  # the same sketch as the stream's
    spark.stop()


def plot(est, truth, base, spells, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = sorted(spells)
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.6))
    for ax, p in zip(np.atleast_1d(axes), pairs):
        hours = (np.arange(len(est[p]["p99"])) + 1) * INTERVAL / HOUR
        ax.plot(hours, truth[p]["p99"], "k-", lw=1, label="exact p99")
        ax.plot(hours, est[p]["p99"], "r.", ms=4, label="sketch p99")
        ax.plot(hours, est[p]["p95"], "b.", ms=3, label="sketch p95")
        ax.axhline(3 * base[p], color="gray", ls="--", lw=1, label="threshold")
        start, length, _ = spells[p]
        ax.axvspan(start / HOUR, (start + length) / HOUR, color="orange", alpha=0.15, label="congestion")
        ax.set_title(f"{p[0]} -> {p[1]}, last hour")
        ax.set_xlabel("hour of the day (UTC)")
    np.atleast_1d(axes)[0].set_ylabel("delay (ms)")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
