"""udaf.streaming's packing stage (pure Arrow and numpy, no JVM): every
event reaches its key's state exactly once, whatever the batching."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")

from ehist.hashing import hash64  # noqa: E402
from tests.conftest import examples  # noqa: E402
from udaf import Count, Distinct, DistinctFM, Frequencies, HeavyHitters, LpNorm, Quantile, Sum  # noqa: E402
from udaf.streaming import _Packer, _slots, _SlidingProcessor  # noqa: E402

_NO_ITEM = 0  # the word of a row without an item (hash64 never gives 0, p 2**-64)


def slots(with_value=True, with_item=True):
    """Release 0.1's layout: count, sum (value), distinct (item)."""
    specs = {"count": Count(10, 0.1)}
    if with_value:
        specs["sum"] = Sum("ehist_value", 10, 0.1)
    if with_item:
        specs["distinct"] = Distinct("ehist_item", 10, 4)
    return _slots(specs, legacy=True)

events = st.lists(st.tuples(st.sampled_from(["a", "b", None, "é"]), st.integers(-2, 2),
                            st.integers(0, 10**12), st.one_of(st.none(), st.integers(0, 50)),
                            st.one_of(st.none(), st.integers(0, 9))), min_size=1, max_size=60)


def unpack(packs, with_value=True, with_item=True):
    """key -> sorted (ts, value, hash) of the events in ``packs``, read the
    way the state reads them."""
    proc = _SlidingProcessor(["k1", "k2"], slots(with_value, with_item), {"count": 10, "sum": 10, "distinct": 10},
                             [], False, None, "drop")
    out = {}
    for table in packs:
        for row in table.to_pylist():
            t, words = proc._arrays([row])
            v, h = words[:, 0], words[:, 1].view(np.uint64)
            out.setdefault((row["k1"], row["k2"]), []).extend(zip(t.tolist(), v.tolist(), h.tolist()))
    return {k: sorted(v) for k, v in out.items()}


@settings(max_examples=examples(150), deadline=None)
@given(rows=events, cut=st.integers(1, 60))
def test_every_event_reaches_its_key_once(rows, cut):
    k1, k2, ts, val, item = (list(c) for c in zip(*rows))
    table = pa.table({"k1": pa.array(k1, pa.string()), "k2": pa.array(k2, pa.int64()),
                      "ehist_ts": pa.array(ts, pa.int64()), "ehist_value": pa.array(val, pa.int64()),
                      "ehist_item": pa.array(item, pa.int64())})
    packer = _Packer(["k1", "k2"], "ts", slots(), False)
    packs = [pa.Table.from_batches([b]) for b in packer(iter(table.to_batches(max_chunksize=cut)))]
    want = {}
    for a, b, t, v, i in rows:
        h = int(hash64(np.array([i], dtype=np.int64), 0)[0]) if i is not None else int(_NO_ITEM)
        want.setdefault((a, b), []).append((t, -1 if v is None else v, h))
    assert unpack(packs) == {k: sorted(v) for k, v in want.items()}
    # one pack per key and packing round (all rows fit one round here)
    keys = [(r["k1"], r["k2"]) for p in packs for r in p.select(["k1", "k2"]).to_pylist()]
    assert len(keys) == len(set(keys)) == len(want)


def test_null_event_time_and_negative_value_are_named_errors():
    packer = _Packer(["k"], "ts", slots(with_item=False), False)
    bad_ts = pa.record_batch({"k": [1, 2], "ehist_ts": pa.array([5, None], pa.int64()),
                              "ehist_value": pa.array([1, 1], pa.int64())})
    with pytest.raises(ValueError, match="column ts holds null .key 2.: timestamps must not be null"):
        list(packer(iter([bad_ts])))
    bad_value = pa.record_batch({"k": [1, 2], "ehist_ts": pa.array([5, 6], pa.int64()),
                                 "ehist_value": pa.array([1, -3], pa.int64())})
    with pytest.raises(ValueError, match="column ehist_value holds -3 .key 2.: Sum needs non-negative integers"):
        list(packer(iter([bad_value])))


def test_event_time_column_is_each_packs_newest():
    packer = _Packer(["k"], "ts", _slots({"c": Count(10)}, False), True)
    batch = pa.record_batch({"k": ["x", "y", "x"], "ehist_ts": pa.array([30, 10, 20], pa.int64())})
    (out,) = list(packer(iter([batch])))
    got = dict(zip(out.column("k").to_pylist(), out.column("ehist_event_time").cast(pa.int64()).to_pylist()))
    assert got == {"x": 30, "y": 10}


def test_struct_keys_fall_back_to_a_pack_per_event():
    """Where pyarrow cannot sort or compare a key type (structs: sorting
    depends on the pyarrow version, equality is missing), every event
    becomes its own pack, which Spark still groups by key (correct, only
    less packed)."""
    packer = _Packer(["s"], "ts", _slots({"c": Count(10)}, False), False)
    keys = pa.array([{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    batch = pa.record_batch({"s": keys, "ehist_ts": pa.array([3, 1, 2], pa.int64())})
    (out,) = list(packer(iter([batch])))
    assert out.num_rows == 3
    got = sorted((str(k), np.frombuffer(b, np.int64).tolist())
                 for k, b in zip(out.column("s").to_pylist(), out.column("ehist_ts").to_pylist(), strict=True))
    assert got == sorted((str(k), [t]) for k, t in zip(keys.to_pylist(), [3, 1, 2], strict=True))


WORD_SPECS = [Count(10), Sum("v", 10), Distinct("i", 10), DistinctFM("i", 10), LpNorm("i", 10, value="v"),
              Frequencies("i", 10), Frequencies("i", 10, value="v"), HeavyHitters("i", 10),
              HeavyHitters("i", 10, value="v", bits=8), Quantile("v", 10)]


def test_every_family_is_in_the_word_layout_test():
    from tests.registry import ours
    from udaf.spec import load_families

    assert {type(s) for s in WORD_SPECS} == ours(c for cs in load_families().values() for c in cs)


@pytest.mark.parametrize("spec", WORD_SPECS, ids=lambda s: type(s).__name__)
def test_state_words_give_back_presence_and_inputs(spec):
    """The state schema is laid out from ``state_words().width`` before
    any row is read: it must be the width of the encoded words, and the
    words must give back the rows' presence and inputs."""
    arrays = {"i": pa.array([1, None, 3, 4], pa.int64()), "v": pa.array([5, 6, None, 0], pa.int64())}
    data = spec.read({role: arrays[c] for role, c in spec.inputs().items()}, 4)
    state_words = spec.state_words()
    words = state_words.encode(data)
    assert words.shape == (4, state_words.width) and words.dtype == np.int64
    back = state_words.decode(words)
    assert back.present.tolist() == data.present.tolist()
    for name, values in back.arrays.items():
        mine = data.arrays.get(name)
        if mine is None and name == "hash":
            mine = hash64(arrays["i"].to_numpy(zero_copy_only=False)[data.present], spec.seed)
        if mine is not None:
            assert np.asarray(values).tolist() == np.asarray(mine).tolist(), name


def test_the_protocol_before_state_words_still_works_and_warns():
    """A spec written to the older protocol (``words`` / ``from_words`` /
    ``words_per_row``) is told at class creation and its own methods lay
    out its state; the old names on a spec of today give its state words."""
    from dataclasses import dataclass

    from udaf.data import Data

    with pytest.warns(DeprecationWarning, match="declare state_words"):
        @dataclass(frozen=True)
        class _OldSum(Sum):
            words_per_row = 2

            def words(self, data):
                out = np.full((data.present.size, 2), -7, dtype=np.int64)
                out[data.present, 1] = data.arrays["value"]
                return out

            def from_words(self, words):
                present = words[:, 0] == -7
                return Data(present, {"value": words[present, 1]})

    data = Data(np.array([True, True]), {"value": np.array([3, 4])})
    state_words = _OldSum("v", 10).state_words()
    assert state_words.width == 2 and state_words.encode(data)[:, 0].tolist() == [-7, -7]
    assert state_words.decode(state_words.encode(data)).arrays["value"].tolist() == [3, 4]
    today = Sum("v", 10)
    assert today.words_per_row == 1
    with pytest.warns(DeprecationWarning, match="state_words"):
        words = today.words(data)
    with pytest.warns(DeprecationWarning, match="state_words"):
        assert today.from_words(words).arrays["value"].tolist() == [3, 4]


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_state_words_round_trip_any_declaration(data):
    """Any declaration of words: encoding then decoding gives back which
    rows are present and every present row's array values, bit for bit;
    constant words are written and not read back."""
    from udaf.data import Data, StateWords, Word

    n = data.draw(st.integers(0, 40))
    present = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    kinds = {"int64": (st.integers(0, 2**63 - 1), -1), "uint64": (st.integers(1, 2**64 - 1), 0),
             "float64": (st.floats(0, 1e300), float("nan"))}
    columns, arrays = [], {}
    for j in range(data.draw(st.integers(1, 3))):
        dtype = data.draw(st.sampled_from(sorted(kinds)))
        values, absent = kinds[dtype]
        marks = j == 0 or data.draw(st.booleans())  # the first word always tells the absent rows
        constant = None if j == 0 or not data.draw(st.booleans()) else data.draw(values)
        columns.append(Word(f"a{j}", dtype, absent=absent if marks else None, constant=constant))
        if constant is None:
            arrays[f"a{j}"] = np.array(data.draw(st.lists(values, min_size=int(present.sum()),
                                                          max_size=int(present.sum()))), dtype=dtype)
    words = StateWords(tuple(columns))
    encoded = words.encode(Data(present, arrays))
    assert encoded.shape == (n, len(columns)) and encoded.dtype == np.int64
    back = words.decode(encoded)
    assert back.present.tolist() == present.tolist()
    assert sorted(back.arrays) == sorted(arrays)
    for name, values in arrays.items():
        assert back.arrays[name].dtype == values.dtype
        assert back.arrays[name].view(np.int64).tolist() == values.view(np.int64).tolist()
