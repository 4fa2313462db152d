"""SQL text of the checks and aggregates the family specs hand to Spark's
own plans (:mod:`udaf.native`), written once for every family.

Plain strings, no pyspark: a spec module imports this leaf, never the
plan builders.  Every message is :func:`udaf.inputs.bad_value`'s, raised
by Spark's ``raise_error`` (``InvalidInputError: column bytes holds -5
(key 'a'): Sum needs non-negative integers``).
"""

from __future__ import annotations

__all__ = ["quote", "string", "raise_bad_value", "overflow_error", "KeyText", "checked_sum", "nonnegative", "Frame",
           "frame_sum", "ROWS_PER_TIME", "sum_per_time"]

#: Spark's reduction of rows to one per timestamp for a count: the column
#: ``__rows`` (:meth:`udaf.spec.Spec.reduction`).
ROWS_PER_TIME = {"__rows": "count(1)"}


def quote(name: str) -> str:
    """A column name as SQL text (backquoted).

    >>> quote("bytes"), quote("a`b")
    ('`bytes`', '`a``b`')
    """
    return "`" + name.replace("`", "``") + "`"


def string(text: str) -> str:
    """A SQL string literal.

    >>> print(string("it's"))
    'it\\'s'
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def raise_bad_value(column: str, value: str, need: str, key: str) -> str:
    """SQL text of Spark's ``raise_error`` with :func:`udaf.inputs.bad_value`'s
    message (``value`` and ``key``: SQL text; ``value`` ``NULL`` is written
    into the message's text, one expression fewer for Spark to analyze).

    >>> print(raise_bad_value("ts", "NULL", "timestamps must not be null", "`k`"))
    raise_error(concat('InvalidInputError: column ts holds null (key ', `k`, '): timestamps must not be null'))
    """
    if value == "NULL":
        return (f"raise_error(concat({string(f'InvalidInputError: column {column} holds null (key ')}, "
                f"{key}, {string(f'): {need}')}))")
    return (f"raise_error(concat({string(f'InvalidInputError: column {column} holds ')}, "
            f"coalesce(CAST({value} AS STRING), 'null'), ' (key ', {key}, {string(f'): {need}')}))")


def overflow_error(key_text: str) -> str:
    """SQL raising the Python passes' error for a sum past int64
    (:func:`udaf.exact.sum_past_int64`),
    key named (``key_text``: SQL of the key as messages print it)."""
    return f"raise_error(concat('SumOverflowError: the sum of a key\\'s values exceeds int64 (key ', {key_text}, ')'))"


class KeyText(str):
    """SQL of the key as messages print it (:func:`key_text`), which also
    knows whether the session's ``sum`` stops at int64 by itself (ANSI
    mode, Spark 4's default): :func:`checked_sum` then leaves the check
    to it, as the hand-written query does.

    >>> KeyText("`k`", ansi=True).ansi, KeyText("`k`").ansi
    (True, False)
    """

    def __new__(cls, text: str, ansi: bool = False):
        out = super().__new__(cls, text)
        out.ansi = ansi
        return out


def checked_sum(v: str, key_text: str, over: str = "") -> str:
    """SQL of the aggregate sum of the bigint ``v`` (nulls skipped, 0 when
    there is no value), exact or refused past int64, in either ANSI mode.
    Without ANSI mode Spark's ``sum`` wraps around silently (2**62 three
    times came out as -2**62), so the sum is ``try_sum`` of ``v`` or 0
    (null then means overflow; it stays null across partial aggregation:
    an overflow in one partition or only in the merge, tested), refused
    with :func:`overflow_error`, key named.  With ANSI mode (``key_text`` a
    :class:`KeyText` that says so) it is Spark's ``sum``, which stops with
    its own ``ARITHMETIC_OVERFLOW``, without the key: ``try_sum``'s
    larger partial buffer made the one-shot count + sum 1.05-1.08x the
    plain sum's time at 100k keys (10M rows, 9 alternating rounds; 1.21x
    the native query in a full report run, against 0.99x before).
    ``over``: `` OVER (...)`` for the sum over a window."""
    if getattr(key_text, "ansi", False):  # the hand-written query's sum
        return f"coalesce(sum({v}){over}, 0L)"
    return f"coalesce(try_sum(coalesce({v}, 0L)){over}, {overflow_error(key_text)})"


def nonnegative(column: str, v: str, who: str, key_text: str) -> str:
    """SQL of the integral value ``v`` (SQL of ``column``) as a bigint, a
    negative one refused with the project's message (``who`` needs...)."""
    need = f"{who} needs non-negative integers"
    return f"CASE WHEN {v} < 0 THEN {raise_bad_value(column, v, need, key_text)} ELSE CAST({v} AS BIGINT) END"


class Frame(str):
    """A window specification of :attr:`~udaf.capabilities.NativePerRow.frame`
    (SQL text: ``count(1) OVER {upto}`` works), which, called with an
    aggregate's SQL, returns the name of a column holding that aggregate
    over it, computed once in the window operator however often the
    answer's SQL names it.

    Spark does not merge equal window expressions: ``try_sum(v) OVER w``
    written twice in a ``CASE`` (tested, then returned) is aggregated
    twice: per-row sums ran at 0.85x the hand-written query's speed (1M
    rows, interleaved runs), 0.92-0.96x with each aggregate named once.

    >>> seen = {}
    >>> upto = Frame("(PARTITION BY k ORDER BY t)", seen)
    >>> upto("count(1)"), upto("count(1)"), upto("min(v)")
    ('`__ehist_w0`', '`__ehist_w0`', '`__ehist_w1`')
    >>> seen["count(1) OVER (PARTITION BY k ORDER BY t)"]
    '`__ehist_w0`'
    """

    def __new__(cls, text: str, seen: dict, prefix: str = "__ehist_w"):
        frame = super().__new__(cls, text)
        frame.seen = seen  # aggregate OVER frame -> its column, shared by a call's frames
        frame.prefix = prefix
        return frame

    def __call__(self, aggregate: str) -> str:
        return self.seen.setdefault(f"{aggregate} OVER {self}", f"`{self.prefix}{len(self.seen)}`")


def frame_sum(column: str, v: str, who: str, upto: Frame, before: Frame, key_text: str, schema, nulls: str = "") -> str:
    """SQL ``CASE`` of a per-row frame's sum of non-negative integers
    ``v`` (SQL of ``column``) for :attr:`~udaf.capabilities.NativePerRow.frame`:
    the running total up to the row less the one a window earlier.

    A negative value is refused through the smallest value up to the row:
    the row holding it and every later row of its partition raise, so no
    filter after the window can hide a sum it made wrong.  That check is
    what the sums cost against the unchecked query (1M rows, 25
    alternating rounds, medians: ``try_sum`` alone 1.00x, with the
    ``min`` 0.94-0.98x, with ``bit_or`` instead 0.95x; checking each value
    in a projection under the window 0.95x, inside the running total's
    input 0.85-0.88x; the value column replaced in place by its checked
    self under the window, no column more through the sort, 0.94-0.96x
    against 0.94-0.96x for the ``min`` in 15-25 rounds side by side, and
    0.91x against 0.91x in 15 more, so not taken: it costs a projection
    more to build).  The benchmark's ``exact_sums(checked=True)`` writes
    these checks by hand: this plan ties it.  A running total beyond int64
    (``try_sum`` null) is the Python path's SumOverflowError, key named,
    raised by ``coalesce``; a plain ``sum``, which under ANSI mode raises
    Spark's ``ARITHMETIC_OVERFLOW`` without the key, would save 1-3%
    (31 rounds at 100k rows).  The rows before the frame are in the upto
    frame, whose total fits, so theirs is a plain sum.  Each aggregate is
    named once, so the answers need one projection (naming the total
    twice, tested and then returned, took two: 0.977x against 0.993x for
    a nullable time).  ``nulls``: leading ``WHEN ... THEN NULL`` branches.
    ``schema``: the rows' (a bigint column is not cast: Spark would
    shuffle the cast as a column of its own, 8 bytes a row more)."""
    b = v if schema[column].dataType.simpleString() == "bigint" else f"CAST({v} AS BIGINT)"
    total, low = upto(f"try_sum({b})"), upto(f"min({v})")
    need = f"{who} needs non-negative integers"
    return (f"CASE WHEN {low} < 0 THEN {raise_bad_value(column, low, need, key_text)} {nulls}"
            f"ELSE coalesce({total}, {overflow_error(key_text)}) - coalesce({before(f'sum({b})')}, 0L) END")


def sum_per_time(column: str, key_text: str) -> str:
    """SQL of a timestamp's reduced value column for sums
    (:meth:`udaf.spec.Spec.reduction`): the sum of its non-null values
    (null when it has none), or its smallest value when that is negative,
    so that a bad value keeps its message; a sum past int64 is refused (a
    plain sum wraps without ANSI mode)."""
    v = quote(column)
    return (f"CASE WHEN min({v}) < 0 THEN min({v}) WHEN count({v}) = 0 THEN NULL "
            f"ELSE coalesce(try_sum({v}), {overflow_error(key_text)}) END")
