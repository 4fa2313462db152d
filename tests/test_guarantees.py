"""The EH guarantees against a brute-force exact window, zero tolerance.

For generated streams and every query (every now in [newest, newest + N],
every window 1..N): lower <= exact <= upper and |estimate - exact| <= eps *
exact, and the bucket count stays within the bound of Theorem 5.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import ExponentialHistogram
from tests.conftest import examples
from tests.exact import exact_sums, in_window_count
from tests.strategies import chunked, eps_values, streams, values_small


def check_all_queries(h: ExponentialHistogram, ts, vs, window: int, max_window: int = 64):
    """Every legal (now, window) pair, checked exactly."""
    newest = h.newest
    windows = range(1, window + 1) if window <= max_window else sorted(
        {1, 2, 3, window // 3, window // 2, window - 1, window}
    )
    eps = Fraction(h.eps)
    nows = np.arange(newest, newest + min(window, max_window) + 2, dtype=np.int64)
    for w in windows:
        exact = exact_sums(ts, vs, nows, w)
        lower, upper = h.bounds_many(nows, w)
        est = h.estimates(nows, w)
        for i, now in enumerate(nows.tolist()):
            assert lower[i] <= exact[i] <= upper[i], (now, w, lower[i], exact[i], upper[i])
            assert abs(Fraction(float(est[i])) - exact[i]) <= eps * exact[i], (
                now, w, est[i], exact[i])
        # the scalar API agrees with the vectorized one
        lo0, up0 = h.bounds(int(nows[0]), w)
        assert (lo0, up0) == (lower[0], upper[0])
        assert h.estimate(int(nows[-1]), w) == est[-1]


def check_bucket_bound(h: ExponentialHistogram, ts, vs):
    n, r = in_window_count(ts, vs, h.newest, h.window)
    assert len(h) <= ExponentialHistogram.bucket_bound(h.eps, n, r), (len(h), n, r)


@settings(max_examples=examples(150), deadline=None)
@given(data=streams(), window=st.integers(1, 60), eps=eps_values, batches=st.data())
def test_bounds_and_error_batched(data, window, eps, batches):
    ts, vs = data
    h = ExponentialHistogram(window, eps)
    for a, b in batches.draw(chunked(len(ts))):
        h.update(ts[a:b], vs[a:b])
        check_bucket_bound(h, ts[:b], vs[:b])
    check_all_queries(h, ts, vs, window)


@settings(max_examples=examples(100), deadline=None)
@given(data=streams(values=values_small), window=st.integers(1, 40), eps=eps_values)
def test_bounds_and_error_one_at_a_time(data, window, eps):
    ts, vs = data
    h = ExponentialHistogram(window, eps)
    for i in range(len(ts)):
        h.add(int(ts[i]), int(vs[i]))
        check_bucket_bound(h, ts[: i + 1], vs[: i + 1])
        if i % 7 == 0:
            check_all_queries(h, ts[: i + 1], vs[: i + 1], window, max_window=12)
    check_all_queries(h, ts, vs, window)


@settings(max_examples=examples(60), deadline=None)
@given(data=streams(max_segments=60, values=values_small, max_gap=3), eps=eps_values)
def test_count_based_window(data, eps):
    """Count-based windows: timestamps are arrival indexes, ts = 0, 1, 2, ..."""
    _, vs = data
    window = max(1, len(vs) // 3)
    ts = np.arange(len(vs))
    h = ExponentialHistogram(window, eps).update(ts, vs)
    check_all_queries(h, ts, vs, window)
    exact_last = int(vs[-window:].sum())
    lower, upper = h.bounds()
    assert lower <= exact_last <= upper


@settings(max_examples=examples(80), deadline=None)
@given(data=streams(values=values_small), eps=eps_values, batches=st.data())
def test_batch_equals_one_at_a_time_without_expiry(data, eps, batches):
    """With a window covering the whole stream nothing expires, and batch
    insertion gives exactly the histogram of one-at-a-time insertion."""
    ts, vs = data
    window = int(ts[-1] - ts[0]) + 1
    seq = ExponentialHistogram(window, eps)
    for t, v in zip(ts.tolist(), vs.tolist()):
        seq.add(t, v)
    bat = ExponentialHistogram(window, eps)
    for a, b in batches.draw(chunked(len(ts))):
        bat.update(ts[a:b], vs[a:b])
    assert bat == seq
    assert bat.to_bytes() == seq.to_bytes()


@settings(max_examples=examples(40), deadline=None)
@given(
    n=st.integers(1, 3000),
    window=st.integers(1, 3000),
    eps=st.sampled_from([0.01, 0.02, 0.05]),
    seed=st.integers(0, 2**32 - 1),
)
def test_small_eps_long_streams(n, window, eps, seed):
    """Long 0/1 streams at the benchmark's eps, spot-checked windows."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 3, n))
    vs = rng.integers(0, 2, n)
    h = ExponentialHistogram(window, eps).update(ts, vs)
    check_bucket_bound(h, ts, vs)
    check_all_queries(h, ts, vs, window, max_window=8)
