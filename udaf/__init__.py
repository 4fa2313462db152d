"""udaf: the sliding-window synopses as Spark DataFrame functions and SQL.

``from udaf import functions as U`` then ``df.groupBy(k).agg(U.sliding_count(
"ts", "1 hour"))``; ``aggregate``, ``sketch_table`` and ``sliding_over``
take specs (``Count``, ``Sum``, ``Distinct``, ``DistinctFM``, ``LpNorm``,
``Frequencies``, ``HeavyHitters``, ``Quantile``:
every spec class of the family modules ``udaf/*_spec.py``), as does ``udaf.streaming.sliding_window_state``; ``register(spark)`` makes
every function callable from ``spark.sql``.  This package is the only one
that imports pyspark, pandas or pyarrow; ``import udaf`` itself does not,
so the core packages stay usable without Spark.
"""

__all__ = ["functions", "aggregate", "sketch_table", "union_table", "sliding_over", "register", "errors",
           "Count", "Sum", "Distinct", "DistinctFM", "LpNorm", "Frequencies", "HeavyHitters", "Quantile"]

_WHERE = {"aggregate": "two_phase", "sketch_table": "two_phase", "union_table": "union", "sliding_over": "per_row",
          "register": "functions", "errors": "unwrap"}


def __getattr__(name):
    # imported lazily: `import udaf` must not import pyspark
    import importlib

    if name == "functions":
        return importlib.import_module(f"{__name__}.functions")
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    if name[:1].isupper():  # a spec class: found in the family modules, no list to edit
        from .spec import load_families

        for classes in load_families().values():
            for cls in classes:
                if cls.__name__ == name:
                    return cls
    raise AttributeError(f"module 'udaf' has no attribute {name!r}")
