"""L_p norms over sliding windows: p-stable sketches in histogram buckets.

``LpNorm(column, window, value, p, eps, delta, seed)``: the L_p norm of the
vector ``column -> sum(value)`` (value default 1) over the window, by
:class:`lp_norms.SlidingLpNorm` (within its ``guarantee()`` with
probability ``1 - delta``); SQL names ``sliding_lp_sketch_agg``,
``sliding_lp_union_agg``, ``sliding_lp_sketch_estimate`` and the one-step
``sliding_lp_norm``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ehist.hashing import hash64
from lp_norms import SlidingLpNorm, median_abs_stable, rows_for

from .exact import in_window, per_key_lp_norms
from .frames import frame_lp_norms
from .inputs import INTEGRAL, ITEM, NUMERIC, items, reals
from .spec import Answers, Data, Spec, key_now

__all__ = ["LpNorm"]

# Bytes of one shuffled row (key, time, an index and a value as an
# UnsafeRow), against which a partial's size is weighed.
_ROW_BYTES = 48


@dataclass(frozen=True)
class LpNorm(Spec):
    """Sliding L_p norm of the vector ``column -> sum(value)`` (value
    default 1; null indexes or values skip the row).

    >>> LpNorm("dst", window=3600, value="bytes", p=1.0)
    LpNorm(column='dst', window=3600, value='bytes', p=1.0, eps=0.05, delta=0.05, seed=0)
    """

    column: str
    window: object
    value: str | None = None
    p: float = 2.0
    eps: float = 0.05
    delta: float = 0.05
    seed: int = 0
    family = "sliding_lp"
    sketch_type = SlidingLpNorm
    one_step = "sliding_lp_norm"
    frame_type = "double"
    words_per_row = 2
    accepts = {"column": ITEM, "value": NUMERIC}
    arg_names = {"column": "index"}
    params = ("p", "eps", "delta", "seed")

    def check(self):
        SlidingLpNorm(self.p, 1, self.eps, self.delta, self.seed)

    def read(self, columns, n, key_of=None):
        present, indices = items(columns["column"], self.column, self.who)
        arrays = {}
        if self.value is not None:
            has_value, values = reals(columns["value"], self.value, self.who, key_of)
            keep = has_value[present]
            indices = indices[keep]
            present = present & has_value
            arrays["value"] = values[present]
        arrays["item"] = indices
        return Data(present, arrays)

    def make(self, window):
        return SlidingLpNorm(self.p, window, self.eps, self.delta, self.seed)

    def _hashes(self, data):
        if "hash" not in data.arrays:
            data.arrays["hash"] = hash64(data.arrays["item"], self.seed)
        return data.arrays["hash"]

    def update(self, sketch, t, data):
        return sketch.update_hashes(t, self._hashes(data), data.arrays.get("value"))

    def union(self, blobs, starts, at=None):
        """Each key's partial sketches summed as of its newest time (the
        sketch is linear), in byte order so the float sums are the same on
        every run."""
        ends = np.append(starts[1:], len(blobs)).tolist()
        out = []
        for a, b in zip(starts.tolist(), ends):
            sketches = [SlidingLpNorm.from_bytes(x) for x in sorted(bytes(x) for x in blobs[a:b] if x is not None)]
            stamps = [x.newest for x in sketches if x.newest is not None]
            if not stamps:
                out.append(0.0)
                continue
            now = max(stamps) if at is None else at
            y = sum(x.sketch(now=now) for x in sketches)
            out.append(float(np.median(np.abs(y))) / median_abs_stable(self.p))
        return Answers(np.array(out, dtype=np.float64))

    def exact(self, t, run, keys, data, window, at=None):
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        codes = np.full(t.size, -1, dtype=np.int64)
        codes[present] = pd.factorize(data.arrays["item"])[0]
        values = np.ones(t.size)
        if "value" in data.arrays:
            values[present] = data.arrays["value"]
        return per_key_lp_norms(self.p, codes, values, inside, run, keys)

    def frames(self, lo, hi, data, window):
        pos = np.flatnonzero(data.present)
        sub_lo, sub_hi = np.searchsorted(pos, lo), np.searchsorted(pos, hi)
        values = data.arrays.get("value", np.ones(pos.size))
        return frame_lp_norms(self.p, rows_for(self.p, self.eps, self.delta), self.seed, data.arrays["item"],
                              values, sub_lo, sub_hi)

    def reduction(self, schema):
        # each (time, index)'s sum of values, or its count of rows without a
        # value column: a timestamp's sketch depends on those sums alone
        # (SlidingLpNorm._atoms), exact in float64 for integers below 2**53.
        # Float values are not reduced: Spark would add them in another
        # order than the rows path, so the bytes could differ in the last bit.
        from dataclasses import replace

        from .eh_spec import Count, Sum

        if self.value is None:
            _, aggregates, counts = Count(self.window).reduction(schema)
            return ("__ts", self.column), aggregates, replace(self, value=counts.column)
        if schema[self.value].dataType.simpleString() not in INTEGRAL:
            return None
        # the same aggregate as Sum's (negative values keep their message)
        return ("__ts", self.column), Sum(self.value, self.window).reduction(schema)[1], self

    def words(self, data):
        out = np.zeros((data.present.size, 2), dtype=np.int64)
        out[:, 1] = np.float64(-1.0).view(np.int64)  # value -1: row not present
        out[data.present, 0] = self._hashes(data).view(np.int64)
        out[data.present, 1] = data.arrays.get("value", np.ones(int(data.present.sum()))).view(np.int64)
        return out

    def from_words(self, words):
        values = words[:, 1].view(np.float64)
        present = values >= 0
        return Data(present, {"hash": words[present, 0].view(np.uint64), "value": values[present]})

    def min_rows_per_partial(self) -> int:
        """Rows per key and partition from which a partial (a dense
        p-stable sketch per bucket: ``rows_for(p, eps, delta)`` float64s,
        at most ``k (log2(n / k) + 2)`` buckets) is smaller than the
        shuffled rows it summarizes: 131,072 at the defaults."""
        k = math.ceil(1 / self.eps)
        per_bucket = rows_for(self.p, self.eps, self.delta) * 8.0
        n = 64
        while n * _ROW_BYTES < per_bucket * k * (math.log2(max(n / k, 1.0)) + 2):
            n *= 2
        return n
