"""Distinct counts over sliding windows: the sliding HyperLogLog family.

``Distinct(column, window, precision, seed)`` is answered by
:class:`distinct.SlidingHyperLogLog` (relative standard error
``1.04 / sqrt(2**precision)``); SQL names ``sliding_hll_sketch_agg``,
``sliding_hll_union_agg``, ``sliding_hll_sketch_estimate`` and the
one-step ``sliding_distinct``.  (Spark's own ``hll_sketch_agg`` counts a
whole group; these sketches answer any window up to theirs.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from distinct import SlidingHyperLogLog
from distinct.columnar import SketchColumn, sliding_hll_bytes, union_estimates, union_estimates_of_bytes
from distinct.columnar_union import union_bytes
from distinct.hll_layout import LAYOUT as HLL_LAYOUT
from ehist.blobs import Blobs

from .hashed_items import HashedItems
from .spec import Answers

__all__ = ["Distinct"]


@dataclass(frozen=True)
class Distinct(HashedItems, family="sliding_hll", sketch=SlidingHyperLogLog, one_step="sliding_distinct"):
    """Sliding distinct count of a column (sliding HyperLogLog).

    >>> Distinct("dst", window="1 hour", precision=10)
    Distinct(column='dst', window='1 hour', precision=10, seed=0)
    """

    column: str
    window: object
    precision: int = 12
    seed: int = 0

    def partials(self, t, starts, data, window, now=None):
        present = data.present
        runs = np.concatenate([[0], np.cumsum(present)])[starts]
        return sliding_hll_bytes(t[present], runs, self._hashes(data), window=window, precision=self.precision,
                                 seed=self.seed), None

    @classmethod
    def answers(cls, blobs, nows, window):
        """Every sketch of a batch decoded and estimated at once
        (:class:`~distinct.columnar.SketchColumn`, per window, precision
        and seed)."""
        blobs = Blobs.of(blobs)
        out = np.full(len(blobs), np.nan)
        rows = np.flatnonzero(blobs.present)
        at = None if nows is None else np.asarray(nows, dtype=np.int64)
        fast = union_estimates_of_bytes(blobs.take(rows), np.arange(rows.size), None if at is None else at[rows],
                                        window)
        if fast is not None:  # decoded and counted in one compiled pass
            out[rows] = fast
            return Answers(out)
        column = SketchColumn.from_bytes(blobs.take(rows))
        for mine in _alike_groups(column):
            out[rows[mine]] = union_estimates(column.take(mine) if mine.size < len(column) else column,
                                              np.arange(mine.size), now=None if at is None else at[rows[mine]],
                                              window=window)
        return Answers(out)

    @classmethod
    def union_answers(cls, blobs, starts, nows, window):
        """Each register's largest live rank over a group's sketches, all
        groups at once (:func:`~distinct.columnar.union_estimates`): the
        merge's estimate to the last bit, without merging.  Sketches of
        different windows, precisions or seeds: the merge, which refuses
        them."""
        fast = union_estimates_of_bytes(blobs, starts, nows, window)
        if fast is not None:
            return Answers(np.asarray(fast, dtype=np.float64))
        column = SketchColumn.from_bytes(Blobs.of(blobs))
        if not column.alike():
            return super().union_answers(blobs, starts, nows, window)
        return Answers(np.asarray(union_estimates(column, starts, now=nows, window=window), dtype=np.float64))

    @classmethod
    def merge(cls, blobs):
        """The union of a group's sketches in one pass
        (:meth:`~distinct.SlidingHyperLogLog.merge_all`)."""
        blobs = sorted(bytes(b) for b in blobs)
        return SlidingHyperLogLog.merge_all(map(SlidingHyperLogLog.from_bytes, blobs)).to_bytes() if blobs else None

    @classmethod
    def merge_groups(cls, blobs, starts):
        """Every group's :meth:`merge` in one pass: all decoded at once,
        united register-wise
        (:func:`~distinct.columnar_union.union_bytes`), byte for byte the
        per-group merge (a lone sketch keeps its bytes: :meth:`kept_alone`).
        Sketches of different windows, precisions or
        seeds: the per-group merge, which refuses them in one group."""
        # the union does not depend on the order within a group (each
        # register's future maxima), so the bytes are read where they are
        raw = Blobs.of(blobs)
        column = SketchColumn.from_bytes(raw)  # every sketch checked
        if not column.alike():
            return super().merge_groups([bytes(b) for b in blobs], starts)
        return cls.kept_alone(raw, starts, HLL_LAYOUT.version, lambda rows, first: union_bytes(column.take(rows), first))

    def union(self, blobs, starts, at=None):
        """Each register's largest live rank over a key's partials, for all
        keys at once: the merge's estimate to the last bit."""
        fast = union_estimates_of_bytes(blobs, starts, at)
        if fast is not None:
            return Answers(np.asarray(fast, dtype=np.float64))
        column = SketchColumn.from_bytes(Blobs.of(blobs))
        return Answers(np.asarray(union_estimates(column, starts, now=at), dtype=np.float64))


def _alike_groups(column) -> list:
    """The positions of each (window, precision, seed) of a column's
    sketches (one array of all when they are alike, as usual)."""
    if column.alike():
        return [np.arange(len(column))] if len(column) else []
    params, _ = pd.factorize(pd.Series(list(zip(column.window.tolist(), column.precision.tolist(),
                                                column.seed.tolist())), dtype=object))
    return [np.flatnonzero(params == g) for g in range(int(params.max()) + 1)]
