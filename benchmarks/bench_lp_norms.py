"""SlidingLpNorm against the exact windowed norm computed with numpy per query.

Run:  python -m pytest benchmarks/bench_lp_norms.py -s

Updates per second at p = 1 and p = 2 with rows_for(p, eps=0.1,
delta=0.05); query time against an exact answer that keeps the window's
elements and recomputes the norm with numpy (bincount + power sum) per
query; serialized bytes against window length, next to the exact method's
16 bytes (index, value) per element in the window.

Many keys (``test_many_keys``): a stored table of L_p sketches, one per
key and site (4 sites, 25 flows per key and site in a day, p = 2 at eps
and delta 0.1: 405 rows), united and answered the way the Spark functions
do it with a batch: one sketch at a time through the class (the Family
defaults, what ``sliding_lp_*`` did before lp_norms.columnar) against
the columnar paths (``LpNorm.merge_groups`` / ``union_answers`` /
``answers`` / ``union``), medians of alternating rounds, the sketches in
one buffer as an Arrow batch hands them over.  ``EHIST_BENCH_LP_KEYS``:
the keys (default 2,000).
"""

from __future__ import annotations

import numpy as np
import pytest

import os
import statistics
import time

from benchmarks.conftest import RESULTS, median_interval, note_load, record
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


KEYS = int(os.environ.get("EHIST_BENCH_LP_KEYS", "2000"))
SITES, PER_SITE, DAY = 4, 25, 86_400


def test_many_keys():
    pytest.importorskip("numba")
    pytest.importorskip("pandas")
    from ehist.blobs import Blobs
    from udaf import LpNorm
    from udaf.family import Family

    spec = LpNorm("dst", DAY, value="bytes", p=2.0, eps=0.1, delta=0.1)
    cls = type(spec)
    rng = np.random.default_rng(5)
    blobs = []
    for _ in range(KEYS * SITES):
        ts = np.sort(rng.integers(0, DAY, PER_SITE))
        blobs.append(spec.make(DAY).update(ts, rng.integers(0, 1000, PER_SITE),
                                           rng.integers(40, 1500, PER_SITE).astype(float)).to_bytes())
    raw = Blobs.of(blobs)
    starts = np.arange(0, len(raw), SITES)
    nows = np.full(len(raw), DAY)
    paths = {
        "unite 4 sites (merge_groups)": (lambda: Family.merge_groups.__func__(cls, raw, starts),
                                         lambda: cls.merge_groups(raw, starts)),
        "unite, then answer (union_answers)": (lambda: Family.answers.__func__(
            cls, Family.merge_groups.__func__(cls, raw, starts), None, None),
                                               lambda: cls.union_answers(raw, starts, None, None)),
        "answer each sketch, last hour (answers)": (lambda: Family.answers.__func__(cls, raw, nows, 3600),
                                                    lambda: cls.answers(raw, nows, 3600)),
        "add a key's partials (LpNorm.union)": (lambda: spec._union_each(raw, starts, None),
                                                lambda: spec.union(raw, starts)),
    }
    for question, (each, columnar) in paths.items():
        a, b = each(), columnar()  # warm-up, and the same answers
        same = (lambda x, y: x == y) if isinstance(a, list) else (lambda x, y: np.array_equal(x.estimate, y.estimate))
        assert same(a, b), question
        times = {"each": [], "columnar": []}
        for round_ in range(5):
            for name in (("each", "columnar") if round_ % 2 == 0 else ("columnar", "each")):
                t = time.perf_counter()
                (each if name == "each" else columnar)()
                times[name].append(time.perf_counter() - t)
        ratios = [x / y for x, y in zip(times["each"], times["columnar"])]
        RESULTS[f"lp-keys | {question}"] = {
            "keys": KEYS, "sites": SITES, "rows": spec.make(DAY).rows, "bytes": int(raw.lengths.sum()),
            "each_median": statistics.median(times["each"]), "columnar_median": statistics.median(times["columnar"]),
            "speedup_median": statistics.median(ratios), "speedup_interval": list(median_interval(ratios))}
    note_load("lp-keys")


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
    for key in (k for k in RESULTS if k.startswith("lp-keys | ")):
        r = RESULTS[key]
        lines.append(f"{key[10:]} at {r['keys']:,} keys x {r['sites']} sites ({r['bytes'] / 1e6:.0f} MB): one at a "
                     f"time {r['each_median']:.3f} s, columnar {r['columnar_median']:.3f} s, "
                     f"{r['speedup_median']:.1f}x faster")
    print("\n".join(lines))
