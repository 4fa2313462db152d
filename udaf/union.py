"""Phase two of :func:`udaf.aggregate`: the union of each key's partial
sketches, many keys per pass.

After phase one every key has one partial sketch per partition that held
it.  A grouped-aggregate UDF would call Python once per key and spec
(about 0.3 ms each); here the partials are repartitioned by key, sorted by
key in the JVM, and ``mapInArrow`` answers every complete key run of an
Arrow batch at once through each spec's :meth:`~udaf.spec.Spec.union`
(exponential histograms: the sums of the partials' bounds, decoded for the
whole batch in numpy; sliding HyperLogLogs: each register's largest live
rank over a key's partials; L_p norms: the sum of the partials' sketches).
"""

from __future__ import annotations

import numpy as np

__all__ = ["UnionAnswers"]


class UnionAnswers:
    """``mapInArrow`` function over partial sketches sorted by key (runs
    found on ``runs``): one row per key with each spec's estimate (double;
    with bounds also ``<name>_lower`` / ``<name>_upper``, bigint; with
    ``sketches`` the merged sketch ``<name>_sketch``)."""

    def __init__(self, keys, runs, specs, at, with_bounds, sketches=False):
        self.keys, self.runs, self.specs = keys, runs, specs
        self.at, self.with_bounds, self.sketches = at, with_bounds, sketches

    def __call__(self, batches):
        from ._arrow import complete_runs

        for table, _, starts in complete_runs(batches, self.runs, None):
            yield self._answer(table, starts)

    def _answer(self, table, starts):
        import pyarrow as pa

        out = {k: table.column(k).chunk(0).take(pa.array(starts)) for k in self.keys}
        ends = np.append(starts[1:], table.num_rows).tolist()
        for name, spec in self.specs.items():
            blobs = table.column(name).chunk(0).to_pylist()
            if self.sketches:  # merged sketches, and the answers read from them
                merged = [spec.merge([b for b in blobs[a:z] if b is not None])
                          for a, z in zip(starts.tolist(), ends)]
                answers = spec.key_answers(merged, None if self.at is None else
                                           np.full(len(merged), self.at, dtype=np.int64), None)
            else:
                answers = spec.union(blobs, starts, at=self.at)
            out[name] = type(spec).answer_array(answers.estimate)
            if name in self.with_bounds:
                out[f"{name}_lower"], out[f"{name}_upper"] = pa.array(answers.lower), pa.array(answers.upper)
            if self.sketches:
                out[f"{name}_sketch"] = pa.array(merged, type=pa.binary())
        return pa.RecordBatch.from_pydict(out)
