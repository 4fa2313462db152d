"""Sliding counts and sums over the real numpy commit stream, checked exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ehist import ExponentialHistogram
from tests.commits import load_commits
from tests.exact import exact_sums

DAY = 86_400


@pytest.fixture(scope="module")
def commits():
    return load_commits()


@pytest.mark.parametrize("window_days, eps", [(30, 0.01), (7, 0.05), (365, 0.1)])
@pytest.mark.parametrize("what", ["count", "message_bytes"])
def test_commit_stream_every_1000th_commit(commits, window_days, eps, what):
    """Feed the stream in batches; after each batch query several windows
    and several 'now' values and compare with the exact answer."""
    ts, _, size = commits
    values = np.ones_like(ts) if what == "count" else size
    window = window_days * DAY
    h = ExponentialHistogram(window, eps)
    for start in range(0, len(ts), 1000):
        stop = min(start + 1000, len(ts))
        h.update(ts[start:stop], values[start:stop])
        nows = np.array([h.newest, h.newest + DAY, h.newest + window // 2, h.newest + window])
        for w in (window, window // 3, DAY):
            exact = exact_sums(ts[:stop], values[:stop], nows, w)
            lower, upper = h.bounds_many(nows, w)
            est = h.estimates(nows, w)
            for i in range(len(nows)):
                assert lower[i] <= exact[i] <= upper[i]
                assert abs(Fraction(float(est[i])) - exact[i]) <= Fraction(eps) * exact[i]
        n_in = int(np.sum(ts[:stop] > h.newest - window))
        assert len(h) <= ExponentialHistogram.bucket_bound(eps, n_in, int(values[:stop].max()))


def test_commit_stream_merge_by_author_parity(commits):
    """Two 'partitions' (authors split by hash parity) merged: same guarantee."""
    ts, author, size = commits
    window = 90 * DAY
    parts = [author % 2 == p for p in (0, 1)]
    hs = [ExponentialHistogram(window, 0.02).update(ts[m], size[m]) for m in parts]
    m = hs[0].merge(hs[1])
    nows = np.array([ts[-1], ts[-1] + 10 * DAY])
    for w in (window, 30 * DAY, DAY):
        exact = exact_sums(ts, size, nows, w)
        lower, upper = m.bounds_many(nows, w)
        for i in range(len(nows)):
            assert lower[i] <= exact[i] <= upper[i]
            assert abs(m.estimates(nows, w)[i] - exact[i]) <= 0.02 * exact[i] + 1e-9
