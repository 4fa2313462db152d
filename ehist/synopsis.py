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

* ``copy()`` and the state's half of equality, from ``_state`` (the
  attributes that hold it: arrays are copied and compared element-wise,
  lists item by item, other objects by their ``copy()`` and ``==``);
* read-only parameters (:func:`parameter`).

A family declares ``_names`` (its parameters as messages name them, in the
order of ``_params()``) and ``_state``, and defines ``_params()``,
``_repr_params()``, ``_repr_state()``, ``_union(sketches)``, ``to_bytes()``
and ``from_bytes()``; it may override ``copy()`` and ``_same_state(other)``
where its state needs more (a cache to drop, a buffer shared until
written).  Each concrete class registers itself
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

import numpy as np

from .errors import IncompatibleSketchError

__all__ = ["Synopsis", "SYNOPSES", "parameter"]

#: Every concrete synopsis class by name, filled in as the families are
#: imported (``tests/test_contract.py`` runs the contract over it).
SYNOPSES: dict[str, type] = {}


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def parameter(attribute: str, doc: str | None = None) -> property:
    """A read-only property of a synopsis's parameter held in
    ``attribute`` (``eps = parameter("_eps")``)."""
    return property(lambda self: getattr(self, attribute), doc=doc)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _copied(value):
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(x) for x in value)
    return value.copy() if hasattr(value, "copy") else value


def _attributes(obj) -> list:
    """Every attribute an instance holds: its slots over the classes, or its ``__dict__``."""
    names = [a for c in type(obj).__mro__ for a in getattr(c, "__slots__", ()) if hasattr(obj, a)]
    return names + list(getattr(obj, "__dict__", {}))


class Synopsis:
    """The base of every synopsis (see the module docstring)."""

    __slots__ = ()
    #: The parameters as merge messages name them, in ``_params()`` order.
    _names: ClassVar[tuple] = ()
    #: What merge messages call two of them (default: "<class> sketches").
    _noun: ClassVar[str | None] = None
    #: The attributes holding the state (not the parameters): what ``copy``
    #: copies rather than shares, and what equality compares.
    _state: ClassVar[tuple] = ()

    def __init_subclass__(cls, abstract: bool = False, **kwargs):
        """Registers the class in :data:`SYNOPSES` unless it is a shared
        base (``class KeyedHistograms(Synopsis, abstract=True)``) or private."""
        super().__init_subclass__(**kwargs)
        if not abstract and not cls.__name__.startswith("_"):
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
        """Whether ``other`` (same class and parameters) holds the same
        state: every attribute of ``_state`` alike."""
        return all(_same(getattr(self, a), getattr(other, a)) for a in self._state)

    @classmethod
    def _union(cls, sketches: list):
        """The union of compatible synopses (checked), none changed."""
        raise NotImplementedError

    @classmethod
    def _examples(cls) -> list:
        """Instances for the contract tests: the first empty, the others
        with the state the family can hold (updated, merged, at the edges)."""
        return []

    @classmethod
    def from_bytes(cls, data):
        """Decode :meth:`to_bytes` output.

        Raises
        ------
        CorruptSketchError (a ValueError)
            Truncated, altered or foreign bytes, or a state no update or
            merge produces; the message says what was expected and found.
        """
        raise NotImplementedError

    # ------------------------------------------------------------ written once
    @property
    def newest(self):
        """The newest timestamp seen (None before any update)."""
        return getattr(self, "_newest", None)

    @property
    def window(self) -> int:
        """``N``: the longest window that can be queried (time units)."""
        return self._window

    def copy(self):
        """An independent copy: the ``_state`` attributes copied, the
        parameters (immutable) shared."""
        out = object.__new__(type(self))
        for a in _attributes(self):
            value = getattr(self, a)
            setattr(out, a, _copied(value) if a in self._state else value)
        return out

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
    def _compatible_at(cls, sketches, now):
        """``(sketches as a list, the time to answer at)`` for a query of
        their union without merging: every one checked against the first
        as a merge checks them; ``now`` as given, else their newest time
        (None when none has seen an item)."""
        sk = list(sketches)
        for s in sk[1:]:
            sk[0]._check_compatible(s)
        stamps = [s.newest for s in sk if s.newest is not None]
        return sk, (max(stamps) if now is None and stamps else now)

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
