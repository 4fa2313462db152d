"""SlidingLpNorm against the exact windowed norm computed with numpy per query.

Run:  python -m pytest benchmarks/bench_lp_norms.py -s

Updates per second at p = 1 and p = 2 with rows_for(p, eps=0.1,
delta=0.05); query time against an exact answer that keeps the window's
elements and recomputes the norm with numpy (bincount + power sum) per
query; serialized bytes against window length, next to the exact method's
16 bytes (index, value) per element in the window.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, record
from lp_norms import SlidingLpNorm

N_UPDATES = 200_000
WINDOW = 100_000
BATCH = 20_000
DIM = 10_000


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(42)
    return np.arange(N_UPDATES, dtype=np.int64), rng.integers(0, DIM, N_UPDATES), rng.integers(1, 5, N_UPDATES).astype(float)


def exact_norm(ts, idx, val, now, window, p):
    m = ts > now - window
    v = np.bincount(idx[m], weights=val[m], minlength=DIM)
    return float((v**p).sum() ** (1 / p))


def build(ts, idx, val, p):
    s = SlidingLpNorm(p, WINDOW, eps=0.1, delta=0.05, seed=1)
    for a in range(0, ts.size, BATCH):
        s.update(ts[a : a + BATCH], idx[a : a + BATCH], val[a : a + BATCH])
    return s


@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.benchmark(group="lp-update")
def test_updates(benchmark, stream, p):
    ts, idx, val = stream
    s = benchmark.pedantic(build, args=(ts, idx, val, p), rounds=2, warmup_rounds=0)
    exact = exact_norm(ts, idx, val, int(ts[-1]), WINDOW, p)
    low, high = s.guarantee()
    assert low * exact <= s.estimate() <= high * exact
    record(f"SlidingLpNorm p={p:g} update", benchmark, N_UPDATES, rows=s.rows, buckets=len(s),
           bytes=len(s.to_bytes()), rel_error=s.estimate() / exact - 1)


@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.benchmark(group="lp-query")
def test_query_sketch(benchmark, stream, p):
    ts, idx, val = stream
    s = build(ts, idx, val, p)
    now = int(ts[-1])
    benchmark(s.estimate, now, WINDOW // 2)
    record(f"SlidingLpNorm p={p:g} query", benchmark, 1)


@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.benchmark(group="lp-query")
def test_query_exact_numpy(benchmark, stream, p):
    ts, idx, val = stream
    benchmark(exact_norm, ts, idx, val, int(ts[-1]), WINDOW // 2, p)
    record(f"exact numpy p={p:g} query", benchmark, 1)


def test_size_against_window():
    rows = []
    rng = np.random.default_rng(7)
    for window in (1_000, 10_000, 100_000, 1_000_000):
        n = 2 * window
        ts = np.arange(n, dtype=np.int64)
        idx = rng.integers(0, DIM, n)
        for p in (1.0, 2.0):
            s = SlidingLpNorm(p, window, eps=0.1, delta=0.05, seed=1)
            for a in range(0, n, 50_000):
                s.update(ts[a : a + 50_000], idx[a : a + 50_000])
            rows.append((window, p, len(s), len(s.to_bytes()), 16 * window))
    RESULTS["lp-size"] = {"rows": rows}


def test_summary():
    keys = [k for k in RESULTS if k.startswith(("SlidingLpNorm", "exact numpy"))]
    if len(keys) < 6:
        pytest.skip("run the whole file to get the summary")
    lines = [""]
    for p in ("1", "2"):
        u = RESULTS[f"SlidingLpNorm p={p} update"]
        q = RESULTS[f"SlidingLpNorm p={p} query"]
        e = RESULTS[f"exact numpy p={p} query"]
        lines.append(
            f"p={p}: {u['per_second']:,.0f} updates/s ({u['rows']} rows, {u['buckets']} buckets, "
            f"error {u['rel_error']:+.3f}); query {q['seconds'] * 1e3:.3f} ms vs exact numpy "
            f"{e['seconds'] * 1e3:.3f} ms ({e['seconds'] / q['seconds']:.1f}x)"
        )
    if "lp-size" in RESULTS:
        lines.append(f"\n{'window':>10s} {'p':>3s} {'buckets':>8s} {'sketch bytes':>13s} {'exact bytes':>12s}")
        for window, p, b, nbytes, exact in RESULTS["lp-size"]["rows"]:
            lines.append(f"{window:10,d} {p:3g} {b:8d} {nbytes:13,d} {exact:12,d}")
    print("\n".join(lines))
