"""Insertion throughput of ExponentialHistogram against dgim and numpy.cumsum.

Run:  python -m pytest benchmarks/bench_ehist.py -s

A 10M-element 0/1 stream (timestamps = arrival index), eps = 0.01,
window = 1M, inserted in 100k-element batches; the dgim package fed the same
bits one at a time (its only mode); one numpy.cumsum pass over the same
values.  Ratios are computed from times measured in this same run.  Also
reported: serialized bytes per bucket and bucket count against the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.conftest import RESULTS, record
from ehist import ExponentialHistogram

N = 10_000_000
BATCH = 100_000
WINDOW = 1_000_000
EPS = 0.01


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(20261122)
    bits = rng.integers(0, 2, N)
    return np.arange(N, dtype=np.int64), bits


def insert_all(ts, bits):
    h = ExponentialHistogram(WINDOW, EPS)
    for i in range(0, N, BATCH):
        h.update(ts[i : i + BATCH], bits[i : i + BATCH])
    return h


def test_correct_on_small_input(stream):
    """Both contenders are checked before anything is timed."""
    dgim = pytest.importorskip("dgim")
    ts, bits = stream
    small = bits[:50_000]
    h = ExponentialHistogram(10_000, EPS).update(ts[:50_000], small)
    exact = int(small[-10_000:].sum())
    assert abs(h.estimate() - exact) <= EPS * exact
    d = dgim.Dgim(10_000, error_rate=EPS)
    for b in (small == 1).tolist():
        d.update(b)
    assert abs(d.get_count() - exact) <= EPS * exact


@pytest.mark.benchmark(group="insert-10M")
def test_ehist_batches(benchmark, stream):
    ts, bits = stream
    h = benchmark.pedantic(insert_all, args=(ts, bits), rounds=7, warmup_rounds=1)
    exact = int(bits[-WINDOW:].sum())
    assert abs(h.estimate() - exact) <= EPS * exact
    n_in = WINDOW
    record(
        "ehist",
        benchmark,
        N,
        buckets=len(h),
        bucket_bound=ExponentialHistogram.bucket_bound(EPS, n_in, 1),
        bytes=len(h.to_bytes()),
        bytes_per_bucket=len(h.to_bytes()) / len(h),
    )


@pytest.mark.benchmark(group="insert-10M")
def test_numpy_cumsum(benchmark, stream):
    _, bits = stream
    benchmark.pedantic(np.cumsum, args=(bits,), rounds=7, warmup_rounds=1)
    record("numpy.cumsum", benchmark, N)


@pytest.mark.benchmark(group="insert-10M")
def test_dgim_one_at_a_time(benchmark, stream):
    dgim = pytest.importorskip("dgim")
    _, bits = stream
    as_bool = (bits == 1).tolist()  # dgim counts only True, not 1

    def run():
        d = dgim.Dgim(WINDOW, error_rate=EPS)
        update = d.update
        for b in as_bool:
            update(b)
        return d

    d = benchmark.pedantic(run, rounds=1, iterations=1)
    exact = int(bits[-WINDOW:].sum())
    assert abs(d.get_count() - exact) <= EPS * exact
    record("dgim", benchmark, N)


def test_summary():
    """Print the table that the README quotes (ratios from this run)."""
    if not {"ehist", "numpy.cumsum"} <= RESULTS.keys():
        pytest.skip("run the whole file to get the summary")
    eh = RESULTS["ehist"]
    lines = [
        "",
        f"10M-element 0/1 stream, eps={EPS}, window={WINDOW:,}, batches of {BATCH:,}",
        f"{'contender':28s} {'best time':>10s} {'M elements/s':>13s}",
    ]
    for name in ("ehist", "numpy.cumsum", "dgim"):
        if name in RESULTS:
            r = RESULTS[name]
            lines.append(f"{name:28s} {r['seconds']:9.3f}s {r['per_second'] / 1e6:13.1f}")
    if "dgim" in RESULTS:
        lines.append(f"ehist / dgim throughput: {eh['per_second'] / RESULTS['dgim']['per_second']:.0f}x (target >= 100x)")
    lines.append(
        f"ehist time / one cumsum pass: {eh['seconds'] / RESULTS['numpy.cumsum']['seconds']:.2f}x (target <= 3x)"
    )
    lines.append(
        f"buckets: {eh['buckets']} (bound {eh['bucket_bound']:.0f}); serialized "
        f"{eh['bytes']} bytes = {eh['bytes_per_bucket']:.2f} bytes/bucket (target <= 2.5)"
    )
    print("\n".join(lines))
