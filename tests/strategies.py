"""Hypothesis strategies for streams with bursts, idle gaps, zeros and huge values."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

values_small = st.sampled_from([0, 1, 1, 1, 2, 3])
values_any = st.one_of(
    st.integers(0, 3),
    st.integers(0, 1000),
    st.integers(0, 2**40),
    st.sampled_from([0, 1, 2**40]),
)

# eps values: exact binary fractions and awkward decimals
eps_values = st.sampled_from([0.5, 0.34, 0.25, 0.2, 0.1, 0.05, 0.3])


@st.composite
def streams(draw, max_segments=30, values=values_any, max_gap=None, start=None):
    """Sorted (timestamps, values): bursts of equal timestamps, idle gaps."""
    t = draw(st.integers(-(10**6), 10**6)) if start is None else start
    ts, vs = [], []
    for _ in range(draw(st.integers(1, max_segments))):
        gap = draw(
            st.one_of(
                st.just(0),
                st.integers(1, 3),
                st.integers(1, 40) if max_gap is None else st.integers(1, max_gap),
                st.just(1000) if max_gap is None else st.just(max_gap),
            )
        )
        t += gap
        burst = draw(st.integers(1, 4))
        for _ in range(burst):
            ts.append(t)
            vs.append(draw(values))
    return np.array(ts, dtype=np.int64), np.array(vs, dtype=np.int64)


@st.composite
def chunked(draw, n):
    """Split points cutting range(n) into consecutive batches."""
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=6))))
    edges = [0] + [c for c in cuts if 0 < c < n] + [n]
    return list(zip(edges[:-1], edges[1:]))
