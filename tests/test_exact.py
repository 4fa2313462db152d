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
