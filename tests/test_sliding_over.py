"""udaf.sliding_over against Spark's own window frames, row by row."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from pyspark.sql import Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lp_norms import rows_for  # noqa: E402
from ehist.errors import InvalidInputError  # noqa: E402
from tests.conftest import ansi_mode  # noqa: E402
from udaf import Count, Distinct, LpNorm, Sum, errors, sliding_over  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(23)
    n = 6000
    ts = np.sort(rng.integers(0, 30_000, n))
    ts[100:140] = ts[100]  # a run of peers
    b = rng.integers(0, 1500, n).astype(object)
    b[rng.random(n) < 0.05] = None
    dst = (rng.zipf(1.4, n) % 400).astype(object)
    dst[rng.random(n) < 0.05] = None
    return pd.DataFrame({"rid": np.arange(n), "k": rng.integers(0, 4, n), "ts": ts,
                         "b": pd.array(b, dtype="Int64"), "dst": pd.array(dst, dtype="Int64")})


@pytest.fixture(scope="module")
def sdf(spark, rows):
    return spark.createDataFrame(rows).repartition(3)


def test_equals_spark_range_frames(sdf):
    window = 2_000
    got = sliding_over(sdf, "k", "ts", n=Count(window=window), s=Sum("b", window=window),
                       d=Distinct("dst", window=window))
    frame = Window.partitionBy("k").orderBy("ts").rangeBetween(-(window - 1), 0)
    want = sdf.select("rid", F.count(F.lit(1)).over(frame).alias("n_"), F.sum("b").over(frame).alias("s_"),
                      F.size(F.collect_set("dst").over(frame)).alias("d_"))
    joined = got.join(want, "rid").toPandas()
    assert len(joined) == 6000
    assert (joined.n == joined.n_).all()
    assert (joined.s.fillna(-1) == joined.s_.fillna(-1)).all()
    assert (joined.d == joined.d_).all()
    assert dict(got.dtypes)["n"] == "bigint" and dict(got.dtypes)["d"] == "bigint"


def test_keeps_columns_and_timestamp_units(spark):
    """TimestampType with an interval window; the original columns pass through."""
    base = dt.datetime(2026, 3, 1)
    pdf = pd.DataFrame({"k": ["a"] * 5 + ["b"],
                        "t": [base + dt.timedelta(minutes=m) for m in (0, 30, 59, 60, 121, 0)],
                        "x": [1, 2, 3, 4, 5, 6]})
    out = sliding_over(spark.createDataFrame(pdf), "k", "t", hour=Count(window="1 hour")).toPandas()
    out = out.sort_values(["k", "t"]).reset_index(drop=True)
    assert out.columns.tolist() == ["k", "t", "x", "hour"]
    # (t - 1 hour, t]: 60 minutes after 0 excludes 0
    assert out.hour.tolist() == [1, 2, 3, 3, 1, 1]
    assert out.x.tolist() == [1, 2, 3, 4, 5, 6]
    assert out.t.tolist() == pdf.t.tolist()


def test_every_time_type_gives_the_answers_of_its_units(spark):
    """The time column is read as Arrow sends it (no converted copy):
    integral, date, timestamp and TimestampNTZ columns holding the same
    days give the answers of the same windows in days."""
    rng = np.random.default_rng(5)
    n = 3000
    pdf = pd.DataFrame({"rid": np.arange(n), "k": rng.integers(0, 3, n), "day": rng.integers(-400, 400, n),
                        "b": rng.integers(0, 100, n), "dst": rng.zipf(1.5, n) % 50})
    base = spark.createDataFrame(pdf).repartition(2).select(
        "*", F.col("day").cast("int").alias("d_int"), F.col("day").cast("short").alias("d_short"),
        F.date_from_unix_date("day").alias("d_date"), F.timestamp_seconds(F.col("day") * 86_400).alias("d_ts"),
        F.date_from_unix_date("day").cast("timestamp_ntz").alias("d_ntz"))
    answers = {}
    for col, window in (("day", 30), ("d_int", 30), ("d_short", 30), ("d_date", "30 days"), ("d_ts", "30 days"),
                        ("d_ntz", "30 days")):
        got = sliding_over(base, "k", col, n=Count(window=window), s=Sum("b", window=window),
                           d=Distinct("dst", window=window)).select("rid", "n", "s", "d").toPandas()
        answers[col] = got.sort_values("rid").reset_index(drop=True)
    frame = Window.partitionBy("k").orderBy("day").rangeBetween(-29, 0)
    want = base.select("rid", F.count(F.lit(1)).over(frame).alias("n"), F.sum("b").over(frame).alias("s"),
                       F.size(F.collect_set("dst").over(frame)).alias("d")).toPandas()
    want = want.sort_values("rid").reset_index(drop=True)
    for col, got in answers.items():
        assert got.n.tolist() == want.n.tolist(), col
        assert got.s.tolist() == want.s.tolist(), col
        assert got.d.tolist() == want.d.tolist(), col


def test_lp_norm_per_row_within_eps(sdf, rows):
    window, eps, delta = 3_000, 0.1, 0.05
    got = sliding_over(sdf, "k", "ts", l1=LpNorm("dst", window=window, value="b", p=1.0, eps=eps,
                                                delta=delta, seed=4), strategy="shuffle").toPandas()
    assert rows_for(1.0, eps, delta) > 0
    errors = []
    for _, r in got.sample(200, random_state=1).iterrows():
        g = rows[(rows.k == r.k) & (rows.ts > r.ts - window) & (rows.ts <= r.ts)].dropna(subset=["dst", "b"])
        exact = g.groupby("dst").b.sum().abs().sum()
        errors.append(abs(r.l1 / exact - 1) if exact else abs(r.l1))
    assert np.mean(np.array(errors) <= eps) >= 1 - 2 * delta


def _brute_lp(pdf, keys, window, p, value):
    """Each row's L_p norm of item -> sum(value) over its frame: for every
    row, the rows of its key (a null key its own) in ``(ts - window, ts]``
    with an item (and a value), summed per item (numpy per row: pandas per
    row took 5 s of each test's 10-14 s)."""
    group = pdf[keys].astype(object).where(pdf[keys].notna(), "<null>")
    gid = pd.factorize(group.apply(tuple, axis=1))[0]
    ts = pdf.ts.to_numpy()
    keep = pdf.dst.notna().to_numpy()
    if value is not None:
        keep &= pdf[value].notna().to_numpy()
    item = pd.factorize(pdf.dst)[0]  # -1 for a null item: never kept
    v = np.ones(len(pdf)) if value is None else pdf[value].fillna(0).to_numpy(dtype=np.float64)  # ints < 2^53
    out = np.zeros(len(pdf))
    for i in range(len(pdf)):
        m = keep & (gid == gid[i]) & (ts > ts[i] - window) & (ts <= ts[i])
        f = np.bincount(item[m], weights=v[m])
        out[i] = float((np.abs(f) ** p).sum() ** (1 / p))
    return out


@pytest.mark.parametrize("value, p", [("b", 2.0), (None, 1.0),
                                      # each value kind and each p once by default; the cross product: --slow
                                      pytest.param("b", 1.0, marks=pytest.mark.slow),
                                      pytest.param(None, 2.0, marks=pytest.mark.slow)])
def test_native_lp_norms_are_exact(spark, rows, value, p):
    """LpNorm with p = 1 or 2 and integral (or no) values: the native plan
    (Spark's windows, no Python) answers every row exactly, as the norm of
    its frame's frequencies computed by pandas: a composite key with
    nulls, null items and values, a run of peers, frames of one unit to
    most of the stream; the sketches' Python pass estimates the same."""
    pdf = rows.iloc[::8].reset_index(drop=True)  # 750 rows
    pdf = pdf.assign(g=np.where(pdf.rid % 5 == 0, None, (pdf.rid % 2).astype(str)))
    df = spark.createDataFrame(pdf)
    for window in (1, 300, 40_000):
        spec = LpNorm("dst", window=window, value=value, p=p)
        native = sliding_over(df, ["k", "g"], "ts", l=spec)
        assert "MapInArrow" not in native._jdf.queryExecution().executedPlan().toString()
        got = native.select("rid", "l").toPandas().sort_values("rid").l.to_numpy()
        want = _brute_lp(pdf, ["k", "g"], window, p, value)
        assert np.allclose(got, want, rtol=1e-12, atol=0), window
        assert dict(native.dtypes)["l"] == "double"
    estimated = sliding_over(df, ["k", "g"], "ts", l=LpNorm("dst", window=300, value=value, p=p, eps=0.1),
                             strategy="shuffle").select("rid", "l").toPandas().sort_values("rid").l.to_numpy()
    exact = _brute_lp(pdf, ["k", "g"], 300, p, value)
    assert np.mean(np.abs(estimated - exact) <= 0.1 * exact) >= 0.9


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_native_lp_norms_are_exact_past_int64_squares(spark, p):
    """Frequencies whose squares, or sum of squares, pass int64 (bytes of
    a busy item over an hour: ~3e9 and up), up to 2^62, then small ones
    after the burst leaves: each row's norm is the nearest double to the
    exact norm (Python's integers), bit for bit.  (An L_1 norm past int64
    is the sum's OverflowError, as Sum's.)"""
    ts = [1, 2, 2, 3, 4, 10, 11, 30, 31, 31, 50, 50, 70, 71, 71]
    items = [1, 1, 2, 3, 4, 1, 1, 2, 5, 2, 6, 7, 8, 8, 9]
    values = [5, 3_000_000_000, 2_500_000_000, 2_000_000_000, 7, 3 * 10**18, 4 * 10**18, 1, 3, 12, 2**62, 2**61,
              5, 6, 0]
    window = 15
    df = spark.createDataFrame(pd.DataFrame({"k": 1, "ts": ts, "i": items, "b": values}))
    got = sliding_over(df, "k", "ts", l=LpNorm("i", window=window, value="b", p=p)).toPandas()
    with ansi_mode(spark, False):  # where bigint arithmetic wraps around
        wrapped = sliding_over(df, "k", "ts", l=LpNorm("i", window=window, value="b", p=p)).toPandas()
    assert sorted(wrapped.itertuples(index=False)) == sorted(got.itertuples(index=False))
    for row in got.itertuples():
        f = {}
        for t, i, v in zip(ts, items, values):
            if row.ts - window < t <= row.ts:
                f[i] = f.get(i, 0) + v
        exact = sum(abs(x) ** int(p) for x in f.values())
        assert row.l == (float(exact) if p == 1.0 else math.sqrt(float(exact))), row


def test_native_lp_norms_only_where_exact(spark, sdf):
    """Other p and fractional values keep the sketches' estimates (auto),
    and strategy='native' names the spec it cannot plan."""
    for spec, df in ((LpNorm("dst", window=50, p=1.5), sdf),
                     (LpNorm("dst", window=50, value="b"), sdf.withColumn("b", F.col("b") / 2))):
        plan = sliding_over(df, "k", "ts", l=spec)._jdf.queryExecution().executedPlan().toString()
        assert "MapInArrow" in plan
        with pytest.raises(ValueError, match=r"strategy 'native': no native Spark plan for l \(LpNorm\)"):
            sliding_over(df, "k", "ts", l=spec, strategy="native")


@pytest.mark.parametrize("strategy", ["native", "shuffle"])
def test_lp_norm_values_are_checked_alike(spark, strategy):
    """A negative value stops both plans with one message, and the native
    plan checks it under its windows: a filter after them does not hide it."""
    df = spark.createDataFrame(pd.DataFrame({"k": ["a"] * 4, "ts": [1, 2, 3, 4], "i": [1, 1, 2, 1],
                                             "b": [3, -5, 4, 1]}))
    with pytest.raises(InvalidInputError, match="^column b holds -5.0 .key 'a'.: LpNorm needs finite non-negative "
                                                "numbers .NaN is never skipped: filter or fill it.$"), errors():
        sliding_over(df, "k", "ts", l=LpNorm("i", window=5, value="b"), strategy=strategy).where("ts != 2").collect()


def test_checks_on_the_driver(sdf):
    with pytest.raises(ValueError, match="already has a column"):
        sliding_over(sdf, "k", "ts", b=Count(window=5))
    with pytest.raises(ValueError, match="not in the DataFrame"):
        sliding_over(sdf, "k", "nope", c=Count(window=5))
    with pytest.raises(ValueError, match="window"):
        sliding_over(sdf, "k", "ts", c=Count(window=0))
    with pytest.raises(TypeError, match="integral"):
        sliding_over(sdf.withColumn("b", F.col("b").cast("double")), "k", "ts", s=Sum("b", window=5))
    with pytest.raises(TypeError, match="Count"):
        sliding_over(sdf, "k", "ts", c="count")
    with pytest.raises(ValueError, match="at least one spec"):
        sliding_over(sdf, "k", "ts")


@pytest.mark.parametrize("strategy", ["native", "shuffle"])
def test_null_timestamp_names_the_column(spark, strategy):
    pdf = pd.DataFrame({"k": [1, 1], "ts": pd.array([1, None], dtype="Int64"), "i": [3, 4]})
    for spec in (Count(window=5), LpNorm("i", window=5)):  # frames, and a plan of the family's own
        with pytest.raises(InvalidInputError, match="^column ts holds null .key 1.: timestamps must not be null$"), \
                errors():
            sliding_over(spark.createDataFrame(pdf), "k", "ts", c=spec, strategy=strategy).collect()


def test_native_plan_checks_nulls_only_where_the_schema_allows_them(spark):
    """The null check sits in the answers' projection, and not in the plan
    at all for a time column the schema says is never null (the check is
    what sliding_over adds to the exact two-frame query)."""
    from pyspark.sql import functions as F

    def plan(df):
        return df._jdf.queryExecution().executedPlan().toString()

    never = spark.range(10).select((F.col("id") % 2).alias("k"), F.col("id").alias("ts"))
    assert not never.schema["ts"].nullable
    assert "timestamps must not be null" not in plan(sliding_over(never, "k", "ts", c=Count(window=5)))
    maybe = never.withColumn("ts", F.when(F.col("ts") >= 0, F.col("ts")))
    assert "timestamps must not be null" in plan(sliding_over(maybe, "k", "ts", c=Count(window=5)))
    assert sliding_over(maybe, "k", "ts", c=Count(window=5)).orderBy("ts").select("c").collect()[-1][0] == 3
    # a value column that is never null: two windows for Sum, not four, same answers
    valued = never.withColumn("b", F.col("ts").bitwiseAND(F.lit(3))).withColumn("ts", F.shiftright("ts", 1))
    assert not valued.schema["b"].nullable
    got = {s: sliding_over(valued, "k", "ts", strategy=s, s=Sum("b", window=2)).orderBy("k", "ts", "b").toPandas()
           for s in ("native", "shuffle")}
    assert got["native"].s.tolist() == got["shuffle"].s.tolist()
    assert plan(sliding_over(valued, "k", "ts", s=Sum("b", window=2))).count("count(") == 0


@pytest.mark.parametrize("nullable", [True, False])
def test_native_counts_run_the_hand_written_plan(spark, nullable):
    """Counts per row: the physical plan ``sliding_over`` runs is the one
    of the exact two-frame query written by hand as SQL text (with the
    null check a nullable time needs), operator for operator, up to
    expression ids and the error's text.  So the two cannot differ in
    what the job does, only in building the query (a few ms, timed in
    benchmarks/bench_per_row.py, where they tie within the machine's
    noise)."""
    import re

    def plan(df):
        text = df._jdf.queryExecution().executedPlan().toString()
        text = re.sub(r"raise_error\(USER_RAISED_EXCEPTION, .*?, NullType\)", "raise_error(...)", text)
        return re.sub(r"(#\d+L?|plan_id=\d+)", "", text)

    df = spark.range(100).select((F.col("id") % 2).alias("k"), F.shiftright("id", 1).alias("ts"))
    if nullable:
        df = df.withColumn("ts", F.when(F.col("ts") >= 0, F.col("ts")))
    assert df.schema["ts"].nullable == nullable
    order = "PARTITION BY k ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND"
    n = f"count(1) OVER ({order} CURRENT ROW) - count(1) OVER ({order} 700 PRECEDING)"
    if nullable:
        n = f"CASE WHEN ts IS NULL THEN raise_error('a null time') ELSE {n} END"
    by_hand = df.selectExpr("*", f"{n} AS n")
    ours = sliding_over(df, "k", "ts", n=Count(window=700))
    assert plan(ours) == plan(by_hand)
    assert ("raise_error" in plan(ours)) == nullable
    assert sorted(ours.collect()) == sorted(by_hand.collect())



def test_native_plan_computes_each_frame_aggregate_once(spark, sdf):
    """Spark does not merge equal window expressions: the native plan names
    each aggregate over a frame once (udaf.sql_text.Frame), however often a
    family's answer uses it: in place where each is named once (one
    projection, as a hand-written query), else in a projection of its own
    under the answers'; the rows' columns come out as they went in, names
    alike included."""
    def windows(df):
        return df._jdf.queryExecution().optimizedPlan().toString().count("windowspecdefinition")

    df = sdf.withColumn("g", (F.col("rid") % 3).cast("string"))
    # Sum of a nullable column: count up to the row and before its frame,
    # try_sum and min up to the row, sum before the frame: five, not seven
    assert windows(sliding_over(df, "k", "ts", s=Sum("b", window=700))) == 5
    # Count needs two, and two Counts over the same frames share them
    assert windows(sliding_over(df, "k", "ts", n=Count(window=700))) == 2
    assert windows(sliding_over(df, "k", "ts", n=Count(window=700), m=Count(window=700))) == 2
    want = _answers(df, "shuffle", n=Count(window=700), s=Sum("b", window=700))
    got = sliding_over(df, ["k", "g"], "ts", n=Count(window=700), s=Sum("b", window=700))
    assert got.columns == [*df.columns, "n", "s"]
    assert got.select("rid", "n", "s").toPandas().sort_values("rid").reset_index(drop=True).equals(want)
    twice = df.select("rid", "k", "ts", "b", F.col("g").alias("x"), (F.col("rid") * 2).alias("x"))
    got = sliding_over(twice, "k", "ts", n=Count(window=700))
    assert got.columns == ["rid", "k", "ts", "b", "x", "x", "n"]
    assert sorted(map(tuple, got.toDF("rid", "k", "ts", "b", "x", "x2", "n").select("rid", "x2", "n").collect())) == \
        sorted(map(tuple, sliding_over(df, "k", "ts", n=Count(window=700))
                   .select("rid", (F.col("rid") * 2).alias("x2"), "n").collect()))


@pytest.mark.parametrize("strategy", ["native", "shuffle"])
def test_a_negative_value_cannot_hide_behind_a_filter(spark, strategy):
    """The native plan checks values through the smallest value up to each
    row, after the window: dropping the row that holds the negative value
    still stops the job at the rows whose sums it would change."""
    df = spark.createDataFrame(pd.DataFrame({"k": ["a"] * 4, "ts": [1, 2, 3, 4], "b": [3, -5, 4, 1]}))
    with pytest.raises(InvalidInputError, match="^column b holds -5 .key 'a'.: Sum needs non-negative integers$"), \
            errors():
        sliding_over(df, "k", "ts", s=Sum("b", window=5), strategy=strategy).where("ts != 2").collect()
    if strategy == "native":  # rows before the negative value are answered (the Python pass reads the key whole)
        assert [r.s for r in sliding_over(df, "k", "ts", s=Sum("b", window=5), strategy=strategy)
                .where("ts < 2").collect()] == [3]


@pytest.mark.parametrize("strategy", ["native", "shuffle"])
def test_bad_values_name_column_and_key(spark, strategy):
    df = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": [1, 2], "b": [3, -5]}))
    with pytest.raises(InvalidInputError, match="^column b holds -5 .key 'a'.: Sum needs non-negative integers$"), \
            errors():
        sliding_over(df, "k", "ts", s=Sum("b", window=5), strategy=strategy).collect()
    big = spark.createDataFrame(pd.DataFrame({"k": ["a", "a"], "ts": [1, 2], "b": [2**62, 2**62]}))
    with pytest.raises(OverflowError, match="the sum of a key's values exceeds int64"), errors():
        sliding_over(big, "k", "ts", s=Sum("b", window=5), strategy=strategy).collect()
    if strategy == "native":  # not Spark's wrapped-around sum without ANSI mode either
        with ansi_mode(spark, False), \
                pytest.raises(OverflowError, match=r"the sum of a key's values exceeds int64 \(key 'a'\)"), errors():
            sliding_over(big, "k", "ts", s=Sum("b", window=5), strategy=strategy).collect()


def test_strategy_is_checked(sdf):
    with pytest.raises(ValueError, match="strategy must be 'auto', 'native' or 'shuffle'"):
        sliding_over(sdf, "k", "ts", c=Count(window=5), strategy="two_phase")
    with pytest.raises(ValueError, match=r"no native Spark plan for d \(Distinct\)"):
        sliding_over(sdf, "k", "ts", c=Count(window=5), d=Distinct("dst", window=5), strategy="native")


def _answers(df, strategy, **specs):
    return sliding_over(df, ["k", "g"], "ts", strategy=strategy, **specs).select("rid", *specs) \
        .toPandas().sort_values("rid").reset_index(drop=True)


@pytest.mark.parametrize("window", [1, 700, 2_000, 40_000])
def test_native_plan_equals_the_python_pass_and_spark_frames(sdf, window):
    """The native plan (two growing frames) against the Python pass and
    Spark's sliding RANGE frame, row by row: bigint time (ordered as a
    decimal), a composite key with nulls, null values, a run of peers."""
    df = sdf.withColumn("g", F.when(F.col("rid") % 7 == 0, None).otherwise((F.col("rid") % 3).cast("string")))
    specs = dict(n=Count(window=window), s=Sum("b", window=window))
    native, shuffled = _answers(df, "native", **specs), _answers(df, "shuffle", **specs)
    assert native.equals(shuffled)
    want = _spark_frames(df, ["k", "g"], window).toPandas().sort_values("rid").reset_index(drop=True)
    assert native.n.tolist() == want.n_.tolist()
    assert native.s.fillna(-1).tolist() == want.s_.fillna(-1).tolist()
    assert native.s.isna().any() or window > 1  # frames with no value give null, as sum() does


def test_native_plan_on_timestamps_and_floating_keys(spark):
    """TimestampType (ordered as a long) with an interval window, and
    double keys: NaN with NaN, -0.0 with 0.0, as Spark groups them."""
    base = dt.datetime(2026, 3, 1)
    pdf = pd.DataFrame({"rid": range(8), "k": [np.nan, np.nan, -0.0, 0.0, 1.5, 1.5, 1.5, np.nan],
                        "t": [base + dt.timedelta(minutes=m) for m in (0, 30, 0, 59, 0, 60, 61, 61)],
                        "b": pd.array([1, 2, 3, None, 5, 6, 7, 8], dtype="Int64")})
    df = spark.createDataFrame(pdf)
    specs = dict(n=Count(window="1 hour"), s=Sum("b", window="1 hour"))
    got = {s: sliding_over(df, "k", "t", strategy=s, **specs).toPandas().sort_values("rid") for s in ("native", "shuffle")}
    assert got["native"].n.tolist() == got["shuffle"].n.tolist() == [1, 2, 1, 2, 1, 1, 2, 2]
    assert got["native"].s.tolist() == got["shuffle"].s.tolist() == [1, 3, 3, 3, 5, 6, 13, 10]


def test_native_plan_at_the_ends_of_int64(spark):
    """Times near both ends of int64, windows up to its maximum: the
    Python pass answers them all; the native plan (Spark computes each
    frame's start t - window) answers up to the top and refuses a time
    whose frame start would fall below int64: under ANSI mode (the
    default) Spark's overflow error stops the window, as it stops the
    hand-written query; without ANSI (where the window's start wraps), the
    project's message does."""
    from pyspark.errors import ArithmeticException

    top, bottom = 2**63 - 1, -(2**63)
    ts = [bottom, bottom + 3, bottom + 20, -5, 0, top - 5, top]
    df = spark.createDataFrame(pd.DataFrame({"rid": range(len(ts)), "k": 1, "ts": ts}))
    for window in (10, 2**62, top):
        want = [sum(t - window < u <= t for u in ts) for t in ts]
        got = sliding_over(df, "k", "ts", strategy="shuffle", n=Count(window=window)).toPandas().sort_values("rid")
        assert got.n.tolist() == want, window
        with pytest.raises(ArithmeticException, match="ARITHMETIC_OVERFLOW"):
            sliding_over(df, "k", "ts", strategy="native", n=Count(window=window)).collect()
        with ansi_mode(spark, False), pytest.raises(InvalidInputError, match=f"^column ts holds {bottom} .key 1.: "
                                                    f"the native per-row plan takes times from {bottom + window} on"), \
                errors():
            sliding_over(df, "k", "ts", strategy="native", n=Count(window=window)).collect()
    high = df.where(F.col("ts") >= -5)
    for window in (10, 2**62):
        want = [sum(t - window < u <= t for u in ts[3:]) for t in ts[3:]]
        got = sliding_over(high, "k", "ts", strategy="native", n=Count(window=window)).toPandas().sort_values("rid")
        assert got.n.tolist() == want, window


def _spark_frames(df, keys, window):
    frame = Window.partitionBy(*keys).orderBy("ts").rangeBetween(-(window - 1), 0)
    return df.select("rid", F.count(F.lit(1)).over(frame).alias("n_"), F.sum("b").over(frame).alias("s_"),
                     F.size(F.collect_set("dst").over(frame)).alias("d_"))


@pytest.mark.parametrize("batch_rows", [37, 1000])
def test_keys_spanning_arrow_batches(spark, sdf, batch_rows):
    """Keys of two columns (one with nulls) whose runs cross Arrow batch
    boundaries, many keys per batch and keys longer than a batch: each
    row still gets its own key's frame."""
    df = sdf.withColumn("g", F.when(F.col("rid") % 7 == 0, None).otherwise((F.col("rid") % 5).cast("string")))
    window = 1_500
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
    try:
        got = sliding_over(df, ["k", "g"], "ts", n=Count(window=window), s=Sum("b", window=window),
                           d=Distinct("dst", window=window)).join(_spark_frames(df, ["k", "g"], window), "rid")
        joined = got.toPandas()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    assert len(joined) == 6000
    assert (joined.n == joined.n_).all()
    assert (joined.s.fillna(-1) == joined.s_.fillna(-1)).all()
    assert (joined.d == joined.d_).all()


def test_floating_key_takes_the_pandas_path_with_the_same_answers(sdf):
    window = 2_000
    specs = dict(n=Count(window=window), s=Sum("b", window=window), d=Distinct("dst", window=window))
    by_int = sliding_over(sdf, "k", "ts", **specs).select("rid", "n", "s", "d")
    by_float = sliding_over(sdf.withColumn("k", F.col("k").cast("double")), "k", "ts", **specs) \
        .select("rid", F.col("n").alias("n_"), F.col("s").alias("s_"), F.col("d").alias("d_"))
    joined = by_int.join(by_float, "rid").toPandas()
    assert len(joined) == 6000
    assert (joined.n == joined.n_).all() and (joined.d == joined.d_).all()
    assert (joined.s.fillna(-1) == joined.s_.fillna(-1)).all()


@pytest.mark.slow  # the benchmarks' own baselines (bench_per_row.py): python -m pytest --slow
def test_benchmark_baselines_are_exact(sdf):
    """The exact plain-Spark queries benchmarks/bench_per_row.py times
    against sliding_over give sliding_over's answers (an honest baseline)."""
    bench = pytest.importorskip("benchmarks.bench_per_row")
    df = sdf.withColumnRenamed("dst", "item").fillna({"item": -1})
    for window in (1, 5_000):  # peers only; frames of ~250 rows (times span 30,000 over 4 keys)
        ours = sliding_over(df, "k", "ts", n=Count(window=window), d=Distinct("item", window=window)) \
            .select("rid", "n", "d").toPandas().sort_values("rid").reset_index(drop=True)
        counts = bench.exact_counts(df, window).select("rid", "n").toPandas().sort_values("rid")
        distinct = bench.exact_distinct(df, window).select("rid", "d").toPandas().sort_values("rid")
        assert counts.n.tolist() == ours.n.tolist(), window
        assert distinct.d.tolist() == ours.d.tolist(), window
        sums = sliding_over(df, "k", "ts", s=Sum("b", window=window)).select("rid", "s").toPandas() \
            .sort_values("rid").s.fillna(-1).tolist()
        for checked in (False, True):  # with and without the checks sliding_over makes
            hand = bench.exact_sums(df, window, value="b", checked=checked).select("rid", "s").toPandas()
            assert hand.sort_values("rid").s.fillna(-1).tolist() == sums, (window, checked)
        for p, value in ((2.0, "b"), (2.0, None), (1.0, "b")):
            lp = sliding_over(df, "k", "ts", l=LpNorm("item", window=window, value=value, p=p)) \
                .select("rid", "l").toPandas().sort_values("rid").l.to_numpy()
            for decimal in (False, True):
                hand = bench.exact_lp_norms(df, window, p, value=value, decimal=decimal).select("rid", "l") \
                    .toPandas().sort_values("rid").l.to_numpy()
                assert np.array_equal(hand, lp), (window, p, value, decimal)
