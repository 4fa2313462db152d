"""Counts and sums over sliding windows: the exponential histogram family.

``Count(window, eps)`` and ``Sum(column, window, eps)`` are answered by
:class:`ehist.ExponentialHistogram` (within ``eps``, with deterministic
bounds); SQL names ``eh_sketch_agg``, ``eh_union_agg``,
``eh_sketch_estimate``, ``eh_sketch_bounds``, and the one-step
``sliding_count`` / ``sliding_sum``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehist import ExponentialHistogram
from ehist.columnar import bounds_from_bytes, histogram_bytes
from ehist.columnar_union import union_blobs
from ehist import eh_layout as L
from ehist.blobs import Blobs
from ehist.serialization import PREAMBLE_BYTES

from .exact import as_key_sum_overflow, in_window, may_pass_int64, per_key_sums, refuse_sums_past_int64
from .frames import frame_counts, frame_sums
from .inputs import INTEGRAL
from .capabilities import NativeAnswer, NativePerRow
from .data import Data, StateWords, Word
from .spec import Answers, Spec, key_now, read_integers
from .sql_text import ROWS_PER_TIME, checked_sum, frame_sum, nonnegative, sum_per_time

__all__ = ["Count", "Sum"]


class _Histogram(Spec, family="eh", sketch=ExponentialHistogram):
    """What Count and Sum share: an exponential histogram per key."""

    bounded = True
    additive = True

    def _values(self, data: Data):
        return data.arrays.get("value")

    def make(self, window: int):
        """An empty histogram that keeps a key's 1 to ``k`` rows (the rows
        form, as :meth:`partials` writes them: every entry point alike)."""
        return ExponentialHistogram(window, self.eps, keep_rows=True)

    def update(self, sketch, t, data):
        with as_key_sum_overflow():  # the column functions' and the streaming state's
            return sketch.update(t, self._values(data))

    def partials(self, t, starts, data, window, now=None):
        """Every key's histogram at once (:func:`~ehist.columnar.histogram_bytes`);
        a sum's in its exact form where that is shorter
        (:func:`~ehist.columnar.exact_forms`: a key's few flows as they
        are, a few buckets where the canonical form takes hundreds)."""
        present = data.present
        runs, values = starts, self._values(data)
        if not present.all():
            t = t[present]
            runs = np.concatenate([[0], np.cumsum(present)])[starts]
        ends = np.append(runs[1:], t.size)
        if values is not None and may_pass_int64(values):  # a histogram holds its key's whole total
            refuse_sums_past_int64(values, np.repeat(np.arange(runs.size), ends - runs), runs.size)
        if now is None:
            now = np.where(ends > runs, t[np.maximum(ends - 1, 0)] if t.size else 0, np.iinfo(np.int64).min + 1)
        blobs, lower, upper = histogram_bytes(t, runs, values, window=window, eps=self.eps, now=now, exact=True)
        return blobs, Answers(lower * 0.5 + upper * 0.5, lower, upper)

    @classmethod
    def answers(cls, blobs, nows, window):
        """Every sketch of a batch decoded and bounded at once
        (:class:`~ehist.columnar.HistogramColumn`, per window and eps)."""
        blobs = Blobs.of(blobs)
        n = len(blobs)
        lower = np.zeros(n, dtype=np.int64)
        upper = np.zeros(n, dtype=np.int64)
        present = blobs.present
        if present.any():
            raw = blobs.take(present)
            at = None if nows is None else np.asarray(nows, dtype=np.int64)[present]
            lo = np.empty(len(raw), dtype=np.int64)
            up = np.empty(len(raw), dtype=np.int64)
            # sketches of one (window, eps) are decoded and bounded together
            for rows in _by_parameters(raw):
                when = None if at is None else at[rows]
                lo[rows], up[rows] = bounds_from_bytes(raw.take(rows), when, window, where=" of the sketch")
            lower[present], upper[present] = lo, up
        return Answers(np.where(present, lower * 0.5 + upper * 0.5, np.nan), lower, upper)

    @classmethod
    def union_answers(cls, blobs, starts, nows, window):
        """The sums of the parts' bounds, all groups decoded at once
        (:meth:`~ehist.columnar.HistogramColumn.union_bounds`): the plain
        union's bounds, within eps of the exact answer, never wider than
        the merged histogram's (its compression widens them).  Parts of
        different windows or eps: the merge, which refuses them."""
        raw = Blobs.of(blobs)
        if len(_by_parameters(raw)) > 1:
            return super().union_answers(raw, starts, nows, window)
        with as_key_sum_overflow():
            lower, upper = bounds_from_bytes(raw, None if nows is None else np.asarray(nows, dtype=np.int64), window,
                                             groups=starts, where=" of the sketch")
        return Answers(lower * 0.5 + upper * 0.5, lower, upper)

    @classmethod
    def merge(cls, blobs):
        blobs = sorted(bytes(b) for b in blobs)
        if not blobs:
            return None
        with as_key_sum_overflow():
            return ExponentialHistogram.merge_all([ExponentialHistogram.from_bytes(b) for b in blobs]).to_bytes()

    @classmethod
    def merge_groups(cls, blobs, starts):
        """Every group's :meth:`merge` in one pass: each group's bytes in
        order, all decoded at once, united together
        (:func:`~ehist.columnar_union.union_blobs`), byte for byte the
        per-group merge.  Groups mixing windows or eps: the per-group merge,
        which refuses them."""
        raw = Blobs.of(blobs)
        if not raw or len(_by_parameters(raw)) > 1:
            return super().merge_groups(raw, starts)
        ordered = cls.merge_order(raw, starts)
        with as_key_sum_overflow():  # rows unite as rows, buckets group by group (no column built where it can)
            return union_blobs(ordered, starts)

    def union(self, blobs, starts, at=None):
        """A key's bounds are the sums of its partials' bounds as of the
        key's newest timestamp: the midpoint is within eps of the exact
        union without merging (each partial is within eps of its share)."""
        with as_key_sum_overflow():  # parts that fit, a union that does not (keys split across partitions)
            lower, upper = bounds_from_bytes(blobs, at, groups=starts)
        return Answers(lower * 0.5 + upper * 0.5, lower, upper)

    def exact(self, t, run, keys, data, window, at=None):
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        values = np.zeros(t.size, dtype=np.int64)
        values[present] = 1 if self._values(data) is None else self._values(data)
        return per_key_sums(values, inside, run, keys)


@dataclass(frozen=True)
class Count(_Histogram, one_step="sliding_count"):
    """Sliding count of rows (exponential histogram, within ``eps``).

    >>> Count(window="1 hour")
    Count(window='1 hour', eps=0.01)
    """

    window: object
    eps: float = 0.01

    def read(self, columns, n, key_of=None):
        return Data(np.ones(n, dtype=bool))

    def frames(self, lo, hi, data, window):
        return frame_counts(lo, hi)

    def native_answer(self, schema):
        return NativeAnswer(aggregate=lambda columns, inside, key_text: f"count(CASE WHEN {inside} THEN 1 END)")

    def reduction(self, schema, key_text):
        # rows per timestamp: a histogram of those counts is the histogram of the rows
        (rows,) = ROWS_PER_TIME
        return ("__ts",), dict(ROWS_PER_TIME), Sum(rows, self.window, self.eps)

    def native_per_row(self, schema):
        return NativePerRow(frame=lambda columns, upto, before, key_text, schema: f"{upto('count(1)')} - "
                                                                                   f"{before('count(1)')}")


@dataclass(frozen=True)
class Sum(_Histogram, one_step="sliding_sum"):
    """Sliding sum of a non-negative integral column (within ``eps``);
    null values are skipped, a negative one is an error naming it.

    >>> Sum("bytes", window="1 hour", eps=0.02)
    Sum(column='bytes', window='1 hour', eps=0.02)
    """

    column: str
    window: object
    eps: float = 0.01
    accepts = {"column": INTEGRAL}
    arg_names = {"column": "value"}

    def state_words(self):
        return StateWords((Word("value", "int64", absent=-1),))  # values are never negative

    def read(self, columns, n, key_of=None):
        return read_integers(self, columns, key_of)

    def _checked(self, v, key_text):
        return nonnegative(self.column, v, self.who, key_text)

    def native_answer(self, schema):
        return NativeAnswer(aggregate=self._native, checks=lambda columns, key_text: [
            self._checked(columns["column"], key_text)])

    def _native(self, columns, inside, key_text):
        return checked_sum(f"CASE WHEN {inside} THEN {self._checked(columns['column'], key_text)} END", key_text)

    def reduction(self, schema, key_text):
        # each timestamp's sum (the reduced column keeps the column's name,
        # so a bad value gets the same message): sql_text.sum_per_time
        return ("__ts",), {self.column: sum_per_time(self.column, key_text)}, self

    def native_per_row(self, schema):
        return NativePerRow(frame=self._frame)

    def _frame(self, columns, upto, before, key_text, schema):
        v = columns["column"]
        # null for a frame without a value, unless the schema says the
        # column has none: the row's own value is in its frame (two windows fewer)
        empty = "" if not schema[self.column].nullable else \
            f"WHEN {upto(f'count({v})')} - {before(f'count({v})')} = 0 THEN NULL "
        return frame_sum(self.column, v, self.who, upto, before, key_text, schema, empty)

    def frames(self, lo, hi, data, window):
        import pandas as pd

        pos = np.flatnonzero(data.present)
        sub_lo, sub_hi = np.searchsorted(pos, lo), np.searchsorted(pos, hi)
        sums = frame_sums(data.arrays["value"], sub_lo, sub_hi)
        return pd.arrays.IntegerArray(sums, mask=sub_hi <= sub_lo)  # null: no value in the frame


def _by_parameters(raw) -> list:
    """The positions of each (window, eps) among histogram bytes (one
    array of all when they share them, as a column's usually do)."""
    return Blobs.of(raw).groups(PREAMBLE_BYTES, L.LAYOUT.head.size - PREAMBLE_BYTES)
