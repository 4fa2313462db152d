"""Loss alarms over a probe feed, the DataDepot case study, from sliding sums.

Golab et al., *A Sequence-Oriented Stream Warehouse Paradigm for Network
Monitoring Applications* (PAM 2012): probes between source and destination
points report losses; every 15 minutes each (source, destination) pair gets
a loss measurement, red when above the pair's threshold; four consecutive
red intervals raise an alarm ``(start, end, source, destination, average
loss)``, repeated at every further red interval.

Here each pair keeps two exponential histograms over the last six hours
(the paper's longest alarm): probes sent and probes lost, fed the raw probe
records interval by interval as a stream would.  Every 15 minutes:

* the interval's loss is ``lost / sent`` over the last 15 minutes, from
  windowed sums, with bounds (lower lost / upper sent, upper lost / lower
  sent);
* an alarm's average loss is ``lost / sent`` over the window since its
  first red interval: a sliding average from the same two histograms, for
  any window up to six hours, without keeping a row.

The feed is generated: 8 sources x 6 destinations, two days of 15-minute
intervals, a few hundred probes per pair and interval at a background loss
of 0.1-0.6 %, per-pair thresholds of 1 % or 2 %, and injected outages
(elevated loss for one to five hours).  The exact alarms, computed from the
raw probes, are printed beside ours.

Run:  python examples/loss_alarms.py          (--all prints every alarm row)
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone

import numpy as np

from ehist import ExponentialHistogram

INTERVAL = 900  # seconds
HORIZON = 6 * 3600  # the longest alarm the histograms answer for
START = datetime(2026, 11, 20, tzinfo=timezone.utc)
RED_RUN = 4


def probe_feed(seed: int = 11, days: int = 2):
    """{(src, dst): (probe times, lost flags)} and per-pair thresholds (%)."""
    rng = np.random.default_rng(seed)
    pairs = [(f"S{s}", f"D{d}") for s in range(8) for d in range(6)]
    intervals = days * 86_400 // INTERVAL
    outages = {pairs[i]: [] for i in rng.choice(len(pairs), 7, replace=False)}
    for pair in outages:
        for _ in range(rng.integers(1, 3)):
            first = int(rng.integers(0, intervals - 20))
            outages[pair].append((first, first + int(rng.integers(3, 21)), float(rng.uniform(0.015, 0.06))))
    feed, thresholds = {}, {}
    for pair in pairs:
        thresholds[pair] = float(rng.choice([1.0, 2.0]))
        base = rng.uniform(0.001, 0.006)
        per = rng.integers(200, 600, intervals)
        times = np.concatenate([i * INTERVAL + np.sort(rng.integers(0, INTERVAL, n)) for i, n in enumerate(per)])
        rate = np.full(times.size, base)
        for first, last, loss in outages.get(pair, []):
            rate[(times >= first * INTERVAL) & (times < last * INTERVAL)] = loss
        feed[pair] = (times.astype(np.int64), rng.random(times.size) < rate)
    return feed, thresholds, intervals


def alarms_from_sketches(feed, thresholds, intervals, eps: float):
    """Alarm rows, interval by interval, from two histograms per pair."""
    out, state = [], {}
    sizes = []
    for pair, (times, lost) in feed.items():
        sent_h, lost_h = ExponentialHistogram(HORIZON, eps), ExponentialHistogram(HORIZON, eps)
        bounds = np.searchsorted(times, np.arange(1, intervals + 1) * INTERVAL)
        run_start, prev = None, 0
        for i, b in enumerate(bounds):
            now = (i + 1) * INTERVAL - 1  # the interval's last second
            t, lo = times[prev:b], lost[prev:b]
            prev = b
            sent_h.update(t)
            lost_h.update(t[lo])
            loss = 100 * lost_h.estimate(now, INTERVAL) / max(sent_h.estimate(now, INTERVAL), 1)
            if loss > thresholds[pair]:
                run_start = i if run_start is None else run_start
                red = i - run_start + 1
                if red >= RED_RUN:
                    span = min(red * INTERVAL, HORIZON)
                    avg = 100 * lost_h.estimate(now, span) / max(sent_h.estimate(now, span), 1)
                    out.append((run_start, i, pair, avg))
            else:
                run_start = None
        sizes.append(len(sent_h.to_bytes()) + len(lost_h.to_bytes()))
        state[pair] = (sent_h, lost_h)
    return out, sizes


def exact_alarms(feed, thresholds, intervals):
    out = []
    for pair, (times, lost) in feed.items():
        idx = times // INTERVAL
        sent = np.bincount(idx, minlength=intervals)
        bad = np.bincount(idx, weights=lost, minlength=intervals)
        run_start = None
        for i in range(intervals):
            if 100 * bad[i] / max(sent[i], 1) > thresholds[pair]:
                run_start = i if run_start is None else run_start
                if i - run_start + 1 >= RED_RUN:
                    first = max(run_start, i + 1 - HORIZON // INTERVAL)
                    out.append((run_start, i, pair, 100 * bad[first:i + 1].sum() / sent[first:i + 1].sum()))
            else:
                run_start = None
    return out


def clock(i: int) -> str:
    return f"{START + timedelta(seconds=i * INTERVAL):%Y-%m-%d %H:%M}"


def main() -> None:
    eps = 0.01
    feed, thresholds, intervals = probe_feed()
    ours, sizes = alarms_from_sketches(feed, thresholds, intervals, eps)
    exact = {(a, b, p): loss for a, b, p, loss in exact_alarms(feed, thresholds, intervals)}
    probes = sum(t.size for t, _ in feed.values())
    print(f"{len(feed)} pairs, {intervals} intervals of 15 minutes, {probes:,} probes; "
          f"two histograms per pair (eps = {eps}, six-hour horizon), "
          f"{np.mean(sizes):,.0f} bytes per pair on average")
    # DataDepot outputs a row at every red interval of an alarm; show the
    # first alarm that way, then each alarm's latest row (--all: every row)
    last, rows_of = {}, {}
    for row in ours:
        last[(row[0], row[2])] = row
        rows_of.setdefault((row[0], row[2]), []).append(row)
    first = next((k for k, v in rows_of.items() if len(v) >= 2), next(iter(rows_of), None))
    shown = ours if "--all" in sys.argv else rows_of.get(first, []) + [r for k, r in last.items() if k != first]
    print("\nalarms (start, end, source, destination, average loss %), as DataDepot prints them:")
    print(f"{'start':>16s}  {'end':>16s}  src dst  {'avg loss':>8s}  {'exact':>6s}")
    for i, (a, b, (s, d), loss) in enumerate(shown):
        e = exact.get((a, b, (s, d)))
        mark = f"{e:6.2f}" if e is not None else "  (not an exact alarm)"
        print(f"{clock(a):>16s}  {clock(b + 1):>16s}  {s:>3s} {d:>3s}  {loss:8.2f}  {mark}")
        if i == len(rows_of.get(first, [])) - 1 and "--all" not in sys.argv:
            print(f"{'... then the latest row of each other alarm':^60s}")
    ours_keys = {(a, b, p) for a, b, p, _ in ours}
    missed = [k for k in exact if k not in ours_keys]
    worst = max((abs(loss / exact[(a, b, p)] - 1) for a, b, p, loss in ours if (a, b, p) in exact), default=0)
    print(f"\n{len(last)} alarms, {len(ours)} alarm rows from the sketches, {len(exact)} exact rows; "
          f"{len(ours_keys - exact.keys())} extra, {len(missed)} missed; average loss within {worst:.1%} "
          f"of exact (a ratio of two windowed sums, each within {eps:.0%})")
    assert worst <= 2 * eps / (1 - eps) + 1e-12


if __name__ == "__main__":
    main()
