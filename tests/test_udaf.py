"""udaf.functions on a local SparkSession, against exact answers."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from pyspark.errors import PythonException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from ehist import ExponentialHistogram  # noqa: E402
from lp_norms import SlidingLpNorm  # noqa: E402
from udaf import functions as U  # noqa: E402
from tests.conftest import examples  # noqa: E402

pytestmark = pytest.mark.spark
KEYS = 5


@pytest.fixture(scope="module")
def events():
    """Per-key streams: integral timestamps, byte values with nulls, items."""
    rng = np.random.default_rng(17)
    n = 20_000
    key = rng.integers(0, KEYS, n)
    ts = np.sort(rng.integers(0, 200_000, n))
    value = pd.array(rng.integers(0, 1500, n), dtype="Int64")
    value[rng.random(n) < 0.05] = pd.NA  # nulls are skipped
    item = rng.zipf(1.3, n) % 3000
    return pd.DataFrame({"k": key, "ts": ts, "bytes": value, "dst": item})


@pytest.fixture(scope="module")
def df(spark, events):
    return spark.createDataFrame(events).repartition(3)


def exact_by_key(events, window, now=None):
    out = {}
    for k, g in events.groupby("k"):
        n = g.ts.max() if now is None else now
        m = (g.ts > n - window) & (g.ts <= n)
        out[k] = {
            "count": int(m.sum()),
            "sum": int(g.bytes[m].fillna(0).sum()),
            "distinct": int(g.dst[m].nunique()),
            "l2": float(np.sqrt((g[m].groupby("dst").bytes.sum() ** 2).sum())),
        }
    return out


def test_one_step_aggregates_match_exact(df, events):
    window, eps = 50_000, 0.02
    rows = (
        df.groupBy("k")
        .agg(
            U.sliding_count("ts", window=window, eps=eps).alias("count"),
            U.sliding_sum("ts", "bytes", window=window, eps=eps).alias("sum"),
            U.sliding_distinct("ts", "dst", window=window, precision=12).alias("distinct"),
            U.sliding_lp_norm("ts", "dst", "bytes", p=2.0, window=window, eps=0.1, delta=0.05).alias("l2"),
        )
        .collect()
    )
    exact = exact_by_key(events, window)
    low, high = SlidingLpNorm(2.0, window, 0.1, 0.05).guarantee()
    assert len(rows) == KEYS
    for r in rows:
        e = exact[r.k]
        assert abs(r["count"] - e["count"]) <= eps * e["count"]
        assert abs(r["sum"] - e["sum"]) <= eps * e["sum"]
        assert abs(r["distinct"] / e["distinct"] - 1) <= 5 * 1.04 / 64
        assert low * e["l2"] <= r["l2"] <= high * e["l2"]


def test_sketch_merge_estimate_bounds(df, events):
    """Sketches per (key, partition) rolled up per key: the EH guarantee holds."""
    window, eps = 50_000, 0.05
    parts = df.withColumn("part", F.spark_partition_id())
    partial = parts.groupBy("k", "part").agg(
        U.eh_sketch_agg("ts", window=window, eps=eps, value="bytes").alias("eh"),
        U.sliding_hll_sketch_agg("ts", "dst", window=window, precision=11).alias("hll"),
        U.sliding_fm_sketch_agg("ts", "dst", window=window, num_bitmaps=256).alias("fm"),
        U.sliding_lp_sketch_agg("ts", "dst", window=window, p=1.0, eps=0.1, value="bytes").alias("lp"),
    )
    rolled = partial.groupBy("k").agg(
        U.eh_union_agg("eh").alias("eh"), U.sliding_hll_union_agg("hll").alias("hll"),
        U.sliding_fm_union_agg("fm").alias("fm"), U.sliding_lp_union_agg("lp").alias("lp"),
    )
    out = rolled.select(
        "k", "eh", U.eh_sketch_estimate("eh").alias("est"), U.eh_sketch_bounds("eh").alias("b"),
        U.sliding_hll_sketch_estimate("hll").alias("hll_est"),
        U.sliding_fm_sketch_estimate("fm").alias("fm_est"), U.sliding_lp_sketch_estimate("lp").alias("l1"),
    ).collect()
    exact = exact_by_key(events, window)
    for r in out:
        e = exact[r.k]
        assert r.b.lower <= e["sum"] <= r.b.upper
        assert abs(r.est - e["sum"]) <= eps * e["sum"]
        assert abs(r.hll_est / e["distinct"] - 1) <= 5 * 1.04 / np.sqrt(2048)
        assert abs(r.fm_est / e["distinct"] - 1) <= 5 * 0.78 / 16
        # the sketch is the plain ehist format
        h = ExponentialHistogram.from_bytes(r.eh)
        assert h.estimate() == r.est
        assert r.l1 > 0


def test_estimate_with_now_column_and_shorter_window(df, events):
    window = 50_000
    # Spark does not mix pandas aggregate UDFs with built-in aggregates in
    # one agg(): aggregate separately and join
    sk = df.groupBy("k").agg(U.eh_sketch_agg("ts", window=window, eps=0.05).alias("s"))
    newest = df.groupBy("k").agg(F.max("ts").alias("newest"))
    later = sk.join(newest, "k").withColumn("now", F.col("newest") + 10_000)
    rows = later.select("k", "now", U.eh_sketch_estimate("s", now=F.col("now"), window=20_000).alias("e")).collect()
    for r in rows:
        g = events[events.k == r.k]
        exact = int(((g.ts > r.now - 20_000) & (g.ts <= r.now)).sum())
        assert abs(r.e - exact) <= 0.05 * exact


def test_estimators_equal_each_sketch_read_in_python(spark):
    """eh_estimate / eh_bounds answer a whole batch at once: the answers are
    each sketch's own, for ordered and merged sketches, nulls, a batch that
    mixes eps, a literal now and a now column."""
    rng = np.random.default_rng(5)
    blobs = []
    for i in range(300):
        h = ExponentialHistogram(5_000, eps=0.05 if i % 7 else 0.1)
        n = int(rng.integers(0, 300))
        h.update(np.sort(rng.integers(0, 20_000, n)), rng.integers(0, 50, n) if i % 2 else None)
        if i % 11 == 0:
            other = ExponentialHistogram(5_000, eps=h.eps)
            other.update(np.sort(rng.integers(0, 20_000, 100)))
            h = ExponentialHistogram.merge_all([h, other])
        blobs.append(None if i % 13 == 0 else h.to_bytes())
    rows = [(i, b, 25_000 + i) for i, b in enumerate(blobs)]
    sdf = spark.createDataFrame(rows, "i int, s binary, now long").repartition(2)
    got = sdf.select(
        "i", U.eh_sketch_estimate("s").alias("e"), U.eh_sketch_estimate("s", now=F.col("now"), window=2_000).alias("e_now"),
        U.eh_sketch_bounds("s", now=30_000, window=4_000).alias("b"),
    ).collect()
    assert len(got) == len(blobs)
    for r in got:
        b = blobs[r.i]
        if b is None:
            assert r.e is None and r.e_now is None and r.b.lower is None and r.b.upper is None
            continue
        h = ExponentialHistogram.from_bytes(b)
        assert r.e == h.estimate()
        assert r.e_now == h.estimate(25_000 + r.i, 2_000)
        assert (r.b.lower, r.b.upper) == h.bounds(30_000, 4_000)
    with pytest.raises(PythonException, match=r"earlier than the newest timestamp \(\d+\) of the sketch"):
        sdf.select(U.eh_sketch_estimate("s", now=F.col("now") - 20_000)).collect()


def test_distinct_estimate_equals_each_sketch_read_in_python(spark):
    """distinct_estimate decodes and answers a batch's sliding HyperLogLogs
    at once (per window, precision and seed): each answer is the sketch's
    own, with FM sketches, nulls and empty sketches in the same column, a
    literal now and a now column, and a shorter window."""
    from distinct import SlidingFM, SlidingHyperLogLog

    rng = np.random.default_rng(8)
    blobs = []
    for i in range(240):
        n = int(rng.integers(0, 200))
        ts, items = np.sort(rng.integers(0, 20_000, n)), rng.integers(0, 500, n)
        if i % 5 == 0:
            s = SlidingFM(5_000, num_bitmaps=32).update(ts, items)
        else:
            s = SlidingHyperLogLog(5_000 if i % 3 else 8_000, 6 if i % 4 else 8, seed=i % 2).update(ts, items)
        blobs.append(None if i % 17 == 0 else s.to_bytes())
    rows = [(i, b, 25_000 + i) for i, b in enumerate(blobs)]
    sdf = spark.createDataFrame(rows, "i int, s binary, now long").repartition(2)
    with pytest.warns(DeprecationWarning, match="distinct_estimate is deprecated"):  # it reads FM and HLL alike
        got = sdf.select("i", U.distinct_estimate("s").alias("d"),
                         U.distinct_estimate("s", now=F.col("now"), window=2_000).alias("d_now"),
                         U.distinct_estimate("s", now=30_000).alias("d_lit")).collect()
    assert len(got) == len(blobs)
    for r in got:
        b = blobs[r.i]
        if b is None:
            assert r.d is None and r.d_now is None and r.d_lit is None
            continue
        s = SlidingFM.from_bytes(b) if r.i % 5 == 0 else SlidingHyperLogLog.from_bytes(b)
        assert (r.d, r.d_now, r.d_lit) == (s.estimate(), s.estimate(25_000 + r.i, 2_000), s.estimate(30_000))
    with pytest.raises(PythonException, match="is earlier than the newest timestamp"):
        sdf.where("i % 5 != 0").select(U.sliding_hll_sketch_estimate("s", now=F.col("now") - 20_000)).collect()


def test_partials_merge_the_same_in_any_arrival_order():
    """Shuffles deliver a key's partials in any order; L_p sketches add up
    floats (not associative), so the merge sorts them first: every order
    gives the same bits (a standalone cluster must agree with local)."""
    import itertools

    from udaf import LpNorm

    rng = np.random.default_rng(3)
    parts = []
    for _ in range(4):
        ts = np.sort(rng.integers(0, 10_000, 300))
        parts.append(SlidingLpNorm(2.0, 5_000, 0.2, 0.1, 9).update(ts, rng.integers(0, 50, ts.size),
                                                                   rng.random(ts.size) * 1e3).to_bytes())
    spec = LpNorm("dst", window=5_000, p=2.0, eps=0.2, delta=0.1, seed=9)
    answers = {float(spec.union(list(order), np.array([0])).estimate[0])
               for order in itertools.permutations(parts)}
    assert len(answers) == 1


def test_timestamp_and_date_columns_with_intervals(spark):
    base = dt.datetime(2026, 3, 1)
    rows = [(i % 2, base + dt.timedelta(minutes=7 * i), (base + dt.timedelta(days=i // 50)).date()) for i in range(2000)]
    sdf = spark.createDataFrame(rows, "k int, t timestamp, d date")
    got = {r.k: r for r in sdf.groupBy("k").agg(
        U.sliding_count("t", window="1 day").alias("per_day"),
        U.sliding_count("d", window="7 days", eps=0.01).alias("per_week"),
        U.sliding_count("t", window="1 day", query_window="2 hours").alias("per_2h"),
    ).collect()}
    pdf = pd.DataFrame(rows, columns=["k", "t", "d"])
    for k, g in pdf.groupby("k"):
        newest_t, newest_d = g.t.max(), g.d.max()
        day = int((g.t > newest_t - pd.Timedelta("1 day")).sum())
        two = int((g.t > newest_t - pd.Timedelta("2 hours")).sum())
        week = int((g.d > newest_d - dt.timedelta(days=7)).sum())
        assert abs(got[k].per_day - day) <= 0.01 * day
        assert abs(got[k].per_2h - two) <= 0.01 * two
        assert abs(got[k].per_week - week) <= 0.01 * week


def test_null_timestamp_names_the_column(spark):
    sdf = spark.createDataFrame([(1, 5), (1, None), (1, 7)], "k int, event_time long")
    with pytest.raises(PythonException, match="InvalidInputError: column event_time holds null: timestamps must not be null"):
        sdf.groupBy("k").agg(U.sliding_count("event_time", window=10)).collect()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: U.sliding_count("ts", window=0), "window must be a positive integer"),
        (lambda: U.sliding_count("ts", window="1 fortnight"), "unknown unit 'fortnight'"),
        (lambda: U.sliding_sum("ts", "v", window=10, eps=2.0), "eps must be in \\(0, 1\\)"),
        (lambda: U.sliding_distinct("ts", "x", window=10, precision=3), "precision must be in \\[4, 18\\]"),
        (lambda: U.sliding_lp_sketch_agg("ts", "i", p=3.0, window=10), "p must be in \\(0, 2\\]"),
        (lambda: U.eh_sketch_agg(42, window=10), "ts must be a column name or a Column"),
    ],
)
def test_bad_parameters_fail_on_the_driver(call, match):
    """Raised when the Column is built, before any Spark job."""
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_interval_window_on_integral_column_is_explained(spark):
    sdf = spark.createDataFrame([(1, 5)], "k int, ts long")
    with pytest.raises(PythonException, match="is an interval but column ts is integral"):
        sdf.groupBy("k").agg(U.sliding_count("ts", window="1 hour")).collect()


# ------------------------------------------------------- two-phase aggregation
def test_two_phase_aggregate_matches_exact(df, events):
    from udaf import Count, Distinct, LpNorm, Sum, aggregate

    window = 50_000
    ints = df.withColumn("bytes_int", F.col("bytes").cast("long"))  # Sum needs integers
    out = aggregate(
        ints, "k", "ts", sketches=True,
        packets=Count(window=window, eps=0.02),
        bytes=Sum("bytes_int", window=window, eps=0.02),
        dsts=Distinct("dst", window=window, precision=12),
        l2=LpNorm("dst", window=window, value="bytes", p=2.0, eps=0.1),
    ).collect()
    exact = exact_by_key(events, window)
    low, high = SlidingLpNorm(2.0, window, 0.1, 0.05).guarantee()
    assert len(out) == KEYS
    for r in out:
        e = exact[r.k]
        assert abs(r.packets - e["count"]) <= 0.02 * e["count"]
        assert abs(r.bytes - e["sum"]) <= 0.02 * e["sum"]
        assert abs(r.dsts / e["distinct"] - 1) <= 5 * 1.04 / 64
        assert low * e["l2"] <= r.l2 <= high * e["l2"]
        assert ExponentialHistogram.from_bytes(r.packets_sketch).estimate() == r.packets
    # the shuffle strategy (rows to one UDF per key) answers the same way
    # (two-phase without sketches, from the partials' union directly: the
    # same answers, tests/test_parity.py)
    for strategy in ("shuffle", "auto"):
        rows = aggregate(
            ints, "k", "ts", strategy=strategy,
            packets=Count(window=window, eps=0.02),
            bytes=Sum("bytes_int", window=window, eps=0.02),
            dsts=Distinct("dst", window=window, precision=12),
            l2=LpNorm("dst", window=window, value="bytes", p=2.0, eps=0.1),
        ).collect()
        check_two_phase_estimates(rows, exact, low, high)
        if strategy == "auto":  # an L_p spec at this size: the rows are shuffled, the answers exact
            assert all(r.l2 == pytest.approx(exact[r.k]["l2"], rel=1e-9) for r in rows)


@pytest.mark.parametrize("p, eps, delta", [(2.0, 0.2, 0.2), (1.0, 0.2, 0.2)])
def test_auto_builds_lp_partials_only_where_they_are_smaller_than_rows(p, eps, delta):
    """An L_p partial holds a dense sketch per bucket: auto's threshold is
    where a real partial gets smaller than the rows it summarizes."""
    from udaf import Count, LpNorm
    from udaf.lp_spec import _ROW_BYTES
    from udaf.two_phase import min_rows_per_partial

    spec = LpNorm("dst", window=10**9, p=p, eps=eps, delta=delta)
    n = min_rows_per_partial({"l": spec})
    rng = np.random.default_rng(0)

    def partial_bytes(m):
        t = np.sort(rng.integers(0, 10**9, m))
        items = (rng.zipf(1.3, m) % 10_000).astype(np.uint64)
        return len(spec.make(10**9).update(t, items, rng.integers(1, 1500, m).astype(float)).to_bytes())

    assert partial_bytes(n) < n * _ROW_BYTES  # from the threshold on, the partial is smaller
    assert partial_bytes(n // 4) > n // 4 * _ROW_BYTES  # well below it, the rows are
    assert min_rows_per_partial({"c": Count(window=10)}) == 64
    assert min_rows_per_partial({"c": Count(window=10), "l": spec}) == n
    assert min_rows_per_partial({"l": LpNorm("dst", window=10)}) > 10_000  # the defaults: dense, big


def check_two_phase_estimates(rows, exact, low, high):
    assert len(rows) == KEYS
    for r in rows:
        e = exact[r.k]
        assert abs(r.packets - e["count"]) <= 0.02 * e["count"]
        assert abs(r.bytes - e["sum"]) <= 0.02 * e["sum"]
        assert abs(r.dsts / e["distinct"] - 1) <= 5 * 1.04 / 64
        assert low * e["l2"] <= r.l2 <= high * e["l2"]


def test_sketch_functions_name_a_column_that_is_not_binary(df):
    """A sketch function given another column type says so, naming the
    function and the column; a sketch of another family too."""
    with pytest.raises(PythonException, match="column ts: eh_sketch_estimate needs a binary sketch column.*got bigint"):
        df.select(U.eh_sketch_estimate("ts")).collect()
    with pytest.raises(PythonException, match="column ts: eh_sketch_bounds needs a binary sketch column"):
        df.select(U.eh_sketch_bounds("ts", now=F.col("ts"))).collect()
    strings = df.withColumn("s", F.col("dst").cast("string"))
    with pytest.raises(PythonException, match="column s: sliding_hll_sketch_estimate needs a binary.*got string"):
        strings.select(U.sliding_hll_sketch_estimate("s")).collect()
    with pytest.raises(PythonException, match="column s: sliding_lp_sketch_estimate needs a binary sketch column"):
        strings.select(U.sliding_lp_sketch_estimate("s")).collect()
    with pytest.raises(PythonException, match="column ts: eh_union_agg needs a binary sketch column"):
        df.groupBy("k").agg(U.eh_union_agg("ts")).collect()
    with pytest.raises(PythonException, match="column s: sliding_hll_union_agg needs a binary sketch column"):
        strings.groupBy("k").agg(U.sliding_hll_union_agg("s")).collect()
    hll = df.groupBy("k").agg(U.sliding_hll_sketch_agg("ts", "dst", 1000).alias("s"))
    with pytest.raises(PythonException, match="InvalidInputError: column s holds <a SlidingHyperLogLog sketch>: "
                                              "eh_sketch_estimate needs ExponentialHistogram sketches"):
        hll.select(U.eh_sketch_estimate("s")).collect()


def test_keys_must_be_names(df):
    from udaf import Count, aggregate, sketch_table, sliding_over

    with pytest.raises(TypeError, match="aggregate takes column names for by .* got Column"):
        aggregate(df, F.col("k"), "ts", c=Count(window=10))
    with pytest.raises(TypeError, match="sketch_table takes column names for by"):
        sketch_table(df, F.col("k"), "ts", c=Count(window=10))
    with pytest.raises(TypeError, match="sliding_over takes column names for partition_by"):
        sliding_over(df, F.col("k"), "ts", c=Count(window=10))
    assert aggregate(df, ("k",), "ts", c=Count(window=10)).count() == KEYS  # a tuple of names is fine


def test_two_phase_checks_on_the_driver(df):
    from udaf import Count, Distinct, Sum, aggregate

    with pytest.raises(ValueError, match="column 'nope' is not in the DataFrame"):
        aggregate(df, "nope", "ts", c=Count(window=10))
    with pytest.raises(TypeError, match="column bytes: Sum needs an integral column .*, got double"):
        aggregate(df.withColumn("bytes", F.col("bytes").cast("double")), "k", "ts", s=Sum("bytes", window=10))
    with pytest.raises(TypeError, match="column dst: the time column needs a timestamp, date or integral column"):
        aggregate(df.withColumn("dst", F.col("dst").cast("string")), "k", "dst", c=Count(window=10))
    with pytest.raises(ValueError, match="eps must be in"):
        aggregate(df, "k", "ts", c=Count(window=10, eps=3.0))
    with pytest.raises(ValueError, match="column 'ts' is the time column"):
        aggregate(df, "k", "ts", d=Distinct("ts", window=10))
    with pytest.raises(ValueError, match="strategy must be 'auto', 'native', 'two_phase' or 'shuffle'"):
        aggregate(df, "k", "ts", strategy="fast", c=Count(window=10))
    with pytest.raises(ValueError, match="at least one spec"):
        aggregate(df, "k", "ts")


def test_two_phase_timestamps_are_exact_epoch(spark):
    from udaf import Count, aggregate

    base = dt.datetime(2026, 3, 1)
    rows = [("a", base + dt.timedelta(seconds=37 * i)) for i in range(3000)]
    sdf = spark.createDataFrame(rows, "k string, t timestamp").repartition(2)
    r = aggregate(sdf, "k", "t", hour=Count(window="1 hour", eps=0.01)).collect()[0]
    exact = sum(1 for _, t in rows if t > rows[-1][1] - dt.timedelta(hours=1))
    assert abs(r.hour - exact) <= 0.01 * exact


def test_integer_items_with_nulls_hash_as_integers(spark):
    """An integral column with nulls reaches pandas as float64; its items
    must hash as the integers they are, or sketches from batches with and
    without nulls would not agree."""
    pdf = pd.DataFrame({"g": [1, 1, 1, 2, 2], "ts": [1, 2, 3, 1, 2],
                        "dst": pd.array([7, None, 9, 7, 9], dtype="Int64")})
    rows = {r.g: r.s for r in spark.createDataFrame(pdf).groupBy("g").agg(
        U.sliding_hll_sketch_agg("ts", "dst", window=10).alias("s")).collect()}
    from distinct import SlidingHyperLogLog

    with_null = SlidingHyperLogLog.from_bytes(rows[1])
    assert with_null == SlidingHyperLogLog(10).update([1, 3], np.array([7, 9]))
    assert with_null.merge(SlidingHyperLogLog.from_bytes(rows[2])).estimate() == pytest.approx(2, abs=0.1)


@pytest.mark.parametrize("sketches, strategy", [(False, "two_phase"), (False, "shuffle"), (True, "auto"),
                                                (False, "auto")])
def test_two_phase_as_of_now_with_bounds(spark, sketches, strategy):
    """One 'now' for every key: only the rows of its window count (a key
    with none is not answered, as in where(ts > now - w).groupBy(k)); the
    bounds bracket the exact answer."""
    from udaf import Count, Distinct, Sum, aggregate

    base = dt.datetime(2026, 3, 1)
    rng = np.random.default_rng(3)
    rows = [("busy", base + dt.timedelta(seconds=int(s)), int(b), int(d))
            for s, b, d in zip(np.sort(rng.integers(0, 7200, 4000)), rng.integers(0, 1500, 4000),
                               rng.integers(0, 300, 4000))]
    rows += [("quiet", base + dt.timedelta(seconds=60 * i), 100, i) for i in range(30)]  # ends at 00:29
    sdf = spark.createDataFrame(rows, "k string, t timestamp, b long, d long").repartition(3)
    now = base + dt.timedelta(hours=2)
    out = {r.k: r for r in aggregate(sdf, "k", "t", now=now, bounds=True, sketches=sketches, strategy=strategy,
                                     n=Count(window="1 hour", eps=0.02), s=Sum("b", window="1 hour", eps=0.02),
                                     d=Distinct("d", window="1 hour")).collect()}
    window_rows = [r for r in rows if now - dt.timedelta(hours=1) < r[1] <= now]
    busy = [r for r in window_rows if r[0] == "busy"]
    assert out["busy"].n_lower <= len(busy) <= out["busy"].n_upper
    assert abs(out["busy"].n - len(busy)) <= 0.02 * len(busy)
    assert out["busy"].s_lower <= sum(r[2] for r in busy) <= out["busy"].s_upper
    assert abs(out["busy"].d / len({r[3] for r in busy}) - 1) < 0.1
    assert "quiet" not in out
    assert "d_lower" not in out["busy"].asDict()


def test_two_phase_now_must_match_the_time_column(df):
    from udaf import Count, aggregate

    with pytest.raises(ValueError, match="now is a datetime but the time column is integral"):
        aggregate(df, "k", "ts", now=dt.datetime(2026, 1, 1), c=Count(window=10))
    with pytest.raises(TypeError, match="now must be"):
        aggregate(df, "k", "ts", now="soon", c=Count(window=10))


def test_sketch_table_equals_grouped_sketches(spark):
    """sketch_table (one numpy pass per partition after a repartition by
    key) gives the same sketches as the grouped-aggregate builders, and its
    bounds bracket the exact values."""
    from udaf import Count, Distinct, Sum, sketch_table

    rng = np.random.default_rng(8)
    n = 6000
    pdf = pd.DataFrame({"k": rng.integers(0, 40, n), "ts": rng.permutation(n), "b": rng.integers(0, 900, n),
                        "d": rng.integers(0, 500, n)})
    sdf = spark.createDataFrame(pdf).repartition(3)
    table = {r.k: r for r in sketch_table(sdf, "k", "ts", now=n, bounds=True, c=Count(window=1000, eps=0.05),
                                          s=Sum("b", window=1000, eps=0.05),
                                          dd=Distinct("d", window=1000, precision=8)).collect()}
    grouped = {r.k: r for r in sdf.groupBy("k").agg(U.eh_sketch_agg("ts", window=1000, eps=0.05).alias("c"),
                                                    U.sliding_hll_sketch_agg("ts", "d", window=1000,
                                                                             precision=8).alias("dd")).collect()}
    assert table.keys() == grouped.keys() and len(table) == 40
    for k, r in table.items():
        assert bytes(r.c) == bytes(grouped[k].c) and bytes(r.dd) == bytes(grouped[k].dd)
        g = pdf[(pdf.k == k) & (pdf.ts > n - 1000)]
        assert r.c_lower <= len(g) <= r.c_upper
        assert r.s_lower <= int(g.b.sum()) <= r.s_upper


def test_the_test_sessions_workers_fork_from_udaf_daemon(spark):
    """The session's Python workers are forks of ``udaf.daemon`` (the
    fixture sets ``spark.python.daemon.module``): a task that imports
    nothing finds the Spark layer's drivers and the family modules loaded."""
    def loaded(batches):
        import sys

        import pyarrow as pa

        names = ["udaf.two_phase", "udaf.union", "udaf.eh_spec", "udaf.hll_spec", "ehist.columnar"]
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"name": names, "loaded": [n in sys.modules for n in names]})

    rows = spark.range(1, numPartitions=1).mapInArrow(loaded, "name string, loaded boolean").collect()
    assert {r.name: r.loaded for r in rows} == dict.fromkeys(
        ["udaf.two_phase", "udaf.union", "udaf.eh_spec", "udaf.hll_spec", "ehist.columnar"], True)


def test_a_default_session_lets_adaptive_execution_size_the_python_passes(spark):
    """Left at Spark's default of 200 shuffle partitions with adaptive
    execution on, the Python passes shuffle by key alone so that adaptive
    execution sizes their partitions (200 fixed ones cost 200 Python tasks
    a call: 8 s for 600 rows on 2 cores); a session's own count, or
    adaptive execution off, keeps the fixed count.  The answers are the
    same either way."""
    from udaf import Count, Distinct, Sum, aggregate, sketch_table, sliding_over
    from udaf.keys import by_key

    rng = np.random.default_rng(9)
    n = 3000
    sdf = spark.createDataFrame(pd.DataFrame({"k": rng.integers(0, 30, n), "ts": rng.permutation(n),
                                              "b": rng.integers(0, 900, n), "d": rng.integers(0, 200, n)}))
    specs = dict(c=Count(window=500, eps=0.05), s=Sum("b", window=500, eps=0.05), dd=Distinct("d", window=500))
    conf = spark.conf
    before = {c: conf.get(c) for c in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}

    def plan():  # the logical plan's shuffle: "RepartitionByExpression ['k]" or "..., 200" with a fixed count
        return by_key(sdf, ["k"])._jdf.queryExecution().logical().toString().splitlines()[0]

    got = {}
    try:
        for partitions, adaptive in (("200", "true"), ("200", "false"), ("7", "true")):
            conf.set("spark.sql.shuffle.partitions", partitions)
            conf.set("spark.sql.adaptive.enabled", adaptive)
            assert plan().endswith("['k]") == (partitions == "200" and adaptive == "true"), plan()
            if adaptive == "false":  # 200 Python tasks a call: the plan is the check
                continue
            got[partitions, adaptive] = (
                sorted(tuple(r) for r in sketch_table(sdf, "k", "ts", **specs).collect()),
                sorted(tuple(r) for r in aggregate(sdf, "k", "ts", now=n, strategy="shuffle", **specs).collect()),
                sorted(tuple(r) for r in sliding_over(sdf, "k", "ts", strategy="shuffle", c=Count(500)).collect()))
    finally:
        for c, v in before.items():
            conf.set(c, v)
    first = got["200", "true"]
    assert all(other == first for other in got.values()) and len(first[0]) == 30


def test_large_partitions_are_spilled_by_key(spark, monkeypatch):
    """Past CHUNK_ROWS rows a task spills its partition to files by key
    hash and builds them in turn: with ~50 rows held, 3 files and Arrow
    batches of 97 rows (keys crossing them), sketch_table and aggregate's
    phase one give what they give from whole partitions."""
    from udaf import Count, Distinct, Sum, aggregate, sketch_table
    from udaf import two_phase

    rng = np.random.default_rng(3)
    n = 3000
    pdf = pd.DataFrame({"k": rng.integers(0, 30, n).astype(str), "ts": rng.permutation(n),
                        "b": rng.integers(0, 900, n), "d": rng.integers(0, 400, n)})
    sdf = spark.createDataFrame(pdf).repartition(2)
    specs = dict(c=Count(window=800, eps=0.05), s=Sum("b", window=800, eps=0.05), dd=Distinct("d", window=800))

    def run():
        # reduced rows (several groupings, one union) through sketch_table, the rows through aggregate
        table = {r.k: r for r in sketch_table(sdf, "k", "ts", now=n, bounds=True, reduce=True, **specs).collect()}
        answers = {r.k: r for r in aggregate(sdf, "k", "ts", now=n, bounds=True, strategy="two_phase", reduce=False,
                                             sketches=True, **specs).collect()}
        return table, answers

    whole = run()
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "97")
    monkeypatch.setattr(two_phase, "CHUNK_ROWS", 50)
    monkeypatch.setattr(two_phase, "SPILL_FILES", 3)
    try:
        spilled = run()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    assert spilled == whole and len(whole[0]) == len(whole[1]) == 30


def test_partial_sketches_spill_past_chunk_rows():
    """In process: a partition past ``chunk_rows`` goes through the spill
    files, and every key's partials are the same, byte for byte."""
    import pyarrow as pa

    from udaf import Count, Sum
    from udaf.two_phase import PartialSketches

    rng = np.random.default_rng(4)
    n = 900
    k, ts, b = rng.integers(0, 12, n), rng.permutation(n), rng.integers(0, 50, n)
    specs, windows = {"c": Count(window=300), "s": Sum("b", window=300)}, {"c": 300, "s": 300}
    rows = pa.table({"k": k, "__ts": ts, "b": b}).to_batches(max_chunksize=97)

    def run(chunk, files):
        build = PartialSketches(["k"], [], "ts", specs, windows)
        build.chunk_rows, build.spill_files = chunk, files
        spills, spilled = [], build._spilled
        build._spilled = lambda held, batches: spills.append(files) or spilled(held, batches)
        got = pa.Table.from_batches(list(build(iter(rows)))).to_pylist()
        assert len(got) == 12 and spills == ([files] if chunk < n else [])
        return sorted(got, key=lambda r: r["k"])

    assert run(100, 5) == run(50, 1) == run(n, 5)


@pytest.mark.parametrize("strategy", ["two_phase", "shuffle"])
def test_timestamp_ntz_columns(spark, strategy):
    """TimestampNTZ (what Parquet files written by pandas read as): its
    wall-clock values are the timestamps, a naive ``now`` is wall-clock
    time; the column functions read it as pandas does."""
    from udaf import Count, aggregate, sliding_over

    base = dt.datetime(2026, 3, 1)
    rows = [("a" if i % 3 else "b", base + dt.timedelta(seconds=41 * i)) for i in range(3000)]
    sdf = spark.createDataFrame(rows, "k string, t timestamp_ntz").repartition(2)
    now = base + dt.timedelta(hours=34, minutes=10)  # after the newest row (34:09:19)
    got = {r.k: r for r in aggregate(sdf, "k", "t", now=now, bounds=True, strategy=strategy,
                                     hour=Count(window="1 hour", eps=0.01)).collect()}
    udf = {r.k: r.c for r in sdf.groupBy("k").agg(U.sliding_count("t", window="1 hour", now=now).alias("c")).collect()}
    for k in ("a", "b"):
        exact = sum(1 for key, t in rows if key == k and now - dt.timedelta(hours=1) < t <= now)
        assert got[k].hour_lower <= exact <= got[k].hour_upper
        assert abs(got[k].hour - exact) <= 0.01 * exact and abs(udf[k] - exact) <= 0.01 * exact
    per_row = sliding_over(sdf, "k", "t", n=Count(window="1 hour")).toPandas()
    last = per_row[per_row.t == per_row.t.max()].iloc[0]
    assert last.n == sum(1 for key, t in rows if key == last.k and last.t - dt.timedelta(hours=1) < t <= last.t)
    assert dict(sliding_over(sdf, "k", "t", n=Count(window="10 microseconds")).dtypes)["t"] == "timestamp_ntz"


def test_shuffle_strategy_is_exact_over_many_keys(spark):
    """strategy='shuffle' answers from each key's rows: exact counts, sums,
    distinct counts and L_p norms, bounds equal to them, for keys of two
    columns (one with nulls) crossing Arrow batches."""
    from udaf import Count, Distinct, LpNorm, Sum, aggregate

    rng = np.random.default_rng(9)
    n = 5000
    pdf = pd.DataFrame({"a": rng.integers(0, 40, n), "g": pd.array(rng.choice(["x", "y", None], n), dtype=object),
                        "ts": rng.integers(0, 10_000, n),
                        "b": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 100, n)), dtype="Int64"),
                        "d": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 30, n)), dtype="Int64")})
    sdf = spark.createDataFrame(pdf).repartition(3)
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "97")
    try:
        got = aggregate(sdf, ["a", "g"], "ts", strategy="shuffle", bounds=True,
                        n=Count(window=3000), s=Sum("b", window=3000), u=Distinct("d", window=3000),
                        l1=LpNorm("d", window=3000, value="b", p=1.0)).collect()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    assert len(got) == pdf.groupby(["a", "g"], dropna=False).ngroups
    for r in got:
        g = pdf[(pdf.a == r.a) & (pdf.g.isna() if r.g is None else pdf.g == r.g)]
        def last(rows):  # each spec: as of the newest row its synopsis holds
            return rows[rows.ts > rows.ts.max() - 3000]

        assert r.n == r.n_lower == r.n_upper == len(last(g))
        assert r.s == r.s_lower == r.s_upper == int(last(g.dropna(subset=["b"])).b.sum())
        assert r.u == last(g.dropna(subset=["d"])).d.nunique()
        both = last(g.dropna(subset=["b", "d"]))
        assert r.l1 == pytest.approx(both.groupby("d").b.sum().abs().sum())


def test_two_phase_union_path_equals_grouped_union(spark):
    """Integral keys take the mapInArrow union of partials (udaf/union.py,
    vectorized histograms); floating keys the grouped-aggregate UDF per
    key.  Same partials, same unions: identical answers and bounds, with
    null values, keys in a few partitions only, and many keys per batch."""
    from udaf import Count, Distinct, Sum, aggregate

    rng = np.random.default_rng(11)
    n = 6000
    k = rng.zipf(1.5, n) % 700
    v = rng.integers(0, 5000, n).astype(object)
    v[rng.random(n) < 0.2] = None
    pdf = pd.DataFrame({"k": k.astype(np.int64), "ts": rng.integers(0, 10**6, n),
                        "v": pd.array(v, dtype="Int64"), "d": rng.integers(0, 50, n)})
    sdf = spark.createDataFrame(pdf).repartition(3)
    specs = dict(c=Count(window=200_000, eps=0.05), s=Sum("v", window=200_000, eps=0.05),
                 u=Distinct("d", window=200_000))
    for now in (None, 10**6 - 1):
        ints = {r.k: r.asDict() for r in aggregate(sdf, "k", "ts", now=now, bounds=True, strategy="two_phase",
                                                    **specs).collect()}
        floats = {int(r.k): r.asDict() for r in aggregate(sdf.withColumn("k", F.col("k").cast("double")), "k", "ts",
                                                          now=now, bounds=True, strategy="two_phase",
                                                          **specs).collect()}
        live = set(k.tolist()) if now is None else set(k[pdf.ts.to_numpy() > now - 200_000].tolist())
        assert ints.keys() == floats.keys() == live
        for key, row in ints.items():
            assert {c: row[c] for c in row if c != "k"} == {c: floats[key][c] for c in row if c != "k"}
        # the exact strategy answers each spec as of the key's newest row
        # with a value (as the synopses do): within the two-phase bounds
        exact = {r.k: r for r in aggregate(sdf, "k", "ts", now=now, bounds=True, strategy="shuffle",
                                           **specs).collect()}
        for key, row in ints.items():
            for name in ("c", "s"):
                assert row[f"{name}_lower"] <= exact[key][name] <= row[f"{name}_upper"], (key, name)
            with_v = pdf[(pdf.k == key) & pdf.v.notna()]
            at = (int(with_v.ts.max()) if len(with_v) else 0) if now is None else now
            assert exact[key].s == int(with_v[(with_v.ts > at - 200_000) & (with_v.ts <= at)].v.sum())


@settings(max_examples=examples(100), deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.binary(max_size=6)), max_size=4))),
       cut=st.integers(0, 3), wide=st.booleans())
def test_arrow_binary_columns_read_in_place(rows, cut, wide):
    """Sketch columns and arrays of sketches (collect_list) as Spark hands
    them over, sliced, with nulls at both levels, binary or large binary:
    read in place, they hold what ``to_pylist`` gives."""
    import pyarrow as pa

    from udaf._arrow import blobs_of, list_blobs_of

    binary = pa.large_binary() if wide else pa.binary()
    flat = [b for r in rows for b in (r or [])]
    column = pa.array([None] * cut + flat, type=binary).slice(cut)
    assert blobs_of(column).tolist() == column.to_pylist()
    lists = pa.array([[b"x"]] * cut + rows, type=pa.list_(binary)).slice(cut)
    blobs, starts = list_blobs_of(lists)
    got = [blobs[a:b].tolist() for a, b in zip(starts.tolist(), starts.tolist()[1:] + [len(blobs)])]
    assert got == [[b for b in r if b is not None] if r else [] for r in rows]
    assert blobs_of(pa.nulls(3)).tolist() == [None] * 3
