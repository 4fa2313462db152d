"""Many keyed-counter sketches at once (ehist/keyed_counters.py,
frequencies/columnar.py, quantiles/columnar.py), under both engines, against
each sketch's own methods: bytes round trip, union byte for byte against
``merge_all``, answers and unions without merging against the sketches'
own, mutated bytes raising what ``from_bytes`` raises (or decoding as it
decodes), and the udaf specs' batch paths against their per-key ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import compiled
from ehist.blobs import Blobs
from ehist.errors import CorruptSketchError
from ehist.hashing import hash64
from ehist.validation import k_of_eps
from frequencies import SlidingCountMin, SlidingHeavyHitters
from frequencies.columnar import CountMinColumn, HeavyHittersColumn
from quantiles import SlidingQuantiles, quantiles_from_bounds
from quantiles.columnar import QuantileColumn

from .conftest import examples
from .engines import ENGINES, engine
from .test_fuzz import mutate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
COLUMNS = {SlidingCountMin: CountMinColumn, SlidingHeavyHitters: HeavyHittersColumn, SlidingQuantiles: QuantileColumn}


def make(family, window, params, rng, base):
    """One sketch: empty, a few rows, or a merge of two (wide buckets)."""
    def fresh():
        if family is SlidingCountMin:
            return SlidingCountMin(window, *params)
        if family is SlidingHeavyHitters:
            return SlidingHeavyHitters(window, bits=12, eps=params[0], delta=params[1], level_bits=4)
        return SlidingQuantiles(window, *params)

    def rows(s):
        n = int(rng.integers(1, 40))
        ts = np.sort(rng.integers(0, 3 * window, n)) + base
        if family is SlidingQuantiles:
            return s.update(ts, rng.normal(0, 1000, n))
        values = rng.integers(0, 50, n) if rng.random() < 0.5 else None
        return s.update(ts, rng.integers(0, 4096, n), values)

    kind = rng.random()
    if kind < 0.1:
        return fresh()
    s = rows(fresh())
    if kind < 0.3:
        s = type(s).merge_all([s, rows(fresh())])
    return s


@st.composite
def batches(draw, family):
    window = draw(st.sampled_from([1, 50, 10**6]))
    params = draw(st.sampled_from([(0.1, 0.1), (0.05, 0.2)] if family is not SlidingQuantiles
                                  else [(0.02, 0.01), (0.1, 0.05)]))
    base = draw(st.sampled_from([0, 10**12, INT64_MIN + 1, INT64_MAX - 10**7]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    groups = [[make(family, window, params, rng, base) for _ in range(draw(st.integers(1, 4)))]
              for _ in range(draw(st.integers(1, 5)))]
    return groups


def starts_of(groups) -> np.ndarray:
    return np.cumsum([0] + [len(g) for g in groups[:-1]]).astype(np.int64)


FAMILIES = [pytest.param(SlidingCountMin, id="ecm"), pytest.param(SlidingHeavyHitters, id="hh"),
            pytest.param(SlidingQuantiles, id="quantiles")]


def takes_one_pass(name, flat) -> bool:
    """Whether the one-pass quantiles must answer (compiled, every sketch
    updated, times away from int64's edges, which the column leaves to
    from_bytes)."""
    return name != "numpy" and all(s.newest is not None and abs(s.newest) < 2**60 for s in flat)


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_round_trip_union_and_answers_are_the_sketches_own(name, family, data):
    groups = data.draw(batches(family))
    flat = [s for g in groups for s in g]
    blobs = [s.to_bytes() for s in flat]
    starts = starts_of(groups)
    with engine(name):
        column = COLUMNS[family].from_bytes(blobs)
        assert column.to_bytes() == blobs
        assert all(column[i] == s for i, s in enumerate(flat))
        united = column.union(starts)
        merged = [family.merge_all(g) for g in groups]
        assert united.to_bytes() == [m.to_bytes() for m in merged]
        lower, upper = column.bounds()
        assert [(int(a), int(b)) for a, b in zip(lower, upper)] == [s.bounds() for s in flat]
        if family is SlidingCountMin:
            got = column.union_bounds(starts)
            expect = [g[0].total_from_bounds(*SlidingCountMin.union_bounds(g)) for g in groups]
            assert [(int(a), int(b)) for a, b in zip(*got)] == [tuple(map(int, e)) for e in expect]
            # one item per sketch (held ones and others), as of each newest and of a later time and window
            item = np.random.default_rng(len(flat)).integers(0, 4096, len(flat))
            hashes = hash64(item, flat[0].seed)
            later = [(s.newest or 0) + 7 for s in flat]
            w = flat[0].window // 2 + 1
            for now, win in ((None, None), (later, w)):
                got = column.frequencies_of_hashes(hashes, now, win)
                expect = [s.frequencies_of_hashes(hashes[i:i + 1], None if now is None else now[i], win)
                          for i, s in enumerate(flat)]
                assert [(float(a), int(b), int(c)) for a, b, c in zip(*got)] == \
                    [(float(e[0][0]), int(e[1][0]), int(e[2][0])) for e in expect]
                fused = CountMinColumn.frequencies_of_bytes(blobs, lambda seed: hash64(item, seed), None, now,
                                                                   win)  # bounded as decoded
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or all(np.array_equal(a, b) for a, b in zip(fused, got))
            # one item per group, from the group's summed counter bounds (its rows, in the rows form)
            group_hashes = hashes[starts]
            group_later = [max(s.newest or 0 for s in g) + 7 for g in groups]
            for now, win in ((None, None), (group_later, w)):
                got = column.union_frequencies_of_hashes(starts, group_hashes, now, win)
                expect = [SlidingCountMin.union_frequencies_of_hashes(g, group_hashes[i:i + 1],
                                                                      None if now is None else now[i], win)
                          for i, g in enumerate(groups)]
                assert [(float(a), int(b), int(c)) for a, b, c in zip(*got)] == \
                    [(float(e[0][0]), int(e[1][0]), int(e[2][0])) for e in expect]
                fused = CountMinColumn.frequencies_of_bytes(blobs, lambda seed: hash64(item[starts], seed),
                                                                   starts, now, win)
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or all(np.array_equal(a, b) for a, b in zip(fused, got))
            stamps = [s.newest for s in flat if s.newest is not None]
            if stamps:  # a time before a sketch's newest: the column raises it, the one pass declines
                assert CountMinColumn.frequencies_of_bytes(blobs, lambda seed: hashes, None,
                                                                  np.full(len(flat), min(stamps) - 1), None) is None
        if family is SlidingHeavyHitters:  # the walks down the levels, all at once: the same lists
            later = max(s.newest or 0 for s in flat) + 3
            w = flat[0].window // 2 + 1
            for phi in (0.05, 0.5, 1.0):
                expect = [s.heavy_hitters(phi) for s in flat]
                assert column.heavy_hitters(phi) == expect
                fused = HeavyHittersColumn.heavy_hitters_of_bytes(Blobs.of(blobs), phi)  # bounded as decoded
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or fused == expect
                expect = [SlidingHeavyHitters.union_heavy_hitters(g, phi) for g in groups]
                assert column.heavy_hitters(phi, starts) == expect
                fused = HeavyHittersColumn.heavy_hitters_of_bytes(Blobs.of(blobs), phi, starts)
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or fused == expect
            expect = [SlidingHeavyHitters.union_heavy_hitters(g, 0.1, later, w) for g in groups]
            assert column.heavy_hitters(0.1, starts, later, w) == expect
            fused = HeavyHittersColumn.heavy_hitters_of_bytes(Blobs.of(blobs), 0.1, starts, later, w)
            assert fused is None or fused == expect
            stamps = [s.newest for s in flat if s.newest is not None]
            if stamps:  # a time before a sketch's newest: the column raises it, the one pass declines
                assert HeavyHittersColumn.heavy_hitters_of_bytes(Blobs.of(blobs), 0.1, None, max(stamps) - 1) is None
        if family is SlidingQuantiles:
            for q in (0.0, 0.5, 0.99):
                assert np.array_equal(column.quantiles(q), [s.quantile(q) for s in flat], equal_nan=True)
                fused = QuantileColumn.quantiles_of_bytes(Blobs.of(blobs), q)  # decoded and bounded at once
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or np.array_equal(fused, [s.quantile(q) for s in flat], equal_nan=True)
                expect = []
                for g in groups:
                    keys, lo, up = SlidingQuantiles.union_bounds(g)
                    expect.append(quantiles_from_bounds(g[0].mapping, keys, lo, up, [q])[0])
                assert np.array_equal(column.union_quantiles(starts, q), expect, equal_nan=True)
                fused = QuantileColumn.quantiles_of_bytes(Blobs.of(blobs), q, groups=starts)
                assert fused is not None or not takes_one_pass(name, flat)
                assert fused is None or np.array_equal(fused, expect, equal_nan=True)
            # window counts: each sketch's bounds; a group's, its sketches' bounds summed as of its newest
            counts = QuantileColumn.counts_of_bytes(Blobs.of(blobs))
            assert counts is not None or not takes_one_pass(name, flat)
            assert counts is None or [tuple(map(int, c)) for c in zip(*counts)] == [s.bounds() for s in flat]
            expect = []
            for g in groups:
                at = max((s.newest for s in g if s.newest is not None), default=None)
                expect.append(tuple(map(sum, zip(*[s.bounds(at if s.newest is not None else None) for s in g]))))
            assert [tuple(map(int, c)) for c in zip(*column.union_bounds(starts))] == expect
            counts = QuantileColumn.counts_of_bytes(Blobs.of(blobs), groups=starts)
            assert counts is None or [tuple(map(int, c)) for c in zip(*counts)] == expect
            for (lo, up), m in zip(expect, merged):  # both bracket the union's count
                m_lo, m_up = m.bounds()
                assert lo <= m_up and m_lo <= up


def test_frequencies_of_bytes_refuses_bad_groups_and_hashes():
    blobs = [SlidingCountMin(10).update([1, 2], ["x", "y"]).to_bytes() for _ in range(3)]
    for starts in ([1], [0, 0], [0, 3], [[0]]):
        with pytest.raises(ValueError, match="group_starts"):
            CountMinColumn.frequencies_of_bytes(blobs, lambda seed: hash64(["x"], seed), starts)
    if compiled.active():
        with pytest.raises(ValueError, match="one hash per group"):
            CountMinColumn.frequencies_of_bytes(blobs, lambda seed: hash64(["x"] * 3, seed), [0, 2])


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
def test_answers_as_of_a_later_time_and_window(name, family):
    rng = np.random.default_rng(3)
    flat = [make(family, 10**6, (0.1, 0.1) if family is not SlidingQuantiles else (0.02, 0.01), rng, 0)
            for _ in range(12)]
    later = max(s.newest or 0 for s in flat) + 777
    nows = np.full(len(flat), later)
    with engine(name):
        column = COLUMNS[family].from_bytes([s.to_bytes() for s in flat])
        lower, upper = column.bounds(nows, 10**5)
        assert [(int(a), int(b)) for a, b in zip(lower, upper)] == [s.bounds(later, 10**5) for s in flat]
        if family is SlidingQuantiles:
            fused = QuantileColumn.quantiles_of_bytes([s.to_bytes() for s in flat], 0.9, nows, 10**5)
            assert fused is not None or not takes_one_pass(name, flat)
            assert fused is None or np.array_equal(fused, [s.quantile(0.9, later, 10**5) for s in flat],
                                                   equal_nan=True)
            assert QuantileColumn.quantiles_of_bytes([s.to_bytes() for s in flat], 0.9, nows - 10**7) is None
            starts = np.array([0, 5, 9])
            fused = QuantileColumn.quantiles_of_bytes([s.to_bytes() for s in flat], 0.9, later, 10**5, groups=starts)
            assert fused is None or np.array_equal(fused, column.union_quantiles(starts, 0.9, later, 10**5),
                                                   equal_nan=True)
            counts = QuantileColumn.counts_of_bytes([s.to_bytes() for s in flat], nows, 10**5)
            assert counts is None or [tuple(map(int, c)) for c in zip(*counts)] == [s.bounds(later, 10**5)
                                                                                     for s in flat]
            counts = QuantileColumn.counts_of_bytes([s.to_bytes() for s in flat], later, 10**5, groups=starts)
            united = column.union_bounds(starts, later, 10**5)
            assert [tuple(map(int, c)) for c in zip(*united)] == [
                tuple(map(sum, zip(*[s.bounds(later, 10**5) for s in g]))) for g in (flat[:5], flat[5:9], flat[9:])]
            assert counts is None or all(np.array_equal(a, b) for a, b in zip(counts, united))
        with pytest.raises(ValueError) as got:
            column.bounds(nows - 10**7, None)
        with pytest.raises(ValueError) as expect:
            next(s for s in flat if s.newest is not None).bounds(later - 10**7)
        assert type(got.value) is type(expect.value)


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data(), kind=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_mutated_bytes_decode_or_raise_as_from_bytes(name, family, data, kind, seed):
    groups = data.draw(batches(family))
    blobs = [s.to_bytes() for g in groups for s in g]
    rng = np.random.default_rng(seed)
    i = int(rng.integers(0, len(blobs)))
    blobs[i] = mutate(blobs[i], rng, kind)
    try:
        expect = [family.from_bytes(b) for b in blobs]
    except (ValueError, TypeError) as exc:
        with engine(name), pytest.raises(type(exc)) as got:
            COLUMNS[family].from_bytes(blobs)
        assert str(got.value) == str(exc)
        return
    with engine(name):
        column = COLUMNS[family].from_bytes(blobs)
        fused = QuantileColumn.quantiles_of_bytes(blobs, 0.5) if family is SlidingQuantiles else None
        hitters = HeavyHittersColumn.heavy_hitters_of_bytes(blobs, 0.3) if family is SlidingHeavyHitters else None
    if fused is not None:  # the one-pass answers take only what decodes, and answer as the sketches do
        assert np.array_equal(fused, [s.quantile(0.5) for s in expect], equal_nan=True)
    if hitters is not None:
        assert hitters == [s.heavy_hitters(0.3) for s in expect]
    if column is None:  # the mutation changed a parameter: the sketches differ
        assert len({s._params() if family is not SlidingHeavyHitters else (s.bits, s.level_bits) + s._params()
                     for s in expect}) > 1
        return
    assert column.to_bytes() == [s.to_bytes() for s in expect]


def _arrays(k) -> list:
    c = k.col
    return [k.offsets, k.keys, k.newest, k.has_newest, c.offsets, c.exps, c.hi, c.lo, c.newest, c.has_newest, c.merged]


@pytest.mark.skipif(not compiled.AVAILABLE, reason="no numba")
@pytest.mark.parametrize("family", [FAMILIES[0], FAMILIES[2]])  # heavy hitters: levels of Count-Min counters
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_compiled_keyed_read_and_union_are_the_numpy_steps(family, data):
    """The one-pass keyed reader and union (compiled.read_keyed,
    compiled.keyed_union) take every valid sketch and give the arrays the
    numpy steps give (KeyedCounters.read's _read, merge_keyed_groups)."""
    groups = data.draw(batches(family))
    blobs = [s.to_bytes() for g in groups for s in g]
    starts = starts_of(groups)
    with engine("numpy"):
        plain = COLUMNS[family].from_bytes(blobs)
        plain_union = plain._counters().unite(starts)
    with engine("auto"):
        fused = COLUMNS[family].from_bytes(blobs)
        counters = fused._counters()
        newest = np.full(starts.size, INT64_MIN, dtype=np.int64)
        group_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(counters))))
        np.maximum.at(newest, group_of[counters.has_newest], counters.newest[counters.has_newest])
        c = counters.col
        ok = compiled.keyed_union(counters.keys, c.offsets, c.exps, c.hi, c.lo, c.merged, counters.offsets,
                                  np.append(starts, len(counters)), newest, c.window, k_of_eps(c.eps))[0]
        assert ok  # the union was the one pass's, not the numpy fallback's
        fused_union = counters.unite(starts)
    for a, b in zip(_arrays(plain._counters()), _arrays(counters)):
        assert np.array_equal(a, b)
    for a, b in zip(_arrays(plain_union), _arrays(fused_union)):
        assert np.array_equal(a, b)


def _varints(values) -> bytes:
    out = bytearray()
    for v in values:
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                break
    return bytes(out)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="no numba")
@settings(max_examples=examples(400), deadline=None)
@given(flags=st.sampled_from([1, 3, 9, 11, 5, 13, 7]), runs=st.sampled_from([1, 1, 1, 2]),
       exponent=st.sampled_from([0, 0, 0, 1, 7, 60, 61, 62, 63]), length=st.sampled_from([1, 1, 1, 2]),
       tick=st.sampled_from([0, 1, 2, 3, 1000, 2**40, 2**61, 2**63]), delta=st.sampled_from([0, 1, 1, 2, 6, 2**20, 2**62]),
       width=st.sampled_from([0, 0, 1, 2, 3, 2**61]), extra=st.sampled_from([b"", b"", b"\x00"]),
       newest=st.sampled_from([10**9, -(2**63), -(2**63) + 5, 2**63 - 1]),
       window=st.sampled_from([1, 7, 10**6, 2**62]), eps=st.sampled_from([0.9, 0.5, 0.1]),
       back=st.sampled_from([0, 1, 2, 3, 1000, 2**30]))
def test_one_bucket_counters_read_as_the_numpy_reader(flags, runs, exponent, length, tick, delta, width, extra,
                                                     newest, window, eps, back):
    """Counters declaring one bucket take the compiled readers' short path
    (compiled._one_bucket): every field at and past the checks' edges (the
    tick and gcd rules, a merged or canonical bucket, int64 room, the
    window, trailing bytes) accepted and decoded, or refused, as the
    general compiled decoder does, and what it accepts the numpy reader
    accepts alike (the compiled loops leave totals of 2**62 and more to it)."""
    from ehist.keyed_counters import KeyedCounters

    fields = [1, runs, exponent, length] + ([tick] if flags & 8 else []) + [delta, width]
    counter = bytes([flags]) + _varints(fields) + extra
    region = _varints([1, 0, len(counter)]) + counter  # one counter, key 0
    buf = np.frombuffer(region, dtype=np.uint8)
    args = (buf, np.array([0]), np.array([buf.size]), 4, window, eps, np.array([newest]))
    with engine("auto"):
        got_ok, got = KeyedCounters.read(*args)
        l = got.col._l
        cut = max(newest - back, -(2**63))
        bounds_ok, _, _, lower, upper, units = compiled.read_keyed_bounds(buf, [0], [buf.size], 4, 3, [newest], window,
                                                                          l, [cut])
    general = compiled.decode_histograms(buf, [buf.size - len(counter) + 1], [buf.size], [flags], [True], [newest],
                                         window, l)
    assert got_ok.tolist() == general[0].tolist() == bounds_ok.tolist()
    if got_ok[0]:
        assert [got.col.exps.tolist(), got.col.hi.tolist(), got.col.lo.tolist()] == [a.tolist() for a in general[2:]]
        (e,), (h,), (lo,) = (a.tolist() for a in general[2:])  # the bucket's bounds after the cutoff
        assert (lower.tolist(), upper.tolist(), units.tolist()) == (
            [(1 << e if lo > cut else 1) if h > cut else 0], [1 << e if h > cut else 0], [1 << e])
        with engine("numpy"):
            want_ok, want = KeyedCounters.read(*args)
        assert want_ok[0]
        for a, b in zip(_arrays(want), _arrays(got)):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("family", FAMILIES)
def test_sketches_of_different_parameters_give_none(family):
    rng = np.random.default_rng(5)
    a = make(family, 100, (0.1, 0.1) if family is not SlidingQuantiles else (0.02, 0.01), rng, 0)
    b = make(family, 200, (0.1, 0.1) if family is not SlidingQuantiles else (0.02, 0.01), rng, 0)
    assert COLUMNS[family].from_bytes([a.to_bytes(), b.to_bytes()]) is None
    with pytest.raises(CorruptSketchError):
        COLUMNS[family].from_bytes([a.to_bytes(), b"EH" + a.to_bytes()[2:-1]])


# ------------------------------------------------------------- the udaf specs
@pytest.fixture(scope="module")
def specs():
    pytest.importorskip("pandas")
    from udaf import Frequencies, HeavyHitters, Quantile

    return {SlidingCountMin: Frequencies("x", 1000, eps=0.1, delta=0.1),
            SlidingHeavyHitters: HeavyHitters("x", 1000, bits=12, phi=0.2, eps=0.1, delta=0.1),
            SlidingQuantiles: Quantile("x", 1000, q=0.9)}


@pytest.mark.parametrize("name", ENGINES)
@pytest.mark.parametrize("family", FAMILIES)
def test_spec_batch_paths_equal_their_per_key_ones(name, family, specs):
    from udaf.spec import Spec

    spec = specs[family]
    cls = type(spec)
    rng = np.random.default_rng(11)
    groups = [[spec.make(1000).update(*_rows(family, rng)) for _ in range(int(rng.integers(1, 5)))]
              for _ in range(9)]
    blobs = [s.to_bytes() for g in groups for s in g]
    starts = starts_of(groups)
    with engine(name):
        assert cls.merge_groups(blobs, starts) == Spec.merge_groups.__func__(cls, blobs, starts)
        nows = np.full(len(blobs), 5000)
        got = cls.answers(blobs + [None], np.append(nows, 0), 500)
        expect = [family.from_bytes(b).estimate(5000, 500) for b in blobs] + [np.nan]
        assert np.array_equal(got.estimate, expect, equal_nan=True)
        union = spec.union(blobs, starts)
        if family in (SlidingCountMin, SlidingHeavyHitters):  # *_sketch_frequency of a batch: each row's item
            import pyarrow as pa

            # nulls and, for 12-bit heavy hitters, ids past 2**12 (and negative ones): NaN
            item = pa.array([None if i % 5 == 0 else int(i) - 100 for i in rng.integers(0, 4200, len(blobs) + 1)])

            def one(b, x):
                if x is None or (family is SlidingHeavyHitters and not 0 <= x < 4096):
                    return np.nan
                return family.from_bytes(b).frequencies([x], 5000, 500)[0][0]

            got = cls.estimate_frequency(blobs + [None], {"item": item}, np.append(nows, 0), 500).to_numpy(
                zero_copy_only=False)
            expect = [one(b, x) for b, x in zip(blobs, item.to_pylist())] + [np.nan]
            assert np.array_equal(got, expect, equal_nan=True)
            # arrays of sketches (rows 0 and 3 without any): each row's item from the summed counter bounds
            rows = np.r_[0, starts[:2], starts[2:3], starts[2:]]
            item = pa.array([None if i % 4 == 1 else int(i) for i in rng.integers(0, 4096, rows.size)])
            got = cls.estimate_frequency_of_unions(blobs, rows, {"item": item}, np.full(rows.size, 5000),
                                                   500).to_numpy(zero_copy_only=False)

            def of_union(g, x):
                parts = g if family is SlidingCountMin else [s._levels[-1] for s in g]
                h = hash64(np.array([x], dtype=np.uint64 if family is SlidingHeavyHitters else np.int64), parts[0].seed)
                return parts[0].answers_from_bounds(h, *SlidingCountMin.union_bounds(parts, 5000, 500))[0][0]

            parts = [None] + groups[:2] + [None] + groups[2:]
            expect = [np.nan if g is None or x is None else of_union(g, x) for g, x in zip(parts, item.to_pylist())]
            assert np.array_equal(got, expect, equal_nan=True)
            if family is SlidingCountMin:  # ecm_sketch_estimate of arrays: the summed counter bounds' total
                got = cls.union_answers(blobs, starts, np.full(starts.size, 5000), 500)
                expect = [g[0].total_from_bounds(*SlidingCountMin.union_bounds(g, 5000, 500)) for g in groups]
                assert [(int(a), int(b)) for a, b in zip(got.lower, got.upper)] == [tuple(map(int, e)) for e in expect]
        if family is SlidingCountMin:
            bounds = [g[0].total_from_bounds(*SlidingCountMin.union_bounds(g)) for g in groups]
            assert [(int(a), int(b)) for a, b in zip(union.lower, union.upper)] == \
                [tuple(map(int, b)) for b in bounds]
        if family is SlidingQuantiles:
            assert np.array_equal(union.estimate, spec._union_one_by_one(blobs, starts).estimate, equal_nan=True)
        if family is SlidingHeavyHitters:
            keyed = spec.key_answers(blobs + [None], np.append(nows, 0), 500)
            assert keyed.estimate == [spec._listed(s.heavy_hitters(0.2, 5000, 500)) for g in groups for s in g] + [None]
            lists = spec.union(blobs, starts, 5000)
            assert lists.estimate == [spec._listed(SlidingHeavyHitters.union_heavy_hitters(g, 0.2, 5000))
                                      for g in groups]
            got = cls.estimate_heavy_hitters(blobs, {"phi": 0.3}, None, None).to_pylist()
            assert got == [[dict(h) for h in spec._listed(s.heavy_hitters(0.3))] for g in groups for s in g]
            # arrays of sketches (rows 0 and 3 without any): each row's union answered without merging
            rows = np.r_[0, starts[:2], starts[2:3], starts[2:]]
            got = cls.estimate_heavy_hitters_of_unions(blobs, rows, {"phi": 0.2}, np.full(rows.size, 5000),
                                                       500).to_pylist()
            lists = [[dict(h) for h in spec._listed(SlidingHeavyHitters.union_heavy_hitters(g, 0.2, 5000, 500))]
                     for g in groups]
            assert got == [None] + lists[:2] + [None] + lists[2:]
            assert cls.estimate_heavy_hitters_of_unions([], np.zeros(2, dtype=np.int64), {"phi": 0.2}, None,
                                                        None).to_pylist() == [None, None]
        if family is SlidingQuantiles:
            keyed = spec.key_answers(blobs, nows, 500)
            assert np.array_equal(keyed.estimate, [s.quantile(0.9, 5000, 500) for g in groups for s in g],
                                  equal_nan=True)


@pytest.mark.parametrize("family", [SlidingCountMin, SlidingQuantiles, SlidingHeavyHitters])
def test_a_lone_sketch_keeps_its_bytes_once_the_decoder_takes_them(family, specs):
    """A group of one sketch keeps its bytes (``Family.kept_alone``), and
    any byte of it altered gives merge_all's bytes or its error
    (:func:`tests.lone.assert_lone_sketches_keep_their_bytes`)."""
    from pathlib import Path

    from .lone import assert_lone_sketches_keep_their_bytes

    spec = specs[family]
    rows = _rows(family, np.random.default_rng(4))
    old = Path(__file__).parent / "golden" / {SlidingCountMin: "cm_v1.bin", SlidingQuantiles: "quantiles_v1.bin",
                                              SlidingHeavyHitters: "hh_v1.bin"}[family]
    take = 3 if family is SlidingHeavyHitters else 12  # a heavy-hitter sketch's levels: a few rows make many bytes
    assert_lone_sketches_keep_their_bytes(type(spec), family, spec.make(1000).update(*(r[:take] for r in rows)).to_bytes(),
                                          old.read_bytes())


def _rows(family, rng):
    n = int(rng.integers(1, 60))
    ts = np.sort(rng.integers(0, 3000, n))
    if family is SlidingQuantiles:
        return ts, rng.normal(100, 30, n)
    return ts, rng.integers(0, 4096, n)


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), window=st.sampled_from([1, 30, 10**6, 2**62]),
       base=st.sampled_from([0, INT64_MIN + 1, INT64_MAX - 500]))
def test_quantile_column_build_is_update_per_run(name, seed, window, base):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, int(rng.integers(1, 8)))
    ts = np.concatenate([np.sort(rng.integers(0, 400, n)) + base for n in lengths]).astype(np.int64)
    x = np.round(rng.normal(0, 50, ts.size), int(rng.integers(0, 3)))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    with engine(name):
        column = QuantileColumn.build(ts, starts, x, (window, 0.05, 0.01))
    ends = np.append(starts[1:], ts.size)
    expect = [SlidingQuantiles(window, 0.05, 0.01).update(ts[a:b], x[a:b]).to_bytes() for a, b in zip(starts, ends)]
    assert column.to_bytes() == expect


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), window=st.sampled_from([1, 30, 10**6, 2**62]),
       base=st.sampled_from([0, INT64_MIN + 1, INT64_MAX - 500]), ones=st.booleans())
def test_count_min_column_build_is_update_per_run(name, seed, window, base, ones):
    from ehist.hashing import hash64

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, int(rng.integers(1, 8)))
    ts = np.concatenate([np.sort(rng.integers(0, 400, n)) + base for n in lengths]).astype(np.int64)
    h = hash64(rng.integers(0, 60, ts.size), 3)
    v = None if ones else rng.integers(0, 2**40, ts.size)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    params = (window, 0.1, 0.1, 0.05, 3)
    with engine(name):
        column = CountMinColumn.build(ts, starts, h, v, params)
    ends = np.append(starts[1:], ts.size)
    expect = [SlidingCountMin(*params).update_hashes(ts[a:b], h[a:b], None if v is None else v[a:b]).to_bytes()
              for a, b in zip(starts, ends)]
    assert column.to_bytes() == expect


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), window=st.sampled_from([1, 30, 10**6, 2**62]),
       base=st.sampled_from([0, INT64_MIN + 1, INT64_MAX - 500]), ones=st.booleans(),
       shape=st.sampled_from([(12, 4), (32, 8), (64, 16), (5, 2)]))
def test_heavy_hitters_column_build_is_update_per_run(name, seed, window, base, ones, shape):
    bits, level_bits = shape
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, int(rng.integers(1, 8)))
    ts = np.concatenate([np.sort(rng.integers(0, 400, n)) + base for n in lengths]).astype(np.int64)
    top = 2**63 if bits == 64 else 1 << bits
    ids = (rng.integers(0, min(top, 2**63), ts.size, dtype=np.int64).astype(np.uint64)
           * np.uint64(2 if bits == 64 else 1))
    v = None if ones else rng.integers(0, 2**40, ts.size)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    params = (window, 0.1, 0.1, None, 3)
    with engine(name):
        column = HeavyHittersColumn.build(ts, starts, ids, v, bits, level_bits, params)
    ends = np.append(starts[1:], ts.size)
    expect = [SlidingHeavyHitters(window, bits, 0.1, 0.1, None, 3, level_bits).update(
        ts[a:b], ids[a:b], None if v is None else v[a:b]).to_bytes() for a, b in zip(starts, ends)]
    assert column.to_bytes() == expect


def test_heavy_hitters_build_refuses_what_update_refuses():
    ts = np.array([1, 2, 3])
    with pytest.raises(ValueError) as expect:
        SlidingHeavyHitters(100, bits=4).update(ts, np.array([1, 16, 2], dtype=np.uint64))
    with pytest.raises(ValueError) as got:
        HeavyHittersColumn.build(ts, [0], np.array([1, 16, 2], dtype=np.uint64), None, 4, 2, (100, 0.1, 0.1, None, 0))
    assert str(got.value) == str(expect.value)


@pytest.mark.parametrize("family", [SlidingCountMin, SlidingHeavyHitters])
def test_weighted_partials_equal_the_per_key_build(specs, family):
    from udaf.ecm_spec import _Weighted
    from udaf.spec import Data

    spec = specs[family]
    rng = np.random.default_rng(2)
    keys = np.sort(rng.integers(0, 40, 600))
    t = np.concatenate([np.sort(rng.integers(0, 5000, int((keys == k).sum()))) for k in np.unique(keys)])
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    present = rng.random(t.size) < 0.9
    data = Data(present, {"item": rng.integers(0, 4096, int(present.sum())).astype(np.uint64)})
    now = np.full(starts.size, 6000)
    for at in (None, now):
        got, answers = spec.partials(t, starts, data, 1000, at)
        want, expect = _Weighted.partials(spec, t, starts, Data(present, dict(data.arrays)), 1000, at)
        assert got == want
        assert np.array_equal(answers.lower, expect.lower) and np.array_equal(answers.upper, expect.upper)


def test_builds_refuse_bad_input():
    ts = np.array([1, 2, 3])
    with pytest.raises(ValueError, match="different lengths"):
        QuantileColumn.build(ts, [0], [1.0, 2.0], (100, 0.02, 0.01))
    with pytest.raises(ValueError, match="different lengths"):
        CountMinColumn.build(ts, [0], np.arange(2, dtype=np.uint64), None, (100, 0.1, 0.1, 0.1, 0))
    with pytest.raises(ValueError, match="starts must begin at 0"):
        QuantileColumn.build(ts, [1, 2], [1.0, 2.0, 3.0], (100, 0.02, 0.01))
    with pytest.raises(ValueError, match="values must be finite"):  # update's own message
        QuantileColumn.build(ts, [0], [1.0, np.nan, 3.0], (100, 0.02, 0.01))
    with pytest.raises(ValueError, match="non-negative"):
        CountMinColumn.build(ts, [0], np.arange(3, dtype=np.uint64), np.array([1, -1, 2]), (100, 0.1, 0.1, 0.1, 0))


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width_eps=st.sampled_from([0.5, 0.1, 0.01]))
def test_row_units_are_each_sketchs_row_zero_units(seed, width_eps):
    """``_row_units`` (what tells a union near int64) sums each sketch's
    row-0 buckets from one stretch of the column: the units a loop over
    every counter finds, sketches without counters (never updated, or
    everything expired) among them."""
    from frequencies.columnar import _row_units

    rng = np.random.default_rng(seed)
    sketches = []
    for _ in range(int(rng.integers(1, 6))):
        s = SlidingCountMin(1000, width_eps, 0.1)
        n = int(rng.choice([0, 5, 400]))  # none, the rows form, counters (past width rows)
        if n:
            s.update(np.sort(rng.integers(0, 3000, n)), rng.integers(0, 50, n), rng.integers(1, 9, n))
        sketches.append(s)
    col = CountMinColumn.from_sketches(sketches)
    c, width = col.counters, col._width
    want = np.zeros(len(c))
    for s in range(len(c)):
        for i in range(int(c.offsets[s]), int(c.offsets[s + 1])):
            if c.keys[i] < width:
                a, z = int(c.col.offsets[i]), int(c.col.offsets[i + 1])
                want[s] += sum(2.0 ** int(e) for e in c.col.exps[a:z])
    assert _row_units(c, width).tolist() == want.tolist()


@pytest.mark.parametrize("weight", [2**59, 2**60, 2**61])
def test_unions_near_int64_are_merge_all_or_its_error(weight):
    """Groups whose rough total reaches 2**62 are united by the sketch
    class's own merge_all (the path CountMinColumn and QuantileColumn share
    in ehist.keyed_counters.KeyedColumn; only weighted counters get there):
    the same sketch, or the same SumOverflowError, beside a light group
    united in columns."""
    from ehist.errors import SumOverflowError

    def make(i, w):
        return SlidingCountMin(1000, 0.1, 0.1).update(np.array([i, i + 1]), np.array([1, 2]), np.array([w, w]))

    heavy, light = [make(i, weight) for i in range(3)], [make(i, 5) for i in range(2)]
    col = CountMinColumn.from_sketches(light + heavy)
    try:
        want = SlidingCountMin.merge_all(heavy)
    except SumOverflowError:
        with pytest.raises(SumOverflowError):
            col.union(np.array([0, 2]))
        return
    united = col.union(np.array([0, 2]))
    assert len(united) == 2 and united[0] == SlidingCountMin.merge_all(light) and united[1] == want
    assert repr(united).startswith("CountMinColumn(sketches=2, counters=")
