"""Many sliding Flajolet-Martin sketches at once (distinct/fm_columnar.py)
against each sketch's own methods: bytes round trip, union byte for byte
against ``merge_all``, estimates to the last bit, mutated bytes raising
what ``from_bytes`` raises (or decoding as it decodes), and the DistinctFM
spec's batch paths against its per-sketch ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM
from distinct.fm_columnar import FMColumn
from ehist.errors import IncompatibleSketchError

from .conftest import examples
from .test_fuzz import mutate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def make(window, m, rng, base, tick):
    """One sketch: empty, a few rows (times a multiple of ``tick``), or a
    merge of two."""
    def rows(s):
        n = int(rng.integers(1, 60))
        ts = np.sort(rng.integers(0, min(3 * window, 2**61) // tick + 2, n)) * tick + base
        return s.update(ts, rng.integers(0, 500, n))

    kind = rng.random()
    if kind < 0.1:
        return SlidingFM(window, m, seed=3)
    s = rows(SlidingFM(window, m, seed=3))
    if kind < 0.3:
        s = SlidingFM.merge_all([s, rows(SlidingFM(window, m, seed=3))])
    return s


@st.composite
def batches(draw):
    window = draw(st.sampled_from([1, 50, 10**6, 2**62]))
    m = draw(st.sampled_from([2, 16, 64]))
    base = draw(st.sampled_from([0, 10**12, INT64_MIN + 1, INT64_MAX - 2**61 - 10**7]))
    tick = draw(st.sampled_from([1, 1000]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [[make(window, m, rng, base, tick) for _ in range(draw(st.integers(1, 4)))]
            for _ in range(draw(st.integers(1, 5)))]


def starts_of(groups) -> np.ndarray:
    return np.cumsum([0] + [len(g) for g in groups[:-1]]).astype(np.int64)


@settings(max_examples=examples(80), deadline=None)
@given(groups=batches(), later=st.integers(0, 10**6), frac=st.floats(0.0, 1.0))
def test_round_trip_union_and_estimates_are_the_sketches_own(groups, later, frac):
    sketches = [s for g in groups for s in g]
    blobs = [s.to_bytes() for s in sketches]
    column = FMColumn.from_bytes(blobs)
    assert [column[i] for i in range(len(column))] == sketches
    assert column.to_bytes() == blobs
    assert FMColumn.from_sketches(sketches).to_bytes() == blobs
    united = column.union(starts_of(groups))
    merged = [SlidingFM.merge_all(g) for g in groups]
    assert united.to_bytes() == [s.to_bytes() for s in merged]
    assert united.estimates().tolist() == [s.estimate() for s in merged]
    window = sketches[0].window
    w = max(1, int(frac * window))
    nows = [(s.newest if s.newest is not None else 0) + min(later, INT64_MAX - (s.newest or 0)) for s in merged]
    assert united.estimates(nows, w).tolist() == [s.estimate(t, w) for s, t in zip(merged, nows)]


def test_estimates_refuse_what_estimate_refuses():
    col = FMColumn.from_sketches([SlidingFM(100, 8).update([5, 9], [1, 2]), SlidingFM(100, 8)])
    with pytest.raises(ValueError) as exc:
        SlidingFM(100, 8).update([5, 9], [1, 2]).estimate(3)
    with pytest.raises(ValueError) as got:
        col.estimates([3, 3])
    assert str(got.value) == str(exc.value)
    with pytest.raises(ValueError, match="window"):
        col.estimates(None, 101)
    assert col.estimates([20, 20], 5).tolist() == [0.0, 0.0]


@settings(max_examples=examples(80), deadline=None)
@given(groups=batches(), kind=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_mutated_bytes_decode_or_raise_as_from_bytes(groups, kind, seed):
    blobs = [s.to_bytes() for g in groups for s in g]
    rng = np.random.default_rng(seed)
    i = int(rng.integers(0, len(blobs)))
    blobs[i] = mutate(blobs[i], rng, kind)
    try:
        expect = [SlidingFM.from_bytes(b) for b in blobs]
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)) as got:
            FMColumn.from_bytes(blobs)
        assert str(got.value) == str(exc)
        return
    if len({s._params() for s in expect}) > 1:  # the mutation changed a parameter: the sketches differ
        with pytest.raises(IncompatibleSketchError):
            FMColumn.from_bytes(blobs)
        return
    column = FMColumn.from_bytes(blobs)
    assert [column[j] for j in range(len(column))] == expect
    assert column.to_bytes() == [s.to_bytes() for s in expect]


def test_spec_batch_paths_equal_their_per_sketch_ones():
    pytest.importorskip("pandas")
    from udaf import DistinctFM
    from udaf.spec import Spec

    spec = DistinctFM("x", 1000, num_bitmaps=16)
    cls = type(spec)
    rng = np.random.default_rng(11)
    groups = [[spec.make(1000).update(np.sort(rng.integers(0, 3000, n)), rng.integers(0, 300, n))
               for n in rng.integers(1, 80, int(rng.integers(1, 5)))] for _ in range(9)]
    blobs = [s.to_bytes() for g in groups for s in g]
    starts = starts_of(groups)
    assert cls.merge_groups(blobs, starts) == Spec.merge_groups.__func__(cls, blobs, starts)
    got = cls.answers(blobs + [None], np.append(np.full(len(blobs), 5000), 0), 500)
    expect = Spec.answers.__func__(cls, blobs + [None], np.append(np.full(len(blobs), 5000), 0), 500)
    assert np.array_equal(got.estimate, expect.estimate, equal_nan=True)
    assert np.array_equal(cls.union_answers(blobs, starts, None, None).estimate,
                          Spec.union_answers.__func__(cls, blobs, starts, None, None).estimate)
    assert np.array_equal(spec.union(blobs, starts, at=4000).estimate, Spec.union(spec, blobs, starts, 4000).estimate)
    other = DistinctFM("x", 1000, num_bitmaps=32).make(1000).update([1], [1]).to_bytes()
    with pytest.raises(ValueError, match="num_bitmaps"):  # one group of two parameters: the merge refuses it
        cls.merge_groups(blobs[:1] + [other], np.array([0]))


@pytest.mark.parametrize("name", ["fm.bin", "fm_empty.bin", "fm_v1.bin", "fm_v1_empty.bin"])
def test_golden_files_decode_as_from_bytes_decodes_them(name):
    from pathlib import Path

    blob = (Path(__file__).parent / "golden" / name).read_bytes()
    sketch = SlidingFM.from_bytes(blob)
    column = FMColumn.from_bytes([blob, blob])
    assert column[1] == sketch
    assert column.to_bytes() == [sketch.to_bytes()] * 2
    assert column.estimates().tolist() == [sketch.estimate()] * 2


@settings(max_examples=examples(60), deadline=None)
@given(window=st.sampled_from([1, 50, 10**6, 2**62]), m=st.sampled_from([2, 16, 64]),
       base=st.sampled_from([0, INT64_MIN + 1, INT64_MAX - 10**4]), seed=st.integers(0, 2**32 - 1))
def test_build_is_update_per_run(window, m, base, seed):
    from ehist.hashing import hash64

    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 40, int(rng.integers(1, 7)))
    n = int(lens.sum())
    ts = base + rng.integers(0, min(3 * window + 2, 5000), n)  # unsorted in a run, repeated, at the window's edge
    hashes = hash64(rng.integers(0, 300, n), 3)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    ends = np.append(starts[1:], n)
    want = [SlidingFM(window, m, seed=3).update_hashes(ts[a:z], hashes[a:z]).to_bytes()
            for a, z in zip(starts.tolist(), ends.tolist())]
    assert FMColumn.build(ts, starts, hashes, window=window, m=m, seed=3).to_bytes() == want


def test_build_refuses_what_update_refuses():
    with pytest.raises(ValueError) as exc:
        SlidingFM(100, 8).update_hashes([INT64_MIN, 5], [1, 2])
    with pytest.raises(ValueError) as got:
        FMColumn.build([3, INT64_MIN, 5], [0, 1], [1, 1, 2], window=100, m=8)
    assert str(got.value) == str(exc.value)
    with pytest.raises(ValueError, match="num_bitmaps"):
        FMColumn.build([1], [0], [1], window=100, m=1)


def test_spec_partials_are_the_per_key_ones():
    pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    from udaf import DistinctFM
    from udaf.spec import Spec

    rng = np.random.default_rng(4)
    n = 500
    keys = np.sort(rng.integers(0, 40, n))
    t = rng.integers(0, 5000, n)
    order = np.lexsort((t, keys))
    t, keys = t[order], keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    spec = DistinctFM("dst", 1000, num_bitmaps=16)
    data = spec.read({"column": pa.array([None if i % 13 == 0 else f"d{i}" for i in rng.integers(0, 300, n)])}, n)
    assert spec.partials(t, starts, data, 1000)[0] == Spec.partials(spec, t, starts, data, 1000)[0]


def test_a_lone_sketch_keeps_its_bytes_once_the_decoder_takes_them():
    """A group of one FM sketch keeps its bytes (``Family.kept_alone``),
    and any byte of it altered gives merge_all's bytes or its error
    (:func:`tests.lone.assert_lone_sketches_keep_their_bytes`)."""
    from pathlib import Path

    pytest.importorskip("pandas")
    from udaf import DistinctFM

    from .lone import assert_lone_sketches_keep_their_bytes

    spec = DistinctFM("x", 1000, num_bitmaps=8)
    rng = np.random.default_rng(8)
    blob = spec.make(1000).update(np.sort(rng.integers(0, 3000, 15)), rng.integers(0, 300, 15)).to_bytes()
    assert_lone_sketches_keep_their_bytes(type(spec), SlidingFM, blob,
                                          (Path(__file__).parent / "golden" / "fm_v1.bin").read_bytes())
