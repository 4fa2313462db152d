"""Distinct counts over sliding windows: the sliding Flajolet-Martin family.

``DistinctFM(column, window, num_bitmaps, seed)`` is answered by
:class:`distinct.SlidingFM` (PCSA with a timestamp per bit; tiny and
fast, relative standard error ``0.78 / sqrt(num_bitmaps)``); SQL names
``sliding_fm_sketch_agg``, ``sliding_fm_union_agg``,
``sliding_fm_sketch_estimate`` and the one-step ``sliding_fm_distinct``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distinct import SlidingFM
from distinct.fm import LAYOUT
from distinct.fm_columnar import FMColumn
from ehist.blobs import Blobs

from .family import one_parameter_set
from .hashed_items import HashedItems
from .spec import Answers

__all__ = ["DistinctFM"]


@dataclass(frozen=True)
class DistinctFM(HashedItems, family="sliding_fm", sketch=SlidingFM, one_step="sliding_fm_distinct"):
    """Sliding distinct count of a column with Flajolet-Martin bitmaps.

    >>> DistinctFM("dst", window=3600, num_bitmaps=256)
    DistinctFM(column='dst', window=3600, num_bitmaps=256, seed=0)
    """

    column: str
    window: object
    num_bitmaps: int = 64
    seed: int = 0

    def partials(self, t, starts, data, window, now=None):
        """Every key's sketch built at once
        (:meth:`~distinct.fm_columnar.FMColumn.build`), the bytes of
        :meth:`update` per key."""
        present = data.present
        first = np.concatenate([[0], np.cumsum(present)])[np.asarray(starts, dtype=np.int64)]
        column = FMColumn.build(t[present], first, self._hashes(data), window=window, m=self.num_bitmaps,
                                seed=self.seed)
        return column.to_bytes(), None

    @classmethod
    def answers(cls, blobs, nows, window):
        """Every sketch of a batch decoded and estimated at once
        (:class:`~distinct.fm_columnar.FMColumn`), the estimates to the
        last bit; sketches of different parameters: one at a time."""
        return cls.column_answers(blobs, nows, window, FMColumn, LAYOUT)

    @classmethod
    def merge_groups(cls, blobs, starts):
        """Every group's :meth:`merge` in one pass: each bit's newest
        timestamp over the group, every group at once
        (:meth:`~distinct.fm_columnar.FMColumn.union`), byte for byte the
        per-group merge (a lone sketch keeps its bytes: :meth:`kept_alone`).
        Sketches of different parameters: the per-group merge, which
        refuses them in one group."""
        raw = Blobs.of(blobs)
        if not raw or not _alike(raw):
            return super().merge_groups(raw, starts)
        ordered = cls.merge_order(raw, starts)
        column = FMColumn.from_bytes(ordered)  # every sketch checked
        return cls.kept_alone(ordered, starts, LAYOUT.version,
                              lambda rows, first: column.take(rows).union(first).to_bytes())

    @classmethod
    def union_answers(cls, blobs, starts, nows, window):
        """The estimates of every group's union, united in columns (the
        union does not depend on the order: the newest timestamp of each
        bit) and never encoded."""
        raw = Blobs.of(blobs)
        if not len(raw) or not _alike(raw):
            return super().union_answers(raw, starts, nows, window)
        return Answers(FMColumn.from_bytes(raw).union(starts).estimates(nows, window))

    def union(self, blobs, starts, at=None):
        """Each key's partials united in columns and estimated as of ``at``
        (default: the key's newest)."""
        if any(b is None for b in blobs):
            return super().union(blobs, starts, at)
        return type(self).union_answers(blobs, starts, None if at is None else np.full(len(starts), at), None)


def _alike(raw) -> bool:
    """Whether the sketches share one window, num_bitmaps and seed."""
    return one_parameter_set(raw, LAYOUT)
