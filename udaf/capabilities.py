"""What a spec may have besides the protocol every spec keeps: Spark's own
plans for its exact answers.

A spec that has one returns it from :meth:`udaf.spec.Spec.native_answer`
or :meth:`udaf.spec.Spec.native_per_row` (None: it has none, for these
rows); the drivers run the object, never asking which family it is nor
comparing the spec's methods with the base class.  Every piece is SQL
text (one parse in the JVM; a Column costs a py4j call per operation):
``columns`` maps each input role to its quoted column, ``key_text`` is SQL
of the key as messages print it, and bad values are raised with
:func:`udaf.sql_text.raise_bad_value`, the message every entry point gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["NativeAnswer", "NativePerRow"]


@dataclass(frozen=True)
class NativeAnswer:
    """A spec's exact answer per key from Spark's aggregates (the native
    plan of :func:`udaf.aggregate`, :mod:`udaf.native`), in one of three
    forms:

    ``aggregate(columns, inside, key_text)``
        SQL of a numeric aggregate over the rows where ``inside`` (SQL
        boolean: in the key's window, inputs present): ``count``, a checked
        ``sum`` (:func:`udaf.sql_text.checked_sum`), ``count(DISTINCT)``...
    ``top(columns, key_text)``
        ``(item, weight, phi)`` for an answer listing each key's top items
        (heavy hitters): SQL of the item and of its weight per row, and the
        share of the key's total an item must reach.
    ``items(columns, key_text)``
        ``(item, weight, final)`` for an answer aggregated from each item's
        total (L_p norms): SQL of the item, of its weight per row (null
        where the item is), and of an aggregate over ``__n``, each item's
        summed weight in the window.

    ``checks(columns, key_text)``: SQL expressions that raise the spec's
    message for a bad value of a row, as its aggregate does inside the
    window: the plan counts them over every row it reads, as the Python
    strategies check every row (none by default).
    """

    aggregate: Callable | None = None
    top: Callable | None = None
    items: Callable | None = None
    checks: Callable | None = None

    def __post_init__(self):
        if sum(f is not None for f in (self.aggregate, self.top, self.items)) != 1:
            raise ValueError("a NativeAnswer has exactly one of aggregate, top and items")

    def checks_of(self, columns: dict, key_text: str) -> list:
        """:attr:`checks`' expressions (none without it)."""
        return [] if self.checks is None else list(self.checks(columns, key_text))


@dataclass(frozen=True)
class NativePerRow:
    """A spec's exact answer per row from Spark's window functions (the
    native plan of :func:`udaf.sliding_over`), in one of two forms:

    ``frame(columns, upto, before, key_text, schema)``
        SQL of the row's answer from two window frames over the row's key
        (and ``by``'s columns) ordered by time: ``upto`` the rows up to the
        row, ``before`` those a window earlier
        (:class:`udaf.sql_text.Frame`: ``upto("count(1)")`` names that
        aggregate over the frame, computed once however often it is used;
        both frames only grow, so Spark computes them in one pass).
        ``schema``: the rows' ``StructType`` (a never-null column needs no
        null handling).  ``by(columns)``: SQL of columns partitioning the
        frames further than the key (``Frequencies``: each row's own item).
    ``rows(df, keys, t, name, window, key_text, hidden)``
        A whole plan, for an answer that is no difference of two frames (L_p
        norms: each value entering its item and leaving it a window later):
        the rows of ``df`` with the answer as column ``name``, from Spark
        alone (``t``: SQL of the checked time in int64 units; ``hidden``: a
        prefix no column of ``df`` starts with, for the plan's columns).
    """

    frame: Callable | None = None
    by: Callable | None = None
    rows: Callable | None = None

    def __post_init__(self):
        if (self.frame is None) == (self.rows is None) or (self.by is not None and self.frame is None):
            raise ValueError("a NativePerRow has a frame (and optionally by) or rows, not both")
