"""Every Spark entry point from a Spark Connect client.

``python -m tests.connect_job OUT [--url=sc://host:port]`` connects to a
Spark Connect server (by default it starts a local one,
``SparkSession.builder.remote("local[2]")``), runs :func:`run` through it
and writes the results to OUT as JSON; tests/test_connect.py runs the same
:func:`run` on the classic test session and compares.  A Connect client and
a classic session cannot share one Python process (PySpark switches every
``pyspark.sql.functions`` call to Connect process-wide), hence the
subprocess.

The data comes from ``spark.range`` with a fixed number of partitions, so
both runs see the same rows in the same partitions: sketch bytes must
agree, not only estimates.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

ROWS = 6_000
PARTITIONS = 3
#: Shuffle partitions of both runs (the classic one sets it for its run),
#: so that equal bytes do not rest on the test session's settings.
SHUFFLE_PARTITIONS = 2
WINDOW = ROWS // 2


def data(spark):
    from pyspark.sql import functions as F

    return spark.range(0, ROWS, 1, PARTITIONS).select(
        (F.col("id") % 5).alias("src"),
        F.col("id").alias("ts"),
        (F.abs(F.xxhash64("id")) % 1500).alias("bytes"),
        F.concat(F.lit("10.0."), (F.abs(F.xxhash64(F.col("id") + 1)) % 300).cast("string")).alias("dst"),
    )


def _rows(df, order) -> list:
    """Rows as JSON-ready lists (binary as hex, floats as repr)."""
    out = []
    for r in df.orderBy(*order).collect():
        row = []
        for v in r:
            if isinstance(v, (bytes, bytearray)):
                v = bytes(v).hex()
            elif hasattr(v, "asDict"):
                v = sorted(v.asDict().items())
            elif isinstance(v, float):
                v = repr(v)
            row.append(v if isinstance(v, (int, str, list, type(None))) else str(v))
        out.append(row)
    return out


def _error(thunk) -> str:
    """The project's message in the error a call raises (the first line
    naming a column, from there on), or '' when it raises nothing."""
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 - the message is the result
        lines = [line for line in str(e).splitlines() if "column " in line]
        return f"{type(e).__name__}: " + (lines[0][lines[0].find("column "):].strip() if lines else str(e))
    return ""


#: Parts run only with ``full`` (the suite's ``--slow``): the default run
#: keeps one path through every entry point, these add the others.
FULL = ("one_step", "aggregate_shuffle", "aggregate_auto_per_key", "sketch_table_union", "streaming",
        "frequencies_aggregate_two_phase")


def run(spark, workdir: str, full: bool = True) -> dict:
    """Results of every entry point, as JSON-ready values (``full``: the
    :data:`FULL` parts too)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from udaf import (Count, Distinct, DistinctFM, HeavyHitters, LpNorm, Quantile, Sum, aggregate, sketch_table,
                      sliding_over, union_table)
    from udaf import functions as U
    from udaf.streaming import ROCKSDB_PROVIDER, sliding_window_state

    df = data(spark)
    out = {}
    # column functions: one sketch per family, its union, estimates and bounds
    sketches = df.groupBy("src").agg(
        U.eh_sketch_agg("ts", WINDOW, 0.02, value="bytes").alias("eh"),
        U.sliding_hll_sketch_agg("ts", "dst", WINDOW, precision=10, seed=3).alias("hll"),
        U.sliding_fm_sketch_agg("ts", "dst", WINDOW, num_bitmaps=32, seed=5).alias("fm"),
        U.sliding_lp_sketch_agg("ts", "dst", WINDOW, p=1.0, eps=0.2, delta=0.1, seed=9, value="bytes").alias("lp"),
    )
    out["sketches"] = _rows(sketches, ["src"])
    answers = sketches.select(
        "src",
        U.eh_sketch_estimate("eh", ROWS, WINDOW // 2).alias("eh"),
        U.eh_sketch_bounds("eh").alias("eh_bounds"),
        U.sliding_hll_sketch_estimate("hll").alias("hll"),
        U.sliding_fm_sketch_estimate("fm", ROWS).alias("fm"),
        U.sliding_lp_sketch_estimate("lp").alias("lp"),
    )
    out["estimates"] = _rows(answers, ["src"])
    unions = sketches.groupBy((F.col("src") % 2).alias("half")).agg(
        U.eh_union_agg("eh").alias("eh"), U.sliding_hll_union_agg("hll").alias("hll"),
        U.sliding_fm_union_agg("fm").alias("fm"), U.sliding_lp_union_agg("lp").alias("lp"))
    out["unions"] = _rows(unions, ["half"])
    if full:
        one_step = df.groupBy("src").agg(
            U.sliding_count("ts", WINDOW).alias("n"), U.sliding_sum("ts", "bytes", WINDOW).alias("b"),
            U.sliding_distinct("ts", "dst", WINDOW).alias("d"), U.sliding_fm_distinct("ts", "dst", WINDOW).alias("f"),
            U.sliding_lp_norm("ts", "dst", WINDOW, value="bytes").alias("l2"))
        out["one_step"] = _rows(one_step, ["src"])
    # a family's own estimators and list answers (frequencies, heavy hitters, quantiles)
    tops = df.groupBy("src").agg(U.ecm_sketch_agg("ts", "bytes", WINDOW, 0.05, 0.05).alias("cm"),
                                 U.sliding_hh_sketch_agg("ts", "bytes", WINDOW, 0.1, 16).alias("hh"),
                                 U.sliding_quantile_sketch_agg("ts", "bytes", WINDOW).alias("qs"),
                                 U.sliding_quantile("ts", "bytes", WINDOW, 0.9).alias("p90"))
    out["frequencies"] = _rows(tops.select("src", "cm", U.ecm_sketch_frequency("cm", F.lit(7)).alias("f7"),
                                           U.sliding_hh_sketch_heavy_hitters("hh", F.lit(0.002)).alias("top"),
                                           "qs", "p90", U.sliding_quantile_sketch_quantile_bounds("qs", F.lit(0.5))
                                           .alias("b50"), U.sliding_quantile_sketch_rank("qs", F.lit(100)).alias("r")),
                               ["src"])
    # their aggregate answers (a list per key, a quantile: the native plan; --slow adds the sketches')
    newer = dict(top=HeavyHitters("bytes", WINDOW, phi=0.05), p90=Quantile("bytes", WINDOW, q=0.9))
    out["frequencies_aggregate"] = _rows(aggregate(df, "src", "ts", now=ROWS, **newer), ["src"])
    # lists alone: one aggregation over grouping sets (DataFrame.groupingSets over Connect too)
    out["frequencies_lists"] = _rows(aggregate(df, "src", "ts", top=newer["top"]), ["src"])
    if full:
        out["frequencies_aggregate_two_phase"] = _rows(aggregate(df, "src", "ts", now=ROWS, strategy="two_phase",
                                                                 **newer), ["src"])

    # the DataFrame drivers
    specs = dict(n=Count(WINDOW, 0.02), b=Sum("bytes", WINDOW, 0.02), d=Distinct("dst", WINDOW, 10, 3),
                 f=DistinctFM("dst", WINDOW, 32, 5), l1=LpNorm("dst", WINDOW, "bytes", 1.0, 0.2, 0.1, 9))
    for strategy in ("auto", "two_phase", "shuffle") if full else ("auto", "two_phase"):
        out[f"aggregate_{strategy}"] = _rows(
            aggregate(df, "src", "ts", strategy=strategy, bounds=True, now=ROWS, **specs), ["src"])
    if full:
        native = {n: s for n, s in specs.items() if n != "l1"}  # each key's own newest row: the native plan's join
        out["aggregate_auto_per_key"] = _rows(aggregate(df, "src", "ts", bounds=True, **native), ["src"])
    table = sketch_table(df, "src", "ts", **specs)
    out["sketch_table"] = _rows(table, ["src"])
    if full:
        out["sketch_table_union"] = _rows(table.groupBy((F.col("src") % 2).alias("half")).agg(
            U.eh_sketch_estimate(U.eh_union_agg("n"), ROWS).alias("n"),
            U.sliding_hll_sketch_estimate(U.sliding_hll_union_agg("d"), ROWS).alias("d")), ["half"])
    # the stored table rolled up to coarser keys in one pass per batch, every family (udaf.union_table)
    out["union_table"] = _rows(union_table(table.withColumn("half", F.col("src") % 2), "half", *specs), ["half"])
    # unions answered from arrays of stored sketches, without building them
    out["sketch_table_collected"] = _rows(table.groupBy((F.col("src") % 2).alias("half")).agg(
        U.eh_sketch_bounds(F.collect_list("n"), ROWS).alias("n"),
        U.sliding_hll_sketch_estimate(F.collect_list("d"), ROWS).alias("d")), ["half"])
    small = df.where(F.col("ts") < 1500)
    out["sliding_over"] = _rows(sliding_over(small, "src", "ts", n=Count(100), b=Sum("bytes", 100),
                                             d=Distinct("dst", 100), l1=LpNorm("dst", 100, "bytes", 1.0)), ["ts"])

    # SQL
    from udaf.spec import FAMILIES

    # the project's functions (a family registered in this process from elsewhere, as a test's, has more)
    project = {f for f, classes in FAMILIES.items() if all(c.__module__.startswith("udaf.") for c in classes)}
    out["registered"] = sorted(n for n in U.register(spark) if U._FUNCTIONS[n].family in project)
    df.createOrReplaceTempView("connect_events")
    out["sql"] = _rows(spark.sql(f"""
        SELECT src, eh_sketch_estimate(eh_sketch_agg(ts, {WINDOW}, 0.02, bytes)) AS b,
               sliding_count(ts, {WINDOW}) AS n, sliding_distinct(ts, dst, {WINDOW}) AS d
        FROM connect_events GROUP BY src"""), ["src"])

    # one message per mistake: on the driver, and from inside a job
    negative = df.withColumn("bytes", F.when(F.col("ts") == 77, F.lit(-5)).otherwise(F.col("bytes")))
    out["errors"] = [
        _error(lambda: aggregate(df, "src", "ts", b=Sum("dst", WINDOW)).collect()),
        _error(lambda: aggregate(negative, "src", "ts", strategy="two_phase", b=Sum("bytes", WINDOW)).collect()),
        _error(lambda: negative.groupBy("src").agg(U.sliding_sum("ts", "bytes", WINDOW)).collect()),
    ]

    if not full:
        return out
    # Structured Streaming: a file source, the RocksDB state, the memory sink
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    src = os.path.join(workdir, "events")
    os.makedirs(src, exist_ok=True)
    for b in range(2):
        path = os.path.join(src, f"{b}.json")
        with open(path, "w") as f:
            for i in range(300):
                f.write(json.dumps({"k": "ab"[i % 2], "ts": 300 * b + i, "b": i, "dst": i % 40}) + "\n")
        # the file source takes files in modification-time order; two files
        # written within one clock tick tie and come in either order
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("ts", T.LongType()),
                           T.StructField("b", T.LongType()), T.StructField("dst", T.LongType())])
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(src)
    state = sliding_window_state(stream, "k", "ts", bounds=True, n=Count(200), s=Sum("b", 200),
                                 d=Distinct("dst", 200), l1=LpNorm("dst", 200, "b", 1.0, seed=4))
    name = "connect_state_" + os.path.basename(workdir).replace("-", "_")
    q = state.writeStream.outputMode("update").format("memory").queryName(name) \
        .option("checkpointLocation", os.path.join(workdir, "checkpoint")).trigger(availableNow=True).start()
    try:
        q.awaitTermination(300)
    finally:
        q.stop()
    if q.exception() is not None:
        raise RuntimeError(f"stream failed: {q.exception()}")
    out["streaming"] = _rows(spark.table(name), ["k", "as_of"])
    return out


def main(out: str, full: bool = True, url: str | None = None) -> None:
    """Run through the Connect server at ``url`` (``sc://host:port``: the
    test session's own, started in its JVM by tests/test_connect.py), or a
    local one started for the run (``remote("local[2]")``: a second JVM)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url or "local[2]").appName("ehist-connect-test")
    if url is None:  # static settings of the server this client starts
        builder = builder.config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1") \
            .config("spark.driver.bindAddress", "127.0.0.1")
    spark = builder.config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS)) \
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    try:
        from pyspark.sql import is_remote

        with tempfile.TemporaryDirectory() as workdir:
            result = run(spark, workdir, full)
        result["client"] = type(spark).__module__
        result["remote"] = is_remote()
        with open(out, "w") as f:
            json.dump(result, f)
    finally:
        spark.stop()


if __name__ == "__main__":
    urls = [a[len("--url="):] for a in sys.argv[2:] if a.startswith("--url=")]
    main(sys.argv[1], full="--full" in sys.argv[2:], url=urls[0] if urls else None)
