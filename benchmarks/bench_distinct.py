"""Sliding distinct counts against the hyperloglog package's SlidingHyperLogLog.

Run:  python -m pytest benchmarks/bench_distinct.py -s

Throughput: the same stream of (timestamp, integer item) pairs, ours in
100k-item batches, the peer one item at a time (its only mode).  Memory:
serialized bytes (ours: to_bytes(); the peer: pickle, its own persistence),
and the mean absolute relative error over independent trials, at several
precisions, so errors can be compared at equal memory.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, record
from distinct import SlidingFM, SlidingHyperLogLog

N_ITEMS = 1_000_000
N_PEER = 100_000
WINDOW = 50_000
BATCH = 100_000


def make_stream(n, offset=0, seed=1):
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 2, n)).astype(np.int64)
    items = rng.integers(0, 200_000, n) + offset  # repeats, ~60% distinct per window
    return ts, items


def exact_distinct(ts, items, window):
    return np.unique(items[ts > ts[-1] - window]).size


def ours_insert(ts, items, precision=12, seed=0):
    s = SlidingHyperLogLog(WINDOW, precision=precision, seed=seed)
    for i in range(0, ts.size, BATCH):
        s.update(ts[i : i + BATCH], items[i : i + BATCH])
    return s


def peer_insert(ts, items, precision=12):
    from hyperloglog import SlidingHyperLogLog as Peer

    error_rate = 1.04 / np.sqrt(2**precision) * 1.0001  # gives exactly this p
    s = Peer(error_rate, WINDOW)
    assert s.p == precision
    add = s.add
    for t, x in zip(ts.tolist(), items.tolist()):
        add(t, x)
    return s


def peer_estimate(s, now):
    # the peer's window is inclusive: ts >= now - window; ours: ts > now - window
    return s.card(now, WINDOW - 1)


def test_correct_on_small_input():
    pytest.importorskip("hyperloglog")
    ts, items = make_stream(20_000)
    exact = exact_distinct(ts, items, WINDOW)
    ours = ours_insert(ts, items).estimate()
    peer = peer_estimate(peer_insert(ts, items), int(ts[-1]))
    assert abs(ours / exact - 1) < 0.1 and abs(peer / exact - 1) < 0.1


@pytest.mark.benchmark(group="distinct-insert")
def test_ours_hll(benchmark):
    ts, items = make_stream(N_ITEMS)
    s = benchmark.pedantic(ours_insert, args=(ts, items), rounds=5, warmup_rounds=1)
    record("SlidingHyperLogLog (ehist)", benchmark, N_ITEMS, bytes=len(s.to_bytes()))


@pytest.mark.benchmark(group="distinct-insert")
def test_ours_fm(benchmark):
    ts, items = make_stream(N_ITEMS)

    def run():
        s = SlidingFM(WINDOW, num_bitmaps=256)
        for i in range(0, ts.size, BATCH):
            s.update(ts[i : i + BATCH], items[i : i + BATCH])
        return s

    s = benchmark.pedantic(run, rounds=5, warmup_rounds=1)
    record("SlidingFM (ehist)", benchmark, N_ITEMS, bytes=len(s.to_bytes()))


@pytest.mark.benchmark(group="distinct-insert")
def test_peer_hll(benchmark):
    pytest.importorskip("hyperloglog")
    ts, items = make_stream(N_PEER)
    s = benchmark.pedantic(peer_insert, args=(ts, items), rounds=1, iterations=1)
    record("hyperloglog.SlidingHyperLogLog", benchmark, N_PEER, bytes=len(pickle.dumps(s)))


def test_error_against_memory():
    """Mean |relative error| and serialized bytes at several precisions."""
    pytest.importorskip("hyperloglog")
    rows = []
    for p in (6, 8, 10, 12):
        ours_err, ours_bytes, peer_err, peer_bytes = [], [], [], []
        for trial in range(16):
            ts, items = make_stream(N_PEER, offset=trial * 10**9, seed=trial)
            exact = exact_distinct(ts, items, WINDOW)
            o = ours_insert(ts, items, precision=p, seed=trial)
            ours_err.append(abs(o.estimate() / exact - 1))
            ours_bytes.append(len(o.to_bytes()))
            if trial < 6:  # the peer is slow: fewer trials
                q = peer_insert(ts, items, precision=p)
                peer_err.append(abs(peer_estimate(q, int(ts[-1])) / exact - 1))
                peer_bytes.append(len(pickle.dumps(q)))
        rows.append((p, np.mean(ours_bytes), np.mean(ours_err), np.mean(peer_bytes), np.mean(peer_err)))
    RESULTS["distinct-error-memory"] = {"rows": [list(map(float, r)) for r in rows]}


def test_summary():
    names = ("SlidingHyperLogLog (ehist)", "SlidingFM (ehist)", "hyperloglog.SlidingHyperLogLog")
    if not all(n in RESULTS for n in names):
        pytest.skip("run the whole file to get the summary")
    lines = ["", f"{'contender':32s} {'items/s':>12s} {'bytes':>9s}"]
    for n in names:
        r = RESULTS[n]
        lines.append(f"{n:32s} {r['per_second']:12,.0f} {r['bytes']:9,d}")
    ratio = RESULTS[names[0]]["per_second"] / RESULTS[names[2]]["per_second"]
    lines.append(f"ehist SlidingHyperLogLog / peer throughput: {ratio:.0f}x (target >= 20x)")
    if "distinct-error-memory" in RESULTS:
        lines.append(
            f"\n{'p':>3s} {'ours bytes':>11s} {'ours |err|':>11s} {'peer bytes':>11s} {'peer |err|':>11s}"
            "   |err| x sqrt(bytes): ours, peer (lower is better)"
        )
        for p, ob, oe, pb, pe in RESULTS["distinct-error-memory"]["rows"]:
            lines.append(
                f"{int(p):3d} {ob:11,.0f} {oe:11.4f} {pb:11,.0f} {pe:11.4f}"
                f"   {oe * ob ** 0.5:6.2f}, {pe * pb ** 0.5:6.2f}"
            )
    print("\n".join(lines))
