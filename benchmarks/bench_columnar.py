"""Many small histograms: ehist.columnar against one histogram at a time.

Run:  python -m pytest benchmarks/bench_columnar.py -s

What a Spark partition does in aggregate's two phases: 20,000 keys of 25
rows each (window 250,000, eps 0.01), counts and sums of values in
[0, 1500).  Phase 1 builds and serializes every key's histogram; phase 2
decodes the partials (4 per key here) and bounds their unions.  And what
``udaf.functions.eh_estimate`` does with an Arrow batch of stored sketches
(one per key): decode and estimate each.  Measured both ways in the same
run: HistogramColumn / histogram_bytes, and a loop of
ExponentialHistogram.update().to_bytes() / from_bytes().bounds().

The same steps for distinct counts of the rows' values (sliding
HyperLogLog, precision 12): distinct.columnar.sliding_hll_bytes, and
sketches_from_bytes + union_estimates (also what distinct_estimate does
with a batch), against update().to_bytes() and from_bytes() + merge() +
estimate() per key.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, record
from distinct import SlidingHyperLogLog
from distinct.columnar import sketches_from_bytes, sliding_hll_bytes, union_estimates
from ehist import ExponentialHistogram
from ehist.columnar import HistogramColumn, histogram_bytes
from ehist.hashing import hash64

KEYS, ROWS, WINDOW, EPS = 20_000, 25, 250_000, 0.01


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(0)
    codes = np.sort(rng.integers(0, KEYS, KEYS * ROWS))
    ts = rng.integers(0, 10**6, codes.size)
    order = np.lexsort((ts, codes))
    codes, ts = codes[order], ts[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    return ts, rng.integers(0, 1500, codes.size), starts


def one_at_a_time(ts, values, starts):
    ends = np.r_[starts[1:], ts.size]
    return [ExponentialHistogram(WINDOW, EPS).update(ts[a:b], None if values is None else values[a:b]).to_bytes()
            for a, b in zip(starts.tolist(), ends.tolist())]


def union_one_at_a_time(blobs):
    out = []
    for g in range(0, len(blobs), 4):
        hs = [ExponentialHistogram.from_bytes(b) for b in blobs[g:g + 4]]
        now = max(h.newest for h in hs)
        out.append(sum(h.bounds(now=now)[0] for h in hs))
    return out


@pytest.mark.parametrize("kind", ["count", "sum"])
def test_correct_on_small_input(runs, kind):
    ts, values, starts = runs
    v = values if kind == "sum" else None
    small = starts[:200]
    cut = int(starts[200])
    blobs = histogram_bytes(ts[:cut], small, None if v is None else v[:cut], window=WINDOW, eps=EPS)[0]
    assert blobs == one_at_a_time(ts[:cut], None if v is None else v[:cut], small)
    lower, _ = HistogramColumn.from_bytes(blobs).union_bounds(np.arange(0, 200, 4))
    assert lower.tolist() == union_one_at_a_time(blobs)


@pytest.mark.parametrize("kind", ["count", "sum"])
@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-histograms-build")
def test_build_and_serialize(benchmark, runs, kind, how):
    ts, values, starts = runs
    v = values if kind == "sum" else None
    if how == "columnar":
        benchmark.pedantic(lambda: histogram_bytes(ts, starts, v, window=WINDOW, eps=EPS), rounds=3)
    else:
        benchmark.pedantic(lambda: one_at_a_time(ts, v, starts), rounds=1)
    record(f"build {kind}s, {how}", benchmark, KEYS, keys=KEYS)


@pytest.mark.parametrize("kind", ["count", "sum"])
@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-histograms-union")
def test_decode_and_union(benchmark, runs, kind, how):
    ts, values, starts = runs
    blobs = histogram_bytes(ts, starts, values if kind == "sum" else None, window=WINDOW, eps=EPS)[0]
    if how == "columnar":
        def union():
            for a in range(0, len(blobs), 4096):
                HistogramColumn.from_bytes(blobs[a:a + 4096]).union_bounds(np.arange(0, min(4096, len(blobs) - a), 4))
        benchmark.pedantic(union, rounds=3)
    else:
        benchmark.pedantic(lambda: union_one_at_a_time(blobs), rounds=1)
    record(f"decode+union {kind}s, {how}", benchmark, KEYS, keys=KEYS)


@pytest.mark.parametrize("kind", ["count", "sum"])
@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-histograms-estimate")
def test_estimate_sketch_column(benchmark, runs, kind, how):
    pytest.importorskip("pyspark")
    from udaf import Count

    ts, values, starts = runs
    blobs = histogram_bytes(ts, starts, values if kind == "sum" else None, window=WINDOW, eps=EPS)[0]
    if how == "columnar":
        got = benchmark.pedantic(lambda: Count.answers(blobs, None, WINDOW // 2).estimate, rounds=3)
    else:
        got = benchmark.pedantic(lambda: estimates_one_at_a_time(ExponentialHistogram, blobs, WINDOW // 2), rounds=1)
    assert not np.isnan(got).any() and len(got) == KEYS
    record(f"estimate {kind}s, {how}", benchmark, KEYS, keys=KEYS)


def estimates_one_at_a_time(cls, blobs, window):
    """Estimates of stored sketches decoded and queried one by one."""
    return np.array([cls.from_bytes(b).estimate(None, window) for b in blobs])


def hll_one_at_a_time(ts, items, starts):
    ends = np.r_[starts[1:], ts.size]
    return [SlidingHyperLogLog(WINDOW).update(ts[a:b], items[a:b]).to_bytes()
            for a, b in zip(starts.tolist(), ends.tolist())]


def hll_union_one_at_a_time(blobs):
    out = []
    for g in range(0, len(blobs), 4):
        merged = SlidingHyperLogLog.from_bytes(blobs[g])
        for b in blobs[g + 1:g + 4]:
            merged = merged.merge(SlidingHyperLogLog.from_bytes(b))
        out.append(merged.estimate())
    return out


def hll_union_columnar(blobs):
    return union_estimates(sketches_from_bytes(blobs), np.arange(0, len(blobs), 4))


def test_distinct_correct_on_small_input(runs):
    ts, items, starts = runs
    small, cut = starts[:200], int(starts[200])
    blobs = sliding_hll_bytes(ts[:cut], small, hash64(items[:cut]), window=WINDOW)
    assert blobs == hll_one_at_a_time(ts[:cut], items[:cut], small)
    assert hll_union_columnar(blobs).tolist() == hll_union_one_at_a_time(blobs)


@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-sketches-build")
def test_distinct_build_and_serialize(benchmark, runs, how):
    ts, items, starts = runs
    if how == "columnar":  # hashing included, as the per-key update hashes its items
        benchmark.pedantic(lambda: sliding_hll_bytes(ts, starts, hash64(items), window=WINDOW), rounds=3)
    else:
        benchmark.pedantic(lambda: hll_one_at_a_time(ts, items, starts), rounds=1)
    record(f"build distincts, {how}", benchmark, KEYS, keys=KEYS)


@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-sketches-union")
def test_distinct_decode_and_union(benchmark, runs, how):
    ts, items, starts = runs
    blobs = sliding_hll_bytes(ts, starts, hash64(items), window=WINDOW)
    if how == "columnar":
        benchmark.pedantic(lambda: hll_union_columnar(blobs), rounds=3)
    else:
        benchmark.pedantic(lambda: hll_union_one_at_a_time(blobs), rounds=1)
    record(f"decode+union distincts, {how}", benchmark, KEYS, keys=KEYS)


@pytest.mark.parametrize("how", ["columnar", "one at a time"])
@pytest.mark.benchmark(group="many-sketches-estimate")
def test_distinct_estimate_sketch_column(benchmark, runs, how):
    pytest.importorskip("pyspark")
    from udaf import Distinct

    ts, items, starts = runs
    blobs = sliding_hll_bytes(ts, starts, hash64(items), window=WINDOW)
    if how == "columnar":
        got = benchmark.pedantic(lambda: Distinct.answers(blobs, None, WINDOW // 2).estimate, rounds=3)
    else:
        got = benchmark.pedantic(lambda: estimates_one_at_a_time(SlidingHyperLogLog, blobs, WINDOW // 2), rounds=1)
    assert list(got) == list(estimates_one_at_a_time(SlidingHyperLogLog, blobs, WINDOW // 2))
    record(f"estimate distincts, {how}", benchmark, KEYS, keys=KEYS)


def test_summary():
    lines = []
    for step in ("build", "decode+union", "estimate"):
        for kind in ("count", "sum", "distinct"):
            a, b = RESULTS.get(f"{step} {kind}s, columnar"), RESULTS.get(f"{step} {kind}s, one at a time")
            if a and b:
                lines.append(f"{step} {kind}s of {KEYS:,} keys: columnar {a['seconds']:.3f} s, one at a time "
                             f"{b['seconds']:.3f} s ({b['seconds'] / a['seconds']:.1f}x)")
    print("\n" + "\n".join(lines))
