"""distinct: distinct counts over sliding windows.

:class:`SlidingFM` is Flajolet-Martin probabilistic counting (PCSA) with a
timestamp per bit (DGIM, Section 6); :class:`SlidingHyperLogLog` keeps per
register the list of future possible maxima (Chabchoub and Hebrail, 2010).
Items are integers, strings or bytes, hashed with the seeded, vectorized
:func:`ehist.hashing.hash64`.
"""

from .fm import SlidingFM
from .hll import SlidingHyperLogLog

__all__ = ["SlidingFM", "SlidingHyperLogLog"]
