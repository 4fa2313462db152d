"""Values to ordered bins of relative width: the order-preserving encoding of
:class:`~quantiles.SlidingQuantiles`.

A value ``x > 0`` falls in bin ``i = ceil(log_gamma(x))``, the interval
``(gamma**(i - 1), gamma**i]`` with ``gamma = (1 + a) / (1 - a)`` for a
relative accuracy ``a`` (DDSketch's logarithmic mapping: Masson, Rim and
Lee, VLDB 2019).  The bin's representative ``2 gamma**i / (gamma + 1)`` is
within ``a |x|`` of every ``x`` in it.  Negative values mirror the positive
bins and zero has a bin of its own, so one int64 key orders every finite
float::

    key(x) =  i(x) + OFFSET    x > 0
    key(x) =  0                x == 0
    key(x) = -(i(|x|) + OFFSET)  x < 0

``OFFSET = 2**31`` puts the bin of every finite float (subnormals included)
above 0 for every accuracy this module accepts.  Integers are values like
any other (a documented resolution: ``a`` relative), so one encoding serves
delays in milliseconds and sizes in bytes alike.

>>> m = LogMapping(0.01)
>>> k = m.keys(np.array([-3.0, 0.0, 0.5, 100.0, 101.0]))
>>> bool(np.all(np.diff(k) >= 0))
True
>>> [round(float(v), 2) for v in m.values(k)]
[-2.97, 0.0, 0.5, 100.49, 100.49]
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["LogMapping", "OFFSET", "MIN_ACCURACY", "MAX_ACCURACY"]

OFFSET = 1 << 31
MIN_ACCURACY = 1e-6
MAX_ACCURACY = 0.5
#: Bin edges are widened by this relative amount so that float rounding in
#: the logarithm never puts a value outside its bin's reported interval.
_SLACK = 1e-9
_SMALLEST = 5e-324  # the smallest positive float64
_LARGEST = np.finfo(np.float64).max


def check_accuracy(accuracy) -> float:
    """``accuracy`` as a float in ``[MIN_ACCURACY, MAX_ACCURACY]``."""
    if isinstance(accuracy, (bool, np.bool_)) or not isinstance(accuracy, numbers.Real) \
            or not MIN_ACCURACY <= float(accuracy) <= MAX_ACCURACY:
        raise ValueError(f"accuracy must be a number in [{MIN_ACCURACY:g}, {MAX_ACCURACY:g}], got {accuracy!r}")
    return float(accuracy)


class LogMapping:
    """Bins of relative accuracy ``accuracy`` (see the module docstring)."""

    def __init__(self, accuracy: float):
        self.accuracy = check_accuracy(accuracy)
        self.gamma = (1.0 + self.accuracy) / (1.0 - self.accuracy)
        self.log_gamma = math.log1p(2.0 * self.accuracy / (1.0 - self.accuracy))
        self._log_rep = math.log(2.0 / (self.gamma + 1.0))
        #: Bin numbers ``i`` of the smallest and largest positive float.
        self.lowest = math.ceil(math.log(_SMALLEST) / self.log_gamma) - 1
        self.highest = math.ceil(math.log(_LARGEST) / self.log_gamma) + 1

    def valid(self, keys: np.ndarray) -> np.ndarray:
        """Whether each key is one :meth:`keys` can give."""
        i = np.abs(keys) - OFFSET
        return (keys == 0) | ((i >= self.lowest) & (i <= self.highest))

    def keys(self, values: np.ndarray) -> np.ndarray:
        """int64 key of each finite float64 value (order-preserving)."""
        x = np.asarray(values, dtype=np.float64)
        out = np.zeros(x.shape, dtype=np.int64)
        nz = x != 0
        i = np.ceil(np.log(np.abs(x[nz])) / self.log_gamma).astype(np.int64) + OFFSET
        out[nz] = np.where(x[nz] > 0, i, -i)
        return out

    def _power(self, i: np.ndarray, shift: float = 0.0) -> np.ndarray:
        with np.errstate(over="ignore", under="ignore"):
            return np.minimum(np.exp(i * self.log_gamma + shift), _LARGEST)

    def values(self, keys: np.ndarray) -> np.ndarray:
        """The representative of each key's bin: within ``accuracy`` of
        every value in the bin, relatively."""
        k = np.asarray(keys, dtype=np.int64)
        mag = self._power((np.abs(k) - OFFSET).astype(np.float64), self._log_rep)
        return np.where(k == 0, 0.0, np.where(k > 0, mag, -mag))

    def edges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)``: every value of each key's bin lies in ``[low,
        high]`` (widened by one part in 10**9 for float rounding)."""
        k = np.asarray(keys, dtype=np.int64)
        i = (np.abs(k) - OFFSET).astype(np.float64)
        with np.errstate(over="ignore"):
            top = self._power(i) * (1.0 + _SLACK)
        bottom = self._power(i - 1.0) * (1.0 - _SLACK)
        low = np.where(k == 0, 0.0, np.where(k > 0, bottom, -top))
        high = np.where(k == 0, 0.0, np.where(k > 0, top, -bottom))
        return low, high
