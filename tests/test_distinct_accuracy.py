"""Accuracy of the sliding distinct counters over many seeded trials.

Each trial hashes the same stream with a different seed (independent hash
functions).  One sketch per trial, with N = 10**6, is queried at windows of
10 to 10**6 items, so every cardinality comes from the same 200 trials.
Checked: mean bias within 2 percent, and relative standard deviation within
1.15x the theoretical 0.78/sqrt(m) (FM) or 1.04/sqrt(m) (HLL) at the
cardinalities where each estimator is meant to be used.
"""

from __future__ import annotations

import numpy as np
import pytest

from distinct import SlidingFM, SlidingHyperLogLog

TRIALS = 200
N = 1_000_000
CARDINALITIES = [10, 100, 1_000, 10_000, 100_000, 1_000_000]


def run_trials(make):
    """Relative estimates, shape (TRIALS, len(CARDINALITIES))."""
    ts = np.arange(N, dtype=np.int64)
    out = np.empty((TRIALS, len(CARDINALITIES)))
    for seed in range(TRIALS):
        sketch = make(seed).update(ts, ts)  # all items distinct
        for j, n in enumerate(CARDINALITIES):
            out[seed, j] = sketch.estimate(window=n) / n
    return out


@pytest.fixture(scope="module")
def fm_trials():
    return run_trials(lambda seed: SlidingFM(N, num_bitmaps=64, seed=seed))


@pytest.fixture(scope="module")
def hll_trials():
    return run_trials(lambda seed: SlidingHyperLogLog(N, precision=10, seed=seed))


def standard_error(est):
    return est.std(ddof=1) / np.sqrt(est.size)


@pytest.mark.parametrize("j, n", list(enumerate(CARDINALITIES)))
def test_fm_bias_and_spread(fm_trials, j, n):
    est = fm_trials[:, j]
    m = 64
    if n >= 5 * m:  # the PCSA regime, where FM is meant to be used
        assert abs(est.mean() - 1) <= 0.02, est.mean()
        assert est.std() <= 1.15 * 0.78 / np.sqrt(m), est.std()
    else:  # below 3m: linear counting on bit 0, unbiased but noisier
        assert abs(est.mean() - 1) <= 3 * standard_error(est), (est.mean(), standard_error(est))


@pytest.mark.parametrize("j, n", list(enumerate(CARDINALITIES)))
def test_hll_bias_and_spread(hll_trials, j, n):
    est = hll_trials[:, j]
    m = 1024
    assert abs(est.mean() - 1) <= 0.02, est.mean()
    assert est.std() <= 1.15 * 1.04 / np.sqrt(m), est.std()


@pytest.mark.parametrize("cls, kw", [(SlidingFM, {"num_bitmaps": 64}), (SlidingHyperLogLog, {"precision": 8})])
def test_repeated_items_and_later_now(cls, kw):
    """Heavy repetition (Zipf-like items) and queries after the stream ends:
    the window slides over time even when no item arrives."""
    rng = np.random.default_rng(11)
    n = 200_000
    ts = np.sort(rng.integers(0, 400_000, n))
    items = rng.zipf(1.3, n) % 50_000
    errs = []
    for seed in range(40):
        s = cls(100_000, seed=seed, **kw).update(ts, items)
        for now, w in ((ts[-1], 100_000), (ts[-1], 20_000), (ts[-1] + 50_000, 100_000)):
            mask = (ts > now - w) & (ts <= now)
            exact = np.unique(items[mask]).size
            errs.append(s.estimate(now=int(now), window=w) / exact - 1)
    errs = np.array(errs)
    theory = 0.78 / 8 if cls is SlidingFM else 1.04 / 16
    assert abs(errs.mean()) <= 0.03
    assert errs.std() <= 1.3 * theory
