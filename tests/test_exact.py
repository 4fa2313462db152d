"""udaf.exact: per-key windowed answers, many keys at once, against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pandas")
pytest.importorskip("pyspark")

from tests.conftest import examples  # noqa: E402
from udaf.exact import in_window, per_key_distinct, per_key_lp_norms, per_key_sums  # noqa: E402


@st.composite
def keyed(draw):
    sizes = draw(st.lists(st.integers(1, 30), min_size=1, max_size=8))
    run = np.repeat(np.arange(len(sizes)), sizes)
    t = np.concatenate([np.sort(draw(st.lists(st.integers(-20, 60), min_size=s, max_size=s))) for s in sizes])
    n = run.size
    codes = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    values = np.array(draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n)), dtype=np.int64)
    present = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    window = draw(st.integers(1, 50))
    now = np.array([int(t[run == k].max()) + draw(st.integers(0, 5)) for k in range(len(sizes))])
    return run, t, codes, values, present, window, now


@settings(max_examples=examples(300), deadline=None)
@given(keyed(), st.sampled_from([0.5, 1.0, 2.0]))
def test_per_key_answers_equal_brute_force(case, p):
    run, t, codes, values, present, window, now = case
    keys = int(run.max()) + 1
    inside = in_window(t, run, now, window)
    mask = inside & present
    sums = per_key_sums(values, mask, run, keys)
    distinct = per_key_distinct(codes, mask, run, keys)
    norms = per_key_lp_norms(p, codes, values, mask, run, keys)
    for k in range(keys):
        sel = (run == k) & (t > now[k] - window) & (t <= now[k])
        assert inside[run == k].sum() == sel.sum()
        m = sel & present
        assert sums[k] == sum(int(v) for v in values[m])
        assert distinct[k] == len(set(codes[m].tolist()))
        per_code = {}
        for c, v in zip(codes[m].tolist(), values[m].tolist(), strict=True):
            per_code[c] = per_code.get(c, 0) + v
        assert norms[k] == pytest.approx(sum(abs(v) ** p for v in per_code.values()) ** (1 / p), rel=1e-9)


def test_window_start_below_int64_min_is_clipped():
    t = np.array([np.iinfo(np.int64).min + 1, -10])
    run = np.array([0, 0])
    # now - window is below INT64_MIN: every earlier timestamp is inside
    assert in_window(t, run, np.array([-10]), window=2**63 - 1).tolist() == [True, True]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**63 - 1), st.booleans()), min_size=1, max_size=40))
def test_per_key_sums_are_exact_or_refused_past_int64(rows):
    """int64 addition wraps around silently: a key's sum past int64 is the
    OverflowError of the per-row pass, never a wrapped value."""
    run = np.array(sorted(r for r, _, _ in rows))
    values = np.array([v for _, v, _ in rows], dtype=np.int64)
    mask = np.array([m for _, _, m in rows])
    keys = int(run.max()) + 1
    want = [sum(int(v) for v, m, r in zip(values, mask, run) if m and r == k) for k in range(keys)]
    if max(want) > 2**63 - 1:
        with pytest.raises(OverflowError, match="the sum of a key's values exceeds int64"):
            per_key_sums(values, mask, run, keys)
    else:
        assert per_key_sums(values, mask, run, keys).tolist() == want
