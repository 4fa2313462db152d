"""Unions across keys in one pass: the core's lockstep union of many
groups of exponential histograms (ehist/columnar_union.py) and the
register-wise union of sliding HyperLogLogs (distinct/columnar_union.py),
byte for byte against each one's merge_all, and union_table (udaf/union.py)
byte for byte against each family's grouped ``<family>_union_agg``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import ExponentialHistogram
from ehist import columnar_union as cu
from ehist import compiled
from ehist.columnar import HistogramColumn
from ehist.errors import SumOverflowError

from .conftest import examples
from .engines import ENGINES, engine

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

def union_column(column, starts, name="auto"):
    with engine(name):
        return cu.union_column(column, starts)


@st.composite
def histogram_groups(draw):
    """Groups of histograms of one (window, eps): counts or sums, empty,
    expired, already merged, near the int64 edges."""
    window = draw(st.integers(1, 400))
    eps = draw(st.sampled_from([0.5, 0.25, 0.1, 0.05, 0.02]))
    sums = draw(st.booleans())
    base = draw(st.sampled_from([0, 10**6, INT64_MIN + 1, INT64_MAX - 3000]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def one():
        n = int(rng.integers(0, 80))
        span = int(rng.integers(1, 2000))
        ts = np.sort(rng.integers(0, span, n)) + base
        h = ExponentialHistogram(window, eps).update(ts, rng.integers(0, 40, n) if sums else None)
        if n and rng.random() < 0.3:  # merged inputs: wide buckets
            other = np.sort(rng.integers(0, span, int(rng.integers(1, 40)))) + base
            h = ExponentialHistogram.merge_all([h, ExponentialHistogram(window, eps).update(other)])
        return h

    return window, eps, [[one() for _ in range(draw(st.integers(1, 5)))] for _ in range(draw(st.integers(1, 6)))]


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(150), deadline=None)
@given(case=histogram_groups())
def test_union_column_is_merge_all_byte_for_byte(name, case):
    window, eps, groups = case
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    united = union_column(HistogramColumn.from_histograms(flat, window, eps), starts, name)
    assert len(united) == len(groups)
    for i, g in enumerate(groups):
        assert united[i].to_bytes() == ExponentialHistogram.merge_all(g).to_bytes()
    assert united.to_bytes() == [ExponentialHistogram.merge_all(g).to_bytes() for g in groups]


@settings(max_examples=examples(150), deadline=None)
@given(case=histogram_groups())
def test_union_bytes_is_merge_all_byte_for_byte(case):
    """Groups united from their bytes one group at a time (no column
    built) are merge_all's bytes; it declines (None) only what the column
    path must decide: never-updated histograms, times near int64's edges."""
    window, eps, groups = case
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    got = cu.union_bytes([h.to_bytes() for h in flat], starts)
    expected = [ExponentialHistogram.merge_all(g).to_bytes() for g in groups]
    if compiled.active() and all(h.newest is not None and abs(h.newest) < 2**60 for h in flat):
        assert got == expected
    assert got is None or got == expected


@pytest.mark.parametrize("window", [300, 2**63 - 1])
def test_union_bytes_of_sums_by_runs_is_merge_all(window):
    """Sums read as runs of equal buckets and merged by stretches: groups
    sharing timestamps across histograms (ties of hi and lo), with one
    live histogram among expired ones, buckets at the cutoff, with merged
    inputs (the bucket path), counts among them, every bucket alive (a
    window to int64's end), byte for byte merge_all."""
    rng = np.random.default_rng(23)
    base = -10**6 if window > 2**62 else 0
    groups = []
    for g in range(120):
        kind = g % 6
        hists = []
        for p in range(int(rng.integers(2, 6))):
            n = int(rng.integers(1, 30))
            ts = np.sort(rng.choice([3, 5, 8, 40, 90, 91, 200], n) if kind == 1 else rng.integers(0, 250, n))
            if kind == 2 and p:  # long expired beside the live one
                ts = ts - 5000
            h = ExponentialHistogram(window, 0.05).update(ts + base, None if kind == 3 else rng.integers(1, 3000, n))
            if kind == 4 and p == 1:
                h = ExponentialHistogram.merge_all([h, ExponentialHistogram(window, 0.05).update(ts[:3] + base)])
            hists.append(h)
        if kind == 5 and window < 2**62:  # buckets at the group's cutoff exactly (expired) and one unit after it
            cut = max(h.newest for h in hists) - window
            hists.append(ExponentialHistogram(window, 0.05).update([cut, cut, cut + 1], [700, 20, 9]))
        groups.append(hists)
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    got = cu.union_bytes([h.to_bytes() for h in flat], starts)
    assert got is None if not compiled.active() else got == [ExponentialHistogram.merge_all(g).to_bytes()
                                                              for g in groups]


def test_a_group_of_one_is_its_bytes_once_the_decoder_takes_them():
    """A key with one histogram (a source seen at one site) keeps its bytes
    (merge_all leaves it as it is; no bucket written): every payload byte
    altered in turn and the checksum made good again, the union is
    merge_all's bytes where ``from_bytes`` takes the blob and None (the
    column path then raises) where it refuses; a version-1 blob is written
    anew in the current format."""
    from pathlib import Path

    from ehist import CorruptSketchError
    from ehist import eh_layout as L

    rng = np.random.default_rng(5)
    counts = ExponentialHistogram(900, 0.1).update(np.sort(rng.integers(0, 800, 40)))
    sums = ExponentialHistogram(900, 0.1).update(np.sort(rng.integers(0, 800, 15)) * 1000, rng.integers(1, 90, 15))
    merged = ExponentialHistogram.merge_all([counts, ExponentialHistogram(900, 0.1).update([5, 5, 700])])
    golden = Path(__file__).parent / "golden"
    for h in (counts, sums, merged):
        blob = h.to_bytes()
        if not compiled.active():
            assert cu.union_bytes([blob], [0]) is None
            return
        assert cu.union_bytes([blob, blob], [0, 1]) == [blob, blob]
        for at in range(L.HEAD_BYTES, len(blob) - 4):
            for byte in (0, 1, blob[at] ^ 1, 0x80):
                body = bytearray(blob[:-4])
                body[at] = byte
                altered = bytes(body) + int.to_bytes(__import__("zlib").crc32(bytes(body)), 4, "little")
                try:
                    expected = [ExponentialHistogram.merge_all([ExponentialHistogram.from_bytes(altered)]).to_bytes()]
                except CorruptSketchError:
                    expected = None
                got = cu.union_bytes([altered], [0])
                assert got == expected or (got is None and expected is not None), (at, byte)
    old = (golden / "eh_v1_sums.bin").read_bytes()
    assert cu.union_bytes([old], [0]) == [ExponentialHistogram.from_bytes(old).to_bytes()] != [old]


def test_union_bytes_declines_what_the_column_path_decides():
    """Bytes the checks refuse, mixed parameters, nulls and totals near
    int64 are left to the column path (None), which raises or unites."""
    rng = np.random.default_rng(2)
    parts = [ExponentialHistogram(500, 0.1).update(np.sort(rng.integers(0, 900, 20)), rng.integers(0, 50, 20))
             for _ in range(3)]
    good = [h.to_bytes() for h in parts]
    if not compiled.active():
        assert cu.union_bytes(good, [0]) is None
        return
    assert cu.union_bytes(good, [0, 2]) == [ExponentialHistogram.merge_all(parts[:2]).to_bytes(), good[2]]
    bad = good[:2] + [good[2][:-5] + bytes([good[2][-5] ^ 1]) + good[2][-4:]]  # a checksum that fails
    other = good[:2] + [ExponentialHistogram(600, 0.1).update([1, 2]).to_bytes()]
    heavy = good[:2] + [ExponentialHistogram(500, 0.1).update([950, 960], [2**59, 2**59]).to_bytes()]
    for blobs in (bad, other, good[:2] + [None], heavy):
        assert cu.union_bytes(blobs, [0]) is None
    assert cu.union_bytes([], [0]) is None


@pytest.mark.parametrize("name", ENGINES)
def test_union_column_of_many_keys_is_each_keys_merge_all(name):
    """Many keys at once (the lockstep runs ~100 steps over thousands of
    groups), a key's histograms of different lengths and ages."""
    rng = np.random.default_rng(3)
    window, keys = 10_000, 2_000
    hists = []
    for _ in range(keys * 3):
        n = int(rng.poisson(rng.choice([5, 60, 400])))
        hists.append(ExponentialHistogram(window, 0.05).update(np.sort(rng.integers(0, 30_000, n))))
    sizes = rng.integers(1, 5, keys)
    sizes[-1] += keys * 3 - sizes.sum() if sizes.sum() < keys * 3 else 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    starts = starts[starts < len(hists)]
    united = union_column(HistogramColumn.from_histograms(hists), starts, name).to_bytes()
    ends = np.append(starts[1:], len(hists))
    for i in rng.choice(len(starts), 300, replace=False):
        assert united[i] == ExponentialHistogram.merge_all(hists[starts[i]:ends[i]]).to_bytes()


@pytest.mark.parametrize("name", ENGINES)
def test_unions_either_side_of_the_few_bucket_sort_are_merge_all(name):
    """Unions of up to compiled._FEW buckets are ordered by insertion, larger
    ones by merging runs: groups of every size from 2 to 3 * _FEW buckets,
    their histograms sharing timestamps (ties of hi and lo across
    histograms, which merge_all breaks by position), byte for byte."""
    rng = np.random.default_rng(17)
    groups = []
    for total in range(2, 3 * compiled._FEW + 1):
        hists, left = [], total
        while left:
            n = int(rng.integers(1, left + 1))  # a count's buckets: one per row
            ts = np.sort(rng.choice([3, 5, 8, 8, 9], n))  # a handful of times: ties across histograms
            hists.append(ExponentialHistogram(100, 0.2).update(ts))
            left -= n
        groups.append(hists)
    for _ in range(20):  # sums: several buckets of one timestamp per row
        groups.append([ExponentialHistogram(100, 0.2).update(np.sort(rng.choice([3, 5, 8], 3)), rng.integers(1, 40, 3))
                       for _ in range(int(rng.integers(2, 5)))])
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    united = union_column(HistogramColumn.from_histograms(flat), starts, name).to_bytes()
    assert united == [ExponentialHistogram.merge_all(g).to_bytes() for g in groups]


@pytest.mark.parametrize("name", ENGINES)
def test_union_column_of_times_within_a_window_of_the_int64_minimum(name):
    """A group whose cutoff lies below int64 (every bucket alive) is
    compressed on its own by ehist.compress beside groups in lockstep, or
    by the compiled loop as any other."""
    rng = np.random.default_rng(5)
    edge = [ExponentialHistogram(400, 0.1).update(np.sort(rng.integers(0, 50, 30)) + INT64_MIN + 1) for _ in range(3)]
    usual = [ExponentialHistogram(400, 0.1).update(np.sort(rng.integers(0, 900, 60))) for _ in range(2)]
    united = union_column(HistogramColumn.from_histograms(edge + usual), [0, 3], name).to_bytes()
    assert united == [ExponentialHistogram.merge_all(edge).to_bytes(), ExponentialHistogram.merge_all(usual).to_bytes()]


@pytest.mark.parametrize("name", ENGINES)
def test_union_column_of_totals_near_int64(name):
    """Groups whose totals pass 2**60 (the compiled loop leaves them to
    ehist.compress) beside ordinary ones, in one column."""
    rng = np.random.default_rng(11)
    groups = []
    for g in range(8):
        heavy = g % 3 == 1
        groups.append([ExponentialHistogram(500, 0.1).update(
            np.sort(rng.integers(0, 900, 20)), rng.integers(2**56, 2**57, 20) if heavy else rng.integers(0, 50, 20))
            for _ in range(int(rng.integers(2, 4)))])
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    assert max(sum(h.total for h in g) for g in groups) >= 2**60
    united = union_column(HistogramColumn.from_histograms(flat), starts, name).to_bytes()
    assert united == [ExponentialHistogram.merge_all(g).to_bytes() for g in groups]


def test_union_column_refuses_a_total_past_int64_and_bad_groups():
    big = ExponentialHistogram(10, 0.5).update([1], [2**62])
    col = HistogramColumn.from_histograms([big, big, big, ExponentialHistogram(10, 0.5).update([1])])
    with pytest.raises(SumOverflowError, match="overflow int64"):
        union_column(col, [0, 3])
    with pytest.raises(SumOverflowError, match="overflow int64"):
        ExponentialHistogram.merge_all([big, big, big])  # the same refusal
    for bad in ([1, 2], [0, 0], [0, 5], [[0]]):
        with pytest.raises(ValueError, match="group_starts"):
            union_column(col, bad)
    assert len(union_column(HistogramColumn.from_histograms([], 10, 0.5), [])) == 0


@pytest.mark.parametrize("name", ENGINES)
@settings(max_examples=examples(100), deadline=None)
@given(st.integers(1, 3000), st.sampled_from([4, 6, 8]), st.integers(0, 2**32 - 1))
def test_hll_union_bytes_is_merge_all_byte_for_byte(name, window, precision, seed):
    """Sliding HyperLogLogs (distinct/columnar_union.py): empty sketches,
    groups of one, times at the int64 edges, sketches of different ages,
    each group in either order."""
    from distinct import SlidingHyperLogLog
    from distinct.columnar_union import union_bytes

    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(int(rng.integers(1, 6))):
        group = []
        for _ in range(int(rng.integers(1, 5))):
            n = int(rng.integers(0, 60))
            base = int(rng.choice([0, INT64_MIN + 1, 2**62]))
            ts = np.sort(rng.integers(0, int(rng.integers(1, 5000)), n)) + base
            group.append(SlidingHyperLogLog(window, precision, seed=3).update(ts, rng.integers(0, 300, n)))
        groups.append(group)
    flat = [h for g in groups for h in g]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    with engine(name):
        out = union_bytes(flat, starts)
        # the order within a group does not matter (merge_groups reads the bytes where they are)
        backwards = union_bytes([h for g in groups for h in reversed(g)], starts)
    assert out == [SlidingHyperLogLog.merge_all(g).to_bytes() for g in groups] == backwards


# --------------------------------------------------------------- Spark
@pytest.fixture(scope="module")
def sites(spark):
    """A sketch table per (site, src) with a spec of every family."""
    pytest.importorskip("pandas")
    import pandas as pd

    from udaf import (Count, Distinct, DistinctFM, Frequencies, HeavyHitters, LpNorm, Quantile, Sum,
                      sketch_table)

    rng = np.random.default_rng(12)
    n = 4000
    pdf = pd.DataFrame({"site": rng.integers(0, 4, n), "src": rng.zipf(1.4, n) % 24,
                        "ts": rng.integers(0, 50_000, n), "b": rng.integers(0, 1500, n),
                        "dst": rng.integers(0, 400, n)})
    pdf.loc[rng.random(n) < 0.1, "b"] = None
    pdf["b"] = pdf["b"].astype("Int64")
    sdf = spark.createDataFrame(pdf).repartition(3)
    w = 20_000
    specs = dict(c=Count(w, eps=0.05), s=Sum("b", w, eps=0.05), d=Distinct("dst", w, precision=8),
                 fm=DistinctFM("dst", w, num_bitmaps=16), l2=LpNorm("dst", w, p=2.0, eps=0.5, delta=0.2),
                 f=Frequencies("dst", w, eps=0.1, delta=0.1), hh=HeavyHitters("dst", w, phi=0.2),
                 q=Quantile("b", w, q=0.9))
    return sketch_table(sdf, ["site", "src"], "ts", **specs).cache(), list(specs)


UNION_AGG = {"c": "eh", "s": "eh", "d": "sliding_hll", "fm": "sliding_fm", "l2": "sliding_lp", "f": "ecm",
             "hh": "sliding_hh", "q": "sliding_quantile"}


def test_union_table_equals_each_familys_union_agg(sites):
    """Every family: union_table's row per src holds the bytes that
    ``<family>_union_agg`` gives in groupBy(src) (both sort a key's
    sketches by their bytes before merging)."""
    from udaf import functions as U
    from udaf import union_table

    table, names = sites
    united = {r.src: r for r in union_table(table, "src").collect()}
    grouped = {r.src: r for r in table.groupBy("src").agg(
        *[getattr(U, f"{UNION_AGG[c]}_union_agg")(c).alias(c) for c in names]).collect()}
    assert united.keys() == grouped.keys() and len(united) > 15
    for src, row in united.items():
        for c in names:
            assert bytes(row[c]) == bytes(grouped[src][c]), (src, c)


@pytest.mark.parametrize("slice_", [1, 5, 64])
def test_unions_in_slices_are_the_unions_at_once(sites, monkeypatch, slice_):
    """``merged`` hands whole groups to ``merge_groups`` about
    ``UNION_SLICE`` sketches at a time: every family's unions are the bytes
    of one call over the batch (groups larger than a slice, nulls, a group
    of nulls only)."""
    from udaf import union as un
    from udaf.family import spec_for_bytes

    table, names = sites
    rows = sorted(table.collect(), key=lambda r: (r.src, r.site))
    src = np.array([r.src for r in rows])
    starts = np.append(np.flatnonzero(np.r_[True, src[1:] != src[:-1]]), len(rows))  # a group of nulls after
    for c in names:
        blobs = [None if r[c] is None or i % 7 == 3 else bytes(r[c]) for i, r in enumerate(rows)] + [None, None]
        cls = spec_for_bytes(next(b for b in blobs if b is not None))
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))
        kept = [i for i, b in enumerate(blobs) if b is not None]
        firsts = np.flatnonzero(np.r_[True, np.diff(group[kept]) != 0])
        whole = [None] * starts.size  # one call over the batch
        for g, b in zip(group[kept][firsts].tolist(), cls.merge_groups([blobs[i] for i in kept], firsts)):
            whole[g] = b
        monkeypatch.setattr(un, "UNION_SLICE", slice_)
        assert un.merged(cls, blobs, starts) == whole, c
        assert whole[-1] is None and sum(b is not None for b in whole) > 15


def test_union_table_chooses_columns_keys_and_nulls(spark, sites):
    from pyspark.sql import functions as F

    from udaf import functions as U
    from udaf import union_table

    table, _ = sites
    # some columns; a key of two columns; no key at all
    two = union_table(table, ["src", "site"], "c", "d")
    assert two.columns == ["src", "site", "c", "d"] and two.count() == table.count()
    everything = union_table(table.select("c", "d"), [])
    assert everything.columns == ["c", "d"] and everything.count() == 1
    whole = table.agg(U.eh_union_agg("c").alias("c")).collect()[0]
    assert bytes(everything.collect()[0].c) == bytes(whole.c)
    # as Spark's global aggregates: an empty table unites to one row of nulls, an empty grouping to no rows
    assert [tuple(r) for r in union_table(table.limit(0).select("c", "d"), []).collect()] == [(None, None)]
    assert union_table(table.limit(0), "src", "c").count() == 0
    # null sketches are skipped; a key with none gets null
    holes = table.withColumn("c", F.when(F.col("site") == 0, F.lit(None)).otherwise(F.col("c")))
    holes = holes.withColumn("d", F.when(F.col("src") == 1, F.lit(None).cast("binary")).otherwise(F.col("d")))
    got = {r.src: r for r in union_table(holes, "src", "c", "d").collect()}
    want = {r.src: r for r in holes.groupBy("src").agg(U.eh_union_agg("c").alias("c"),
                                                       U.sliding_hll_union_agg("d").alias("d")).collect()}
    assert got[1].d is None and want[1].d is None
    for src, row in got.items():
        assert (row.c is None and want[src].c is None) or bytes(row.c) == bytes(want[src].c)


def test_union_table_refuses_what_it_cannot_unite(spark, sites):
    from pyspark.sql import functions as F

    from ehist.errors import InvalidInputError
    from udaf import union_table
    from udaf.unwrap import errors

    table, _ = sites
    with pytest.raises(ValueError, match="column 'nope' is not in the DataFrame"):
        union_table(table, "nope")
    with pytest.raises(TypeError, match="union_table needs binary sketch columns.*column site is bigint"):
        union_table(table, "src", "site")
    with pytest.raises(ValueError, match="found no binary sketch column"):
        union_table(table.select("src", "site"), "src")
    mixed = table.withColumn("c", F.when(F.col("site") == 0, F.col("d")).otherwise(F.col("c")))
    with pytest.raises(InvalidInputError, match="column c holds <.* sketches>: union_table unites one family"):
        with errors():
            union_table(mixed, "src", "c").collect()


@pytest.mark.skipif(not __import__("ehist").compiled.AVAILABLE, reason="no numba")
def test_compiled_loops_refuse_bad_input():
    """Compiled code does not check its indices: the public wrappers do,
    before any loop runs."""
    from distinct.compiled import decode_entries
    from ehist import compiled

    from quantiles.compiled import key_varints

    z = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="of one length"):
        compiled.compress_groups(z, z[:3], z, [0, 4], [0], 2)
    with pytest.raises(ValueError, match="strictly ascending"):
        key_varints([1, 5, 5], [0, 3])
    with pytest.raises(ValueError, match="offsets must run from 0 to 3"):
        key_varints([1, 5, 6], [0, 4])
    assert key_varints([7, 2, 3], [0, 0, 1, 3])[0].tolist() == [0, 1, 14, 2, 4, 0]  # a key may fall between sketches
    with pytest.raises(ValueError, match="group_starts must run from 0 to 4"):
        compiled.compress_groups(z, z, z, [0, 5], [0], 2)
    with pytest.raises(ValueError, match="one value per group"):
        compiled.compress_groups(z, z, z, [0, 2, 4], [0], 2)
    with pytest.raises(ValueError, match="k must be at least 1"):
        compiled.compress_groups(z, z, z, [0, 4], [0], 0)
    with pytest.raises(ValueError, match="spans must lie in the buffer of 8 bytes"):
        compiled.decode_histograms(np.zeros(8, dtype=np.uint8), [0], [9], [1], [True], [5], 10, 5)
    with pytest.raises(ValueError, match="flags must have one value per blob"):
        compiled.decode_histograms(np.zeros(8, dtype=np.uint8), [0], [8], [1, 1], [True], [5], 10, 5)
    with pytest.raises(ValueError, match="4 checksum bytes"):
        compiled.crc_matches(np.zeros(8, dtype=np.uint8), [0], [3])
    with pytest.raises(ValueError, match="precisions must be in"):
        decode_entries(np.zeros(8, dtype=np.uint8), [0], [8], [False], [True], [5], [10], [3])
    from distinct.compiled import future_maxima

    with pytest.raises(ValueError, match="group_starts must run from 0 to 4"):
        future_maxima([0, 3], z, z, z, [0], 10, [False])
    with pytest.raises(ValueError, match="ranks must be in"):
        future_maxima([0, 4], z, z, z + 128, [0], 10, [False])
    with pytest.raises(ValueError, match="one value per group"):
        future_maxima([0, 4], z, z, z, [0, 1], 10, [False])
    from distinct.compiled import encode_payloads

    b = np.zeros(8, dtype=np.uint8)
    with pytest.raises(ValueError, match="spans must lie in the buffer of 8 bytes"):
        compiled.read_keyed(b, [0], [9], 10, 3, [5], 10, 5)
    with pytest.raises(ValueError, match="window and l must be at least 1"):
        compiled.read_keyed(b, [0], [8], 10, 3, [5], 10, 0)
    with pytest.raises(ValueError, match="spans must lie in the buffer of 8 bytes"):
        compiled.read_keyed_bounds(b, [0], [9], 10, 3, [5], 10, 5, [0])
    with pytest.raises(ValueError, match="one keyed column"):
        compiled.keyed_union(z, [0, 1, 2, 3], z, z, z, z.astype(bool), [0, 4], [0, 1], [5], 10, 2)
    with pytest.raises(ValueError, match="into sketches and groups"):
        compiled.keyed_union(z, [0, 1, 2, 3, 4], z, z, z, z.astype(bool), [0, 4], [0, 2], [5], 10, 2)
    with pytest.raises(ValueError, match="one run per sketch"):
        compiled.keyed_payloads(z.astype(np.uint64), [0, 3], z, [0, 4], z, z, z, [0, 1, 2, 3, 4], z, z, z, [True])
    with pytest.raises(ValueError, match="exponents must lie in"):
        compiled.keyed_payloads(z[:0], [0, 0], z, [0, 4], z + 63, z, z, [0, 1, 2, 3, 4], z, z, z, [True])
    with pytest.raises(ValueError, match="one run per sketch"):
        encode_payloads([0, 3], z, z, z, [True])
    with pytest.raises(ValueError, match="ranks must fit a byte"):
        encode_payloads([0, 4], z, z + 256, z, [True])
    from frequencies.compiled import walk

    g1 = (np.zeros((1, 2), dtype=np.int64), np.ones(1), np.array([4, 8]), np.uint64(1), np.zeros(2, dtype=np.uint64))
    with pytest.raises(ValueError, match="bounds must run within the 4 keys"):
        walk(z, z, z, [0, 2, 5], *g1, 3, 6)
    with pytest.raises(ValueError, match="size must be width times the rows"):
        walk(z, z, z, [0, 2, 4], *g1, 3, 5)
    with pytest.raises(ValueError, match="at most 16 bits a level"):
        walk(z, z, z, [0, 2, 4], g1[0], g1[1], np.array([4, 30]), *g1[3:], 3, 6)
    from distinct.compiled import window_rank_counts

    one = ([False], [True], [5], [10])
    with pytest.raises(ValueError, match="precision must be in"):
        window_rank_counts(np.zeros(8, dtype=np.uint8), [0], [8], *one, 3, [0, 1], [5], 10)
    with pytest.raises(ValueError, match="group_starts must run from 0 to 1"):
        window_rank_counts(np.zeros(8, dtype=np.uint8), [0], [8], *one, 4, [0, 2], [5], 10)
    with pytest.raises(ValueError, match="query_window must be at least 1"):
        window_rank_counts(np.zeros(8, dtype=np.uint8), [0], [8], *one, 4, [0, 1], [5], 0)
    with pytest.raises(ValueError, match="every span must lie inside the 4 elements"):
        compiled.gather(np.zeros(4, dtype=np.uint8), [2], [5])
    with pytest.raises(ValueError, match="every segment must lie inside the 4 values"):
        compiled.search_segments(z, [0], [5], np.zeros((2, 1)))
    with pytest.raises(ValueError, match="one bound per needle column"):
        compiled.search_segments(z, [0, 1], [2, 2], np.zeros((2, 1)))
    out, lengths = compiled.encode_varints(np.array([0, 127, 128, 2**64 - 1], dtype=np.uint64))
    from ehist.serialization import encode_varints

    assert out.tobytes() == encode_varints(np.array([0, 127, 128, 2**64 - 1], dtype=np.uint64))
    assert lengths.tolist() == [1, 1, 2, 10]


@pytest.mark.parametrize("name", ENGINES)
def test_union_column_of_times_at_the_int64_maximum(name):
    """A bucket at the largest int64 time (the compiled cut merge once took
    it for its end-of-list sentinel and looped)."""
    parts = [ExponentialHistogram(100, 0.5).update(np.array([INT64_MAX - 5, INT64_MAX - p, INT64_MAX])) for p in (1, 2)]
    united = union_column(HistogramColumn.from_histograms(parts), [0], name)
    assert united[0] == ExponentialHistogram.merge_all(parts)


def test_union_agg_in_python_is_one_pass_beside_builtins_and_equals_sql(spark, sites):
    """``<family>_union_agg`` in Python is ``collect_list`` under an Arrow
    UDF (every group of a batch united at once): the bytes of the SQL form
    (a grouped UDF, one call per group) for every family, and it shares one
    ``agg()`` with Spark's own aggregates, which a grouped UDF cannot."""
    from pyspark.sql import functions as F

    from udaf import functions as U

    table, names = sites
    U.register(spark)
    table.createOrReplaceTempView("union_agg_sites")
    # a grouped UDF (the SQL union aggregate) cannot share a SELECT with collect_list: two statements
    sql = {r.src: r for r in spark.sql("SELECT src, " + ", ".join(f"{UNION_AGG[c]}_union_agg({c}) AS {c}"
                                                                    for c in names)
                                       + " FROM union_agg_sites GROUP BY src").collect()}
    arrays = {r.src: r for r in spark.sql("SELECT src, " + ", ".join(f"{UNION_AGG[c]}_union(collect_list({c})) AS {c}"
                                                                       for c in names)
                                          + " FROM union_agg_sites GROUP BY src").collect()}
    python = {r.src: r for r in table.groupBy("src").agg(
        F.count(F.lit(1)).alias("rows"), F.max("site").alias("site"),
        *[getattr(U, f"{UNION_AGG[c]}_union_agg")(c).alias(c) for c in names]).collect()}
    rows = {r.src: r["count"] for r in table.groupBy("src").count().collect()}
    assert python.keys() == sql.keys() == rows.keys()
    for src, row in python.items():
        assert row.rows == rows[src]
        for c in names:
            assert bytes(row[c]) == bytes(sql[src][c]) == bytes(arrays[src][c]), (src, c)
    # the name Spark would print for the call
    assert table.agg(U.eh_union_agg("c")).columns == ["eh_union_agg(c)"]


def test_union_of_arrays_and_of_one_sketch_per_row(spark, sites):
    """``<family>_union`` takes an array of sketches per row (nulls and
    empty arrays give null) or a binary column (each row's sketch, as
    ``merge_all`` of it alone); other columns and other families' bytes are
    refused naming the column."""
    from pyspark.errors import PythonException
    from pyspark.sql import functions as F

    from ehist import ExponentialHistogram
    from udaf import functions as U

    table, _ = sites
    rows = table.where(F.col("src") < 3).select(
        "c", U.eh_union("c").alias("one"), U.eh_union(F.array("c", "c")).alias("twice"),
        U.eh_union(F.array(F.lit(None).cast("binary"), "c")).alias("with_null"),
        U.eh_union(F.array().cast("array<binary>")).alias("empty")).collect()
    assert rows
    for r in rows:
        alone = ExponentialHistogram.merge_all([ExponentialHistogram.from_bytes(bytes(r.c))]).to_bytes()
        twice = ExponentialHistogram.merge_all([ExponentialHistogram.from_bytes(bytes(r.c))] * 2).to_bytes()
        assert bytes(r.one) == alone == bytes(r.with_null) and bytes(r.twice) == twice and r.empty is None
    with pytest.raises(PythonException, match="column site: eh_union needs a binary sketch column"):
        table.select(U.eh_union("site")).collect()
    with pytest.raises(PythonException, match="column d holds <a SlidingHyperLogLog sketch>: eh_union needs"):
        table.select(U.eh_union("d")).collect()


def test_union_table_groups_keys_as_spark_does(spark, sites):
    """Keys are Spark's groups: NaN with NaN, -0.0 with 0.0, null with
    null, and struct keys."""
    from pyspark.sql import functions as F

    from udaf import functions as U
    from udaf import union_table

    table, _ = sites
    odd = table.withColumn("f", F.when(F.col("src") == 1, F.lit(float("nan")))
                           .when(F.col("src") == 2, F.when(F.col("site") % 2 == 0, F.lit(-0.0)).otherwise(F.lit(0.0)))
                           .when(F.col("src") == 3, F.lit(None).cast("double"))
                           .otherwise(F.col("src").cast("double")))
    odd = odd.withColumn("s", F.struct(F.col("f"), (F.col("src") % 3).alias("m")))
    for key in ("f", "s"):
        got = {repr(r[key]): bytes(r.c) for r in union_table(odd, key, "c").collect()}
        want = {repr(r[key]): bytes(r.c) for r in odd.groupBy(key).agg(U.eh_union_agg("c").alias("c")).collect()}
        assert got == want and len(got) == odd.select(key).distinct().count()


def test_answers_of_python_parameters_chain_after_the_union(spark, sites):
    """A scalar function's parameters given as Python values travel with
    its UDF: the answers are those of the same parameters as literal
    columns (integer times, windows, a float, an item, a null; a datetime
    and a date below), the column is named as Spark names the literal
    call, and with the sketch its only column Spark chains it after
    ``union_table``'s or ``*_union_agg``'s UDF: one Python pass unites and
    answers."""
    import datetime as dt

    from pyspark.sql import functions as F

    from udaf import union_table
    from udaf import functions as U

    table, _ = sites
    now, window = 60_000, 10_000  # after every row
    # a call of each kind of parameter bound: times, windows, an item, a float, a null
    calls = [(U.eh_sketch_bounds, "s", (now, window)), (U.ecm_sketch_frequency, "f", (7, now, window)),
             (U.sliding_quantile_sketch_quantile, "q", (0.5, None, window))]

    def passes(df):  # the Python passes of the query's plan
        return df._jdf.queryExecution().executedPlan().toString().count("ArrowEvalPython")

    united = union_table(table, "src", *[c for _, c, _ in calls])
    bound = united.select("src", *[fn(c, *args).alias(c) for fn, c, args in calls])
    literal = united.select("src", *[fn(c, *map(F.lit, args)).alias(c) for fn, c, args in calls])
    assert passes(bound) == passes(literal) - 1  # the plans before they run (AQE prints two after)
    assert sorted(map(repr, bound.collect())) == sorted(map(repr, literal.collect()))  # NaN: equal
    unite = table.groupBy("src").agg(U.eh_union_agg("c").alias("c"))
    agg = unite.select(U.eh_sketch_estimate("c", now, window))
    assert agg.columns == ["eh_sketch_estimate(c, 60000, 10000)"]
    assert passes(agg) == passes(unite.select(U.eh_sketch_estimate("c", F.lit(now), window))) - 1
    # on the driver: a sketch is a column, a required item is not None
    with pytest.raises(TypeError, match="sketch must be a column name or a Column, got int"):
        U.eh_sketch_estimate(5, now)
    with pytest.raises(TypeError, match="item must be a column name, a Column or a value, got None"):
        U.ecm_sketch_frequency("f", None)
    with pytest.raises(TypeError, match=r"item must be a column name or a Column or a value \(bool"):
        U.ecm_sketch_frequency("f", [7])
    # times as Python datetimes and dates: as F.lit gives them to the UDF (sketches of microseconds and days)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    us = np.sort(np.random.default_rng(3).integers(0, 2 * 86_400, 300)) * 10**6 + int(start.timestamp()) * 10**6
    micros = ExponentialHistogram(86_400 * 10**6, 0.01).update(us).to_bytes()
    days = ExponentialHistogram(3, 0.01).update(us // (86_400 * 10**6)).to_bytes()
    sk = spark.createDataFrame([(micros, days)], "h binary, d binary")
    at, day = dt.datetime(2026, 1, 3), dt.date(2026, 1, 2)  # naive: the driver's time zone, as F.lit reads it
    at = at.replace(tzinfo=dt.timezone.utc).astimezone().replace(tzinfo=None)  # the same instant as UTC midnight
    got = sk.select(U.eh_sketch_estimate("h", at, "2 hours"), U.eh_sketch_estimate("h", F.lit(at), "2 hours"),
                    U.eh_sketch_estimate("d", day, "1 day"), U.eh_sketch_estimate("d", F.lit(day), "1 day")).collect()
    assert all(r[0] == r[1] > 0 and r[2] == r[3] > 0 for r in got), got
