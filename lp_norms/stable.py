"""Symmetric p-stable variables, generated on the fly from (seed, row, index).

The standard symmetric p-stable law has characteristic function
``exp(-|t|**p)`` (Cauchy at p = 1, Normal with variance 2 at p = 2).  Each
variable ``X[row, index]`` is a pure function of the seed, the row and the
index: two 64-bit hashes give two uniforms, which the Chambers-Mallows-Stuck
transform turns into a p-stable value.  No matrix is stored, and every
process (every Spark executor) derives the same variables.

Examples
--------
>>> round(median_abs_stable(1.0), 6)     # |Cauchy|: median 1
1.0
>>> round(median_abs_stable(2.0), 6)     # |N(0, 2)|: sqrt(2) * 0.674490
0.953873
>>> x = stable_variates(1.5, seed=7, rows=3, index_hashes=np.array([1, 2], dtype=np.uint64))
>>> x.shape, bool(np.all(x == stable_variates(1.5, 7, 3, np.array([1, 2], dtype=np.uint64))))
((3, 2), True)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ehist.hashing import mix64

__all__ = ["stable_variates", "median_abs_stable", "stable_density", "check_p"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SECOND = np.uint64(0xD1B54A32D192ED03)
_ROW_TAG = 0x5EED5EED5EED5EED
_MASK64 = (1 << 64) - 1


def check_p(p) -> float:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ValueError(f"p must be a number in (0, 2], got {p!r}")
    p = float(p)
    if not (0.0 < p <= 2.0) or math.isnan(p):
        raise ValueError(f"p must be in (0, 2], got {p}")
    if p < 0.1:
        raise ValueError(
            f"p must be >= 0.1: the p-stable variables grow like u**(-1/p) and overflow "
            f"float64 near p = 0.05; got {p}"
        )
    return p


def _row_keys(seed: int, rows: int) -> np.ndarray:
    r = np.arange(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        base = mix64(np.array([(seed ^ _ROW_TAG) & _MASK64], dtype=np.uint64))[0]
        return mix64(r * _GOLDEN + base)


def _uniform(h: np.ndarray) -> np.ndarray:
    """uint64 -> float64 strictly inside (0, 1)."""
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 2.0**53)


def stable_variates(p: float, seed: int, rows: int, index_hashes: np.ndarray) -> np.ndarray:
    """The ``rows x len(index_hashes)`` matrix of p-stable variables.

    Parameters
    ----------
    p : float in (0, 2]
    seed : int
    rows : int
    index_hashes : uint64 array
        64-bit hashes of the vector indexes (:func:`ehist.hashing.hash64`).
    """
    keys = _row_keys(seed, rows)[:, None]
    idx = np.asarray(index_hashes, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        a = mix64(idx ^ keys)
        b = mix64((a ^ _SECOND) + _GOLDEN)
    theta = np.pi * (_uniform(a) - 0.5)
    if p == 1.0:
        return np.tan(theta)
    w = -np.log(_uniform(b))
    if p == 2.0:
        return 2.0 * np.sin(theta) * np.sqrt(w)
    return (
        np.sin(p * theta)
        / np.cos(theta) ** (1.0 / p)
        * (np.cos((1.0 - p) * theta) / w) ** ((1.0 - p) / p)
    )


_NOLAN_POINTS = 100_000


def _cdf(p: float, x: float) -> float:
    """P(X <= x) for x > 0, standard symmetric p-stable, p != 1.

    Nolan's integral over a finite interval (J. P. Nolan, Numerical
    calculation of stable densities and distribution functions, 1997) with
    beta = 0, by the midpoint rule (no endpoint evaluations; >= 7
    significant digits for p >= 0.3 at this many points).
    """
    h = (np.pi / 2) / _NOLAN_POINTS
    theta = (np.arange(_NOLAN_POINTS) + 0.5) * h
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        v = (np.cos(theta) / np.sin(p * theta)) ** (p / (p - 1)) * np.cos((p - 1) * theta) / np.cos(theta)
        g = np.exp(-(x ** (p / (p - 1))) * v)
    integral = float(g.sum() * h)
    return 0.5 + integral / np.pi if p < 1 else 1.0 - integral / np.pi


def _cdf_abs_fourier(p: float, x: float) -> float:
    """P(|X| <= x) = (2/pi) int_0^inf sin(x t)/t exp(-t^p) dt (Simpson).

    Used near p = 1, where Nolan's form has the exponent p / (p - 1)."""
    upper = 40.0 ** (1.0 / p)
    n = 400_001
    t = np.linspace(0.0, upper, n)
    y = np.empty_like(t)
    y[0] = x
    y[1:] = np.sin(x * t[1:]) / t[1:] * np.exp(-(t[1:] ** p))
    h = upper / (n - 1)
    integral = h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())
    return 2.0 / np.pi * float(integral)


def _cdf_abs(p: float, x: float) -> float:
    """P(|X| <= x)."""
    if p == 1.0:
        return 2.0 / np.pi * math.atan(x)
    if p == 2.0:
        return math.erf(x / 2.0)
    if abs(p - 1.0) < 0.1:
        return _cdf_abs_fourier(p, x)
    return 2.0 * _cdf(p, x) - 1.0


@lru_cache(maxsize=64)
def median_abs_stable(p: float) -> float:
    """Median of ``|X|`` for the standard symmetric p-stable law.

    Closed forms at p = 1 (1) and p = 2 (``sqrt(2) * 0.67448975``);
    otherwise bisection on Nolan's integral form of the distribution
    function, to at least 6 significant digits down to p = 0.1 (the
    midpoint rule at 100k and 1.6M points agrees to 1e-6; tested against
    Monte Carlo and against the closed forms in the limit).
    """
    p = check_p(p)
    if p == 1.0:
        return 1.0
    if p == 2.0:
        return math.sqrt(2.0) * 0.6744897501960817
    lo, hi = 1e-3, 1.0
    while _cdf_abs(p, hi) < 0.5:
        lo, hi = hi, hi * 4.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if _cdf_abs(p, mid) < 0.5:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9 * hi:
            break
    return 0.5 * (lo + hi)


@lru_cache(maxsize=64)
def stable_density(p: float, x: float) -> float:
    """Density of the standard symmetric p-stable law at ``x > 0``
    (a central difference of the distribution function)."""
    p = check_p(p)
    x = float(x)
    if p == 1.0:
        return 1.0 / (np.pi * (1.0 + x * x))
    if p == 2.0:
        return math.exp(-x * x / 4.0) / math.sqrt(4.0 * np.pi)
    h = 1e-4 * x
    return (_cdf_abs(p, x + h) - _cdf_abs(p, x - h)) / (4.0 * h)
