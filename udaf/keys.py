"""Shuffling rows by key: the columns key runs are found on, and the
partition count (the drivers' shared floor: :mod:`udaf.two_phase`,
:mod:`udaf.per_row`; the unions group by key with Spark's own aggregate)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["RUN_KEY_TYPES", "run_columns", "partition_count"]

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


def partition_count(df: DataFrame) -> int:
    """The shuffle partition count of the session (set explicitly:
    adaptive execution would otherwise coalesce small shuffles into fewer
    tasks than cores)."""
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
