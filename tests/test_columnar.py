"""HistogramColumn: many histograms at once, equal to one at a time.

Every vectorized step is checked against the per-histogram code it
replaces, which the rest of the suite checks against brute force: build
against ``update``, ``to_bytes`` / ``from_bytes`` byte for byte (and error
for error on corrupted bytes), bounds against ``bounds``.
"""

from __future__ import annotations

import contextlib
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import CorruptSketchError, ExponentialHistogram, IncompatibleSketchError
from ehist import columnar
from ehist import compiled as ehist_compiled
from ehist.blobs import Blobs
from ehist.columnar import HistogramColumn, _decode_fast, bounds_from_bytes, exact_forms, histogram_bytes
from ehist.errors import QueryTimeError
from ehist.serialization import FAMILIES
from tests.conftest import examples
from tests.engines import ENGINES, engine
from tests.exact import exact_sums
from tests.strategies import eps_values, streams, values_any, values_small
from tests.test_serialization import format_mutations


@st.composite
def runs(draw, values=values_any, max_runs=6):
    """(timestamps, values, starts): several keys' streams one after the
    other, some empty, some shuffled within the run."""
    ts, vs, starts = [], [], []
    n = 0
    for _ in range(draw(st.integers(1, max_runs))):
        starts.append(n)
        if draw(st.integers(0, 5)) == 0:
            continue
        t, v = draw(streams(max_segments=12, values=values))
        if draw(st.booleans()):
            order = np.random.default_rng(draw(st.integers(0, 99))).permutation(t.size)
            t, v = t[order], v[order]
        ts.append(t)
        vs.append(v)
        n += t.size
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    return cat(ts), cat(vs), np.array(starts, dtype=np.int64)


def altered(buf, start, end, pos, byte, insert):
    """``(bytes, end)``: a histogram's bytes with the payload byte at ``pos``
    (modulo its length) replaced by ``byte``, or ``byte`` inserted there
    (the end moves on: a trailing byte, a zero delta, a shifted field)."""
    if byte is None:
        return buf, end
    if not insert:
        buf = buf.copy()
        buf[start + pos % (end - start)] = byte
        return buf, end
    at = start + pos % (end - start + 1)
    return np.concatenate([buf[:at], np.array([byte], dtype=np.uint8), buf[at:]]), end + 1


def one_at_a_time(ts, vs, starts, window, eps, counts):
    ends = list(starts[1:]) + [ts.size]
    return [ExponentialHistogram(window, eps).update(ts[a:b], None if counts else vs[a:b])
            for a, b in zip(starts, ends)]


@settings(max_examples=examples(150), deadline=None)
@given(data=runs(), window=st.integers(1, 3000), eps=eps_values, counts=st.booleans())
def test_build_equals_update_per_run(data, window, eps, counts):
    ts, vs, starts = data
    col = HistogramColumn.build(ts, starts, None if counts else vs, window=window, eps=eps)
    expected = one_at_a_time(ts, vs, starts, window, eps, counts)
    assert len(col) == len(expected)
    for i, h in enumerate(expected):
        assert col[i] == h, i
        assert col[i].total == h.total
    assert col.to_bytes() == [h.to_bytes() for h in expected]


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(60), deadline=None)
@given(data=runs(), merged=st.booleans(), picks=st.data())
def test_take_spans_is_take_of_the_spans(name, data, merged, picks):
    """A column's histograms taken span by span (each span's buckets
    copied together: how a keyed sketch's counters are taken) are
    :meth:`HistogramColumn.take` of the spans' positions, empty spans and
    repeats included."""
    from ehist.segments import ranges

    ts, vs, starts = data
    col = HistogramColumn.build(ts, starts, vs, window=3000, eps=0.1)
    if merged:
        col = HistogramColumn(col.window, col.eps, col.offsets, col.exps, col.hi, col.lo, col.newest,
                              col.has_newest, np.arange(len(col)) % 2 == 0)
    cuts = picks.draw(st.lists(st.tuples(st.integers(0, len(col)), st.integers(0, len(col))), max_size=6))
    a = np.array([min(x) for x in cuts], dtype=np.int64)
    z = np.array([max(x) for x in cuts], dtype=np.int64)
    with engine(name):
        got = col.take_spans(a, z)
    want = col.take(ranges(a, z))
    for field in ("offsets", "exps", "hi", "lo", "newest", "has_newest", "merged"):
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


@settings(max_examples=examples(100), deadline=None)
@given(data=runs(values=values_small), window=st.integers(1, 500), eps=eps_values,
       now_after=st.integers(0, 600), query=st.integers(1, 500))
def test_bounds_equal_per_histogram_bounds(data, window, eps, now_after, query):
    ts, vs, starts = data
    col = HistogramColumn.build(ts, starts, vs, window=window, eps=eps)
    expected = one_at_a_time(ts, vs, starts, window, eps, False)
    lower, upper = col.bounds()
    assert list(zip(lower.tolist(), upper.tolist())) == [h.bounds() for h in expected]
    now = int(ts.max()) + now_after if ts.size else now_after
    w = min(query, window)
    lower, upper = col.bounds(now=now, window=w)
    assert list(zip(lower.tolist(), upper.tolist())) == [h.bounds(now=now, window=w) for h in expected]


@settings(max_examples=examples(100), deadline=None)
@given(data=runs(values=values_any), window=st.integers(1, 3000), eps=eps_values, now_after=st.integers(0, 600),
       query=st.integers(1, 3000), few=st.booleans())
def test_exact_forms_are_shorter_exact_and_read_back(data, window, eps, now_after, query, few):
    """Where the exact form of a run of sums is chosen, it encodes shorter
    than the canonical one, reads back equal, and bounds every window by
    the exact sum; elsewhere the canonical histogram stays; unions of
    either kind keep the guarantee."""
    ts, vs, starts = data
    if few:  # a few rows per run: where the exact form wins
        keep = np.concatenate([np.arange(a, min(a + 3, b)) for a, b in zip(starts, np.append(starts[1:], ts.size))]
                              + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        lengths = np.minimum(np.diff(np.append(starts, ts.size)), 3)
        ts, vs, starts = ts[keep], vs[keep], np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    order = np.lexsort((ts, np.repeat(np.arange(starts.size), np.diff(np.append(starts, ts.size)))))
    ts, vs = ts[order], vs[order]
    col = HistogramColumn.build(ts, starts, vs, window=window, eps=eps)
    both = exact_forms(col, ts, starts, vs)
    blobs, canonical = both.to_bytes(), col.to_bytes()
    written = histogram_bytes(ts, starts, vs, window=window, eps=eps, exact=True)[0]
    for i, (a, b) in enumerate(zip(starts.tolist(), np.append(starts[1:], ts.size).tolist())):
        rows = ExponentialHistogram.of_rows(window, eps, ts[a:b], vs[a:b])  # where it fits (test_rows_form_*)
        assert written[i] == (blobs[i] if rows.rows is None else rows.to_bytes())
    ends = np.append(starts[1:], ts.size)
    w = min(query, window)
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        h = ExponentialHistogram.from_bytes(blobs[i])
        assert h == both[i] and len(blobs[i]) <= len(canonical[i])
        if blobs[i] == canonical[i]:
            continue
        assert h.merged and np.array_equal(h.buckets()[1], h.buckets()[2])  # every bucket one timestamp
        now = int(ts[b - 1]) + now_after
        exact = exact_sums(ts[a:b], vs[a:b], [now], w)[0]
        assert h.bounds(now, w) == (exact, exact)
        part = ExponentialHistogram(window, eps).update(ts[a:b][::2], vs[a:b][::2])  # a union with another kind
        united = ExponentialHistogram.merge_all([h, part])
        lower, upper = united.bounds(now, w)
        both_exact = exact + exact_sums(ts[a:b][::2], vs[a:b][::2], [now], w)[0]
        assert lower <= both_exact <= upper
        assert abs((lower * 0.5 + upper * 0.5) - both_exact) <= eps * both_exact + 1e-9


@settings(max_examples=examples(100), deadline=None)
@given(data=streams(values=values_any), parts=st.integers(1, 5), window=st.integers(1, 2000), eps=eps_values,
       seed=st.integers(0, 99), now_after=st.integers(0, 100))
def test_union_bounds_bracket_the_exact_union_within_eps(data, parts, window, eps, seed, now_after):
    """A stream dealt at random to ``parts`` partitions: the union bounds of
    the parts' histograms bracket the exact windowed sum, and the midpoint
    is within eps of it (each part's error is within eps of its share)."""
    ts, vs = data
    part = np.random.default_rng(seed).integers(0, parts, ts.size)
    order = np.argsort(part, kind="stable")
    starts = np.searchsorted(part[order], np.arange(parts))
    col = HistogramColumn.build(ts[order], starts, vs[order], window=window, eps=eps)
    now = int(ts.max()) + now_after
    for group_now in (None, now):
        lower, upper = col.union_bounds([0], now=group_now)
        at = int(ts.max()) if group_now is None else now
        exact = exact_sums(ts, vs, [at], window)[0]
        assert lower[0] <= exact <= upper[0]
        assert abs((lower[0] * 0.5 + upper[0] * 0.5) - exact) <= eps * exact + 1e-9


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(100), deadline=None)
@given(data=runs(), window=st.integers(1, 3000), eps=eps_values, merged=st.lists(st.booleans(), max_size=6),
       never=st.booleans())
def test_bytes_round_trip_with_merged_and_empty_histograms(name, data, window, eps, merged, never):
    ts, vs, starts = data
    hs = one_at_a_time(ts, vs, starts, window, eps, False)
    for i, m in enumerate(merged[: len(hs)]):
        if m and hs[i].newest is not None:
            hs[i] = hs[i].merge(ExponentialHistogram(window, eps).update([hs[i].newest + 1], [3]))
    if never:
        hs.append(ExponentialHistogram(window, eps))
    col = HistogramColumn.from_histograms(hs)
    with engine(name):  # the compiled encoder or numpy's, and the same for the decoders
        blobs = col.to_bytes()
        buf, offsets = col.compact_bytes()
        back = HistogramColumn.from_bytes(blobs)
        # ordered and merged histograms take the numpy or compiled path; never-updated ones from_bytes
        fast = _decode_fast(blobs)[0].tolist()
        again = back.to_bytes()
    assert blobs == [h.to_bytes() for h in hs]
    for i, h in enumerate(hs):  # the compact form: the flags byte and the payload of each
        if h.newest is not None:
            whole = h.to_bytes()
            assert buf[offsets[i]:offsets[i + 1]].tobytes() == whole[4:5] + whole[30:-4]
    assert [back[i] for i in range(len(back))] == hs
    assert fast == [h.newest is not None for h in hs]
    assert back.merged.tolist() == [h.merged for h in hs]
    assert again == blobs


@pytest.mark.parametrize("name", ENGINES)
def test_registry_examples_and_int64_edges_encode_byte_for_byte(name):
    """Timestamps and deltas at int64's edges, ticks, shared timestamps and
    merged histograms: each column's bytes are the histograms' own."""
    edge = [ExponentialHistogram(2**62, 0.5).update(np.array([-2**63 + 1, -2**63 + 2, 2**62])),
            ExponentialHistogram(2**62, 0.5).update(np.array([2**63 - 2, 2**63 - 1]), np.array([7, 2**40])),
            ExponentialHistogram(2**62, 0.5)]
    groups = {}
    for h in ExponentialHistogram._examples() + edge:
        if h.rows is None:  # a column holds buckets (the rows form: test_rows_form_*)
            groups.setdefault((h.window, h.eps), []).append(h)
    for hs in groups.values():
        with engine(name):
            blobs = HistogramColumn.from_histograms(hs).to_bytes()
        assert blobs == [h.to_bytes() for h in hs]


def reseal(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def outcome(fn):
    try:
        return "ok", fn()
    except (CorruptSketchError, IncompatibleSketchError) as exc:
        return type(exc).__name__, str(exc)


def corrupted(data, eps, victim, pos, byte, how, merged, scale) -> list:
    """The histograms of ``data``'s runs as bytes (``merged``: each run
    united with the one before; times times ``scale``), one of them altered
    (``how``: a byte set, the bytes cut or one inserted, then re-sealed so
    the checks after the checksum run; or a raw byte, checksum left)."""
    ts, vs, starts = data
    hs = one_at_a_time(ts * scale, vs, starts, 1000 * scale, eps, False)
    if merged:
        hs = hs[:1] + [a.merge(b) for a, b in zip(hs[1:], hs[:-1])]
    blobs = [h.to_bytes() for h in hs]
    if how == "none":
        return blobs
    i = victim % len(blobs)
    body = bytearray(blobs[i][:-4])
    p = pos % len(body)
    if how == "set":
        body[p] = byte
    elif how == "cut":
        del body[p:]
    elif how == "insert":
        body[p:p] = bytes([byte])
    blobs[i] = bytes(body) + blobs[i][-4:] if how == "raw" and p < 6 else reseal(bytes(body))
    if how == "raw":
        blobs[i] = blobs[i][:p] + bytes([byte]) + blobs[i][p + 1:]
    return blobs


@settings(max_examples=examples(300), deadline=None)
@given(data=runs(max_runs=4), eps=eps_values, victim=st.integers(0, 10), pos=st.integers(0, 400),
       byte=st.integers(0, 255), how=st.sampled_from(["set", "cut", "insert", "raw"]), merged=st.booleans(),
       scale=st.sampled_from([1, 1000]))
@pytest.mark.parametrize("name", ENGINES)
def test_corrupt_bytes_get_the_error_from_bytes_gives(name, data, eps, victim, pos, byte, how, merged, scale):
    """One blob altered and re-sealed (so the checks after the checksum
    run): the column decodes exactly what one-at-a-time decoding gives,
    or raises the error it raises for the first bad blob (or, when the
    alteration made a valid histogram of another window or eps, the
    column's IncompatibleSketchError).  Ordered or merged histograms
    (each run united with the one before), timestamps with or without a
    tick."""
    blobs = corrupted(data, eps, victim, pos, byte, how, merged, scale)

    def each():
        hs = [ExponentialHistogram.from_bytes(b) for b in blobs]
        for h in hs[1:]:  # a column holds one (window, eps)
            if (h.window, h.eps) != (hs[0].window, hs[0].eps):
                raise IncompatibleSketchError(f"a column holds histograms of one window and eps: "
                                              f"({hs[0].window}, {hs[0].eps}) and ({h.window}, {h.eps})")
        return hs

    def column():
        with engine(name):
            col = HistogramColumn.from_bytes(blobs)
        return [col[j] for j in range(len(col))]

    assert outcome(column) == outcome(each)


@settings(max_examples=examples(200), deadline=None)
@given(data=runs(max_runs=5), eps=eps_values, victim=st.integers(0, 10), pos=st.integers(0, 400),
       byte=st.integers(0, 255), how=st.sampled_from(["none", "none", "set", "cut", "insert", "raw"]),
       merged=st.booleans(), scale=st.sampled_from([1, 1000]), later=st.integers(-3, 2000),
       query=st.one_of(st.none(), st.integers(0, 1001)), nulls=st.booleans(),
       cuts=st.one_of(st.none(), st.lists(st.integers(1, 5), max_size=3)))
@pytest.mark.parametrize("name", ENGINES)
def test_bounds_from_bytes_is_from_bytes_then_bounds(name, data, eps, victim, pos, byte, how, merged, scale, later,
                                                     query, nulls, cuts):
    """The fused decode-and-bound of a batch (no column built) answers and
    raises exactly as decoding the column and bounding it, for good and
    altered bytes, queries late or not, windows in range or not, and for
    the bytes read in place from a buffer with gaps and nulls around them
    (as Arrow hands them over); with groups, each group's union bounds."""
    blobs = corrupted(data, eps, victim, pos, byte, how, merged, scale)
    newest = max([ExponentialHistogram.from_bytes(b).newest or 0 for b in blobs] or [0]) if how == "none" else 0
    now = None if later > 1500 else newest + later * scale
    window = None if query is None else query * scale
    if nulls:  # the same bytes inside a larger buffer, with a null between them
        parts = [b"pad"] + [x for b in blobs for x in (b, None)]
        view = Blobs.of(parts).take(np.arange(1, len(parts), 2))
        assert view.tolist() == blobs
    else:
        view = blobs

    groups = None if cuts is None else np.array(sorted({0} | {c for c in cuts if c < len(blobs)}))

    def column():
        col = HistogramColumn.from_bytes(blobs)
        got = col.bounds(now, window) if groups is None else col.union_bounds(groups, now, window)
        return tuple(x.tolist() for x in got)

    def fused():
        return tuple(x.tolist() for x in bounds_from_bytes(view, now, window, groups=groups))

    with engine(name):
        assert outcome_or_query(fused) == outcome_or_query(column)


@settings(max_examples=examples(200), deadline=None)
@given(data=runs(max_runs=3), eps=eps_values, scale=st.sampled_from([1, 1000]), counts=st.booleans(),
       cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(-1, 1)), min_size=1, max_size=6),
       pos=st.integers(0, 400), byte=st.one_of(st.none(), st.integers(0, 255)), insert=st.booleans())
def test_ordered_histograms_read_from_size_runs_and_timestamps(data, eps, scale, counts, cuts, pos, byte, insert):
    """An ordered histogram is read from its size runs and a delta per
    timestamp (``compiled._ordered_read``): every one as written is taken
    that way, decoded (``_ordered_decode``) into the buckets the general
    decoder gives, and bounded (``_ordered_bounds``, no bucket written)
    as those buckets are at every cut (cuts at its timestamps and one unit
    either side: each bucket straddled, met or passed); one with a byte
    altered or inserted (checksum aside) is taken only where the general
    decoder takes it, with its buckets and bounds."""
    pytest.importorskip("numba")
    from ehist import eh_layout as L
    ehist_compiled._kernel("decode")
    ehist_compiled._kernel("build")
    ts, vs, starts = data
    for h in one_at_a_time(ts * scale, vs, starts, 1000 * scale, eps, counts):
        if h.newest is None:
            continue
        buf = np.frombuffer(h.to_bytes(), dtype=np.uint8)
        start = L.HEAD_BYTES
        buf, end = altered(buf, start, buf.size - 4, pos, byte, insert)
        flags, newest, l = int(buf[L.FLAGS_AT]), h.newest, (h.k + 1) // 2
        n = int(ehist_compiled._decl(buf, np.array([start]), np.array([end]), np.array([flags], dtype=np.uint8))[0])
        size = max(n, 1)
        exps, hi, lo, deltas, shared, widths = ehist_compiled._bufs(size)
        run_e, run_n = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
        general = ehist_compiled._dec1(buf, start, end, flags, True, newest, n, h.window, l, exps, hi, lo, deltas,
                                       shared, widths, 0, run_e, run_n)
        got = [np.zeros(size + 2, dtype=x.dtype) for x in (exps, hi, lo)]
        fast = ehist_compiled._odecode(buf, start, end, flags, True, newest, n, h.window, l, *got, 1, run_e, run_n)
        if byte is None:
            assert fast == (not h.merged and n > 0)
        if fast:
            assert general
            assert [x[1:n + 1].tolist() for x in got] == [x[:n].tolist() for x in (exps, hi, lo)]
            assert all(x[0] == x[n + 1] == 0 for x in got)  # nothing written outside its buckets
        times = h.buckets()[1]
        for at, side in cuts:
            cut = int(times[at % times.size]) + side * scale if times.size else newest
            fast, lower, upper, total = ehist_compiled._obounds(buf, start, end, flags, True, newest, n, h.window,
                                                                l, cut, run_e, run_n, np.empty(size, dtype=np.int64))
            if byte is None:
                assert fast == (not h.merged and n > 0)
            if fast:
                assert general
                assert (lower, upper) == ehist_compiled._bounds1(exps, hi, lo, n, cut)
                assert total == sum(1 << int(e) for e in exps[:n])


@settings(max_examples=examples(100), deadline=None)
@given(data=runs(max_runs=4), eps=eps_values, scale=st.sampled_from([1, 1000]), counts=st.booleans(),
       cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(-1, 1)), min_size=1, max_size=6),
       byte=st.integers(0, 255))
def test_merged_histograms_bounded_from_their_bytes(data, eps, scale, counts, cuts, byte):
    """A union's histogram (merged: a width per bucket) is bounded straight
    from its bytes (``compiled._merged_bounds``): every one as written is
    taken that way with the bounds and total of the buckets the general
    decoder gives, at every cut (its timestamps and lower ends, one unit
    either side); with each byte of it in turn replaced (by ``byte``, by 0,
    with its low bit flipped) or ``byte`` inserted before it (checksum
    aside: a trailing byte, a zero delta, a bitmap's first bit, a field
    shifted), it is taken only where the general decoder takes it, with
    its bounds."""
    pytest.importorskip("numba")
    from ehist import eh_layout as L
    ehist_compiled._kernel("decode")
    ehist_compiled._kernel("build")
    ts, vs, starts = data
    parts = [h for h in one_at_a_time(ts * scale, vs, starts, 1000 * scale, eps, counts) if h.newest is not None]
    for a in range(0, len(parts) - 1, 2):
        h = ExponentialHistogram.merge_all(parts[a:a + 3])
        edges = np.concatenate(h.buckets()[1:])
        written = np.frombuffer(h.to_bytes(), dtype=np.uint8)
        start, end = L.HEAD_BYTES, written.size - 4
        variants = [(written, end, cuts)]
        for p in range(end - start + 1):  # byte, 0 and the low bit flipped in place; byte inserted
            put = [] if p == end - start else [byte, 0, written[start + p] ^ 1]
            variants += [altered(written, start, end, p, b, False) + (cuts[:1],) for b in put]
            variants.append(altered(written, start, end, p, byte, True) + (cuts[:1],))
        for buf, stop, at_cuts in variants:
            flags, newest, l = int(buf[L.FLAGS_AT]), h.newest, (h.k + 1) // 2
            n = int(ehist_compiled._decl(buf, np.array([start]), np.array([stop]),
                                         np.array([flags], dtype=np.uint8))[0])
            size = max(n, 1)
            exps, hi, lo, deltas, shared, widths = ehist_compiled._bufs(size)
            run_e, run_n = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
            general = ehist_compiled._dec1(buf, start, stop, flags, True, newest, n, h.window, l, exps, hi, lo,
                                           deltas, shared, widths, 0, run_e, run_n)
            for at, side in at_cuts:
                cut = int(edges[at % edges.size]) + side * scale if edges.size else newest
                fast, lower, upper, total = ehist_compiled._mbounds(buf, start, stop, flags, True, newest, n, h.window,
                                                                    cut, run_e, run_n, np.empty(size, dtype=np.int64))
                if buf is written:
                    assert fast == (h.merged and n > 0)
                if fast:
                    assert general
                    assert (lower, upper) == ehist_compiled._bounds1(exps, hi, lo, n, cut)
                    assert total == sum(1 << int(e) for e in exps[:n])


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("times", [[1, 2, 4], [10, 20, 20, 30]])
def test_a_width_on_an_oldest_bucket_of_one_is_refused_alike(engine_name, times):
    """An ordered histogram whose oldest bucket, of size 1, declares a
    width: decoding it and bounding it straight from its bytes refuse it
    with the same error."""
    body = bytearray(ExponentialHistogram(3000, 0.1).update(times).to_bytes()[:-4])
    body[-1] = 1  # the oldest bucket's width
    bad = reseal(bytes(body))
    with pytest.raises(CorruptSketchError, match="width of 0 for an oldest bucket of size 1") as exc:
        ExponentialHistogram.from_bytes(bad)
    with engine(engine_name):
        assert outcome(lambda: bounds_from_bytes([bad])) == ("CorruptSketchError", str(exc.value))


def outcome_or_query(fn):
    try:
        return outcome(fn)
    except (QueryTimeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=examples(100), deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.binary(max_size=12), st.sampled_from([b"EH\x01", b"EH\x05xy", b"EH"]))),
       picks=st.lists(st.integers(0, 40)), offset=st.integers(0, 3), size=st.integers(0, 3))
def test_blobs_read_as_the_list_they_hold(items, picks, offset, size):
    """A Blobs is the list of bytes it was made of: items, slices, picks,
    families by preamble, and groups of equal bytes in first-appearance
    order (a too-short sketch grouped by the bytes it has)."""
    b = Blobs.of(items)
    assert len(b) == len(items) and list(b) == items and b.tolist() == items
    assert [b[i] for i in range(len(items))] == items and b[1:3].tolist() == items[1:3]
    idx = [p % len(items) for p in picks] if items else []
    assert b.take(idx).tolist() == [items[i] for i in idx]
    fam = [x[2] if x is not None and len(x) > 2 and x[:2] == b"EH" else -1 for x in items]
    assert b.families().tolist() == fam
    if items and all(x is not None for x in items):
        keys = [x[offset:offset + size] for x in items]
        expect = {}
        for i, k in enumerate(keys):
            expect.setdefault(k, []).append(i)
        assert [g.tolist() for g in b.groups(offset, size)] == list(expect.values())


@pytest.mark.parametrize("name", ENGINES)
def test_sealed_checks_every_checksum_small_and_large(name):
    """``sealed`` (every columnar decoder's first step) accepts a blob only
    with its checksum, whether the compiled pass (small blobs) or zlib
    (from ``ZLIB_CRC_FROM`` bytes) checks it."""
    from ehist.columnar import ZLIB_CRC_FROM, sealed

    good = [ExponentialHistogram(10**7, eps).update(np.arange(n)).to_bytes() for n, eps in ((30, 0.01), (10**6, 0.001))]
    assert min(map(len, good)) < ZLIB_CRC_FROM <= max(map(len, good))
    bad = [b[:-1] + bytes([b[-1] ^ 1]) for b in good]
    blobs = Blobs.of([x for pair in zip(good, bad) for x in pair])
    with engine(name):
        ok = sealed(blobs.buf, blobs.starts, blobs.lengths, FAMILIES["ExponentialHistogram"], 10, 0xFE)
    assert ok.tolist() == [True, False] * 2


def test_a_few_blobs_of_a_large_buffer_copy_only_their_bytes():
    """Iterating a slice or a pick of a batch (the per-key paths do, key by
    key) copies the picked sketches' bytes, not the whole buffer: that copy
    per key made those paths quadratic in the batch."""
    import tracemalloc

    items = [bytes([i % 251]) * 100_000 for i in range(40)]
    b = Blobs.of(items)
    tracemalloc.start()
    try:
        got = b[3:5].tolist() + list(b.take([39, 0]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [items[3], items[4], items[39], items[0]]
    assert peak < 1_000_000  # four sketches of 100 KB, not the 4 MB buffer (twice)


def test_blobs_refuse_what_is_not_bytes():
    with pytest.raises(TypeError, match="expected bytes, bytearray or memoryview, got int"):
        Blobs.of([b"a", 3])
    with pytest.raises(ValueError, match="inside the buffer"):
        Blobs(np.zeros(3, dtype=np.uint8), [2], [5])


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("name, data, message", format_mutations(), ids=[m[0] for m in format_mutations()])
def test_format_rules_give_the_error_from_bytes_gives(engine_name, name, data, message):
    """Each rule of the shared-timestamps bitmap and the tick, broken: the column, and
    the fused decode-and-bound, raise what ExponentialHistogram.from_bytes raises,
    alone or after good blobs."""
    bad = reseal(data)
    with pytest.raises(CorruptSketchError, match=message) as exc:
        ExponentialHistogram.from_bytes(bad)
    good = [ExponentialHistogram(3000, 0.1).update([1, 2, 3], [900, 5, 7]).to_bytes(),
            ExponentialHistogram(3000, 0.1).update([5]).to_bytes()]
    for blobs in ([bad], good + [bad]):
        with engine(engine_name):
            assert outcome(lambda: HistogramColumn.from_bytes(blobs)) == ("CorruptSketchError", str(exc.value))
            assert outcome(lambda: bounds_from_bytes(blobs)) == ("CorruptSketchError", str(exc.value))


def test_from_bytes_rejects_mixed_parameters_and_non_bytes():
    a = ExponentialHistogram(10, 0.1).update([1, 2]).to_bytes()
    b = ExponentialHistogram(20, 0.1).update([1, 2]).to_bytes()
    with pytest.raises(IncompatibleSketchError, match=r"\(10, 0.1\) and \(20, 0.1\)"):
        HistogramColumn.from_bytes([a, b])
    with pytest.raises(TypeError, match="expected bytes"):
        HistogramColumn.from_bytes([a, "EH"])
    assert len(HistogramColumn.from_bytes([], window=5, eps=0.1)) == 0
    with pytest.raises(ValueError, match="needs window and eps"):
        HistogramColumn.from_bytes([])


@pytest.mark.parametrize("starts, message", [
    ([1, 2], "begin at 0"), ([0, 3, 2], "non-decreasing"), ([0, 9], "up to 4"), ([], "starts is empty"),
    ([[0]], "one-dimensional"), ([0.0], "integers"),
])
def test_bad_runs(starts, message):
    with pytest.raises(ValueError, match=message):
        HistogramColumn.build([1, 2, 3, 4], starts, window=10)


def test_bad_values_and_queries_say_what_update_says():
    with pytest.raises(ValueError, match="non-negative integers, found -1"):
        HistogramColumn.build([1, 2], [0], [1, -1], window=10)
    with pytest.raises(ValueError, match="different lengths"):
        HistogramColumn.build([1, 2], [0], [1], window=10)
    with pytest.raises(ValueError, match="window must be"):
        HistogramColumn.build([1, 2], [0], window=0)
    col = HistogramColumn.build([1, 5, 3], [0, 2], window=10)
    with pytest.raises(ValueError, match=r"now \(4\) is earlier than the newest timestamp \(5\) of histogram 0"):
        col.bounds(now=4)
    with pytest.raises(ValueError, match=r"window must be in \[1, 10\] \(the synopsis.s window\), got 11"):
        col.bounds(window=11)


def test_huge_values_take_the_per_run_path():
    """Values whose column-wide cumulative sum could wrap int64 are built
    one run at a time, with update's overflow error."""
    big = 2**61
    col = HistogramColumn.build([1, 2, 3, 4], [0, 2], [big, big, big, big], window=10)
    assert col[0] == ExponentialHistogram(10).update([1, 2], [big, big])
    with pytest.raises(ValueError, match="overflow int64"):
        HistogramColumn.build([1, 2, 3, 4, 5], [0], [big] * 5, window=10)


@settings(max_examples=examples(50), deadline=None)
@given(data=runs(max_runs=9), window=st.integers(1, 3000), eps=eps_values, chunk=st.integers(1, 4))
def test_histogram_bytes_in_chunks(data, window, eps, chunk):
    ts, vs, starts = data
    blobs, lower, upper = histogram_bytes(ts, starts, vs, window=window, eps=eps, chunk=chunk)
    expected = one_at_a_time(ts, vs, starts, window, eps, False)
    assert blobs == [h.to_bytes() for h in expected]
    assert list(zip(lower.tolist(), upper.tolist())) == [h.bounds() for h in expected]
    now = int(ts.max()) + 5 if ts.size else 5
    _, lower, upper = histogram_bytes(ts, starts, vs, window=window, eps=eps, chunk=chunk, now=now)
    assert list(zip(lower.tolist(), upper.tolist())) == [h.bounds(now=now) for h in expected]


@pytest.mark.parametrize("exact", [False, True])
@settings(max_examples=examples(100), deadline=None)
@given(data=runs(values=values_any), window=st.sampled_from([1, 50, 3000, 2**62]), eps=eps_values,
       counts=st.booleans(), later=st.integers(0, 10**6), base=st.sampled_from([0, -2**63 + 1, 2**63 - 10**7]))
def test_histogram_bytes_compiled_is_the_numpy_path(exact, data, window, eps, counts, later, base):
    """The compiled builder (every run built, its exact form chosen where
    shorter, encoded and bounded in one pass) gives the numpy path's
    bytes and bounds, times at int64's edges included."""
    ts, vs, starts = data
    if ts.size and -2**63 < int(ts.min()) + base and int(ts.max()) + base < 2**63 - 10**6 - 1:
        ts = ts + np.int64(base)
    order = np.lexsort((ts, np.repeat(np.arange(starts.size), np.diff(np.append(starts, ts.size)))))
    ts, vs = ts[order], vs[order]
    v = None if counts else vs
    now = None if later == 0 or not ts.size else int(ts.max()) + later
    got = {}
    for name in ("auto", "numpy"):
        with engine(name):
            got[name] = histogram_bytes(ts, starts, v, window=window, eps=eps, now=now, exact=exact)
    with engine("auto"), tiny_build_room():  # every run a call of its own
        got["chunks"] = histogram_bytes(ts, starts, v, window=window, eps=eps, now=now, exact=exact)
    for name in ("auto", "chunks"):
        assert got[name][0] == got["numpy"][0]
        assert np.array_equal(got[name][1], got["numpy"][1]) and np.array_equal(got[name][2], got["numpy"][2])


@contextlib.contextmanager
def tiny_build_room():
    """The compiled builder called once per run (its output room per call
    set to one byte)."""
    before, columnar._BUILD_ROOM = columnar._BUILD_ROOM, 1
    try:
        yield
    finally:
        columnar._BUILD_ROOM = before


@given(data=st.data())
@settings(max_examples=examples(200), deadline=None)
def test_order_by_is_lexsort(data):
    """The one-key stable sort of rows by (major, minor) every builder uses
    is ``np.lexsort((minor, major))``: keys of every width (the radix
    sort's 16 bits, 32, 63) and ranges too wide for one key (lexsort)."""
    from ehist.segments import order_by

    dtype = data.draw(st.sampled_from([np.int64, np.int32, np.uint8, np.uint64, np.bool_]))
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    lo, hi = (0, 1) if info is None else (int(info.min), int(info.max))
    spread = data.draw(st.sampled_from([3, 300, 70_000, 2**31, 2**62]))
    base = data.draw(st.integers(lo, max(lo, hi - min(spread, hi - lo))))
    values = st.integers(base, min(hi, base + spread))
    n = data.draw(st.integers(0, 60))
    major = np.array(data.draw(st.lists(values, min_size=n, max_size=n)), dtype=dtype)
    minor = np.array(data.draw(st.lists(st.integers(lo, hi) if data.draw(st.booleans()) else values,
                                        min_size=n, max_size=n)), dtype=dtype)
    assert order_by(major, minor).tolist() == np.lexsort((minor, major)).tolist()


def test_order_by_refuses_rows_of_different_shapes():
    from ehist.segments import order_by

    for major, minor in ((np.arange(3), np.arange(4)), (np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int64))):
        with pytest.raises(ValueError, match="one-dimensional and of one length"):
            order_by(major, minor)


@pytest.mark.parametrize("name", ENGINES)
@given(data=st.data())
@settings(max_examples=examples(60), deadline=None)
def test_segment_helpers_against_numpy(name, data):
    """The gather, the search inside segments and the CRC-32 check that
    every codec uses: the compiled loops (eight bytes a step for the CRC)
    and numpy alone give what the plain numpy expression and zlib give."""
    from ehist import compiled
    from ehist.segments import gather, ranges, search_segments

    src = np.array(data.draw(st.lists(st.integers(0, 255), max_size=200)), dtype=np.uint8)  # spans short and long
    cuts = sorted(data.draw(st.lists(st.integers(0, src.size), max_size=12)))
    starts, ends = np.array(cuts[0::2][:len(cuts) // 2], dtype=np.int64), np.array(cuts[1::2], dtype=np.int64)
    values = np.sort(np.array(data.draw(st.lists(st.integers(-50, 50), min_size=1, max_size=40)), dtype=np.int64))
    bounds = np.unique(np.r_[0, data.draw(st.lists(st.integers(0, values.size), max_size=5)), values.size]).astype(np.int64)
    seg = data.draw(st.lists(st.integers(0, bounds.size - 2), min_size=1, max_size=8))
    lo, hi = bounds[seg], bounds[np.array(seg) + 1]
    needles = np.array([[data.draw(st.integers(int(values[a]) if a < hi_ else -60, int(values[hi_ - 1]) if hi_ > a
                                                 else 60)) for a, hi_ in zip(lo, hi)] for _ in range(3)])
    blobs = [bytes(data.draw(st.lists(st.integers(0, 255), max_size=40))) for _ in range(4)]
    blobs = [b + zlib.crc32(b).to_bytes(4, "little") if i % 2 else b + b"\0\0\0\0" for i, b in enumerate(blobs)]
    with engine(name):
        assert gather(src, starts, ends).tolist() == src[ranges(starts, ends)].tolist()
        want = np.clip(np.searchsorted(values, needles), lo[None, :], hi[None, :])
        assert search_segments(values, lo, hi, needles).tolist() == want.tolist()
        if compiled.active():
            buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
            lengths = np.array([len(b) for b in blobs])
            got = compiled.crc_matches(buf, np.r_[0, np.cumsum(lengths)[:-1]], lengths)
            assert got.tolist() == [zlib.crc32(b[:-4]) == int.from_bytes(b[-4:], "little") for b in blobs]


@pytest.mark.skipif(not ehist_compiled.AVAILABLE, reason="no numba")
@given(data=st.binary(max_size=300), cut=st.integers(0, 300))
@settings(max_examples=examples(40), deadline=None)
def test_both_compiled_checksum_loops_are_zlibs_crc32(data, cut):
    """The compiled CRC-32 of a span: by zlib's own ``crc32`` where its
    library is found (what :func:`crc_matches` runs then) and by the
    table loop (where it is not), both :func:`zlib.crc32`."""
    from ehist import compiled

    buf = np.frombuffer(b"\x07" + data, dtype=np.uint8)
    a, end = 1, 1 + min(cut, len(data))
    want = zlib.crc32(data[:end - 1])
    assert int(compiled.jit(compiled._crc_span)(buf, a, end, compiled._CRC_TABLE)) == want
    if compiled._zlib_crc32() is not None:
        assert int(compiled.jit(compiled._crc_span_zlib)(buf, a, end, compiled._CRC_TABLE)) == want


@pytest.mark.skipif(not ehist_compiled.AVAILABLE, reason="no numba")
def test_every_compilation_holds_the_compile_lock(monkeypatch):
    """compiled.jit: numba compiles (or loads from its cache) each new
    signature under the machine-wide lock, re-entered by the compilations
    it sets off; calls of a compiled signature take no lock."""
    with ehist_compiled._compile_lock("f"):  # the real one: opens, re-enters without waiting on itself, releases
        with ehist_compiled._compile_lock("f"), ehist_compiled._compile_lock("g"):
            pass
    held = []

    @contextlib.contextmanager
    def lock(name):
        held.append(name.endswith("plus_one"))
        yield

    monkeypatch.setattr(ehist_compiled, "_compile_lock", lock)

    def plus_one(x):
        return x[0] + 1

    k = ehist_compiled.kernel(plus_one)
    assert k(np.array([4])) == 5 and k(np.array([6])) == 7
    assert held == [True]
    assert k(np.array([4.5])) == 5.5  # a new signature: compiled (or loaded) under the lock again
    assert held == [True, True]


@pytest.mark.skipif(not ehist_compiled.AVAILABLE, reason="no numba")
def test_compiled_callers_compile_a_callee_once_per_kind_of_argument():
    """compiled.jit: a constant argument of a call from compiled code is
    typed by its kind (int64, bool), not its value, so that each caller's
    constants do not compile the callee again (93 specializations where 57
    differ, before, on a sketch table's first use)."""
    def add(a, b, flag):
        return a + b if flag else a - b

    inner = ehist_compiled.jit(add)

    def calls(x):
        return inner(x, 0, True) + inner(x, 1, False) + inner(x, -7, True) + inner(x, 2**62, x > 3)

    outer = ehist_compiled.kernel(calls)
    assert outer(5) == 5 + 4 - 2 + 5 + 2**62
    kinds = [tuple(str(t) for t in sig) for sig in inner.signatures]
    assert kinds == [("int64", "int64", "bool")]


# ------------------------------------------------------------ the rows form
@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(100), deadline=None)
@given(data=runs(values=values_any, max_runs=5), window=st.integers(1, 3000), eps=eps_values,
       now_after=st.integers(0, 600), query=st.integers(1, 3000), few=st.integers(1, 30))
def test_rows_form_is_exact_and_written_as_the_class_writes_it(name, data, window, eps, now_after, query, few):
    """``histogram_bytes(exact=True)`` writes a run whose window holds 1 to
    ``k`` rows in the rows form, byte for byte ``ExponentialHistogram.of_rows``;
    it reads back equal, answers every window exactly (the bounds of
    ``bounds_from_bytes`` too), and takes the buckets one batch of its rows
    builds past ``k`` rows (updates included)."""
    ts, vs, starts = data
    ends = np.append(starts[1:], ts.size)
    keep = np.concatenate([np.arange(a, min(a + few, b)) for a, b in zip(starts, ends)]
                          + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
    lengths = np.minimum(ends - starts, few)
    ts, vs, starts = ts[keep], vs[keep], np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    ends = np.append(starts[1:], ts.size)
    w = min(query, window)
    with engine(name):
        blobs, lower, upper = histogram_bytes(ts, starts, vs, window=window, eps=eps, exact=True)
        now = int(ts.max()) + now_after if ts.size else now_after
        got = bounds_from_bytes(blobs, now, w)
    for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        h = ExponentialHistogram.of_rows(window, eps, ts[a:b], vs[a:b])
        read = ExponentialHistogram.from_bytes(blobs[i])
        if h.rows is None:
            assert read.rows is None
            continue
        assert blobs[i] == h.to_bytes() and read == h and read.to_bytes() == blobs[i]
        exact = exact_sums(ts[a:b], vs[a:b], [now], w)[0]
        assert h.bounds(now, w) == (exact, exact) == (int(got[0][i]), int(got[1][i]))
        assert lower[i] == upper[i] == exact_sums(ts[a:b], vs[a:b], [int(ts[a:b].max())], window)[0]
        more = np.arange(1, h.k + 2) + int(ts[a:b].max())  # past k rows: the buckets of one batch
        if int(more[-1]) - window < int(h.rows[0][0]):  # every row still inside
            live = np.concatenate([h.rows[0], more]), np.concatenate([h.rows[1], np.ones(more.size, np.int64)])
            batch = ExponentialHistogram(window, eps).update(*live)
            assert h.copy().update(more) == batch and h.copy().update(more).rows is None


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(100), deadline=None)
@given(data=st.data(), window=st.integers(1, 500), eps=eps_values)
def test_unions_with_rows_are_the_per_group_merge(name, data, window, eps):
    """Groups of histograms in both forms (and never updated) united by
    ``union_blobs``: byte for byte ``merge_all`` of each group, which keeps
    the rows where every part does and they fit, exactly."""
    from ehist.columnar_union import union_blobs

    groups, blobs, starts = [], [], []
    for _ in range(data.draw(st.integers(1, 4))):
        starts.append(len(blobs))
        parts = []
        for _ in range(data.draw(st.integers(1, 4))):
            t = np.sort(np.array(data.draw(st.lists(st.integers(0, 600), max_size=25)), dtype=np.int64))
            v = np.array(data.draw(st.lists(st.integers(0, 5000), min_size=t.size, max_size=t.size)), dtype=np.int64)
            kind = data.draw(st.sampled_from(["rows", "rows", "buckets", "empty"]))
            h = (ExponentialHistogram(window, eps) if kind == "empty" or not t.size else
                 ExponentialHistogram.of_rows(window, eps, t, v) if kind == "rows" else
                 ExponentialHistogram(window, eps).update(t, v))
            parts.append(h)
            blobs.append(h.to_bytes())
        groups.append(parts)
    with engine(name):
        got = union_blobs(blobs, starts)
    for g, parts in enumerate(groups):
        united = ExponentialHistogram.merge_all(parts)
        assert got[g] == united.to_bytes()
        if all(p.rows is not None for p in parts if p.newest is not None) and any(p.rows is not None for p in parts):
            stamps = [p.newest for p in parts if p.newest is not None]
            rows = [(p.rows[0], p.rows[1]) for p in parts if p.rows is not None]
            t = np.concatenate([r[0] for r in rows])
            v = np.concatenate([r[1] for r in rows])
            fits = np.unique(t[t > max(stamps) - window]).size <= united.k
            assert (united.rows is not None) == fits
            if fits:
                assert united.bounds() == (int(v[t > max(stamps) - window].sum()),) * 2


@pytest.mark.parametrize("name", ENGINES)
def test_rows_form_bytes_altered_are_read_or_refused_as_the_class_does(name):
    """Every byte of rows form histograms altered (checksum made good):
    the columnar reader accepts exactly what ``from_bytes`` reads, with its
    rows, and refuses the rest (the bounds then raise from_bytes' error)."""
    from ehist.eh_rows import HistogramRows, rows_blobs

    cases = [ExponentialHistogram.of_rows(500, 0.1, [3, 9, 9, 40], [700, 3, 2, 1]),
             ExponentialHistogram.of_rows(5000, 0.1, [1000, 3000, 4000]),
             ExponentialHistogram.of_rows(50, 0.5, [7], [2**40])]
    for h in cases:
        good = h.to_bytes()
        for pos in range(len(good) - 4):
            for byte in (0, 1, 2, 0x7F, 0x80, 0xFF, good[pos] ^ 1):
                bad = bytearray(good)
                bad[pos] = byte
                bad[-4:] = zlib.crc32(bytes(bad[:-4])).to_bytes(4, "little")
                bad = bytes(bad)
                try:
                    want = ExponentialHistogram.from_bytes(bad)
                except ValueError:
                    want = None
                col = Blobs.of([bad])
                with engine(name):
                    sealed = rows_blobs(col.buf, col.starts, col.lengths)
                    ok, rows, _ = HistogramRows.read(col.buf, col.starts, col.lengths, h.window, h.eps)
                if not sealed[0] or (want is not None and (want.window, want.eps) != (h.window, h.eps)):
                    continue
                if ok[0]:
                    assert want is not None and want.rows is not None
                    t, _, v = rows.sketch(0)
                    assert t.tolist() == want.rows[0].tolist() and v.tolist() == want.rows[1].tolist()
                else:
                    assert want is None, (pos, byte)
                    with engine(name), pytest.raises(CorruptSketchError):
                        bounds_from_bytes([good, bad])
