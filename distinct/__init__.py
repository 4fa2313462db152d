"""distinct: distinct counts over sliding windows (FM and sliding HyperLogLog).

Not implemented yet (issue 4): this package is part of the distribution so
that its name and place are fixed; it exports nothing.
"""

__all__: list[str] = []
