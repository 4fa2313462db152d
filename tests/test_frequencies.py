"""Frequencies and heavy hitters over sliding windows (frequencies/): every
guarantee against a brute-force window, by kind.

Deterministic (zero tolerance, hypothesis): an item's upper bound is never
below its frequency, its estimate never below ``(1 - eh_eps)`` of it, the
window total's bounds bracket it, heavy hitters miss no item at or above
``phi`` of the total; the vectorized counter update equals
``ExponentialHistogram.update`` counter by counter.  Probabilistic (fixed
seeds, many trials): the Count-Min overestimate and the lower bound fail at
most ``delta`` of the time, plus three standard errors.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import CorruptSketchError, ExponentialHistogram, IncompatibleSketchError, LateDataError
from ehist.errors import SumOverflowError
from ehist.hashing import hash64
from frequencies import SlidingCountMin, SlidingHeavyHitters
from frequencies.count_min import counter_ids

from .conftest import examples
from .strategies import chunked, streams, values_small

GOLDEN = Path(__file__).parent / "golden"


def brute(ts, items, vs, now, window):
    """item -> exact frequency over (now - window, now], and the total."""
    inside = (ts > now - window) & (ts <= now)
    out = {}
    for x, v in zip(items[inside].tolist(), vs[inside].tolist()):
        out[x] = out.get(x, 0) + v
    return out, int(vs[inside].sum())


@st.composite
def item_streams(draw, alphabet=12):
    ts, vs = draw(streams(max_segments=25, values=values_small))
    items = np.array(draw(st.lists(st.integers(0, alphabet - 1), min_size=ts.size, max_size=ts.size)))
    return ts, items, vs


def feed(sketch, ts, items, vs, batches):
    for a, b in batches:
        sketch.update(ts[a:b], items[a:b], vs[a:b])
    return sketch


def check_deterministic(s, ts, items, vs, now, window, alphabet):
    exact, total = brute(ts, items, vs, now, window)
    est, lower, upper = s.frequencies(np.arange(alphabet), now, window)
    f = np.array([exact.get(x, 0) for x in range(alphabet)])
    assert (upper >= f).all(), (upper, f)
    assert (est >= (1 - s.eh_eps) * f - 1e-9).all(), (est, f)
    assert (est <= upper).all()
    lo, up = s.bounds(now, window)
    assert lo <= total <= up
    assert abs(s.estimate(now, window) - total) <= s.eh_eps * total + 1e-9


@settings(max_examples=examples(150), deadline=None)
@given(item_streams(), st.data(), st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([0.3, 0.6]))
def test_bounds_hold_on_every_query(stream, data, eh_eps, eps):
    ts, items, vs = stream
    window = data.draw(st.integers(1, 60))
    s = feed(SlidingCountMin(window, eps=eps, delta=0.3, eh_eps=eh_eps, seed=data.draw(st.integers(0, 3))),
             ts, items, vs, data.draw(chunked(ts.size)))
    for _ in range(4):
        now = int(ts[-1]) + data.draw(st.integers(0, window + 2))
        check_deterministic(s, ts, items, vs, now, data.draw(st.integers(1, window)), 12)


@settings(max_examples=examples(80), deadline=None)
@given(item_streams(), st.data())
def test_merge_of_partitions_keeps_the_bounds(stream, data):
    ts, items, vs = stream
    window = data.draw(st.integers(1, 60))
    owner = np.array(data.draw(st.lists(st.integers(0, 2), min_size=ts.size, max_size=ts.size)))
    parts = [SlidingCountMin(window, 0.3, 0.3, 0.2, seed=1).update(ts[owner == p], items[owner == p], vs[owner == p])
             for p in range(3)]
    before = [p.to_bytes() for p in parts]
    merged = SlidingCountMin.merge_all(parts)
    assert [p.to_bytes() for p in parts] == before
    assert SlidingCountMin.from_bytes(merged.to_bytes()) == merged
    folded = parts[0].merge(parts[1]).merge(parts[2])
    for s in (merged, folded):
        now = int(ts[-1]) + data.draw(st.integers(0, 3))
        check_deterministic(s, ts, items, vs, now, data.draw(st.integers(1, window)), 12)
        # a merged sketch keeps taking rows
        later = int(ts[-1]) + 5
        s.update([later, later], [3, 4], [2, 1])
        check_deterministic(s, np.append(ts, [later, later]), np.append(items, [3, 4]), np.append(vs, [2, 1]),
                            later, window, 12)


@settings(max_examples=examples(150), deadline=None)
@given(item_streams(alphabet=40), st.data())
def test_rows_form_answers_exactly_and_takes_counters_past_width(stream, data):
    """While the window holds at most ``width`` (time, item) rows the
    sketch keeps them and every answer is the brute-force one, lower and
    upper alike; past width it holds the counters those rows build (what
    a sketch holding counters from the start builds from one batch of
    them), and the guarantees of the counters hold from then on.  A union
    of rows form sketches answers exactly, merged or not."""
    ts, items, vs = stream
    window = data.draw(st.integers(1, 80))
    eps = data.draw(st.sampled_from([0.1, 0.2, 0.5]))
    s = feed(SlidingCountMin(window, eps=eps, delta=0.2, seed=2), ts, items, vs, data.draw(chunked(ts.size)))
    inside = ts > int(ts[-1]) - window
    live = {(t, x) for t, x, v in zip(ts[inside].tolist(), items[inside].tolist(), vs[inside].tolist()) if v}
    if s.rows is not None:
        assert s.rows == len(live) <= s.width
        for _ in range(3):
            now = int(ts[-1]) + data.draw(st.integers(0, window + 2))
            w = data.draw(st.integers(1, window))
            exact, total = brute(ts, items, vs, now, w)
            est, lower, upper = s.frequencies(np.arange(40), now, w)
            f = np.array([exact.get(x, 0) for x in range(40)])
            assert lower.tolist() == upper.tolist() == f.tolist() and est.tolist() == f.astype(float).tolist()
            assert s.bounds(now, w) == (total, total)
    else:
        check_deterministic(s, ts, items, vs, int(ts[-1]), window, 40)
    whole = SlidingCountMin(window, eps=eps, delta=0.2, seed=2).update(ts, items, vs)
    once = SlidingCountMin(window, eps=eps, delta=0.2, seed=2)._counters_only().update(ts, items, vs)
    assert whole._as_counters() == once, "the counters of the rows: those of one batch of them"
    assert (whole.rows is None) == (len(live) > whole.width)
    assert SlidingCountMin.from_bytes(whole.to_bytes()) == whole
    # two halves united: the rows while they fit, exact whether merged or answered together
    half = ts.size // 2
    parts = [SlidingCountMin(window, eps=eps, delta=0.2, seed=2).update(ts[a:b], items[a:b], vs[a:b])
             for a, b in ((0, half), (half, ts.size)) if b > a]
    merged = SlidingCountMin.merge_all(parts)
    assert (merged.rows is not None) == (all(p.rows is not None for p in parts) and len(live) <= whole.width)
    exact, _ = brute(ts, items, vs, int(ts[-1]), window)
    f = np.array([exact.get(x, 0) for x in range(40)])
    _, lower, upper = SlidingCountMin.union_frequencies_of_hashes(parts, hash64(np.arange(40), 2))
    if all(p.rows is not None for p in parts):
        assert lower.tolist() == upper.tolist() == f.tolist()
    assert (upper >= f).all()


@settings(max_examples=examples(100), deadline=None)
@given(item_streams(alphabet=40), st.data())
def test_counters_are_the_histograms_update_builds(stream, data):
    """The vectorized batch update (old buckets re-entered as elements)
    gives, counter by counter, what ExponentialHistogram.update of the
    counter's rows and a zero at the batch's newest time gives."""
    ts, items, vs = stream
    window = data.draw(st.integers(1, 80))
    eh_eps = data.draw(st.sampled_from([0.05, 0.34, 0.5]))
    # a sketch holding counters from the start (the rows form's: test_rows_form_answers_exactly_...)
    s = SlidingCountMin(window, eps=0.5, delta=0.2, eh_eps=eh_eps, seed=2)._counters_only()
    ref = [ExponentialHistogram(window, eh_eps) for _ in range(s.counters)]
    for a, b in data.draw(chunked(ts.size)):
        s.update(ts[a:b], items[a:b], vs[a:b])
        ids = counter_ids(hash64(items[a:b], 2), s.width, s.depth)
        for c, h in enumerate(ref):
            mine = (ids == c).any(axis=0)
            h.update(np.append(ts[a:b][mine], ts[b - 1]), np.append(vs[a:b][mine], 0))
    col = s.column
    for c, h in enumerate(ref):
        got = col[c]
        want = h.buckets()
        assert all(np.array_equal(x, y) for x, y in zip(got.buckets(), want)), c
        assert got.merged == h.merged


@settings(max_examples=examples(100), deadline=None)
@given(item_streams(alphabet=40), st.data())
def test_heavy_hitters_in_the_rows_form_are_the_exact_ones(stream, data):
    """A heavy-hitter sketch of at most ``width`` rows reports exactly the
    ids whose frequency reaches ``max(phi T, 1)``, each with its frequency
    as estimate and both bounds, largest first; past width its levels hold
    what they would have built from the start (one batch of the rows), and
    a union of rows form parts answers the same exactly, merged or not."""
    ts, items, vs = stream
    window = data.draw(st.integers(1, 80))
    make = lambda: SlidingHeavyHitters(window, bits=6, eps=0.1, delta=0.2, level_bits=2)  # noqa: E731
    s = feed(make(), ts, items, vs, data.draw(chunked(ts.size)))
    phi = data.draw(st.sampled_from([0.05, 0.2, 0.5, 1.0]))

    def exact(now, w):
        f, total = brute(ts, items, vs, now, w)
        top = sorted(((-n, x) for x, n in f.items() if n >= max(phi * total, 1.0)))
        return [(x, float(-n), -n, -n) for n, x in top]

    if s.rows is not None:
        now = int(ts[-1]) + data.draw(st.integers(0, 3))
        w = data.draw(st.integers(1, window))
        assert [tuple(h) for h in s.heavy_hitters(phi, now, w)] == exact(now, w)
    whole = make().update(ts, items, vs)
    once = make()
    once._rows = None
    once.update(ts, items, vs)
    assert whole._as_counters() == once
    assert SlidingHeavyHitters.from_bytes(whole.to_bytes()) == whole
    half = ts.size // 2
    parts = [make().update(ts[a:b], items[a:b], vs[a:b]) for a, b in ((0, half), (half, ts.size)) if b > a]
    if all(p.rows is not None for p in parts):
        assert [tuple(h) for h in SlidingHeavyHitters.union_heavy_hitters(parts, phi)] == exact(int(ts[-1]), window)
        merged = SlidingHeavyHitters.merge_all(parts)
        if merged.rows is not None:
            assert [tuple(h) for h in merged.heavy_hitters(phi)] == exact(int(ts[-1]), window)


def test_overestimate_and_lower_bound_fail_at_most_delta():
    """Count-Min: estimate <= (1 + eh_eps)(f + eps T) and lower <= f, each
    failing with probability at most delta (here per item, over seeds)."""
    eps, delta, trials = 0.05, 0.1, 60
    rng = np.random.default_rng(5)
    ts = np.sort(rng.integers(0, 5000, 20_000))
    items = rng.zipf(1.5, ts.size) % 3000
    exact, total = brute(ts, items, np.ones(ts.size, dtype=np.int64), int(ts[-1]), 1000)
    probe = np.array(sorted(exact)[:200])
    f = np.array([exact[x] for x in probe.tolist()])
    over = under = 0
    for seed in range(trials):
        s = SlidingCountMin(1000, eps=eps, delta=delta, eh_eps=0.02, seed=seed).update(ts, items)
        est, lower, _ = s.frequencies(probe)
        over += int((est > (1 + 0.02) * (f + eps * total)).sum())
        under += int((lower > f).sum())
    n = trials * probe.size
    se = np.sqrt(delta * (1 - delta) / n)
    assert over / n <= delta + 3 * se and under / n <= delta + 3 * se, (over / n, under / n)


# ----------------------------------------------------------- heavy hitters
@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_heavy_hitters_miss_nothing_above_phi(data):
    bits = data.draw(st.sampled_from([6, 8, 11]))
    level_bits = data.draw(st.integers(1, 4))
    n = data.draw(st.integers(1, 400))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ts = np.sort(rng.integers(0, 300, n))
    heavy = rng.integers(0, 2**bits, 3)
    items = np.where(rng.random(n) < 0.5, rng.choice(heavy, n), rng.integers(0, 2**bits, n))
    vs = rng.integers(0, 4, n)
    window = data.draw(st.integers(1, 200))
    s = SlidingHeavyHitters(window, bits=bits, eps=0.2, delta=0.2, eh_eps=data.draw(st.sampled_from([0.1, 0.5])),
                            seed=3, level_bits=level_bits)
    feed(s, ts, items, vs, data.draw(chunked(n)))
    now = int(ts[-1]) + data.draw(st.integers(0, 20))
    w = data.draw(st.integers(1, window))
    phi = data.draw(st.sampled_from([0.05, 0.2, 0.5, 1.0]))
    exact, total = brute(ts, items, vs, now, w)
    got = s.heavy_hitters(phi, now, w)
    reported = {h.item for h in got}
    assert {x for x, f in exact.items() if f >= phi * total and f > 0} <= reported
    for h in got:
        assert h.upper >= exact.get(h.item, 0) and h.estimate <= h.upper
    assert [h.estimate for h in got] == sorted((h.estimate for h in got), reverse=True)


def test_heavy_hitters_report_few_false_items():
    """A reported id has f >= (phi (1 - 2 eh) / (1 + 2 eh) - eps) T, failing
    at most delta of the time (over seeds and reported ids)."""
    eps, delta, eh, phi = 0.02, 0.1, 0.05, 0.05
    rng = np.random.default_rng(8)
    ts = np.sort(rng.integers(0, 10_000, 30_000))
    items = (rng.zipf(1.3, ts.size) * 2654435761) % 2**32
    exact, total = brute(ts, items, np.ones(ts.size, dtype=np.int64), int(ts[-1]), 2000)
    floor = (phi * (1 - 2 * eh) / (1 + 2 * eh) - eps) * total
    heavy = {x for x, f in exact.items() if f >= phi * total}
    reported = bad = 0
    for seed in range(20):
        s = SlidingHeavyHitters(2000, 32, eps=eps, delta=delta, eh_eps=eh, seed=seed).update(ts, items)
        got = s.heavy_hitters(phi)
        assert heavy <= {h.item for h in got}
        reported += len(got)
        bad += sum(exact.get(h.item, 0) < floor for h in got)
    assert reported and bad / reported <= delta + 3 * np.sqrt(delta * (1 - delta) / reported)


def test_heavy_hitters_of_an_empty_window_and_the_point_queries():
    s = SlidingHeavyHitters(10, bits=8)
    assert s.heavy_hitters(0.1) == [] and s.estimate() == 0.0
    s.update([1, 2, 3, 3], [7, 7, 9, 7])
    assert [h.item for h in s.heavy_hitters(0.5)] == [7]
    assert s.frequency_bounds(7)[1] >= 3 and s.frequency(9) >= 1
    assert s.heavy_hitters(0.5, now=100) == []  # the window has moved past everything


# ---------------------------------------------------------------- bad input
def test_bad_input_leaves_the_sketch_unchanged():
    s = SlidingCountMin(100, seed=1).update([5, 6], ["a", "b"])
    before = s.to_bytes()
    with pytest.raises(LateDataError):
        s.update([4], ["a"])
    with pytest.raises(ValueError, match="non-negative"):
        s.update([7, 8], ["a", "b"], [1, -1])
    with pytest.raises(ValueError, match="different lengths"):
        s.update([7, 8], ["a"])
    with pytest.raises(ValueError, match="overflow int64"):
        s.update([7, 8], ["a", "b"], [2**62, 2**62])
    with pytest.raises(ValueError, match="earlier than the newest"):
        s.frequency("a", now=5)
    with pytest.raises(ValueError, match="window must be"):
        s.frequency("a", window=101)
    assert s.to_bytes() == before

    h = SlidingHeavyHitters(100, bits=8).update([1], [3])
    before = h.to_bytes()
    for bad, msg in (([256], "2\\*\\*8"), ([-1], "2\\*\\*8"), ([1.5], "integ"), (["x"], "")):
        with pytest.raises(ValueError, match=msg or None):
            h.update([2], bad)
    with pytest.raises(ValueError, match="phi"):
        h.heavy_hitters(0)
    with pytest.raises(ValueError, match="phi"):
        h.heavy_hitters(1.5)
    assert h.to_bytes() == before


@pytest.mark.parametrize("kwargs, msg", [
    (dict(eps=0), "eps must be"), (dict(eps=1.5), "eps must be"), (dict(delta=0), "delta must be"),
    (dict(eh_eps=2), "eps must be"), (dict(seed=-1), "seed"), (dict(eps=1e-6, delta=1e-9), "at most"),
    (dict(delta=1e-13), "delta must be"), (dict(eps=1e-7), "eps must be"),
])
def test_parameters_are_checked(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        SlidingCountMin(100, **kwargs)


@pytest.mark.parametrize("kwargs, msg", [(dict(bits=0), "bits"), (dict(bits=65), "bits"),
                                         (dict(bits=8, level_bits=9), "level_bits"), (dict(level_bits=0), "level_bits")])
def test_heavy_hitter_parameters_are_checked(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        SlidingHeavyHitters(100, **kwargs)


def test_merge_refuses_other_parameters():
    a = SlidingCountMin(100, seed=1)
    with pytest.raises(IncompatibleSketchError, match="seed: 1 and 2"):
        a.merge(SlidingCountMin(100, seed=2))
    with pytest.raises(IncompatibleSketchError, match="window: 100 and 50"):
        a.merge(SlidingCountMin(50, seed=1))
    with pytest.raises(TypeError):
        a.merge(ExponentialHistogram(100))
    with pytest.raises(IncompatibleSketchError, match="bits: 8 and 16"):
        SlidingHeavyHitters(10, 8).merge(SlidingHeavyHitters(10, 16))


def test_merged_total_beyond_int64_is_refused():
    a = SlidingCountMin(100).update([1], ["a"], [2**62])
    b = SlidingCountMin(100).update([1], ["b"], [2**62])
    with pytest.raises(ValueError, match="overflow int64"):
        a.merge(b)
    # the union's bounds (two-phase aggregation's, without merging) too,
    # where int64 sums wrapped silently: a counter, and a window total
    with pytest.raises(SumOverflowError, match="the union's counter would overflow int64"):
        SlidingCountMin.union_bounds([a, SlidingCountMin(100).update([2], ["a"], [2**62])])
    with pytest.raises(SumOverflowError, match="the union's window total would overflow int64"):
        a.total_from_bounds(*SlidingCountMin.union_bounds([a, b]))
    fits = SlidingCountMin(100).update([2], ["a"], [2**62 - 1])
    assert a.total_from_bounds(*SlidingCountMin.union_bounds([a, fits])) == (2**63 - 1, 2**63 - 1)


def test_64_bit_ids_and_uint64_items():
    s = SlidingHeavyHitters(10, bits=64).update([1, 2, 3], np.array([2**64 - 1, 2**64 - 1, 5], dtype=np.uint64))
    assert [h.item for h in s.heavy_hitters(0.6)] == [2**64 - 1]


# ------------------------------------------------------------------- bytes
def golden_sketches():
    rng = np.random.default_rng(11)
    ts = np.sort(rng.integers(0, 500, 300))
    items = rng.integers(0, 50, 300)
    a = SlidingCountMin(200, eps=0.2, delta=0.1, eh_eps=0.1, seed=7).update(ts, items, rng.integers(0, 9, 300))
    b = SlidingCountMin(200, eps=0.2, delta=0.1, eh_eps=0.1, seed=7).update(ts[::3], items[::3])
    return {
        "cm": a,
        "cm_empty": SlidingCountMin(200, eps=0.2, delta=0.1, eh_eps=0.1, seed=7),
        "cm_merged": a.merge(b),
        "hh": SlidingHeavyHitters(200, bits=8, eps=0.2, delta=0.1, eh_eps=0.1, seed=7).update(ts, items),
    }


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_golden_bytes(name):
    """The formats cannot drift silently (format version 2 of each)."""
    s = golden_sketches()[name]
    data = (GOLDEN / f"{name}.bin").read_bytes()
    assert s.to_bytes() == data
    assert type(s).from_bytes(data) == s


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_version_1_bytes_still_read(name):
    """Sketches stored by format version 1 (each counter a whole
    histogram's bytes) decode to the same sketch; writing them again gives
    version 2 (compact counters: a flags byte and the payload), smaller."""
    s = golden_sketches()[name]
    old = (GOLDEN / f"{name.replace('cm', 'cm_v1').replace('hh', 'hh_v1')}.bin").read_bytes()
    assert old[3] == 1
    back = type(s).from_bytes(old)
    assert back == s and back.to_bytes() == s.to_bytes()
    assert len(s.to_bytes()) <= len(old)


def reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_corrupt_bytes_raise_the_project_error(name):
    """Mutated buffers, the CRC resealed so that the checks behind it are
    reached: only CorruptSketchError, and nothing decoded fails later."""
    s = golden_sketches()[name]
    data = s.to_bytes()
    body = bytearray(data[:-4])
    rng = np.random.default_rng(3)
    cls = type(s)
    for trial in range(300):
        b = bytearray(body)
        kind = trial % 4
        if kind == 0:
            i = int(rng.integers(0, len(b)))
            b[i] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            b = b[:int(rng.integers(0, len(b)))]
        elif kind == 2:
            b += bytes(rng.integers(0, 256, int(rng.integers(1, 9))).astype(np.uint8))
        else:
            i = int(rng.integers(6, len(b) - 8))
            b[i:i + 8] = struct.pack("<q", int(rng.choice([2**63 - 1, -2**63, -1, 0])))
        try:
            back = cls.from_bytes(reseal(bytes(b)))
        except CorruptSketchError:
            continue
        assert back.to_bytes() == reseal(bytes(b))  # what decodes is written back the same
        back.estimate(), back.bounds(), back.merge(back)
    for cut in range(0, len(data) - 1, max(1, len(data) // 40)):
        with pytest.raises(CorruptSketchError):
            cls.from_bytes(data[:cut])


def test_foreign_bytes_name_the_family():
    with pytest.raises(CorruptSketchError, match="family id 6"):
        SlidingCountMin.from_bytes(ExponentialHistogram(10).to_bytes())
    with pytest.raises(CorruptSketchError, match="family id 7"):
        SlidingHeavyHitters.from_bytes(SlidingCountMin(10).to_bytes())


def test_round_trips_of_extreme_but_accepted_values():
    """Write what you read: huge values, times at the int64 edges."""
    top = 2**63 - 1
    for s in (SlidingCountMin(2**62, eps=0.3, delta=0.3).update([-2**63 + 1, 0, top], ["a", "b", "a"], [2**61, 1, 3]),
              SlidingCountMin(1, eps=0.3, delta=0.3).update([top, top], ["a", "a"], [2**62, 2**62 - 1]),
              SlidingHeavyHitters(5, bits=64, eps=0.3, delta=0.3).update([-5, -1], [2**64 - 1, 0], [2**62, 0])):
        back = type(s).from_bytes(s.to_bytes())
        assert back == s and pickle.loads(pickle.dumps(s)) == s
        for now in (None, top, 2**63, 2**70):
            assert back.estimate(now) == s.estimate(now)


def test_inner_product_bounds_and_failure_rate():
    """Join size of two streams over a window: upper and the estimate's
    floor always; the estimate's ceiling and the lower bound fail at most
    delta of the seeds (plus three standard errors)."""
    rng = np.random.default_rng(12)
    trials, failures, delta = 60, 0, 0.2
    for seed in range(trials):
        ts_a = np.sort(rng.integers(0, 400, 600))
        ts_b = np.sort(rng.integers(0, 400, 500))
        xa, xb = rng.zipf(1.5, ts_a.size) % 200, rng.zipf(1.5, ts_b.size) % 200
        eps, window = 0.1, int(rng.integers(20, 300))
        a = SlidingCountMin(300, eps=eps, delta=delta, eh_eps=0.05, seed=seed).update(ts_a, xa)
        b = SlidingCountMin(300, eps=eps, delta=delta, eh_eps=0.05, seed=seed).update(ts_b, xb)
        now = max(int(ts_a[-1]), int(ts_b[-1]))
        fa, ta = brute(ts_a, xa, np.ones(xa.size, np.int64), now, window)
        fb, tb = brute(ts_b, xb, np.ones(xb.size, np.int64), now, window)
        true = sum(v * fb.get(x, 0) for x, v in fa.items())
        est, lower, upper = a.inner_product(b, window=window)
        assert upper >= true and est >= (1 - 0.05) ** 2 * true - 1e-9 and est <= upper + 1e-9
        failures += est > (1 + 0.05) ** 2 * (true + eps * ta * tb) + 1e-9 or lower > true
    assert failures <= trials * delta + 3 * np.sqrt(trials * delta * (1 - delta)), failures
    with pytest.raises(IncompatibleSketchError, match="seed"):
        a.inner_product(SlidingCountMin(300, eps=eps, delta=delta, eh_eps=0.05, seed=999))
    assert SlidingCountMin(10).inner_product(SlidingCountMin(10)) == (0.0, 0.0, 0.0)
