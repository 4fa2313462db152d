"""A live stream with per-key sliding-window counts on local Spark.

Spark's ``rate`` source emits events as they happen; each event gets a
sensor (skewed: a few sensors are busy) and a payload size.  The stream
keeps, per sensor, one exponential histogram of its events and one of its
bytes (``udaf.streaming.sliding_window_state``: a few hundred bytes of
state per sensor, whatever the rate), and prints, every micro-batch, each
updated sensor's events and bytes over the last 15 seconds with their
bounds.  The window is shorter than the run so that it slides: once it is
full the counts level off near rate x window x the sensor's share, and
the bounds open up to about eps of the count.

Run:  python examples/live_counts.py            (about 40 s; Ctrl-C stops it)
Options: --seconds N, --rate EVENTS_PER_SECOND, --window '1 minute'
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--rate", type=int, default=2_000)
    ap.add_argument("--window", default="15 seconds")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from udaf import Count, Sum
    from udaf.streaming import local_session, sliding_window_state

    spark = local_session("ehist-live-counts", cores="2")
    spark.sparkContext.setLogLevel("ERROR")
    h = F.abs(F.xxhash64("value"))
    events = (
        spark.readStream.format("rate").option("rowsPerSecond", args.rate).load()
        .select(
            # skewed sensors: sensor-0 gets half the events, sensor-1 a quarter...
            F.concat(F.lit("sensor-"), F.least(F.lit(7), F.floor(-F.log2(1 - (h % 1024) / 1024))).cast("string"))
            .alias("sensor"),
            F.col("timestamp").alias("ts"),
            (h % 1500).alias("bytes"),
        )
    )
    counts = sliding_window_state(events, "sensor", "ts", watermark="2 seconds", bounds=True,
                                  count=Count(args.window, eps=0.05), sum=Sum("bytes", args.window, eps=0.05))
    started = time.monotonic()

    def show(batch, batch_id):
        rows = sorted(batch.collect(), key=lambda r: r.sensor)
        if not rows:
            return
        print(f"\nbatch {batch_id} at +{time.monotonic() - started:4.1f} s: last {args.window}, eps = 0.05")
        print(f"{'sensor':>9s} {'as of':>12s} {'events [lower, upper]':>27s} {'bytes':>12s} {'late':>5s}")
        for r in rows:
            print(f"{r.sensor:>9s} {r.as_of:%H:%M:%S.%f}"[:-3] + f" {r['count']:9,.0f} [{r.count_lower:7,d}, "
                  f"{r.count_upper:7,d}] {r['sum']:12,.0f} {r.late_events:5d}", flush=True)

    query = counts.writeStream.outputMode("update").foreachBatch(show) \
        .trigger(processingTime="3 seconds").start()
    try:
        query.awaitTermination(args.seconds)
        # Stop between micro-batches: stopping a query interrupts the batch
        # in flight, and PySpark 4.3 then fails in its own error handling (a
        # StackOverflowError on the interrupted foreachBatch call's message).
        while query.isActive and query.status["isTriggerActive"]:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
