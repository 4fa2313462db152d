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
streaming state       :meth:`make`, :meth:`update`, :meth:`words` /
                      :meth:`from_words` (events waiting in the state)
column functions      :meth:`update` (``<family>_sketch_agg``),
and SQL               :meth:`merge` (``<family>_union_agg``),
                      :meth:`answers` (``<family>_sketch_estimate`` /
                      ``_bounds``), :meth:`union_answers` (the same of an
                      array of sketches: their union; default: merge,
                      then answer), :attr:`one_step` (``sliding_count``...)
====================  =====================================================

Drivers never ask which family a spec is: adding a family is one module
with a :class:`Spec` subclass (and its tests); the class registers itself
(:data:`FAMILIES`), and every entry point, the SQL registration included,
serves it.

Data between the Arrow columns and the synopses is a :class:`Data`: the
rows where every input of the spec is present (nulls skipped) and the
input arrays, already checked by :mod:`udaf.inputs`.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field, fields
from typing import ClassVar

import numpy as np

from ehist.blobs import Blobs
from ehist.serialization import FAMILIES as FAMILY_IDS, family_of

from ._convert import Window
from .capabilities import NativeAnswer, NativePerRow
from .exact import as_key_sum_overflow

__all__ = ["Spec", "Data", "Answers", "Estimator", "FAMILIES", "load_families", "extension_modules", "spec_for_bytes",
           "sketch_family", "read_spec", "read_integers", "key_now"]

#: Every family's spec classes by family name (``'eh'``, ``'sliding_hll'``...),
#: filled in as the family modules are imported.
FAMILIES: dict[str, list[type]] = {}
_BY_SKETCH: dict[str, type] = {}


@dataclass
class Data:
    """A batch's inputs for one spec: ``present`` marks the rows whose
    inputs are all non-null (the rows the synopsis summarizes); each array
    in ``arrays`` has one entry per present row."""

    present: np.ndarray
    arrays: dict = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "Data":
        """The data of some present rows (positions among the present)."""
        return Data(np.ones(len(rows), dtype=bool), {k: v[rows] for k, v in self.arrays.items()})


@dataclass(frozen=True)
class Estimator:
    """A family's own scalar function over stored sketches, besides
    ``<family>_sketch_estimate``: ``<family>_sketch_<name>(sketch, <args>,
    now, window, unit)``.  ``args``: (name, is a column) pairs, after the
    sketch column; ``return_type``: Spark DDL.  The spec class answers it
    with the classmethod ``estimate_<name>(sketches, arrays, nows, window)``
    (decoded sketches or None, the Arrow arrays of the column arguments and
    the Python values of the literal ones by name, query times or None,
    the window or None) returning an Arrow array."""

    args: tuple
    return_type: str
    doc: str


@dataclass
class Answers:
    """One answer per key (or row): ``estimate`` (float64) and, for the
    families with deterministic bounds, ``lower`` and ``upper`` (int64)."""

    estimate: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None


class Spec:
    """Base of the specs.  A subclass is a frozen dataclass with a
    ``window`` field and sets the class attributes below; the defaults of
    the methods are what a family needs when it has nothing faster."""

    #: Family name, the prefix of its SQL names (``eh_sketch_agg``...).
    family: ClassVar[str] = ""
    #: The synopsis class (``ExponentialHistogram``...).
    sketch_type: ClassVar[type]
    #: Name of the one-step aggregate column function (``sliding_count``).
    one_step: ClassVar[str] = ""
    #: Whether answers carry deterministic ``lower`` / ``upper`` bounds.
    bounded: ClassVar[bool] = False
    #: Spark type of a per-row frame answer (:func:`udaf.sliding_over`).
    frame_type: ClassVar[str] = "bigint"
    #: Input role -> accepted Spark types (simpleString), checked on the driver.
    accepts: ClassVar[dict] = {}
    #: Parameters other than the inputs and ``window`` (sketch parameters).
    #: Subclasses list them in the order SQL takes them.
    params: ClassVar[tuple] = ()
    #: Input field -> its argument name in the column functions and SQL
    #: (``Sum.column`` is ``value``: ``sliding_sum(ts, value, window)``).
    arg_names: ClassVar[dict] = {}
    #: Columns of :meth:`words` (8-byte words per row waiting in streaming
    #: state): the state schema is laid out from it before any row is read.
    words_per_row: ClassVar[int] = 0
    #: Spark type (DDL) of the answer per key (:func:`udaf.aggregate`, the
    #: streaming state): a double estimate, or a family's own (a list).
    answer_type: ClassVar[str] = "double"
    #: Whether the spec answers each row over its frame (:meth:`frames`,
    #: :func:`udaf.sliding_over`); heavy hitters' lists have no per-row form.
    has_frames: ClassVar[bool] = True
    #: Scalar functions of stored sketches besides the estimate: name ->
    #: :class:`Estimator` (``ecm_sketch_frequency``...), each answered by a
    #: classmethod ``estimate_<name>(blobs, arguments, nows, window)`` given
    #: the rows' stored bytes (None for null; :meth:`decoded` gives objects).
    estimators: ClassVar[dict] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.family and not cls.__name__.startswith("_"):
            FAMILIES.setdefault(cls.family, []).append(cls)
            _BY_SKETCH.setdefault(cls.sketch_type.__name__, cls)

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
        """The spec's :class:`Data` from ``n`` rows of Arrow arrays by role
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
    @classmethod
    def sketch_answer(cls, sketch, now, window) -> tuple:
        """(estimate, lower, upper) of one synopsis, as
        ``<family>_sketch_estimate`` / ``_bounds`` give it (the family's,
        no spec parameter): a bounded family's bounds and their midpoint,
        else the estimate and None, None; ``now`` None: the synopsis'
        newest."""
        if cls.bounded:
            lower, upper = sketch.bounds(now, window)
            return lower * 0.5 + upper * 0.5, lower, upper
        return float(sketch.estimate(now, window)), None, None

    def answer(self, sketch, now, window) -> tuple:
        """(estimate, lower, upper) of one key's synopsis, as the drivers
        answer a key (:func:`udaf.aggregate`, the streaming state, the
        one-step functions): :meth:`sketch_answer` unless the answer reads
        the spec's own parameters (a quantile's ``q``, heavy hitters'
        ``phi``)."""
        return type(self).sketch_answer(sketch, now, window)

    @classmethod
    def decoded(cls, blobs: list) -> list:
        """The sketch objects of stored bytes (None for null)."""
        return [None if b is None else cls.sketch_type.from_bytes(b) for b in blobs]

    @classmethod
    def answers(cls, blobs: list, nows, window) -> Answers:
        """Answers of stored sketches (bytes, None for null), one per row,
        as of ``nows[i]`` (None: each sketch's newest)."""
        est = np.full(len(blobs), np.nan)
        lower = np.zeros(len(blobs), dtype=np.int64) if cls.bounded else None
        upper = np.zeros(len(blobs), dtype=np.int64) if cls.bounded else None
        for i, b in enumerate(blobs):
            if b is None:
                continue
            e, lo, up = cls.sketch_answer(cls.sketch_type.from_bytes(b), None if nows is None else int(nows[i]),
                                          window)
            est[i] = e
            if cls.bounded:
                lower[i], upper[i] = lo, up
        return Answers(est, lower, upper)

    @classmethod
    def union_answers(cls, blobs: list, starts: np.ndarray, nows, window) -> Answers:
        """Answers of unions of stored sketches: group ``i`` is
        ``blobs[starts[i]:starts[i + 1]]`` (bytes, none null, no group
        empty), answered as of ``nows[i]`` (None: the group's newest) as
        :meth:`answers` answers the group's merge.  Default: merge each
        group, then :meth:`answers`; a family answers without merging where
        it can (exponential histograms: the sums of the parts' bounds)."""
        return cls.answers(cls.merge_groups(blobs, starts), nows, window)

    def key_answers(self, blobs: list, nows, window) -> Answers:
        """Each key's :meth:`answer` from its merged sketch (bytes), for
        many keys at once: :meth:`answers` unless the answer reads the
        spec's own parameters."""
        return type(self).answers(blobs, nows, window)

    @classmethod
    def answer_spark_type(cls):
        """:attr:`answer_type` as a pyspark DataType."""
        return _ddl_type(cls.answer_type)

    @classmethod
    def answer_array(cls, values):
        """Answers per key (or row) as an Arrow array of :attr:`answer_type`."""
        import pyarrow as pa

        if cls.answer_type == "double":
            return pa.array(np.asarray(values, dtype=np.float64), type=pa.float64())
        from pyspark.sql.pandas.types import to_arrow_type

        return pa.array(values, type=to_arrow_type(cls.answer_spark_type()))

    @classmethod
    def answer_value(cls, value):
        """One answer as the Python value a Row holds."""
        return float(value) if cls.answer_type == "double" else value

    @classmethod
    def merge(cls, blobs: list) -> bytes | None:
        """The union of a group's sketches (non-null bytes), merged in byte
        order so float sums come out the same on every run: the sketch
        type's ``merge_all`` where it has one, else ``merge`` in turn."""
        blobs = sorted(bytes(b) for b in blobs)
        if not blobs:
            return None
        sketches = [cls.sketch_type.from_bytes(b) for b in blobs]
        with as_key_sum_overflow():  # a merged window total past int64
            if hasattr(cls.sketch_type, "merge_all"):  # one union of all (the columnar unions give its bytes)
                return cls.sketch_type.merge_all(sketches).to_bytes()
            out = sketches[0]
            for s in sketches[1:]:
                out = out.merge(s)
        return out.to_bytes()

    @staticmethod
    def merge_order(blobs: list, starts) -> list:
        """The sketches (bytes) of every group in the order :meth:`merge`
        takes them: sorted by their bytes within the group, so float sums
        and tie-breaks come out the same on every run."""
        starts = np.asarray(starts, dtype=np.int64)
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))
        return [b for _, b in sorted(zip(group.tolist(), (bytes(b) for b in blobs)))]

    @classmethod
    def merge_groups(cls, blobs: list, starts: np.ndarray) -> list:
        """The union of every group of sketches (bytes, none null, no group
        empty): group ``i`` is ``blobs[starts[i]:starts[i + 1]]``; each as
        :meth:`merge` gives it.  Default: :meth:`merge` per group; a family
        unites all groups in one pass where it can (exponential histograms:
        :func:`ehist.columnar_union.union_column`)."""
        ends = np.append(starts[1:], len(blobs)).tolist()
        return [cls.merge(blobs[a:z]) for a, z in zip(np.asarray(starts).tolist(), ends)]

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
    def words(self, data: Data) -> np.ndarray:
        """The inputs of every row as 8-byte words (rows x k int64), so
        events can wait in streaming state; absent inputs encoded so that
        :meth:`from_words` marks the row not present."""
        return np.zeros((data.present.size, 0), dtype=np.int64)

    def from_words(self, words: np.ndarray) -> Data:
        """The inverse of :meth:`words`."""
        return Data(np.ones(words.shape[0], dtype=bool))

    # ----------------------------------------------------------- metadata
    @classmethod
    def sql_signature(cls) -> list:
        """SQL arguments of ``<family>_sketch_agg`` after the time column:
        input roles, ``window``, then :attr:`params`."""
        return list(cls.accepts) + ["window"] + list(cls.params)


@functools.cache
def _sketch_args(cls) -> tuple:
    """The fields of spec class ``cls`` its sketch type's constructor takes
    (besides ``window``), by name."""
    own = {f.name for f in fields(cls)}
    return tuple(p for p in inspect.signature(cls.sketch_type).parameters if p != "window" and p in own)


def _ddl_type(ddl: str):
    """A pyspark DataType from the DDL of a struct, an array or a scalar,
    without a session (pyspark's own parser needs a running JVM).

    >>> _ddl_type("array<struct<item:bigint,estimate:double>>").simpleString()
    'array<struct<item:bigint,estimate:double>>'
    """
    from pyspark.sql import types as T

    ddl = ddl.strip()
    scalars = {"double": T.DoubleType(), "bigint": T.LongType(), "string": T.StringType(),
               "binary": T.BinaryType(), "int": T.IntegerType(), "boolean": T.BooleanType()}
    if ddl in scalars:
        return scalars[ddl]
    if ddl.startswith("array<") and ddl.endswith(">"):
        return T.ArrayType(_ddl_type(ddl[6:-1]))
    if ddl.startswith("struct<") and ddl.endswith(">"):
        fields, depth, start, body = [], 0, 0, ddl[7:-1]
        for i, ch in enumerate(body + ","):
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "," and depth == 0:
                name, _, kind = body[start:i].partition(":")
                fields.append(T.StructField(name.strip(), _ddl_type(kind)))
                start = i + 1
        return T.StructType(fields)
    raise ValueError(f"unsupported answer type {ddl!r}")


#: The entry-point group of families defined in other packages: each entry
#: names a module whose import registers its spec classes.
ENTRY_POINTS = "ehist.families"
_LOADED: set = set()  # modules load_families imported in this process
_UNIMPORTABLE: dict = {}  # module -> why it could not be imported here


def load_families(modules=()) -> dict:
    """Import every family module of the package (``udaf/*_spec.py``), of
    the ``ehist.families`` entry points of installed packages, and
    ``modules`` (names), each of which registers its classes; return
    :data:`FAMILIES`.  A new family is found by its file name or its
    entry point, with no list to edit.  A module that cannot be imported
    here (a Spark worker without the package) is noted, not raised: its
    sketches are then bytes of no family, and :func:`sketch_family` says
    why."""
    import importlib
    import pkgutil

    package = __name__.rpartition(".")[0]
    if package not in _LOADED:
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if module.name.endswith("_spec"):
                importlib.import_module(f"{package}.{module.name}")
        from importlib.metadata import entry_points

        modules = [e.value.partition(":")[0] for e in entry_points(group=ENTRY_POINTS)] + list(modules)
        _LOADED.add(package)
    for name in modules:
        if name in _LOADED:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:  # tried again next time: the module may be shipped later (addPyFile)
            _UNIMPORTABLE[name] = str(exc)
            continue
        _LOADED.add(name)
        _UNIMPORTABLE.pop(name, None)
    return FAMILIES


def extension_modules() -> list:
    """The modules of the spec classes registered from outside the package
    (families of other packages, or defined in a test): a driver hands
    them to its Spark tasks, whose workers import them
    (:func:`load_families`) before reading sketch bytes they have no
    class for yet."""
    package = __name__.rpartition(".")[0]
    return sorted({c.__module__ for cs in FAMILIES.values() for c in cs
                   if c.__module__.partition(".")[0] != package})


def spec_for_bytes(blob) -> type | None:
    """The spec class of a serialized synopsis (by its preamble), or None."""
    name = family_of(blob)
    return None if name is None else _BY_SKETCH.get(name)


def sketch_family(blobs: list, column: str, caller: str, modules=()) -> type | None:
    """The one family of a column's sketches (bytes, None for null; None
    when every one is null); bytes of no sketch, or sketches of two
    families, are an error naming the column.  ``modules``: family modules
    to import first (:func:`extension_modules` of the driver)."""
    from .inputs import bad_value

    load_families(modules)  # a fresh Python worker has imported no family module yet
    blobs = Blobs.of(blobs)
    ids = np.unique(blobs.families()[blobs.present]).tolist()
    names = {v: k for k, v in FAMILY_IDS.items()}
    found = [names.get(i) for i in ids]
    classes = {name: _BY_SKETCH.get(name) if name is not None else None for name in found}
    if None in classes.values():
        missing = "".join(f"; family module {m} could not be imported here: {why}"
                          for m, why in sorted(_UNIMPORTABLE.items()))
        raise bad_value(column, _Shown("<bytes of no ehist sketch>"), f"{caller} needs binary sketches "
                        f"(from *_sketch_agg, sketch_table or union_table){missing}")
    if len({c.family for c in classes.values()}) > 1:
        kinds = " and ".join(sorted(classes))
        raise bad_value(column, _Shown(f"<{kinds} sketches>"), f"{caller} unites one family's sketches per column")
    return next(iter(classes.values()), None)


class _Shown(str):
    """A value shown as is in a message (not quoted)."""

    def __repr__(self):
        return str(self)


def read_spec(spec, table, key_of=None) -> Data:
    """A spec's :class:`Data` from an Arrow table's columns (one chunk
    each, or none)."""
    return spec.read({role: table.column(c).chunk(0) if table.column(c).num_chunks else table.column(c)
                      for role, c in spec.inputs().items()}, table.num_rows, key_of)


def read_integers(spec, columns: dict, key_of=None) -> Data:
    """The :class:`Data` of a spec reading one non-negative integral
    column (role ``column``) as ``value`` (``Sum``; nulls skipped, a
    negative value an error naming it and its key)."""
    from .inputs import integers

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

