"""udaf: the sliding-window synopses as PySpark DataFrame functions.

``from udaf import functions as U`` then ``df.groupBy(k).agg(U.sliding_count(
"ts", window="1 hour"))``.  This package is the only one that imports
pyspark, pandas or pyarrow; ``import udaf`` itself does not, so the core
packages stay usable without Spark.
"""

__all__ = ["functions"]


def __getattr__(name):
    if name == "functions":
        import importlib

        return importlib.import_module(f"{__name__}.functions")
    raise AttributeError(f"module 'udaf' has no attribute {name!r}")
