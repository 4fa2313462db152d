"""Every registered family through the entry points that must agree byte
for byte, read from the registry (``udaf.family.FAMILIES``): a family is
covered here by registering it, with no list to edit.

For each spec class an example spec is made from its declaration alone
(:func:`example`: each input role gets the event column its accepted
types call for, every parameter its default), and over one table of
events, each check in one Spark job for all families at once:

* the builders agree: ``sketch_table`` (many keys per ``mapInArrow``
  call, :meth:`~udaf.spec.Spec.partials`) writes the bytes of
  ``<family>_sketch_agg`` in ``groupBy().agg()`` (one sketch per call,
  :meth:`~udaf.spec.Spec.update`), and of the core class fed the key's rows;
* the unions agree: ``union_table`` (every key at once,
  :meth:`~udaf.family.Family.merge_groups`) writes the bytes of
  ``<family>_union_agg`` (:meth:`~udaf.family.Family.merge`);
* the readers agree: ``<family>_sketch_estimate`` as a column function,
  in SQL and in process (:meth:`~udaf.family.Family.answers`) give the
  same answers, and the answer of one key's sketch is the family's
  :meth:`~udaf.family.Family.sketch_answer`;
* ``aggregate``'s strategies agree: two-phase's merged sketches are
  ``union_table`` of ``sketch_table``'s sketches per input partition and
  key, byte for byte, and its answers the spec's union of those partials
  (:meth:`~udaf.spec.Spec.union`) or, with ``sketches=True``, the answers
  of the merged sketches; ``shuffle`` answers as ``native`` does where a
  family has a native plan; ``auto`` answers as the strategy it picks;
* ``sliding_over``'s strategies agree row by row;
* the streaming state answers as the core synopsis fed the same
  micro-batches.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")

from .conftest import through_state  # noqa: E402 - after the skips

WINDOW = 2_000


def example(cls):
    """A spec of class ``cls`` over the events' columns: a role whose
    argument is a value (``Sum``'s ``column``, any ``value``) reads
    ``value``, any other ``item``."""
    inputs = {role: "value" if role == "value" or cls.arg_names.get(role) == "value" else "item"
              for role in cls.accepts}
    return cls(**inputs, window=WINDOW)


def specs() -> dict:
    """Every registered spec class's example, by a column name of its own."""
    from udaf.family import FAMILIES, load_families

    load_families()
    return {f"s{i}_{cls.__name__.lower()}": example(cls)
            for i, cls in enumerate(sorted((c for cs in FAMILIES.values() for c in cs), key=lambda c: c.__name__))}


@pytest.fixture(scope="module")
def events(spark):
    rng = np.random.default_rng(11)
    n = 3000
    pdf = pd.DataFrame({"site": rng.integers(0, 3, n), "k": rng.choice(["a", "b", "c", "d"], n),
                        "ts": rng.integers(0, 6000, n),
                        "item": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 200, n)), dtype="Int64"),
                        "value": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 1500, n)),
                                          dtype="Int64")})
    return pdf, spark.createDataFrame(pdf).repartition(2)


def _builder(name, spec):
    """``<family>_sketch_agg`` of ``spec``, as a user calls it."""
    from udaf import functions as U

    cls = type(spec)
    args = {cls.arg_names.get(role, role): column for role, column in spec.inputs().items()}
    return getattr(U, f"{cls.family}_sketch_agg")("ts", window=spec.window, **args).alias(name)


def test_builders_unions_and_readers_agree_for_every_family(events):
    import pyarrow as pa

    from udaf import functions as U
    from udaf import sketch_table, union_table
    from udaf.spec import read_spec

    pdf, sdf = events
    spark = sdf.sparkSession
    examples = specs()
    assert {"Count", "Sum", "Distinct", "DistinctFM", "LpNorm", "Frequencies", "HeavyHitters", "Quantile"} <= \
        {type(s).__name__ for s in examples.values()}
    by = ["site", "k"]
    table = {(r.site, r.k): r for r in sketch_table(sdf, by, "ts", **examples).collect()}
    grouped = {(r.site, r.k): r for r in sdf.groupBy(*by).agg(*[_builder(n, s) for n, s in examples.items()])
               .collect()}
    assert table.keys() == grouped.keys() and len(table) == 12
    for key, row in table.items():
        rows = pdf[(pdf.site == key[0]) & (pdf.k == key[1])].sort_values("ts", kind="stable")
        for name, spec in examples.items():
            assert bytes(row[name]) == bytes(grouped[key][name]), (name, key)
            kept = rows[np.logical_and.reduce([np.ones(len(rows), dtype=bool)] +
                                              [rows[c].notna().to_numpy() for c in spec.inputs().values()])]
            data = read_spec(spec, pa.table({c: pa.array(kept[c], type=pa.int64()) for c in ("item", "value")}))
            core = spec.update(spec.make(WINDOW), kept.ts.to_numpy(), data)
            assert bytes(row[name]) == core.to_bytes(), (name, key, "the core class")

    # the unions: union_table against the union aggregate, per key over the sites
    stored = sketch_table(sdf, by, "ts", **examples)
    united = {r.k: r for r in union_table(stored, "k", *examples).collect()}
    aggregated = {r.k: r for r in stored.groupBy("k").agg(
        *[getattr(U, f"{type(s).family}_union_agg")(n).alias(n) for n, s in examples.items()]).collect()}
    assert united.keys() == aggregated.keys() == set(pdf.k)
    for k in united:
        for name in examples:
            assert bytes(united[k][name]) == bytes(aggregated[k][name]), (name, k)

    # the readers: the column function, SQL and the family in process
    U.register(spark)
    spark.createDataFrame([tuple(united[k][n] for n in examples) + (k,) for k in sorted(united)],
                          [*examples, "k"]).createOrReplaceTempView("parity_united")
    python = spark.table("parity_united").select(
        "k", *[getattr(U, f"{type(s).family}_sketch_estimate")(n).alias(n) for n, s in examples.items()]).collect()
    sql = spark.sql("SELECT k, " + ", ".join(f"{type(s).family}_sketch_estimate({n}) AS {n}"
                                               for n, s in examples.items()) + " FROM parity_united").collect()
    python, sql = ({r.k: r for r in rows} for rows in (python, sql))
    for name, spec in examples.items():
        cls = type(spec)
        blobs = [bytes(united[k][name]) for k in sorted(united)]
        in_process = cls.answers(blobs, None, None).estimate
        one = [cls.sketch_answer(cls.sketch_type.from_bytes(b), None, None)[0] for b in blobs]
        for i, k in enumerate(sorted(united)):
            assert _same(python[k][name], sql[k][name], in_process[i], one[i]), (name, k)


def _same(*values) -> bool:
    """Equal answers (NaN equal to NaN)."""
    first = values[0]
    return all(v == first or (isinstance(v, float) and math.isnan(v) and math.isnan(first)) for v in values)


def _plain(value):
    """A collected value as plain Python (Rows as dicts, recursively)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _equal(a, b) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def test_aggregate_strategies_agree_for_every_family(events):
    from pyspark.sql import functions as F

    from udaf import aggregate, sketch_table, union_table
    from udaf.native import has_native

    _, sdf = events
    examples = specs()
    df = sdf.withColumn("part", F.spark_partition_id()).persist()
    try:
        df.count()
        # phase one's partials are the sketches of each input partition's rows of a key
        stored = sketch_table(df, ["part", "k"], "ts", **examples)
        partials = {}
        for r in stored.collect():
            partials.setdefault(r.k, []).append(r)
        united = {r.k: r for r in union_table(stored, "k", *examples).collect()}
        merged = {r.k: r for r in aggregate(df, "k", "ts", strategy="two_phase", sketches=True, reduce=False,
                                            **examples).collect()}
        plain = {r.k: r for r in aggregate(df, "k", "ts", strategy="two_phase", reduce=False,
                                           **examples).collect()}
        keys = sorted(united)
        assert merged.keys() == plain.keys() == set(keys)
        for name, spec in examples.items():
            cls = type(spec)
            blobs = [bytes(merged[k][f"{name}_sketch"]) for k in keys]
            assert blobs == [bytes(united[k][name]) for k in keys], name
            from_sketches = cls.answer_array(spec.key_answers(blobs, None, None).estimate).to_pylist()
            parts = [bytes(p[name]) for k in keys for p in sorted(partials[k], key=lambda p: p.part)]
            starts = np.cumsum([0] + [len(partials[k]) for k in keys[:-1]])
            from_partials = cls.answer_array(spec.union(parts, starts).estimate).to_pylist()
            for i, k in enumerate(keys):
                assert _equal(merged[k][name], from_sketches[i]), (name, k, "sketches=True")
                assert _equal(plain[k][name], from_partials[i]), (name, k, "the partials' union")
        # from the rows: shuffle and the native plan, and auto as the strategy it takes
        shuffled = {r.k: r for r in aggregate(df, "k", "ts", strategy="shuffle", **examples).collect()}
        native = {n: s for n, s in examples.items() if has_native({n: s}, df.schema)}
        assert {type(s).__name__ for s in native.values()} >= {"Count", "Sum", "Distinct"}
        exact = {r.k: r for r in aggregate(df, "k", "ts", strategy="native", **native).collect()}
        auto = {r.k: r for r in aggregate(df, "k", "ts", **examples).collect()}
        for name in examples:
            for k in keys:
                if name in native:
                    assert _equal(shuffled[k][name], exact[k][name]), (name, k, "shuffle against native")
            assert any(all(_equal(auto[k][name], other[k][name]) for k in keys) for other in (plain, shuffled)), \
                (name, "auto")
    finally:
        df.unpersist()


def test_sliding_over_strategies_agree_for_every_family(events, spark):
    """For every registered family with a per-row form: the native plan
    (Spark's window functions) and the shuffle (each key's rows in one
    numpy pass) give every row the same answer where a family has both;
    ``auto`` answers as one of them."""
    from udaf import sliding_over
    from udaf.native import has_native_frames

    pdf, _ = events
    df = spark.createDataFrame(pdf.reset_index().rename(columns={"index": "row"})).repartition(2)
    framed = {n: s for n, s in specs().items() if type(s).has_frames}
    native = {n: s for n, s in framed.items() if has_native_frames({n: s}, df)}
    assert {type(s).__name__ for s in framed.values()} >= {"Count", "Sum", "Distinct", "LpNorm", "Frequencies"}
    assert {type(s).__name__ for s in native.values()} >= {"Count", "Sum", "Frequencies"}
    shuffled = {r.row: r for r in sliding_over(df, "k", "ts", strategy="shuffle", **framed).collect()}
    by_native = {r.row: r for r in sliding_over(df, "k", "ts", strategy="native", **native).collect()}
    auto = {r.row: r for r in sliding_over(df, "k", "ts", **framed).collect()}
    assert shuffled.keys() == by_native.keys() == auto.keys() == set(pdf.index)
    for name in framed:
        if name in native:
            for row, r in shuffled.items():
                assert _equal(r[name], by_native[row][name]), (name, row)
        assert any(all(_equal(auto[row][name], other[row][name]) for row in auto)
                   for other in ((shuffled, by_native) if name in native else (shuffled,))), (name, "auto")


def test_streaming_state_agrees_with_the_core_for_every_family(events, tmp_path):
    """For every registered family: the streaming state, fed the events in
    three time-ordered micro-batches, answers each key as the family
    answers the core synopsis updated with the same batches, as of the
    key's newest time (``as_of``)."""
    import pyarrow as pa

    from udaf.spec import read_spec
    from udaf.streaming import sliding_window_state

    pdf, sdf = events
    examples = specs()
    ordered = pdf.sort_values("ts", kind="stable")
    batches = [ordered.iloc[rows] for rows in np.array_split(np.arange(len(ordered)), 3)]
    got = through_state(sdf.sparkSession, sdf.schema, batches, tmp_path,
                        lambda stream: sliding_window_state(stream, "k", "ts", **examples))
    assert sorted({b for b, _ in got}) == [0, 1, 2]
    for name, spec in examples.items():
        cls = type(spec)
        for batch, row in got:
            sketch = spec.make(WINDOW)
            for rows in batches[:batch + 1]:
                rows = rows[rows.k == row["k"]]
                kept = rows[np.logical_and.reduce([np.ones(len(rows), dtype=bool)] +
                                                  [rows[c].notna().to_numpy() for c in spec.inputs().values()])]
                data = read_spec(spec, pa.table({c: pa.array(kept[c], type=pa.int64()) for c in ("item", "value")}))
                sketch = spec.update(sketch, kept.ts.to_numpy(), data)
            want = cls.answer_value(spec.answer(sketch, row["as_of"], None)[0] if sketch.newest is not None
                                    else cls.answer_array([None]).to_pylist()[0])
            assert _equal(row[name], want), (name, batch, row["k"])
