"""Accuracy of the sliding distinct counters over many seeded trials.

Each trial hashes the same stream with a different seed (independent hash
functions).  One sketch per trial, with N = 10**5, is queried at windows of
10 to 10**5 items, so every cardinality comes from the same 200 trials
(10**6 items, N = 10**6: with ``--slow``).
Checked: mean bias within 2 percent, and relative standard deviation within
1.15x the theoretical 0.78/sqrt(m) (FM) or 1.04/sqrt(m) (HLL) at the
cardinalities where each estimator is meant to be used.
"""

from __future__ import annotations

import numpy as np
import pytest

from distinct import SlidingFM, SlidingHyperLogLog

TRIALS = 200
#: Cardinalities of the default run (sketches with N = 10**5); the 10**6
#: column of the README's table (N = 10**6, ten times the hashing) runs
#: with ``--slow``.
CARDINALITIES = [10, 100, 1_000, 10_000, 100_000]
LARGE = [1_000_000]


def run_trials(make, cardinalities):
    """Relative estimates, shape (TRIALS, len(cardinalities)), of sketches
    of the largest cardinality's window."""
    n_max = max(cardinalities)
    ts = np.arange(n_max, dtype=np.int64)
    out = np.empty((TRIALS, len(cardinalities)))
    for seed in range(TRIALS):
        sketch = make(n_max, seed).update(ts, ts)  # all items distinct
        for j, n in enumerate(cardinalities):
            out[seed, j] = sketch.estimate(window=n) / n
    return out


def fm(n, seed):
    return SlidingFM(n, num_bitmaps=64, seed=seed)


def hll(n, seed):
    return SlidingHyperLogLog(n, precision=10, seed=seed)


@pytest.fixture(scope="module")
def fm_trials():
    return run_trials(fm, CARDINALITIES)


@pytest.fixture(scope="module")
def hll_trials():
    return run_trials(hll, CARDINALITIES)


def standard_error(est):
    return est.std(ddof=1) / np.sqrt(est.size)


def check_fm(est, n):
    m = 64
    if n >= 5 * m:  # the PCSA regime, where FM is meant to be used
        assert abs(est.mean() - 1) <= 0.02, est.mean()
        assert est.std() <= 1.15 * 0.78 / np.sqrt(m), est.std()
    else:  # below 3m: linear counting on bit 0, unbiased but noisier
        assert abs(est.mean() - 1) <= 3 * standard_error(est), (est.mean(), standard_error(est))


def check_hll(est):
    m = 1024
    assert abs(est.mean() - 1) <= 0.02, est.mean()
    assert est.std() <= 1.15 * 1.04 / np.sqrt(m), est.std()


@pytest.mark.parametrize("j, n", list(enumerate(CARDINALITIES)))
def test_fm_bias_and_spread(fm_trials, j, n):
    check_fm(fm_trials[:, j], n)


@pytest.mark.parametrize("j, n", list(enumerate(CARDINALITIES)))
def test_hll_bias_and_spread(hll_trials, j, n):
    check_hll(hll_trials[:, j])


@pytest.mark.slow
def test_a_million_distinct_items():
    """The same checks at 10**6 items (sketches with N = 10**6)."""
    check_fm(run_trials(fm, LARGE)[:, 0], LARGE[0])
    check_hll(run_trials(hll, LARGE)[:, 0])


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
