"""The byte-level role of a synopsis family: what the generated column
functions need of it, and the registry of families.

A family (:class:`Family`) names its synopsis class and says, from stored
bytes alone (no query parameter), how its sketches are merged
(:meth:`Family.merge`, :meth:`Family.merge_groups`: ``<family>_union_agg``,
:func:`udaf.union_table`), answered (:meth:`Family.answers`,
:meth:`Family.union_answers`: ``<family>_sketch_estimate`` / ``_bounds``,
one sketch or an array of them per row) and what else it answers
(:attr:`Family.estimators`).  Every method is a classmethod: a sketch
column carries no spec.  The query role (parameters, inputs, rows,
partials, exact and per-row answers) is :class:`udaf.spec.Spec`, which
derives from it: a family module defines one class of both.

Classes register themselves (:data:`FAMILIES`) when defined;
:func:`load_families` imports every family module (the package's
``*_spec.py``, the ``ehist.families`` entry points of installed packages),
and :func:`spec_for_bytes` / :func:`sketch_family` find a family from a
sketch's preamble.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ehist.blobs import Blobs
from ehist.segments import gather, ranges
from ehist.serialization import FAMILIES as FAMILY_IDS, PREAMBLE_BYTES, VERSION_AT, family_of

from .exact import as_key_sum_overflow
from .inputs import bad_value

__all__ = ["Family", "Answers", "Estimator", "FAMILIES", "ENTRY_POINTS", "load_families", "extension_modules",
           "spec_for_bytes", "sketch_family", "one_parameter_set"]

#: Every family's classes by family name (``'eh'``, ``'sliding_hll'``...),
#: filled in as the family modules are imported.
FAMILIES: dict[str, list[type]] = {}
_BY_SKETCH: dict[str, type] = {}


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


class Family:
    """Base of the families' byte-level role (every method a classmethod
    of stored bytes).  A family class declares who it is in its class
    statement, apart from its parameters: ``family`` (its SQL prefix) and
    ``sketch`` (the synopsis class) as class keywords, as in
    ``class Distinct(HashedItems, family="sliding_hll",
    sketch=SlidingHyperLogLog)``; or, as before, the class attributes
    ``family`` and ``sketch_type`` below.  The other attributes below have
    defaults."""

    #: Family name, the prefix of its SQL names (``eh_sketch_agg``...).
    family: ClassVar[str] = ""
    #: The synopsis class (``ExponentialHistogram``...).
    sketch_type: ClassVar[type]
    #: Whether answers carry deterministic ``lower`` / ``upper`` bounds.
    bounded: ClassVar[bool] = False
    #: Whether the answer of a union is the sums of its parts' bounds as of
    #: the query time (:meth:`~udaf.spec.Spec.union`: exponential
    #: histograms): ``aggregate(strategy="two_phase")`` with a ``now`` and
    #: no sketches asked for then sends each partial's bounds, not its
    #: sketch, and Spark sums them.
    additive: ClassVar[bool] = False
    #: Spark type (DDL) of the answer per key (:func:`udaf.aggregate`, the
    #: streaming state): a double estimate, or a family's own (a list).
    answer_type: ClassVar[str] = "double"
    #: Scalar functions of stored sketches besides the estimate: name ->
    #: :class:`Estimator` (``ecm_sketch_frequency``...), each answered by a
    #: classmethod ``estimate_<name>(blobs, arguments, nows, window)`` given
    #: the rows' stored bytes (None for null; :meth:`decoded` gives objects).
    estimators: ClassVar[dict] = {}

    def __init_subclass__(cls, family: str | None = None, sketch: type | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if family is not None:
            cls.family = family
        if sketch is not None:
            cls.sketch_type = sketch
        if cls.family and not cls.__name__.startswith("_"):
            FAMILIES.setdefault(cls.family, []).append(cls)
            _BY_SKETCH.setdefault(cls.sketch_type.__name__, cls)

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
    def column_answers(cls, blobs, nows, window, column, layout) -> Answers:
        """:meth:`answers` of a batch through a family's columnar codec
        ``column`` (``column.from_bytes(sketches).estimates(nows,
        window)``, one call for every present sketch) when the sketches
        share one set of parameters (``layout``'s, see
        :func:`one_parameter_set`); else one sketch at a time
        (:meth:`Family.answers`)."""
        blobs = Blobs.of(blobs)
        rows = np.flatnonzero(blobs.present)
        raw = blobs.take(rows)
        if not len(raw) or not one_parameter_set(raw, layout):
            return Family.answers.__func__(cls, blobs, nows, window)
        out = np.full(len(blobs), np.nan)
        out[rows] = column.from_bytes(raw).estimates(None if nows is None else np.asarray(nows)[rows], window)
        return Answers(out)

    @classmethod
    def union_answers(cls, blobs: list, starts: np.ndarray, nows, window) -> Answers:
        """Answers of unions of stored sketches: group ``i`` is
        ``blobs[starts[i]:starts[i + 1]]`` (bytes, none null, no group
        empty), answered as of ``nows[i]`` (None: the group's newest) as
        :meth:`answers` answers the group's merge.  Default: merge each
        group, then :meth:`answers`; a family answers without merging where
        it can (exponential histograms: the sums of the parts' bounds)."""
        return cls.answers(cls.merge_groups(blobs, starts), nows, window)

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

        arrow_type = to_arrow_type(cls.answer_spark_type())
        if hasattr(values, "to_arrow"):  # answers held flat (heavy hitters' lists): no Python object per item
            return values.to_arrow(arrow_type)
        return pa.array(values, type=arrow_type)

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
    def merge_order(blobs, starts) -> Blobs:
        """The sketches of every group in the order :meth:`merge` takes
        them: sorted by their bytes within the group, so float sums and
        tie-breaks come out the same on every run.  One Arrow sort of the
        whole batch (bytes compare as Python's do: byte by byte, a prefix
        first), read in place: a :class:`~ehist.blobs.Blobs` over the same
        buffer."""
        import pyarrow as pa
        import pyarrow.compute as pc

        blobs = Blobs.of(blobs)
        starts = np.asarray(starts, dtype=np.int64)
        group = np.repeat(np.arange(starts.size), np.diff(np.append(starts, len(blobs))))
        offsets = np.concatenate([[0], np.cumsum(blobs.lengths)]).astype(np.int64)
        data = blobs.buf if np.array_equal(blobs.starts, offsets[:-1]) else \
            gather(blobs.buf, blobs.starts, blobs.starts + blobs.lengths)
        column = pa.Array.from_buffers(pa.large_binary(), len(blobs), [None, pa.py_buffer(offsets),
                                                                       pa.py_buffer(np.ascontiguousarray(data))])
        order = pc.sort_indices(pa.table({"g": group, "b": column}), sort_keys=[("g", "ascending"),
                                                                                ("b", "ascending")])
        return blobs.take(order.to_numpy())

    @staticmethod
    def kept_alone(blobs: Blobs, starts, version: int, unite) -> list:
        """Each group's union where a group of one sketch in the current
        format (``version``) keeps its bytes: :meth:`merge` leaves one
        sketch as it is, and one the family's decoder took (the caller has
        checked every sketch) is what it would write.  The other groups are
        ``unite(rows, group_starts)``: their sketches' positions in
        ``blobs``, where each group starts among those; every group goes
        to ``unite`` when none is alone."""
        starts = np.asarray(starts, dtype=np.int64)
        sizes = np.diff(np.append(starts, len(blobs)))
        lone = (sizes == 1) & (blobs.buf[blobs.starts[starts] + VERSION_AT] == version)
        if not lone.any():
            return list(unite(np.arange(len(blobs)), starts))
        out = [None] * starts.size
        rest = np.flatnonzero(~lone)
        if rest.size:
            rows = ranges(starts[rest], starts[rest] + sizes[rest])
            for g, b in zip(rest.tolist(), unite(rows, np.concatenate([[0], np.cumsum(sizes[rest])[:-1]]))):
                out[g] = b
        alone = np.flatnonzero(lone)
        for g, b in zip(alone.tolist(), blobs.take(starts[alone]).tolist()):  # their bytes, one copy pass
            out[g] = b
        return out

    @classmethod
    def merge_groups(cls, blobs: list, starts: np.ndarray) -> list:
        """The union of every group of sketches (bytes, none null, no group
        empty): group ``i`` is ``blobs[starts[i]:starts[i + 1]]``; each as
        :meth:`merge` gives it.  Default: :meth:`merge` per group; a family
        unites all groups in one pass where it can (exponential histograms:
        :func:`ehist.columnar_union.union_column`)."""
        ends = np.append(starts[1:], len(blobs)).tolist()
        return [cls.merge(blobs[a:z]) for a, z in zip(np.asarray(starts).tolist(), ends)]


def one_parameter_set(raw, layout) -> bool:
    """Whether sketch bytes (none null) share one set of parameters: the
    bytes ``layout`` (:class:`ehist.serialization.Layout`) puts after the
    preamble.  A family's columnar paths take such a batch; a batch of
    several sets goes one sketch at a time, where the class refuses what
    it cannot unite."""
    return len(Blobs.of(raw).groups(PREAMBLE_BYTES, layout.head.size - PREAMBLE_BYTES)) == 1


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
