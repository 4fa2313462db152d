"""Phase two of :func:`udaf.aggregate`: the union of each key's partial
sketches, many keys per pass.

After phase one every key has one partial sketch per partition that held
it.  A grouped-aggregate pandas UDF would call Python once per key and
spec (about 0.3 ms each); here the partials are repartitioned by key,
sorted by key in the JVM, and ``mapInArrow`` answers every complete key
run of an Arrow batch at once.  Exponential histograms (counts, sums) are
decoded and bounded for the whole batch in numpy
(:class:`ehist.columnar.HistogramColumn`): a key's bounds are the sums of
its partials' bounds as of the key's newest timestamp, so the midpoint is
within eps of the exact union without merging (each partial is within eps
of its share).  Distinct counts take each register's largest live rank
over a key's partials, decoded and answered for the whole batch at once
(:mod:`distinct.columnar`: the merge's estimate to the last bit).  L_p norms (p-stable sketches, linear) are merged per key.
"""

from __future__ import annotations

import numpy as np

from distinct.columnar import sketches_from_bytes, union_estimates
from ehist.columnar import HistogramColumn
from lp_norms import SlidingLpNorm, median_abs_stable

__all__ = ["UnionAnswers", "merged_estimate"]


class UnionAnswers:
    """``mapInArrow`` function over partial sketches sorted by key: one row
    per key with each spec's estimate (double; with bounds also
    ``<name>_lower`` / ``<name>_upper``, bigint)."""

    def __init__(self, keys, specs, windows, at, with_bounds):
        self.keys, self.specs, self.windows = keys, specs, windows
        self.at, self.with_bounds = at, with_bounds

    def __call__(self, batches):
        from ._arrow import complete_runs

        for table, _, starts in complete_runs(batches, self.keys, None):
            yield self._answer(table, starts)

    def _answer(self, table, starts):
        import pyarrow as pa

        out = {k: table.column(k).chunk(0).take(pa.array(starts)) for k in self.keys}
        for name, spec in self.specs.items():
            blobs = table.column(name).chunk(0).to_pylist()
            if spec.kind in ("count", "sum"):
                col = HistogramColumn.from_bytes(blobs, window=self.windows[name], eps=spec.eps)
                lower, upper = col.union_bounds(starts, now=self.at)
                out[name] = pa.array(lower * 0.5 + upper * 0.5)
                if name in self.with_bounds:
                    out[f"{name}_lower"], out[f"{name}_upper"] = pa.array(lower), pa.array(upper)
            elif spec.kind == "distinct":  # each key's registers from all its partials at once
                out[name] = pa.array(union_estimates(sketches_from_bytes(blobs), starts, now=self.at),
                                     type=pa.float64())
            else:
                ends = np.append(starts[1:], len(blobs)).tolist()
                out[name] = pa.array([merged_estimate(spec, blobs[a:b], self.at)
                                      for a, b in zip(starts.tolist(), ends)], type=pa.float64())
        return pa.RecordBatch.from_pydict(out)


def merged_estimate(spec, blobs, at=None) -> float:
    """A Distinct or LpNorm spec's estimate from one key's partial sketches
    (non-null bytes), as of ``at`` (default: the newest partial's).

    The partials arrive in shuffle order, which differs from run to run;
    they are merged in byte order, so the float sums of L_p sketches (not
    associative) give the same answer on every run and every cluster."""
    blobs = sorted(bytes(b) for b in blobs)
    if spec.kind == "distinct":
        return float(union_estimates(sketches_from_bytes(blobs), [0], now=at)[0])
    sketches = [SlidingLpNorm.from_bytes(b) for b in blobs]
    stamps = [x.newest for x in sketches if x.newest is not None]
    if not stamps:
        return 0.0
    now = max(stamps) if at is None else at
    y = sum(x.sketch(now=now) for x in sketches)
    return float(np.median(np.abs(y))) / median_abs_stable(spec.p)
