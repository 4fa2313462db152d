"""aggregate(strategy="native"): Spark's own aggregates, no Python in the
plan, the same answers, bounds and messages as the exact ``shuffle``
strategy, whatever the keys, nulls and ``now``; ``auto`` runs it when
every spec has a native form."""

from __future__ import annotations

import math

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from pyspark.errors import PythonException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tests.conftest import ansi_mode  # noqa: E402
from udaf import Count, Distinct, DistinctFM, LpNorm, Sum, aggregate  # noqa: E402

pytestmark = pytest.mark.spark
SPECS = dict(n=Count(1_000), s=Sum("b", 2_000), dd=Distinct("d", 500), f=DistinctFM("d", 3_000))


def plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def rows(df) -> list:
    """Rows as sortable tuples, NaN keys made comparable."""
    def norm(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v
    return sorted((tuple(norm(v) for v in r) for r in df.collect()), key=repr)


def events(seed: int, n: int = 3_000):
    rng = np.random.default_rng(seed)
    b = rng.integers(0, 100, n)
    d = rng.integers(0, 300, n)
    return pd.DataFrame({
        "k": pd.array(np.where(rng.random(n) < 0.05, None, rng.choice(["a", "b", "c"], n)), dtype=object),
        "i": pd.array(np.where(rng.random(n) < 0.05, None, rng.integers(0, 4, n)), dtype="Int64"),
        "x": rng.choice([0.0, -0.0, float("nan"), 1.5], n),
        "ts": rng.integers(0, 10_000, n),
        "b": pd.array(np.where(rng.random(n) < 0.1, None, b), dtype="Int64"),
        "d": pd.array(np.where(rng.random(n) < 0.1, None, d), dtype="Int64"),
    })


@pytest.mark.parametrize("seed, by", [(1, "k"), (2, ["k", "i"]), (3, "x")])
def test_native_equals_the_exact_shuffle_strategy(spark, seed, by):
    """String, composite (with null parts) and float keys (NaN, -0.0 and
    0.0 grouped as Spark groups them); null values and items; now omitted
    (each key's own newest row per spec), inside and after the data."""
    df = spark.createDataFrame(events(seed)).repartition(3)
    for now in (None, 9_000, 20_000):
        native = aggregate(df, by, "ts", strategy="native", now=now, bounds=True, **SPECS)
        shuffle = aggregate(df, by, "ts", strategy="shuffle", now=now, bounds=True, **SPECS)
        assert [(f.name, f.dataType) for f in native.schema] == [(f.name, f.dataType) for f in shuffle.schema]
        got = rows(native)
        assert got == rows(shuffle), now
        keys = df if now is None else df.where(f"ts > {now} - 3000 AND ts <= {now}")  # the widest window
        assert len(got) == len(rows(keys.select(*([by] if isinstance(by, str) else by)).distinct()))


@pytest.mark.parametrize("kind", ["timestamp", "timestamp_ntz", "date", "bigint"])
def test_now_reads_only_the_widest_window_from_parquet(spark, tmp_path, kind):
    """With now, every strategy reads the rows of the widest window alone:
    the range on the raw time column reaches the Parquet scan as a pushed
    filter, and rows after now or before the window do not count."""
    import datetime as dt

    base = dt.datetime(2026, 1, 1)
    n = 400
    pdf = pd.DataFrame({"k": ["a", "b"] * (n // 2), "ts": np.arange(n), "b": np.arange(n) % 7})
    sdf = spark.createDataFrame(pdf)
    if kind == "bigint":
        spans, now = (50, 120), 300
    else:
        unit = "days" if kind == "date" else "hours"
        sdf = sdf.withColumn("ts", F.expr(f"CAST(TIMESTAMP '2026-01-01 00:00:00' + make_dt_interval("
                                          f"{'ts' if unit == 'days' else '0'}, {'0' if unit == 'days' else 'ts'}, 0, 0)"
                                          f" AS {kind})"))
        spans = (f"50 {unit}", f"120 {unit}")
        now = (base + dt.timedelta(**{unit: 300})).date() if kind == "date" else base + dt.timedelta(hours=300)
    path = str(tmp_path / "events")
    sdf.write.parquet(path)
    stored = spark.read.parquet(path)
    specs = dict(n=Count(spans[0]), s=Sum("b", spans[1]))
    for strategy in ("native", "shuffle", "two_phase"):
        out = aggregate(stored, "k", "ts", now=now, strategy=strategy, bounds=True, **specs)
        assert "PushedFilters: [IsNotNull(ts)" not in plan(out)
        assert "GreaterThan(ts" in plan(out) and "LessThanOrEqual(ts" in plan(out), strategy
        got = {r.k: (r.n, r.s) for r in out.collect()}

        def exact(parity):  # rows 0..399, a: even times, b: odd; b = time % 7
            return (float(sum(1 for t in range(251, 301) if t % 2 == parity)),
                    float(sum(t % 7 for t in range(181, 301) if t % 2 == parity)))
        want = {"a": exact(0), "b": exact(1)}
        if strategy == "two_phase":  # within eps
            assert all(abs(got[k][i] - want[k][i]) <= 0.01 * want[k][i] for k in want for i in (0, 1))
        else:
            assert got == want, strategy


def test_auto_runs_native_unless_a_spec_has_no_native_form(spark):
    df = spark.createDataFrame(events(4)).repartition(2)
    auto = aggregate(df, "k", "ts", n=Count(1_000), dd=Distinct("d", 500))
    assert "Python" not in plan(auto) and "ArrowEval" not in plan(auto)
    assert rows(auto) == rows(aggregate(df, "k", "ts", strategy="shuffle", n=Count(1_000), dd=Distinct("d", 500)))
    with_lp = aggregate(df, "k", "ts", n=Count(1_000), l2=LpNorm("d", 1_000, value="b"))
    assert "Python" not in plan(with_lp) and "MapInArrow" not in plan(with_lp)  # integral values: exact, native
    fractional = aggregate(df.withColumn("h", F.col("b") / 2), "k", "ts", n=Count(1_000),
                           l2=LpNorm("d", 1_000, value="h"))
    assert "MapInArrow" in plan(fractional)  # no native plan: synopses or rows in Python
    sketched = aggregate(df, "k", "ts", sketches=True, n=Count(1_000))
    assert "n_sketch" in sketched.columns


def test_each_keys_newest_joins_on_equality_where_no_key_is_null(spark):
    """Without ``now``, the rows meet their key's newest time through a
    join with the per-key table: null-safe (two join keys, a hashed
    relation of rows) only on a key column holding a null, plain equality
    otherwise (one bigint key: Spark's relation of longs), same answers."""
    df = spark.createDataFrame(events(5)).repartition(2)
    specs = dict(n=Count(1_000), s=Sum("b", 2_000))
    with_null = aggregate(df, ["k", "i"], "ts", strategy="native", **specs)
    without = df.where("k IS NOT NULL")
    assert without.schema["k"].nullable  # the schema allows nulls; the data has none
    plain = aggregate(without, ["k", "i"], "ts", strategy="native", **specs)
    joins = [line for line in plan(with_null).splitlines() if "HashJoin" in line]
    assert "isnull(k" in joins[0] and "isnull(i" in joins[0]
    joins = [line for line in plan(plain).splitlines() if "HashJoin" in line]
    assert "isnull(k" not in joins[0] and "isnull(i" in joins[0]  # i still holds nulls
    for out, rows_ in ((with_null, df), (plain, without)):
        assert rows(out) == rows(aggregate(rows_, ["k", "i"], "ts", strategy="shuffle", **specs))


def test_now_and_one_window_give_the_hand_written_plan(spark):
    """aggregate() read the widest window's rows: the specs of that window
    aggregate them unconditioned (no time column in the plan past the
    filter), as ``df.where(...).groupBy(k).agg(...)`` does."""
    maybe = spark.createDataFrame(events(6)).repartition(2)
    df = maybe.withColumn("ts", F.coalesce("ts", F.lit(0)))  # a time the schema says is never null
    assert maybe.schema["ts"].nullable and not df.schema["ts"].nullable
    out = aggregate(df, "k", "ts", now=9_000, strategy="native", n=Count(1_000), s=Sum("b", 1_000))
    assert "__t" not in plan(out)
    want = df.where("ts > 8000 AND ts <= 9000").groupBy("k").agg(
        F.count(F.lit(1)).cast("double").alias("n"), F.sum("b").cast("double").alias("s"))
    assert rows(out) == rows(want)
    assert list(out.columns) == ["k", "n", "s"]
    narrower = aggregate(df, "k", "ts", now=9_000, strategy="native", n=Count(500), s=Sum("b", 1_000))
    assert "__t" in plan(narrower)  # Count's window is narrower than the rows read: conditioned
    # a time that may be null is checked (null rows pass the range to be
    # reported), with the same answers where there is none
    checked = aggregate(maybe, "k", "ts", now=9_000, strategy="native", n=Count(1_000), s=Sum("b", 1_000))
    assert "__t" in plan(checked) and rows(checked) == rows(want)


def test_now_does_not_count_a_null_time(spark):
    """With ``now``, rows of a null time pass the pushed-down range so
    that every strategy reports them, also when every spec's window is the
    widest (the rows read are then aggregated with few conditions)."""
    df = spark.createDataFrame([("a", 1, 5), ("a", None, 7), ("a", 3, 2)], "k string, ts long, b long")
    for windows in ((10, 10), (10, 2)):
        with pytest.raises(Exception, match=r"InvalidInputError: column ts holds null \(key 'a'\): timestamps "
                                            r"must not be null"):
            aggregate(df, "k", "ts", now=3, n=Count(windows[0]), s=Sum("b", windows[1])).collect()


@pytest.mark.parametrize("seed, by", [(7, "k"), (8, ["k", "i"])])
def test_native_lp_norms_equal_the_exact_shuffle_strategy(spark, seed, by, request):
    """LpNorm with integral values (or none): each item's sum, then the
    key's norm, from Spark's aggregates, alone in the request or beside
    other specs; the exact Python pass's answers to the last bits."""
    slow = request.config.getoption("--slow")
    df = spark.createDataFrame(events(seed)).repartition(3)
    # each key kind with each now is the slow run's; the default one takes
    # each key kind and each now once (10-16 s a key kind for all three)
    nows = (None, 9_000, 20_000) if slow else {7: (None, 20_000), 8: (9_000,)}[seed]
    for now in nows:
        for specs in (dict(l=LpNorm("d", 1_500, value="b", p=2.0)),
                      dict(l=LpNorm("d", 3_000, p=1.0), n=Count(1_000),
                           h=LpNorm("b", 700, value="b", p=0.5))):
            native = aggregate(df, by, "ts", strategy="native", now=now, **specs)
            assert "MapInArrow" not in plan(native)
            shuffle = aggregate(df, by, "ts", strategy="shuffle", now=now, **specs)
            assert [(f.name, f.dataType) for f in native.schema] == [(f.name, f.dataType) for f in shuffle.schema]
            got, want = rows(native), rows(shuffle)
            assert len(got) == len(want) and [r[:-len(specs)] for r in got] == [r[:-len(specs)] for r in want]
            assert np.allclose([r[-len(specs):] for r in got], [r[-len(specs):] for r in want], rtol=1e-12, atol=0)
    bad = spark.createDataFrame([("a", 1, 5, 3), ("a", 2, -5, 4)], "k string, ts long, v long, i long")
    want = r"InvalidInputError: column v holds -5.0 \(key 'a'\): LpNorm needs finite non-negative numbers"
    with pytest.raises(Exception, match=want):
        aggregate(bad, "k", "ts", strategy="native", l=LpNorm("i", 10, value="v")).collect()
    with pytest.raises(PythonException, match=want.replace("InvalidInputError: ", "")):
        aggregate(bad, "k", "ts", strategy="shuffle", l=LpNorm("i", 10, value="v")).collect()


def test_native_refuses_what_it_cannot_do(spark):
    df = spark.createDataFrame(events(5))
    with pytest.raises(ValueError, match=r"no native Spark plan for l2 \(LpNorm\)"):
        aggregate(df.withColumn("h", F.col("b") / 2), "k", "ts", strategy="native", n=Count(10),
                  l2=LpNorm("d", 10, value="h"))
    with pytest.raises(ValueError, match="sketches=True builds synopses"):
        aggregate(df, "k", "ts", strategy="native", sketches=True, n=Count(10))


def test_native_raises_the_project_messages(spark):
    """Spark raises them (raise_error): the message every strategy gives,
    key included, after the class name."""
    df = spark.createDataFrame([("a", 1, 5), ("a", 2, -5), ("b", None, 7)], "k string, ts long, v long")
    with pytest.raises(Exception, match=r"InvalidInputError: column ts holds null \(key 'b'\): timestamps "
                                        r"must not be null"):
        aggregate(df, "k", "ts", strategy="native", n=Count(10)).collect()
    ok = df.where(F.col("ts").isNotNull())
    want = r"InvalidInputError: column v holds -5 \(key 'a'\): Sum needs non-negative integers"
    with pytest.raises(Exception, match=want):
        aggregate(ok, "k", "ts", strategy="native", s=Sum("v", 10)).collect()
    with pytest.raises(PythonException, match=want.replace("InvalidInputError: ", "")):
        aggregate(ok, "k", "ts", strategy="shuffle", s=Sum("v", 10)).collect()


# with ANSI mode Spark's own sum refuses (ARITHMETIC_OVERFLOW); without it the
# plans' own check must: the default run keeps the latter (python -m pytest --slow: both)
@pytest.mark.parametrize("ansi", [pytest.param(True, marks=pytest.mark.slow), False])
def test_sums_past_int64_are_refused_in_either_ansi_mode(spark, ansi, request):
    """Every sum of the native plan is exact or refused: with ANSI mode by
    Spark's ``ARITHMETIC_OVERFLOW`` (the plain ``sum`` of the hand-written
    query), without it, where that ``sum`` wraps around silently (2**62
    three times came out as -2**62), by the Python pass's OverflowError,
    key named.  The rows sit in two partitions, so partial aggregation
    runs; a total of exactly 2**63 - 1 is an answer, not an overflow."""
    from pyspark.errors import ArithmeticException

    from udaf import Frequencies, HeavyHitters, errors

    big = 2**62
    over = spark.createDataFrame([("a", 1, big, 7), ("a", 2, big, 7), ("a", 3, big, 7), ("b", 3, 1, 7)],
                                 "k string, ts long, v long, i long").repartition(2)
    fits = spark.createDataFrame([("a", 1, big, 7), ("a", 2, big - 1, 7)], "k string, ts long, v long, i long") \
        .repartition(2)
    specs = {"sum": dict(s=Sum("v", 10)), "frequency": dict(s=Frequencies("i", 10, value="v")),
             "L_1": dict(s=LpNorm("i", 10, p=1.0, value="v")), "L_2": dict(s=LpNorm("i", 10, value="v")),
             "L_2 with a count": dict(n=Count(10), s=LpNorm("i", 10, value="v")),
             "heavy hitters": dict(s=HeavyHitters("i", 10, phi=0.5, value="v")),
             "heavy hitters with a count": dict(n=Count(10), s=HeavyHitters("i", 10, phi=0.5, value="v"))}
    if not request.config.getoption("--slow"):  # the default run: the plain plans and the joins of a count
        specs = {what: specs[what] for what in ("sum", "frequency", "L_2 with a count", "heavy hitters with a count")}
    with ansi_mode(spark, ansi):
        for j, (what, spec) in enumerate(specs.items()):
            now = (None, 3)[j % 2]  # each key's newest row, or a given time: the same sums
            refused = pytest.raises(ArithmeticException, match="ARITHMETIC_OVERFLOW") if ansi else \
                pytest.raises(OverflowError, match=r"^the sum of a key's values exceeds int64 \(key 'a'\)$")
            with refused, errors():
                aggregate(over, "k", "ts", strategy="native", now=now, **spec).collect()
        # every family's sum in one call (the plans' joins: a count with
        # a norm or a list); Frequencies answers the window's total
        every = dict(n=Count(10), s=Sum("v", 10), f=Frequencies("i", 10, value="v"),
                     l1=LpNorm("i", 10, p=1.0, value="v"), l2=LpNorm("i", 10, value="v"),
                     top=HeavyHitters("i", 10, phi=0.5, value="v"))
        for now in (None, 2):
            got = aggregate(fits, "k", "ts", strategy="native", now=now, **every).collect()[0]
            assert [got.n, got.s, got.f, got.l1, got.l2] == [2.0] + [float(2**63 - 1)] * 4, now
            assert [h.upper for h in got.top] == [2**63 - 1], now
