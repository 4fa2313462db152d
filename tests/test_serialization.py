"""to_bytes / from_bytes: round trips, golden bytes, corruption."""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import CorruptSketchError, ExponentialHistogram
from ehist.serialization import Reader, encode_varints
from tests.conftest import examples
from tests.strategies import eps_values, streams

GOLDEN = Path(__file__).parent / "golden"


def golden_histograms():
    """Deterministic histograms whose bytes are pinned in tests/golden."""
    rng = np.random.default_rng(2024)
    ts = np.cumsum(rng.integers(0, 4, 5000))
    bits = rng.integers(0, 2, 5000)
    sizes = rng.integers(0, 2**20, 5000)
    ordered = ExponentialHistogram(1000, 0.05).update(ts, bits)
    sums = ExponentialHistogram(3000, 0.1).update(ts - 10**12, sizes)
    a = ExponentialHistogram(1000, 0.05).update(ts[0::2], bits[0::2])
    b = ExponentialHistogram(1000, 0.05).update(ts[1::2], bits[1::2])
    return {
        "empty": ExponentialHistogram(60, 0.01),
        "zeros_only": ExponentialHistogram(60, 0.01).update([5, 7], [0, 0]),
        "ordered": ordered,
        "sums": sums,
        "merged": a.merge(b),
    }


@pytest.mark.parametrize("name", sorted(golden_histograms()))
def test_golden_bytes(name):
    """The format cannot drift silently: these bytes were written by format
    version 2.  Regenerate only with a version bump."""
    h = golden_histograms()[name]
    path = GOLDEN / f"eh_{name}.bin"
    assert h.to_bytes() == path.read_bytes()
    assert ExponentialHistogram.from_bytes(path.read_bytes()) == h


@pytest.mark.parametrize("name", sorted(golden_histograms()))
def test_version_1_bytes_still_read(name):
    """Sketches stored by format version 1 (in Parquet, in streaming state)
    decode to the same histogram; writing them again gives version 2."""
    h = golden_histograms()[name]
    old = (GOLDEN / f"eh_v1_{name}.bin").read_bytes()
    assert old[3] == 1
    back = ExponentialHistogram.from_bytes(old)
    assert back == h
    assert back.to_bytes() == h.to_bytes()


def test_shared_timestamps_stored_once():
    """A sum spreads each value over buckets of one timestamp: version 2
    stores that timestamp once (version 1 wrote a zero delta per bucket)."""
    h = golden_histograms()["sums"]
    _, hi, _ = h.buckets()
    distinct_runs = 1 + int(np.count_nonzero(np.diff(hi)))
    assert distinct_runs < len(h) / 2
    old = (GOLDEN / "eh_v1_sums.bin").read_bytes()
    assert len(h.to_bytes()) < 0.75 * len(old)


@settings(max_examples=examples(100), deadline=None)
@given(data=streams(), window=st.integers(1, 10**6), eps=eps_values, merge=st.booleans())
def test_round_trip(data, window, eps, merge):
    ts, vs = data
    h = ExponentialHistogram(window, eps).update(ts, vs)
    if merge:
        h = h.merge(ExponentialHistogram(window, eps).update(ts[-1:] + 1, vs[-1:]))
    b = h.to_bytes()
    back = ExponentialHistogram.from_bytes(b)
    assert back == h
    assert back.to_bytes() == b
    assert back.bounds() == h.bounds()
    assert pickle.loads(pickle.dumps(h)) == h
    # accepts bytearray and memoryview too
    assert ExponentialHistogram.from_bytes(bytearray(b)) == h
    assert ExponentialHistogram.from_bytes(memoryview(b)) == h


def test_empty_round_trip_and_repr():
    h = ExponentialHistogram(60, 0.01)
    assert repr(h) == "ExponentialHistogram(window=60, eps=0.01, empty)"
    assert ExponentialHistogram.from_bytes(h.to_bytes()) == h
    assert len(h) == 0 and h.total == 0 and h.newest is None
    assert h.estimate() == 0.0 and h.bounds() == (0, 0)


def test_bytes_per_bucket_is_compact():
    bits = np.random.default_rng(1).integers(0, 2, 200_000)
    h = ExponentialHistogram(100_000, 0.01).update(np.arange(bits.size), bits)
    assert len(h.to_bytes()) / len(h) <= 2.5


def test_identical_bytes_in_another_process():
    code = (
        "import numpy as np, sys\n"
        "from ehist import ExponentialHistogram as E\n"
        "r = np.random.default_rng(5)\n"
        "h = E(777, 0.02).update(np.cumsum(r.integers(0, 3, 20000)), r.integers(0, 9, 20000))\n"
        "sys.stdout.write(h.to_bytes().hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    r = np.random.default_rng(5)
    h = ExponentialHistogram(777, 0.02).update(
        np.cumsum(r.integers(0, 3, 20000)), r.integers(0, 9, 20000)
    )
    assert bytes.fromhex(out.stdout) == h.to_bytes()


# ------------------------------------------------------------- corruption
def sample_bytes():
    return golden_histograms()["ordered"].to_bytes()


def reseal(body: bytes) -> bytes:
    """Recompute the CRC so a test reaches the checks after it."""
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def test_every_truncation_is_a_named_error():
    b = sample_bytes()
    for n in range(len(b)):
        with pytest.raises(CorruptSketchError):
            ExponentialHistogram.from_bytes(b[:n])


def test_every_single_bit_flip_is_detected():
    b = bytearray(sample_bytes())
    for i in range(len(b)):
        for bit in (0, 3, 7):
            c = bytearray(b)
            c[i] ^= 1 << bit
            with pytest.raises(CorruptSketchError):
                ExponentialHistogram.from_bytes(bytes(c))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b"XX" + b[2:], "expected magic b'EH', found b'XX'"),
        (lambda b: b[:2] + bytes([4]) + b[3:], r"expected family id 1 \(ExponentialHistogram\), found 4 \(SlidingFM\)"),
        (lambda b: b[:2] + bytes([77]) + b[3:], "found 77 \\(unknown family 77\\)"),
        (lambda b: b[:3] + bytes([9]) + b[4:], "expected format version in \\[1, 2, 3\\], found 9"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]), "expected checksum"),
        (lambda b: b + b"\x00", "expected checksum"),
    ],
)
def test_foreign_and_altered_bytes(mutate, message):
    with pytest.raises(CorruptSketchError, match=message):
        ExponentialHistogram.from_bytes(mutate(sample_bytes()))


def test_unknown_flags_rejected():
    b = sample_bytes()[:-4]
    body = b[:4] + struct.pack("<H", 0x80) + b[6:]
    with pytest.raises(CorruptSketchError, match="expected flags"):
        ExponentialHistogram.from_bytes(reseal(body))


def test_bad_parameters_rejected():
    b = sample_bytes()[:-4]
    body = b[:6] + struct.pack("<q", 0) + b[14:]
    with pytest.raises(CorruptSketchError, match="invalid parameters: window"):
        ExponentialHistogram.from_bytes(reseal(body))
    body = b[:14] + struct.pack("<d", 1.5) + b[22:]
    with pytest.raises(CorruptSketchError, match="invalid parameters: eps"):
        ExponentialHistogram.from_bytes(reseal(body))


def test_huge_bucket_count_does_not_allocate():
    """A length field claiming 2**60 buckets fails before any allocation."""
    h = ExponentialHistogram(60, 0.5).update([1, 2, 3])
    b = h.to_bytes()[:-4]
    head = b[:30]  # preamble + window + eps + newest
    body = head + encode_varints(np.array([2**60], dtype=np.uint64)) + b"\x01\x00\x01"
    with pytest.raises(CorruptSketchError, match="expected at most .* buckets .* found 1152921504606846976"):
        ExponentialHistogram.from_bytes(reseal(body))


def test_non_canonical_sizes_rejected():
    h = ExponentialHistogram(60, 0.5).update([1, 2, 3, 4])  # sizes 1,1,2 newest first
    b = h.to_bytes()[:-4]
    head = b[:30]
    # claim three buckets of size 1 (total 3 wants sizes 1, 2)
    runs = encode_varints(np.array([1, 0, 3], dtype=np.uint64))  # one run: 3 x 2**0
    deltas = encode_varints(np.array([0, 1, 1, 0], dtype=np.uint64))  # 3 timestamps, then the width
    with pytest.raises(CorruptSketchError, match="l-canonical"):
        ExponentialHistogram.from_bytes(reseal(head + b"\x03" + runs + deltas))


def millisecond_stamps():
    """Microsecond timestamps of whole milliseconds, as from Kafka."""
    return np.unique(np.random.default_rng(9).integers(0, 7_200_000, 3000)) * 1000


def millisecond_histogram():
    return ExponentialHistogram(3_600_000_000, 0.05).update(millisecond_stamps())


def test_tick_stores_millisecond_deltas_in_milliseconds():
    h = millisecond_histogram()
    b = h.to_bytes()
    assert b[4] & 8
    assert ExponentialHistogram.from_bytes(b) == h
    ts = millisecond_stamps()
    ts[-1] += 1  # one timestamp off the millisecond grid: gcd 1, same buckets
    micro = ExponentialHistogram(3_600_000_000, 0.05).update(ts)
    assert len(micro) == len(h) and not micro.to_bytes()[4] & 8
    assert len(b) < 0.75 * len(micro.to_bytes())  # 255 against 359 bytes


def _layout(h):
    """(preamble to newest, [n, n_runs, runs...], shared bits, kept deltas, width) of an ordered histogram."""
    sizes, hi, lo = h.buckets()
    exps = np.log2(sizes).astype(np.int64)
    change = np.flatnonzero(np.diff(exps)) + 1
    starts = np.concatenate([[0], change])
    runs = np.column_stack([exps[starts], np.diff(np.append(starts, exps.size))]).ravel()
    shared = np.r_[False, hi[1:] == hi[:-1]]
    stamps = hi[~shared]
    deltas = np.r_[h.newest - stamps[0], stamps[:-1] - stamps[1:]]
    head = [len(h), starts.size, *runs.tolist()]
    return h.to_bytes()[:30], head, shared, deltas, int(hi[-1] - lo[-1])


def _assemble(head, fields, bitmap, deltas, width, flags, tick=None):
    from ehist.exponential_histogram import _pack_bits

    body = head[:4] + struct.pack("<H", flags) + head[6:] + encode_varints(np.array(fields, dtype=np.uint64))
    body += encode_varints(np.array([tick], dtype=np.uint64)) if tick is not None else b""
    return body + (_pack_bits(bitmap) if bitmap is not None else b"") + encode_varints(
        np.array([*np.asarray(deltas).tolist(), width], dtype=np.uint64))


def format_mutations():
    """(name, body, message): version-2 bytes (before the checksum) whose
    shared-timestamps bitmap or tick, or their absence, breaks a rule of the
    format."""
    head, fields, shared, deltas, width = _layout(golden_histograms()["sums"])
    assert shared.sum() > len(shared) / 7, "the golden sums use a bitmap"
    good = _assemble(head, fields, shared, deltas[...], width, 1 | 4)
    assert reseal(good) == golden_histograms()["sums"].to_bytes()
    at = 30 + len(encode_varints(np.array(fields, dtype=np.uint64)))
    all_deltas = np.where(shared, 0, 0)
    all_deltas[~shared] = deltas
    o_head, o_fields, o_shared, o_deltas, o_width = _layout(golden_histograms()["ordered"])
    assert 0 < o_shared.sum() <= len(o_shared) / 7, "the golden ordered histogram shares a few timestamps"

    def with_byte(b, i, value):
        return b[:i] + bytes([value]) + b[i + 1:]

    m_hist = millisecond_histogram()
    m_head, m_fields, m_shared, m_deltas, m_width = _layout(m_hist)
    assert not m_shared.any() and m_hist.to_bytes()[4] == 9  # has newest, tick
    p_hist = ExponentialHistogram(3000, 0.1).update([1, 2, 3], [1002, 1002, 1002])
    p_head, p_fields, p_shared, p_deltas, p_width = _layout(p_hist)
    assert len(p_shared) == 50  # 8 bitmap bytes, the last with 1 bit and 6 of padding
    padded = _assemble(p_head, p_fields, p_shared, p_deltas, p_width, 5)
    assert reseal(padded) == p_hist.to_bytes()
    p_at = 30 + len(encode_varints(np.array(p_fields, dtype=np.uint64)))
    return [
        ("version 1 with a bitmap", with_byte(good, 3, 1), "no shared-timestamps or tick flag in format version 1"),
        ("first bit set", with_byte(good, at, good[at] | 1), "clear padding and first bit"),
        ("padding set", with_byte(padded, p_at + 7, padded[p_at + 7] | 0x40), "clear padding and first bit"),
        ("bitmap byte above 127", with_byte(good, at, good[at] | 0x80), "bitmap bytes below 128"),
        ("zero deltas in version 2", _assemble(head, fields, None, all_deltas, width, 1), "expected the shared-timestamps bitmap"),
        ("a zero delta beside the bitmap", _assemble(head, fields, shared & (np.arange(len(shared)) != 7),
                                                      np.insert(deltas, 7 - int(shared[:7].sum()), 0), width, 5),
         "expected a nonzero delta"),
        ("a bitmap that does not pay", _assemble(o_head, o_fields, o_shared, o_deltas, o_width, 5), "expected no bitmap"),
        ("a tick of 1", _assemble(m_head, m_fields, None, m_deltas, m_width, 9, tick=1), "tick of at least 2"),
        ("a tick that is not the gcd", _assemble(m_head, m_fields, None, m_deltas // 500, m_width // 500, 9, tick=500),
         "with gcd 1, found gcd 2"),
        ("deltas in ticks without the flag", _assemble(m_head, m_fields, None, m_deltas, m_width, 1),
         "expected a tick flag: every delta and width is a multiple of 1000"),
        ("ticks beyond 64 bits", _assemble(m_head, m_fields, None, np.r_[(m_deltas[:-1] // 1000).astype(np.uint64), np.uint64(2**63 + 1)],
                                           m_width // 1000, 9, tick=1000), "expected deltas below 2\\*\\*64"),
        ("version 1 with a tick", with_byte(_assemble(m_head, m_fields, None, m_deltas // 1000, m_width // 1000, 9,
                                                      tick=1000), 3, 1), "or tick flag in format version 1"),
        ("a tick on an empty histogram", _assemble(m_head[:22], [0], None, [], 0, 8)[:-1],
         "no merged, shared-timestamps or tick flag on an empty"),
    ]


@pytest.mark.parametrize("name, data, message", format_mutations(), ids=[m[0] for m in format_mutations()])
def test_format_rules(name, data, message):
    with pytest.raises(CorruptSketchError, match=message):
        ExponentialHistogram.from_bytes(reseal(data))


@pytest.mark.parametrize("small", [True, False])
def test_varint_errors(small, monkeypatch):
    import ehist.serialization as ser

    monkeypatch.setattr(ser, "_SMALL_DECODE", 10**9 if small else 0)
    with pytest.raises(CorruptSketchError, match="expected 2 varints, found 1"):
        Reader(b"\x01\x80").varints(2)
    with pytest.raises(CorruptSketchError, match="non-minimal"):
        Reader(b"\x80\x00").varints(1)
    with pytest.raises(CorruptSketchError, match="exceeds 64 bits"):
        Reader(b"\xff" * 9 + b"\x02").varints(1)
    with pytest.raises(CorruptSketchError, match="of at most 10 bytes each"):
        Reader(b"\xff" * 10 + b"\x01").varints(1)


def _decode(data, count, small):
    """Decode with the plain-Python path (small) or the numpy one:
    the values, or the error message."""
    import ehist.serialization as ser

    saved = ser._SMALL_DECODE
    ser._SMALL_DECODE = 10**9 if small else 0
    try:
        r = Reader(data)
        return r.varints(count).tolist(), r.pos
    except CorruptSketchError as exc:
        return "error", str(exc).split(":")[0]
    finally:
        ser._SMALL_DECODE = saved


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(st.integers(0, 2**64 - 1), max_size=80), junk=st.binary(max_size=40),
       extra=st.integers(0, 3))
def test_small_and_numpy_varint_paths_agree(values, junk, extra):
    """The plain-Python fast paths for short arrays encode the same bytes
    and decode the same values (or reject the same corrupt bytes) as the
    numpy paths."""
    import ehist.serialization as ser

    v = np.array(values, dtype=np.uint64)
    saved = ser._SMALL_ENCODE
    try:
        ser._SMALL_ENCODE = 10**9
        small = encode_varints(v)
        ser._SMALL_ENCODE = 0
        assert encode_varints(v) == small
    finally:
        ser._SMALL_ENCODE = saved
    for data, count in ((small + junk, len(values)), (junk, extra + 1), (small[:-1] + junk, len(values))):
        if count:
            a, b = _decode(data, count, True), _decode(data, count, False)
            assert (a[0] == "error") == (b[0] == "error"), (data, count, a, b)
            if a[0] != "error":
                assert a == b


@settings(max_examples=examples(200), deadline=None)
@given(junk=st.binary(max_size=200))
def test_random_bytes_never_crash(junk):
    for data in (junk, b"EH\x01\x01" + junk, reseal(b"EH\x01\x01" + junk)):
        try:
            ExponentialHistogram.from_bytes(data)
        except CorruptSketchError:
            pass


def test_from_bytes_rejects_non_bytes():
    with pytest.raises(TypeError, match="expected bytes"):
        ExponentialHistogram.from_bytes("EH")
