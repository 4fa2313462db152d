"""Sliding quantiles (quantiles.SlidingQuantiles) against brute force.

Every guarantee of the sketch is deterministic, so each is checked with
zero tolerance on every query (hypothesis): the count bounds, the cdf
bounds and estimate, the rank window of a quantile and its value accuracy,
the bounds of the exact quantile; the same after merges and for unions
answered from summed bounds.  Then the bins' histograms against
``ExponentialHistogram.update``, bad input, golden bytes and corrupted
bytes, as for the other families.
"""

from __future__ import annotations

import math
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import CorruptSketchError, ExponentialHistogram, IncompatibleSketchError, LateDataError
from quantiles import LogMapping, SlidingQuantiles, cdf_from_bounds, quantile_bounds_from_bounds, quantiles_from_bounds
from quantiles.mapping import OFFSET

from .conftest import examples
from .strategies import chunked, streams, values_small

GOLDEN = Path(__file__).parent / "golden"
QS = np.array([0.0, 0.01, 0.1, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0])

#: Values with ties, negatives, zero, fractions and a wide range.
value_pool = st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 10.1, 99.0, 1e-3, 2.5e6, -1.0, -4.0, -1e4])


@st.composite
def value_streams(draw):
    ts, _ = draw(streams(max_segments=25, values=values_small))
    xs = np.array(draw(st.lists(value_pool, min_size=ts.size, max_size=ts.size)), dtype=np.float64)
    return ts, xs


def window_of(ts, xs, now, window):
    return np.sort(xs[(ts > now - window) & (ts <= now)])


def check_answers(s, ts, xs, now, window, keys=None, lower=None, upper=None):
    """Every deterministic guarantee of the class docstring on one query
    (of the sketch, or of union bounds ``keys, lower, upper``)."""
    w = window_of(ts, xs, now, window)
    total = w.size
    m, eps, eh = s.mapping, s.eps, s.eh_eps
    if keys is None:
        keys, (lower, upper) = s.keys, s.bin_bounds(now, window)
        lo, up = s.bounds(now, window)
        assert lo <= total <= up
        assert abs(s.estimate(now, window) - total) <= eh * total + 1e-9
    # cdf: bounds bracket r(v); estimate within eh B(v) + c(v) / 2
    probes = np.concatenate([np.unique(xs), [-1e9, 0.5, 1e9]])
    est, clo, cup = cdf_from_bounds(m, keys, lower, upper, probes)
    r = np.searchsorted(w, probes, side="right")
    in_bin = m.keys(w)[None, :] == m.keys(probes)[:, None]
    c = in_bin.sum(axis=1)
    b = np.searchsorted(w, probes, side="right") + (in_bin & (w[None, :] > probes[:, None])).sum(axis=1)
    assert (clo <= r).all() and (r <= cup).all(), (probes, clo, r, cup)
    assert (np.abs(est - r) <= eh * b + c / 2 + 1e-9).all(), (probes, est, r, b, c)
    # quantiles
    got = quantiles_from_bounds(m, keys, lower, upper, QS)
    qlo, qhi = quantile_bounds_from_bounds(m, keys, lower, upper, QS)
    if total == 0:
        assert np.isnan(got).all() and np.isnan(qlo).all()
        return
    for q, x, a, z in zip(QS.tolist(), got.tolist(), qlo.tolist(), qhi.tolist()):
        first = max(1, math.ceil(q * total / (1 + eps) - 1e-9))
        last = min(total, math.floor(q * total * (1 + eps) + 1 + 1e-9))
        near = w[first - 1:last]
        assert (np.abs(x - near) <= s.accuracy * np.abs(near) * (1 + 1e-9)).any(), (q, x, near)
        exact = w[max(1, math.ceil(q * total)) - 1]
        assert a <= exact <= z, (q, a, exact, z)


def feed(sketch, ts, xs, batches):
    for a, b in batches:
        sketch.update(ts[a:b], xs[a:b])
    return sketch


@settings(max_examples=examples(150), deadline=None)
@given(value_streams(), st.data(), st.sampled_from([0.02, 0.2, 0.6]), st.sampled_from([0.001, 0.01, 0.2]))
def test_guarantees_hold_on_every_query(stream, data, eps, accuracy):
    ts, xs = stream
    window = data.draw(st.integers(1, 60))
    s = feed(SlidingQuantiles(window, eps=eps, accuracy=accuracy), ts, xs, data.draw(chunked(ts.size)))
    assert SlidingQuantiles.from_bytes(s.to_bytes()) == s
    for _ in range(4):
        now = int(ts[-1]) + data.draw(st.integers(0, window + 2))
        check_answers(s, ts, xs, now, data.draw(st.integers(1, window)))


@settings(max_examples=examples(80), deadline=None)
@given(value_streams(), st.data())
def test_merges_and_unions_keep_the_guarantees(stream, data):
    ts, xs = stream
    window = data.draw(st.integers(1, 60))
    owner = np.array(data.draw(st.lists(st.integers(0, 2), min_size=ts.size, max_size=ts.size)))
    parts = [SlidingQuantiles(window, eps=0.2, accuracy=0.05).update(ts[owner == p], xs[owner == p])
             for p in range(3)]
    before = [p.to_bytes() for p in parts]
    merged = SlidingQuantiles.merge_all(parts)
    folded = parts[0].merge(parts[1]).merge(parts[2])
    assert [p.to_bytes() for p in parts] == before
    assert SlidingQuantiles.from_bytes(merged.to_bytes()) == merged
    now = int(ts[-1]) + data.draw(st.integers(0, 3))
    w = data.draw(st.integers(1, window))
    check_answers(merged, ts, xs, now, w, *SlidingQuantiles.union_bounds(parts, now, w))
    for s in (merged, folded):
        check_answers(s, ts, xs, now, w)
        later = int(ts[-1]) + 5  # a merged sketch keeps taking rows
        s.update([later, later], [3.0, -2.0])
        check_answers(s, np.append(ts, [later, later]), np.append(xs, [3.0, -2.0]), later, window)


@settings(max_examples=examples(80), deadline=None)
@given(value_streams(), st.data())
def test_bins_are_the_histograms_update_builds(stream, data):
    """Each bin's histogram is what ExponentialHistogram.update of the
    bin's rows and a zero at each batch's newest time gives (the counter
    machinery shared with the ECM-sketch)."""
    ts, xs = stream
    window = data.draw(st.integers(1, 80))
    s = SlidingQuantiles(window, eps=data.draw(st.sampled_from([0.1, 0.68, 0.99])), accuracy=0.05)
    ref: dict[int, ExponentialHistogram] = {}
    for a, b in data.draw(chunked(ts.size)):
        s.update(ts[a:b], xs[a:b])
        keys = s.mapping.keys(xs[a:b])
        for k in set(keys.tolist()) | set(ref):
            h = ref.setdefault(k, ExponentialHistogram(window, s.eh_eps))
            mine = keys == k
            h.update(np.append(ts[a:b][mine], ts[b - 1]), np.append(np.ones(mine.sum(), np.int64), 0))
    live = {k: h for k, h in ref.items() if h.bounds()[1] > 0}
    assert s.keys.tolist() == sorted(live)
    for i, k in enumerate(s.keys.tolist()):
        got = s._col[i]
        assert all(np.array_equal(x, y) for x, y in zip(got.buckets(), live[k].buckets())), k


def test_value_accuracy_of_the_mapping():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.lognormal(0, 30, 20_000), -rng.lognormal(0, 30, 2_000), [5e-324, 1.7e308, -1.7e308]])
    x = x[np.isfinite(x)]
    for a in (1e-6, 1e-3, 0.01, 0.5):
        m = LogMapping(a)
        k = m.keys(x)
        assert m.valid(k).all()
        assert (np.abs(m.values(k) - x) <= a * np.abs(x) * (1 + 1e-9)).all()
        low, high = m.edges(k)
        assert ((low <= x) & (x <= high)).all()
        order = np.argsort(x, kind="stable")
        assert (np.diff(k[order]) >= 0).all()  # order-preserving
    assert LogMapping(0.01).keys(np.array([0.0, -0.0])).tolist() == [0, 0]
    assert not LogMapping(0.01).valid(np.array([OFFSET + 10**9])).any()


def test_a_shift_in_the_distribution_leaves_the_window():
    """The last hour's p99 follows the stream, not its history."""
    ts = np.arange(20_000)
    x = np.where(ts < 10_000, 500.0, 20.0) + (ts % 100) / 10
    s = SlidingQuantiles(1_000, eps=0.02, accuracy=0.01).update(ts, x)
    assert 20 <= s.quantile(0.99) <= 30.1 * 1.01
    assert abs(s.rank(25.0) - 0.5) < 0.05
    assert math.isnan(s.quantile(0.5, now=50_000))  # everything expired
    assert all(math.isnan(v) for v in s.quantile_bounds(0.5, now=50_000))
    early = SlidingQuantiles(20_000, eps=0.02).update(ts, x)
    assert early.quantile(0.9, now=19_999, window=15_000) >= 500  # a third of a longer window is older


# ---------------------------------------------------------------- bad input
def test_bad_input_leaves_the_sketch_unchanged():
    s = SlidingQuantiles(100).update([5, 6], [1.0, 2.0])
    before = s.to_bytes()
    with pytest.raises(LateDataError):
        s.update([4], [1.0])
    for bad, msg in (([np.nan], "finite"), ([np.inf], "finite"), (["x"], "numbers"), ([None], "numbers"),
                     ([[1.0, 2.0]], "different lengths")):
        with pytest.raises(ValueError, match=msg):
            s.update([7], bad)
    with pytest.raises(ValueError, match="different lengths"):
        s.update([7, 8], [1.0])
    with pytest.raises(ValueError, match="earlier than the newest"):
        s.quantile(0.5, now=5)
    with pytest.raises(ValueError, match="window must be"):
        s.quantile(0.5, window=101)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        s.quantile(1.5)
    with pytest.raises(ValueError, match="finite"):
        s.rank(np.nan)
    assert s.to_bytes() == before


@pytest.mark.parametrize("kwargs, msg", [
    (dict(eps=0), "eps must be"), (dict(eps=1.0), "eps must be"), (dict(eps=True), "eps must be"),
    (dict(accuracy=0), "accuracy must be"), (dict(accuracy=0.6), "accuracy must be"),
    (dict(accuracy="x"), "accuracy must be"),
])
def test_parameters_are_checked(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        SlidingQuantiles(100, **kwargs)


def test_merge_refuses_other_parameters():
    a = SlidingQuantiles(100, accuracy=0.01)
    with pytest.raises(IncompatibleSketchError, match="accuracy: 0.01 and 0.02"):
        a.merge(SlidingQuantiles(100, accuracy=0.02))
    with pytest.raises(IncompatibleSketchError, match="window: 100 and 50"):
        a.merge(SlidingQuantiles(50))
    with pytest.raises(TypeError):
        a.merge(ExponentialHistogram(100))


# ------------------------------------------------------------------- bytes
def golden_sketches():
    rng = np.random.default_rng(11)
    ts = np.sort(rng.integers(0, 500, 300))
    xs = np.round(rng.lognormal(2, 1.5, 300) * np.where(rng.random(300) < 0.1, -1, 1), 3)
    a = SlidingQuantiles(200, eps=0.1, accuracy=0.02).update(ts, xs)
    b = SlidingQuantiles(200, eps=0.1, accuracy=0.02).update(ts[::3], xs[::3] + 1)
    return {"quantiles": a, "quantiles_empty": SlidingQuantiles(200, eps=0.1, accuracy=0.02),
            "quantiles_merged": a.merge(b)}


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_golden_bytes(name):
    """The format cannot drift silently (format version 2)."""
    s = golden_sketches()[name]
    data = (GOLDEN / f"{name}.bin").read_bytes()
    assert s.to_bytes() == data
    assert SlidingQuantiles.from_bytes(data) == s


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_version_1_bytes_still_read(name):
    """Version 1 (each bin a whole histogram's bytes) decodes to the same
    sketch; writing it again gives version 2 (compact counters)."""
    s = golden_sketches()[name]
    old = (GOLDEN / f"{name.replace('quantiles', 'quantiles_v1')}.bin").read_bytes()
    assert old[3] == 1
    back = SlidingQuantiles.from_bytes(old)
    assert back == s and back.to_bytes() == s.to_bytes()
    assert len(s.to_bytes()) <= len(old)


def reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_corrupt_bytes_raise_the_project_error(name):
    """Mutated buffers, the CRC resealed so that the checks behind it are
    reached: only CorruptSketchError, and nothing decoded fails later."""
    data = golden_sketches()[name].to_bytes()
    body = bytearray(data[:-4])
    rng = np.random.default_rng(3)
    for trial in range(300):
        b = bytearray(body)
        kind = trial % 5
        if kind == 0:
            i = int(rng.integers(0, len(b)))
            b[i] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            b = b[:int(rng.integers(0, len(b)))]
        elif kind == 2:
            b += bytes(rng.integers(0, 256, int(rng.integers(1, 9))).astype(np.uint8))
        elif kind == 3:
            i = int(rng.integers(6, len(b) - 8))
            b[i:i + 8] = struct.pack("<q", int(rng.choice([2**63 - 1, -2**63, -1, 0])))
        else:  # extreme varints where the bin keys start
            i = min(len(b) - 1, 38 + int(rng.integers(0, 4)))
            b[i:i + 10] = b"\xff" * 9 + b"\x01"
        try:
            back = SlidingQuantiles.from_bytes(reseal(bytes(b)))
        except CorruptSketchError:
            continue
        assert back.to_bytes() == reseal(bytes(b))  # what decodes is written back the same
        back.estimate(), back.bounds(), back.quantiles(QS), back.quantile_bounds(0.5), back.merge(back)
    for cut in range(0, len(data) - 1, max(1, len(data) // 40)):
        with pytest.raises(CorruptSketchError):
            SlidingQuantiles.from_bytes(data[:cut])


def test_foreign_bytes_name_the_family():
    with pytest.raises(CorruptSketchError, match="family id 8"):
        SlidingQuantiles.from_bytes(ExponentialHistogram(10).to_bytes())


def test_round_trips_of_extreme_but_accepted_values():
    """Write what you read: the largest and smallest floats, times at the
    int64 edges."""
    top = 2**63 - 1
    for s in (SlidingQuantiles(2**62, eps=0.3).update([-2**63 + 1, 0, top], [1.7e308, -5e-324, 0.0]),
              SlidingQuantiles(1, eps=0.99, accuracy=0.5).update([top, top], [-1.7e308, 5e-324]),
              SlidingQuantiles(5, accuracy=1e-6).update([-5, -1], [1.0, 1.0 + 1e-6])):
        back = SlidingQuantiles.from_bytes(s.to_bytes())
        assert back == s and pickle.loads(pickle.dumps(s)) == s
        for now in (None, top, 2**63, 2**70):
            assert np.array_equal(back.quantiles(QS, now), s.quantiles(QS, now), equal_nan=True)


def test_guarantees_on_long_streams_with_coarse_histograms():
    """Long windows cut through large buckets of many bins at once, where
    bounds are loosest (hypothesis's short streams rarely get there)."""
    rng = np.random.default_rng(8)
    for trial in range(6):
        n = 4000
        ts = np.cumsum(rng.integers(0, 3, n))
        xs = np.round(rng.lognormal(1, 1, n) * np.where(rng.random(n) < 0.2, -1, 1), 1)
        window = int(rng.integers(50, 3000))
        s = SlidingQuantiles(window, eps=float(rng.choice([0.3, 0.99])), accuracy=float(rng.choice([0.05, 0.3])))
        s = feed(s, ts, xs, [(a, min(a + 700, n)) for a in range(0, n, 700)])
        for _ in range(4):
            check_answers(s, ts, xs, int(ts[-1]) + int(rng.integers(0, 30)), int(rng.integers(1, window + 1)))
