"""The native plan of :func:`udaf.aggregate`: exact answers from Spark's
own aggregates, no Python in the plan.

When the rows are at hand and the question is each key's estimate for
one window as of one time, a synopsis saves nothing: Spark's partial
aggregation (``count``, ``sum``, ``count(DISTINCT)``) answers exactly and
shuffles one row per key and partition.  This is the query a data
engineer would write::

    df.where(ts > now - w).groupBy(k).agg(count(*), sum(bytes), count(DISTINCT dst))

and ``aggregate(strategy="native")`` (which ``auto`` picks when every spec
has a native form, :meth:`udaf.spec.Spec.native`) runs exactly that, with
the same window convention (``now - window < t <= now``), answers, bounds
and messages as the other strategies:

* ``now`` given: one aggregation, each spec's aggregate conditioned on
  its window; every key is answered (quiet keys with 0, as the other
  strategies do), so unlike ``where(...).groupBy(...)`` the rows are not
  filtered first.
* ``now`` omitted: each key's window ends at its newest row (for a spec
  reading a column, its newest row where that column is not null), so
  the per-key newest times are aggregated first and joined back
  (broadcast when the keys are few, as ``auto`` estimates), and each
  spec's aggregate is conditioned on its own window.

Bad values are raised by Spark (``raise_error``) with the project's
message (``InvalidInputError: column bytes holds -5 (key 'a'): Sum needs
non-negative integers``), which a ``SparkRuntimeException`` carries; the
native plan checks the rows it reads (those in a window), not the rest.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["native_answers", "has_native", "raise_bad_value", "key_text", "BROADCAST_KEYS"]

#: Up to this many keys (``auto``'s estimate) the per-key newest times are
#: broadcast to the rows instead of shuffling the rows to them.
BROADCAST_KEYS = 2_000_000


def has_native(specs: dict) -> bool:
    """Whether every spec has a native form (probed with dummy columns)."""
    for spec in specs.values():
        columns = {role: F.lit(None) for role in spec.inputs()}
        if spec.native(columns, F.lit(True), F.lit("")) is None:
            return False
    return True


def key_text(keys: list, schema: T.StructType) -> Column:
    """The key as Python prints it in messages (``'a'``, ``7``,
    ``('a', 7)``), from the key columns."""
    parts = []
    for k in keys:
        c, dtype = F.col(k), schema[k].dataType
        if isinstance(dtype, T.StringType):
            text = F.concat(F.lit("'"), c, F.lit("'"))
        elif isinstance(dtype, T.BooleanType):
            text = F.when(c, F.lit("True")).otherwise(F.lit("False"))
        else:
            text = c.cast("string")
        parts.append(F.coalesce(text, F.lit("None")))
    if len(parts) == 1:
        return parts[0]
    return F.concat(F.lit("("), F.concat_ws(", ", *parts), F.lit(")"))


def raise_bad_value(column: str, value: Column, need: str, key: Column) -> Column:
    """Spark's ``raise_error`` with :func:`udaf.inputs.bad_value`'s message."""
    return F.raise_error(F.concat(F.lit(f"InvalidInputError: column {column} holds "),
                                  F.coalesce(value.cast("string"), F.lit("null")),
                                  F.lit(" (key "), key, F.lit(f"): {need}")))


def native_answers(df: DataFrame, keys: list, ts: str, time_expr: Column, specs: dict, windows: dict, at,
                   with_bounds: list, broadcast: bool = True) -> DataFrame:
    """The keys and each spec's exact answer (double; bigint bounds for
    ``with_bounds``), from Spark's aggregates only."""
    named = key_text(keys, df.schema)
    t = F.when(time_expr.isNull(), raise_bad_value(ts, F.lit(None), "timestamps must not be null", named)) \
        .otherwise(time_expr)
    inputs = {name: {role: F.col(c) for role, c in spec.inputs().items()} for name, spec in specs.items()}
    if at is not None:
        # every key is answered, quiet ones with 0 (as the other strategies
        # do), so the rows are not filtered first: each aggregate is
        # conditioned on its window
        rows = df.withColumn("__t", t)
        ends = {name: F.lit(at) for name in specs}
    else:
        newest = [F.max(F.when(spec.native_present(inputs[name]), t)).alias(f"__now_{i}")
                  for i, (name, spec) in enumerate(specs.items())]
        per_key = df.groupBy(*keys).agg(*newest)
        if broadcast:
            per_key = F.broadcast(per_key)
        left, right = df.alias("__rows"), per_key.alias("__keys")
        on = [F.col(f"__rows.{k}").eqNullSafe(F.col(f"__keys.{k}")) for k in keys]
        rows = left.join(right, on).select(
            *[F.col(f"__rows.{c}") for c in df.columns],
            *[F.col(f"__keys.__now_{i}") for i in range(len(specs))]).withColumn("__t", t)
        ends = {name: F.col(f"__now_{i}") for i, name in enumerate(specs)}
    aggs = []
    for name, spec in specs.items():
        end, w = ends[name], windows[name]
        inside = (F.col("__t") > end - F.lit(w)) & (F.col("__t") <= end) & spec.native_present(inputs[name])
        exact = spec.native(inputs[name], inside, named)
        aggs.append(exact.cast("double").alias(name))
        if name in with_bounds:
            aggs += [exact.cast("long").alias(f"{name}_lower"), exact.cast("long").alias(f"{name}_upper")]
    return rows.groupBy(*keys).agg(*aggs)
