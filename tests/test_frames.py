"""udaf.frames (the per-row engines of sliding_over) against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lp_norms import StableSketch, rows_for
from udaf.frames import frame_bounds, frame_bounds_runs, frame_counts, frame_distinct, frame_lp_norms, frame_sums

from .conftest import examples


@st.composite
def keyed_rows(draw):
    n = draw(st.integers(0, 200))
    gaps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    t = np.cumsum(np.array(gaps, dtype=np.int64)) + draw(st.integers(-50, 50))
    values = np.array(draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n)), dtype=np.int64)
    codes = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), dtype=np.int64)
    window = draw(st.integers(1, 40))
    return t, values, codes, window


def brute(t, values, codes, window):
    counts, sums, distinct = [], [], []
    for now in t.tolist():
        m = (t > now - window) & (t <= now)
        counts.append(int(m.sum()))
        sums.append(sum(int(v) for v in values[m]))
        distinct.append(len(set(codes[m].tolist())))
    return counts, sums, distinct


@settings(max_examples=examples(300), deadline=None)
@given(keyed_rows())
def test_frames_equal_brute_force(rows):
    t, values, codes, window = rows
    lo, hi = frame_bounds(t, window)
    counts, sums, distinct = brute(t, values, codes, window)
    assert frame_counts(lo, hi).tolist() == counts
    assert frame_sums(values, lo, hi).tolist() == sums
    assert frame_distinct(codes, lo, hi).tolist() == distinct


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(keyed_rows(), min_size=1, max_size=6), st.booleans())
def test_several_keys_in_one_pass_equal_each_key_alone(keys, huge):
    """frame_bounds_runs on the concatenation of several keys' runs, then
    the engines on the concatenation, answer as each key alone (also on
    the one-run-at-a-time path, taken when shifted times would overflow)."""
    window = keys[0][3] if not huge else 2**61
    t = np.concatenate([k[0] for k in keys])
    values = np.concatenate([k[1] for k in keys])
    codes = np.concatenate([k[2] for k in keys])
    starts = np.cumsum([0] + [k[0].size for k in keys[:-1]])
    nonempty = np.array([k[0].size > 0 for k in keys])
    lo, hi = frame_bounds_runs(t, starts[nonempty] if nonempty.any() else starts[:1], window)
    want = [brute(k[0], k[1], k[2], window) for k in keys]
    assert frame_counts(lo, hi).tolist() == [x for w in want for x in w[0]]
    assert frame_sums(values, lo, hi).tolist() == [x for w in want for x in w[1]]
    assert frame_distinct(codes, lo, hi).tolist() == [x for w in want for x in w[2]]


@settings(max_examples=examples(100), deadline=None)
@given(keyed_rows(), st.data())
def test_distinct_with_skipped_rows(rows, data):
    """Rows without an item (nulls) are skipped by mapping the frames onto
    the subsequence that has one, as sliding_over does."""
    t, _, codes, window = rows
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=t.size, max_size=t.size)), dtype=bool)
    lo, hi = frame_bounds(t, window)
    pos = np.flatnonzero(keep)
    got = frame_distinct(codes[pos], np.searchsorted(pos, lo), np.searchsorted(pos, hi))
    want = [len(set(codes[(t > now - window) & (t <= now) & keep].tolist())) for now in t.tolist()]
    assert got.tolist() == want


def test_bounds_refuse_unsorted_and_bad_window():
    with pytest.raises(ValueError, match="sorted"):
        frame_bounds(np.array([3, 1]), 5)
    with pytest.raises(ValueError, match="window"):
        frame_bounds(np.array([1, 3]), 0)


def test_sums_refuse_negative_and_overflow():
    lo, hi = frame_bounds(np.array([1, 2]), 5)
    with pytest.raises(ValueError, match="non-negative"):
        frame_sums(np.array([1, -1]), lo, hi)
    with pytest.raises(OverflowError, match="int64"):
        frame_sums(np.array([2**62, 2**62]), lo, hi)


def test_bounds_near_int64_min():
    t = np.array([np.iinfo(np.int64).min + 1, np.iinfo(np.int64).min + 3], dtype=np.int64)
    lo, hi = frame_bounds(t, 1 << 62)
    assert frame_counts(lo, hi).tolist() == [1, 2]
    # INT64_MIN itself: t - window wraps, the frame still starts at the first row
    t = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).min + 3], dtype=np.int64)
    for window in (10, 1 << 62, np.iinfo(np.int64).max):
        lo, hi = frame_bounds(t, window)
        assert frame_counts(lo, hi).tolist() == [1, 2], window


def test_lp_frames_equal_the_sketch_of_each_frame():
    """Each row's estimate is the StableSketch estimate of its frame's
    vector (same variables), and within eps of the exact norm for at least
    1 - 2 delta of the rows."""
    rng = np.random.default_rng(5)
    n, window, p, eps, delta = 3000, 400, 1.0, 0.1, 0.05
    t = np.sort(rng.integers(0, 6000, n))
    idx = rng.zipf(1.5, n) % 500
    val = rng.integers(1, 100, n).astype(float)
    lo, hi = frame_bounds(t, window)
    rows = rows_for(p, eps, delta)
    got = frame_lp_norms(p, rows, 3, idx, val, lo, hi, chunk=257)
    for i in (0, 1, 777, 1500, n - 1):
        sk = StableSketch(p, rows, seed=3).update(idx[lo[i]:hi[i]], val[lo[i]:hi[i]])
        assert got[i] == pytest.approx(sk.estimate(), rel=1e-9)
    exact = np.array([
        np.abs(np.bincount(idx[a:b], weights=val[a:b])).sum() for a, b in zip(lo, hi)
    ])
    assert np.mean(np.abs(got / exact - 1) <= eps) >= 1 - 2 * delta


@settings(max_examples=examples(60), deadline=None)  # a Python brute force per row: 60 keep it near 2 s
@given(st.lists(keyed_rows(), min_size=1, max_size=4), st.data(), st.sampled_from([1.0, 2.0]), st.booleans())
def test_exact_lp_frames_equal_brute_force(keys, data, p, small):
    """frame_lp_norms_exact over several keys in one pass, rows without an
    item or value skipped as sliding_over skips them: each row's norm of
    its frame's item frequencies, the nearest double of the exact sum
    (sqrt of it for p = 2); None where sum f^2 could pass int64."""
    from udaf.frames import frame_lp_norms_exact

    window = keys[0][3]
    t = np.concatenate([k[0] for k in keys])
    values = np.concatenate([k[1] for k in keys]) % (1000 if small else 1 << 40)
    codes = np.concatenate([k[2] for k in keys])
    key = np.repeat(np.arange(len(keys)), [k[0].size for k in keys])
    starts = np.cumsum([0] + [k[0].size for k in keys[:-1]])
    nonempty = np.array([k[0].size > 0 for k in keys])
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=t.size, max_size=t.size)), dtype=bool)
    lo, hi = frame_bounds_runs(t, starts[nonempty] if nonempty.any() else starts[:1], window)
    pos = np.flatnonzero(keep)
    got = frame_lp_norms_exact(p, codes[pos], values[pos], np.searchsorted(pos, lo), np.searchsorted(pos, hi))
    if not small and float(values[pos].sum()) ** p >= 2.0 ** 62:
        assert got is None
        return
    want = []
    for i in range(t.size):
        m = (key == key[i]) & (t > t[i] - window) & (t <= t[i]) & keep
        f = {}
        for c, v in zip(codes[m].tolist(), values[m].tolist()):
            f[c] = f.get(c, 0) + v
        total = sum(abs(x) ** int(p) for x in f.values())
        want.append(float(total) if p == 1.0 else float(np.sqrt(np.float64(total))))
    assert got is not None and got.tolist() == want
    assert frame_lp_norms_exact(1.5, codes[pos], values[pos], lo, hi) is None
