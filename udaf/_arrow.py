"""Runs of equal keys in Arrow columns sorted by key."""

from __future__ import annotations

import numpy as np

__all__ = ["run_starts", "same_row", "complete_runs"]


def run_starts(columns, n: int) -> np.ndarray | None:
    """Start rows of the runs of equal key tuples in ``columns`` (Arrow
    arrays of ``n`` rows, sorted by key so equal tuples are adjacent;
    nulls equal nulls).  ``None`` when a column's type has no equality
    kernel in pyarrow (nested types).

    >>> import pyarrow as pa
    >>> run_starts([pa.array(["a", "a", None, None, "b"]), pa.array([1, 1, 1, 1, 2])], 5).tolist()
    [0, 2, 4]
    """
    import pyarrow.compute as pc

    change = np.zeros(n, dtype=bool)
    change[0:1] = True
    for col in columns:
        if n < 2:
            break
        a, b = col.slice(1), col.slice(0, n - 1)
        try:
            differ = pc.fill_null(pc.not_equal(a, b), False)
        except Exception:  # noqa: BLE001 - pyarrow has no comparison for this type
            return None
        one_null = pc.xor(pc.is_null(a), pc.is_null(b))
        change[1:] |= pc.or_(differ, one_null).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


def same_row(columns_a, i: int, columns_b, j: int) -> bool:
    """Whether row ``i`` of ``columns_a`` and row ``j`` of ``columns_b``
    hold the same key tuple (nulls equal nulls)."""
    return all(a[i].as_py() == b[j].as_py() for a, b in zip(columns_a, columns_b, strict=True))


def complete_runs(batches, keys, column: str | None, time_field: str = "__ts"):
    """Complete key runs from Arrow ``batches`` sorted by the ``keys``
    columns, then by the time column ``time_field`` (integral, timestamp or
    date: read as int64 units by :func:`udaf.inputs.times`;
    ``column`` is the user's name for it in errors; None: no time column,
    ``t`` is None):
    each batch's runs but its last are yielded with what was held, the last
    is held (its key may continue in the next batch).  Memory: one key's
    rows plus one batch.  Key types must have equality kernels
    (:func:`run_starts` not None).

    Yields
    ------
    (table, t, starts): the runs' rows (one chunk per column), their times
    (int64) and the start row of each run.

    Raises
    ------
    ValueError
        A null time, naming ``column``.
    """
    import pyarrow as pa

    held = []  # batches (slices) of the one key run that may continue
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        cols = [batch.column(k) for k in keys]
        last = int(run_starts(cols, n)[-1])
        continues = bool(held) and same_row([held[-1].column(k) for k in keys], held[-1].num_rows - 1, cols, 0)
        if last == 0 and continues:  # the whole batch is the held key's
            held.append(batch)
            continue
        done = held + ([batch.slice(0, last)] if last else [])
        if done:
            yield _runs(pa.Table.from_batches(done).combine_chunks(), keys, column, time_field)
        held = [batch.slice(last)]
    if held:
        yield _runs(pa.Table.from_batches(held).combine_chunks(), keys, column, time_field)


def _runs(table, keys, column: str | None, time_field: str):
    starts = run_starts([table.column(k).chunk(0) for k in keys], table.num_rows)
    if column is None:
        return table, None, starts
    from .inputs import times

    def key_of(row):
        return tuple(table.column(k)[int(row)].as_py() for k in keys)

    return table, times(table.column(time_field).chunk(0), column, key_of)[0], starts
