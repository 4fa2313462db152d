"""Indyk's p-stable sketch of a vector: linear, composable, seeded."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ehist.validation import check_positive_int
from ehist.errors import CorruptSketchError
from ehist.hashing import check_seed, hash64
from ehist.serialization import Layout
from ehist.synopsis import Synopsis

from .stable import check_p, median_abs_stable, stable_density, stable_variates

__all__ = ["StableSketch", "rows_for", "sketch_matrix"]

LAYOUT = Layout("StableSketch", version=1, read=(1,), flags=0, parameters="dIQ", what="p, rows and seed")
# variates generated per block (rows x indexes), bounding temporary memory
_BLOCK = 1 << 20


def rows_for(p: float, eps: float, delta: float) -> int:
    """Rows so that ``median|y| / median|X_p|`` is within ``eps`` (relative)
    of the L_p norm with probability at least ``1 - delta``.

    The sample median of ``k`` values ``|X_p| * L`` is asymptotically normal
    with standard deviation ``1 / (2 g(m) sqrt(k))``, ``g = 2 f_p`` the
    density of ``|X_p|`` at its median ``m``; requiring
    ``z_{1-delta/2} * sd <= eps * m`` gives
    ``k = ceil((z / (4 f_p(m) m eps))**2)``, then 10 percent more for the
    finite-sample skew (the tests measure the failure rate).

    Examples
    --------
    >>> rows_for(1.0, 0.1, 0.05), rows_for(2.0, 0.1, 0.05)
    (1043, 575)
    """
    p = check_p(p)
    if not (0.0 < eps < 1.0):
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    m = median_abs_stable(p)
    z = NormalDist().inv_cdf(1.0 - delta / 2.0)
    k = (z / (4.0 * stable_density(p, m) * m * eps)) ** 2
    return max(1, math.ceil(1.1 * k))


def index_hashes(indices, seed: int) -> np.ndarray:
    """Stable 64-bit hashes of vector indexes (integers or strings)."""
    return hash64(indices, seed)


def sketch_matrix(p: float, seed: int, rows: int, hashes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``X[:, hashes] @ values``, generated block by block (float64[rows])."""
    out = np.zeros(rows, dtype=np.float64)
    step = max(1, _BLOCK // max(rows, 1))
    for i in range(0, hashes.size, step):
        x = stable_variates(p, seed, rows, hashes[i : i + step])
        out += x @ values[i : i + step]
    return out


def aggregate(hashes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the values of equal indexes (the sketch is linear)."""
    uniq, inverse = np.unique(hashes, return_inverse=True)
    return uniq, np.bincount(inverse, weights=values, minlength=uniq.size)


class StableSketch(Synopsis):
    r"""Indyk's linear sketch of a vector for its L_p norm, ``p`` in (0, 2].

    Row ``r`` holds ``y_r = sum_i X[r, i] * v_i`` with ``X`` i.i.d. standard
    symmetric p-stable (Chambers-Mallows-Stuck; Cauchy at p = 1, Gaussian
    at p = 2), each a pure function of ``(seed, r, i)``: no matrix is
    stored and every process derives the same variables.  Since
    ``y_r ~ ||v||_p X``,

    .. math:: \widehat{\|v\|_p} = \operatorname{median}_r |y_r| \,/\,
              \operatorname{median}|X_p|

    is within ``eps`` of ``||v||_p`` with probability ``1 - delta`` for
    ``rows_for(p, eps, delta)`` rows.  The sketch is linear: ``a + b``
    sketches the sum of the two vectors, ``a - b`` their difference.

    Parameters
    ----------
    p : float in (0, 2]
    rows : int
        Number of rows (see :func:`rows_for`).
    seed : int, default 0

    Examples
    --------
    >>> s = StableSketch(p=1.0, rows=rows_for(1.0, 0.1, 0.05), seed=1)
    >>> s.update([0, 1, 2, 1], [3.0, 4.0, 5.0, 2.0])   # v = (3, 6, 5)
    StableSketch(p=1, rows=1043, seed=1)
    >>> abs(s.estimate() - 14) < 0.1 * 14
    True
    >>> t = StableSketch(1.0, 1043, seed=1).update(["a", "b"], [1.0, -1.0])
    >>> (s + t).rows == 1043
    True

    References
    ----------
    P. Indyk. Stable distributions, pseudorandom generators, embeddings and
    data stream computation. FOCS 2000.  J. M. Chambers, C. L. Mallows,
    B. W. Stuck. A method for simulating stable random variables. JASA 1976.
    """

    __slots__ = ("_p", "_rows", "_seed", "_y")

    def __init__(self, p: float, rows: int, seed: int = 0):
        self._p = check_p(p)
        self._rows = check_positive_int(rows, "rows", 1, 1 << 20)
        self._seed = check_seed(seed)
        self._y = np.zeros(self._rows, dtype=np.float64)

    p = property(lambda self: self._p, doc="The norm's p.")
    rows = property(lambda self: self._rows, doc="Number of rows.")
    seed = property(lambda self: self._seed, doc="The seed of the variables.")

    @property
    def values(self) -> np.ndarray:
        """A copy of the row values ``y``."""
        return self._y.copy()

    _names = ("p", "rows", "seeds")
    _state = ("_y",)

    def _params(self) -> tuple:
        return self._p, self._rows, self._seed

    def __repr__(self) -> str:  # no time: no state to show
        return f"StableSketch({', '.join(self._repr_params())})"

    def _repr_params(self) -> list:
        return [f"p={self._p:g}", f"rows={self._rows}", f"seed={self._seed}"]

    @classmethod
    def _examples(cls) -> list:
        return [cls(1.0, 64, seed=3), cls(2.0, 64, seed=3).update(["a", "b", "b"], [1.0, 2.0, -0.5])]

    @classmethod
    def _union(cls, sketches: list) -> "StableSketch":
        """The sketch of the sum of the vectors."""
        out = sketches[0].copy()
        for other in sketches[1:]:
            out._y += other._y
        return out

    def update(self, indices, values=None) -> "StableSketch":
        """Add ``values[j]`` to coordinate ``indices[j]`` (vectorized).

        Indexes are integers or strings (hashed with the seed); values are
        finite numbers (default 1).  Equal indexes are summed first.
        """
        hashes = index_hashes(indices, self._seed)
        vals = float_values(values, hashes.size)
        if hashes.size == 0:
            return self
        uniq, sums = aggregate(hashes, vals)
        self._y += sketch_matrix(self._p, self._seed, self._rows, uniq, sums)
        return self

    def estimate(self) -> float:
        """``median |y| / median |X_p|``: the estimated L_p norm."""
        return float(np.median(np.abs(self._y))) / median_abs_stable(self._p)

    def __add__(self, other: "StableSketch") -> "StableSketch":
        self._check_compatible(other)
        out = self.copy()
        out._y += other._y
        return out

    def __sub__(self, other: "StableSketch") -> "StableSketch":
        self._check_compatible(other)
        out = self.copy()
        out._y -= other._y
        return out

    def inner_product(self, other: "StableSketch") -> float:
        """AGMS-style estimate of ``<u, v>`` from two p = 2 sketches with the
        same seed: ``mean_r(y_r z_r) / 2`` (the variables have variance 2).

        Its standard deviation is ``sqrt((|u|^2 |v|^2 + <u,v>^2) / rows)``.
        """
        self._check_compatible(other)
        if self._p != 2.0:
            raise ValueError(f"inner products need p = 2 sketches, got p = {self._p:g}")
        return float(np.dot(self._y, other._y)) / (2.0 * self._rows)

    def to_bytes(self) -> bytes:
        """Versioned bytes (family id 2): preamble, p (float64), rows
        (uint32), seed (uint64), rows x float64, CRC-32."""
        return LAYOUT.writer(0, self._p, self._rows, self._seed).raw(self._y.astype("<f8").tobytes()).finish()

    @classmethod
    def from_bytes(cls, data) -> "StableSketch":
        r, _flags, out = LAYOUT.open(data, cls)
        out._y = np.frombuffer(r.raw(8 * out._rows, f"{out._rows} row values"), dtype="<f8").astype(np.float64)
        r.expect_end()
        if not np.all(np.isfinite(out._y)):
            raise CorruptSketchError(f"{cls.__name__}: expected finite row values")
        return out


def float_values(values, n: int, nonnegative: bool = False, against: str = "indices") -> np.ndarray:
    """Finite float64 values (default all ones), optionally non-negative."""
    if values is None:
        return np.ones(n, dtype=np.float64)
    v = np.asarray(values)
    if v.ndim == 0:
        v = v.reshape(1)
    kind = "non-negative numbers" if nonnegative else "numbers"
    if v.dtype.kind not in "iufb":
        raise ValueError(f"values must be {kind}, got an array of dtype {v.dtype}")
    v = v.astype(np.float64)
    if v.shape != (n,):
        raise ValueError(f"{against} and values have different lengths ({n} and {v.shape[0]})")
    bad = ~np.isfinite(v)
    if nonnegative:
        bad |= v < 0
    if bad.any():
        rule = "non-negative finite numbers (the restricted model)" if nonnegative else "finite numbers"
        raise ValueError(f"values must be {rule}, found {v[bad][0]}")
    return v
