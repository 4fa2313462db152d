"""lp_norms: L_p norms over sliding windows with p-stable sketches.

Not implemented yet (issue 3): this package is part of the distribution so
that its name and place are fixed; it exports nothing.
"""

__all__: list[str] = []
