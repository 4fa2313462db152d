"""lp_norms: stable constants, StableSketch and SlidingLpNorm guarantees."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehist import CorruptSketchError, IncompatibleSketchError, LateDataError
from lp_norms import SlidingLpNorm, StableSketch, median_abs_stable, rows_for
from lp_norms.stable import stable_variates

from .conftest import examples

PS = [0.5, 1.0, 1.5, 2.0]
TRIALS = 300


def allowed_failures(delta, trials):
    """delta plus three standard errors of a binomial proportion."""
    return delta + 3 * np.sqrt(delta * (1 - delta) / trials)


def lp(v, p):
    return float((np.abs(v) ** p).sum() ** (1 / p))


# --------------------------------------------------------------- constants
@pytest.mark.parametrize("p", [0.3, 0.5, 0.8, 1.2, 1.5, 1.9])
def test_median_constant_against_monte_carlo(p):
    x = stable_variates(p, seed=123, rows=1, index_hashes=np.arange(2_000_000, dtype=np.uint64))[0]
    mc = np.median(np.abs(x))
    # the sample median's standard deviation is below 0.3 percent here
    assert abs(mc / median_abs_stable(p) - 1) < 0.01


def test_small_p_is_supported_and_below_the_float64_limit_is_refused():
    s = StableSketch(0.1, 200, seed=1).update([1, 2, 3], [1.0, 2.0, 3.0])
    assert np.isfinite(s.estimate()) and s.estimate() > 0
    assert abs(median_abs_stable(0.1) - 22.2552) < 1e-3  # converged digits (midpoint rule)
    with pytest.raises(ValueError, match="p must be >= 0.1: .* overflow float64"):
        StableSketch(0.05, 10)


def test_median_constant_continuity_and_closed_forms():
    assert median_abs_stable(1.0) == 1.0
    assert abs(median_abs_stable(2.0) - 0.9538725524) < 1e-9
    assert abs(median_abs_stable(1.999) / median_abs_stable(2.0) - 1) < 1e-4
    assert abs(median_abs_stable(1.0001) / median_abs_stable(1.0) - 1) < 1e-3


def test_variates_are_a_pure_function_of_seed_row_index():
    h = np.array([5, 9, 5], dtype=np.uint64)
    a = stable_variates(1.5, 42, 4, h)
    assert np.array_equal(a[:, 0], a[:, 2])
    assert np.array_equal(a, stable_variates(1.5, 42, 4, h))
    assert not np.array_equal(a, stable_variates(1.5, 43, 4, h))
    assert np.array_equal(stable_variates(1.5, 42, 8, h)[:4], a)  # more rows extend, never change


# ------------------------------------------------------------ StableSketch
def random_vector(rng, kind, d=500, n=2000):
    idx = rng.integers(0, d, n) if kind == "uniform" else (rng.zipf(1.4, n) - 1) % d
    val = rng.integers(1, 20, n).astype(float)
    return idx, val, np.bincount(idx, weights=val, minlength=d)


# p = 0.5 needs the most rows (rows_for): its 300 trials take ~8 s, with --slow
SLOW_P = [pytest.param(p, marks=pytest.mark.slow) if p < 1 else p for p in PS]


@pytest.mark.parametrize("p", SLOW_P)
def test_stable_sketch_failure_rate(p):
    """rows_for(p, eps, delta) rows: |estimate/L - 1| > eps in at most
    delta + 3 standard errors of 300 seeded trials (uniform and Zipf)."""
    eps, delta = 0.15, 0.1
    rows = rows_for(p, eps, delta)
    rng = np.random.default_rng(int(p * 100))
    fails = 0
    for trial in range(TRIALS):
        idx, val, v = random_vector(rng, "uniform" if trial % 2 else "zipf")
        est = StableSketch(p, rows, seed=trial).update(idx, val).estimate()
        fails += abs(est / lp(v, p) - 1) > eps
    assert fails / TRIALS <= allowed_failures(delta, TRIALS), fails


def test_stable_sketch_linearity():
    rng = np.random.default_rng(1)
    a_idx, a_val, a = random_vector(rng, "uniform")
    b_idx, b_val, b = random_vector(rng, "zipf")
    sa = StableSketch(1.5, 300, seed=9).update(a_idx, a_val)
    sb = StableSketch(1.5, 300, seed=9).update(b_idx, b_val)
    both = StableSketch(1.5, 300, seed=9).update(np.concatenate([a_idx, b_idx]), np.concatenate([a_val, b_val]))
    assert np.allclose((sa + sb).values, both.values, rtol=1e-12, atol=1e-9)
    assert np.allclose((both - sb).values, sa.values, rtol=1e-9, atol=1e-6)
    assert (sa + sb).merge(sa).rows == 300
    # string indexes work and equal strings hit the same coordinate
    s = StableSketch(1.0, 50, seed=2).update(["x", "y", "x"], [1.0, 2.0, 3.0])
    t = StableSketch(1.0, 50, seed=2).update(["x", "y"], [4.0, 2.0])
    assert np.allclose(s.values, t.values)


def test_inner_product_join_size():
    """AGMS: |est - <u,v>| <= z * sqrt((|u|^2|v|^2 + <u,v>^2)/rows) in at
    least 1 - delta of 300 trials."""
    delta, rows = 0.1, 400
    z = NormalDist().inv_cdf(1 - delta / 2)
    rng = np.random.default_rng(5)
    fails = 0
    for trial in range(TRIALS):
        ui, uv, u = random_vector(rng, "zipf", d=300, n=800)
        vi, vv, v = random_vector(rng, "zipf", d=300, n=800)
        su = StableSketch(2.0, rows, seed=trial).update(ui, uv)
        sv = StableSketch(2.0, rows, seed=trial).update(vi, vv)
        exact = float(u @ v)
        sd = np.sqrt(((u @ u) * (v @ v) + exact**2) / rows)
        fails += abs(su.inner_product(sv) - exact) > z * sd
    assert fails / TRIALS <= allowed_failures(delta, TRIALS), fails
    with pytest.raises(ValueError, match="need p = 2"):
        StableSketch(1.0, 10).inner_product(StableSketch(1.0, 10))


# ----------------------------------------------------------- SlidingLpNorm
def stream(rng, kind, n=600, d=200):
    ts = np.cumsum(rng.integers(0, 3, n))
    idx = rng.integers(0, d, n) if kind == "uniform" else (rng.zipf(1.3, n) - 1) % d
    val = rng.integers(1, 10, n).astype(float)
    return ts, idx, val


def window_norm(ts, idx, val, now, w, p, d=200):
    m = (ts > now - w) & (ts <= now)
    return lp(np.bincount(idx[m], weights=val[m], minlength=d), p)


@pytest.mark.parametrize("p", SLOW_P)
def test_sliding_guarantee_failure_rate(p):
    """300 seeded trials per p (uniform and Zipf streams, windows N, N/2,
    N/8, and a later now): the estimate leaves [low L, high L] of
    guarantee() in at most delta + 3 standard errors of the queries."""
    eps, delta, window = 0.2, 0.1, 300
    rng = np.random.default_rng(int(p * 1000))
    fails = queries = 0
    for trial in range(TRIALS):
        ts, idx, val = stream(rng, "uniform" if trial % 2 else "zipf")
        s = SlidingLpNorm(p, window, eps=eps, delta=delta, seed=trial).update(ts, idx, val)
        low, high = s.guarantee()
        for now, w in ((ts[-1], window), (ts[-1], window // 2), (ts[-1], window // 8), (ts[-1] + 40, window)):
            exact = window_norm(ts, idx, val, int(now), w, p)
            if exact == 0:
                continue
            est = s.estimate(now=int(now), window=w)
            queries += 1
            fails += not (low * exact <= est <= high * exact)
    assert fails / queries <= allowed_failures(delta, TRIALS), (fails, queries)


def test_bucket_count_grows_logarithmically():
    rng = np.random.default_rng(3)
    sizes = []
    for n in (1_000, 10_000, 100_000):
        ts = np.arange(n)
        s = SlidingLpNorm(1.0, n, eps=0.1, rows=64, seed=1).update(ts, rng.integers(0, 1000, n))
        sizes.append(len(s))
    assert sizes[2] < 3 * sizes[0], sizes  # ~ k log N, far below N


def test_batches_and_one_at_a_time_agree():
    rng = np.random.default_rng(8)
    ts, idx, val = stream(rng, "zipf", n=300)
    whole = SlidingLpNorm(1.0, 200, eps=0.2, rows=64, seed=3).update(ts, idx, val)
    parts = SlidingLpNorm(1.0, 200, eps=0.2, rows=64, seed=3)
    for a in range(0, 300, 37):
        parts.update(ts[a : a + 37], idx[a : a + 37], val[a : a + 37])
    one = SlidingLpNorm(1.0, 200, eps=0.2, rows=64, seed=3)
    for t, i, v in zip(ts.tolist(), idx.tolist(), val.tolist()):
        one.add(t, i, v)
    exact = window_norm(ts, idx, val, int(ts[-1]), 200, 1.0)
    low, high = whole.guarantee()
    for s in (whole, parts, one):
        assert low * exact * 0.8 <= s.estimate() <= high * exact * 1.2


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_merge_of_interleaved_streams(p):
    eps, delta, window = 0.2, 0.1, 300
    rng = np.random.default_rng(77)
    fails = queries = 0
    for trial in range(100):
        ts, idx, val = stream(rng, "zipf")
        owner = rng.integers(0, 2, ts.size)
        a = SlidingLpNorm(p, window, eps, delta, seed=trial).update(ts[owner == 0], idx[owner == 0], val[owner == 0])
        b = SlidingLpNorm(p, window, eps, delta, seed=trial).update(ts[owner == 1], idx[owner == 1], val[owner == 1])
        a_bytes = a.to_bytes()
        m = a.merge(b)
        assert a.to_bytes() == a_bytes
        low, high = m.guarantee()
        for w in (window, window // 2):
            exact = window_norm(ts, idx, val, int(ts.max()), w, p)
            est = m.estimate(now=int(ts.max()), window=w)
            queries += 1
            fails += not (low * exact <= est <= high * exact)
    assert fails / queries <= allowed_failures(delta, 100), (fails, queries)


def test_sliding_join_size():
    """p = 2: windowed inner product of two streams with the same seed,
    whole window inside the sketch (no straddling bucket)."""
    delta = 0.1
    z = NormalDist().inv_cdf(1 - delta / 2)
    rng = np.random.default_rng(21)
    fails = 0
    trials = 150
    for trial in range(trials):
        ts = np.arange(400)
        ui, vi = (rng.zipf(1.3, 400) - 1) % 100, (rng.zipf(1.3, 400) - 1) % 100
        su = SlidingLpNorm(2.0, 1000, 0.2, delta, seed=trial).update(ts, ui)
        sv = SlidingLpNorm(2.0, 1000, 0.2, delta, seed=trial).update(ts, vi)
        u, v = np.bincount(ui, minlength=100), np.bincount(vi, minlength=100)
        exact = float(u @ v)
        sd = np.sqrt(((u @ u) * (v @ v) + exact**2) / su.rows)
        fails += abs(su.inner_product(sv) - exact) > z * sd
    assert fails / trials <= allowed_failures(delta, trials), fails


# ------------------------------------------------------------ bytes, errors
def build():
    rng = np.random.default_rng(4)
    ts, idx, val = stream(rng, "zipf", n=400)
    return SlidingLpNorm(1.5, 250, eps=0.2, delta=0.1, seed=5).update(ts, idx, val)


def test_bytes_round_trip_and_cross_process():
    s = build()
    b = s.to_bytes()
    assert SlidingLpNorm.from_bytes(b) == s
    assert pickle.loads(pickle.dumps(s)) == s
    assert SlidingLpNorm.from_bytes(SlidingLpNorm(1.0, 10).to_bytes()) == SlidingLpNorm(1.0, 10)
    t = StableSketch(0.5, 33, seed=2).update([1, 2], [3.0, 4.0])
    assert StableSketch.from_bytes(t.to_bytes()) == t
    code = (
        "import sys\n"
        "from tests.test_lp_norms import build\n"
        "sys.stdout.write(build().to_bytes().hex())\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert bytes.fromhex(out.stdout) == b


def test_corrupt_bytes():
    b = build().to_bytes()
    for n in range(0, len(b), max(1, len(b) // 200)):
        with pytest.raises(CorruptSketchError):
            SlidingLpNorm.from_bytes(b[:n])
    for i in range(0, len(b), max(1, len(b) // 100)):
        c = bytearray(b)
        c[i] ^= 0x01
        with pytest.raises(CorruptSketchError):
            SlidingLpNorm.from_bytes(bytes(c))
    with pytest.raises(CorruptSketchError, match="expected family id 2"):
        StableSketch.from_bytes(b)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda s: s.update([900], [1], [-1.0]), ValueError, "non-negative finite numbers .* found -1.0"),
        (lambda s: s.update([900], [1], [float("nan")]), ValueError, "found nan"),
        (lambda s: s.update([900, 901], [1], [1.0, 2.0]), ValueError, "different lengths \\(2 and 1\\)"),
        (lambda s: s.update([900], [1.5]), ValueError, "found float"),
        (lambda s: s.update([1], [1]), LateDataError, "timestamp 1 is older"),
        (lambda s: s.estimate(window=0), ValueError, "window must be in"),
        (lambda s: s.merge(SlidingLpNorm(1.5, 250, 0.2, 0.1, seed=6)), IncompatibleSketchError,
         "different seeds: 5 and 6"),
        (lambda s: s.merge(SlidingLpNorm(1.0, 250, 0.2, 0.1, seed=5)), IncompatibleSketchError,
         "different p: 1.5 and 1.0"),
    ],
)
def test_bad_input_changes_nothing(call, exc, match):
    s = build()
    before = s.to_bytes()
    with pytest.raises(exc, match=match):
        call(s)
    assert s.to_bytes() == before


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: SlidingLpNorm(0.0, 10), "p must be in \\(0, 2\\]"),
        (lambda: SlidingLpNorm(2.5, 10), "p must be in \\(0, 2\\]"),
        (lambda: SlidingLpNorm(1.0, 0), "window must be in"),
        (lambda: SlidingLpNorm(1.0, 10, eps=1.5), "eps must be in \\(0, 1\\)"),
        (lambda: SlidingLpNorm(1.0, 10, delta=0), "delta must be in \\(0, 1\\)"),
        (lambda: StableSketch(1.0, 0), "rows must be in"),
        (lambda: StableSketch(1.0, 5).update([1], ["a"]), "values must be numbers"),
        (lambda: StableSketch(1.0, 5).merge(StableSketch(1.0, 6)), "different rows: 5 and 6"),
    ],
)
def test_bad_parameters(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


def test_an_update_whose_sums_would_overflow_is_refused_unchanged():
    """Every sketch the public API builds writes bytes its reader takes
    back (issue 19): values whose p-stable sums overflow float64 are
    refused, the sketch unchanged; large finite ones round-trip."""
    s = SlidingLpNorm(2.0, 100, eps=0.3, delta=0.3, seed=1).update([5], [3], [1e300])
    before = s.to_bytes()
    with pytest.raises(ValueError, match="overflow float64"):
        s.update([10, 20], [1, 2], [1e308, 1e308])
    assert s.to_bytes() == before and SlidingLpNorm.from_bytes(before) == s
    big = SlidingLpNorm(1.0, 100, eps=0.3, delta=0.3, seed=1).update([10, 20], [1, 2], [1e300, 1e300])
    assert SlidingLpNorm.from_bytes(big.to_bytes()) == big


@pytest.mark.parametrize("p", [0.1, 0.37, 1.5, 1.99])
def test_median_table_is_the_bisection(p, request):
    """The table median_abs_stable reads is median_by_bisection's values
    (a sample; --slow recomputes every entry), and between its points the
    interpolation stays within 2e-6 of the bisection.  At p = 1 and p = 2
    the table holds the closed forms, which the bisection meets to its own
    tolerance (1e-9 relative), not to the last bits."""
    from lp_norms.stable import _MEDIAN_STEP, _MEDIANS, median_by_bisection

    assert median_abs_stable(p) == pytest.approx(median_by_bisection(p), rel=1e-12)
    between = p + _MEDIAN_STEP / 2 if p < 2 else 1.995
    assert median_abs_stable(between) == pytest.approx(median_by_bisection(between), rel=2e-6)
    if request.config.getoption("--slow") and p == 0.1:
        for i, m in enumerate(_MEDIANS):
            at = round(0.1 + i * _MEDIAN_STEP, 2)
            assert m == pytest.approx(median_by_bisection(at), rel=1e-9 if at in (1.0, 2.0) else 1e-12), i
        assert (_MEDIANS[90], _MEDIANS[190]) == (median_abs_stable(1.0), median_abs_stable(2.0))


def test_decoding_an_unusual_p_costs_no_more_than_a_usual_one():
    """A forged p (1.0000001) must not send the decoder into 0.1-0.5 s of
    numerical integration (issue 19): the median is a table read, so no
    distribution function is evaluated while decoding."""
    from unittest import mock

    from lp_norms import stable

    data = SlidingLpNorm(1.0000001, 100, eps=0.3, delta=0.3, rows=40).update([1, 2], [1, 2], [1.0, 2.0]).to_bytes()
    with mock.patch.object(stable, "_cdf_abs", side_effect=AssertionError("integrated while decoding")):
        back = SlidingLpNorm.from_bytes(data)
        back.estimate()
    assert back.to_bytes() == data


@settings(max_examples=examples(120), deadline=None)
@given(st.data())
def test_elements_form_answers_exactly_and_takes_buckets_past_rows(data):
    """While the window holds at most ``rows`` elements (one per time and
    index) the sketch keeps them and its estimate is the exact norm (its
    sketch the exact sketch of the window); past ``rows`` it holds the
    buckets one batch of its elements builds in a sketch that holds
    buckets from the start; a union of sketches in the elements form is
    exact, merged or not."""
    p = data.draw(st.sampled_from([0.5, 1.0, 1.5, 2.0]))
    window = data.draw(st.integers(1, 60))
    n = data.draw(st.integers(1, 70))
    ts = np.sort(np.array(data.draw(st.lists(st.integers(0, 150), min_size=n, max_size=n))))
    idx = np.array(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)))
    vals = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype=float)
    make = lambda: SlidingLpNorm(p, window, eps=0.3, delta=0.3, seed=4)  # noqa: E731
    cut = data.draw(st.integers(0, n))
    s = make().update(ts[:cut], idx[:cut], vals[:cut]).update(ts[cut:], idx[cut:], vals[cut:])

    def exact(now, w):
        inside = (ts > now - w) & (ts <= now)
        f = {}
        for i, v in zip(idx[inside].tolist(), vals[inside].tolist()):
            f[i] = f.get(i, 0.0) + v
        return sum(x ** p for x in f.values()) ** (1 / p)

    live = {(t, i) for t, i, v in zip(ts.tolist(), idx.tolist(), vals.tolist()) if v and t > ts[-1] - window}
    if s.elements is not None:
        assert s.elements == len(live) <= s.rows
        now = int(ts[-1]) + data.draw(st.integers(0, 3))
        w = data.draw(st.integers(1, window))
        assert s.estimate(now, w) == pytest.approx(exact(now, w), rel=1e-12, abs=1e-12)
    whole = make().update(ts, idx, vals)
    once = make()
    once._elements = None
    once.update(ts, idx, vals)
    assert whole._as_buckets() == once, "the buckets of the elements: those of one batch of them"
    assert (whole.elements is None) == (len(live) > whole.rows)
    assert SlidingLpNorm.from_bytes(whole.to_bytes()) == whole
    half = n // 2
    parts = [make().update(ts[a:b], idx[a:b], vals[a:b]) for a, b in ((0, half), (half, n)) if b > a]
    if all(x.elements is not None for x in parts):
        assert SlidingLpNorm.union_estimate(parts) == pytest.approx(exact(int(ts[-1]), window), rel=1e-12, abs=1e-12)
        merged = SlidingLpNorm.merge_all(parts)
        if merged.elements is not None:
            assert merged.estimate() == pytest.approx(exact(int(ts[-1]), window), rel=1e-12, abs=1e-12)
