"""udaf: the synopses as Spark DataFrame functions.

Not implemented yet (issue 5): this package is part of the distribution so
that its name and place are fixed; it exports nothing and imports no Spark.
"""

__all__: list[str] = []
