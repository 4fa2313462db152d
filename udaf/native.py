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

* ``now`` given: :func:`udaf.aggregate` reads only the rows of the
  widest window (pushed down to the source), then one aggregation, each
  spec's aggregate conditioned on its own window.
* ``now`` omitted: each key's window ends at its newest row (for a spec
  reading a column, its newest row where that column is not null), so
  the per-key newest times are aggregated first (one job, when
  :func:`udaf.aggregate` is called) and joined back (broadcast up to
  :data:`BROADCAST_KEYS` keys); rows in no
  spec's window are dropped before the aggregation, and each spec's
  aggregate is conditioned on its own window.

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

#: Up to this many keys the per-key newest times are broadcast to the rows
#: instead of shuffling the rows to them.
BROADCAST_KEYS = 2_000_000


def has_native(specs: dict) -> bool:
    """Whether every spec's family has a native form (overrides
    :meth:`~udaf.spec.Spec.native`; no Spark call)."""
    from .spec import Spec

    return all(type(spec).native is not Spec.native for spec in specs.values())


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
                   with_bounds: list) -> DataFrame:
    """The keys and each spec's exact answer (double; bigint bounds for
    ``with_bounds``), from Spark's aggregates only."""
    named = key_text(keys, df.schema)
    t = F.when(time_expr.isNull(), raise_bad_value(ts, F.lit(None), "timestamps must not be null", named)) \
        .otherwise(time_expr)
    inputs = {name: {role: F.col(c) for role, c in spec.inputs().items()} for name, spec in specs.items()}
    if at is not None:
        # aggregate() read only the rows of the widest window: each spec's
        # aggregate is conditioned on its own
        rows = df.withColumn("__t", t)
        ends = {name: F.lit(at) for name in specs}
        keep = None
    else:
        newest = [F.max(F.when(spec.native_present(inputs[name]), t)).alias(f"__now_{i}")
                  for i, (name, spec) in enumerate(specs.items())]
        # computed once, here (a small table: a row per key), so its size
        # decides the join: broadcast to the rows, or both sides shuffled
        per_key = df.groupBy(*keys).agg(F.max(t).alias("__newest"), *newest).localCheckpoint(eager=True)
        if per_key.count() <= BROADCAST_KEYS:
            per_key = F.broadcast(per_key)
        left, right = df.alias("__rows"), per_key.alias("__keys")
        on = [F.col(f"__rows.{k}").eqNullSafe(F.col(f"__keys.{k}")) for k in keys]
        rows = left.join(right, on).select(
            *[F.col(f"__rows.{c}") for c in df.columns], F.col("__keys.__newest"),
            *[F.col(f"__keys.__now_{i}") for i in range(len(specs))]).withColumn("__t", t)
        ends = {name: F.col(f"__now_{i}") for i, name in enumerate(specs)}
        keep = F.col("__t") >= F.col("__newest")  # every key keeps a row, so every key is answered
    insides = {}
    for name, spec in specs.items():
        end, w = ends[name], windows[name]
        insides[name] = (F.col("__t") > end - F.lit(w)) & (F.col("__t") <= end) & spec.native_present(inputs[name])
    if keep is not None:
        # only rows in some spec's window reach the aggregation
        for inside in insides.values():
            keep = keep | inside
        rows = rows.where(keep)
    aggs = []
    for name, spec in specs.items():
        exact = spec.native(inputs[name], insides[name], named)
        aggs.append(exact.cast("double").alias(name))
        if name in with_bounds:
            aggs += [exact.cast("long").alias(f"{name}_lower"), exact.cast("long").alias(f"{name}_upper")]
    return rows.groupBy(*keys).agg(*aggs)
