"""Error against memory over an eps sweep, with the theory drawn beside.

Run:  python -m pytest benchmarks/bench_error_memory.py -s

* Exponential histogram: a 0/1 stream of 2M elements (bursty: runs of
  ones and zeros), count-based window N = 1M; per eps, the largest
  relative error over 400 queries (every 5,000 elements once the window
  is full, windows of N and N/7) against the exact counts, and the
  serialized bytes.  Beside: the paper's upper bound on buckets,
  ``(k/2 + 1)(log2(2N/k) + 2)`` with ``k = ceil(1/eps)``, times
  ``log2 N + log2 log2 N`` bits per bucket, and the lower bound of Datar
  et al. (Theorem 2): ``(k/16) log2(N/k)**2`` bits for any algorithm with
  relative error ``1/k``.
* Sliding L_p norm (p = 1 and 2): 40k updates over 2k coordinates,
  window 20k; per eps (delta = 0.05) the largest relative error over 20
  queries and the serialized bytes.
* Sliding Flajolet-Martin (PCSA): 400k items, window 100k (about 63k
  distinct in the window), per number of bitmaps the mean relative error
  over 8 seeds and the serialized bytes.  The sliding HyperLogLog's
  precision sweep is in bench_distinct.py (``distinct-error-memory``).
"""

from __future__ import annotations

import math

import numpy as np

from benchmarks.conftest import RESULTS
from distinct import SlidingFM
from ehist import ExponentialHistogram
from lp_norms import SlidingLpNorm

N_STREAM = 2_000_000
WINDOW = 1_000_000
EPS = [0.2, 0.1, 0.05, 0.02, 0.01, 0.005]


def bursty_bits(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    runs = rng.geometric(1 / 200, n // 50)
    bits = np.repeat(np.arange(runs.size) % 2, runs)[:n]
    noise = rng.random(bits.size) < 0.1
    return np.where(noise, 1 - bits, bits).astype(np.int64)


def test_eh_error_memory():
    bits = bursty_bits(N_STREAM)
    ts = np.arange(bits.size, dtype=np.int64)
    ones = ts[bits == 1]
    prefix = np.concatenate([[0], np.cumsum(bits)])
    rows = []
    for eps in EPS:
        h = ExponentialHistogram(WINDOW, eps)
        worst, step = 0.0, 5_000
        sizes = []
        for start in range(0, ts.size, step):
            h.update(ones[(ones >= start) & (ones < start + step)])
            now = start + step - 1
            if now >= WINDOW:
                for w in (WINDOW, WINDOW // 7):
                    exact = prefix[now + 1] - prefix[now + 1 - w]
                    if exact:
                        worst = max(worst, abs(h.estimate(now, w) - exact) / exact)
                sizes.append(len(h.to_bytes()))
        k = math.ceil(1 / eps)
        bound_buckets = (k / 2 + 1) * (math.log2(2 * WINDOW / k) + 2)
        bound_bits = bound_buckets * (math.log2(WINDOW) + math.log2(math.log2(WINDOW)))
        lower_bits = k / 16 * math.log2(WINDOW / k) ** 2
        rows.append({"eps": eps, "max_error": worst, "bytes": max(sizes), "buckets": len(h),
                     "bound_bits": bound_bits, "lower_bound_bits": lower_bits})
        assert worst <= eps
    RESULTS["eh-error-memory"] = {"rows": rows, "stream": N_STREAM, "window": WINDOW}
    print("\n  eps    max err    bytes   bound bytes   lower-bound bytes")
    for r in rows:
        print(f"  {r['eps']:<6g} {r['max_error']:.4f} {r['bytes']:8,d} {r['bound_bits'] / 8:11,.0f} "
              f"{r['lower_bound_bits'] / 8:15,.0f}")


def test_lp_error_memory():
    rng = np.random.default_rng(5)
    n, window = 40_000, 20_000
    ts = np.arange(n, dtype=np.int64)
    idx = rng.zipf(1.3, n) % 2_000
    vals = rng.integers(1, 50, n).astype(float)
    rows = []
    for p in (1.0, 2.0):
        for eps in (0.2, 0.1, 0.05):
            s = SlidingLpNorm(p, window, eps, 0.05, seed=1)
            worst = 0.0
            for start in range(0, n, 2_000):
                s.update(ts[start:start + 2_000], idx[start:start + 2_000], vals[start:start + 2_000])
                now = start + 1_999
                lo = max(0, now + 1 - window)
                exact = (np.abs(np.bincount(idx[lo:now + 1], weights=vals[lo:now + 1])) ** p).sum() ** (1 / p)
                worst = max(worst, abs(s.estimate() / exact - 1))
            rows.append({"p": p, "eps": eps, "max_error": worst, "bytes": len(s.to_bytes()), "rows": s.rows})
    RESULTS["lp-error-memory"] = {"rows": rows, "updates": n, "window": window}
    for r in rows:
        print(f"  p={r['p']:g} eps={r['eps']:<5g} max err {r['max_error']:.3f}  {r['bytes']:,} bytes")


def test_fm_error_memory():
    rng = np.random.default_rng(9)
    n, window = 400_000, 100_000
    ts = np.arange(n, dtype=np.int64)
    items = rng.integers(0, 1 << 40, n)
    exact = len(np.unique(items[n - window:]))
    rows = []
    for m in (16, 64, 256, 1024):
        errs, size = [], 0
        for seed in range(8):
            s = SlidingFM(window, num_bitmaps=m, seed=seed).update(ts, items)
            errs.append(abs(s.estimate() / exact - 1))
            size = len(s.to_bytes())
        rows.append({"bitmaps": m, "mean_error": float(np.mean(errs)), "bytes": size,
                     "theory": 0.78 / math.sqrt(m)})
    RESULTS["fm-error-memory"] = {"rows": rows, "items": n, "window": window, "distinct": exact}
    for r in rows:
        print(f"  FM m={r['bitmaps']:<5d} mean err {r['mean_error']:.3f} (0.78/sqrt(m) = {r['theory']:.3f}) "
              f"{r['bytes']:,} bytes")
