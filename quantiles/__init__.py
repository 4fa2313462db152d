"""quantiles: quantiles and ranks over sliding windows.

:class:`SlidingQuantiles` answers the ``q``-quantile and the rank of any
value over the last ``w <= N`` time units as of any time at or after its
newest element, within a relative value accuracy and a rank error that are
both deterministic; sketches merge (partitions, sites) with the same
guarantees and serialize to versioned, checked bytes (family id 8).
"""

from .mapping import LogMapping
from .sliding import SlidingQuantiles, cdf_from_bounds, quantile_bounds_from_bounds, quantiles_from_bounds

__all__ = ["SlidingQuantiles", "LogMapping", "quantiles_from_bounds", "cdf_from_bounds",
           "quantile_bounds_from_bounds"]
