"""ehist: sliding-window synopses built on exponential histograms.

The core package: :class:`ExponentialHistogram` (counts and sums over time-
or count-based sliding windows, within a relative error ``eps``), the
l-canonical representation it rests on, the shared byte format and the
exception hierarchy used by ``lp_norms``, ``distinct`` and ``udaf``.
Depends only on numpy.
"""

from .canonical import canonical_counts, canonical_exponents, canonical_sizes
from .errors import (
    CorruptSketchError,
    EhistError,
    IncompatibleSketchError,
    LateDataError,
)
from .exponential_histogram import ExponentialHistogram

__version__ = "0.1.0"

__all__ = [
    "ExponentialHistogram",
    "canonical_counts",
    "canonical_exponents",
    "canonical_sizes",
    "EhistError",
    "LateDataError",
    "CorruptSketchError",
    "IncompatibleSketchError",
    "__version__",
]
