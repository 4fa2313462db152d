"""Distinct counts over sliding windows: the sliding Flajolet-Martin family.

``DistinctFM(column, window, num_bitmaps, seed)`` is answered by
:class:`distinct.SlidingFM` (PCSA with a timestamp per bit; tiny and
fast, relative standard error ``0.78 / sqrt(num_bitmaps)``); SQL names
``sliding_fm_sketch_agg``, ``sliding_fm_union_agg``,
``sliding_fm_sketch_estimate`` and the one-step ``sliding_fm_distinct``.
"""

from __future__ import annotations

from dataclasses import dataclass

from distinct import SlidingFM

from .hashed_items import HashedItems

__all__ = ["DistinctFM"]


@dataclass(frozen=True)
class DistinctFM(HashedItems):
    """Sliding distinct count of a column with Flajolet-Martin bitmaps.

    >>> DistinctFM("dst", window=3600, num_bitmaps=256)
    DistinctFM(column='dst', window=3600, num_bitmaps=256, seed=0)
    """

    column: str
    window: object
    num_bitmaps: int = 64
    seed: int = 0
    family = "sliding_fm"
    sketch_type = SlidingFM
    one_step = "sliding_fm_distinct"
    params = ("num_bitmaps", "seed")

    def check(self):
        SlidingFM(1, self.num_bitmaps, self.seed)

    def make(self, window):
        return SlidingFM(window, self.num_bitmaps, self.seed)
