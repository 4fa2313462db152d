"""SlidingFM and SlidingHyperLogLog: exact merges, bytes, bad input."""

from __future__ import annotations

import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import CorruptSketchError, IncompatibleSketchError, LateDataError
from tests.conftest import examples

GOLDEN = Path(__file__).parent / "golden"
CLASSES = [
    pytest.param(lambda w, seed=0: SlidingFM(w, num_bitmaps=16, seed=seed), id="SlidingFM"),
    pytest.param(lambda w, seed=0: SlidingHyperLogLog(w, precision=5, seed=seed), id="SlidingHyperLogLog"),
]


@st.composite
def item_streams(draw):
    n = draw(st.integers(0, 300))
    gaps = draw(st.lists(st.sampled_from([0, 0, 1, 2, 5, 100]), min_size=n, max_size=n))
    ts = np.cumsum(np.array(gaps, dtype=np.int64)) + draw(st.integers(-1000, 1000))
    kind = draw(st.sampled_from(["int", "str", "bytes"]))
    raw = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    if kind == "int":
        items = np.array(raw, dtype=np.int64)
    elif kind == "str":
        items = np.array([f"src-{v}" for v in raw], dtype=object)
    else:
        items = np.array([b"\x00ip" + bytes([v]) for v in raw], dtype=object)
    return ts, items


@pytest.mark.parametrize("make", CLASSES)
@settings(max_examples=examples(60), deadline=None)
@given(data=item_streams(), window=st.integers(1, 400), seed=st.integers(0, 2**64 - 1),
       parts=st.integers(2, 4), split_seed=st.integers(0, 2**32 - 1))
def test_merge_equals_interleaved_stream_exactly(make, data, window, seed, parts, split_seed):
    ts, items = data
    whole = make(window, seed).update(ts, items)
    owner = np.random.default_rng(split_seed).integers(0, parts, ts.size)
    sketches = [make(window, seed).update(ts[owner == p], items[owner == p]) for p in range(parts)]
    before = [s.to_bytes() for s in sketches]
    merged = sketches[0]
    for s in sketches[1:]:
        merged = merged.merge(s)
    assert merged == whole
    if hasattr(type(whole), "merge_all"):  # the union in one pass
        assert type(whole).merge_all(sketches) == whole
    assert [s.to_bytes() for s in sketches] == before  # arguments unchanged
    # batches of any size give the same sketch as one batch
    cut = ts.size // 2
    assert make(window, seed).update(ts[:cut], items[:cut]).update(ts[cut:], items[cut:]) == whole
    # and so does one item at a time
    one = make(window, seed)
    for t, x in zip(ts[:40].tolist(), items[:40].tolist()):
        one.add(t, x)
    assert one == make(window, seed).update(ts[:40], items[:40])
    back = type(whole).from_bytes(whole.to_bytes())
    assert back == whole and pickle.loads(pickle.dumps(whole)) == whole
    if ts.size:
        assert back.estimate() == whole.estimate()


@settings(max_examples=examples(200), deadline=None)
@given(n=st.integers(0, 60), p=st.integers(4, 18), span=st.sampled_from([0, 1, 1000, 2**41, 2**44, 2**62]),
       seed=st.integers(0, 2**32 - 1))
def test_sliding_hll_entries_sort_as_lexsort(n, p, span, seed):
    """The packed-key sort of SlidingHyperLogLog's entries orders them as
    np.lexsort by (register, time, rank), values and all, on either side
    of the 63-bit limit where it falls back to np.lexsort."""
    from distinct.hll import _sorted_entries

    rng = np.random.default_rng(seed)
    base = int(rng.integers(-2**62, 2**62 - span)) if span < 2**62 else -2**61
    reg = rng.integers(0, 2**p, n)
    ts = base + rng.integers(0, span + 1, n, dtype=np.int64)
    ts[: n // 3] = ts[n // 3: 2 * (n // 3)]  # equal times
    rank = rng.integers(1, 66 - p, n)
    order = np.lexsort((rank, ts, reg))
    got = _sorted_entries(reg.copy(), ts.copy(), rank.copy(), p)
    for mine, want in zip(got, (reg[order], ts[order], rank[order])):
        assert mine.dtype == np.int64 and mine.tolist() == want.tolist()


@pytest.mark.parametrize("make", CLASSES)
def test_window_slides_with_now(make):
    s = make(100).update(np.arange(1000), np.arange(1000))
    assert s.estimate(now=999 + 100) == 0.0
    assert s.estimate(now=999 + 50) > 0
    assert make(100).estimate() == 0.0


def golden_sketches():
    ts = np.arange(0, 30_000, 3)
    items = np.array([f"10.0.{i % 251}.{i % 17}" for i in range(ts.size)])
    return {
        "fm": SlidingFM(5_000, 32, seed=7).update(ts, items),
        "hll": SlidingHyperLogLog(5_000, 8, seed=7).update(ts, items),
        "fm_empty": SlidingFM(60),
        "hll_empty": SlidingHyperLogLog(60),
    }


@pytest.mark.parametrize("name", sorted(golden_sketches()))
def test_golden_bytes(name):
    """Pins the format and the hash: a change of either fails here."""
    s = golden_sketches()[name]
    data = (GOLDEN / f"{name}.bin").read_bytes()
    assert s.to_bytes() == data
    assert type(s).from_bytes(data) == s


@pytest.mark.parametrize("name", ["fm", "hll"])
def test_corruption_is_detected(name):
    s = golden_sketches()[name]
    b = s.to_bytes()
    cls = type(s)
    for n in range(0, len(b), max(1, len(b) // 300)):
        with pytest.raises(CorruptSketchError):
            cls.from_bytes(b[:n])
    for i in range(0, len(b), max(1, len(b) // 200)):
        c = bytearray(b)
        c[i] ^= 0x10
        with pytest.raises(CorruptSketchError):
            cls.from_bytes(bytes(c))
    other = SlidingHyperLogLog if cls is SlidingFM else SlidingFM
    with pytest.raises(CorruptSketchError, match="expected family id"):
        other.from_bytes(b)


def reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


@pytest.mark.parametrize("name", ["hll", "hll_empty"])
def test_hll_version_1_bytes_still_read(name):
    """Sketches stored by format version 1 (Parquet, streaming state) decode
    to the same sketch; writing them again gives version 2."""
    s = golden_sketches()[name]
    old = (GOLDEN / f"{name.replace('hll', 'hll_v1')}.bin").read_bytes()
    assert old[3] == 1
    back = SlidingHyperLogLog.from_bytes(old)
    assert back == s and back.to_bytes() == s.to_bytes()


@pytest.mark.parametrize("name", ["fm", "fm_empty"])
def test_fm_version_1_bytes_still_read(name):
    """FM sketches stored by format version 1 decode to the same sketch;
    writing them again gives version 2 (here with a tick of 3: the golden
    stream's timestamps are multiples of 3)."""
    s = golden_sketches()[name]
    old = (GOLDEN / f"{name.replace('fm', 'fm_v1')}.bin").read_bytes()
    assert old[3] == 1
    back = SlidingFM.from_bytes(old)
    assert back == s and back.to_bytes() == s.to_bytes()
    if name == "fm":
        assert s.to_bytes()[4] & 2 and len(s.to_bytes()) < len(old)


# the tick rules of format version 2 (ehist.serialization.scale_down /
# check_tick), each broken on purpose, and the error that names it
TICK_RULES = [
    ("tick of 1", "tick of at least 2"),
    ("tick not the gcd", "with gcd 1, found gcd 2"),
    ("ages in ticks without the flag", "expected a tick flag: every age is a multiple of 1000"),
    ("ages beyond the window", "expected ages below the window"),
    ("version 1 with a tick", "no tick flag in format version 1"),
    ("tick on an empty sketch", "no tick flag on an empty sketch"),
]


def millisecond_fm():
    return SlidingFM(3_600_000_000, 32).update(*millisecond_stream())


def test_fm_ages_in_ticks():
    """Whole-millisecond event times in microseconds: bit ages stored in
    milliseconds, a third fewer bytes here; off the grid, no tick."""
    s = millisecond_fm()
    b = s.to_bytes()
    assert b[4] & 2 and SlidingFM.from_bytes(b) == s
    ts, items = millisecond_stream()
    ts[-1] += 1  # the newest event off the millisecond grid: the ages' gcd is 1
    off = SlidingFM(3_600_000_000, 32).update(ts, items)
    assert not off.to_bytes()[4] & 2 and SlidingFM.from_bytes(off.to_bytes()) == off
    assert len(b) < 0.8 * len(off.to_bytes())


def _fm_fields(s):
    """(bytes up to newest, flags: has newest only; kept bits per bitmap,
    the kept bits' ages or -1 when unset) of a sketch."""
    head = _with_flags(s.to_bytes()[:34], 1)
    live = s._table != np.iinfo(np.int64).min
    kept = np.where(live.any(axis=1), 64 - np.argmax(live[:, ::-1], axis=1), 0)
    vals = s._table[np.arange(64)[None, :] < kept[:, None]]
    ages = np.where(vals == np.iinfo(np.int64).min, -1, s.newest - vals)
    return head, kept, ages


def _fm_codes(ages, tick):
    return _varints(np.where(ages < 0, 0, ages // tick + 1))


@pytest.mark.parametrize("case, message", TICK_RULES + [
    ("tick without set bits", "no tick flag without set bits"),
])
def test_fm_tick_rules(case, message):
    head, kept, ages = _fm_fields(millisecond_fm())
    ticked = _with_flags(head, 3)
    over = np.where(ages == ages.max(), 3_600_000 * 1000, ages)  # the oldest bit: a window's age
    body = {
        "tick of 1": ticked + _varints([1]) + _varints(kept) + _fm_codes(ages, 1),
        "tick not the gcd": ticked + _varints([500]) + _varints(kept) + _fm_codes(ages, 500),
        "ages in ticks without the flag": head + _varints(kept) + _fm_codes(ages, 1),
        "ages beyond the window": ticked + _varints([1000]) + _varints(kept) + _fm_codes(over, 1000),
        "version 1 with a tick": ticked[:3] + b"\x01" + ticked[4:] + _varints([1000]) + _varints(kept)
        + _fm_codes(ages, 1000),
        "tick on an empty sketch": _with_flags(head[:26], 2),
        "tick without set bits": ticked + _varints([1000]) + _varints(np.zeros_like(kept)),
    }[case]
    with pytest.raises(CorruptSketchError, match=message):
        SlidingFM.from_bytes(reseal(body))


def _hll_fields(s):
    """(bytes up to the entry count, flags: has newest only; register
    deltas, ranks, ages) of a sketch."""
    head = _with_flags(s.to_bytes()[:31], 1) + _varints([len(s)])
    return head, np.diff(s._reg, prepend=0), s._rank.astype(np.uint8).tobytes(), s._newest - s._ts


def _varints(values):
    from ehist.serialization import encode_varints

    return encode_varints(np.asarray(values, dtype=np.uint64))


def millisecond_stream():
    ts = np.unique(np.random.default_rng(4).integers(0, 3_600_000, 20_000)) * 1000
    return ts, np.arange(ts.size) % 5000


def millisecond_hll():
    return SlidingHyperLogLog(3_600_000_000, 8).update(*millisecond_stream())


def test_hll_ages_in_ticks():
    """Whole-millisecond event times in microseconds: ages stored in
    milliseconds, about a byte less per entry."""
    s = millisecond_hll()
    b = s.to_bytes()
    assert b[4] & 2 and SlidingHyperLogLog.from_bytes(b) == s
    ts, items = millisecond_stream()
    ts[-1] += 1  # one event off the millisecond grid: the ages' gcd is 1
    off = SlidingHyperLogLog(3_600_000_000, 8).update(ts, items)
    assert len(off) == len(s) and not off.to_bytes()[4] & 2
    assert len(b) < len(off.to_bytes()) - 0.8 * len(s)


def _with_flags(head, flags):
    return head[:4] + struct.pack("<H", flags) + head[6:]


@pytest.mark.parametrize("case, message", TICK_RULES)
def test_hll_tick_rules(case, message):
    head, deltas, ranks, ages = _hll_fields(millisecond_hll())
    ticked = _with_flags(head, 3)
    body = {
        "tick of 1": ticked + _varints([1]) + _varints(deltas) + ranks + _varints(ages),
        "tick not the gcd": ticked + _varints([500]) + _varints(deltas) + ranks + _varints(ages // 500),
        "ages in ticks without the flag": head + _varints(deltas) + ranks + _varints(ages),
        "ages beyond the window": ticked + _varints([1000]) + _varints(deltas) + ranks
        + _varints(np.r_[ages[:-1] // 1000, 3_600_001]),
        "version 1 with a tick": ticked[:3] + b"\x01" + ticked[4:] + _varints([1000]) + _varints(deltas) + ranks
        + _varints(ages // 1000),
        "tick on an empty sketch": _with_flags(head[:23], 2),
    }[case]
    with pytest.raises(CorruptSketchError, match=message):
        SlidingHyperLogLog.from_bytes(reseal(body))


def test_hll_huge_entry_count_does_not_allocate():
    s = SlidingHyperLogLog(60, 4).update([1], [1])
    body = s.to_bytes()[:-4]
    head = body[:31]
    with pytest.raises(CorruptSketchError, match="expected at most 0 entries"):
        SlidingHyperLogLog.from_bytes(reseal(head + b"\xff\xff\xff\xff\x0f"))


def test_fm_bad_bit_counts():
    s = SlidingFM(60, 2).update([1], [1])
    head = s.to_bytes()[:-4][:34]
    with pytest.raises(CorruptSketchError, match="at most 64 bits"):
        SlidingFM.from_bytes(reseal(head + b"\x41\x00" + b"\x00" * 65))


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: SlidingFM(0), "window must be in"),
        (lambda: SlidingFM(10, num_bitmaps=1), "num_bitmaps must be in \\[2, 65536\\], got 1"),
        (lambda: SlidingFM(10, num_bitmaps=2.5), "num_bitmaps must be an integer"),
        (lambda: SlidingFM(10, seed=-1), "seed must be an integer in \\[0, 2\\*\\*64\\)"),
        (lambda: SlidingHyperLogLog(10, precision=3), "precision must be in \\[4, 18\\], got 3"),
        (lambda: SlidingHyperLogLog(10, precision=19), "precision must be in \\[4, 18\\]"),
        (lambda: SlidingHyperLogLog(10, seed="x"), "seed must be an integer"),
        (lambda: SlidingHyperLogLog(-3), "window must be in"),
    ],
)
def test_bad_parameters(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


@pytest.mark.parametrize("make", CLASSES)
@pytest.mark.parametrize(
    "ts, items, exc, match",
    [
        ([5, 6], [1, 2, 3], ValueError, "different lengths \\(2 and 3\\)"),
        ([5, 6], [1.5, 2.5], ValueError, "all integers, all strings or all bytes; found float"),
        ([5, 6], ["a", 1], ValueError, "found int, str"),
        ([5, 6], [None, "a"], ValueError, "NoneType"),
        ([5, 4.5], [1, 2], ValueError, "timestamps must be integers"),
        ([5, 1], [1, 2], LateDataError, "timestamp 1 is older than the newest timestamp already summarized \\(4\\)"),
    ],
)
def test_bad_updates_change_nothing(make, ts, items, exc, match):
    s = make(100).update([3, 4], ["x", "y"])
    before = s.to_bytes()
    with pytest.raises(exc, match=match):
        s.update(ts, items)
    assert s.to_bytes() == before


@pytest.mark.parametrize("make", CLASSES)
def test_bad_queries(make):
    s = make(100).update([3, 4], ["x", "y"])
    with pytest.raises(ValueError, match="now \\(2\\) is earlier"):
        s.estimate(now=2)
    with pytest.raises(ValueError, match="window must be in \\[1, 100\\]"):
        s.estimate(window=101)


def test_merge_incompatible():
    with pytest.raises(IncompatibleSketchError, match="different seeds: 1 and 2"):
        SlidingFM(10, seed=1).merge(SlidingFM(10, seed=2))
    with pytest.raises(IncompatibleSketchError, match="different num_bitmaps: 64 and 32"):
        SlidingFM(10).merge(SlidingFM(10, num_bitmaps=32))
    with pytest.raises(IncompatibleSketchError, match="different windows: 10 and 20"):
        SlidingHyperLogLog(10).merge(SlidingHyperLogLog(20))
    with pytest.raises(IncompatibleSketchError, match="different precisions: 12 and 10"):
        SlidingHyperLogLog(10).merge(SlidingHyperLogLog(10, precision=10))
    with pytest.raises(TypeError):
        SlidingFM(10).merge(SlidingHyperLogLog(10))
    # merge_all refuses what merge refuses, empty sketches and the first one included, changing nothing
    full = SlidingHyperLogLog(10).update([1, 2], ["a", "b"])
    before = full.to_bytes()
    with pytest.raises(IncompatibleSketchError, match="different windows: 10 and 20"):
        SlidingHyperLogLog.merge_all([full, SlidingHyperLogLog(20)])
    with pytest.raises(IncompatibleSketchError, match="different seeds: 0 and 3"):
        SlidingHyperLogLog.merge_all([full, full, SlidingHyperLogLog(10, seed=3).update([3], ["c"])])
    with pytest.raises(TypeError, match="got SlidingFM"):
        SlidingHyperLogLog.merge_all([SlidingFM(10), full])
    with pytest.raises(ValueError, match="at least one"):
        SlidingHyperLogLog.merge_all([])
    assert full.to_bytes() == before


def test_items_as_pandas_like_and_numpy_kinds():
    ts = np.arange(6)
    ref = SlidingHyperLogLog(100, 6).update(ts, np.array(["a", "b", "c", "a", "b", "c"]))
    assert SlidingHyperLogLog(100, 6).update(ts, ["a", "b", "c", "a", "b", "c"]) == ref
    assert SlidingHyperLogLog(100, 6).update(ts, np.array(["a", "b", "c"] * 2, dtype=object)) == ref

    class SeriesLike:  # what a pandas Series offers
        def __init__(self, values):
            self.values = values

        def to_numpy(self):
            return np.asarray(self.values, dtype=object)

    assert SlidingHyperLogLog(100, 6).update(ts, SeriesLike(["a", "b", "c"] * 2)) == ref
    ints = SlidingFM(100).update(ts, np.array([1, 2, 3, 1, 2, 3], dtype=np.int32))
    assert ints == SlidingFM(100).update(ts, [1, 2, 3, 1, 2, 3])


def test_hll_update_hashes_equals_update():
    from ehist.hashing import hash64

    rng = np.random.default_rng(2)
    ts = np.sort(rng.integers(0, 1000, 5000))
    items = rng.integers(0, 800, 5000)
    a = SlidingHyperLogLog(300, 10, seed=4).update(ts, items)
    h = hash64(items, 4)
    assert a == SlidingHyperLogLog(300, 10, seed=4).update_hashes(ts, h)
    assert a == SlidingHyperLogLog(300, 10, seed=4).update_hashes(ts, h.view(np.int64))  # as stored in Spark
    with pytest.raises(ValueError, match="64-bit integers"):
        SlidingHyperLogLog(300).update_hashes([1], [0.5])
