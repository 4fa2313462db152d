"""Proof of extension: a new synopsis family, defined in this file alone.

``SlidingMax`` is the largest value of a sliding window (the largest
packet, the slowest probe of the last hour), kept exactly: the (time,
value) pairs that no newer pair equals or exceeds, so values fall as
times rise, and a window's largest value is that of its oldest pair.
Everything the project asks of a family is here, and nothing else of the
project was edited for it:

* the core class (:class:`ehist.synopsis.Synopsis`: repr, equality,
  pickling, merge checks come from the base);
* its byte layout, declared once (:class:`ehist.serialization.Layout`),
  with a family id of its own (:func:`ehist.serialization.register_family`);
* its spec (:class:`udaf.spec.Spec`), which registers itself: the column
  functions (``sliding_max_sketch_agg``, ``sliding_max_union_agg``,
  ``sliding_max_sketch_estimate``, the one-step ``sliding_max``) and their
  SQL forms are generated from it;
* its tests: against brute force, golden bytes, altered bytes, and every
  entry point (``aggregate``'s strategies, ``sketch_table``,
  ``union_table``, functions and SQL, ``sliding_over``, streaming state).

On a cluster a family's module must be importable by the Python workers,
as any code a job runs: installed with its package, or shipped with
``spark.sparkContext.addPyFile`` (what the ``shipped`` fixture does with
this file).  A package makes its families known to every session, the
workers' included, with an entry point in the group ``ehist.families``
naming the module (``udaf.spec.load_families``).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ehist.errors import CorruptSketchError, LateDataError
from ehist.serialization import Layout, check_newest, register_family, times_before
from ehist.synopsis import Synopsis
from ehist.validation import check_window, coerce_timestamps, coerce_values, resolve_query, sort_batch

from .conftest import examples, through_state

# ------------------------------------------------------------------ layout
register_family("SlidingMax", 200)
_HAS_NEWEST = 1
#: version 1; flag bit 0: has newest; parameters: the window (int64).
LAYOUT = Layout("SlidingMax", version=1, read=(1,), flags=_HAS_NEWEST, parameters="q", what="window")
_INT64_MIN = -(2**63)


# -------------------------------------------------------------- core class
class SlidingMax(Synopsis):
    """Largest non-negative integer of the window ``(now - w, now]``
    (0 for an empty window), exact.

    >>> m = SlidingMax(10).update([1, 2, 5, 9], [7, 3, 4, 1])
    >>> m.estimate(), m.estimate(now=12), m.estimate(window=2)
    (7.0, 4.0, 1.0)
    """

    __slots__ = ("_window", "_t", "_v", "_newest")
    _names = ("windows",)
    _state = ("_newest", "_t", "_v")  # what copy copies and equality compares

    def __init__(self, window: int):
        self._window = check_window(window)
        self._t = np.zeros(0, dtype=np.int64)
        self._v = np.zeros(0, dtype=np.int64)
        self._newest = None

    window = property(lambda self: self._window)

    def _params(self):
        return (self._window,)

    def _repr_params(self):
        return [f"window={self._window}"]

    def _repr_state(self):
        return [f"pairs={self._t.size}", f"newest={self._newest}"]

    @classmethod
    def _examples(cls):
        a = cls(50).update(np.arange(0, 120, 3), np.arange(40) * 7 % 31)
        b = cls(50).update(np.arange(1, 120, 4), np.arange(30) * 5 % 23)
        return [cls(50), a, cls.merge_all([a, b])]

    def _keep(self, t, v, newest: int) -> "SlidingMax":
        """The canonical state of pairs ``(t, v)``: those in the window of
        ``newest``, in (time, value) order, each above every later one."""
        with np.errstate(over="ignore"):
            live = t > max(newest - self._window, _INT64_MIN)
        t, v = t[live], v[live]
        order = np.lexsort((v, t))
        t, v = t[order], v[order]
        later = np.append(np.maximum.accumulate(v[::-1])[::-1][1:], -1)  # the largest after each pair
        keep = v > later
        self._t, self._v, self._newest = t[keep], v[keep], newest
        return self

    def update(self, timestamps, values) -> "SlidingMax":
        """Insert ``(timestamp, value)`` pairs (non-negative integers); the
        batch is checked whole first; LateDataError for a time before
        :attr:`newest`."""
        ts = coerce_timestamps(timestamps)
        v = coerce_values(values, ts.size)
        ts, v = sort_batch(ts, v, self._newest)
        if not ts.size:
            return self
        newest = int(ts[-1]) if self._newest is None else max(self._newest, int(ts[-1]))
        return self._keep(np.concatenate([self._t, ts]), np.concatenate([self._v, v.astype(np.int64)]), newest)

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        now, window = resolve_query(now, window, self._newest, self._window)
        if now is None:
            return 0.0
        first = int(np.searchsorted(self._t, max(now - window, _INT64_MIN), side="right"))
        return float(self._v[first]) if first < self._v.size else 0.0

    @classmethod
    def _union(cls, sketches):
        newest = [s._newest for s in sketches if s._newest is not None]
        if not newest:
            return sketches[0].copy()
        return cls(sketches[0]._window)._keep(np.concatenate([s._t for s in sketches]),
                                             np.concatenate([s._v for s in sketches]), max(newest))

    def to_bytes(self) -> bytes:
        """Preamble, window, then (with newest) newest, the pair count,
        each pair's age ``newest - t`` and value (varints), CRC."""
        w = LAYOUT.writer(_HAS_NEWEST if self._newest is not None else 0, self._window)
        if self._newest is None:
            return w.finish()
        w.struct("q", self._newest).varints([self._t.size])
        w.varints((np.int64(self._newest) - self._t).view(np.uint64)).varints(self._v.view(np.uint64))
        return w.finish()

    @classmethod
    def from_bytes(cls, data) -> "SlidingMax":
        """Decode :meth:`to_bytes`; CorruptSketchError on anything else."""
        r, flags, out = LAYOUT.open(data, cls)
        if not flags & _HAS_NEWEST:
            r.expect_end()
            return out
        newest = check_newest(r.struct("q", "newest timestamp")[0], "SlidingMax")
        n = r.varint("pair count")
        if 2 * n > r.remaining:
            raise CorruptSketchError(f"SlidingMax: expected at most {r.remaining // 2} pairs, found {n}")
        ages, values = r.varints(n, "pair ages"), r.varints(n, "pair values")
        r.expect_end()
        if n and (int(ages.max()) >= out._window or int(values.max()) >= 2**63):
            raise CorruptSketchError("SlidingMax: expected pairs within the window and values within int64")
        t, v = times_before(newest, ages, "SlidingMax", "pair times"), values.astype(np.int64)
        if (np.diff(t) < 0).any() or (np.diff(v) >= 0).any():
            raise CorruptSketchError("SlidingMax: expected pairs in time order, each above every later one")
        out._t, out._v, out._newest = t, v, int(newest)
        return out


# -------------------------------------------------------------------- spec
from udaf.exact import in_window  # noqa: E402 - the core above needs no pyspark
from udaf.inputs import INTEGRAL  # noqa: E402
from udaf.data import StateWords, Word  # noqa: E402
from udaf.spec import Spec, key_now, read_integers  # noqa: E402


@dataclass(frozen=True)
class Largest(Spec, family="sliding_max", sketch=SlidingMax, one_step="sliding_max"):
    """Largest value of a non-negative integral column over the window
    (exact; nulls skipped, 0 for a window without a value).

    >>> Largest("bytes", window="1 hour")
    Largest(column='bytes', window='1 hour')
    """

    column: str
    window: object
    accepts = {"column": INTEGRAL}
    arg_names = {"column": "value"}

    def read(self, columns, n, key_of=None):
        return read_integers(self, columns, key_of)

    def update(self, sketch, t, data):
        return sketch.update(t, data.arrays["value"])

    def exact(self, t, run, keys, data, window, at=None):
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        values = np.zeros(t.size, dtype=np.int64)
        values[present] = data.arrays["value"]
        out = np.zeros(keys, dtype=np.int64)
        np.maximum.at(out, run[inside], values[inside])
        return out.astype(np.float64)

    def frames(self, lo, hi, data, window):
        pos = np.flatnonzero(data.present)
        return range_max(data.arrays["value"], np.searchsorted(pos, lo), np.searchsorted(pos, hi))

    def state_words(self):
        return StateWords((Word("value", "int64", absent=-1),))  # -1: no value


def range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(values[lo[i]:hi[i]])`` of every range (0 when empty): a
    sparse table of maxima over spans of 2^k, each range the larger of
    two spans, ``log2(n)`` numpy passes.

    >>> range_max(np.array([3, 1, 4, 1, 5]), np.array([0, 1, 2, 3]), np.array([2, 4, 2, 5])).tolist()
    [3, 4, 0, 5]
    """
    out = np.zeros(lo.size, dtype=np.int64)
    table, span = [np.asarray(values, dtype=np.int64)], 1
    while 2 * span <= table[0].size:
        table.append(np.maximum(table[-1][:-span], table[-1][span:]))
        span *= 2
    length = hi - lo
    some = length > 0
    level = np.zeros(lo.size, dtype=np.int64)
    level[some] = np.frexp(length[some])[1] - 1  # floor(log2(length))
    for k in np.unique(level[some]).tolist():
        rows = np.flatnonzero(some & (level == k))
        out[rows] = np.maximum(table[k][lo[rows]], table[k][hi[rows] - (1 << k)])
    return out


# ------------------------------------------------------- the core, checked
def brute(ts, vs, now, window):
    inside = (ts > now - window) & (ts <= now)
    return float(vs[inside].max()) if inside.any() else 0.0


@st.composite
def streams(draw):
    n = draw(st.integers(0, 60))
    ts = np.sort(np.array(draw(st.lists(st.integers(0, 400), min_size=n, max_size=n)), dtype=np.int64))
    vs = np.array(draw(st.lists(st.integers(0, 2**62), min_size=n, max_size=n)), dtype=np.int64)
    return ts, vs


@settings(max_examples=examples(150), deadline=None)
@given(streams(), st.integers(1, 120), st.integers(0, 3), st.data())
def test_answers_are_exact_for_any_batches_merges_and_queries(stream, window, parts, data):
    ts, vs = stream
    cuts = sorted(data.draw(st.lists(st.integers(0, ts.size), max_size=3)))
    whole = SlidingMax(window)
    for a, b in zip([0] + cuts, cuts + [ts.size]):
        whole.update(ts[a:b], vs[a:b])
    site = np.arange(ts.size) % (parts + 1)  # the stream split over sites, then united
    united = SlidingMax.merge_all([SlidingMax(window).update(ts[site == s], vs[site == s]) for s in range(parts + 1)])
    assert united == whole == SlidingMax.from_bytes(whole.to_bytes())
    if ts.size:
        for now in (int(ts[-1]), int(ts[-1]) + data.draw(st.integers(0, 200))):
            for w in {window, data.draw(st.integers(1, window))}:
                assert whole.estimate(now, w) == brute(ts, vs, now, w)
    else:
        assert whole.estimate() == 0.0


def test_the_registry_contract_holds():
    """The checks tests/test_contract.py runs over every registered class."""
    from tests import test_contract

    assert "SlidingMax" in test_contract.REGISTERED
    test_contract.test_examples_round_trip_pickle_copy_and_repr(SlidingMax)
    test_contract.test_merge_all_checks_and_unions(SlidingMax)


def test_the_base_gives_repr_pickle_and_merge_checks():
    import pickle

    from ehist.errors import IncompatibleSketchError

    a = SlidingMax(50).update([1, 2, 3], [5, 9, 2])
    assert repr(a) == "SlidingMax(window=50, pairs=2, newest=3)" and repr(SlidingMax(5)) == "SlidingMax(window=5, empty)"
    assert pickle.loads(pickle.dumps(a)) == a and a.copy() == a
    with pytest.raises(IncompatibleSketchError, match="different windows: 50 and 60"):
        a.merge(SlidingMax(60))
    with pytest.raises(LateDataError):
        a.update([2], [1])
    with pytest.raises(ValueError, match="non-negative"):
        SlidingMax(5).update([1], [-1])


#: Bytes of ``SlidingMax(100).update([10, 20, 30, 40], [8, 30, 12, 11])`` as
#: written by format version 1: any change to the format shows here.
GOLDEN = "4548c80101006400000000000000280000000000000003140a001e0c0bace8221b"


def test_golden_bytes_decode_and_encode_the_same():
    m = SlidingMax.from_bytes(bytes.fromhex(GOLDEN))
    assert m == SlidingMax(100).update([10, 20, 30, 40], [8, 30, 12, 11])
    assert (m.estimate(), m.estimate(window=15), m.estimate(now=135)) == (30.0, 12.0, 11.0)
    assert m.to_bytes().hex() == GOLDEN


def test_altered_or_truncated_bytes_are_refused():
    good = bytes.fromhex(GOLDEN)
    for i in range(len(good)):
        for flip in (1, 0x80):
            bad = bytearray(good)
            bad[i] ^= flip
            with pytest.raises(CorruptSketchError):
                SlidingMax.from_bytes(bytes(bad))
        with pytest.raises(CorruptSketchError):
            SlidingMax.from_bytes(good[:i])


# ------------------------------------------------ every entry point of Spark
@pytest.fixture(scope="module")
def shipped(spark, tmp_path_factory):
    """This module on the Python workers' path, as a user ships a family's
    module to a cluster (``addPyFile``)."""
    path = tmp_path_factory.mktemp("extension") / "extension.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tests/__init__.py", "")
        z.write(__file__, "tests/test_extension.py")
        z.write(__file__.replace("test_extension.py", "conftest.py"), "tests/conftest.py")
    spark.sparkContext.addPyFile(str(path))
    return spark


@pytest.fixture(scope="module")
def events(shipped):
    import pandas as pd

    rng = np.random.default_rng(5)
    n = 3000
    pdf = pd.DataFrame({"site": rng.integers(0, 3, n), "k": rng.integers(0, 7, n).astype(str),
                        "ts": rng.permutation(n) + 1000,
                        "v": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 10**6, n)), dtype="Int64")})
    return pdf, shipped.createDataFrame(pdf).repartition(2)


def exact(pdf, window, now=None):
    """Each key's largest value in the window ending at ``now`` (default:
    its newest row with a value)."""
    out = {}
    for k, g in pdf.groupby("k"):
        g = g[g.v.notna()]
        at = g.ts.max() if now is None else now
        out[k] = brute(g.ts.to_numpy(), g.v.to_numpy(dtype=np.int64), at, window)
    return out


@pytest.mark.parametrize("strategy", ["auto", "two_phase", "shuffle"])
def test_aggregate_answers_every_key_exactly(events, strategy):
    from udaf import aggregate

    pdf, sdf = events
    got = {r.k: r.m for r in aggregate(sdf, "k", "ts", strategy=strategy, m=Largest("v", window=400)).collect()}
    assert got == exact(pdf, 400)
    at = {r.k: r.m for r in aggregate(sdf, "k", "ts", now=3900, strategy=strategy,
                                      m=Largest("v", window=400)).collect()}
    assert at == exact(pdf, 400, now=3900)
    with pytest.raises(ValueError, match="no native Spark plan for m"):
        aggregate(sdf, "k", "ts", strategy="native", m=Largest("v", window=400))


def test_stored_tables_united_and_answered_in_python_and_sql(events):
    from pyspark.sql import functions as F

    from udaf import functions as U
    from udaf import sketch_table, union_table

    pdf, sdf = events
    spark = sdf.sparkSession
    per_site = sketch_table(sdf, ["site", "k"], "ts", m=Largest("v", window=400))
    # per site, then across sites: union_table, the union aggregate, the array of sketches
    united = union_table(per_site, "k").select("k", U.sliding_max_sketch_estimate("m").alias("m"))
    assert {r.k: r.m for r in united.collect()} == exact(pdf, 400)
    rolled = per_site.groupBy("k").agg(U.sliding_max_union_agg("m").alias("m")).join(
        per_site.groupBy("k").agg(F.collect_list("m").alias("parts")), "k")
    rows = rolled.select("k", U.sliding_max_sketch_estimate("m", window=100).alias("m"),
                         U.sliding_max_sketch_estimate("parts", window=100).alias("parts")).collect()
    narrow = exact(pdf, 100, now=None)
    assert {r.k: r.m for r in rows} == {r.k: r.parts for r in rows} == narrow
    built = sdf.groupBy("k").agg(U.sliding_max_sketch_agg("ts", "v", 400).alias("m"),
                                 U.sliding_max("ts", "v", 400).alias("one_step"))
    assert {r.k: r.one_step for r in built.collect()} == exact(pdf, 400)
    names = U.register(spark)
    assert {"sliding_max_sketch_agg", "sliding_max_union_agg", "sliding_max_sketch_estimate", "sliding_max"} <= set(names)
    sdf.createOrReplaceTempView("extension_events")
    sql = spark.sql("SELECT k, sliding_max_sketch_estimate(sliding_max_sketch_agg(ts, v, 400)) AS m, "
                    "sliding_max(ts, v, 400) AS one FROM extension_events GROUP BY k").collect()
    assert {r.k: r.m for r in sql} == {r.k: r.one for r in sql} == exact(pdf, 400)
    assert U.signature("sliding_max_sketch_agg") == "sliding_max_sketch_agg(ts, value, window)"


def test_sliding_over_answers_every_row(events):
    from udaf import sliding_over

    pdf, sdf = events
    got = sliding_over(sdf, "k", "ts", m=Largest("v", window=50)).toPandas()
    for k, g in pdf.groupby("k"):
        g = g[g.v.notna()]
        ts, vs = g.ts.to_numpy(), g.v.to_numpy(dtype=np.int64)
        rows = got[got.k == k].set_index("ts")
        for t in ts[::37]:
            assert rows.loc[t, "m"] == brute(ts, vs, t, 50)


def test_streaming_state_answers_every_key(events, tmp_path):
    from udaf.streaming import sliding_window_state

    pdf, sdf = events
    ordered = pdf.sort_values("ts")
    frames = [ordered.iloc[rows] for rows in np.array_split(np.arange(len(ordered)), 3)]  # in time order
    got = [r for _, r in through_state(sdf.sparkSession, sdf.schema, frames, tmp_path,
                                       lambda stream: sliding_window_state(stream, "k", "ts",
                                                                           m=Largest("v", window=400)))]
    assert {r["k"] for r in got} == set(pdf.k)
    for r in got:  # each key's answer as of its newest time in each micro-batch
        g = pdf[(pdf.k == r["k"]) & pdf.v.notna()]
        assert r["m"] == brute(g.ts.to_numpy(), g.v.to_numpy(dtype=np.int64), r["as_of"], 400)


def test_the_driver_hands_its_family_modules_to_the_tasks():
    """union_table's tasks import the modules of the families registered
    on the driver; one a worker cannot import is named where its bytes
    are refused."""
    from ehist.errors import InvalidInputError
    from udaf import family
    from udaf.union import UniteLists

    assert __name__ in family.extension_modules() and __name__ in UniteLists().modules
    try:
        family.load_families(["no_such_family_module"])
        with pytest.raises(InvalidInputError, match="family module no_such_family_module could not be imported"):
            family.sketch_family([b"EH\xff\x01\x00\x00"], "m", "union_table")
    finally:
        family._UNIMPORTABLE.pop("no_such_family_module", None)
    assert family.sketch_family([SlidingMax(5).to_bytes(), None], "m", "union_table") is Largest
