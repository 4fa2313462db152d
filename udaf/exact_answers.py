"""The ``shuffle`` strategy of :func:`udaf.aggregate`: every row of a key
in one place, each spec's exact answer (:meth:`~udaf.spec.Spec.exact`),
all keys of an Arrow batch in one numpy pass (engines: :mod:`udaf.exact`)."""

from __future__ import annotations

import numpy as np

from ._arrow import complete_runs
from .spec import read_spec

__all__ = ["ExactAnswers"]


class ExactAnswers:
    """``mapInArrow`` function over rows sorted by key (runs found on
    ``runs``) and time: one row per key with each spec's exact answer
    (:meth:`~udaf.spec.Spec.exact`; double, with bounds also ``_lower`` /
    ``_upper``, bigint)."""

    def __init__(self, keys, runs, ts, specs, windows, at, with_bounds):
        self.keys, self.runs, self.ts, self.specs, self.windows = keys, runs, ts, specs, windows
        self.at, self.with_bounds = at, with_bounds

    def __call__(self, batches):
        for table, t, starts in complete_runs(batches, self.runs, self.ts):
            yield self._answer(table, t, starts)

    def _answer(self, table, t, starts):
        import pyarrow as pa

        n = table.num_rows
        keys = starts.size
        run = np.repeat(np.arange(keys), np.diff(np.append(starts, n)))
        out = {k: table.column(k).chunk(0).take(pa.array(starts)) for k in self.keys}

        def key_of(row):
            return tuple(table.column(k)[int(row)].as_py() for k in self.keys)

        for name, spec in self.specs.items():
            exact = spec.exact(t, run, keys, read_spec(spec, table, key_of), self.windows[name], self.at)
            out[name] = type(spec).answer_array(exact)
            if name in self.with_bounds:
                out[f"{name}_lower"] = pa.array(exact.astype(np.int64))
                out[f"{name}_upper"] = pa.array(exact.astype(np.int64))
        return pa.RecordBatch.from_pydict(out)
