"""What every synopsis of the project shares, written once.

Every family (:class:`~ehist.ExponentialHistogram`,
:class:`~distinct.SlidingHyperLogLog`, :class:`~distinct.SlidingFM`,
:class:`~lp_norms.SlidingLpNorm`, :class:`~lp_norms.StableSketch`,
:class:`~frequencies.SlidingCountMin`, :class:`~frequencies.SlidingHeavyHitters`,
:class:`~quantiles.SlidingQuantiles`) is a :class:`Synopsis`.  The base
gives each of them, from a few declarations, what they used to repeat:

* ``repr``: the class, its parameters, then its state (or ``empty``);
* equality of type, parameters and state (``__hash__`` is None: synopses
  are mutable);
* pickling through the checked bytes (``from_bytes(to_bytes())``);
* :meth:`~Synopsis.merge` and :meth:`~Synopsis.merge_all` with their
  checks: at least one synopsis, all of the class, parameters equal (the
  message names the first that differs and both values); the family's
  :meth:`~Synopsis._union` does the rest.

A family declares ``_names`` (its parameters as messages name them, in the
order of ``_params()``) and defines ``_params()``, ``_repr_params()``,
``_repr_state()``, ``_same_state(other)``, ``copy()``, ``_union(sketches)``,
``to_bytes()`` and ``from_bytes()``.  Each concrete class registers itself
in :data:`SYNOPSES` (the contract tests run over it), with its examples
(``_examples()``: instances that exercise its state, the first empty).
For instance:

>>> import numpy as np
>>> from ehist import ExponentialHistogram
>>> a = ExponentialHistogram(100, 0.1).update(np.arange(50))
>>> a == ExponentialHistogram.from_bytes(a.to_bytes()), isinstance(a, Synopsis)
(True, True)
>>> a.merge(ExponentialHistogram(200, 0.1))
Traceback (most recent call last):
...
ehist.errors.IncompatibleSketchError: cannot merge histograms with different windows: 100 and 200
>>> SYNOPSES["ExponentialHistogram"] is ExponentialHistogram
True
"""

from __future__ import annotations

from typing import ClassVar

from .errors import IncompatibleSketchError

__all__ = ["Synopsis", "SYNOPSES"]

#: Every concrete synopsis class by name, filled in as the families are
#: imported (``tests/test_contract.py`` runs the contract over it).
SYNOPSES: dict[str, type] = {}


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


class Synopsis:
    """The base of every synopsis (see the module docstring)."""

    __slots__ = ()
    #: The parameters as merge messages name them, in ``_params()`` order.
    _names: ClassVar[tuple] = ()
    #: What merge messages call two of them (default: "<class> sketches").
    _noun: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            SYNOPSES[cls.__name__] = cls

    # ------------------------------------------------------- declarations
    def _params(self) -> tuple:
        """The parameters (what two synopses must share to merge)."""
        raise NotImplementedError

    def _repr_params(self) -> list:
        """``name=value`` strings of the parameters, for ``repr``."""
        raise NotImplementedError

    def _repr_state(self) -> list:
        """``name=value`` strings of the state, for ``repr`` (a synopsis
        with a newest time; the others show ``empty``)."""
        return [f"newest={self.newest}"]

    def _same_state(self, other) -> bool:
        """Whether ``other`` (same class and parameters) holds the same state."""
        raise NotImplementedError

    @classmethod
    def _union(cls, sketches: list):
        """The union of compatible synopses (checked), none changed."""
        raise NotImplementedError

    @classmethod
    def _examples(cls) -> list:
        """Instances for the contract tests: the first empty, the others
        with the state the family can hold (updated, merged, at the edges)."""
        return []

    # ------------------------------------------------------------ written once
    @property
    def newest(self):
        """The newest timestamp seen (None before any update)."""
        return getattr(self, "_newest", None)

    @property
    def window(self) -> int:
        """``N``: the longest window that can be queried (time units)."""
        return self._window

    def __repr__(self) -> str:
        state = self._repr_state() if self.newest is not None else ["empty"]
        return f"{type(self).__name__}({', '.join(self._repr_params() + state)})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._params() == other._params() and self._same_state(other)

    __hash__ = None  # mutable

    def __reduce__(self):
        return (type(self).from_bytes, (self.to_bytes(),))

    def _check_compatible(self, other) -> None:
        """TypeError for another class; IncompatibleSketchError naming the
        first parameter that differs, with both values."""
        name = type(self).__name__
        if not isinstance(other, type(self)):
            raise TypeError(f"can only merge with {_a(name)}, got {type(other).__name__}")
        for what, ours, theirs in zip(self._names, self._params(), other._params()):
            if ours != theirs:
                raise IncompatibleSketchError(
                    f"cannot merge {self._noun or name + ' sketches'} with different {what}: {ours} and {theirs}")

    def merge(self, other):
        """The synopsis of the union of the two streams; neither changes
        (:meth:`merge_all` of the two).

        Raises
        ------
        IncompatibleSketchError (a ValueError)
            Different parameters; the message names both values.
        TypeError
            ``other`` is of another class.
        """
        return type(self).merge_all([self, other])

    @classmethod
    def merge_all(cls, sketches):
        """The union of any number of synopses of the class (same
        parameters), in one pass; none of the inputs changes.

        Raises
        ------
        ValueError
            No synopsis given.
        IncompatibleSketchError (a ValueError)
            Different parameters; the message names both values.
        TypeError
            One of another class.
        """
        sk = list(sketches)
        if not sk:
            raise ValueError("merge_all needs at least one sketch")
        for s in sk:
            if not isinstance(s, cls):
                raise TypeError(f"can only merge {cls.__name__} objects, got {type(s).__name__}")
        for s in sk[1:]:
            sk[0]._check_compatible(s)
        return cls._union(sk)
