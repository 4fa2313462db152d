"""Item frequencies and heavy hitters over sliding windows: the ECM families.

``Frequencies(column, window, eps, delta, eh_eps, seed, value)`` is answered
by :class:`frequencies.SlidingCountMin` (SQL names ``ecm_sketch_agg``,
``ecm_union_agg``, ``ecm_sketch_estimate`` / ``ecm_sketch_bounds``: the
window's total, and ``ecm_sketch_frequency(sketch, item)``: one item's).
``HeavyHitters(column, window, phi, bits, ...)`` by
:class:`frequencies.SlidingHeavyHitters` (``sliding_hh_sketch_agg``,
``sliding_hh_union_agg``, ``sliding_hh_sketch_heavy_hitters(sketch, phi)``
and ``sliding_hh_sketch_frequency(sketch, item)``).

What each driver answers:

* :func:`udaf.aggregate` and the streaming state, per key: ``Frequencies``
  the window's total (with deterministic bounds; the sketch, from
  ``sketches=True`` or :func:`udaf.sketch_table`, answers any item);
  ``HeavyHitters`` the list ``array<struct<item, estimate, lower, upper>>``
  of the ids at or above ``phi`` of the window's total;
* :func:`udaf.sliding_over`, per row: ``Frequencies`` the frequency of the
  row's own item over the row's frame (exact: the rows are at hand);
  ``HeavyHitters`` has no per-row form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from ehist.blobs import Blobs
from ehist.hashing import hash64
from ehist.segments import order_by
from frequencies import SlidingCountMin, SlidingHeavyHitters
from frequencies.columnar import CountMinColumn, HeavyHittersColumn, Hitters
from frequencies.count_min import LAYOUT as ECM_LAYOUT
from frequencies.heavy_hitters import LAYOUT as HH_LAYOUT

from .exact import as_key_sum_overflow, in_window, per_key_sums, sum_past_int64
from .inputs import INTEGRAL, ITEM, bad_value, check_arrow_type, integers, items
from .capabilities import NativeAnswer, NativePerRow
from .data import Data, StateWords, Word
from .spec import Answers, Estimator, Spec, key_now
from .sql_text import checked_sum, frame_sum, nonnegative, raise_bad_value

__all__ = ["Frequencies", "HeavyHitters"]


class _Weighted(Spec):
    """What both families share: an item column, an optional value column
    (non-negative integers, default 1 per row)."""

    arg_names = {"column": "item"}

    @classmethod
    def merge_groups(cls, blobs, starts):
        """Every group's :meth:`merge` in one pass (:mod:`frequencies.columnar`):
        each group's bytes in order, all decoded together, every counter of
        every group united at once, byte for byte the per-group merge (a
        lone sketch keeps its bytes: :meth:`kept_alone`).
        Sketches of different parameters: the per-group merge, which
        refuses them in one group."""
        raw = Blobs.of(blobs)
        ordered = cls.merge_order(raw, starts)
        column = cls.column_type.from_bytes(ordered)  # every sketch checked
        if column is None:
            return super().merge_groups(raw, starts)
        version = (ECM_LAYOUT if cls.column_type is CountMinColumn else HH_LAYOUT).version
        with as_key_sum_overflow():
            return cls.kept_alone(ordered, starts, version,
                                  lambda rows, first: column.take(rows).union(first).to_bytes())

    @classmethod
    def _frequencies_of_unions(cls, blobs, starts, arrays, nows, window, frequencies, of_bytes=None):
        """The answers of ``estimate_frequency`` of each row's array of
        sketches (row ``i``: ``blobs[starts[i]:starts[i + 1]]``; NaN for a
        row without a sketch or an item): ``frequencies(column,
        group_starts, rows, present, kept, at)`` over the present sketches
        of the rows that hold one, all decoded at once; None for sketches
        of different parameters.  ``of_bytes``: the same answers from the
        sketches' bytes (``of_bytes(blobs, group_starts, rows, present,
        kept, at)``), or None where the column must decide, tried first."""
        import pyarrow as pa

        blobs = Blobs.of(blobs)
        starts = np.asarray(starts, dtype=np.int64)
        present_blob = blobs.present
        run = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))[present_blob]
        rows = np.flatnonzero(np.bincount(run, minlength=starts.size))
        present, kept = items(arrays["item"], "item", f"{cls.family}_sketch_frequency")
        out = np.full(starts.size, np.nan)
        if rows.size:
            at = None if nows is None else np.asarray(nows, dtype=np.int64)[rows]
            got = None if of_bytes is None else of_bytes(blobs.take(present_blob), np.searchsorted(run, rows), rows,
                                                         present, kept, at)
            if got is not None:
                out[rows] = got
                return pa.array(out, type=pa.float64(), from_pandas=True)
            column = cls.column_type.from_bytes(blobs.take(present_blob))
            if column is None:
                return None
            with as_key_sum_overflow():
                out[rows] = frequencies(column, np.searchsorted(run, rows), rows, present, kept, at)
        return pa.array(out, type=pa.float64(), from_pandas=True)

    @classmethod
    def _column_bounds(cls, blobs, nows, window):
        """``(present, lower, upper)``: every sketch's window total bounds,
        all decoded and bounded at once (:mod:`frequencies.columnar`); None
        when the sketches hold different parameters."""
        blobs = Blobs.of(blobs)
        present = blobs.present
        lower = np.zeros(len(blobs), dtype=np.int64)
        upper = np.zeros(len(blobs), dtype=np.int64)
        if present.any():
            column = cls.column_type.from_bytes(blobs.take(present))
            if column is None:
                return None
            lower[present], upper[present] = column.bounds(
                None if nows is None else np.asarray(nows, dtype=np.int64)[present], window)
        return present, lower, upper

    def _read_items(self, array, key_of=None):
        return items(array, self.column, self.who)

    def read(self, columns, n, key_of=None):
        present, kept = self._read_items(columns["column"], key_of)
        arrays = {"item": kept}
        if self.value is not None:
            has_value, values = integers(columns["value"], self.value, self.who, key_of)
            arrays["item"] = kept[has_value[present]]
            present = present & has_value
            arrays["value"] = values[present]
        return Data(present, arrays)

    def _values(self, data):
        return data.arrays.get("value")

    #: What a waiting event keeps of its item (``hash``: its hash64;
    #: ``item``: the id itself), the name its state word reads back as.
    _word: ClassVar[str] = "hash"

    def state_words(self):
        # without a value column each row counts 1 (written, not read back)
        return StateWords((Word(self._word, "uint64", of=self._hashes if self._word == "hash" else None),
                           Word("value", "int64", absent=-1, constant=1 if self.value is None else None)))

    def partials(self, t, starts, data, window, now=None):
        """One sketch per key, with the window total's bounds as of
        ``now`` (default: each key's newest row): one key at a time here,
        every key at once in each family (:meth:`Frequencies.partials`,
        :meth:`HeavyHitters.partials`)."""
        present = data.present
        pos = np.concatenate([[0], np.cumsum(present)])
        ends = np.append(starts[1:], t.size)
        blobs, lower, upper = [], [], []
        for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
            sketch = self.update(self.make(window), t[a:b][present[a:b]], data.take(np.arange(pos[a], pos[b])))
            blobs.append(sketch.to_bytes())
            lo, up = sketch.bounds(None if now is None or sketch.newest is None else int(now[i]))
            lower.append(lo)
            upper.append(up)
        lower, upper = np.array(lower, dtype=np.int64), np.array(upper, dtype=np.int64)
        return blobs, Answers(lower * 0.5 + upper * 0.5, lower, upper)

    def exact_totals(self, t, run, keys, data, window, at=None):
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        values = np.zeros(t.size, dtype=np.int64)
        values[present] = 1 if self._values(data) is None else self._values(data)
        return per_key_sums(values, inside, run, keys), inside, values


@dataclass(frozen=True)
class Frequencies(_Weighted, family="ecm", sketch=SlidingCountMin):
    """Sliding frequencies of a column's items (the ECM-sketch): the sum of
    ``value`` (default 1 per row) per item over the window.

    >>> Frequencies("dst", window="1 hour", eps=0.01)
    Frequencies(column='dst', window='1 hour', eps=0.01, delta=0.01, eh_eps=None, seed=0, value=None)
    """

    column: str
    window: object
    eps: float = 0.01
    delta: float = 0.01
    eh_eps: float | None = None
    seed: int = 0
    value: str | None = None
    column_type = CountMinColumn
    bounded = True
    additive = True  # a key's total is the sum of its partials' (Frequencies.union)
    accepts = {"column": ITEM, "value": INTEGRAL}
    estimators = {"frequency": Estimator((("item", True),), "double",
                                         "Scalar: the estimated frequency of an item (a column or literal) over "
                                         "the window as of now, DoubleType."),
                  "inner_product": Estimator((("other", True),), "double",
                                             "Scalar: the estimated join size sum_x f(x) g(x) of the sketch's stream "
                                             "and another ecm sketch's (same parameters) over the window as of now "
                                             "(default: the newer one's newest), DoubleType.")}

    def _hashes(self, data):
        if "hash" not in data.arrays:
            data.arrays["hash"] = hash64(data.arrays["item"], self.seed)
        return data.arrays["hash"]

    def update(self, sketch, t, data):
        with as_key_sum_overflow():
            return sketch.update_hashes(t, self._hashes(data), self._values(data))

    def partials(self, t, starts, data, window, now=None):
        """Every key's sketch at once (:meth:`~frequencies.columnar.CountMinColumn.build`),
        with the window total's bounds as of ``now`` (default: each key's
        newest row)."""
        present = data.present
        kept = np.concatenate([[0], np.cumsum(present)])[starts]
        with as_key_sum_overflow():
            column = CountMinColumn.build(t[present], kept, self._hashes(data), self._values(data),
                                          (window, self.eps, self.delta, self.eh_eps, self.seed))
        at = None if now is None else np.where(column.counters.has_newest, np.asarray(now, dtype=np.int64),
                                               column.counters.newest)
        lower, upper = column.bounds(at)
        return column.to_bytes(), Answers(lower * 0.5 + upper * 0.5, lower, upper)

    @classmethod
    def answers(cls, blobs, nows, window):
        """Every sketch of a batch decoded and bounded at once."""
        got = cls._column_bounds(blobs, nows, window)
        if got is None:
            return super().answers(blobs, nows, window)
        present, lower, upper = got
        return Answers(np.where(present, lower * 0.5 + upper * 0.5, np.nan), lower, upper)

    def union(self, blobs, starts, at=None):
        """Each key's window total: the sums of its partials' bounds as of
        ``at`` (default: the key's newest), what ``aggregate``'s two-phase
        plan has Spark sum (:attr:`additive`).  Each part's bounds bracket
        its share of the key's rows within eps, so their sums bracket the
        total within eps, and no wider than the merged sketch's (whose rows'
        counters, summed over the parts, bracket it as a whole)."""
        present = np.array([b is not None for b in blobs], dtype=bool)
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))[present]
        kept = np.flatnonzero(np.bincount(group, minlength=starts.size))  # keys with a part
        lower = np.zeros(starts.size, dtype=np.int64)
        upper = np.zeros(starts.size, dtype=np.int64)
        column = CountMinColumn.from_bytes([bytes(b) for b in blobs if b is not None]) if kept.size else None
        key_at = None if at is None else np.broadcast_to(np.asarray(at, dtype=np.int64), starts.shape)
        if column is not None:
            with as_key_sum_overflow():
                lower[kept], upper[kept] = column.summed_bounds(np.searchsorted(group, kept),
                                                                None if key_at is None else key_at[kept])
            return Answers(lower * 0.5 + upper * 0.5, lower, upper)
        ends = np.append(starts[1:], len(blobs)).tolist()
        for g in kept.tolist():  # parameters differ in the batch: key by key, a key's parts alike
            parts = [SlidingCountMin.from_bytes(x) for x in blobs[starts[g]:ends[g]] if x is not None]
            with as_key_sum_overflow():
                one = CountMinColumn.from_sketches(parts)  # refuses a key whose parts differ
                lower[g], upper[g] = (x[0] for x in one.summed_bounds([0], None if key_at is None else key_at[g]))
        return Answers(lower * 0.5 + upper * 0.5, lower, upper)

    def exact(self, t, run, keys, data, window, at=None):
        return self.exact_totals(t, run, keys, data, window, at)[0]

    def native_answer(self, schema):
        return NativeAnswer(aggregate=self._native, checks=self._checks)

    def native_per_row(self, schema):
        return NativePerRow(frame=self._frame, by=lambda columns: (columns["column"],))

    def _native(self, columns, inside, key_text):
        """The window's total from Spark's aggregates (rows, or the sum of
        the values, of the rows with an item)."""

        if self.value is None:
            return f"count(CASE WHEN {inside} THEN 1 END)"
        checked = nonnegative(self.value, columns["value"], self.who, key_text)
        return checked_sum(f"CASE WHEN {inside} THEN {checked} END", key_text)

    def _checks(self, columns, key_text):
        return [] if self.value is None else [nonnegative(self.value, columns["value"], self.who, key_text)]

    def _frame(self, columns, upto, before, key_text, schema):
        """Each row's own item's frequency over its frame, within (key,
        item): rows (or values) up to the row less those a window earlier."""

        item = columns["column"]
        if self.value is None:
            return f"CASE WHEN {item} IS NULL THEN NULL ELSE {upto('count(1)')} - {before('count(1)')} END"
        v = columns["value"]
        nulls = f"WHEN {item} IS NULL OR {v} IS NULL THEN NULL "
        return frame_sum(self.value, v, self.who, upto, before, key_text, schema, nulls)

    def frames(self, lo, hi, data, window):
        """Each row's own item's frequency over its frame: the rows of each
        item counted (or their values summed) by prefix sums over the item's
        positions."""
        pos = np.flatnonzero(data.present)
        codes = pd.factorize(data.arrays["item"])[0] if "item" in data.arrays else \
            pd.factorize(data.arrays["hash"])[0]
        values = self._values(data)
        values = np.ones(pos.size, dtype=np.int64) if values is None else values.astype(np.int64)
        order = order_by(codes, pos)
        sorted_key = codes[order].astype(np.int64) * (int(lo.size) + 1) + pos[order]
        prefix = np.concatenate([[0], np.cumsum(values[order])])
        if np.any(prefix[1:] < prefix[:-1]):  # non-negative terms: a wrap shows as a decrease
            raise sum_past_int64()
        out = np.zeros(lo.size, dtype=np.int64)
        own = codes.astype(np.int64) * (int(lo.size) + 1)
        start = np.searchsorted(sorted_key, own + lo[pos])
        end = np.searchsorted(sorted_key, own + hi[pos])
        out[pos] = prefix[end] - prefix[start]
        return pd.arrays.IntegerArray(out, mask=~data.present)  # null: a row without an item


    @classmethod
    def estimate_frequency(cls, blobs, arrays, nows, window):
        """``ecm_sketch_frequency``: one item per row (its column or a
        literal), hashed with each sketch's seed."""
        import pyarrow as pa

        item_array = arrays["item"]
        present, kept = items(item_array, "item", "ecm_sketch_frequency")
        got = cls._column_frequencies(blobs, present, kept, nows, window)
        if got is not None:
            return pa.array(got, type=pa.float64(), from_pandas=True)
        sketches = cls.decoded(blobs)
        out = np.full(len(sketches), np.nan)
        kept_rows = np.flatnonzero(present)
        for i, s in enumerate(sketches):
            if s is None or not present[i]:
                continue
            j = int(np.searchsorted(kept_rows, i))
            est, _, _ = s.frequencies_of_hashes(hash64(kept[j:j + 1], s.seed),
                                                None if nows is None else int(nows[i]), window)
            out[i] = est[0]
        return pa.array(out, type=pa.float64(), from_pandas=True)


    @classmethod
    def _column_frequencies(cls, blobs, present, kept, nows, window):
        """The estimates of :meth:`estimate_frequency`, every sketch of a
        batch decoded and its item's counters bounded at once
        (:meth:`~frequencies.columnar.CountMinColumn.frequencies_of_hashes`;
        NaN where the sketch or the item is null); None when the sketches
        hold different parameters."""
        blobs = Blobs.of(blobs)
        rows = np.flatnonzero(blobs.present & present)
        out = np.full(len(blobs), np.nan)
        if not rows.size:
            return out
        item_at = np.cumsum(present) - 1  # each row's item among the present ones
        at = None if nows is None else np.asarray(nows, dtype=np.int64)[rows]
        got = cls.column_type.frequencies_of_bytes(blobs.take(rows), lambda seed: hash64(kept[item_at[rows]], seed),
                                                   None, at, window)
        if got is not None:  # every counter bounded as it is decoded; else the column decides
            out[rows] = got[0]
            return out
        column = cls.column_type.from_bytes(blobs.take(rows))
        if column is None:
            return None
        out[rows] = column.frequencies_of_hashes(hash64(kept[item_at[rows]], column.params[4]), at, window)[0]
        return out

    @classmethod
    def estimate_frequency_of_unions(cls, blobs, starts, arrays, nows, window):
        """``ecm_sketch_frequency`` of arrays of sketches (a ``collect_list``
        of stored sketches): each row's item from its sketches' summed
        counter bounds, without merging them
        (:meth:`SlidingCountMin.union_bounds`, then
        :meth:`~SlidingCountMin.answers_from_bounds`: the merge's
        guarantees, no counter's histogram re-compressed), every row at
        once."""
        def hashes(rows, present, kept, seed):
            item_at = np.cumsum(present) - 1
            has = present[rows]
            out = np.zeros(rows.size, dtype=np.uint64)
            out[has] = hash64(kept[item_at[rows[has]]], seed)
            return out, has

        def frequencies(column, group_starts, rows, present, kept, at):
            h, has = hashes(rows, present, kept, column.params[4])
            return np.where(has, column.union_frequencies_of_hashes(group_starts, h, at, window)[0], np.nan)

        def of_bytes(blobs, group_starts, rows, present, kept, at):
            got = cls.column_type.frequencies_of_bytes(blobs, lambda seed: hashes(rows, present, kept, seed)[0],
                                                       group_starts, at, window)
            return None if got is None else np.where(present[rows], got[0], np.nan)

        return cls._frequencies_of_unions(blobs, starts, arrays, nows, window, frequencies, of_bytes)

    @classmethod
    def union_answers(cls, blobs, starts, nows, window):
        """``ecm_sketch_estimate`` / ``_bounds`` of arrays of sketches: each
        group's window total from its sketches' summed counter bounds
        (:meth:`~frequencies.columnar.CountMinColumn.union_bounds`, no
        merge), every group at once; sketches of different parameters: the
        merge's answer."""
        column = CountMinColumn.from_bytes(Blobs.of(blobs))
        if column is None:
            return super().union_answers(blobs, starts, nows, window)
        with as_key_sum_overflow():
            lower, upper = column.union_bounds(starts, nows, window)
        return Answers(lower * 0.5 + upper * 0.5, lower, upper)

    @classmethod
    def estimate_inner_product(cls, blobs, arrays, nows, window):
        """``ecm_sketch_inner_product``: each row's sketch joined with the
        row's ``other`` sketch (null when either is null)."""
        import pyarrow as pa

        sketches = cls.decoded(blobs)

        other = arrays["other"]
        check_arrow_type("other", other, ("binary",), "ecm_sketch_inner_product needs a binary sketch column, that is")
        out = np.full(len(sketches), np.nan)
        for i, (s, b) in enumerate(zip(sketches, other.to_pylist())):
            if s is None or b is None:
                continue
            try:
                o = SlidingCountMin.from_bytes(b)
            except ValueError:
                raise bad_value("other", "<bytes of no ecm sketch>", "ecm_sketch_inner_product needs "
                                "SlidingCountMin sketches") from None
            out[i] = s.inner_product(o, None if nows is None else int(nows[i]), window)[0]
        return pa.array(out, type=pa.float64(), from_pandas=True)

_HITTERS = "array<struct<item:bigint,estimate:double,lower:bigint,upper:bigint>>"


@dataclass(frozen=True)
class HeavyHitters(_Weighted, family="sliding_hh", sketch=SlidingHeavyHitters):
    """Sliding heavy hitters of an integral column: the ids whose value sum
    (default: row count) reaches ``phi`` of the window's total, never
    missing one (frequencies.SlidingHeavyHitters).  Ids are bigints; with
    ``bits=64`` (the default) any bigint, a negative one taken as its
    64-bit pattern (``xxhash64`` of a string column is an id).

    >>> HeavyHitters("src", window="5 minutes", phi=0.05)  # doctest: +NORMALIZE_WHITESPACE
    HeavyHitters(column='src', window='5 minutes', phi=0.05, bits=64, eps=0.01, delta=0.01, eh_eps=None, seed=0,
                 level_bits=4, value=None)
    """

    column: str
    window: object
    phi: float = 0.01
    bits: int = 64
    eps: float = 0.01
    delta: float = 0.01
    eh_eps: float | None = None
    seed: int = 0
    level_bits: int = 4
    value: str | None = None
    column_type = HeavyHittersColumn
    has_frames = False  # a list per key, no per-row form
    accepts = {"column": INTEGRAL, "value": INTEGRAL}
    answer_type = _HITTERS
    _word = "item"
    estimators = {
        "heavy_hitters": Estimator((("phi", False),), _HITTERS,
                                   "Scalar: array<struct<item, estimate, lower, upper>> of the ids at or above "
                                   "phi of the window's total (none missed), largest first."),
        "frequency": Estimator((("item", True),), "double",
                               "Scalar: the estimated frequency of an id over the window as of now, DoubleType."),
    }

    def check(self):
        if isinstance(self.phi, bool) or not isinstance(self.phi, (int, float)) or not 0 < self.phi <= 1:
            raise ValueError(f"phi must be a number in (0, 1], got {self.phi!r}")
        super().check()

    def _read_items(self, array, key_of=None):
        """Ids as uint64: bigints as their 64-bit pattern with ``bits=64``,
        else non-negative and below ``2**bits`` (a bad one named with its
        key)."""
        present, kept = items(array, self.column, self.who)
        kept = np.asarray(kept, dtype=np.int64)
        if self.bits < 64:
            bad = (kept < 0) | (kept >= (1 << self.bits))
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise bad_value(self.column, int(kept[j]), f"{self.who} needs ids in [0, 2**{self.bits}) "
                                f"(bits={self.bits})", None if key_of is None else key_of(np.flatnonzero(present)[j]))
        return present, kept.view(np.uint64)

    def update(self, sketch, t, data):
        with as_key_sum_overflow():
            return sketch.update(t, data.arrays["item"], self._values(data))

    def native_answer(self, schema):
        return NativeAnswer(top=self._top, checks=self._checks)

    def _top(self, columns, key_text):
        """The exact list from Spark's aggregates: rows (or values) per
        (key, id), the ids at or above ``phi`` of the key's total."""

        item = columns["column"]
        if self.bits < 64:
            need = f"{self.who} needs ids in [0, 2**{self.bits}) (bits={self.bits})"
            item = (f"CASE WHEN {item} < 0 OR {item} >= {1 << self.bits}L THEN "
                    f"{raise_bad_value(self.column, item, need, key_text)} ELSE CAST({item} AS BIGINT) END")
        if self.value is None:
            return item, f"CASE WHEN {columns['column']} IS NULL THEN NULL ELSE 1L END", self.phi
        v = columns["value"]
        need = f"{self.who} needs non-negative integers"
        weight = (f"CASE WHEN {columns['column']} IS NULL THEN NULL WHEN {v} < 0 THEN "
                  f"{raise_bad_value(self.value, v, need, key_text)} ELSE CAST({v} AS BIGINT) END")
        return item, weight, self.phi

    def _checks(self, columns, key_text):
        item, weight, _ = self._top(columns, key_text)
        return ([item] if self.bits < 64 else []) + ([weight] if self.value is not None else [])

    @staticmethod
    def _listed(hitters) -> list:
        return [{"item": int(np.uint64(h.item).view(np.int64)), "estimate": h.estimate, "lower": h.lower,
                 "upper": h.upper} for h in hitters]

    def answer(self, sketch, now, window):
        """The key's list of the ids at or above ``phi``."""
        return self._listed(sketch.heavy_hitters(self.phi, now, window)), None, None

    @classmethod
    def answers(cls, blobs, nows, window):
        """``sliding_hh_sketch_estimate``: each sketch's window total, all
        decoded and bounded at once."""
        got = cls._column_bounds(blobs, nows, window)
        if got is not None:
            present, lower, upper = got
            return Answers(np.where(present, lower * 0.5 + upper * 0.5, np.nan))
        est = np.full(len(blobs), np.nan)
        for i, b in enumerate(blobs):
            if b is not None:
                est[i] = SlidingHeavyHitters.from_bytes(b).estimate(None if nows is None else int(nows[i]), window)
        return Answers(est)

    def partials(self, t, starts, data, window, now=None):
        """Every key's sketch at once (:meth:`~frequencies.columnar.HeavyHittersColumn.build`:
        each level's ECM-sketches of the ids' prefixes built for every key
        together), with the window total's bounds as of ``now`` (default:
        each key's newest row)."""
        present = data.present
        kept = np.concatenate([[0], np.cumsum(present)])[starts]
        with as_key_sum_overflow():
            column = HeavyHittersColumn.build(t[present], kept, data.arrays["item"], self._values(data), self.bits,
                                              self.level_bits, (window, self.eps, self.delta, self.eh_eps, self.seed))
        c = column.levels.counters
        newest = c.newest.reshape(-1, column.depth)[:, 0]
        has = c.has_newest.reshape(-1, column.depth)[:, 0]
        at = None if now is None else np.where(has, np.asarray(now, dtype=np.int64), newest)
        lower, upper = column.bounds(at)
        return column.to_bytes(), Answers(lower * 0.5 + upper * 0.5, lower, upper)

    def key_answers(self, blobs, nows, window):
        """Each sketch's list, every sketch's walk down the levels at once
        (:meth:`~frequencies.columnar.HeavyHittersColumn.heavy_hitters`)."""
        return Answers(_hitter_lists(blobs, self.phi, nows, window))

    def union(self, blobs, starts, at=None):
        """Each key's list from its partials' summed counter bounds
        (:meth:`SlidingHeavyHitters.union_heavy_hitters`: the merge's
        guarantees without merging thousands of histograms), every key's
        walk at once (:meth:`~frequencies.columnar.HeavyHittersColumn.heavy_hitters`)."""
        present = [i for i, b in enumerate(blobs) if b is not None]
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))[present]
        if present and np.unique(group).size == starts.size:
            raw = Blobs.of(blobs).take(np.array(present))
            firsts = np.searchsorted(group, np.arange(starts.size))
            hitters = HeavyHittersColumn.heavy_hitters_of(raw, self.phi, firsts, at, flat=True)
            if hitters is not None:
                return Answers(HitterRows(hitters))
        ends = np.append(starts[1:], len(blobs)).tolist()
        out = []
        for a, b in zip(starts.tolist(), ends):
            parts = [SlidingHeavyHitters.from_bytes(x) for x in blobs[a:b] if x is not None]
            out.append(self._listed(SlidingHeavyHitters.union_heavy_hitters(parts, self.phi, at)))
        return Answers(out)

    def exact(self, t, run, keys, data, window, at=None):
        """Each key's exact heavy hitters (estimate, lower and upper all the
        exact frequency), largest first."""
        totals, inside, values = self.exact_totals(t, run, keys, data, window, at)
        ids = np.zeros(t.size, dtype=np.uint64)
        ids[data.present] = data.arrays["item"]
        frame = pd.DataFrame({"run": run[inside], "id": ids[inside].view(np.int64), "v": values[inside]})
        sums = frame.groupby(["run", "id"], sort=False)["v"].sum().reset_index()
        sums = sums[(sums["v"] >= self.phi * totals[sums["run"].to_numpy()]) & (sums["v"] > 0)]
        sums = sums.sort_values(["run", "v", "id"], ascending=[True, False, True])
        run_of, v = sums["run"].to_numpy(np.int64), sums["v"].to_numpy(np.int64)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(run_of, minlength=keys))]).astype(np.int64)
        return HitterRows(Hitters(offsets, sums["id"].to_numpy(np.int64).view(np.uint64), v.astype(np.float64), v, v))

    @classmethod
    def estimate_heavy_hitters(cls, blobs, arrays, nows, window):
        """``sliding_hh_sketch_heavy_hitters``: the list of each sketch
        (the type :attr:`answer_type` declares)."""
        return cls.answer_array(_hitter_lists(blobs, arrays["phi"], nows, window))

    @classmethod
    def estimate_heavy_hitters_of_unions(cls, blobs, starts, arrays, nows, window):
        """``sliding_hh_sketch_heavy_hitters`` of arrays of sketches (a
        ``collect_list`` of stored sketches): each row's list from its
        sketches' summed counter bounds, without merging them
        (:meth:`SlidingHeavyHitters.union_heavy_hitters`: the merge's
        guarantees, no id at ``phi`` missed, without re-compressing every
        counter's histogram), every row's walk at once; null for a row
        without a sketch.  None for sketches of different parameters (the
        merge then refuses them)."""
        blobs = Blobs.of(blobs)
        starts = np.asarray(starts, dtype=np.int64)
        sizes = np.diff(np.append(starts, len(blobs)))
        out = [None] * starts.size
        if len(blobs) == 0:
            return cls.answer_array(out)
        rows = np.flatnonzero(sizes > 0)
        at = None if nows is None else np.asarray(nows, dtype=np.int64)[rows]
        hitters = HeavyHittersColumn.heavy_hitters_of(blobs, arrays["phi"], starts[rows], at, window, flat=True)
        if hitters is None:
            return None
        return cls.answer_array(HitterRows(hitters, rows, starts.size))

    @classmethod
    def estimate_frequency(cls, blobs, arrays, nows, window):
        """``sliding_hh_sketch_frequency``: one id per row."""
        import pyarrow as pa

        present, kept = items(arrays["item"], "item", "sliding_hh_sketch_frequency")
        got = cls._column_frequencies(blobs, present, kept, nows, window)
        if got is not None:
            return pa.array(got, type=pa.float64(), from_pandas=True)
        sketches = cls.decoded(blobs)
        kept_rows = np.flatnonzero(present)
        out = np.full(len(sketches), np.nan)
        for i, s in enumerate(sketches):
            if s is None or not present[i]:
                continue
            x = np.asarray(kept[int(np.searchsorted(kept_rows, i))], dtype=np.int64).reshape(1).view(np.uint64)
            if s.bits < 64 and int(x[0]) >= 1 << s.bits:
                continue  # an id the sketch cannot hold: null
            out[i] = s.frequencies(x, None if nows is None else int(nows[i]), window)[0][0]
        return pa.array(out, type=pa.float64(), from_pandas=True)


    @classmethod
    def _column_frequencies(cls, blobs, present, kept, nows, window):
        """The estimates of :meth:`estimate_frequency`, every sketch of a
        batch decoded and its id's counters bounded at once
        (:meth:`~frequencies.columnar.HeavyHittersColumn.frequencies`; NaN
        where the sketch or the id is null, or the id past the sketches'
        bits); None when the sketches hold different parameters."""
        blobs = Blobs.of(blobs)
        out = np.full(len(blobs), np.nan)
        rows = np.flatnonzero(blobs.present & present)
        if not rows.size:
            return out
        column = HeavyHittersColumn.from_bytes(blobs.take(rows))
        if column is None:
            return None
        out[rows] = _id_frequencies(column, rows, present, kept,
                                    None if nows is None else np.asarray(nows, dtype=np.int64)[rows], window)
        return out

    @classmethod
    def estimate_frequency_of_unions(cls, blobs, starts, arrays, nows, window):
        """``sliding_hh_sketch_frequency`` of arrays of sketches: each
        row's merge (not encoded and decoded again), then its id's
        frequency, every row at once."""
        return cls._frequencies_of_unions(blobs, starts, arrays, nows, window,
                                          lambda column, group_starts, rows, present, kept, at:
                                          _id_frequencies(column, rows, present, kept, at, window, group_starts))


def _id_frequencies(column, rows, present, kept, at, window, group_starts=None) -> np.ndarray:
    """The frequencies of row ``rows[j]``'s id in ``column``'s sketch ``j``
    (or, with ``group_starts``, its group ``j`` of sketches; NaN for a null
    id or one past the sketches' bits)."""
    ids = np.zeros(present.size, dtype=np.uint64)
    ids[present] = np.asarray(kept, dtype=np.int64).view(np.uint64)
    ids = ids[rows]
    fits = present[rows] & ((ids < np.uint64(1 << column.bits)) if column.bits < 64 else True)
    est = column.frequencies(np.where(fits, ids, np.uint64(0)), at, window, group_starts)[0]
    return np.where(fits, est, np.nan)


def _hitter_lists(blobs, phi, nows, window) -> "HitterRows | list":
    """Each stored heavy-hitter sketch's list (None for null) as of
    ``nows[i]`` (None: its newest), every sketch's walk at once; sketches
    of different parameters one at a time."""
    blobs = Blobs.of(blobs)
    present = np.flatnonzero(blobs.present)
    out = [None] * len(blobs)
    at = None if nows is None else np.asarray(nows, dtype=np.int64)[present]
    hitters = HeavyHittersColumn.heavy_hitters_of(blobs.take(present), phi, None, at, window, flat=True) \
        if present.size else None
    if hitters is not None:
        return HitterRows(hitters, present, len(blobs))
    for i in present.tolist():
        out[i] = HeavyHitters._listed(SlidingHeavyHitters.from_bytes(blobs[i]).heavy_hitters(
            phi, None if nows is None else int(nows[i]), window))
    return out


class HitterRows:
    """Heavy-hitter lists of many rows, flat (:class:`frequencies.columnar.Hitters`
    of the rows ``rows`` in order, the other rows null): what a batch's
    answers are, written as one Arrow column (:meth:`to_arrow`) without a
    Python object per item, and read as the list of lists of dicts
    ``HeavyHitters.answer`` gives (``item`` a bigint: an id's 64-bit
    pattern).

    >>> from frequencies.columnar import Hitters
    >>> one = np.array([4])
    >>> rows = HitterRows(Hitters(np.array([0, 1]), np.array([2**64 - 1], dtype=np.uint64), np.array([4.0]), one, one),
    ...                   np.array([1]), 2)
    >>> list(rows)
    [None, [{'item': -1, 'estimate': 4.0, 'lower': 4, 'upper': 4}]]
    """

    def __init__(self, hitters, rows=None, n: int | None = None):
        groups = hitters.offsets.size - 1
        self.hitters = hitters
        self.rows = np.arange(groups, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        self.n = groups if n is None else int(n)
        self._group = np.full(self.n, -1, dtype=np.int64)
        self._group[self.rows] = np.arange(groups)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = int(self._group[i])
        if g < 0:
            return None
        h, a, z = self.hitters, int(self.hitters.offsets[g]), int(self.hitters.offsets[g + 1])
        return [{"item": x, "estimate": e, "lower": lo, "upper": up} for x, e, lo, up in zip(
            h.item[a:z].view(np.int64).tolist(), h.estimate[a:z].tolist(), h.lower[a:z].tolist(),
            h.upper[a:z].tolist())]

    def __iter__(self):
        return (self[i] for i in range(self.n))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    __hash__ = None

    def to_arrow(self, arrow_type):
        """The lists as an Arrow array of ``arrow_type``
        (``list<struct<item, estimate, lower, upper>>``)."""
        import pyarrow as pa

        h = self.hitters
        counts = np.zeros(self.n, dtype=np.int64)
        counts[self.rows] = np.diff(h.offsets)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        present = np.zeros(self.n, dtype=bool)
        present[self.rows] = True
        struct = arrow_type.value_type
        fields = [struct.field(i) for i in range(struct.num_fields)]
        data = {"item": h.item.view(np.int64), "estimate": h.estimate, "lower": h.lower, "upper": h.upper}
        values = pa.StructArray.from_arrays([pa.array(data[f.name], type=f.type) for f in fields], fields=fields)
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, type=arrow_type,
                                        mask=pa.array(~present))
