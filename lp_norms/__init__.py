"""lp_norms: L_p norms over sliding windows with p-stable sketches.

:class:`StableSketch` is Indyk's linear sketch of a vector (p in (0, 2]),
with variables generated on the fly from (seed, row, index);
:class:`SlidingLpNorm` keeps such sketches inside exponential-histogram
buckets (DGIM, Section 5) to answer L_p norms, and at p = 2 join sizes, over
sliding windows.
"""

from .sliding import SlidingLpNorm
from .stable import median_abs_stable
from .stable_sketch import StableSketch, rows_for

__all__ = ["StableSketch", "SlidingLpNorm", "rows_for", "median_abs_stable"]
