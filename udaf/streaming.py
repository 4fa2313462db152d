"""Per-key sliding-window state for Structured Streaming.

Spark's native sliding windows (``groupBy(key, window(ts, '1 hour', '1
minute'))``) copy every event into window/slide windows and keep a state
row per key and window, answering only at slide boundaries.
:func:`sliding_window_state` keeps one value per key instead: the
serialized synopses (an exponential histogram of the count, optionally of
a value's sum, and a sliding HyperLogLog of distinct items), a few hundred
bytes, answering for the last ``window`` as of each key's newest event.

Built on ``transformWithState`` (the Row API; ``transformWithStateInPandas``
where PySpark lacks it): each micro-batch, a key's new rows are sorted by
event time and inserted in one batch.  Before the state, a stateless
``mapInArrow`` packs each partition's events into one row per key (event
times, values and item hashes as bytes): the stateful operator's Python
side costs about as much per row as the synopses cost per key; packing
raised the throughput by a third to a half here (benchmarks/REPORT.md).

Late data and the watermark
---------------------------
A synopsis summarizes events in time order.  Without a watermark, a key's
events are folded in as they arrive, and an event older than the key's
newest folded event is *late*.  With ``watermark='10 minutes'`` (event-time
mode), events newer than the watermark wait, exactly, in the key's state
until the watermark passes them, and are then folded in time order: the
watermark delay is the allowed lateness, and answers count the waiting
events exactly.  Late events are never folded in wrongly: ``late='drop'``
drops and counts them (column ``late_events``, cumulative per key),
``late='raise'`` fails the query naming the key and the times.  (Spark
itself may drop events older than the watermark before they reach the
state; the query progress counts them in ``numRowsDroppedByWatermark``,
in packs of a key's events rather than events.)

Configuration
-------------
``transformWithStateInPandas`` needs the RocksDB state store provider and
protobuf >= 6 (which pyspark does not declare); :func:`check_configuration`
verifies both on the driver and :func:`local_session` builds a correctly
configured local session.

TTL is processing time (Spark's only kind) and needs Spark's
processing-time mode, where a micro-batch runs every trigger even without
input (that is what expires idle keys).  In PySpark 4.3 such a query never
settles: ``processAllAvailable()`` does not return and
``trigger(availableNow=True)`` does not terminate (it loops on empty
batches).  Run it on a processing-time trigger
(``trigger(processingTime='10 seconds')``).  Without ``ttl`` the query runs
without a time mode and both work.

Examples
--------
>>> from udaf.streaming import local_session, sliding_window_state   # doctest: +SKIP
>>> spark = local_session()                                          # doctest: +SKIP
>>> events = spark.readStream.schema(schema).json("/data/flows")     # doctest: +SKIP
>>> counts = sliding_window_state(events, "src", "ts", "1 hour", eps=0.05,
...                               value="bytes", distinct="dst",
...                               watermark="5 minutes", ttl="2 hours")  # doctest: +SKIP
>>> counts.writeStream.outputMode("update").format("console").start()  # doctest: +SKIP
"""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from distinct import SlidingHyperLogLog
from ehist import ExponentialHistogram
from ehist._validation import check_eps
from ehist.errors import EhistError, LateDataError
from ehist.hashing import hash64

from ._arrow import run_starts
from ._convert import Window, items_of, key_names
from .two_phase import micros_to_ntz, ntz_micros

__all__ = ["sliding_window_state", "check_configuration", "local_session", "ROCKSDB_PROVIDER"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
_INT_TYPES = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)

_STATE_SCHEMA = T.StructType([
    T.StructField("count", T.BinaryType()),
    T.StructField("sum", T.BinaryType()),
    T.StructField("distinct", T.BinaryType()),
    T.StructField("pending", T.BinaryType()),
    T.StructField("late", T.LongType()),
])


class ConfigurationError(EhistError, RuntimeError):
    """The session cannot run the streaming state (with how to fix it)."""


def check_configuration(spark: SparkSession) -> None:
    """Raise :class:`ConfigurationError` unless the session can run
    ``transformWithStateInPandas``: the RocksDB state store provider and
    protobuf >= 6 importable on the driver."""
    provider = spark.conf.get(_PROVIDER_KEY, None)
    if provider != ROCKSDB_PROVIDER:
        raise ConfigurationError(
            f"transformWithStateInPandas needs the RocksDB state store; {_PROVIDER_KEY} is {provider!r}. "
            f'Fix: spark.conf.set("{_PROVIDER_KEY}", "{ROCKSDB_PROVIDER}") before starting the query, '
            "or build the session with udaf.streaming.local_session()"
        )
    try:
        from google.protobuf import __version__ as version
    except ImportError:
        version = None
    if version is None or int(version.split(".")[0]) < 6:
        found = "not installed" if version is None else f"version {version}"
        raise ConfigurationError(
            f"transformWithStateInPandas needs protobuf >= 6 (pyspark does not declare it); found {found}. "
            'Fix: pip install "protobuf>=6" (the ehist[spark] extra includes it)'
        )


def local_session(app_name: str = "ehist-streaming", cores: str = "*", **conf) -> SparkSession:
    """A local SparkSession configured for :func:`sliding_window_state`:
    RocksDB state store, UTC session time, workers on this interpreter,
    few shuffle partitions; ``conf`` adds or overrides settings."""
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]").appName(app_name)
        .config(_PROVIDER_KEY, ROCKSDB_PROVIDER)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
    )
    for k, v in conf.items():
        builder = builder.config(k.replace("_", "."), v) if "." not in k else builder.config(k, v)
    return builder.getOrCreate()


def sliding_window_state(df: DataFrame, key, event_time: str, window, *, eps: float = 0.05,
                         value: str | None = None, distinct: str | None = None, precision: int = 12,
                         seed: int = 0, watermark: str | None = None, ttl=None, late: str = "drop",
                         output_mode: str = "update") -> DataFrame:
    """Per-key sliding-window counts (and sums, distinct counts) of a stream.

    Parameters
    ----------
    df : DataFrame
        A streaming (or batch) DataFrame.
    key : str or list of str
        Key columns.
    event_time : str
        TimestampType (windows as interval strings or microseconds) or an
        integral column (windows in its units; no watermark).
    window : int or str
        The sliding window, e.g. ``'1 hour'``.
    eps : float, default 0.05
        Relative error of the count and sum (exponential histograms).
    value : str, optional
        A non-negative integral column to sum over the window (nulls skipped).
    distinct : str, optional
        A column whose distinct values to count over the window (sliding
        HyperLogLog of ``precision``, relative standard error
        ``1.04 / sqrt(2**precision)``; nulls skipped).
    watermark : str, optional
        Event-time mode: ``df.withWatermark(event_time, watermark)`` is
        applied, and events wait exactly in the state until the watermark
        passes them (the allowed lateness; see the module notes).
    ttl : str or int (milliseconds), optional
        Processing-time TTL: a key's state is evicted when it has not been
        updated for this long, measured from the start of the micro-batch
        that last updated it (see the module notes on triggers).
    late : {'drop', 'raise'}
        What to do with an event older than what its key's state has
        summarized.
    output_mode : {'update', 'append'}
        Passed to Spark; every output row is final (one per key per
        micro-batch with input), so both modes give the same rows.

    Returns
    -------
    Streaming DataFrame of ``key columns, as_of, count, count_lower,
    count_upper`` [``, sum, sum_lower, sum_upper``] [``, distinct``]``,
    late_events``: the answers over ``(as_of - window, as_of]``, ``as_of``
    the key's newest event (same type as ``event_time``); the exact count
    and sum lie within their bounds.

    Raises
    ------
    ConfigurationError
        RocksDB state store not configured or protobuf < 6 (on the driver).
    TypeError, ValueError
        Unknown columns, wrong types, bad parameters (on the driver).
    """
    check_configuration(df.sparkSession)
    keys = key_names(key, "sliding_window_state", "key")
    names = set(df.columns)
    for c in keys + [event_time] + [c for c in (value, distinct) if c is not None]:
        if not isinstance(c, str):
            raise TypeError(f"sliding_window_state takes column names, got {c!r}")
        if c not in names:
            raise ValueError(f"column {c!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    for c in (value, distinct):
        if c is not None and (c in keys or c == event_time):
            raise ValueError(f"column {c!r} is a key or the event-time column")
    ts_type = df.schema[event_time].dataType
    if isinstance(ts_type, T.TimestampType):
        unit, time_expr = "us", F.unix_micros(F.col(event_time))
    elif isinstance(ts_type, T.TimestampNTZType):
        unit, time_expr = "us", ntz_micros(F.col(event_time))
    elif isinstance(ts_type, _INT_TYPES):
        unit, time_expr = "int", F.col(event_time).cast("long")
    else:
        raise TypeError(f"column {event_time} must be a timestamp (with or without time zone) or integral column, "
                        f"got {ts_type.simpleString()}")
    if value is not None and not isinstance(df.schema[value].dataType, _INT_TYPES):
        raise TypeError(f"column {value} must be integral, got {df.schema[value].dataType.simpleString()}")
    w = Window(window).resolve(unit, event_time)
    eps = check_eps(eps)
    if distinct is not None:
        SlidingHyperLogLog(1, precision, seed)  # checks precision and seed
    if late not in ("drop", "raise"):
        raise ValueError(f"late must be 'drop' or 'raise', got {late!r}")
    mode = str(output_mode).lower()
    if mode not in ("update", "append"):
        raise ValueError(f"output_mode must be 'update' or 'append', got {output_mode!r}")
    ttl_ms = None
    if ttl is not None:
        ttl_ms = int(ttl) if isinstance(ttl, (int, np.integer)) and not isinstance(ttl, bool) \
            else Window(ttl, "ttl").micros // 1000
        if ttl_ms is None or ttl_ms <= 0:
            raise ValueError(f"ttl must be a positive interval or milliseconds, got {ttl!r}")
    if watermark is not None:
        if unit != "us":
            raise ValueError("a watermark needs a timestamp event-time column")
        Window(watermark, "watermark")
        time_mode = "EventTime"
    else:
        time_mode = "ProcessingTime" if ttl_ms is not None else "None"

    columns = [F.col(k) for k in keys] + [time_expr.alias("ehist_ts")]
    columns += [F.col(value).cast("long").alias("ehist_value")] if value is not None else []
    columns += [F.col(distinct).alias("ehist_item")] if distinct is not None else []
    pack_fields = [df.schema[k] for k in keys] + [T.StructField("ehist_ts", T.BinaryType(), False)]
    pack_fields += [T.StructField("ehist_value", T.BinaryType(), False)] if value is not None else []
    pack_fields += [T.StructField("ehist_hash", T.BinaryType(), False)] if distinct is not None else []
    if watermark is not None:
        pack_fields.append(T.StructField("ehist_event_time", T.TimestampType(), False))
    packer = _Packer(keys, event_time, value is not None, distinct is not None, seed, watermark is not None)
    packed = df.select(*columns).mapInArrow(packer, T.StructType(pack_fields))
    if watermark is not None:
        # the watermark on each pack's newest event: the same maximum event
        # time, hence the same watermark, as on the events themselves
        packed = packed.withWatermark("ehist_event_time", watermark)
    out_fields = [df.schema[k] for k in keys] + [
        T.StructField("as_of_us", T.LongType()), T.StructField("count", T.DoubleType()),
        T.StructField("count_lower", T.LongType()), T.StructField("count_upper", T.LongType())]
    if value is not None:
        out_fields += [T.StructField("sum", T.DoubleType()), T.StructField("sum_lower", T.LongType()),
                       T.StructField("sum_upper", T.LongType())]
    if distinct is not None:
        out_fields.append(T.StructField("distinct", T.DoubleType()))
    out_fields.append(T.StructField("late_events", T.LongType()))

    processor = _SlidingProcessor(keys, event_time, w, eps, value is not None, distinct is not None,
                                  precision, seed, watermark is not None, ttl_ms, late)
    grouped = packed.groupBy(*keys)
    # the Row API (where PySpark has it) skips a pandas frame per key and batch
    processor.row_api = hasattr(grouped, "transformWithState")
    transform = grouped.transformWithState if processor.row_api else grouped.transformWithStateInPandas
    out = transform(statefulProcessor=processor, outputStructType=T.StructType(out_fields),
                    outputMode=mode.capitalize(), timeMode=time_mode)
    if isinstance(ts_type, T.TimestampNTZType):
        as_of = micros_to_ntz(F.col("as_of_us"))
    else:
        as_of = F.timestamp_micros("as_of_us") if unit == "us" else F.col("as_of_us")
    rest = [f.name for f in out_fields[len(keys) + 1:]]
    return out.select(*[F.col(k) for k in keys], as_of.alias("as_of"), *rest)


# ------------------------------------------------------------------ state
def _pack_pending(ts: np.ndarray, vals: np.ndarray, hashes: np.ndarray) -> bytes:
    return struct.pack("<q", ts.size) + ts.tobytes() + vals.tobytes() + hashes.tobytes()


def _unpack_pending(blob) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if blob is None:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.view(np.uint64)
    blob = bytes(blob)
    (n,) = struct.unpack_from("<q", blob)
    arr = np.frombuffer(blob, dtype=np.int64, offset=8, count=3 * n)
    return arr[:n].copy(), arr[n:2 * n].copy(), arr[2 * n:].copy().view(np.uint64)


class _SlidingProcessor(StatefulProcessor):
    """One ValueState per key: the synopses' bytes, the events waiting for
    the watermark (exact), and the number of late events dropped."""

    def __init__(self, keys, event_time, window, eps, with_sum, with_distinct, precision, seed,
                 event_mode, ttl_ms, late):
        self.keys, self.event_time, self.window, self.eps = keys, event_time, window, eps
        self.with_sum, self.with_distinct = with_sum, with_distinct
        self.precision, self.seed = precision, seed
        self.event_mode, self.ttl_ms, self.late = event_mode, ttl_ms, late
        self.row_api = False

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("synopses", _STATE_SCHEMA, self.ttl_ms)

    def _load(self):
        row = self.state.get()  # None when the key has no state (one round trip, not two)
        if row is not None:
            count = ExponentialHistogram.from_bytes(row[0])
            total = ExponentialHistogram.from_bytes(row[1]) if row[1] is not None else None
            items = SlidingHyperLogLog.from_bytes(row[2]) if row[2] is not None else None
            return count, total, items, _unpack_pending(row[3]), int(row[4])
        count = ExponentialHistogram(self.window, self.eps)
        total = ExponentialHistogram(self.window, self.eps) if self.with_sum else None
        items = SlidingHyperLogLog(self.window, self.precision, self.seed) if self.with_distinct else None
        return count, total, items, _unpack_pending(None), 0

    def handleInputRows(self, key, rows, timerValues):
        t, vals, hashes, has_item = self._arrays(key, rows)
        count, total, items, (p_ts, p_val, p_hash), late_total = self._load()
        folded = count.newest
        if folded is not None:
            is_late = t < folded
            n_late = int(is_late.sum())
            if n_late:
                if self.late == "raise":
                    raise LateDataError(int(t[is_late].min()), folded,
                                        f"key {tuple(key)}: {n_late} late event(s) in this micro-batch "
                                        "(late='raise'; late='drop' drops and counts them)")
                late_total += n_late
                t, vals, hashes, has_item = t[~is_late], vals[~is_late], hashes[~is_late], has_item[~is_late]
        # rows without an item carry the reserved hash _NO_ITEM, rows
        # without a value the value -1: counted, not summed nor hashed
        all_t = np.concatenate([p_ts, t])
        all_v = np.concatenate([p_val, vals])
        all_h = np.concatenate([p_hash, np.where(has_item, hashes, _NO_ITEM)])
        order = np.argsort(all_t, kind="stable")
        all_t, all_v, all_h = all_t[order], all_v[order], all_h[order]
        if self.event_mode:
            wm = timerValues.getCurrentWatermarkInMs()
            horizon = wm * 1000 if wm is not None and wm > 0 else None
        else:
            horizon = int(all_t[-1]) if all_t.size else None
        n_fold = 0 if horizon is None else int(np.searchsorted(all_t, horizon, side="right"))
        if n_fold:
            self._fold(count, total, items, all_t[:n_fold], all_v[:n_fold], all_h[:n_fold])
        wait_t, wait_v, wait_h = all_t[n_fold:], all_v[n_fold:], all_h[n_fold:]
        newest = max([x for x in (count.newest, int(all_t[-1]) if all_t.size else None) if x is not None],
                     default=None)
        self.state.update((count.to_bytes(), total.to_bytes() if total is not None else None,
                           items.to_bytes() if items is not None else None,
                           _pack_pending(wait_t, wait_v, wait_h), late_total))
        if newest is None:
            return
        row = self._answer(key, newest, count, total, items, wait_t, wait_v, wait_h, late_total)
        if self.row_api:
            yield Row(**row)
        else:
            yield pd.DataFrame({name: [v] for name, v in row.items()})

    def _arrays(self, key, rows):
        """(event times, values with -1 for none, item hashes, has-item
        mask) of a key's packs (see :class:`_Packer`): Rows or pandas
        frames, a few per key and micro-batch whatever its event count."""
        fields = ["ehist_ts"] + (["ehist_value"] if self.with_sum else []) + \
            (["ehist_hash"] if self.with_distinct else [])
        cells = {f: [] for f in fields}
        for chunk in rows:
            if isinstance(chunk, pd.DataFrame):
                for f in fields:
                    cells[f].extend(chunk[f].tolist())
            else:
                for f in fields:
                    cells[f].append(chunk[f])
        t = np.frombuffer(b"".join(cells["ehist_ts"]), dtype=np.int64)
        vals = np.frombuffer(b"".join(cells["ehist_value"]), dtype=np.int64) if self.with_sum \
            else np.zeros(t.size, dtype=np.int64)
        hashes = np.frombuffer(b"".join(cells["ehist_hash"]), dtype=np.uint64) if self.with_distinct \
            else np.zeros(t.size, dtype=np.uint64)
        return t, vals, hashes, hashes != _NO_ITEM

    def _fold(self, count, total, items, t, v, h):
        count.update(t)
        if total is not None:
            present = v >= 0
            total.update(t[present], v[present])
        if items is not None:
            present = h != _NO_ITEM
            items.update_hashes(t[present], h[present])

    def _answer(self, key, now, count, total, items, wt, wv, wh, late_total):
        cutoff = now - self.window
        in_window = wt > cutoff
        lo, up = count.bounds(now=now)
        n_wait = int(in_window.sum())
        row = dict(zip(self.keys, key))
        row.update(as_of_us=now, count=(lo + up) / 2 + n_wait, count_lower=lo + n_wait, count_upper=up + n_wait)
        if total is not None:
            s_wait = int(wv[in_window & (wv >= 0)].sum())
            lo, up = total.bounds(now=now) if total.newest is not None else (0, 0)
            row.update(sum=(lo + up) / 2 + s_wait, sum_lower=lo + s_wait, sum_upper=up + s_wait)
        if items is not None:
            merged = items.copy()
            sel = in_window & (wh != _NO_ITEM)
            if sel.any():
                merged.update_hashes(wt[sel], wh[sel])
            row["distinct"] = float(merged.estimate(now=now)) if merged.newest is not None else 0.0
        row["late_events"] = late_total
        return row

    def close(self) -> None:
        pass


class _Packer:
    """``mapInArrow`` before the state: a partition's events become one
    row per key (its event times, values and item hashes as little-endian
    int64 / uint64 bytes), so the stateful operator's Python side handles a
    few rows per key and micro-batch instead of one per event (its per-row
    cost, not the synopses, bounded the throughput).  Checks null event
    times and negative values, and hashes items, vectorized over the whole
    partition.  A key may get several packs (one per partition and
    ``_PACK_ROWS`` events); the state sorts them together."""

    def __init__(self, keys, event_time, with_value, with_item, seed, with_event_time):
        self.keys, self.event_time = keys, event_time
        self.with_value, self.with_item, self.seed = with_value, with_item, seed
        self.with_event_time = with_event_time

    def __call__(self, batches):
        import pyarrow as pa

        held, n = [], 0
        for batch in batches:
            if batch.num_rows:
                held.append(batch)
                n += batch.num_rows
            if n >= _PACK_ROWS:
                yield from self._pack(pa.Table.from_batches(held)).to_batches()
                held, n = [], 0
        if held:
            yield from self._pack(pa.Table.from_batches(held)).to_batches()

    def _pack(self, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        if table["ehist_ts"].null_count:
            raise ValueError(f"null event time in column {self.event_time}: event times must not be null")
        n = table.num_rows
        try:
            order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in self.keys] +
                                    [("ehist_ts", "ascending")])
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            order = None  # a key type pyarrow cannot sort (a struct): a pack per event
        table = (table.take(order) if order is not None else table).combine_chunks()
        starts = run_starts([table[k].chunk(0) for k in self.keys], n) if order is not None else None
        if starts is None:  # a pack per event: still correct (Spark groups the packs), only less packed
            starts = np.arange(n)
        ends = np.append(starts[1:], n)
        ts = table["ehist_ts"].to_numpy()
        out = {k: table[k].take(pa.array(starts)) for k in self.keys}
        out["ehist_ts"] = _binary(ts, starts, n)
        if self.with_value:
            v = table["ehist_value"]
            smallest = pc.min(v).as_py()  # None when every value is null
            if smallest is not None and smallest < 0:
                raise ValueError("the summed column holds a negative value: sums need values >= 0")
            out["ehist_value"] = _binary(pc.fill_null(v, -1).to_numpy(), starts, n)
        if self.with_item:
            has_item, items = items_of(table["ehist_item"].to_pandas(), "distinct")
            hashes = np.zeros(n, dtype=np.uint64)  # _NO_ITEM: counted, not hashed
            hashes[has_item] = hash64(items, self.seed)
            out["ehist_hash"] = _binary(hashes, starts, n)
        if self.with_event_time:
            out["ehist_event_time"] = pa.array(ts[ends - 1], type=pa.timestamp("us", tz="UTC"))
        return pa.Table.from_pydict(out)


_PACK_ROWS = 1 << 20  # events per pack at most: bounds a map task's memory


def _binary(values: np.ndarray, starts: np.ndarray, n: int):
    """One binary cell per run: the run's ``values`` as 8-byte words."""
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    offsets = (np.append(starts, n) * 8).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), starts.size, [None, pa.py_buffer(offsets), pa.py_buffer(values)])


# A reserved hash for "this row has no item" (nulls are skipped by the HLL);
# hash64 never returns it for a real item with probability 1 - 2**-64.
_NO_ITEM = np.uint64(0)
