"""The synopsis protocol: what every entry point asks a synopsis family.

A spec (``Count(window='1 hour')``, ``Distinct('dst', window='1 hour')``)
says what to compute; its class says how, once, for every driver:

====================  =====================================================
driver                asks the spec
====================  =====================================================
driver checks         :meth:`Spec.inputs`, :attr:`Spec.accepts` (Spark types
                      per input), parameters (checked when the spec is made)
:func:`aggregate`     :meth:`native_answer` (Spark's own aggregates, rows at
                      hand: a :class:`~udaf.capabilities.NativeAnswer` or
                      none), or :meth:`read`, :meth:`partials` (phase one,
                      many keys at once), :meth:`union` (phase two),
                      :meth:`exact` (rows shuffled), :meth:`answer` of a
                      merged sketch
:func:`sliding_over`  :meth:`native_per_row` (Spark's own window functions:
                      a :class:`~udaf.capabilities.NativePerRow` or none),
                      or :meth:`frames` (every row's frame at once;
                      :attr:`has_frames`)
streaming state       :meth:`make`, :meth:`update`, :meth:`state_words`
                      (how events wait in the state)
column functions      :meth:`update` (``<family>_sketch_agg``),
and SQL               :meth:`merge` (``<family>_union_agg``),
                      :meth:`answers` (``<family>_sketch_estimate`` /
                      ``_bounds``), :meth:`union_answers` (the same of an
                      array of sketches: their union; default: merge,
                      then answer), :attr:`one_step` (``sliding_count``...)
====================  =====================================================

Two roles, two modules: what the column functions need of stored bytes
(the sketch type, merges, answers of sketches or arrays of them, a
family's own estimators: all classmethods) is
:class:`~udaf.family.Family`; the query (parameters, inputs and their
checks, reading rows, building partials, exact and per-row answers, the
streaming words) is :class:`Spec`, which derives from it.  Spark's own
plans are objects a spec has or has not (:mod:`udaf.capabilities`).

Drivers never ask which family a spec is: adding a family is one module
with a :class:`Spec` subclass (and its tests); the class registers itself
(:data:`~udaf.family.FAMILIES`), and every entry point, the SQL
registration included, serves it.

Data between the Arrow columns and the synopses is a :class:`~udaf.data.Data`: the
rows where every input of the spec is present (nulls skipped) and the
input arrays, already checked by :mod:`udaf.inputs`.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import fields
from typing import ClassVar

import numpy as np

from ._convert import Window
from .capabilities import NativeAnswer, NativePerRow
from .data import Data, StateWords, Word
# the byte-level role, and its names as this module always exported them
from .family import (FAMILIES, Answers, Estimator, Family, extension_modules, load_families, sketch_family,
                     spec_for_bytes)
from .inputs import integers

__all__ = ["Spec", "Family", "Data", "StateWords", "Word", "Answers", "Estimator", "FAMILIES", "load_families",
           "extension_modules", "spec_for_bytes", "sketch_family", "read_spec", "read_integers", "key_now"]


class _FieldsOtherThanInputs:
    """:attr:`Spec.params` unless a spec lists them: its dataclass fields
    that are neither an input role nor ``window``."""

    def __get__(self, obj, cls):
        try:
            declared = fields(cls)
        except TypeError:  # not a dataclass (the base)
            return ()
        return tuple(f.name for f in declared if f.name not in cls.accepts and f.name != "window")


class Spec(Family):
    """Base of the specs: the query role of a family, on its byte-level
    role (:class:`~udaf.family.Family`: the sketch type, merges, answers of
    stored bytes).  A subclass is a frozen dataclass with a ``window``
    field; it names its family, synopsis and one-step function as class
    keywords (``class Sum(Spec, family="eh", sketch=ExponentialHistogram,
    one_step="sliding_sum")``; ``frame_type`` too), so its body holds its
    parameters, and sets the other class attributes below where their
    defaults do not fit; the defaults of the methods are what a family
    needs when it has nothing faster."""

    #: Name of the one-step aggregate column function (``sliding_count``).
    one_step: ClassVar[str] = ""
    #: Spark type of a per-row frame answer (:func:`udaf.sliding_over`).
    frame_type: ClassVar[str] = "bigint"
    #: Input role -> accepted Spark types (simpleString), checked on the driver.
    accepts: ClassVar[dict] = {}
    #: Parameters other than the inputs and ``window`` (sketch parameters),
    #: in the order SQL takes them: by default the dataclass fields that
    #: are neither an input role nor ``window``, in declaration order.
    params: ClassVar[tuple] = _FieldsOtherThanInputs()
    #: Input field -> its argument name in the column functions and SQL
    #: (``Sum.column`` is ``value``: ``sliding_sum(ts, value, window)``).
    arg_names: ClassVar[dict] = {}
    #: Whether the spec answers each row over its frame (:meth:`frames`,
    #: :func:`udaf.sliding_over`); heavy hitters' lists have no per-row form.
    has_frames: ClassVar[bool] = True

    def __init_subclass__(cls, one_step: str | None = None, frame_type: str | None = None, **kwargs):
        # the class keywords of the query role beside the family's (Family.__init_subclass__):
        # class Sum(_Histogram, one_step="sliding_sum")
        if one_step is not None:
            cls.one_step = one_step
        if frame_type is not None:
            cls.frame_type = frame_type
        super().__init_subclass__(**kwargs)
        if "words" in vars(cls) or "from_words" in vars(cls):  # the protocol before state_words
            warnings.warn(f"{cls.__name__} defines words/from_words/words_per_row, which are deprecated: declare "
                          "state_words() instead (udaf.data.Word per input array)", DeprecationWarning, stacklevel=2)
            cls.state_words = lambda self: _MethodWords(self)

    def __post_init__(self):
        Window(self.window)
        self.check()

    # -------------------------------------------------------- declaration
    def check(self) -> None:
        """Check the parameters (ValueError naming the allowed range): by
        default those the synopsis takes, by making one (:meth:`make`); a
        family adds the checks of its spec's own parameters."""
        self.make(1)

    def inputs(self) -> dict:
        """Input role -> column name, for the roles the spec reads."""
        return {role: getattr(self, role) for role in self.accepts if getattr(self, role, None) is not None}

    @property
    def who(self) -> str:
        """The spec's name in messages (``Sum``)."""
        return type(self).__name__

    def with_window(self, window) -> "Spec":
        """The same spec with another window (a resolved int)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["window"] = window
        return type(self)(**values)

    # ------------------------------------------------------------ reading
    def read(self, columns: dict, n: int, key_of=None) -> Data:
        """The spec's :class:`~udaf.data.Data` from ``n`` rows of Arrow arrays by role
        (checked by :mod:`udaf.inputs`; ``key_of(row)`` names a bad row's
        key)."""
        raise NotImplementedError

    # ----------------------------------------------------------- building
    def make(self, window: int):
        """An empty synopsis for ``window`` (in the time column's units):
        :attr:`sketch_type` given the spec's fields named as its
        constructor's parameters (``Sum.eps``, ``LpNorm.p``...)."""
        return self.sketch_type(window=window, **{name: getattr(self, name) for name in _sketch_args(type(self))})

    def update(self, sketch, t: np.ndarray, data: Data):
        """Insert the present rows (times ``t[data.present]``, sorted)."""
        raise NotImplementedError

    def partials(self, t, starts, data: Data, window: int, now=None) -> tuple[list, Answers | None]:
        """Serialized synopses of many keys at once: rows ``starts[i]`` to
        ``starts[i + 1]`` (sorted by time) are key ``i``'s.  Also the
        keys' bounds as of ``now`` (default: each key's newest present
        row) for bounded families, else None.  Default: one synopsis per
        key."""
        present = data.present
        pos = np.concatenate([[0], np.cumsum(present)])
        ends = np.append(starts[1:], t.size)
        blobs = []
        for a, b in zip(starts.tolist(), ends.tolist()):
            sketch = self.make(window)
            rows = np.arange(pos[a], pos[b])
            blobs.append(self.update(sketch, t[a:b][present[a:b]], data.take(rows)).to_bytes())
        return blobs, None

    def reduction(self, schema, key_text: str):
        """How Spark's own aggregation may reduce the rows before any enters
        Python: a tuple ``(grouping, aggregates, spec)``, or None (the
        default: the rows go to Python as they are).  ``schema``: the
        rows' ``StructType`` (the input columns and ``__ts``); ``key_text``:
        SQL of the key as messages print it, for a ``raise_error``
        (:func:`udaf.sql_text.overflow_error`: a sum past int64).

        ``grouping``: the columns besides the key that a reduced row is
        unique on (``"__ts"``: the time in int64 units, or an input
        column); ``aggregates``: output column -> SQL aggregate over the
        rows (input columns backquoted, ``__ts``); ``spec``: the spec that
        builds, from the reduced rows, a synopsis byte-identical to this
        one's from the rows (tests/test_reduction.py).  Specs with the same
        grouping share one aggregation, so an output column means the same
        for every spec naming it."""
        return None

    def min_rows_per_partial(self) -> int:
        """Rows per key and partition from which a partial synopsis is
        smaller than the rows it summarizes (``aggregate``'s ``auto``
        strategy builds partials from there): 64 unless a family says
        otherwise (measured: benchmarks/bench_udaf.py)."""
        return 64

    # ---------------------------------------------------------- answering
    def answer(self, sketch, now, window) -> tuple:
        """(estimate, lower, upper) of one key's synopsis, as the drivers
        answer a key (:func:`udaf.aggregate`, the streaming state, the
        one-step functions): :meth:`sketch_answer` unless the answer reads
        the spec's own parameters (a quantile's ``q``, heavy hitters'
        ``phi``)."""
        return type(self).sketch_answer(sketch, now, window)

    def key_answers(self, blobs: list, nows, window) -> Answers:
        """Each key's :meth:`answer` from its merged sketch (bytes), for
        many keys at once: :meth:`answers` unless the answer reads the
        spec's own parameters."""
        return type(self).answers(blobs, nows, window)

    def union(self, blobs: list, starts: np.ndarray, at=None) -> Answers:
        """Answers of the union of each key's partials (``blobs[starts[i]:
        starts[i + 1]]``) as of ``at`` (default: the key's newest).
        Default: merge and answer."""
        ends = np.append(starts[1:], len(blobs)).tolist()
        est, lower, upper = [], [], []
        for a, b in zip(starts.tolist(), ends):
            merged = self.merge([x for x in blobs[a:b] if x is not None])
            sketch = self.sketch_type.from_bytes(merged)
            e, lo, up = (0.0, 0, 0) if sketch.newest is None else self.answer(sketch, at, None)
            est.append(e)
            lower.append(lo)
            upper.append(up)
        return Answers(np.array(est, dtype=np.float64), *(
            (np.array(lower, dtype=np.int64), np.array(upper, dtype=np.int64)) if self.bounded else (None, None)))

    def exact(self, t, run, keys: int, data: Data, window: int, at=None) -> np.ndarray:
        """Exact answers per key from the rows (sorted by key; ``run`` each
        row's key number), over each key's window as of ``at`` (default:
        its newest present row)."""
        raise NotImplementedError

    def frames(self, lo, hi, data: Data, window: int):
        """Each row's answer over its frame ``[lo, hi)`` (row positions,
        one key's rows or several keys' runs, sorted by time)."""
        raise NotImplementedError

    # ------------------------------------------------------------- native
    def native_answer(self, schema) -> NativeAnswer | None:
        """Spark's own plan for this spec's exact answer per key over rows
        of ``schema`` (:class:`~udaf.capabilities.NativeAnswer`), for the
        native plan of :func:`udaf.aggregate`, or None (the default: no such
        plan for these rows; ``auto`` then builds synopses)."""
        return None

    def native_per_row(self, schema) -> NativePerRow | None:
        """Spark's own plan for this spec's exact answer per row over rows
        of ``schema`` (:class:`~udaf.capabilities.NativePerRow`), for the
        native plan of :func:`udaf.sliding_over`, or None (the default: the
        rows go through :meth:`frames`)."""
        return None

    # ---------------------------------------------------------- streaming
    def state_words(self) -> StateWords:
        """The 8-byte words each row waits as in streaming state, one
        :class:`~udaf.data.Word` per input array (none by default: rows
        without inputs). The state schema is laid out from its width before
        any row is read."""
        return StateWords()

    def words(self, data: Data) -> np.ndarray:
        """Deprecated: ``state_words().encode(data)``."""
        warnings.warn("Spec.words is deprecated: use state_words().encode", DeprecationWarning, stacklevel=2)
        return self.state_words().encode(data)

    def from_words(self, words: np.ndarray) -> Data:
        """Deprecated: ``state_words().decode(words)``."""
        warnings.warn("Spec.from_words is deprecated: use state_words().decode", DeprecationWarning, stacklevel=2)
        return self.state_words().decode(words)

    @property
    def words_per_row(self) -> int:
        """Deprecated: ``state_words().width``."""
        return self.state_words().width

    # ----------------------------------------------------------- metadata
    @classmethod
    def sql_signature(cls) -> list:
        """SQL arguments of ``<family>_sketch_agg`` after the time column:
        input roles, ``window``, then :attr:`params`."""
        return list(cls.accepts) + ["window"] + list(cls.params)


class _MethodWords:
    """The state words of a spec written to the protocol before
    :meth:`Spec.state_words`: its own ``words``, ``from_words`` and
    ``words_per_row``."""

    def __init__(self, spec):
        self.spec = spec

    @property
    def width(self) -> int:
        return self.spec.words_per_row

    def encode(self, data):
        return type(self.spec).words(self.spec, data)

    def decode(self, words):
        return type(self.spec).from_words(self.spec, words)


@functools.cache
def _sketch_args(cls) -> tuple:
    """The fields of spec class ``cls`` its sketch type's constructor takes
    (besides ``window``), by name."""
    own = {f.name for f in fields(cls)}
    return tuple(p for p in inspect.signature(cls.sketch_type).parameters if p != "window" and p in own)


def read_spec(spec, table, key_of=None) -> Data:
    """A spec's :class:`~udaf.data.Data` from an Arrow table's columns (one chunk
    each, or none)."""
    return spec.read({role: table.column(c).chunk(0) if table.column(c).num_chunks else table.column(c)
                      for role, c in spec.inputs().items()}, table.num_rows, key_of)


def read_integers(spec, columns: dict, key_of=None) -> Data:
    """The :class:`~udaf.data.Data` of a spec reading one non-negative integral
    column (role ``column``) as ``value`` (``Sum``; nulls skipped, a
    negative value an error naming it and its key)."""

    present, values = integers(columns["column"], spec.column, spec.who, key_of)
    return Data(present, {"value": values[present]})


def key_now(t: np.ndarray, present: np.ndarray, run: np.ndarray, keys: int, at=None) -> np.ndarray:
    """Each key's query time: ``at``, or its newest present row (what the
    synopsis of those rows calls its newest)."""
    if at is not None:
        return np.full(keys, at, dtype=np.int64)
    now = np.full(keys, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(now, run[present], t[present])
    return now

