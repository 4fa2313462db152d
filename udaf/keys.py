"""Shuffling rows by key: the columns key runs are found on, and the
shuffle itself (the drivers' shared floor: :mod:`udaf.two_phase`,
:mod:`udaf.per_row`; the unions group by key with Spark's own aggregate)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["RUN_KEY_TYPES", "run_columns", "by_key"]

# Key types whose runs pyarrow finds exactly (equality kernels; Spark's sort
# puts equal keys together).  Other keys (floating point, nested) are
# shuffled, sorted and split into runs on stand-in columns (run_columns).
RUN_KEY_TYPES = (T.StringType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
                 T.LongType, T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType)


def run_columns(df: DataFrame, keys: list) -> tuple[list, list]:
    """(names, expressions) of the columns that key runs are found on: a
    key of a run type is its own; a floating-point key becomes a NaN flag
    and its value with NaN and -0.0 as 0.0 (Spark groups NaN with NaN and
    -0.0 with 0.0, Arrow's equality does not); a nested key its JSON text.
    Shuffling and sorting on these puts each Spark group in one run."""
    names, exprs = [], []
    for i, k in enumerate(keys):
        dtype = df.schema[k].dataType
        if isinstance(dtype, RUN_KEY_TYPES):
            names.append(k)
            continue
        c = F.col(k)
        if isinstance(dtype, (T.DoubleType, T.FloatType)):
            odd = F.isnan(c) | (c == 0)
            names += [f"__run{i}_nan", f"__run{i}"]
            exprs += [F.isnan(c).alias(f"__run{i}_nan"), F.when(odd, F.lit(0.0)).otherwise(c).alias(f"__run{i}")]
        else:
            names.append(f"__run{i}")
            exprs.append(F.to_json(F.struct(c)).alias(f"__run{i}"))
    return names, exprs


#: ``spark.sql.shuffle.partitions`` as Spark leaves it: a session that has
#: not set it gets its Python passes' partitions sized by adaptive execution
#: (:func:`by_key`).
SPARK_DEFAULT_PARTITIONS = "200"


def by_key(df: DataFrame, columns: list) -> DataFrame:
    """``df`` shuffled so that each key's rows meet in one partition, for a
    Python pass over every partition (``mapInArrow``).

    With the session's shuffle partition count where the session sets one
    (as tuned sessions and this project's tests and benchmarks do: every
    partition a task, none coalesced); left at Spark's default of 200, with
    adaptive execution coalescing partitions (Spark's defaults), by the
    columns alone, so that adaptive execution sizes the partitions: 200
    fixed ones made every call pay 200 Python tasks.  Measured on 2 cores,
    ``sketch_table`` of Count, Sum and Distinct in a default session: 600
    rows 7.9-12.0 s against 0.34-0.51 s, 200k rows of 20k keys 8.1-9.2 s
    against 0.57-0.91 s, 5M rows of 100k keys 11.0-11.4 s against 4.4-4.5 s,
    10M rows of 1k keys 13.3-19.3 s against 6.4-7.1 s.  With 8 partitions
    set, the fixed count ties or wins (10M rows of 1k keys 5.6 s against
    6.3-6.5 s with adaptive sizing), hence the session's count when set."""
    conf = df.sparkSession.conf
    count = conf.get("spark.sql.shuffle.partitions")
    if (count == SPARK_DEFAULT_PARTITIONS and conf.get("spark.sql.adaptive.enabled") == "true"
            and conf.get("spark.sql.adaptive.coalescePartitions.enabled") == "true"):
        return df.repartition(*columns)
    return df.repartition(int(count), *columns)
