"""udaf.streaming: per-key sliding-window state on a file-source stream."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyspark")
pytest.importorskip("google.protobuf")

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from udaf import Count, Distinct, DistinctFM, LpNorm, Sum, aggregate  # noqa: E402
from udaf.streaming import ROCKSDB_PROVIDER, ConfigurationError, sliding_window_state  # noqa: E402

pytestmark = pytest.mark.spark
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("ts", T.LongType()),
                       T.StructField("b", T.LongType()), T.StructField("dst", T.LongType())])
WINDOW, EPS = 3_000, 0.05


@pytest.fixture(scope="module")
def sspark(spark):
    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, ROCKSDB_PROVIDER)
    yield spark
    if before is None:
        spark.conf.unset(PROVIDER)
    else:
        spark.conf.set(PROVIDER, before)


_LAST_MTIME = [0.0]


def write_batch(directory, rows) -> None:
    """One JSON-lines file, written aside and renamed in (atomic for the
    source), with a modification time after every earlier file's: the file
    source takes files in modification-time order, one per micro-batch."""
    os.makedirs(directory, exist_ok=True)
    name = f"{time.time_ns()}-{uuid.uuid4().hex}.json"
    tmp = os.path.join(os.path.dirname(directory), "." + name)
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mtime = max(time.time(), _LAST_MTIME[0] + 1.0)
    _LAST_MTIME[0] = mtime
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, os.path.join(directory, name))


def batches(seed=1, n=4, size=3000):
    """Per-key in-order batches: a heavy key, a light key, nulls."""
    rng = np.random.default_rng(seed)
    out, t0 = [], 0
    for _ in range(n):
        ts = t0 + np.sort(rng.integers(0, 2000, size))
        t0 = int(ts[-1]) + 1
        ks = rng.choice(["a", "a", "a", "b"], size)
        b = rng.integers(0, 1500, size)
        dst = rng.zipf(1.3, size) % 700
        rows = [{"k": k, "ts": int(t), "b": None if i % 37 == 0 else int(v), "dst": None if i % 41 == 0 else int(d)}
                for i, (k, t, v, d) in enumerate(zip(ks, ts, b, dst))]
        out.append(rows)
    return out


def specs(window=WINDOW, value=None, distinct=None) -> dict:
    """The specs of a query: count, and sum / distinct when columns are given."""
    out = {"count": Count(window, EPS)}
    if value is not None:
        out["sum"] = Sum(value, window, EPS)
    if distinct is not None:
        out["distinct"] = Distinct(distinct, window)
    return out


def run_stream(spark, src, checkpoint, *, schema=SCHEMA, ts="ts", window=WINDOW, value=None, distinct=None,
               extra=None, legacy=False, **kw):
    """Process every file of ``src`` (one per micro-batch, trigger
    availableNow) and stop; return the output rows (dicts).  Started again
    on the same checkpoint, it processes only the files added since.
    ``legacy``: the deprecated window=/value=/distinct= call shape."""
    got = []

    def sink(df, _):
        got.extend(r.asDict() for r in df.collect())

    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(src)
    if legacy:
        with pytest.warns(DeprecationWarning, match="pass specs"):
            out = sliding_window_state(stream, "k", ts, window, eps=EPS, value=value, distinct=distinct, **kw)
    else:
        out = sliding_window_state(stream, "k", ts, bounds=True, **kw,
                                   **specs(window, value, distinct), **(extra or {}))
    q = out.writeStream.outputMode(kw.get("output_mode", "update")).foreachBatch(sink) \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    try:
        q.awaitTermination(300)
    finally:
        q.stop()
    if q.exception() is not None:
        raise q.exception()
    return got


def exact(all_rows, key, now):
    sel = [r for r in all_rows if r["k"] == key and now - WINDOW < r["ts"] <= now]
    return (len(sel), sum(r["b"] for r in sel if r["b"] is not None),
            len({r["dst"] for r in sel if r["dst"] is not None}))


def check_against_exact(out, all_rows):
    for r in out:
        n, s, d = exact(all_rows, r["k"], r["as_of"])
        assert r["count_lower"] <= n <= r["count_upper"]
        assert abs(r["count"] - n) <= EPS * n
        assert r["sum_lower"] <= s <= r["sum_upper"]
        assert abs(r["sum"] - s) <= EPS * s
        assert abs(r["distinct"] / d - 1) <= 5 * 1.04 / 64
        assert r["late_events"] == 0


def test_stream_matches_exact_and_batch(sspark, tmp_path):
    data = batches()
    for rows in data:
        write_batch(str(tmp_path / "in"), rows)
    extra = {"fm": DistinctFM("dst", WINDOW, num_bitmaps=256, seed=1),
             "l1": LpNorm("dst", WINDOW, value="b", p=1.0, eps=0.25, delta=0.1, seed=2)}
    out = run_stream(sspark, str(tmp_path / "in"), str(tmp_path / "ck"), value="b", distinct="dst", extra=extra)
    all_rows = [r for rows in data for r in rows]
    assert len(out) == 2 * len(data)  # one row per key per micro-batch
    check_against_exact(out, all_rows)
    low, high = extra["l1"].sketch_type(1.0, WINDOW, 0.25, 0.1).guarantee()
    for r in out:  # every family through the same state: FM within 3 standard errors, L1 within its guarantee
        sel = [x for x in all_rows if x["k"] == r["k"] and r["as_of"] - WINDOW < x["ts"] <= r["as_of"]]
        d = len({x["dst"] for x in sel if x["dst"] is not None})
        l1 = sum(x["b"] for x in sel if x["b"] is not None and x["dst"] is not None)
        assert abs(r["fm"] / d - 1) <= 3 * 0.78 / 16
        assert low * l1 <= r["l1"] <= high * l1
    # the batch function on the same data answers within the same bound
    last = {r["k"]: r for r in out if r["as_of"] == max(x["as_of"] for x in out if x["k"] == r["k"])}
    batch = {r.k: r for r in aggregate(sspark.createDataFrame(all_rows, SCHEMA), "k", "ts", bounds=True,
                                       n=Count(window=WINDOW, eps=EPS), s=Sum("b", window=WINDOW, eps=EPS),
                                       d=Distinct("dst", window=WINDOW)).collect()}
    for k, r in last.items():
        n, s, _ = exact(all_rows, k, r["as_of"])
        assert batch[k].n_lower <= n <= batch[k].n_upper and r["count_lower"] <= n <= r["count_upper"]
        assert abs(batch[k].d / r["distinct"] - 1) <= 5 * 1.04 / 64


@pytest.mark.slow  # 12-18 s; the default run restarts from a checkpoint in the event-time expiry test below
def test_restart_from_checkpoint_equals_uninterrupted(sspark, tmp_path):
    data = batches(seed=2)
    for rows in data:
        write_batch(str(tmp_path / "whole"), rows)
    whole = run_stream(sspark, str(tmp_path / "whole"), str(tmp_path / "ck1"), value="b", distinct="dst")
    for rows in data[:2]:
        write_batch(str(tmp_path / "parts"), rows)
    first = run_stream(sspark, str(tmp_path / "parts"), str(tmp_path / "ck2"), value="b", distinct="dst")
    for rows in data[2:]:
        write_batch(str(tmp_path / "parts"), rows)
    second = run_stream(sspark, str(tmp_path / "parts"), str(tmp_path / "ck2"), value="b", distinct="dst")
    key = lambda r: (r["k"], r["as_of"])  # noqa: E731
    assert sorted(first + second, key=key) == sorted(whole, key=key)


@pytest.mark.slow  # the old call shape of a deprecated API: python -m pytest --slow
def test_deprecated_call_shape_gives_the_same_rows(sspark, tmp_path):
    """sliding_window_state(df, key, ts, window, eps=, value=, distinct=)
    warns and answers as count=/sum=/distinct= specs with bounds do."""
    for rows in batches(seed=5, n=2, size=500):
        write_batch(str(tmp_path / "in"), rows)
    kw = dict(value="b", distinct="dst")
    old = run_stream(sspark, str(tmp_path / "in"), str(tmp_path / "ck1"), legacy=True, **kw)
    new = run_stream(sspark, str(tmp_path / "in"), str(tmp_path / "ck2"), **kw)
    key = lambda r: (r["k"], r["as_of"])  # noqa: E731
    assert len(old) == 4 and sorted(old, key=key) == sorted(new, key=key)


def test_late_events_dropped_and_counted(sspark, tmp_path):
    src = str(tmp_path / "in")
    write_batch(src, [{"k": "a", "ts": t, "b": 1, "dst": t} for t in range(100, 200)])
    write_batch(src, [{"k": "a", "ts": 50, "b": 1, "dst": 1}, {"k": "a", "ts": 150, "b": 1, "dst": 1},
                      {"k": "a", "ts": 250, "b": 1, "dst": 1}])
    out = run_stream(sspark, src, str(tmp_path / "ck"), value="b")
    last = max(out, key=lambda r: r["as_of"])
    assert last["late_events"] == 2  # 50 and 150 are older than 199, already summarized
    assert last["count_lower"] <= 101 <= last["count_upper"]  # 100..199 and 250, nothing folded wrongly


def test_late_events_raise(sspark, tmp_path):
    src = str(tmp_path / "in")
    write_batch(src, [{"k": "a", "ts": t, "b": 1, "dst": t} for t in range(100, 200)])
    write_batch(src, [{"k": "a", "ts": 50, "b": 1, "dst": 1}])
    with pytest.raises(StreamingQueryException, match="late data: timestamp 50"):
        run_stream(sspark, src, str(tmp_path / "ck"), late="raise")


def test_sum_past_int64_is_the_spark_layers_error(sspark, tmp_path):
    """A key's sum past int64 stops the stream with the error every other
    entry point raises (tests/test_protocol.py), across micro-batches."""
    src = str(tmp_path / "in")
    write_batch(src, [{"k": "a", "ts": 1, "b": 2**62, "dst": 1}, {"k": "a", "ts": 2, "b": 2**61, "dst": 2},
                      {"k": "b", "ts": 1, "b": 1, "dst": 1}])  # fits: the next batch passes int64
    write_batch(src, [{"k": "a", "ts": 3, "b": 2**62, "dst": 3}])
    with pytest.raises(StreamingQueryException, match="SumOverflowError: the sum of a key's values exceeds int64"):
        run_stream(sspark, src, str(tmp_path / "ck"), value="b")


def test_watermark_sets_the_allowed_lateness(sspark, tmp_path):
    """Events out of order across micro-batches but within the watermark
    delay wait in the state and are folded in order: none is late."""
    src = str(tmp_path / "in")
    base = dt.datetime(2026, 11, 22, 10, 0)
    rng = np.random.default_rng(4)
    minutes = rng.permutation(np.arange(0, 120))  # two hours, in random order
    for i in range(0, 120, 30):
        write_batch(src, [{"k": "a", "t": (base + dt.timedelta(minutes=int(m))).isoformat(), "v": 1}
                          for m in np.sort(minutes[i:i + 30])])
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("t", T.TimestampType()),
                           T.StructField("v", T.LongType())])
    got = run_stream(sspark, src, str(tmp_path / "ck"), schema=schema, ts="t", window="1 hour",
                     watermark="3 hours", value="v")
    assert all(r["late_events"] == 0 for r in got)
    last = got[-1]  # the last micro-batch's answer
    assert last["as_of"] == base + dt.timedelta(minutes=119)
    assert last["count_lower"] <= 60 <= last["count_upper"]  # minutes 60..119
    assert last["sum_lower"] <= 60 <= last["sum_upper"]


@pytest.mark.slow  # ~20 s: a second run of the update-mode query in append mode (python -m pytest --slow);
# CI's 10 minutes had about a minute to spare
def test_append_mode_gives_the_update_rows(sspark, tmp_path):
    """Every output row is final, so Append and Update emit the same rows,
    in processing-time mode and in event-time mode (a watermark)."""
    data = batches(seed=3, n=3, size=1000)
    for rows in data:
        write_batch(str(tmp_path / "in"), rows)
    kw = dict(value="b", distinct="dst")
    key = lambda r: (r["k"], r["as_of"])  # noqa: E731
    update = run_stream(sspark, str(tmp_path / "in"), str(tmp_path / "ck1"), output_mode="update", **kw)
    append = run_stream(sspark, str(tmp_path / "in"), str(tmp_path / "ck2"), output_mode="append", **kw)
    assert len(update) == 2 * len(data) and sorted(append, key=key) == sorted(update, key=key)

    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("t", T.TimestampType()),
                           T.StructField("v", T.LongType())])
    base = dt.datetime(2026, 11, 22, 10, 0)
    for i in range(3):
        write_batch(str(tmp_path / "ev"), [{"k": k, "t": (base + dt.timedelta(minutes=20 * i + m)).isoformat(),
                                            "v": m} for m in range(20) for k in "ab"])
    kw = dict(schema=schema, ts="t", window="30 minutes", watermark="10 minutes", value="v")
    update = run_stream(sspark, str(tmp_path / "ev"), str(tmp_path / "ck3"), output_mode="update", **kw)
    append = run_stream(sspark, str(tmp_path / "ev"), str(tmp_path / "ck4"), output_mode="append", **kw)
    assert update and sorted(append, key=key) == sorted(update, key=key)
    assert all(r["late_events"] == 0 for r in append)


def _ttl_stream(sspark, tmp_path, got: list):
    """A query of keys a and b (ten events each) with a 15-second TTL, its
    rows appended to ``got``, on a processing-time trigger; returns the
    query and ``wait_for(n)``, which polls ``got`` for ``n`` rows."""
    src = str(tmp_path / "in")
    write_batch(src, [{"k": k, "ts": t, "b": 1, "dst": 1} for k in "ab" for t in range(10)])
    out = sliding_window_state(sspark.readStream.schema(SCHEMA).json(src), "k", "ts", ttl="15 seconds",
                               bounds=True, count=Count(10_000))
    q = out.writeStream.outputMode("update").foreachBatch(lambda df, _: got.extend(r.asDict() for r in df.collect())) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="500 milliseconds").start()

    def wait_for(n):
        deadline = time.monotonic() + 120
        while len(got) < n and time.monotonic() < deadline and q.isActive:
            time.sleep(0.1)
        assert len(got) >= n, q.exception()

    return src, q, wait_for


def test_a_query_with_a_ttl_answers(sspark, tmp_path):
    """With a TTL the query runs in processing-time mode, where Spark runs a
    micro-batch every trigger even without input (to expire state): the
    query runs on a processing-time trigger and the test polls its output
    (processAllAvailable() would not return).  The eviction itself:
    test_ttl_evicts_idle_keys (--slow: it waits past the TTL)."""
    got = []
    _, q, wait_for = _ttl_stream(sspark, tmp_path, got)
    try:
        wait_for(2)
    finally:
        q.stop()
    assert sorted((r["k"], r["count_upper"]) for r in got) == [("a", 10), ("b", 10)]


@pytest.mark.slow  # 25 s, 17 of them waiting past the TTL; the query's plumbing: test_a_query_with_a_ttl_answers
def test_ttl_evicts_idle_keys(sspark, tmp_path):
    """Processing-time TTL: a key idle for longer than the TTL starts afresh."""
    got = []
    src, q, wait_for = _ttl_stream(sspark, tmp_path, got)
    try:
        wait_for(2)
        write_batch(src, [{"k": "a", "ts": 10, "b": 1, "dst": 1}])  # "a" within the TTL
        wait_for(3)
        time.sleep(17)  # both idle past the TTL (measured from each batch's start)
        write_batch(src, [{"k": k, "ts": 11, "b": 1, "dst": 1} for k in "ab"])
        wait_for(5)
    finally:
        q.stop()
    assert [(r["k"], r["count_upper"]) for r in got[:2]] in ([("a", 10), ("b", 10)], [("b", 10), ("a", 10)])
    assert got[2]["count_upper"] == 11  # kept: updated within the TTL
    assert sorted((r["k"], r["count_upper"]) for r in got[3:]) == [("a", 1), ("b", 1)]  # evicted


def test_configuration_is_checked_on_the_driver(spark, tmp_path):
    stream = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    try:
        with pytest.raises(ConfigurationError, match="RocksDB.*Fix"):
            sliding_window_state(stream, "k", "ts", n=Count(100))
    finally:
        spark.conf.unset(PROVIDER) if before is None else spark.conf.set(PROVIDER, before)


def test_bad_parameters(sspark, tmp_path):
    stream = sspark.readStream.schema(SCHEMA).json(str(tmp_path))
    n = Count(100)
    with pytest.raises(ValueError, match="late must be"):
        sliding_window_state(stream, "k", "ts", late="keep", n=n)
    with pytest.raises(TypeError, match="sliding_window_state takes column names for key"):
        sliding_window_state(stream, stream["k"], "ts", n=n)
    with pytest.raises(ValueError, match="not in the DataFrame"):
        sliding_window_state(stream, "k", "nope", n=n)
    with pytest.raises(ValueError, match="watermark needs a timestamp"):
        sliding_window_state(stream, "k", "ts", watermark="1 minute", n=n)
    with pytest.raises(ValueError, match="interval but column ts is integral"):
        sliding_window_state(stream, "k", "ts", n=Count("1 hour"))
    with pytest.raises(ValueError, match="eps"):
        sliding_window_state(stream, "k", "ts", n=Count(100, eps=2))
    with pytest.raises(ValueError, match="spec late_events: the output already has a column"):
        sliding_window_state(stream, "k", "ts", late_events=n)
    with pytest.raises(TypeError, match="not both"):
        sliding_window_state(stream, "k", "ts", 100, n=n)


def test_timestamp_ntz_event_time(sspark, tmp_path):
    """A TimestampNTZ event time (wall clock): windows and the watermark in
    its units, as_of returned as TimestampNTZ."""
    src = str(tmp_path / "in")
    base = dt.datetime(2026, 11, 22, 10, 0)
    for lo in (0, 60):
        write_batch(src, [{"k": "a", "t": (base + dt.timedelta(minutes=m)).isoformat()} for m in range(lo, lo + 60)])
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("t", T.TimestampNTZType())])
    got = run_stream(sspark, src, str(tmp_path / "ck"), schema=schema, ts="t", window="1 hour", watermark="1 minute")
    last = max(got, key=lambda r: r["as_of"])
    assert last["as_of"] == base + dt.timedelta(minutes=119)  # naive datetime: TimestampNTZ
    assert last["count_lower"] <= 60 <= last["count_upper"]


def state_keys(spark, checkpoint, batch_id=None) -> list:
    """The keys holding state after micro-batch ``batch_id`` (default: the
    last committed one), read by Spark's state data source."""
    state = spark.read.format("statestore").option("path", checkpoint).option("stateVarName", "synopses")
    if batch_id is not None:
        state = state.option("batchId", batch_id)
    state = state.load()
    return sorted(r.key.k for r in state.collect())


def expiry_batches(src) -> None:
    """Key a idle from 10:09; key b moves the watermark (5 minutes) to
    11:55 and then past a's newest event plus the window (1 hour): a's
    state goes in the third micro-batch; a comes back in the fourth."""
    base = dt.datetime(2026, 11, 22, 10, 0)

    def at(k, m):
        return {"k": k, "t": (base + dt.timedelta(minutes=m)).isoformat(), "v": 1}

    write_batch(src, [at("a", m) for m in range(10)] + [at("b", 0)])
    write_batch(src, [at("b", 120)])
    write_batch(src, [at("b", 122)])
    write_batch(src, [at("a", 123)])


EVENT_SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("t", T.TimestampType()),
                             T.StructField("v", T.LongType())])


def test_event_time_expiry_drops_a_key_once_the_watermark_passes_its_window(sspark, tmp_path):
    """With a watermark, a key's state is dropped by an event-time timer
    once the watermark passes its newest event plus the widest window (so
    no answer changes); without one (and without ttl) it stays.  A query
    restarted from its checkpoint after the expiry gives the rows and the
    state of an uninterrupted run."""
    src, parts = str(tmp_path / "in"), str(tmp_path / "parts")
    expiry_batches(src)
    kw = dict(schema=EVENT_SCHEMA, ts="t", window="1 hour", value="v", watermark="5 minutes")
    whole = run_stream(sspark, src, str(tmp_path / "ck"), **kw)
    assert state_keys(sspark, str(tmp_path / "ck"), 1) == ["a", "b"]
    assert state_keys(sspark, str(tmp_path / "ck"), 2) == ["b"]  # 11:55 > a's 10:09 + 1 hour
    assert state_keys(sspark, str(tmp_path / "ck"), 3) == ["a", "b"]
    back = [r for r in whole if r["k"] == "a"][-1]
    assert (back["count_upper"], back["sum_upper"], back["late_events"]) == (1, 1, 0)

    # restarted from the checkpoint after the expiry: the same rows and state
    files = sorted(os.listdir(src))
    os.makedirs(parts)
    for name in files[:3]:
        os.link(os.path.join(src, name), os.path.join(parts, name))
    first = run_stream(sspark, parts, str(tmp_path / "ck2"), **kw)
    assert state_keys(sspark, str(tmp_path / "ck2"), 2) == ["b"]
    os.link(os.path.join(src, files[3]), os.path.join(parts, files[3]))
    second = run_stream(sspark, parts, str(tmp_path / "ck2"), **kw)
    key = lambda r: (r["k"], r["as_of"])  # noqa: E731
    assert sorted(first + second, key=key) == sorted(whole, key=key)
    assert state_keys(sspark, str(tmp_path / "ck2")) == state_keys(sspark, str(tmp_path / "ck")) == ["a", "b"]

    # processing-time mode, no ttl: nothing expires
    kw.pop("watermark")
    run_stream(sspark, src, str(tmp_path / "ck3"), **kw)
    assert state_keys(sspark, str(tmp_path / "ck3"), 2) == ["a", "b"]


def test_ttl_with_a_watermark_is_refused_on_the_driver(sspark, tmp_path):
    stream = sspark.readStream.schema(EVENT_SCHEMA).json(str(tmp_path))
    with pytest.raises(ValueError, match=r"ttl='2 hours' is processing time.*watermark='5 minutes'.*"
                                         r"widest window \(1 hour\): drop ttl"):
        sliding_window_state(stream, "k", "t", watermark="5 minutes", ttl="2 hours",
                             n=Count("30 minutes"), s=Sum("v", "1 hour"))


def test_the_docs_streaming_example_runs(sspark, tmp_path, monkeypatch):
    """The streaming page's block (docs/streaming.md) as printed, on a file
    of flows at its path and started as it says; then processed and
    stopped."""
    import re
    from pathlib import Path

    import udaf.streaming

    readme = (Path(__file__).resolve().parent.parent / "docs" / "streaming.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "sliding_window_state" in b)
    src = str(tmp_path / "flows")
    base = dt.datetime(2026, 11, 22, 10, 0)
    write_batch(src, [{"src": f"10.0.0.{i % 3}", "ts": (base + dt.timedelta(seconds=7 * i)).isoformat(),
                       "bytes": 100 + i, "dst": f"10.1.0.{i % 11}"} for i in range(600)])
    assert '.json("/data/flows")' in block
    # local_session() on a running session would reconfigure the shared one: hand it the test's
    monkeypatch.setattr(udaf.streaming, "local_session", lambda *a, **k: sspark)
    ns: dict = {}
    exec(compile(block.replace("/data/flows", src), "docs/streaming.md", "exec"), ns)  # noqa: S102 - the docs' code
    query = ns["query"]
    try:
        query.processAllAvailable()
        assert query.exception() is None and query.isActive
    finally:
        query.stop()
    assert query.lastProgress["numInputRows"] >= 0 and query.recentProgress
    assert sum(p["numInputRows"] for p in query.recentProgress) == 600
