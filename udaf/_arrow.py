"""Arrow helpers: runs of equal keys in columns sorted by key, and binary
columns read as :class:`~ehist.blobs.Blobs` without copying."""

from __future__ import annotations

import numpy as np

from ehist.blobs import Blobs

from .inputs import times

__all__ = ["run_starts", "same_row", "complete_runs", "blobs_of", "list_blobs_of"]


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

    def key_of(row):
        return tuple(table.column(k)[int(row)].as_py() for k in keys)

    return table, times(table.column(time_field).chunk(0), column, key_of)[0], starts


def blobs_of(array) -> Blobs:
    """The sketches of an Arrow binary (or large binary, or all-null)
    array as :class:`~ehist.blobs.Blobs` over its own buffers: no copy, no
    Python object per row.

    >>> import pyarrow as pa
    >>> blobs_of(pa.array([b"ab", None, b"c"]).slice(1)).tolist()
    [None, b'c']
    """
    import pyarrow as pa

    n = len(array)
    if pa.types.is_null(array.type) or n == array.null_count:
        return Blobs(np.zeros(0, dtype=np.uint8), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                     np.zeros(n, dtype=bool))
    wide = pa.types.is_large_binary(array.type)
    if not (wide or pa.types.is_binary(array.type)):
        raise TypeError(f"expected a binary array, got {array.type}")
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32, count=n + 1,
                            offset=array.offset * (8 if wide else 4)).astype(np.int64)
    buf = np.zeros(0, dtype=np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    present = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else np.ones(n, dtype=bool)
    lengths = np.where(present, np.diff(offsets), 0)
    return Blobs(buf, offsets[:-1], lengths, present)


def list_blobs_of(array) -> tuple[Blobs, np.ndarray]:
    """``(blobs, starts)`` of an Arrow array of arrays of binary (a
    ``collect_list`` of a sketch column): every row's non-null sketches,
    row ``i``'s at ``blobs[starts[i]:starts[i + 1]]`` (a null row has
    none).

    >>> import pyarrow as pa
    >>> b, s = list_blobs_of(pa.array([[b"a", None], None, [b"b", b"c"]]))
    >>> b.tolist(), s.tolist()
    ([b'a', b'b', b'c'], [0, 1, 1])
    """
    import pyarrow.compute as pc

    n = len(array)
    sizes = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = blobs_of(array.flatten())  # the rows' values, null rows left out
    within = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=within[1:])
    kept = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(values.present, out=kept[1:])
    return values.take(values.present), kept[within[:-1]]
