"""Many sliding L_p sketches at once (lp_norms/columnar.py,
lp_norms/compiled.py) against each sketch's own methods: bytes round trip,
union byte for byte against ``merge_all``, estimates to the last bit (of
one sketch, and of a key's partials added as ``LpNorm.union`` adds them),
mutated bytes raising what ``from_bytes`` raises (or decoding as it
decodes), the LpNorm spec's batch paths against its per-sketch ones, and
all of it again without the compiled loops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ehist import compiled
from ehist.errors import IncompatibleSketchError
from lp_norms import SlidingLpNorm
from lp_norms.columnar import LpColumn

from .conftest import examples
from .test_fuzz import mutate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def make(p, window, rows, rng, base, tick):
    """One sketch: empty, a few rows (times a multiple of ``tick``, values
    0 to 9, so that units tie and buckets fill), or a merge of two."""
    def rows_of(s):
        n = int(rng.integers(1, 40))
        ts = np.sort(rng.integers(0, min(3 * window, 2**61) // tick + 2, n)) * tick + base
        return s.update(ts, rng.integers(0, 30, n), rng.integers(0, 10, n).astype(float))

    kind = rng.random()
    new = (lambda: SlidingLpNorm(p, window, eps=0.3, delta=0.3, seed=5, rows=rows))
    if kind < 0.1:
        return new()
    s = rows_of(new())
    if kind < 0.35:
        s = SlidingLpNorm.merge_all([s, rows_of(new())])
    return s


@st.composite
def batches(draw):
    p = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0]))
    window = draw(st.sampled_from([1, 50, 10**6, 2**62]))
    rows = draw(st.sampled_from([2, 3, 8, 33]))
    base = draw(st.sampled_from([0, 10**12, INT64_MIN + 1, INT64_MAX - 2**61 - 10**7]))
    tick = draw(st.sampled_from([1, 1000]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [[make(p, window, rows, rng, base, tick) for _ in range(draw(st.integers(1, 5)))]
            for _ in range(draw(st.integers(1, 5)))]


def starts_of(groups) -> np.ndarray:
    return np.cumsum([0] + [len(g) for g in groups[:-1]]).astype(np.int64)


def summed(sketches, now) -> float:
    """``LpNorm.union``'s answer of one key, as it is computed one key at
    a time: the sketches composed as of ``now`` and added in order (their
    elements' exact norm where all are in the elements form)."""
    if now is None:
        return 0.0
    return SlidingLpNorm.union_estimate(sketches, now)


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def loops(request, monkeypatch):
    if request.param and not compiled.AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(compiled, "USE", request.param)
    return request.param


@settings(max_examples=examples(60), deadline=None)
@given(groups=batches(), later=st.integers(0, 10**6), frac=st.floats(0.0, 1.0))
def test_round_trip_union_and_estimates_are_the_sketches_own(groups, later, frac):
    sketches = [s for g in groups for s in g]
    blobs = [s.to_bytes() for s in sketches]
    column = LpColumn.from_bytes(blobs)
    assert [column[i] for i in range(len(column))] == sketches
    assert column.to_bytes() == blobs
    assert LpColumn.from_sketches(sketches).to_bytes() == blobs
    starts = starts_of(groups)
    united = column.union(starts)
    merged = [SlidingLpNorm.merge_all(g) for g in groups]
    assert united.to_bytes() == [s.to_bytes() for s in merged]
    assert united.estimates().tolist() == [s.estimate() for s in merged]
    window = sketches[0]._window
    w = max(1, int(frac * window))
    nows = [(s.newest if s.newest is not None else 0) + min(later, INT64_MAX - (s.newest or 0)) for s in merged]
    assert united.estimates(nows, w).tolist() == [s.estimate(t, w) for s, t in zip(merged, nows)]
    newest = [max([s.newest for s in g if s.newest is not None], default=None) for g in groups]
    assert column.sum_estimates(starts).tolist() == [summed(g, t) for g, t in zip(groups, newest)]
    at = max([t for t in newest if t is not None], default=0)
    assert column.sum_estimates(starts, at).tolist() == [summed(g, at) for g in groups]


@settings(max_examples=examples(15), deadline=None)
@given(groups=batches())
def test_the_numpy_paths_give_the_same(groups):
    sketches = [s for g in groups for s in g]
    blobs = [s.to_bytes() for s in sketches]
    starts = starts_of(groups)
    fast = LpColumn.from_bytes(blobs)
    use = compiled.USE
    compiled.USE = False
    try:
        slow = LpColumn.from_bytes(blobs)
        assert slow.to_bytes() == blobs
        assert slow.union(starts).to_bytes() == fast.union(starts).to_bytes()
        assert slow.estimates().tolist() == fast.estimates().tolist()
        assert slow.sum_estimates(starts).tolist() == fast.sum_estimates(starts).tolist()
    finally:
        compiled.USE = use


def test_one_row_sketches_go_through_the_class():
    """numpy sums one column of buckets pairwise: a single-row sketch's
    union and estimates are the class's own, bucket order and all (in
    these sketches pairwise and in-order sums differ)."""
    rng = np.random.default_rng(0)
    parts = [SlidingLpNorm(1.0, 10**6, rows=1).update(np.arange(k, 399, 3), rng.integers(0, 50, 133),
                                                        rng.random(133) * 1e6) for k in range(3)]
    column = LpColumn.from_bytes([s.to_bytes() for s in parts])
    assert column.union([0]).to_bytes() == [SlidingLpNorm.merge_all(parts).to_bytes()]
    assert column.estimates().tolist() == [s.estimate() for s in parts]
    assert column.sum_estimates([0]).tolist() == [summed(parts, 399)]


def test_ties_of_times_unite_in_merge_alls_order():
    """Units of one newest and oldest time from several sketches: merge_all
    takes the later unit first."""
    ts = np.repeat(np.arange(0, 60, 5), 3)
    parts = [SlidingLpNorm(2.0, 100, rows=4, seed=1).update(ts, (ts * k) % 7, np.full(ts.size, 1.0 + k))
             for k in range(4)]
    column = LpColumn.from_bytes([s.to_bytes() for s in parts])
    assert column.union([0, 2]).to_bytes() == [SlidingLpNorm.merge_all(parts[:2]).to_bytes(),
                                               SlidingLpNorm.merge_all(parts[2:]).to_bytes()]


def test_estimates_refuse_what_estimate_refuses():
    s = SlidingLpNorm(1.0, 100, rows=4).update([5, 9], [1, 2])
    col = LpColumn.from_sketches([s, SlidingLpNorm(1.0, 100, rows=4)])
    with pytest.raises(ValueError) as exc:
        s.estimate(3)
    with pytest.raises(ValueError) as got:
        col.estimates([3, 3])
    assert str(got.value) == str(exc.value)
    with pytest.raises(ValueError, match="window"):
        col.estimates(None, 101)
    with pytest.raises(ValueError) as got:
        col.sum_estimates([0], at=3)
    assert str(got.value) == str(exc.value)
    assert col.estimates([200, 200], 5).tolist() == [0.0, 0.0]
    with pytest.raises(IncompatibleSketchError):
        LpColumn.from_sketches([s, SlidingLpNorm(1.0, 100, rows=5)])
    with pytest.raises(ValueError, match="group_starts"):
        col.union([1])


@settings(max_examples=examples(80), deadline=None)
@given(groups=batches(), kind=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_mutated_bytes_decode_or_raise_as_from_bytes(groups, kind, seed):
    blobs = [s.to_bytes() for g in groups for s in g]
    rng = np.random.default_rng(seed)
    i = int(rng.integers(0, len(blobs)))
    blobs[i] = mutate(blobs[i], rng, kind)
    try:
        expect = [SlidingLpNorm.from_bytes(b) for b in blobs]
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)) as got:
            LpColumn.from_bytes(blobs)
        assert str(got.value) == str(exc)
        return
    if len({s._params() for s in expect}) > 1:  # the mutation changed a parameter: the sketches differ
        with pytest.raises(IncompatibleSketchError):
            LpColumn.from_bytes(blobs)
        return
    column = LpColumn.from_bytes(blobs)
    assert [column[j] for j in range(len(column))] == expect
    assert column.to_bytes() == [s.to_bytes() for s in expect]


def test_sums_past_float64_are_refused_as_from_bytes_refuses_them():
    s = SlidingLpNorm(2.0, 100, rows=3).update([1, 2], [1, 2])
    blob = bytearray(s.to_bytes()[:-4])
    blob[-8:] = np.array([np.inf]).tobytes()
    from ehist.serialization import seal

    bad = seal(bytes(blob))
    with pytest.raises(ValueError) as exc:
        SlidingLpNorm.from_bytes(bad)
    with pytest.raises(ValueError) as got:
        LpColumn.from_bytes([s.to_bytes(), bad])
    assert str(got.value) == str(exc.value)


def test_spec_batch_paths_equal_their_per_sketch_ones(loops):
    pytest.importorskip("pandas")
    from udaf import LpNorm
    from udaf.spec import Spec

    spec = LpNorm("x", 1000, p=1.5, eps=0.3, delta=0.3)
    cls = type(spec)
    rng = np.random.default_rng(11)
    groups = [[spec.make(1000).update(np.sort(rng.integers(0, 3000, n)), rng.integers(0, 300, n))
               for n in rng.integers(1, 80, int(rng.integers(1, 5)))] for _ in range(9)]
    blobs = [s.to_bytes() for g in groups for s in g]
    starts = starts_of(groups)
    assert cls.merge_groups(blobs, starts) == Spec.merge_groups.__func__(cls, blobs, starts)
    nows = np.append(np.full(len(blobs), 5000), 0)
    got = cls.answers(blobs + [None], nows, 500)
    expect = Spec.answers.__func__(cls, blobs + [None], nows, 500)
    assert np.array_equal(got.estimate, expect.estimate, equal_nan=True)
    assert np.array_equal(cls.union_answers(blobs, starts, None, None).estimate,
                          Spec.union_answers.__func__(cls, blobs, starts, None, None).estimate)
    by_bytes = [sorted(g, key=lambda s: s.to_bytes()) for g in groups]
    assert spec.union(blobs, starts, at=4000).estimate.tolist() == [summed(g, 4000) for g in by_bytes]
    newest = [max(s.newest for s in g) for g in groups]
    assert spec.union(blobs, starts).estimate.tolist() == [summed(g, t) for g, t in zip(by_bytes, newest)]
    # null partials: each key on its own, the same answers
    holes = blobs[:1] + [None] + blobs[1:]
    assert spec.union(holes, np.append(0, starts[1:] + 1)).estimate.tolist() == \
        [summed(g, t) for g, t in zip(by_bytes, newest)]
    other = LpNorm("x", 1000, p=1.5, eps=0.2, delta=0.3).make(1000).update([1], [1]).to_bytes()
    with pytest.raises(ValueError, match="eps"):  # one group of two parameters: the merge refuses it
        cls.merge_groups(blobs[:1] + [other], np.array([0]))
    mixed = cls.answers([blobs[0], other], None, None).estimate  # rows of two parameter sets: each its own
    assert mixed.tolist() == [SlidingLpNorm.from_bytes(b).estimate() for b in (blobs[0], other)]


def test_registry_files_decode_as_from_bytes_decodes_them():
    """The stored examples of the format (the class's ``_examples``: an
    empty sketch, one of buckets, a merge, one in the elements form and
    a merge that stays in it) in one column."""
    from pathlib import Path

    blobs = [p.read_bytes() for p in sorted((Path(__file__).parent / "golden" / "registry").glob("SlidingLpNorm-*.bin"))]
    assert len(blobs) == 5
    sketches = [SlidingLpNorm.from_bytes(b) for b in blobs]
    for blob, sketch in zip(blobs, sketches):
        column = LpColumn.from_bytes([blob, blob])
        assert column[1] == sketch
        assert column.to_bytes() == [sketch.to_bytes()] * 2
        assert column.estimates().tolist() == [sketch.estimate()] * 2
        assert column.union([0]).to_bytes() == [SlidingLpNorm.merge_all([sketch, sketch]).to_bytes()]


def test_the_compiled_median_is_numpys():
    """The branch-free quickselect against ``np.median(np.abs(v))``: ties,
    zeros of both signs, infinities, a NaN, odd and even counts, and
    counts on both sides of the insertion sort's 16."""
    pytest.importorskip("numba")
    from lp_norms import compiled as lp

    lp._kernels()
    rng = np.random.default_rng(7)
    a, b = np.empty(400), np.empty(400)
    for trial in range(3000):
        n = int(rng.integers(1, 400))
        kind = trial % 5
        if kind == 0:
            v = rng.standard_cauchy(n)
        elif kind == 1:  # many ties
            v = rng.integers(-3, 4, n).astype(float)
        elif kind == 2:
            v = np.where(rng.random(n) < 0.3, np.inf, rng.standard_normal(n))
        elif kind == 3:
            v = np.where(rng.random(n) < 0.5, 0.0, -0.0) + (rng.random(n) < 0.1) * rng.random(n)
        else:  # one value, many copies, and one other
            v = np.full(n, 2.5)
            v[rng.integers(0, n)] = rng.choice([0.0, 9.0])
        if trial % 50 == 0:
            v[rng.integers(0, n)] = np.nan
        got, want = lp._median_abs_c(v, a, b), np.median(np.abs(v))
        assert got == want or (np.isnan(got) and np.isnan(want)), (kind, n)


@st.composite
def runs_of_rows(draw):
    """Runs of (time, index hash, value) rows and sketch parameters: times
    unsorted within a run, repeated, near int64's edges; zero values."""
    p = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0]))
    rows = draw(st.sampled_from([1, 2, 5, 40]))
    window = draw(st.sampled_from([1, 7, 300, 2**62]))
    base = draw(st.sampled_from([0, INT64_MIN + 1, INT64_MAX - 400]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lens = rng.integers(0, 30, int(rng.integers(1, 7)))
    n = int(lens.sum())
    ts = base + rng.integers(0, 400, n)
    from ehist.hashing import hash64

    hashes = hash64(rng.integers(0, 12, n), 5)
    values = rng.integers(0, 4, n) * 10.0 ** rng.integers(-3, 4, n)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return (p, window, 0.3, 0.3, 5, rows), ts, starts, hashes, values


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=runs_of_rows())
def test_build_is_update_per_run(case, loops):  # (loops: one engine for every example)
    params, ts, starts, hashes, values = case
    ends = np.append(starts[1:], ts.size)
    want = [SlidingLpNorm(*params[:5], rows=params[5]).update_hashes(ts[a:z], hashes[a:z], values[a:z]).to_bytes()
            for a, z in zip(starts.tolist(), ends.tolist())]
    assert LpColumn.build(ts, starts, hashes, values, params=params).to_bytes() == want


def test_build_splits_long_runs_into_updates_blocks():
    """More timestamps than ``_atoms`` puts in one block (4M cells / rows):
    the buckets span the blocks as update builds them."""
    from ehist.hashing import hash64

    rng = np.random.default_rng(2)
    params = (2.0, 10**6, 0.3, 0.3, 5, 2000)  # 2,097 timestamps per block
    ts, hashes, values = np.arange(5000), hash64(rng.integers(0, 50, 5000), 5), rng.random(5000) * 100
    want = [SlidingLpNorm(*params[:5], rows=2000).update_hashes(ts[a:z], hashes[a:z], values[a:z]).to_bytes()
            for a, z in ((0, 1000), (1000, 5000))]
    assert LpColumn.build(ts, [0, 1000], hashes, values, params=params).to_bytes() == want


def test_build_refuses_what_update_refuses():
    params = (1.0, 100, 0.3, 0.3, 5, 4)
    ts, hashes = np.arange(6), np.arange(6, dtype=np.uint64)
    for values in (np.array([1, 2, -1, 3, 4, 5.0]), np.array([1, 2, 3, np.nan, 4, 5]),
                   np.array([1, 1, 1, 1, 1e308, 1e308])):  # the last: sums past float64, in the second run
        with pytest.raises(ValueError) as exc:
            for a, z in ((0, 3), (3, 6)):
                SlidingLpNorm(*params[:5], rows=4).update_hashes(ts[a:z], hashes[a:z], values[a:z])
        with pytest.raises(ValueError) as got:
            LpColumn.build(ts, [0, 3], hashes, values, params=params)
        assert str(got.value) == str(exc.value)


def test_spec_partials_are_the_per_key_ones(loops):
    pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    from udaf import LpNorm
    from udaf.spec import Spec

    rng = np.random.default_rng(4)
    n = 400
    t = np.sort(rng.integers(0, 5000, n))
    keys = np.sort(rng.integers(0, 30, n))
    order = np.lexsort((t, keys))
    t, keys = t[order], keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    dst = pa.array([None if i % 17 == 0 else f"d{i % 23}" for i in rng.integers(0, 1000, n)])
    for spec in (LpNorm("dst", 1000, p=1.0, eps=0.3, delta=0.3), LpNorm("dst", 1000, value="v", p=2.0)):
        data = spec.read({"column": dst, "value": pa.array(rng.integers(0, 100, n))}, n)
        assert spec.partials(t, starts, data, 1000)[0] == Spec.partials(spec, t, starts, data, 1000)[0]


def test_compiled_loops_refuse_arrays_that_do_not_fit():
    """The compiled loops check nothing themselves: their wrappers refuse
    what would make them read or write out of bounds."""
    pytest.importorskip("numba")
    from lp_norms import compiled as lp

    col = LpColumn.from_sketches([SlidingLpNorm(2.0, 100, rows=3).update([1, 5], [1, 2])._as_buckets(),
                                  SlidingLpNorm(2.0, 100, rows=3).update([2], [7])._as_buckets()])  # buckets
    args = dict(data=col.data, at=col.at, hi=col.hi, lo=col.lo, offsets=col.offsets, newest=col.newest,
                has_newest=col.has_newest)
    good = lp.union(*args.values(), [0], 100, 3, 0.2, 2.0, 1.0)
    assert good[0].tolist()[0] == 0
    bad = [dict(args, hi=col.hi[:-1]), dict(args, newest=col.newest[:1]), dict(args, offsets=[0, 2, 1]),
           dict(args, at=col.at + 10**6)]
    for a in bad:
        with pytest.raises(ValueError):
            lp.union(*a.values(), [0], 100, 3, 0.2, 2.0, 1.0)
    for starts in ([1], [0, 0], [0, 2]):
        with pytest.raises(ValueError, match="group_starts"):
            lp.union(*args.values(), starts, 100, 3, 0.2, 2.0, 1.0)
    with pytest.raises(ValueError, match="rows"):
        lp.union(*args.values(), [0], 100, 0, 0.2, 2.0, 1.0)
    with pytest.raises(ValueError, match="cutoffs"):
        lp.window_estimates(col.data, col.at, col.lo, col.offsets, [0], [0, 1], 3, 1.0)
    with pytest.raises(ValueError, match="newest"):
        lp.payloads(col.data, col.at, col.hi, col.lo, col.offsets, [1], col.has_newest, 3)
    with pytest.raises(ValueError, match="offsets"):
        lp.build(np.zeros((3, 2)), [1, 2, 3], [0, 4], 10, 0.2, 2.0, 1.0)
    with pytest.raises(ValueError, match="atoms"):
        lp.build(np.zeros((3, 2)), [1, 2], [0, 3], 10, 0.2, 2.0, 1.0)


def test_a_lone_sketch_keeps_its_bytes_once_the_decoder_takes_them(loops):
    """A group of one L_p sketch keeps its bytes (``Family.kept_alone``),
    and any byte of it altered gives merge_all's bytes or its error
    (:func:`tests.lone.assert_lone_sketches_keep_their_bytes`)."""
    pytest.importorskip("pandas")
    from udaf import LpNorm

    from .lone import assert_lone_sketches_keep_their_bytes

    spec = LpNorm("x", 1000, p=1.5, eps=0.5, delta=0.5)
    rng = np.random.default_rng(9)
    blob = spec.make(1000).update(np.sort(rng.integers(0, 3000, 6)), rng.integers(0, 300, 6)).to_bytes()
    assert_lone_sketches_keep_their_bytes(type(spec), SlidingLpNorm, blob)
