"""Quantiles over sliding windows: the ``sliding_quantile`` family.

``Quantile(column, window, q, eps, accuracy)`` is answered by
:class:`quantiles.SlidingQuantiles`: the ``q``-quantile of a numeric
column's values over the window (within ``accuracy`` of a value of the
window whose rank is within a factor ``1 + eps`` of ``q`` times the
window's count, deterministically).  SQL names: ``sliding_quantile_sketch_agg``,
``sliding_quantile_union_agg``, ``sliding_quantile_sketch_quantile(sketch, q)``,
``sliding_quantile_sketch_rank(sketch, value)`` (Spark's normalized rank),
``sliding_quantile_sketch_quantile_bounds(sketch, q)``,
``sliding_quantile_sketch_estimate`` (the window's count of values) and the
one-step ``sliding_quantile(ts, value, window, q)``.

What each driver answers:

* :func:`udaf.aggregate`, the streaming state, the one-step function: the
  ``q``-quantile per key (``auto`` with the rows at hand: Spark's own exact
  ``percentile_disc``, the same definition: the value at position
  ``max(1, ceil(q n))`` of the window sorted);
* :func:`udaf.sliding_over`, per row: the exact ``q``-quantile of the
  row's frame (one pass over each key's rows with a sorted list; Spark has
  no exact per-frame quantile and recomputes ``percentile_approx`` for
  every frame).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ehist.blobs import Blobs
from quantiles import SlidingQuantiles, quantile_bounds_from_bounds, quantiles_from_bounds
from quantiles.columnar import QuantileColumn
from quantiles.sliding import LAYOUT as QUANTILE_LAYOUT

from .exact import as_key_sum_overflow, in_window
from .inputs import NUMERIC, reals
from .capabilities import NativeAnswer
from .data import Data, StateWords, Word
from .spec import Answers, Estimator, Spec, key_now
from .sql_text import raise_bad_value

__all__ = ["Quantile"]


def _q(value, name: str = "q") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _position(q: float, n: np.ndarray) -> np.ndarray:
    """Index (from 0) of the exact ``q``-quantile among ``n`` sorted values."""
    return np.maximum(1, np.ceil(q * n)).astype(np.int64) - 1


@dataclass(frozen=True)
class Quantile(Spec, family="sliding_quantile", sketch=SlidingQuantiles,
               one_step="sliding_quantile", frame_type="double"):
    """Sliding ``q``-quantile of a numeric column (nulls skipped; NaN and
    infinities refused).

    >>> Quantile("delay_ms", window="1 hour", q=0.99)
    Quantile(column='delay_ms', window='1 hour', q=0.99, eps=0.02, accuracy=0.01)
    """

    column: str
    window: object
    q: float = 0.5
    eps: float = 0.02
    accuracy: float = 0.01
    accepts = {"column": NUMERIC}
    arg_names = {"column": "value"}
    estimators = {
        "quantile": Estimator((("q", False),), "double",
                              "Scalar: the q-quantile of the window's values as of now, DoubleType."),
        "rank": Estimator((("value", True),), "double",
                          "Scalar: the estimated fraction of the window's values at or below a value (a column "
                          "or literal), DoubleType."),
        "quantile_bounds": Estimator((("q", False),), "struct<lower:double,upper:double>",
                                     "Scalar: struct<lower: double, upper: double> bracketing the exact "
                                     "q-quantile (always)."),
    }

    def check(self):
        _q(self.q)
        super().check()

    def read(self, columns, n, key_of=None):
        present, values = reals(columns["column"], self.column, self.who, key_of, signed=True)
        return Data(present, {"value": values[present]})

    def update(self, sketch, t, data):
        return sketch.update(t, data.arrays["value"])

    def partials(self, t, starts, data, window, now=None):
        """Every key's sketch at once (:meth:`~quantiles.columnar.QuantileColumn.build`)."""
        present = data.present
        kept = np.concatenate([[0], np.cumsum(present)])[starts]
        column = QuantileColumn.build(t[present], kept, data.arrays["value"], (window, self.eps, self.accuracy))
        return column.to_bytes(), None

    # ---------------------------------------------------------- answering
    def answer(self, sketch, now, window):
        """The key's ``q``-quantile."""
        return sketch.quantile(self.q, now, window), None, None

    @staticmethod
    def _column(blobs):
        """``(present mask, column of the present sketches)``, or None when
        they hold different parameters (:mod:`quantiles.columnar`)."""
        blobs = Blobs.of(blobs)
        present = blobs.present
        column = QuantileColumn.from_bytes(blobs.take(present)) if present.any() else None
        return None if present.any() and column is None else (present, column)

    @staticmethod
    def _at(nows, present):
        return None if nows is None else np.asarray(nows, dtype=np.int64)[present]

    @classmethod
    def answers(cls, blobs, nows, window):
        """``sliding_quantile_sketch_estimate``: each sketch's count of
        values in the window (the quantiles have their own functions), all
        decoded and bounded at once."""
        est = np.full(len(blobs), np.nan)
        raw = Blobs.of(blobs)
        present = raw.present
        fast = QuantileColumn.counts_of_bytes(raw.take(present), cls._at(nows, present), window) \
            if present.any() else None
        if fast is not None:  # decoded and bounded in one pass, no column built
            est[present] = fast[0] * 0.5 + fast[1] * 0.5
            return Answers(est)
        got = cls._column(blobs)
        if got is None:  # sketches of different parameters: one by one
            for i, b in enumerate(blobs):
                if b is not None:
                    est[i] = SlidingQuantiles.from_bytes(b).estimate(None if nows is None else int(nows[i]), window)
            return Answers(est)
        present, column = got
        if column is not None:
            lower, upper = column.bounds(cls._at(nows, present), window)
            est[present] = lower * 0.5 + upper * 0.5
        return Answers(est)

    @classmethod
    def union_answers(cls, blobs, starts, nows, window):
        """``sliding_quantile_sketch_estimate`` of arrays of sketches: each
        group's window count from the sums of its sketches' bounds as of
        the group's time (the bins' histograms add up, as for
        :class:`Count`: within eps of the union's count), decoded and
        bounded in one pass, without merging."""
        raw = Blobs.of(blobs)
        with as_key_sum_overflow():
            got = QuantileColumn.counts_of_bytes(raw, nows, window, groups=starts)
            if got is None:
                column = QuantileColumn.from_bytes(raw) if len(raw) else None
                if column is None:  # sketches of different parameters: the merge refuses them
                    return super().union_answers(raw, starts, nows, window)
                got = column.union_bounds(starts, nows, window)
        lower, upper = got
        return Answers(lower * 0.5 + upper * 0.5)

    def key_answers(self, blobs, nows, window):
        est = np.full(len(blobs), np.nan)
        got = self._column(blobs)
        if got is None:
            for i, b in enumerate(blobs):
                if b is not None:
                    est[i] = SlidingQuantiles.from_bytes(b).quantile(self.q, None if nows is None else int(nows[i]),
                                                                     window)
            return Answers(est)
        present, column = got
        if column is not None:
            est[present] = column.quantiles(self.q, self._at(nows, present), window)
        return Answers(est)

    @classmethod
    def merge_groups(cls, blobs, starts):
        """Every group's :meth:`merge` in one pass (:mod:`quantiles.columnar`):
        byte for byte the per-group merge (a lone sketch keeps its bytes:
        :meth:`kept_alone`).  Sketches of different parameters: the
        per-group merge, which refuses them in one group."""
        raw = Blobs.of(blobs)
        ordered = cls.merge_order(raw, starts)
        column = QuantileColumn.from_bytes(ordered)  # every sketch checked
        if column is None:
            return super().merge_groups(raw, starts)
        with as_key_sum_overflow():
            return cls.kept_alone(ordered, starts, QUANTILE_LAYOUT.version,
                                  lambda rows, first: column.take(rows).union(first).to_bytes())

    def union(self, blobs, starts, at=None):
        """Each key's quantile from its partials' summed bin bounds (no
        merge: :meth:`SlidingQuantiles.union_bounds`), every key at once."""
        present = np.array([b is not None for b in blobs], dtype=bool)
        column = QuantileColumn.from_bytes([bytes(b) for b in blobs if b is not None])
        if column is None:
            return self._union_one_by_one(blobs, starts, at)
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))[present]
        kept = np.flatnonzero(np.bincount(group, minlength=starts.size))
        out = np.full(starts.size, np.nan)
        out[kept] = column.union_quantiles(np.searchsorted(group, kept), self.q, at)
        return Answers(out)

    def _union_one_by_one(self, blobs, starts, at=None):
        ends = np.append(starts[1:], len(blobs)).tolist()
        est = np.full(len(starts), np.nan)
        for i, (a, b) in enumerate(zip(starts.tolist(), ends)):
            parts = [SlidingQuantiles.from_bytes(x) for x in blobs[a:b] if x is not None]
            keys, lower, upper = SlidingQuantiles.union_bounds(parts, at)
            est[i] = quantiles_from_bounds(parts[0].mapping, keys, lower, upper, [self.q])[0]
        return Answers(est)

    def exact(self, t, run, keys, data, window, at=None):
        """Each key's exact ``q``-quantile: the value at position ``max(1,
        ceil(q n))`` of its window's values sorted (NaN: none)."""
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        values = np.zeros(t.size)
        values[present] = data.arrays["value"]
        r, v = run[inside], values[inside]
        order = np.lexsort((v, r))
        r, v = r[order], v[order]
        counts = np.bincount(r, minlength=keys)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        out = np.full(keys, np.nan)
        has = counts > 0
        out[has] = v[first[has] + _position(self.q, counts[has])]
        return out

    def native_answer(self, schema):
        return NativeAnswer(aggregate=self._native, checks=lambda columns, key_text: [
            self._checked(columns["column"], key_text)])

    def _native(self, columns, inside, key_text):
        """Spark's exact ``percentile_disc``: the first value whose
        cumulative share reaches ``q``, the definition of :meth:`exact`
        (NaN and infinities refused as everywhere)."""

        checked = self._checked(columns["column"], key_text)
        return f"percentile_disc({self.q!r}) WITHIN GROUP (ORDER BY CASE WHEN {inside} THEN {checked} END)"

    def _checked(self, v, key_text):
        """SQL of ``v`` as a double, NaN and infinities refused with the
        project's message."""
        need = f"{self.who} needs finite numbers (NaN is never skipped: filter or fill it)"
        x = f"CAST({v} AS DOUBLE)"
        shown = f"CASE WHEN isnan({x}) THEN 'nan' WHEN {x} > 0 THEN 'inf' ELSE '-inf' END"  # as Python prints them
        return (f"CASE WHEN isnan({x}) OR abs({x}) = double('inf') THEN "
                f"{raise_bad_value(self.column, shown, need, key_text)} ELSE {x} END")

    def frames(self, lo, hi, data, window):
        """Each row's exact ``q``-quantile over its frame (null: no value
        in it): a sorted list slides over the rows (frames only move
        forward), O(log n) per row."""
        from sortedcontainers import SortedList

        pos = np.flatnonzero(data.present)
        values = data.arrays["value"]
        sub_lo, sub_hi = np.searchsorted(pos, lo).tolist(), np.searchsorted(pos, hi).tolist()
        out = np.zeros(len(sub_lo))
        empty = np.zeros(len(sub_lo), dtype=bool)
        window_values = SortedList()
        a = b = 0
        q = self.q
        vals = values.tolist()
        for i, (start, end) in enumerate(zip(sub_lo, sub_hi)):
            if start < a or start > b:  # a new run (or a frame behind the last): start over
                window_values.clear()
                a = b = start
            while b < end:
                window_values.add(vals[b])
                b += 1
            while a < start:
                window_values.remove(vals[a])
                a += 1
            n = b - a
            if n == 0:
                empty[i] = True
            else:
                out[i] = window_values[max(1, math.ceil(q * n)) - 1]
        return pd.arrays.FloatingArray(out, mask=empty)

    # ---------------------------------------------------------- streaming
    def state_words(self):
        return StateWords((Word("value", "float64", absent=float("nan")),))  # values are never NaN

    # --------------------------------------------------- sketch functions
    @staticmethod
    def _now(nows, i):
        return None if nows is None else int(nows[i])

    @classmethod
    def estimate_quantile(cls, blobs, arrays, nows, window):
        """``sliding_quantile_sketch_quantile``: one ``q`` (a literal), every
        sketch answered at once (:class:`~quantiles.columnar.QuantileColumn`)."""
        import pyarrow as pa

        q = _q(arrays["q"])
        blobs = Blobs.of(blobs)
        present = blobs.present
        fused = QuantileColumn.quantiles_of_bytes(blobs.take(present), q, cls._at(nows, present), window) \
            if present.any() else None
        if fused is not None:  # decoded and bounded in one pass
            out = np.full(len(blobs), np.nan)
            out[present] = fused
            return pa.array(out, type=pa.float64())
        got = cls._column(blobs)
        if got is None:  # sketches of different parameters: one by one
            out = [math.nan if s is None else s.quantile(q, cls._now(nows, i), window)
                   for i, s in enumerate(cls.decoded(blobs))]
            return pa.array(np.array(out, dtype=np.float64), type=pa.float64())
        present, column = got
        out = np.full(len(blobs), np.nan)
        if column is not None:
            out[present] = column.quantiles(q, cls._at(nows, present), window)
        return pa.array(out, type=pa.float64())

    @classmethod
    def estimate_quantile_of_unions(cls, blobs, starts, arrays, nows, window):
        """``sliding_quantile_sketch_quantile`` of arrays of sketches: each
        row's quantile from its sketches' summed bin bounds, without
        merging (what ``aggregate`` answers from partials), every row at
        once; None for sketches of different parameters (the merge then
        refuses them)."""
        import pyarrow as pa

        q = _q(arrays["q"])
        fused = QuantileColumn.quantiles_of_bytes(Blobs.of(blobs), q, nows, window, groups=starts) \
            if len(blobs) else None
        if fused is not None:  # decoded and bounded in one pass
            return pa.array(fused, type=pa.float64())
        column = QuantileColumn.from_bytes(Blobs.of(blobs)) if len(blobs) else None
        if column is None:
            return None if len(blobs) else pa.array(np.full(starts.size, np.nan), type=pa.float64())
        return pa.array(column.union_quantiles(starts, q, nows, window), type=pa.float64())

    @classmethod
    def estimate_quantile_bounds(cls, blobs, arrays, nows, window):
        """``sliding_quantile_sketch_quantile_bounds``: struct of the two."""
        import pyarrow as pa

        sketches = cls.decoded(blobs)
        q = _q(arrays["q"])
        out = []
        for i, s in enumerate(sketches):
            if s is None:
                out.append(None)
                continue
            lower, upper = quantile_bounds_from_bounds(s.mapping, s.keys, *s.bin_bounds(cls._now(nows, i), window),
                                                       [q])
            out.append({"lower": float(lower[0]), "upper": float(upper[0])})
        return pa.array(out, type=pa.struct([("lower", pa.float64()), ("upper", pa.float64())]))

    @classmethod
    def estimate_rank(cls, blobs, arrays, nows, window):
        """``sliding_quantile_sketch_rank``: the share at or below each
        row's value (null for a null value)."""
        import pyarrow as pa

        sketches = cls.decoded(blobs)
        present, values = reals(arrays["value"], "value", "sliding_quantile_sketch_rank", signed=True)
        out = np.full(len(sketches), np.nan)
        for i, s in enumerate(sketches):
            if s is not None and present[i]:
                out[i] = s.rank(values[i], cls._now(nows, i), window)
        return pa.array(out, type=pa.float64(), mask=~present | np.array([s is None for s in sketches], dtype=bool))
