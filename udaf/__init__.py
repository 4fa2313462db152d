"""udaf: the sliding-window synopses as PySpark DataFrame functions.

``from udaf import functions as U`` then ``df.groupBy(k).agg(U.sliding_count(
"ts", window="1 hour"))``.  This package is the only one that imports
pyspark, pandas or pyarrow; ``import udaf`` itself does not, so the core
packages stay usable without Spark.
"""

__all__ = ["functions", "aggregate", "sketch_table", "sliding_over", "Count", "Sum", "Distinct", "LpNorm"]

_TWO_PHASE = {"aggregate", "sketch_table", "Count", "Sum", "Distinct", "LpNorm"}


def __getattr__(name):
    # imported lazily: `import udaf` must not import pyspark
    import importlib

    if name == "functions":
        return importlib.import_module(f"{__name__}.functions")
    if name == "sliding_over":
        return importlib.import_module(f"{__name__}.per_row").sliding_over
    if name in _TWO_PHASE:
        return getattr(importlib.import_module(f"{__name__}.two_phase"), name)
    raise AttributeError(f"module 'udaf' has no attribute {name!r}")
