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
from ehist import compiled as ehist_compiled
from distinct.columnar import (SketchColumn, sketches_from_bytes, sliding_hll_bytes, union_estimates,
                               union_estimates_of_bytes)
from ehist import IncompatibleSketchError
from ehist.hashing import hash64
from tests.conftest import examples
from tests.engines import ENGINES, engine


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
    return mock.patch.multiple(distinct.columnar, _RUNS_AT_ONCE=2, _ROWS_AT_ONCE=5, _GROUPS_AT_ONCE=2,
                               _BYTES_AT_ONCE=60)


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
    for cells in (0, 2**62):  # registers found by sorting the entries, then in a dense array
        with mock.patch.object(distinct.columnar, "_DENSE_CELLS_PER_ENTRY", cells):
            assert union_estimates(sketches, groups, now=now, window=win).tolist() == merged
    # from the bytes in one compiled pass (None where it does not apply: an empty sketch, no numba)
    fast = union_estimates_of_bytes([s.to_bytes() for s in sketches], groups, now=now, window=win)
    if ehist_compiled.active() and all(s.newest is not None for s in sketches):
        assert fast is not None and fast.tolist() == merged
    else:
        assert fast is None or fast.tolist() == merged


def test_union_estimates_are_exact_at_every_precision():
    """Whole registers agree with merging at p = 4 and p = 18 too (the
    rank matrix's widest and narrowest)."""
    rng = np.random.default_rng(3)
    for p in (4, 18):
        parts = [SlidingHyperLogLog(10**6, p).update(np.sort(rng.integers(0, 10**5, 3000)),
                                                     rng.integers(0, 10**9, 3000)) for _ in range(3)]
        merged = parts[0].merge(parts[1]).merge(parts[2])
        for cells in (0, 2**62):  # sorted entries, a dense array of registers
            with mock.patch.object(distinct.columnar, "_DENSE_CELLS_PER_ENTRY", cells):
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
    # groups of no sketch answer 0.0, and a bad query is still an error
    assert union_estimates([], [0, 0], now=[3, 4], window=7).tolist() == [0.0, 0.0]
    for kw, msg in (({"window": 0}, "window"), ({"window": 2.5}, "window"), ({"now": 1.5}, "now"),
                    ({"now": [1, 2, 3]}, "one per group")):
        with pytest.raises(ValueError, match=msg):
            union_estimates([], [0, 0], **kw)


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


# ------------------------------------------------------------------ decoding
def outcome(decode, blob):
    """What decoding one blob gives: the sketch's fields, or the error."""
    try:
        s = decode(blob)
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return type(exc).__name__, str(exc)
    return (s.window, s.precision, s.seed, s.newest, s._reg.tolist(), s._ts.tolist(), s._rank.tolist(),
            s._reg.dtype, s._ts.dtype, s._rank.dtype)


def assert_same_outcomes(blobs):
    """sketches_from_bytes against from_bytes, one blob at a time and all
    at once (the first error in order, or every sketch)."""
    for b in blobs:
        assert outcome(lambda x: sketches_from_bytes([x])[0], b) == outcome(SlidingHyperLogLog.from_bytes, b)
    try:
        expected = [outcome(lambda x: x, s) for s in [SlidingHyperLogLog.from_bytes(b) for b in blobs]]
    except Exception as exc:  # noqa: BLE001
        # both decoders raise what from_bytes raises (sketches, and the flat column without them)
        for decode in (sketches_from_bytes, SketchColumn.from_bytes):
            with pytest.raises(type(exc)) as got:
                decode(blobs)
            assert str(got.value) == str(exc)
    else:
        assert [outcome(lambda x: x, s) for s in sketches_from_bytes(blobs)] == expected
        assert_same_column(SketchColumn.from_bytes(blobs), SketchColumn.from_sketches(
            [SlidingHyperLogLog.from_bytes(b) for b in blobs]))


def assert_same_column(a, b):
    for name in SketchColumn.__slots__:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tolist() == y.tolist(), name


def fields_of(s: SlidingHyperLogLog):
    """The stored fields of a non-empty sketch, as to_bytes writes them."""
    from ehist.serialization import scale_down

    tick, ages = scale_down((s.newest - s._ts).astype(np.uint64))
    return {"version": 2, "flags": 1 | (2 if tick > 1 else 0), "window": s.window, "p": s.precision,
            "seed": s.seed, "newest": s.newest, "n": len(s), "tick": tick,
            "deltas": np.diff(s._reg, prepend=0).tolist(), "ranks": s._rank.tolist(), "ages": ages.tolist()}


def assemble(f) -> bytes:
    """Sealed bytes from fields (any values, written as they are)."""
    import struct

    from ehist.serialization import encode_varints, seal

    def v(xs):
        return encode_varints(np.array(xs, dtype=np.uint64))

    body = struct.pack("<2sBBHqBQq", b"EH", 5, f["version"], f["flags"], f["window"], f["p"], f["seed"], f["newest"])
    body += v([f["n"]]) + (v([f["tick"]]) if f["flags"] & 2 else b"") + v(f["deltas"])
    body += bytes(int(r) & 0xFF for r in f["ranks"]) + v(f["ages"])
    return seal(body)


def _mutations(f):
    """Named ways to break (or keep) one rule of the format each."""
    p, n = f["p"], f["n"]
    out = {"as written": dict(f)}
    out["version 1"] = dict(f, version=1, flags=1, tick=1,
                            ages=[a * f["tick"] for a in f["ages"]])
    out["version 1 with a tick flag"] = dict(f, version=1)
    out["version 3"] = dict(f, version=3)
    out["unknown flag"] = dict(f, flags=f["flags"] | 4)
    out["no newest flag"] = dict(f, flags=f["flags"] & ~1)
    out["window 0"] = dict(f, window=0)
    out["negative window"] = dict(f, window=-5)
    out["precision 3"] = dict(f, p=3)
    out["precision 19"] = dict(f, p=19)
    out["one entry more"] = dict(f, n=n + 1)
    out["one entry fewer"] = dict(f, n=n - 1)
    out["no entries"] = dict(f, n=0, deltas=[], ranks=[], ages=[], flags=f["flags"] & ~2)
    out["tick 1"] = dict(f, flags=f["flags"] | 2, tick=1)
    out["tick 0"] = dict(f, flags=f["flags"] | 2, tick=0)
    out["tick doubled"] = dict(f, flags=f["flags"] | 2, tick=2 * f["tick"],
                               ages=[a // 2 for a in f["ages"]])
    out["ages in a tick unflagged"] = dict(f, flags=f["flags"] & ~2, ages=[a * 3 for a in f["ages"]])
    out["register past m"] = dict(f, deltas=f["deltas"][:-1] + [f["deltas"][-1] + (1 << p)])
    out["last register m"] = dict(f, deltas=f["deltas"][:-1] + [(1 << p) - 1 - sum(f["deltas"][:-1]) + 1])
    out["rank 0"] = dict(f, ranks=[0] + f["ranks"][1:])
    out["rank above 65 - p"] = dict(f, ranks=f["ranks"][:-1] + [66 - p])
    out["rank byte 0x85"] = dict(f, ranks=f["ranks"][:-1] + [0x85])
    out["age at the window"] = dict(f, ages=f["ages"][:-1] + [-(-f["window"] // f["tick"])])
    out["age just inside"] = dict(f, ages=f["ages"][:-1] + [(f["window"] - 1) // f["tick"]])
    out["two entries of one register, same time"] = dict(f, deltas=[f["deltas"][0]] + [0] * (n - 1),
                                                         ages=sorted(f["ages"], reverse=True))
    out["ranks rising in a register"] = dict(f, deltas=[f["deltas"][0]] + [0] * (n - 1),
                                             ranks=sorted(f["ranks"]),
                                             ages=[n - i for i in range(n)])
    out["huge n"] = dict(f, n=2**41)
    out["newest near the int64 floor"] = dict(f, newest=-2**63 + 1)
    return out


@st.composite
def mutated(draw):
    data = draw(hll_runs(max_runs=1))
    ts, items, _ = data
    if ts.size == 0:
        ts, items = np.array([3, 9]), np.array([1, 2])
    window = draw(st.sampled_from([50, 5_000, 10**6, 2**62]))
    s = SlidingHyperLogLog(window, draw(st.integers(4, 8))).update(ts, items)
    muts = _mutations(fields_of(s))
    name = draw(st.sampled_from(sorted(muts)))
    blob = assemble(muts[name])
    how = draw(st.sampled_from(["sealed", "byte", "byte resealed", "cut", "extra"]))
    if how != "sealed":
        from ehist.serialization import seal

        body = blob[:-4]
        i = draw(st.integers(0, len(body) - 1))
        if how.startswith("byte"):
            body = body[:i] + bytes([draw(st.integers(0, 255))]) + body[i + 1:]
            blob = seal(body) if how == "byte resealed" else body + blob[-4:]
        elif how == "cut":
            blob = seal(body[:i])
        else:
            blob = seal(body + bytes([draw(st.integers(0, 255))]))
    return name, how, blob


@settings(max_examples=examples(400), deadline=None)
@given(case=mutated())
@pytest.mark.parametrize("name", ENGINES)
def test_decode_equals_from_bytes_on_mutated_bytes(name, case):
    _, _, blob = case
    with engine(name):
        assert_same_outcomes([blob])


@settings(max_examples=examples(100), deadline=None)
@given(cases=st.lists(mutated(), min_size=1, max_size=6), data=hll_runs())
@pytest.mark.parametrize("name", ENGINES)
def test_decode_equals_from_bytes_on_batches(name, cases, data):
    ts, items, starts = data
    good = sliding_hll_bytes(ts, starts, hash64(items), window=1000, precision=6)
    blobs = good + [c[2] for c in cases]
    order = np.random.default_rng(len(blobs)).permutation(len(blobs))
    with engine(name):
        assert_same_outcomes([blobs[i] for i in order])
        with tiny_chunks():
            assert_same_outcomes([blobs[i] for i in order])


@pytest.mark.parametrize("name", ENGINES)
def test_decode_golden_and_empty(name):
    from pathlib import Path

    golden = Path(__file__).parent / "golden"
    blobs = [(golden / f).read_bytes() for f in ("hll.bin", "hll_empty.bin", "hll_v1.bin", "hll_v1_empty.bin")]
    with engine(name):
        assert_same_outcomes(blobs)
    assert [s == SlidingHyperLogLog.from_bytes(b) for s, b in zip(sketches_from_bytes(blobs), blobs)] == [True] * 4
    assert sketches_from_bytes([]) == []
    with pytest.raises(TypeError, match="expected bytes"):
        sketches_from_bytes([blobs[0], "text"])


def test_union_estimates_one_now_per_group():
    a = SlidingHyperLogLog(100).update([5, 9], ["x", "y"])
    b = SlidingHyperLogLog(100).update([50], ["z"])
    assert union_estimates([a, b], [0, 1], now=np.array([9, 104])).tolist() == [
        a.estimate(now=9), b.estimate(now=104)]
    assert union_estimates([a, b], [0, 1], now=np.array([108, 149]), window=50).tolist() == [
        a.estimate(now=108, window=50), 0.0]
    with pytest.raises(ValueError, match=r"now \(49\) is earlier than the newest timestamp \(50\)"):
        union_estimates([a, b], [0, 1], now=np.array([9, 49]))
    with pytest.raises(ValueError, match="one per group"):
        union_estimates([a, b], [0, 1], now=np.array([9]))


def test_a_lone_sketch_keeps_its_bytes_once_the_decoder_takes_them():
    """A group of one sliding HyperLogLog keeps its bytes
    (``Family.kept_alone``), and any byte of it altered gives merge_all's
    bytes or its error (:func:`tests.lone.assert_lone_sketches_keep_their_bytes`)."""
    from pathlib import Path

    from udaf.family import load_families, spec_for_bytes

    from .lone import assert_lone_sketches_keep_their_bytes

    load_families(())
    rng = np.random.default_rng(6)
    blob = SlidingHyperLogLog(5000, precision=6).update(np.sort(rng.integers(0, 4000, 20)),
                                                         rng.integers(0, 300, 20)).to_bytes()
    assert_lone_sketches_keep_their_bytes(spec_for_bytes(blob), SlidingHyperLogLog, blob,
                                          (Path(__file__).parent / "golden" / "hll_v1.bin").read_bytes())
