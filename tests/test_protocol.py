"""The Spark face as one protocol: SQL registration, one message per
mistake across entry points, generated names, deprecated aliases."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from pyspark.errors import PythonException  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from ehist import ExponentialHistogram  # noqa: E402
from quantiles import SlidingQuantiles, quantiles_from_bounds  # noqa: E402
from tests.conftest import ansi_mode  # noqa: E402
from udaf import Count, Distinct, LpNorm, Sum, aggregate, register, sketch_table, sliding_over  # noqa: E402
from udaf import functions as U  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def flows(spark):
    rng = np.random.default_rng(4)
    n = 3000
    pdf = pd.DataFrame({"k": rng.choice(["a", "b", "c"], n), "ts": np.sort(rng.integers(0, 50_000, n)),
                        "bytes": rng.integers(0, 1500, n), "dst": rng.integers(0, 300, n)})
    sdf = spark.createDataFrame(pdf).repartition(2)
    sdf.createOrReplaceTempView("flows")
    register(spark)
    return pdf, sdf


def exact(pdf, window):
    out = {}
    for k, g in pdf.groupby("k"):
        inside = g[g.ts > g.ts.max() - window]
        out[k] = (len(inside), int(inside.bytes.sum()), inside.dst.nunique())
    return out


def test_sql_builds_stores_and_reads_sketches(spark, flows, tmp_path):
    """Every function is callable from spark.sql with literal parameters,
    and the estimators read a Parquet table of stored sketches."""
    pdf, _ = flows
    names = register(spark)
    assert {"eh_sketch_agg", "eh_union_agg", "eh_sketch_estimate", "eh_sketch_bounds", "sliding_count",
            "sliding_hll_sketch_agg", "sliding_lp_norm"} <= set(names)
    got = {r.k: r for r in spark.sql(
        "SELECT k, sliding_count(ts, 10000, 0.02) AS c, sliding_sum(ts, bytes, 10000) AS s, "
        "sliding_distinct(ts, dst, 10000, 12) AS d FROM flows GROUP BY k").collect()}
    for k, (c, s, d) in exact(pdf, 10_000).items():
        assert abs(got[k].c - c) <= 0.02 * c and abs(got[k].s - s) <= 0.01 * s
        assert abs(got[k].d / d - 1) < 0.1
    stored = spark.sql("SELECT k, eh_sketch_agg(ts, 10000, 0.01) AS pk, eh_sketch_agg(ts, 10000, 0.01, bytes) AS b, "
                       "sliding_hll_sketch_agg(ts, dst, 10000) AS ds FROM flows GROUP BY k, ts % 2")
    path = str(tmp_path / "sketches")
    stored.write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("stored")
    rolled = spark.sql("SELECT k, eh_union_agg(pk) AS pk, eh_union_agg(b) AS b, sliding_hll_union_agg(ds) AS ds "
                       "FROM stored GROUP BY k")
    rolled.createOrReplaceTempView("rolled")
    rows = {r.k: r for r in spark.sql(
        "SELECT k, eh_sketch_estimate(pk) AS c, eh_sketch_bounds(b) AS sb, sliding_hll_sketch_estimate(ds) AS d, "
        "eh_sketch_estimate(pk, 60000, 5000) AS later FROM rolled").collect()}
    for k, (c, s, d) in exact(pdf, 10_000).items():
        assert abs(rows[k].c - c) <= 0.01 * c
        assert rows[k].sb.lower <= s <= rows[k].sb.upper
        assert abs(rows[k].d / d - 1) < 0.1
        g = pdf[pdf.k == k]
        later = int(((g.ts > 55_000) & (g.ts <= 60_000)).sum())
        assert abs(rows[k].later - later) <= 0.01 * later + 1e-9


def test_python_and_sql_print_like_builtins(spark, flows):
    """Result columns are named like Spark's own calls: the function and
    its arguments, never an internal name."""
    _, sdf = flows
    cols = sdf.groupBy("k").agg(U.sliding_count("ts", 1000), U.sliding_sum("ts", "bytes", "1000")
                                if False else U.sliding_sum("ts", "bytes", 1000)).columns
    assert cols == ["k", "sliding_count(ts, 1000)", "sliding_sum(ts, bytes, 1000)"]
    assert spark.sql("SELECT sliding_count(ts, 1000) FROM flows").columns == ["sliding_count(ts, 1000)"]
    assert U.signature("eh_sketch_agg") == "eh_sketch_agg(ts, window, eps=0.01, value=None)"


def test_deprecated_names_warn_and_answer_alike(spark, flows):
    _, sdf = flows
    with pytest.warns(DeprecationWarning, match="eh_sketch is deprecated.*eh_sketch_agg"):
        old = U.eh_sketch("ts", "bytes", window=1000, eps=0.05)
    new = U.eh_sketch_agg("ts", 1000, 0.05, "bytes")
    a = {r.k: bytes(r.s) for r in sdf.groupBy("k").agg(old.alias("s")).collect()}
    b = {r.k: bytes(r.s) for r in sdf.groupBy("k").agg(new.alias("s")).collect()}
    assert a == b
    with pytest.warns(DeprecationWarning, match="sliding_window_state.* is deprecated"):
        from udaf.streaming import sliding_window_state

        try:
            sliding_window_state(sdf, "k", "ts", 100)
        except Exception:  # noqa: BLE001 - the default test session has no RocksDB store: the warning came first
            pass


def final_line(exc) -> str:
    """The project's error line of an exception (a PythonException's last
    ``ehist.errors...`` or ``TypeError`` line), class name included."""
    text = str(exc)
    raised = re.search(r"\[USER_RAISED_EXCEPTION\] (\w+Error: .*?)(?: SQLSTATE: \w+)?$", text, re.M)
    if raised:  # the native plan: Spark's raise_error carries the project's message
        return raised.group(1)
    lines = [ln for ln in text.splitlines() if re.match(r"^(ehist\.errors\.\w+|TypeError|ValueError): ", ln)]
    line = lines[-1] if lines else f"{type(exc).__name__}: {text}"
    return re.sub(r"^ehist\.errors\.", "", line)


def unkeyed(message: str) -> str:
    return re.sub(r" \(key [^)]*\)", "", message)


def run_all(spark, sdf, spec, name, column_function, sql):
    """The message of each entry point given the same bad input."""
    out = {}
    sdf.createOrReplaceTempView("bad_input")
    calls = {
        "aggregate two_phase": lambda: aggregate(sdf, "k", "ts", strategy="two_phase", **{name: spec}).collect(),
        "aggregate shuffle": lambda: aggregate(sdf, "k", "ts", strategy="shuffle", **{name: spec}).collect(),
        "aggregate auto": lambda: aggregate(sdf, "k", "ts", **{name: spec}).collect(),  # native where it can
        "sketch_table": lambda: sketch_table(sdf, "k", "ts", **{name: spec}).collect(),
        "sliding_over": lambda: sliding_over(sdf, "k", "ts", **{name: spec}).collect(),
        "column function": lambda: sdf.groupBy("k").agg(column_function).collect(),
        "sql": lambda: spark.sql(f"SELECT k, {sql} FROM bad_input GROUP BY k").collect(),
    }
    for label, call in calls.items():
        with pytest.raises(Exception) as info:
            call()
        out[label] = final_line(info.value)
    return out


def stream_of(spark, sdf, tmp_path):
    """A file-source stream with sdf's schema (no data: the type checks of
    sliding_window_state run on the driver, before any row)."""
    return spark.readStream.schema(sdf.schema).parquet(str(tmp_path))


@pytest.mark.parametrize("case", ["negative", "null time", "double value", "string time", "bool value",
                                  # the same checks and wrappers as "negative", another family's message and
                                  # the merges' overflow check: 18-21 s each (python -m pytest --slow)
                                  pytest.param("nan", marks=pytest.mark.slow),
                                  pytest.param("sum past int64", marks=pytest.mark.slow)])
def test_one_mistake_one_message_in_every_entry_point(spark, case, tmp_path):
    """The bad-input table: each mistake through every entry point gives
    the same exception class and message (the key where it is known: the
    column functions see one group's rows, not its key; SQL hands Python
    no column names, so its messages name the argument and its position:
    ``column value (argument 2 of sliding_sum)``).
    The streaming state checks types on the driver here; its bad values
    (null time, negative) are in tests/test_streaming_pack.py, its sum
    past int64 in tests/test_streaming.py.  A sum past int64 runs without
    ANSI mode, where Spark's own ``sum`` would wrap around (with it, the
    native plans stop with Spark's ``ARITHMETIC_OVERFLOW``:
    tests/test_native.py); the Python passes hold a key's rows, not its
    key, so only the native plans name it."""
    register(spark)
    rows = [("a", 1, 5, 1.0, "x", True), ("a", 2, -5, float("nan"), "y", False), ("b", 3, 7, 2.0, "z", True)]
    if case == "sum past int64":
        rows = [("a", t, 2**62, 1.0, "x", True) for t in (1, 2, 3)] + [("b", 3, 7, 2.0, "z", True)]
    sdf = spark.createDataFrame(rows, "k string, ts long, v long, f double, s string, flag boolean")
    column = None
    if case == "sum past int64":
        spec, fn, sql = Sum("v", 10), U.sliding_sum("ts", "v", 10), "sliding_sum(ts, v, 10)"
        want = "SumOverflowError: the sum of a key's values exceeds int64 (key 'a')"
        with ansi_mode(spark, False):
            got = run_all(spark, sdf, spec, "out", fn, sql)
        assert got.pop("sql") == got.pop("column function") == unkeyed(want)
        for label in ("aggregate auto", "sliding_over"):  # the native plans
            assert got.pop(label) == want, label
        assert all(message == unkeyed(want) for message in got.values()), got
        return
    if case == "negative":
        spec, fn, sql, column, want = Sum("v", 10), U.sliding_sum("ts", "v", 10), "sliding_sum(ts, v, 10)", "v", \
            "InvalidInputError: column v holds -5 (key 'a'): Sum needs non-negative integers"
    elif case == "nan":
        spec, fn, sql, column = LpNorm("s", 10, value="f"), U.sliding_lp_norm("ts", "s", 10, value="f"), \
            "sliding_lp_norm(ts, s, 10, 2.0, 0.05, 0.05, 0, f)", "f"
        want = ("InvalidInputError: column f holds nan (key 'a'): LpNorm needs finite non-negative numbers "
                "(NaN is never skipped: filter or fill it)")
    elif case == "null time":
        sdf = sdf.withColumn("ts", F.when(F.col("ts") == 2, None).otherwise(F.col("ts")))
        sdf.createOrReplaceTempView("bad_input")
        spec, fn, sql, want = Count(10), U.sliding_count("ts", 10), "sliding_count(ts, 10)", \
            "InvalidInputError: column ts holds null (key 'a'): timestamps must not be null"
    elif case == "double value":
        spec, fn, sql, column = Sum("f", 10), U.sliding_sum("ts", "f", 10), "sliding_sum(ts, f, 10)", "f"
        want = "TypeError: column f: Sum needs an integral column (bigint, int, smallint, tinyint), got double"
    elif case == "string time":
        sdf = sdf.withColumn("ts", F.col("ts").cast("string"))
        spec, fn, sql, want = Count(10), U.sliding_count("ts", 10), "sliding_count(ts, 10)", \
            "TypeError: column ts: the time column needs a timestamp, date or integral column, got string"
    else:  # a boolean column is no integer to sum, in every entry point
        spec, fn, sql, column = Sum("flag", 10), U.sliding_sum("ts", "flag", 10), "sliding_sum(ts, flag, 10)", "flag"
        want = "TypeError: column flag: Sum needs an integral column (bigint, int, smallint, tinyint), got boolean"
    got = run_all(spark, sdf, spec, "out", fn, sql)
    if want.startswith("TypeError"):
        from udaf.streaming import ROCKSDB_PROVIDER, sliding_window_state

        provider = "spark.sql.streaming.stateStore.providerClass"
        before = spark.conf.get(provider, None)
        spark.conf.set(provider, ROCKSDB_PROVIDER)
        try:
            with pytest.raises(TypeError) as info:
                sliding_window_state(stream_of(spark, sdf, tmp_path), "k", "ts", out=spec)
        finally:
            spark.conf.unset(provider) if before is None else spark.conf.set(provider, before)
        streaming = final_line(info.value)
        if case == "string time":  # the streaming state takes no dates (watermarks need timestamps)
            assert "needs a timestamp or integral column" in streaming
            streaming = streaming.replace("a timestamp or integral", "a timestamp, date or integral")
        got["streaming"] = streaming
    sql_message = got.pop("sql")
    for label, message in got.items():
        assert unkeyed(message) == unkeyed(want), label
    # SQL hands Python no column names: the argument by name and position
    fn_name, position, arg = {"negative": ("sliding_sum", 2, "value"), "nan": ("sliding_lp_norm", 8, "value"),
                              "double value": ("sliding_sum", 2, "value"), "bool value": ("sliding_sum", 2, "value"),
                              "null time": ("sliding_count", 1, "ts"), "string time": ("sliding_count", 1, "ts")}[case]
    label = f"column {arg} (argument {position} of {fn_name})"
    written = f"column {column or 'ts'}"
    in_sql = want.replace(f"{written} ", f"{label} ").replace(f"{written}:", f"{label}:")
    assert unkeyed(sql_message) == unkeyed(in_sql)
    assert got["aggregate shuffle"] == want  # the drivers name the key


def older_bad_rows(spark, column, value):
    """Keys a and b at time 100, and a row of key a at time 1 holding a bad
    ``value`` in ``column``: older than a window of 10 as of 100."""
    rows = []
    for k, t in (("a", 1), ("a", 100), ("b", 100)):
        row = {"k": k, "ts": t, "v": 5, "f": 1.0, "i": 7}
        if (k, t) == ("a", 1):
            row[column] = value
        rows.append((row["k"], row["ts"], row["v"], row["f"], row["i"]))
    return spark.createDataFrame(rows, "k string, ts long, v long, f double, i long")


def test_a_bad_row_older_than_the_window(spark):
    """Every row a call reads is checked, and only those (docs/errors.md,
    "Which rows are checked"): without ``now`` every ``aggregate``
    strategy reads every row of a key (the native plan in the pass that
    finds its newest row) and raises the same message for a bad value older
    than the window; with ``now`` none reads that row; ``sketch_table``,
    ``sliding_over``, the column functions and SQL read every row they are
    given."""
    register(spark)
    sdf = older_bad_rows(spark, "v", -5)
    spec = Sum("v", 10)
    messages = {}
    for strategy in ("native", "two_phase", "shuffle"):
        with pytest.raises(Exception) as info:
            aggregate(sdf, "k", "ts", strategy=strategy, out=spec).collect()
        messages[strategy] = unkeyed(final_line(info.value))
        # as of a time whose window leaves the row out, no strategy reads it
        assert sorted(r.k for r in aggregate(sdf, "k", "ts", strategy=strategy, now=105, out=spec).collect()) \
            == ["a", "b"], strategy
    assert set(messages.values()) == {"InvalidInputError: column v holds -5: Sum needs non-negative integers"}
    sdf.createOrReplaceTempView("older_bad")
    for call in (lambda: sketch_table(sdf, "k", "ts", out=spec).collect(),
                 lambda: sliding_over(sdf, "k", "ts", out=spec).collect(),
                 lambda: sdf.groupBy("k").agg(U.sliding_sum("ts", "v", 10)).collect(),
                 lambda: spark.sql("SELECT k, sliding_sum(ts, v, 10) FROM older_bad GROUP BY k").collect()):
        with pytest.raises(Exception, match="holds -5"):
            call()


def test_specs_of_different_windows_check_every_row_read(spark):
    """With ``now``, ``aggregate`` reads the rows of the widest window
    asked, and every strategy checks each of them, also for a spec of a
    narrower window (docs/errors.md, "Which rows are checked")."""
    sdf = older_bad_rows(spark, "v", -5)  # a bad v at time 1: inside 200 as of 105, outside 10
    messages = {}
    for strategy in ("native", "two_phase", "shuffle"):
        with pytest.raises(Exception) as info:
            aggregate(sdf, "k", "ts", strategy=strategy, now=105, narrow=Sum("v", 10), wide=Count(200)).collect()
        messages[strategy] = unkeyed(final_line(info.value))
    assert set(messages.values()) == {"InvalidInputError: column v holds -5: Sum needs non-negative integers"}
    got = aggregate(sdf, "k", "ts", strategy="native", now=105, narrow=Sum("v", 10), wide=Count(50)).collect()
    assert sorted((r.k, r.narrow, r.wide) for r in got) == [("a", 5.0, 1.0), ("b", 5.0, 1.0)]  # not read: no error


def test_every_native_check_reads_rows_older_than_the_window(spark):
    """Each family's native row checks (NativeAnswer.checks) run on a row
    older than the window, without ``now``: the native plan gives the
    message the Python strategies give."""
    from udaf import Frequencies, HeavyHitters, Quantile

    cases = [(Quantile("f", 10, q=0.5), "f", float("nan")), (LpNorm("i", 10, value="v"), "v", -5),
             (Frequencies("i", 10, value="v"), "v", -5), (HeavyHitters("i", 10, bits=8), "i", 300)]
    for spec, column, value in cases:
        sdf = older_bad_rows(spark, column, value)
        messages = []
        for strategy in ("native", "two_phase"):
            with pytest.raises(Exception) as info:
                aggregate(sdf, "k", "ts", strategy=strategy, out=spec).collect()
            messages.append(unkeyed(final_line(info.value)))
        assert messages[0] == messages[1] and f"column {column} holds" in messages[0], messages


def test_bool_items_count_alike_everywhere(spark):
    """Booleans are items 0 and 1 in every family and entry point (the
    core hashes a bool like the int)."""
    from distinct import SlidingHyperLogLog

    sdf = spark.createDataFrame([("a", i, i % 3 == 0) for i in range(30)], "k string, ts long, b boolean")
    got = aggregate(sdf, "k", "ts", strategy="two_phase", d=Distinct("b", 100)).collect()[0].d
    sketch = SlidingHyperLogLog(100).update(np.arange(30), [i % 3 == 0 for i in range(30)])
    assert got == sketch.estimate() and round(got) == 2
    assert sliding_over(sdf, "k", "ts", d=Distinct("b", 100)).agg(F.max("d")).collect()[0][0] == 2


def test_now_older_than_the_data_and_foreign_sketches(spark, flows):
    _, sdf = flows
    sk = sdf.groupBy("k").agg(U.eh_sketch_agg("ts", 1000).alias("s"), U.sliding_hll_sketch_agg("ts", "dst", 1000)
                              .alias("h"))
    with pytest.raises(PythonException, match=r"now \(5\) is earlier than the newest timestamp \(\d+\) of the sketch"):
        sk.select(U.eh_sketch_estimate("s", 5)).collect()
    with pytest.raises(PythonException, match="column h holds <a SlidingHyperLogLog sketch>: eh_union_agg needs "
                                              "ExponentialHistogram sketches"):
        sk.agg(U.eh_union_agg("h")).collect()
    other = sdf.groupBy("k").agg(U.eh_sketch_agg("ts", 2000).alias("s"))
    with pytest.raises(PythonException, match="IncompatibleSketchError: cannot merge histograms with different "
                                              "windows: (1000 and 2000|2000 and 1000)"):
        sk.select("s").union(other.select("s")).agg(U.eh_union_agg("s")).collect()


def test_readers_answer_the_union_of_an_array_of_sketches(spark, flows):
    """A reader given an array of sketches (``collect_list`` of a stored
    table) answers their union without building it: sliding HyperLogLogs
    the merge's estimate to the last bit, histograms the sums of the
    parts' bounds (never wider than the merged histogram's, within eps of
    the exact answer), quantile sketches the quantile of the summed bin
    bounds (as aggregate answers from partials) and the window count of
    the summed bounds, heavy hitters the walk on the summed counter bounds
    (tests/test_columnar_families.py), every other family the merge's
    answer; from Python and from SQL alike, a null or
    empty array answering null."""
    pdf, sdf = flows
    parts = sdf.groupBy("k", (F.col("ts") % 3).alias("site")).agg(
        U.eh_sketch_agg("ts", 20_000, 0.02, "bytes").alias("b"), U.sliding_hll_sketch_agg("ts", "dst", 20_000)
        .alias("d"), U.sliding_lp_sketch_agg("ts", "dst", 20_000, value="bytes").alias("lp"),
        U.sliding_quantile_sketch_agg("ts", "bytes", 20_000).alias("q")).cache()  # read five times below
    parts.createOrReplaceTempView("parts")
    now, w = 60_000, 15_000
    merged = {r.k: r for r in parts.groupBy("k").agg(
        U.eh_union_agg("b").alias("b"), U.sliding_hll_union_agg("d").alias("d"), U.sliding_lp_union_agg("lp")
        .alias("lp"), U.sliding_quantile_union_agg("q").alias("q")).select(
            "k", U.eh_sketch_bounds("b", now, w).alias("b"), U.sliding_hll_sketch_estimate("d", now, w).alias("d"),
            U.sliding_lp_sketch_estimate("lp", now, w).alias("lp"),
            U.sliding_quantile_sketch_quantile("q", F.lit(0.9), now, w).alias("q")).collect()}
    lists = parts.groupBy("k").agg(*[F.collect_list(c).alias(c) for c in ("b", "d", "lp", "q")])
    from_python = lists.select("k", U.eh_sketch_bounds("b", now, w).alias("b"),
                               U.eh_sketch_estimate("b", now, w).alias("e"),
                               U.sliding_hll_sketch_estimate("d", now, w).alias("d"),
                               U.sliding_lp_sketch_estimate("lp", now, w).alias("lp"),
                               U.sliding_quantile_sketch_quantile("q", F.lit(0.9), now, w).alias("q"),
                               U.sliding_quantile_sketch_estimate("q", now, w).alias("qn"))
    from_sql = spark.sql(f"SELECT k, eh_sketch_bounds(collect_list(b), {now}, {w}) AS b, "
                         f"eh_sketch_estimate(collect_list(b), {now}, {w}) AS e, "
                         f"sliding_hll_sketch_estimate(collect_list(d), {now}, {w}) AS d, "
                         f"sliding_lp_sketch_estimate(collect_list(lp), {now}, {w}) AS lp, "
                         f"sliding_quantile_sketch_quantile(collect_list(q), 0.9, {now}, {w}) AS q, "
                         f"sliding_quantile_sketch_estimate(collect_list(q), {now}, {w}) AS qn FROM parts GROUP BY k")
    parts_rows = parts.collect()
    for got in (from_python.collect(), from_sql.collect()):
        assert sorted(r.k for r in got) == sorted(merged)
        for r in got:
            g = pdf[(pdf.k == r.k) & (pdf.ts > now - w) & (pdf.ts <= now)]
            want = int(g.bytes.sum())
            mine = [ExponentialHistogram.from_bytes(bytes(p.b)).bounds(now, w) for p in parts_rows if p.k == r.k]
            assert (r.b.lower, r.b.upper) == tuple(map(sum, zip(*mine)))
            assert merged[r.k].b.lower <= r.b.lower <= want <= r.b.upper <= merged[r.k].b.upper
            assert r.e == (r.b.lower + r.b.upper) / 2 and abs(r.e - want) <= 0.02 * want
            assert r.d == merged[r.k].d and r.lp == merged[r.k].lp
            quantile_parts = [SlidingQuantiles.from_bytes(bytes(p.q)) for p in parts_rows if p.k == r.k]
            keys, lo, up = SlidingQuantiles.union_bounds(quantile_parts, now, w)
            assert r.q == quantiles_from_bounds(quantile_parts[0].mapping, keys, lo, up, [0.9])[0]
            counts = [p.bounds(now, w) for p in quantile_parts]  # the window count: the parts' bounds summed
            low, high = map(sum, zip(*counts))
            assert r.qn == (low + high) / 2 and low <= len(g) <= high
    empty = spark.createDataFrame([(None,), ([],)], "s array<binary>")
    assert [r[0] for r in empty.select(U.eh_sketch_estimate("s"), U.sliding_hll_sketch_estimate("s")).collect()] \
        == [None, None]
    with pytest.raises(PythonException, match=r"column s: eh_sketch_estimate needs a binary sketch column .* or an "
                                              r"array of them, that is a column \(binary, array<binary>\), got "
                                              "array<bigint>"):
        spark.createDataFrame([([1, 2],)], "s array<bigint>").select(U.eh_sketch_estimate("s")).collect()
    with pytest.raises(PythonException, match=r"holds <a SlidingHyperLogLog sketch>: eh_sketch_estimate needs "
                                              "ExponentialHistogram sketches"):
        parts.select(U.eh_sketch_estimate(F.array("b", "d"))).collect()
    other = sdf.groupBy("k").agg(U.eh_sketch_agg("ts", 30_000, 0.02, "bytes").alias("b"))
    with pytest.raises(PythonException, match="IncompatibleSketchError: cannot merge histograms with different "
                                              "windows"):
        parts.select("k", "b").union(other).groupBy("k").agg(U.eh_sketch_estimate(F.collect_list("b"))).collect()


def test_datetime64_in_the_core_is_refused_with_how_to_convert():
    from distinct import SlidingFM, SlidingHyperLogLog
    from ehist.errors import InvalidInputError
    from lp_norms import SlidingLpNorm

    stamps = np.array(["2026-01-01T00:00", "2026-01-01T00:01"], dtype="datetime64[ns]")
    for make in (lambda: ExponentialHistogram(60).update(stamps), lambda: SlidingHyperLogLog(60).update(stamps, [1, 2]),
                 lambda: SlidingFM(60).update(stamps, [1, 2]), lambda: SlidingLpNorm(2.0, 60).update(stamps, [1, 2])):
        with pytest.raises(InvalidInputError, match=r"timestamps are datetime64\[ns\].*astype\('datetime64\[s\]'\)"):
            make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SlidingHyperLogLog(60).update([1, 2], [True, False]) == SlidingHyperLogLog(60).update([1, 2], [1, 0])


def test_errors_gives_back_the_project_exception(spark):
    """udaf.errors(): a project error found in an executor, wrapped by
    PySpark (PythonException) or raised by the native plan (Spark's
    raise_error), comes out as its own class with the plain message."""
    from ehist.errors import InvalidInputError
    from udaf import errors

    sdf = spark.createDataFrame([("a", 1, 5), ("a", 2, -5)], "k string, ts long, v long")
    want = "column v holds -5 (key 'a'): Sum needs non-negative integers"
    for strategy in ("native", "shuffle"):
        with pytest.raises(InvalidInputError) as info, errors():
            aggregate(sdf, "k", "ts", strategy=strategy, s=Sum("v", 10)).collect()
        assert str(info.value) == want and type(info.value.__cause__).__name__ != "InvalidInputError"
    with pytest.raises(InvalidInputError, match=r"^column v holds -5: Sum needs non-negative integers$"), errors():
        sdf.groupBy("k").agg(U.sliding_sum("ts", "v", 10)).collect()
    with pytest.raises(ZeroDivisionError), errors():  # anything else passes through
        1 / 0


def test_times_and_windows_in_the_columns_terms(spark):
    """A stored timestamp sketch queried wrongly: the message prints times
    as ISO-8601 and windows as intervals, not microseconds; a bare number
    as the window over a timestamp column is refused in every entry point
    with how to write it (3600 was 3600 microseconds)."""
    import datetime as dt

    from pyspark.errors import PythonException

    from udaf.unwrap import errors

    register(spark)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = [("a", base + dt.timedelta(minutes=m), m) for m in range(0, 120, 7)]
    sdf = spark.createDataFrame(rows, "k string, t timestamp, v long")
    sk = sdf.groupBy("k").agg(U.eh_sketch_agg("t", "1 hour").alias("s"))
    early = F.lit(dt.datetime(2025, 1, 1))
    with pytest.raises(PythonException, match=r"now \(2025-01-01T00:00:00Z\) is earlier than the newest timestamp "
                                              r"\(2026-01-01T01:59:00Z\) of the sketch; queries must look at now >= "
                                              "newest"):
        sk.select(U.eh_sketch_estimate("s", early)).collect()
    late = F.lit(base + dt.timedelta(hours=3))
    with pytest.raises(PythonException, match=r"window must be in \[1 microsecond, 1 hour\] \(the synopsis's "
                                              r"window\), got 2 hours"):
        sk.select(U.eh_sketch_bounds("s", late, "2 hours")).collect()
    want = ("window 3600 is a bare number but column t is a timestamp: write the window as an interval, "
            "e.g. '3600 seconds' or '1 hour' (INTERVAL 1 HOUR in SQL)")
    for call in (lambda: aggregate(sdf, "k", "t", n=Count(3600)), lambda: sketch_table(sdf, "k", "t", n=Count(3600)),
                 lambda: sliding_over(sdf, "k", "t", n=Count(3600))):
        with pytest.raises(ValueError, match=re.escape(want)):
            call()
    sdf.createOrReplaceTempView("bare_window")
    with pytest.raises(ValueError, match=re.escape(want)), errors():
        sdf.groupBy("k").agg(U.sliding_count("t", 3600)).collect()
    # SQL hands Python no column names: the message names the argument and its position
    in_sql = want.replace("column t ", "column ts (argument 1 of sliding_count) ")
    with pytest.raises(ValueError, match=re.escape(in_sql)), errors():
        spark.sql("SELECT k, sliding_count(t, 3600) FROM bare_window GROUP BY k").collect()
    # the interval itself, or a bare number over an integral time, is fine
    assert sdf.groupBy("k").agg(U.sliding_count("t", "1 hour").alias("n")).collect()[0].n > 0
