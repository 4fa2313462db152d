"""frequencies: item frequencies and heavy hitters over sliding windows.

:class:`SlidingCountMin` is the ECM-sketch (Papapetrou, Garofalakis and
Deligiannakis, VLDB 2012): a Count-Min sketch whose counters are
exponential histograms, answering "how often did this item occur in the
last w" for any w up to its window.  Items are integers, strings or bytes,
hashed with the seeded, vectorized :func:`ehist.hashing.hash64`.
:class:`SlidingHeavyHitters` keeps one such sketch per prefix level of
integer ids and finds every id above a fraction of the window's total.
Both keep their rows themselves, and answer exactly, while the window holds
at most ``width`` of them (sparse keys: network sources with tens of flows);
:mod:`frequencies.columnar` and :mod:`frequencies.rows` build, read, unite
and answer many sketches at once.
"""

from .count_min import SlidingCountMin
from .heavy_hitters import HeavyHitter, SlidingHeavyHitters

__all__ = ["SlidingCountMin", "SlidingHeavyHitters", "HeavyHitter"]
