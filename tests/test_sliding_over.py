"""udaf.sliding_over against Spark's own window frames, row by row."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from pyspark.errors import PythonException  # noqa: E402
from pyspark.sql import Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lp_norms import rows_for  # noqa: E402
from udaf import Count, Distinct, LpNorm, Sum, sliding_over  # noqa: E402

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
                                                delta=delta, seed=4)).toPandas()
    assert rows_for(1.0, eps, delta) > 0
    errors = []
    for _, r in got.sample(200, random_state=1).iterrows():
        g = rows[(rows.k == r.k) & (rows.ts > r.ts - window) & (rows.ts <= r.ts)].dropna(subset=["dst", "b"])
        exact = g.groupby("dst").b.sum().abs().sum()
        errors.append(abs(r.l1 / exact - 1) if exact else abs(r.l1))
    assert np.mean(np.array(errors) <= eps) >= 1 - 2 * delta


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


def test_null_timestamp_names_the_column(spark):
    pdf = pd.DataFrame({"k": [1, 1], "ts": pd.array([1, None], dtype="Int64")})
    with pytest.raises(PythonException, match="InvalidInputError: column ts holds null .key 1.: timestamps must not be null"):
        sliding_over(spark.createDataFrame(pdf), "k", "ts", c=Count(window=5)).collect()


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
