"""Unions of many keys' sketches per pass: phase two of
:func:`udaf.aggregate`, and :func:`union_table` (a stored sketch table
rolled up to coarser keys; Spark groups each key's sketches with
``collect_list``, then one Python pass unites every key of an Arrow batch).

After phase one every key has one partial sketch per partition that held
it.  A grouped-aggregate UDF would call Python once per key and spec
(about 0.3 ms each); here Spark's aggregate gathers each key's partials
(``collect_list``) and ``mapInArrow`` answers every key of an Arrow batch
at once through each spec's :meth:`~udaf.spec.Spec.union`
(exponential histograms: the sums of the partials' bounds, decoded for the
whole batch in numpy; sliding HyperLogLogs: each register's largest live
rank over a key's partials; L_p norms: the sum of the partials' sketches).
"""

from __future__ import annotations

import numpy as np

from ehist.blobs import Blobs

from ._arrow import list_blobs_of
from ._convert import key_names
from .family import extension_modules, sketch_family

__all__ = ["UnionAnswers", "UniteLists", "merged", "union_table"]


class UnionAnswers:
    """``mapInArrow`` function over rows of keys and ``collect_list`` of
    each spec's partial sketches (one row per key, from Spark's
    aggregate): one row per key with each spec's estimate (double; with
    bounds also ``<name>_lower`` / ``<name>_upper``, bigint; with
    ``sketches`` the merged sketch ``<name>_sketch``), every key of a batch
    at once; the ``carried`` columns of the batch after them, as they are
    (the sums Spark made of other specs' bounds: :func:`udaf.aggregate`)."""

    def __init__(self, keys, specs, at, with_bounds, sketches=False, carried=()):
        self.keys, self.specs = keys, specs
        self.at, self.with_bounds, self.sketches = at, with_bounds, sketches
        self.carried = list(carried)  # columns passed through after the answers

    def __call__(self, batches):
        for batch in batches:
            yield self._answer(batch)

    def _answer(self, batch):
        import pyarrow as pa

        out = {k: batch.column(k) for k in self.keys}
        for name, spec in self.specs.items():
            blobs, starts = list_blobs_of(batch.column(name))  # read in place
            if self.sketches:  # merged sketches, and the answers read from them
                united = merged(type(spec), blobs, starts)
                answers = spec.key_answers(united, None if self.at is None else
                                           np.full(len(united), self.at, dtype=np.int64), None)
            else:
                answers = spec.union(blobs, starts, at=self.at)
            out[name] = type(spec).answer_array(answers.estimate)
            if name in self.with_bounds:
                out[f"{name}_lower"], out[f"{name}_upper"] = pa.array(answers.lower), pa.array(answers.upper)
            if self.sketches:
                out[f"{name}_sketch"] = pa.array(united, type=pa.binary())
        out.update({c: batch.column(c) for c in self.carried})
        return pa.RecordBatch.from_pydict(out)


#: Sketches a union pass takes at a time: :func:`merged` hands a batch's
#: groups to ``merge_groups`` in slices of about this many sketches, so that
#: the columnar unions' flat arrays stay in cache and a worker's memory does
#: not grow with the batch (the day's p99 of 100k sources x 4 sites, one
#: process: 4.0 s in one call, 3.2 s in slices of 40,000 sketches, what
#: Spark's Arrow batches of 10,000 keys give, 2.8 s in slices of 8,192).
UNION_SLICE = 8192


def merged(cls, blobs: list, starts: np.ndarray) -> list:
    """Each run's union (bytes; None for a run without a sketch) by the
    family's :meth:`~udaf.spec.Spec.merge_groups`, nulls left out, whole
    runs of about :data:`UNION_SLICE` sketches at a time."""
    blobs = Blobs.of(blobs)
    present = blobs.present
    out = [None] * len(starts)
    if not present.any():
        return out
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(blobs))))[present]
    has = np.flatnonzero(np.bincount(run, minlength=len(starts)))
    kept = blobs.take(present)
    first = np.searchsorted(run, has)  # each group's first sketch among the kept
    united = []
    g = 0
    while g < first.size:
        end = max(g + 1, int(np.searchsorted(first, first[g] + UNION_SLICE)))  # whole groups
        a, z = int(first[g]), int(first[end]) if end < first.size else len(kept)
        united += list(cls.merge_groups(kept[a:z], first[g:end] - a))
        g = end
    for i, b in zip(has.tolist(), united):
        out[i] = b
    return out


class UniteLists:
    """Each row's union of a list of sketches (``array<binary>``: the
    ``collect_list`` of one column per key, from Spark's aggregate), every
    row of an Arrow batch at once (:func:`merged`: the family's
    :meth:`~udaf.spec.Spec.merge_groups`; null for a row without a
    sketch): the body of :func:`union_table`'s UDFs.  The modules of
    families registered on the driver from outside the package travel with
    it (:func:`~udaf.family.extension_modules`): the task imports them
    before it reads bytes of a family no spec of the job names."""

    def __init__(self):
        self.modules = extension_modules()

    def __call__(self, lists, column: str):
        import pyarrow as pa

        blobs, starts = list_blobs_of(lists)
        cls = sketch_family(blobs, column, "union_table", self.modules)
        return pa.array(merged(cls, blobs, starts) if cls is not None else [None] * len(starts), type=pa.binary())


def union_table(df, by, *columns):
    """A sketch table rolled up to coarser keys: one row per ``by`` key with
    the union of each sketch column over the key's rows.

    Sites to global, prefixes to /16s, hours to days: the rows of a stored
    table (:func:`udaf.sketch_table`, ``*_sketch_agg``) that share ``by``
    are united as ``<family>_union_agg`` unites them, byte for byte, but
    every key of an Arrow batch at once after Spark's shuffle by key
    (``collect_list``, then one Arrow UDF pass), not a Python call per
    key; the result is a sketch table again (read it with
    ``*_sketch_estimate``, unite it further).  An answer whose only
    column is the united sketch (its time, window and other parameters
    given as Python values) runs in that same pass: Spark chains the two
    UDFs.

    Parameters
    ----------
    df : DataFrame
        A table with binary sketch columns.
    by : str or list of str
        The coarser key columns (may be empty: one row for the whole table,
        nulls for an empty one, as Spark's global aggregates give).
    *columns : str
        The sketch columns to unite (default: every binary column not in
        ``by``); other columns are left out.  A column holds one family's
        sketches; nulls are skipped, a key with none gets null.

    Returns
    -------
    DataFrame
        ``by`` columns, then each sketch column (binary).

    Examples
    --------
    >>> daily = sketch_table(flows, ["site", "src"], "ts", n=Count("1 day"),
    ...                      dsts=Distinct("dst", "1 day"))             # doctest: +SKIP
    >>> union_table(daily, "src").select("src", U.eh_sketch_estimate("n"),
    ...                                  U.sliding_hll_sketch_estimate("dsts")).show()  # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    keys = key_names(by, "union_table", "by")
    names = set(df.columns)
    for c in keys + list(columns):
        if not isinstance(c, str):
            raise TypeError(f"union_table takes column names, got {c!r}")
        if c not in names:
            raise ValueError(f"column {c!r} is not in the DataFrame (columns: {', '.join(df.columns)})")
    if not columns:
        columns = tuple(f.name for f in df.schema.fields
                        if isinstance(f.dataType, T.BinaryType) and f.name not in keys)
        if not columns:
            raise ValueError(f"union_table found no binary sketch column besides {keys} "
                             f"(columns: {', '.join(df.columns)})")
    for c in columns:
        if c in keys:
            raise ValueError(f"column {c!r} is a key of by and a sketch column")
        if not isinstance(df.schema[c].dataType, T.BinaryType):
            raise TypeError(f"union_table needs binary sketch columns (from *_sketch_agg, sketch_table or "
                            f"union_table); column {c} is {df.schema[c].dataType.simpleString()}")
    # Spark shuffles the rows by key and groups each key's sketches (nulls
    # left out); one Python pass then unites every key of a batch at once.
    lists = df.groupBy(*[F.col(k) for k in keys]).agg(*[F.collect_list(c).alias(c) for c in columns])
    # one Arrow UDF per column over the lists (not mapInArrow): Spark chains
    # a scalar UDF of one column after it (an answer whose parameters are
    # Python values), uniting and answering in one Python pass
    unite = UniteLists()
    return lists.select(*[lists[i] for i in range(len(keys))],
                        *[_column_union(unite, c)(lists[len(keys) + j]).alias(c) for j, c in enumerate(columns)])


def _column_union(unite: UniteLists, column: str):
    """The Arrow UDF uniting each row's list of ``column``'s sketches."""
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf

    def union_table(lists):
        return unite(lists, column)

    union_table.__annotations__ = {"lists": pa.Array, "return": pa.Array}  # objects: PySpark reads them
    return arrow_udf(union_table, "binary")
