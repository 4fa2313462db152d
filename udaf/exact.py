"""Exact windowed answers per key, many keys in one numpy pass.

When every row of a key is shuffled to one place anyway (the ``shuffle``
strategy of :func:`udaf.aggregate`), a synopsis saves nothing: the count,
sum, distinct count and L_p norm over the key's window are computed
exactly, for all keys of an Arrow batch at once (``mapInArrow`` after
``repartition`` and a sort by key and time in the JVM, the driver
:class:`udaf.exact_answers.ExactAnswers`), instead of one grouped-aggregate
UDF call per key and spec.  Exact answers lie within
every bound the synopses promise; ``<name>_lower`` and ``<name>_upper``
both equal them.

The engines need only numpy: ``run`` numbers each row's key (rows sorted
by key), ``now`` is each key's query time.

Examples
--------
>>> import numpy as np
>>> run = np.array([0, 0, 0, 1, 1])
>>> t = np.array([1, 5, 9, 2, 3])
>>> inside = in_window(t, run, now=np.array([9, 3]), window=5)
>>> per_key_sums(np.ones(5, dtype=np.int64), inside, run, 2).tolist()
[2, 2]
>>> per_key_distinct(np.array([7, 8, 7, 1, 1]), np.ones(5, bool), run, 2).tolist()
[2, 1]
"""

from __future__ import annotations

import contextlib

import numpy as np

from ehist.errors import SumOverflowError

__all__ = ["in_window", "per_key_sums", "per_key_distinct", "per_key_lp_norms"]


def in_window(t: np.ndarray, run: np.ndarray, now: np.ndarray, window: int) -> np.ndarray:
    """Rows with ``now[run] - window < t <= now[run]``."""
    at = now[run]
    with np.errstate(over="ignore"):
        start = at - np.int64(window)
    start = np.where(start > at, np.iinfo(np.int64).min, start)  # clipped below INT64_MIN
    return (t > start) & (t <= at)


def per_key_sums(values: np.ndarray, mask: np.ndarray, run: np.ndarray, keys: int) -> np.ndarray:
    """Exact int64 sum of the non-negative ``values`` over the ``mask``ed
    rows of each key; :func:`sum_past_int64` (as the per-row pass's) where
    one passes int64, which int64 addition would wrap around silently.

    >>> per_key_sums(np.array([2**62, 2**62 - 1, 5]), np.ones(3, bool), np.array([0, 0, 1]), 2).tolist()
    [9223372036854775807, 5]
    >>> per_key_sums(np.array([2**62, 2**62]), np.ones(2, bool), np.array([0, 0]), 1)
    Traceback (most recent call last):
    ...
    ehist.errors.SumOverflowError: the sum of a key's values exceeds int64
    """
    out = np.zeros(keys, dtype=np.int64)
    v, r = values[mask].astype(np.int64), run[mask]
    np.add.at(out, r, v)
    refuse_sums_past_int64(v, r, keys)
    return out


def sum_past_int64() -> SumOverflowError:
    """The error of a key's sum past int64, the same from every Spark entry
    point: the Python passes raise it, the core's (a batch or a merge past
    int64, :class:`~ehist.errors.SumOverflowError` with its own message)
    is raised again as it, and the native plans' ``raise_error`` says it
    with the key (:func:`udaf.sql_text.overflow_error`).  An
    :class:`OverflowError` and a :class:`ValueError`.

    >>> raise sum_past_int64()
    Traceback (most recent call last):
    ...
    ehist.errors.SumOverflowError: the sum of a key's values exceeds int64
    """
    return SumOverflowError("the sum of a key's values exceeds int64")


@contextlib.contextmanager
def as_key_sum_overflow():
    """Raise the core's :class:`~ehist.errors.SumOverflowError` (a batch,
    a merge or a union whose window total passes int64, with the core's
    message) again as :func:`sum_past_int64`, the message every Spark entry
    point gives for that mistake.

    >>> from ehist import ExponentialHistogram
    >>> with as_key_sum_overflow():
    ...     ExponentialHistogram(10).update([1, 2], [2**62, 2**62])
    Traceback (most recent call last):
    ...
    ehist.errors.SumOverflowError: the sum of a key's values exceeds int64
    """
    try:
        yield
    except SumOverflowError as exc:
        raise sum_past_int64() from exc


def may_pass_int64(values: np.ndarray) -> bool:
    """Whether some key's sum of the non-negative ``values`` might pass
    int64: their float total reaches 2**62 (one pass, no allocation; the
    screen before :func:`refuse_sums_past_int64`'s per-key sums).

    >>> may_pass_int64(np.array([2**61, 2**61])), may_pass_int64(np.array([5, 7]))
    (True, False)
    """
    return bool(values.size) and float(values.sum(dtype=np.float64)) >= 2.0**62


def refuse_sums_past_int64(values: np.ndarray, run: np.ndarray, keys: int) -> None:
    """:func:`sum_past_int64` (the per-row pass's, the native plans' without the
    key) where a key's sum of the non-negative int64 ``values`` (``run``:
    each value's key number) passes int64.

    A float sum of n terms is within a relative n * 2**-53 of the exact
    one, so a key past 2**63 has a float sum past 2**62 (n < 2**52): only
    those keys are summed again, in Python's integers.

    >>> refuse_sums_past_int64(np.array([2**62, 2**62 - 1, 2**62]), np.array([0, 0, 1]), 2)
    >>> refuse_sums_past_int64(np.array([2**62, 2**62, 1]), np.array([0, 0, 1]), 2)
    Traceback (most recent call last):
    ...
    ehist.errors.SumOverflowError: the sum of a key's values exceeds int64
    """
    if not may_pass_int64(values):
        return
    approx = np.bincount(run, weights=values.astype(np.float64), minlength=keys)
    for k in np.flatnonzero(approx >= 2.0**62).tolist():
        if sum(values[run == k].tolist()) > np.iinfo(np.int64).max:
            raise sum_past_int64()


def per_key_distinct(codes: np.ndarray, mask: np.ndarray, run: np.ndarray, keys: int) -> np.ndarray:
    """Distinct ``codes`` (non-negative integer labels) among the
    ``mask``ed rows of each key."""
    pairs = np.unique(np.stack([run[mask], codes[mask]]), axis=1)
    return np.bincount(pairs[0], minlength=keys).astype(np.int64)


def per_key_lp_norms(p: float, codes: np.ndarray, values: np.ndarray, mask: np.ndarray, run: np.ndarray,
                     keys: int) -> np.ndarray:
    """Exact L_p norm of each key's vector ``code -> sum(value)`` over the
    ``mask``ed rows."""
    pair, inverse = np.unique(np.stack([run[mask], codes[mask]]), axis=1, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=values[mask].astype(np.float64), minlength=pair.shape[1])
    powered = np.bincount(pair[0], weights=np.abs(sums) ** p, minlength=keys)
    return powered ** (1.0 / p)
