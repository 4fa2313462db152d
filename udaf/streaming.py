"""Per-key sliding-window state for Structured Streaming.

Spark's native sliding windows (``groupBy(key, window(ts, '1 hour', '1
minute'))``) copy every event into window/slide windows and keep a state
row per key and window, answering only at slide boundaries.
:func:`sliding_window_state` keeps one value per key instead: the
serialized synopses of its specs (the same ``Count``, ``Sum``,
``Distinct``, ``DistinctFM``, ``LpNorm`` as :func:`udaf.aggregate` takes;
an exponential histogram of a count is a few hundred bytes), answering for
each spec's window as of each key's newest event.

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

Expiring state
--------------
With a watermark (event-time mode), a key's state is dropped by an
event-time timer once the watermark passes the key's newest event plus the
widest window of the specs (rounded up to a sixteenth of that window, so
that the timer moves rarely): from then on every event the key could still
receive answers a window that starts after everything the state holds, so
nothing it could answer is lost (``late_events`` starts again from 0).

Without a watermark, ``ttl`` expires idle keys in processing time (Spark's
only TTL, and Spark refuses it in event-time mode, so ``ttl`` with a
watermark is refused on the driver).  TTL needs Spark's processing-time
mode, where a micro-batch runs every trigger even without input (that is
what expires idle keys).  In PySpark 4.3 such a query never settles:
``processAllAvailable()`` does not return and
``trigger(availableNow=True)`` does not terminate (it loops on empty
batches).  Run it on a processing-time trigger
(``trigger(processingTime='10 seconds')``).  Without ``ttl`` the query runs
without a time mode (or in event-time mode with a watermark) and both
work.

Examples
--------
>>> from udaf.streaming import local_session, sliding_window_state   # doctest: +SKIP
>>> spark = local_session()                                          # doctest: +SKIP
>>> events = spark.readStream.schema(schema).json("/data/flows")     # doctest: +SKIP
>>> counts = sliding_window_state(events, "src", "ts", watermark="5 minutes",
...                               packets=Count(window="1 hour", eps=0.05),
...                               bytes=Sum("bytes", window="1 hour", eps=0.05),
...                               dsts=Distinct("dst", window="1 hour"))  # doctest: +SKIP
>>> counts.writeStream.outputMode("update").format("console").start()  # doctest: +SKIP
"""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from ehist.errors import EhistError, LateDataError

from ._arrow import run_starts
from ._convert import Window, interval_text, key_names
from .data import StateWords
from .eh_spec import Count, Sum
from .hll_spec import Distinct
from .inputs import EVENT_TIME, TIME_NEEDS, check_spark_type, times
from .spec import Spec, read_spec
from .two_phase import check_specs, micros_to_ntz, time_expression

__all__ = ["sliding_window_state", "check_configuration", "local_session", "ROCKSDB_PROVIDER"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


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


def sliding_window_state(df: DataFrame, key, event_time: str, window=None, *, watermark: str | None = None,
                         ttl=None, late: str = "drop", output_mode: str = "update", bounds: bool = False,
                         eps=None, value: str | None = None, distinct: str | None = None, precision=None,
                         seed=None, **specs) -> DataFrame:
    """Per-key sliding-window answers of a stream, from synopses in state.

    Parameters
    ----------
    df : DataFrame
        A streaming (or batch) DataFrame.
    key : str or list of str
        Key columns.
    event_time : str
        TimestampType or TimestampNTZType (windows as interval strings or
        microseconds) or an integral column (windows in its units; no
        watermark).
    watermark : str, optional
        Event-time mode: ``df.withWatermark(event_time, watermark)`` is
        applied, and events wait exactly in the state until the watermark
        passes them (the allowed lateness; see the module notes).  A key's
        state is dropped once the watermark passes its newest event plus
        the widest window.
    ttl : str or int (milliseconds), optional
        Processing-time TTL, without a watermark: a key's state is evicted
        when it has not been updated for this long, measured from the start
        of the micro-batch that last updated it (see the module notes on
        triggers).  With a watermark, state expires by event time instead,
        and ``ttl`` is refused.
    late : {'drop', 'raise'}
        What to do with an event older than what its key's state has
        summarized.
    output_mode : {'update', 'append'}
        Passed to Spark; every output row is final (one per key per
        micro-batch with input), so both modes give the same rows.
    bounds : bool, default False
        Also ``<name>_lower`` and ``<name>_upper`` (bigint) for the specs
        with deterministic bounds (Count, Sum).
    **specs : Count, Sum, Distinct, DistinctFM or LpNorm
        Output column name -> what to compute, as for :func:`udaf.aggregate`.
    window, eps, value, distinct, precision, seed
        Deprecated (the call shape of release 0.1, kept for one minor
        version): ``window`` with ``eps`` (default 0.05) gives columns
        ``count``, ``count_lower``, ``count_upper``, with ``value`` also
        ``sum``, ``sum_lower``, ``sum_upper``, with ``distinct`` (a column;
        ``precision``, ``seed``) also ``distinct``, and keeps that
        release's state layout, so its checkpoints restart.

    Returns
    -------
    Streaming DataFrame of the key columns, ``as_of`` (the key's newest
    event, same type as ``event_time``), one column per spec (double) with
    its bounds when asked, and ``late_events`` (late events dropped so
    far for the key).

    Raises
    ------
    ConfigurationError
        RocksDB state store not configured or protobuf < 6 (on the driver).
    TypeError, ValueError
        Unknown columns, wrong types, bad parameters (on the driver).
    """
    keys = key_names(key, "sliding_window_state", "key")

    # output columns may carry the deprecated keywords' names (distinct=Distinct(...))
    named = {"eps": eps, "value": value, "distinct": distinct, "precision": precision, "seed": seed}
    for name, given in named.items():
        if isinstance(given, Spec):
            specs = {**specs, name: given}
            named[name] = None
    eps, value, distinct, precision, seed = named.values()
    legacy = window is not None
    if legacy:
        if specs:
            raise TypeError("sliding_window_state takes specs (count=Count(window='1 hour')) or the deprecated "
                            "window=/value=/distinct= arguments, not both")
        warnings.warn("sliding_window_state(df, key, event_time, window, eps=, value=, distinct=) is deprecated and "
                      "will be removed in the next minor version: pass specs, e.g. sliding_window_state(df, key, "
                      "event_time, count=Count(window, eps), bytes=Sum(column, window, eps), "
                      "dsts=Distinct(column, window))", DeprecationWarning, stacklevel=2)
        eps = 0.05 if eps is None else eps
        specs = {"count": Count(window, eps)}
        if value is not None:
            specs["sum"] = Sum(value, window, eps)
        if distinct is not None:
            specs["distinct"] = Distinct(distinct, window, 12 if precision is None else precision,
                                         0 if seed is None else seed)
        bounds = True
    elif any(x is not None for x in (eps, value, distinct, precision, seed)):
        raise TypeError("eps, value, distinct, precision and seed belong to the deprecated call shape with a "
                        "window; pass specs instead, e.g. bytes=Sum('bytes', window='1 hour', eps=0.05)")
    check_configuration(df.sparkSession)
    for name in specs:
        if name in ("as_of", "late_events") or name in keys:
            raise ValueError(f"spec {name}: the output already has a column {name!r}")
    names = set(df.columns)
    for c in keys + [event_time]:
        if not isinstance(c, str):
            raise TypeError(f"sliding_window_state takes column names, got {c!r}")
        if c not in names:
            raise ValueError(f"column {c!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    ts_type = df.schema[event_time].dataType
    check_spark_type(event_time, ts_type, EVENT_TIME, TIME_NEEDS)
    unit, windows, needed = check_specs(df, keys, event_time, specs, "sliding_window_state")
    time_expr, _ = time_expression(df, event_time)
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
        if ttl_ms is not None:
            widest = interval_text(max(windows.values()))
            raise ValueError(
                f"ttl={ttl!r} is processing time, which Spark refuses in event-time mode (watermark={watermark!r}); "
                f"with a watermark a key's state is already dropped once the watermark passes its newest event "
                f"plus the widest window ({widest}): drop ttl, or drop the watermark to expire idle keys by "
                "processing time")
        time_mode = "EventTime"
    else:
        time_mode = "ProcessingTime" if ttl_ms is not None else "None"

    slots = _slots(specs, legacy)
    columns = [F.col(k) for k in keys] + [time_expr.alias("ehist_ts")] + [F.col(c) for c in needed]
    pack_fields = [df.schema[k] for k in keys] + [T.StructField("ehist_ts", T.BinaryType(), False)]
    pack_fields += [T.StructField(f"ehist_w{i}", T.BinaryType(), False) for i in range(len(slots))]
    if watermark is not None:
        pack_fields.append(T.StructField("ehist_event_time", T.TimestampType(), False))
    packer = _Packer(keys, event_time, slots, watermark is not None)
    packed = df.select(*columns).mapInArrow(packer, T.StructType(pack_fields))
    if watermark is not None:
        # the watermark on each pack's newest event: the same maximum event
        # time, hence the same watermark, as on the events themselves
        packed = packed.withWatermark("ehist_event_time", watermark)
    out_fields = [df.schema[k] for k in keys] + [T.StructField("as_of_us", T.LongType())]
    with_bounds = [n for n, s in specs.items() if bounds and s.bounded]
    for name, spec in specs.items():
        out_fields.append(T.StructField(name, spec.answer_spark_type()))
        if name in with_bounds:
            out_fields += [T.StructField(f"{name}_lower", T.LongType()), T.StructField(f"{name}_upper", T.LongType())]
    out_fields.append(T.StructField("late_events", T.LongType()))

    processor = _SlidingProcessor(keys, slots, windows, with_bounds, watermark is not None, ttl_ms, late)
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


def _slots(specs: dict, legacy: bool) -> list:
    """The state's synopsis slots: (state field, output name, spec, the
    words its events wait as: :class:`~udaf.data.StateWords`).  The
    deprecated call shape keeps release 0.1's layout (fields count, sum,
    distinct; two word columns in pending events)."""
    if not legacy:
        return [(name, name, spec, spec.state_words()) for name, spec in specs.items()]
    return [(name, name, specs.get(name), StateWords.unused(width) if specs.get(name) is None
             else specs[name].state_words()) for name, width in (("count", 0), ("sum", 1), ("distinct", 1))]


def _state_schema(slots) -> T.StructType:
    return T.StructType([T.StructField(field, T.BinaryType()) for field, _, _, _ in slots] + [
        T.StructField("pending", T.BinaryType()), T.StructField("late", T.LongType())])


# ------------------------------------------------------------------ state
def _pack_pending(ts: np.ndarray, words: np.ndarray) -> bytes:
    """Events waiting for the watermark: their count, times, then each word
    column (column-major, as release 0.1 stored times, values, hashes)."""
    return struct.pack("<q", ts.size) + ts.tobytes() + np.ascontiguousarray(words.T).tobytes()


def _unpack_pending(blob, width: int) -> tuple[np.ndarray, np.ndarray]:
    if blob is None:
        return np.zeros(0, dtype=np.int64), np.zeros((0, width), dtype=np.int64)
    blob = bytes(blob)
    (n,) = struct.unpack_from("<q", blob)
    arr = np.frombuffer(blob, dtype=np.int64, offset=8, count=(1 + width) * n)
    return arr[:n].copy(), arr[n:].reshape(width, n).T.copy()


class _SlidingProcessor(StatefulProcessor):
    """One ValueState per key: each spec's synopsis bytes, the events
    waiting for the watermark (exact), and the number of late events
    dropped."""

    def __init__(self, keys, slots, windows, with_bounds, event_mode, ttl_ms, late):
        self.keys, self.slots, self.windows, self.with_bounds = keys, slots, windows, with_bounds
        self.event_mode, self.ttl_ms, self.late = event_mode, ttl_ms, late
        self.width = sum(words.width for _, _, _, words in slots)
        self.widest = max(windows.values())
        self.row_api = False

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("synopses", _state_schema(self.slots), self.ttl_ms)

    def _expiry_ms(self, newest: int) -> int:
        """The event-time timer of a key whose newest event is ``newest``
        (microseconds): ``newest`` plus the widest window, in milliseconds,
        rounded up to a sixteenth of the window.  The timer moves (a delete
        and a register) only when a key's newest event crosses into another
        sixteenth, not on every micro-batch; the state lives at most that
        much longer than it must."""
        step = max(1, self.widest // 16_000)  # milliseconds
        at = -(-(newest + self.widest) // 1000)  # rounded up to a millisecond
        return -(-at // step) * step

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Event-time mode: the watermark passed the key's newest event
        plus the widest window (rounded up, :meth:`_expiry_ms`); every later
        event's window starts after what the state holds, so it goes (the
        key starts afresh)."""
        self.state.clear()
        return iter(())

    def _load(self):
        row = self.state.get()  # None when the key has no state (one round trip, not two)
        sketches = []
        for i, (_, name, spec, _) in enumerate(self.slots):
            if spec is None:
                sketches.append(None)
            elif row is not None and row[i] is not None:
                sketches.append(spec.sketch_type.from_bytes(row[i]))
            else:
                sketches.append(spec.make(self.windows[name]))
        n = len(self.slots)
        pending = _unpack_pending(None if row is None else row[n], self.width)
        return sketches, pending, 0 if row is None else int(row[n + 1])

    def _split(self, words):
        """Each slot's word columns."""
        out, at = [], 0
        for _, _, _, state_words in self.slots:
            out.append(words[:, at:at + state_words.width])
            at += state_words.width
        return out

    def handleInputRows(self, key, rows, timerValues):
        t, words = self._arrays(rows)
        sketches, (p_ts, p_words), late_total = self._load()
        folded = max([s.newest for s in sketches if s is not None and s.newest is not None], default=None)
        held = max([x for x in (folded, int(p_ts.max()) if p_ts.size else None) if x is not None], default=None)
        if folded is not None:
            is_late = t < folded
            n_late = int(is_late.sum())
            if n_late:
                if self.late == "raise":
                    raise LateDataError(int(t[is_late].min()), folded,
                                        f"key {tuple(key)}: {n_late} late event(s) in this micro-batch "
                                        "(late='raise'; late='drop' drops and counts them)")
                late_total += n_late
                t, words = t[~is_late], words[~is_late]
        all_t = np.concatenate([p_ts, t])
        all_w = np.concatenate([p_words, words])
        order = np.argsort(all_t, kind="stable")
        all_t, all_w = all_t[order], all_w[order]
        if self.event_mode:
            wm = timerValues.getCurrentWatermarkInMs()
            horizon = wm * 1000 if wm is not None and wm > 0 else None
        else:
            horizon = int(all_t[-1]) if all_t.size else None
        n_fold = 0 if horizon is None else int(np.searchsorted(all_t, horizon, side="right"))
        if n_fold:
            for sketch, (_, _, spec, state_words), w in zip(sketches, self.slots, self._split(all_w[:n_fold])):
                if spec is not None:
                    data = state_words.decode(w)
                    spec.update(sketch, all_t[:n_fold][data.present], data)
        wait_t, wait_w = all_t[n_fold:], all_w[n_fold:]
        self.state.update(tuple(None if s is None else s.to_bytes() for s in sketches) +
                          (_pack_pending(wait_t, wait_w), late_total))
        newest = max([x for x in [folded] + [s.newest for s in sketches if s is not None] +
                      ([int(all_t[-1])] if all_t.size else []) if x is not None], default=None)
        if newest is None:
            return
        if self.event_mode:  # the key's expiry moves with its newest event
            expiry, before = self._expiry_ms(newest), None if held is None else self._expiry_ms(held)
            if expiry != before:
                if before is not None:
                    self.handle.deleteTimer(before)
                self.handle.registerTimer(expiry)
        row = self._answer(key, newest, sketches, wait_t, wait_w, late_total)
        if self.row_api:
            yield Row(**row)
        else:
            yield pd.DataFrame({name: [v] for name, v in row.items()})

    def _arrays(self, rows):
        """(event times, word columns) of a key's packs (see
        :class:`_Packer`): Rows or pandas frames, a few per key and
        micro-batch whatever its event count."""
        fields = ["ehist_ts"] + [f"ehist_w{i}" for i in range(len(self.slots))]
        cells = {f: [] for f in fields}
        for chunk in rows:
            if isinstance(chunk, pd.DataFrame):
                for f in fields:
                    cells[f].extend(chunk[f].tolist())
            else:
                for f in fields:
                    cells[f].append(chunk[f])
        t = np.frombuffer(b"".join(cells["ehist_ts"]), dtype=np.int64)
        columns = []
        for i, (_, _, _, state_words) in enumerate(self.slots):
            w = state_words.width
            if w == 0:
                continue
            # each pack holds its run's words column-major: split per pack
            parts = [np.frombuffer(bytes(c), dtype=np.int64).reshape(w, -1).T for c in cells[f"ehist_w{i}"]]
            columns.append(np.concatenate(parts) if parts else np.zeros((0, w), dtype=np.int64))
        words = np.concatenate(columns, axis=1) if columns else np.zeros((t.size, 0), dtype=np.int64)
        return t, words

    def _answer(self, key, now, sketches, wait_t, wait_w, late_total):
        row = dict(zip(self.keys, key))
        row["as_of_us"] = now
        waiting = self._split(wait_w)
        for sketch, (_, name, spec, state_words), w in zip(sketches, self.slots, waiting):
            if spec is None:
                continue
            inside = wait_t > now - self.windows[name]
            data = state_words.decode(w[inside])
            if data.present.any():  # the waiting events, exact, on a copy
                sketch = spec.update(sketch.copy(), wait_t[inside][data.present], data)
            if sketch.newest is None and spec.answer_type == "double":
                estimate, lower, upper = 0.0, 0, 0
            else:
                estimate, lower, upper = spec.answer(sketch, now, None)
            row[name] = spec.answer_value(estimate)
            if name in self.with_bounds:
                row[f"{name}_lower"], row[f"{name}_upper"] = int(lower), int(upper)
        row["late_events"] = late_total
        return row

    def close(self) -> None:
        pass


class _Packer:
    """``mapInArrow`` before the state: a partition's events become one
    row per key (its event times and each spec's input words as
    little-endian int64 bytes), so the stateful operator's Python side
    handles a few rows per key and micro-batch instead of one per event
    (its per-row cost, not the synopses, bounded the throughput).  Reads
    and checks the inputs through the specs, vectorized over the whole
    partition (a bad value names its key).  A key may get several packs
    (one per partition and ``_PACK_ROWS`` events); the state sorts them
    together."""

    def __init__(self, keys, event_time, slots, with_event_time):
        self.keys, self.event_time, self.slots = keys, event_time, slots
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


        n = table.num_rows
        try:
            order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in self.keys] +
                                    [("ehist_ts", "ascending")])
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            order = None  # a key type pyarrow cannot sort (a struct): a pack per event
        table = (table.take(order) if order is not None else table).combine_chunks()

        def key_of(row):
            return tuple(table.column(k)[int(row)].as_py() for k in self.keys)

        ts = times(table["ehist_ts"].chunk(0), self.event_time, key_of)[0]
        starts = run_starts([table[k].chunk(0) for k in self.keys], n) if order is not None else None
        if starts is None:  # a pack per event: still correct (Spark groups the packs), only less packed
            starts = np.arange(n)
        ends = np.append(starts[1:], n)
        out = {k: table[k].take(pa.array(starts)) for k in self.keys}
        out["ehist_ts"] = _binary(ts[:, None], starts, n)
        for i, (_, _, spec, state_words) in enumerate(self.slots):
            if spec is None or state_words.width == 0:  # release 0.1's layout: an unused slot's zeros
                words = np.zeros((n, state_words.width), dtype=np.int64)
            else:
                words = state_words.encode(read_spec(spec, table, key_of))
            out[f"ehist_w{i}"] = _binary(words, starts, n)
        if self.with_event_time:
            out["ehist_event_time"] = pa.array(ts[ends - 1], type=pa.timestamp("us", tz="UTC"))
        return pa.Table.from_pydict(out)


_PACK_ROWS = 1 << 20  # events per pack at most: bounds a map task's memory


def _binary(words: np.ndarray, starts: np.ndarray, n: int):
    """One binary cell per run: the run's rows of ``words`` (rows x k
    int64) as little-endian 8-byte words, column-major within the run."""
    import pyarrow as pa

    k = words.shape[1]
    ends = np.append(starts[1:], n)
    if k <= 1:
        flat = np.ascontiguousarray(words.reshape(-1), dtype="<i8")
    else:
        # run r's cell: words[a:b, 0], words[a:b, 1], ...
        run = np.repeat(np.arange(starts.size), ends - starts)
        order = np.lexsort((np.tile(np.arange(n), k), np.repeat(np.arange(k), n), np.tile(run, k)))
        flat = np.ascontiguousarray(words.T.reshape(-1)[order], dtype="<i8")
    offsets = (np.append(starts, n) * 8 * k).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), starts.size, [None, pa.py_buffer(offsets), pa.py_buffer(flat)])
