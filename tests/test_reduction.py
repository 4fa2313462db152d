"""Rows reduced before any synopsis sees them give the same bytes.

What Spark's own aggregation may do before Python builds a sketch (issue:
native work before Python in the two-phase path): counts and sums per
timestamp for the exponential histogram, and for the sliding distinct
counters each item's latest timestamp.  These are identities of the
synopses' state, so the sketches must be byte-identical, not only close.
(L_p sketches add floats: per-(timestamp, index) sums answer alike but
their bytes differ, so they are not reduced.)
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import ExponentialHistogram
from tests.conftest import examples

streams = st.tuples(st.integers(1, 400), st.integers(1, 60), st.integers(0, 2**31), st.integers(1, 300))


def stream(n, spread, seed):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, spread, n))  # many rows per timestamp
    return rng, t


@settings(max_examples=examples(60), deadline=None)
@given(streams, st.sampled_from([0.01, 0.1, 0.5]))
def test_histograms_of_per_timestamp_counts_and_sums_equal_the_rows(params, eps):
    n, spread, seed, window = params
    rng, t = stream(n, spread, seed)
    v = rng.integers(0, 40, n)
    at, first = np.unique(t, return_index=True)
    counts = np.diff(np.append(first, n))
    sums = np.add.reduceat(v, first)
    rows = ExponentialHistogram(window, eps).update(t)
    assert ExponentialHistogram(window, eps).update(at, counts).to_bytes() == rows.to_bytes()
    rows = ExponentialHistogram(window, eps).update(t, v)
    assert ExponentialHistogram(window, eps).update(at, sums).to_bytes() == rows.to_bytes()


@settings(max_examples=examples(60), deadline=None)
@given(streams, st.integers(1, 50))
def test_distinct_counters_of_each_items_latest_time_equal_the_rows(params, universe):
    n, spread, seed, window = params
    rng, t = stream(n, spread, seed)
    items = rng.integers(0, universe, n)
    latest = {}
    for ti, x in zip(t.tolist(), items.tolist()):
        latest[x] = ti
    order = sorted(latest, key=lambda x: (latest[x], x))
    lt, li = np.array([latest[x] for x in order]), np.array(order)
    for make in (lambda: SlidingHyperLogLog(window, 6, seed=seed % 7), lambda: SlidingFM(window, 16, seed % 5)):
        assert make().update(lt, li).to_bytes() == make().update(t, items).to_bytes()
