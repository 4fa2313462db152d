"""distinct.columnar: many sliding HyperLogLogs at once, equal to one at a time.

Each vectorized step against the per-sketch code it replaces (which
test_distinct and test_distinct_accuracy check against exact counts):
sliding_hll_bytes byte for byte against update_hashes + to_bytes, and
union_estimates float for float against merge + estimate.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distinct.columnar
from distinct import SlidingHyperLogLog
from distinct.columnar import sliding_hll_bytes, union_estimates
from ehist import IncompatibleSketchError
from ehist.hashing import hash64
from tests.conftest import examples


@st.composite
def hll_runs(draw, max_runs=6):
    """(timestamps, items, starts): several keys' streams one after the
    other, some empty, some unsorted within the run, some with many equal
    timestamps, some on a coarse grid (the tick)."""
    ts, items, starts = [], [], []
    n = 0
    for _ in range(draw(st.integers(1, max_runs))):
        starts.append(n)
        if draw(st.integers(0, 5)) == 0:
            continue
        size = draw(st.integers(1, 300))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        grid = draw(st.sampled_from([1, 1, 7, 1000]))
        span = draw(st.sampled_from([5, 100, 10_000, 10**9]))
        t = rng.integers(-span, span, size) * grid
        if draw(st.booleans()):
            t = np.sort(t)
        ts.append(t)
        items.append(rng.integers(0, draw(st.sampled_from([3, 50, 10**6])), size))
        n += size
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    return cat(ts), cat(items), np.array(starts, dtype=np.int64)


def tiny_chunks():
    """Chunks of two runs or groups and a few rows, so that every example
    crosses chunk boundaries (the defaults are thousands)."""
    return mock.patch.multiple(distinct.columnar, _RUNS_AT_ONCE=2, _ROWS_AT_ONCE=5, _GROUPS_AT_ONCE=2)


def per_run(ts, hashes, starts, window, precision, seed):
    ends = list(starts[1:]) + [ts.size]
    return [SlidingHyperLogLog(window, precision, seed).update_hashes(ts[a:b], hashes[a:b])
            for a, b in zip(starts, ends)]


@settings(max_examples=examples(200), deadline=None)
@given(data=hll_runs(), window=st.sampled_from([1, 3, 50, 5_000, 10**6, 2**62]),
       precision=st.integers(4, 10), seed=st.sampled_from([0, 7, 2**64 - 1]))
def test_bytes_equal_update_then_to_bytes_per_run(data, window, precision, seed):
    ts, items, starts = data
    hashes = hash64(items, seed)
    expected = [s.to_bytes() for s in per_run(ts, hashes, starts, window, precision, seed)]
    assert sliding_hll_bytes(ts, starts, hashes, window=window, precision=precision, seed=seed) == expected
    with tiny_chunks():
        assert sliding_hll_bytes(ts, starts, hashes, window=window, precision=precision, seed=seed) == expected


@settings(max_examples=examples(200), deadline=None)
@given(data=hll_runs(), window=st.sampled_from([1, 3, 50, 5_000, 10**6]), precision=st.integers(4, 10),
       cut=st.integers(0, 4), later=st.sampled_from([None, 0, 1, 40, 10**6]),
       query=st.sampled_from([None, 1, 40]))
def test_union_estimates_equal_merge_then_estimate(data, window, precision, cut, later, query):
    """Runs as one key's partials, grouped into keys by ``cut``; each
    group's estimate equals the merge's, to the last bit."""
    ts, items, starts = data
    sketches = per_run(ts, hash64(items, 0), starts, window, precision, 0)
    groups = np.array(sorted({0} | set(range(0, len(sketches), cut + 1))), dtype=np.int64)
    ends = list(groups[1:]) + [len(sketches)]
    newest = [max((s.newest for s in sketches[a:b] if s.newest is not None), default=None)
              for a, b in zip(groups, ends)]
    stamps = [x for x in newest if x is not None]
    now = None if later is None or not stamps else max(stamps) + later
    win = None if query is None else min(query, window)
    merged = []
    for a, b in zip(groups, ends):
        out = sketches[a]
        for s in sketches[a + 1:b]:
            out = out.merge(s)
        merged.append(out.estimate(now=now, window=win))
    assert union_estimates(sketches, groups, now=now, window=win).tolist() == merged
    with tiny_chunks():
        assert union_estimates(sketches, groups, now=now, window=win).tolist() == merged


def test_union_estimates_are_exact_at_every_precision():
    """Whole registers agree with merging at p = 4 and p = 18 too (the
    rank matrix's widest and narrowest)."""
    rng = np.random.default_rng(3)
    for p in (4, 18):
        parts = [SlidingHyperLogLog(10**6, p).update(np.sort(rng.integers(0, 10**5, 3000)),
                                                     rng.integers(0, 10**9, 3000)) for _ in range(3)]
        merged = parts[0].merge(parts[1]).merge(parts[2])
        assert union_estimates(parts, [0]).tolist() == [merged.estimate()]
        assert union_estimates(parts, [0, 1, 2]).tolist() == [x.estimate() for x in parts]


def test_empty_runs_and_groups():
    assert sliding_hll_bytes(np.zeros(0, dtype=np.int64), [0, 0], np.zeros(0, dtype=np.uint64),
                             window=10) == [SlidingHyperLogLog(10).to_bytes()] * 2
    assert sliding_hll_bytes([], [], [], window=10) == []
    empty = SlidingHyperLogLog(10)
    assert union_estimates([empty, empty], [0, 1]).tolist() == [0.0, 0.0]
    assert union_estimates([empty], [0], now=5).tolist() == [0.0]
    assert union_estimates([], []).tolist() == []


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="different lengths"):
        sliding_hll_bytes([1, 2], [0], [1], window=10)
    with pytest.raises(ValueError, match="hashes must be 64-bit integers"):
        sliding_hll_bytes([1], [0], [1.5], window=10)
    with pytest.raises(ValueError, match="starts must begin at 0"):
        sliding_hll_bytes([1, 2], [1], [1, 2], window=10)
    with pytest.raises(ValueError, match="reserved"):
        sliding_hll_bytes([-2**63], [0], [1], window=10)
    with pytest.raises(ValueError, match="precision"):
        sliding_hll_bytes([1], [0], [1], window=10, precision=3)
    a = SlidingHyperLogLog(100).update([5, 9], ["x", "y"])
    with pytest.raises(IncompatibleSketchError, match="windows"):
        union_estimates([a, SlidingHyperLogLog(50)], [0])
    with pytest.raises(IncompatibleSketchError, match="seeds"):
        union_estimates([a, SlidingHyperLogLog(100, seed=1)], [0, 1])
    with pytest.raises(ValueError, match=r"now \(8\) is earlier than the newest timestamp \(9\)"):
        union_estimates([a], [0], now=8)
    with pytest.raises(ValueError, match="now must be an integer"):
        union_estimates([a], [0], now=9.5)
    with pytest.raises(TypeError, match="SlidingHyperLogLog"):
        union_estimates([a, b"bytes"], [0])


def test_empty_groups_anywhere():
    a = SlidingHyperLogLog(100).update([5, 9], ["x", "y"])
    alone = a.estimate()
    assert union_estimates([a, a], [0, 2, 2]).tolist() == [alone, 0.0, 0.0]
    assert union_estimates([a], [0, 0, 1, 1]).tolist() == [0.0, alone, 0.0, 0.0]
