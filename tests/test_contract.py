"""The contract every synopsis offers (one suite, parametrized over synopses).

lp_norms and distinct add their factories to SYNOPSES; each entry builds an
empty synopsis, feeds it a stream, and knows how to compare an estimate
with the exact answer of the interleaved stream.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import ExponentialHistogram
from frequencies import SlidingCountMin, SlidingHeavyHitters
from lp_norms import SlidingLpNorm
from quantiles import SlidingQuantiles


@dataclass
class Synopsis:
    name: str
    make: Callable[[], object]
    feed: Callable[[object, np.ndarray, np.ndarray], object]
    exact: Callable[[np.ndarray, np.ndarray, int], float]
    tolerance: Callable[[float], float]
    empty_repr: str


def _eh_exact(ts, vs, window):
    return float(vs[ts > ts.max() - window].sum())


def _items(ts, vs):
    """Items for the distinct counters: a few thousand values, repeated."""
    return (ts * 7 + vs) % 3000


def _l1_exact(ts, vs, window):
    m = ts > ts.max() - window
    return float(np.bincount(_items(ts, vs)[m] % 97, weights=vs[m]).sum())


def _distinct_exact(ts, vs, window):
    return float(np.unique(_items(ts, vs)[ts > ts.max() - window]).size)


SYNOPSES = [
    Synopsis(
        name="ExponentialHistogram",
        make=lambda: ExponentialHistogram(500, 0.05),
        feed=lambda s, ts, vs: s.update(ts, vs),
        exact=_eh_exact,
        tolerance=lambda exact: 0.05 * exact,
        empty_repr="ExponentialHistogram(window=500, eps=0.05, empty)",
    ),
    Synopsis(
        name="SlidingFM",
        make=lambda: SlidingFM(500, num_bitmaps=256, seed=4),
        feed=lambda s, ts, vs: s.update(ts, _items(ts, vs)),
        exact=_distinct_exact,
        tolerance=lambda exact: 4 * 0.78 / 16 * exact,
        empty_repr="SlidingFM(window=500, num_bitmaps=256, seed=4, empty)",
    ),
    Synopsis(
        name="SlidingHyperLogLog",
        make=lambda: SlidingHyperLogLog(500, precision=10, seed=4),
        feed=lambda s, ts, vs: s.update(ts, _items(ts, vs)),
        exact=_distinct_exact,
        tolerance=lambda exact: 4 * 1.04 / 32 * exact,
        empty_repr="SlidingHyperLogLog(window=500, precision=10, seed=4, empty)",
    ),
    Synopsis(
        name="SlidingLpNorm",
        make=lambda: SlidingLpNorm(1.0, 500, eps=0.1, delta=0.01, seed=4),
        feed=lambda s, ts, vs: s.update(ts, _items(ts, vs) % 97, vs),
        exact=_l1_exact,
        tolerance=lambda exact: 0.25 * exact,
        empty_repr=(
            "SlidingLpNorm(p=1, window=500, eps=0.1, delta=0.01, rows=1801, seed=4, empty)"
        ),
    ),
    # the frequency families' estimate() is the window's total (a point
    # query needs an item: tests/test_frequencies.py)
    Synopsis(
        name="SlidingCountMin",
        make=lambda: SlidingCountMin(500, eps=0.05, delta=0.05, eh_eps=0.05, seed=4),
        feed=lambda s, ts, vs: s.update(ts, _items(ts, vs), vs),
        exact=_eh_exact,
        tolerance=lambda exact: 0.05 * exact,
        empty_repr="SlidingCountMin(window=500, eps=0.05, delta=0.05, width=55, depth=3, empty)",
    ),
    Synopsis(
        name="SlidingHeavyHitters",
        make=lambda: SlidingHeavyHitters(500, bits=12, eps=0.05, delta=0.05, eh_eps=0.05, seed=4),
        feed=lambda s, ts, vs: s.update(ts, _items(ts, vs), vs),
        exact=_eh_exact,
        tolerance=lambda exact: 0.05 * exact,
        empty_repr="SlidingHeavyHitters(window=500, bits=12, eps=0.05, delta=0.05, levels=3, empty)",
    ),
    # estimate() of the quantile sketch is the window's count of values
    # (quantiles and ranks: tests/test_quantiles.py)
    Synopsis(
        name="SlidingQuantiles",
        make=lambda: SlidingQuantiles(500, eps=0.1, accuracy=0.01),
        feed=lambda s, ts, vs: s.update(ts, vs * 1.5 - 2),
        exact=lambda ts, vs, window: float((ts > ts.max() - window).sum()),
        tolerance=lambda exact: 0.1 / 2.1 * exact,
        empty_repr="SlidingQuantiles(window=500, eps=0.1, accuracy=0.01, empty)",
    ),
]


def stream(seed=3, n=5000):
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(0, 3, n))
    vs = rng.integers(0, 5, n)
    return ts, vs


@pytest.fixture(params=SYNOPSES, ids=lambda s: s.name)
def syn(request):
    return request.param


def test_empty_repr(syn):
    assert repr(syn.make()) == syn.empty_repr


def test_update_returns_self(syn):
    s = syn.make()
    ts, vs = stream()
    assert syn.feed(s, ts, vs) is s


def test_now_beyond_int64_answers_an_empty_window(syn):
    """A query time past int64 is a window after every element: 0, in every
    family (the EH raised a bare OverflowError)."""
    ts, vs = stream()
    s = syn.feed(syn.make(), ts, vs)
    for now in (2**63, 2**64, 2**70):
        assert s.estimate(now=now) == 0.0


def test_bytes_round_trip_and_equality(syn):
    ts, vs = stream()
    s = syn.feed(syn.make(), ts, vs)
    back = type(s).from_bytes(s.to_bytes())
    assert back == s and back.to_bytes() == s.to_bytes()
    assert type(s).from_bytes(syn.make().to_bytes()) == syn.make()
    assert s != syn.make()


def test_pickling(syn):
    ts, vs = stream()
    s = syn.feed(syn.make(), ts, vs)
    assert pickle.loads(pickle.dumps(s)) == s


def test_merge_equals_interleaved_stream_within_bound(syn):
    ts, vs = stream()
    owner = np.random.default_rng(9).integers(0, 2, ts.size)
    a = syn.feed(syn.make(), ts[owner == 0], vs[owner == 0])
    b = syn.feed(syn.make(), ts[owner == 1], vs[owner == 1])
    a_bytes, b_bytes = a.to_bytes(), b.to_bytes()
    m = a.merge(b)
    assert a.to_bytes() == a_bytes and b.to_bytes() == b_bytes  # arguments unchanged
    exact = syn.exact(ts, vs, 500)
    assert abs(m.estimate() - exact) <= syn.tolerance(exact)


def test_cross_process_determinism(syn):
    """The same stream gives the same bytes in a fresh interpreter."""
    code = (
        "import sys, numpy as np\n"
        "from tests.test_contract import SYNOPSES, stream\n"
        f"syn = [s for s in SYNOPSES if s.name == {syn.name!r}][0]\n"
        "ts, vs = stream()\n"
        "sys.stdout.write(syn.feed(syn.make(), ts, vs).to_bytes().hex())\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    ts, vs = stream()
    assert bytes.fromhex(out.stdout) == syn.feed(syn.make(), ts, vs).to_bytes()


def test_core_packages_import_without_spark():
    """ehist, lp_norms, distinct, frequencies and quantiles never import pyspark, pandas or pyarrow."""
    code = (
        "import sys\n"
        "import ehist, lp_norms, distinct, frequencies, quantiles\n"
        "bad = [m for m in ('pyspark', 'pandas', 'pyarrow') if m in sys.modules]\n"
        "sys.exit(1 if bad else 0)\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ------------------------------------------------------- over the registry
# Every class built on ehist.synopsis.Synopsis registers itself with its
# examples (the first empty): the checks below run over all of them, so a
# new family is covered by defining it (and fails here until it gives
# examples and, above, a stream to compare with).
from ehist.errors import IncompatibleSketchError  # noqa: E402
from ehist.synopsis import SYNOPSES as REGISTERED, _same  # noqa: E402


def _ours() -> list:
    """The project's registered classes by name (a family registered from
    elsewhere, as tests/test_extension.py's, calls these checks itself)."""
    from tests.registry import ours

    return sorted((cls.__name__, cls) for cls in ours(REGISTERED.values()))


def registered():
    return [pytest.param(cls, id=name) for name, cls in _ours()]


def test_the_registry_holds_every_family_and_this_suite_streams_each():
    from tests.registry import ours

    assert {s.name for s in SYNOPSES} | {"StableSketch"} == {c.__name__ for c in ours(REGISTERED.values())}


@pytest.mark.parametrize("cls", registered())
def test_examples_round_trip_pickle_copy_and_repr(cls):
    examples = cls._examples()
    assert len(examples) >= 2
    for x in examples:
        assert type(x) is cls
        assert cls.from_bytes(x.to_bytes()) == x and cls.from_bytes(x.to_bytes()).to_bytes() == x.to_bytes()
        assert pickle.loads(pickle.dumps(x)) == x
        c = x.copy()
        assert c == x and c is not x
        assert repr(x).startswith(f"{cls.__name__}(")
        assert x.__hash__ is None
    if hasattr(examples[0], "_newest"):  # the first empty
        assert examples[0].newest is None and repr(examples[0]).endswith(", empty)")
    assert any(x != examples[0] for x in examples[1:])


@pytest.mark.parametrize("cls", registered())
def test_merge_all_checks_and_unions(cls):
    examples = cls._examples()
    with pytest.raises(ValueError, match="at least one"):
        cls.merge_all([])
    other = next(c for c in REGISTERED.values() if c is not cls)._examples()[0]
    with pytest.raises(TypeError, match=f"can only merge {cls.__name__} objects, got {type(other).__name__}"):
        cls.merge_all([examples[0], other])
    with pytest.raises(TypeError, match=f"can only merge .*{type(other).__name__}"):
        examples[0].merge(other)
    for x in examples:
        before = x.to_bytes()
        assert cls.merge_all([x]) == x and cls.merge_all([x]) is not x
        same = [y for y in examples if y._params() == x._params()]
        united = cls.merge_all(same)
        assert x.to_bytes() == before  # inputs unchanged
        assert cls.from_bytes(united.to_bytes()) == united
    # sketches of different parameters: the message names the first that differs, with both values
    kinds = {x._params(): x for x in examples}
    if len(kinds) > 1:
        a, b = list(kinds.values())[:2]
        with pytest.raises(IncompatibleSketchError, match="cannot merge .* with different .*: .* and "):
            a.merge(b)


GOLDEN = Path(__file__).parent / "golden" / "registry"


def registered_examples():
    return [pytest.param(cls, i, id=f"{name}-{i}") for name, cls in _ours() for i in range(len(cls._examples()))]


@pytest.mark.parametrize("cls, i", registered_examples())
def test_registered_examples_keep_their_golden_bytes(cls, i):
    """Every registered family's examples are pinned in
    ``tests/golden/registry/<family>-<i>.bin``: its format cannot drift
    silently, and a new family is pinned by registering it.  A missing
    file is written when ``EHIST_WRITE_GOLDEN=1`` (then commit it);
    rewrite an existing one only with a format version bump."""
    import os

    example = cls._examples()[i]
    path = GOLDEN / f"{cls.__name__}-{i}.bin"
    if not path.exists():
        if os.environ.get("EHIST_WRITE_GOLDEN") != "1":
            pytest.fail(f"no golden bytes for {cls.__name__} example {i}: run this test with EHIST_WRITE_GOLDEN=1 "
                        f"and commit {path.relative_to(Path(__file__).parent.parent)}")
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(example.to_bytes())
    stored = path.read_bytes()
    assert cls.from_bytes(stored).to_bytes() == stored  # the format reads and writes these bytes
    if example.to_bytes() != stored:  # only floats computed here may differ (see _alike_but_floats)
        assert _alike_but_floats(cls.from_bytes(stored), example), f"{cls.__name__} example {i} drifted"
    else:
        assert cls.from_bytes(stored) == example


def _alike_but_floats(a, b) -> bool:
    """Whether two synopses hold the same state but for the last bits of
    float arrays: the L_p sketches' p-stable variates go through numpy's
    sin, cos, log and powers, whose SIMD builds differ by an ulp between
    CPUs (AVX-512 and AVX2 machines), so a golden example written on one
    holds floats an ulp away from another's.  Everything else (parameters,
    times, counts, the layout) must match exactly."""
    if a._params() != b._params():
        return False
    for attr in a._state:
        x, y = getattr(a, attr), getattr(b, attr)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            if not (isinstance(y, np.ndarray) and x.shape == y.shape
                    and np.allclose(x, y, rtol=1e-12, atol=0.0, equal_nan=True)):
                return False
        elif not _same(x, y):
            return False
    return True
