"""Write what you read (issue 19): every sketch the public API builds, with
extreme but accepted inputs (times at the int64 edges, the largest windows,
values up to what an update accepts), serializes to bytes that decode to
an equal sketch, merges included.  An update the sketch refuses (a total
beyond int64, sums beyond float64, late data) must leave it unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distinct import SlidingFM, SlidingHyperLogLog
from ehist import ExponentialHistogram, LateDataError
from frequencies import SlidingCountMin, SlidingHeavyHitters
from lp_norms import SlidingLpNorm
from quantiles import SlidingQuantiles

from .conftest import examples

TOP = 2**63 - 1
times = st.one_of(st.integers(-TOP, TOP), st.sampled_from([-TOP, -TOP + 1, -1, 0, 1, TOP - 1, TOP]))
windows = st.sampled_from([1, 7, 1000, 2**40, 2**62, TOP])
big_ints = st.one_of(st.integers(0, 9), st.sampled_from([2**31, 2**61, 2**62, TOP]))
big_floats = st.one_of(st.floats(0, 10), st.sampled_from([0.0, 5e-324, 1e-300, 1e300, 1.7e308]))
any_floats = st.one_of(big_floats, big_floats.map(lambda x: -x))

FAMILIES = {
    "eh counts": (lambda w: ExponentialHistogram(w, 0.5), lambda s, t, x: s.update(t)),
    "eh sums": (lambda w: ExponentialHistogram(w, 0.1), lambda s, t, x: s.update(t, x["int"])),
    "hll": (lambda w: SlidingHyperLogLog(w, 6, seed=3), lambda s, t, x: s.update(t, x["int"])),
    "fm": (lambda w: SlidingFM(w, 8, seed=3), lambda s, t, x: s.update(t, x["int"])),
    "lp": (lambda w: SlidingLpNorm(1.5, w, eps=0.5, delta=0.5, seed=3),
           lambda s, t, x: s.update(t, x["int"] % 5, x["float"])),
    "cm": (lambda w: SlidingCountMin(w, eps=0.5, delta=0.5, eh_eps=0.5, seed=3),
           lambda s, t, x: s.update(t, x["int"] % 7, x["int"])),
    "hh": (lambda w: SlidingHeavyHitters(w, bits=8, eps=0.5, delta=0.5, eh_eps=0.5),
           lambda s, t, x: s.update(t, x["int"] % 256, x["int"])),
    "quantiles": (lambda w: SlidingQuantiles(w, eps=0.5, accuracy=0.5), lambda s, t, x: s.update(t, x["signed"])),
}


def test_every_registered_family_is_fed_here():
    """A new family (registered in ehist.synopsis.SYNOPSES) must get its
    extreme inputs here too."""
    from ehist.synopsis import SYNOPSES
    from tests.registry import ours

    built = {type(make(1000)) for make, _ in FAMILIES.values()}
    assert built | {SYNOPSES["StableSketch"]} == ours(SYNOPSES.values())


@st.composite
def batches(draw):
    """A few batches of (sorted times, inputs), times growing across them."""
    stamps = sorted(draw(st.lists(times, min_size=1, max_size=12)))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(stamps)), max_size=3))) | {len(stamps)})
    out, a = [], 0
    for b in cuts:
        n = b - a
        out.append((np.array(stamps[a:b], dtype=np.int64),
                    {"int": np.array(draw(st.lists(big_ints, min_size=n, max_size=n)), dtype=np.int64),
                     "float": np.array(draw(st.lists(big_floats, min_size=n, max_size=n))),
                     "signed": np.array(draw(st.lists(any_floats, min_size=n, max_size=n)))}))
        a = b
    return out


def feed(make, update, window, parts):
    """The sketch of the batches the family accepts (a refused batch must
    leave it as it was)."""
    s = make(window)
    for t, x in parts:
        before = s.to_bytes()
        try:
            update(s, t, x)
        except (ValueError, LateDataError):
            assert s.to_bytes() == before, "a refused update changed the sketch"
    return s


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=examples(40), deadline=None)
@given(window=windows, parts=batches(), other=batches())
def test_every_sketch_the_api_builds_reads_back_equal(family, window, parts, other):
    make, update = FAMILIES[family]
    s = feed(make, update, window, parts)
    t = feed(make, update, window, other)
    built = [s, t]
    try:
        built.append(s.merge(t))
    except ValueError as exc:  # a merged total beyond int64: refused, legitimately
        assert "overflow" in str(exc)
    for sketch in built:
        data = sketch.to_bytes()
        back = type(sketch).from_bytes(data)
        assert back == sketch and back.to_bytes() == data
