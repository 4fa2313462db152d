"""Rows of many sketches in one set of flat arrays.

Several families keep a sparse key's rows themselves while they are few
(the ECM-sketch's and heavy hitters' rows form, the L_p sketch's elements
form): ``(time, hash, value)`` per time and item, values summed.  A column
of many such sketches holds them flat: sketch ``i``'s rows at
``offsets[i]:offsets[i + 1]``, by time, then hash.  :class:`FlatRows` gives
the layout's operations once (the families add their answers and codecs:
:class:`frequencies.rows.Rows`, :class:`lp_norms.elements.Elements`).

Examples
--------
>>> import numpy as np
>>> class Ints(FlatRows):
...     __slots__ = ()
>>> r = Ints.canonical([0, 0, 1], np.array([5, 5, 7]), np.array([3, 3, 9], np.uint64), np.array([1, 2, 1]),
...                    np.array([5, 7]), 10, 2)
>>> r.offsets.tolist(), r.values.tolist()     # sketch 0: (5, 3) twice, one row of 3
([0, 1, 2], [3, 1])
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np

from .errors import CorruptSketchError
from .segments import gather, order_by_three
from .validation import INT64_MIN

__all__ = ["FlatRows", "cutoffs", "row_times", "union_groups"]


def cutoffs(at, window: int) -> np.ndarray:
    """``at - window`` per time, held at int64's floor (a row counts when
    its time is above its sketch's cutoff: no valid time is int64's
    smallest)."""
    at = np.asarray(at, dtype=np.int64)
    return np.maximum(at, np.int64(INT64_MIN + window)) - np.int64(window)


class _Fields(NamedTuple):
    offsets: np.ndarray
    ts: np.ndarray
    hashes: np.ndarray
    values: np.ndarray


class FlatRows(_Fields):
    """The rows of many sketches: sketch ``i``'s ``offsets[i]:offsets[i +
    1]``, their times (int64), hashes (uint64) and values (``value_dtype``,
    above 0)."""

    __slots__ = ()
    #: The values' type (int64 counts and sums, float64 L_p values).
    value_dtype: ClassVar[type] = np.int64

    def __len__(self) -> int:
        return self.offsets.size - 1

    @property
    def owner(self) -> np.ndarray:
        """Each row's sketch."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def none(cls) -> tuple:
        """One sketch's rows when it has none: ``(ts, hashes, values)``."""
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=cls.value_dtype)

    @classmethod
    def empty(cls, n: int):
        return cls(np.zeros(n + 1, dtype=np.int64), *cls.none())

    @classmethod
    def of(cls, parts: list):
        """The rows of ``(ts, hashes, values)`` triples (None: none), in order."""
        parts = [cls.none() if p is None else p for p in parts]
        if not parts:
            return cls.empty(0)
        counts = np.array([p[0].size for p in parts], dtype=np.int64)
        return cls(np.concatenate([[0], np.cumsum(counts)]), *(np.concatenate(c) for c in zip(*parts)))

    @classmethod
    def concat(cls, parts: list):
        shift = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        return cls(np.concatenate([[0]] + [p.offsets[1:] + s for p, s in zip(parts, shift)]),
                   *(np.concatenate([getattr(p, f) for p in parts]) for f in ("ts", "hashes", "values")))

    def sketch(self, i: int) -> tuple:
        """Sketch ``i``'s ``(ts, hashes, values)`` (copies)."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.ts[a:b].copy(), self.hashes[a:b].copy(), self.values[a:b].copy()

    def take(self, indices):
        """The sketches at ``indices``, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        a, b = self.offsets[idx], self.offsets[idx + 1]
        return type(self)(np.concatenate([[0], np.cumsum(b - a)]), gather(self.ts, a, b), gather(self.hashes, a, b),
                          gather(self.values, a, b))

    @classmethod
    def canonical(cls, owner, ts, hashes, values, newest, window: int, n: int):
        """Each sketch's rows as the families keep them (row ``j`` of sketch
        ``owner[j]``, of ``n``): those inside the window as of the sketch's
        ``newest`` and of a value above 0, one per (time, hash) with the
        values summed in the order given (sums past float64: inf, which the
        families refuse), ordered by time, then hash."""
        owner = np.asarray(owner, dtype=np.int64)
        keep = (ts > cutoffs(newest, window)[owner]) & (values > 0)
        owner, ts, hashes, values = owner[keep], ts[keep], hashes[keep], values[keep].astype(cls.value_dtype)
        order = order_by_three(owner, ts, hashes)  # stable: a union's parts, each in order, merge in one sort
        owner, ts, hashes, values = owner[order], ts[order], hashes[order], values[order]
        if ts.size > 1:
            first = np.flatnonzero(np.r_[True, (owner[1:] != owner[:-1]) | (ts[1:] != ts[:-1])
                                         | (hashes[1:] != hashes[:-1])])
            if first.size < ts.size:
                with np.errstate(over="ignore"):
                    values = np.add.reduceat(values, first)
                owner, ts, hashes = owner[first], ts[first], hashes[first]
        return cls(np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))]).astype(np.int64), ts, hashes,
                   values)


def union_groups(starts: np.ndarray, n: int, live: np.ndarray, form: np.ndarray) -> tuple:
    """What a union of groups of sketches needs to know of each group
    (group ``g``: sketches ``starts[g]`` to the next start, of ``n``;
    ``live``: the sketches with a newest time, ``form``: those keeping
    their rows): ``(group_of, lone, pick, rows_only)``, each sketch's
    group; the groups of one live sketch or none (their union is a copy of
    it, or of their first); each group's first live sketch (else its
    first); the groups whose live sketches all keep their rows.

    >>> union_groups(np.array([0, 2]), 4, np.array([True, True, False, True]), np.array([True, False, True, True]))
    ... # doctest: +NORMALIZE_WHITESPACE
    (array([0, 0, 1, 1]), array([False, True]), array([0, 3]), array([False, True]))
    """
    group_of = np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.append(starts, n)))
    lone = np.bincount(group_of[live], minlength=starts.size) <= 1
    pick = starts.copy()
    live_at = np.flatnonzero(live)
    pick[group_of[live_at[::-1]]] = live_at[::-1]  # the last assignment wins: each group's first live sketch
    rows_only = np.bincount(group_of[live & ~form], minlength=starts.size) == 0
    return group_of, lone, pick, rows_only


def row_times(gaps: np.ndarray, hashes: np.ndarray, newest: int, window: int, name: str, what: str) -> np.ndarray:
    """One sketch's row times from their stored gaps (``newest`` less the
    first, then each later gap added), with the checks every family's
    reader makes (:func:`ehist.compiled.read_row_times` makes them for many
    at once): the first row inside ``window`` and above int64's floor, the
    later gaps summing to at most the first, one row per time and hash in
    order.  CorruptSketchError naming ``what`` (rows, elements) otherwise.

    >>> row_times(np.array([5, 2, 0], np.uint64), np.array([1, 2, 3], np.uint64), 10, 8, "S", "rows").tolist()
    [5, 7, 7]
    """
    m = gaps.size
    if not m:
        return np.zeros(0, dtype=np.int64)
    first = int(gaps[0])
    if first >= window or newest - first <= INT64_MIN:
        raise CorruptSketchError(f"{name}: expected the first of the {what} inside the window ({window}), found it "
                                 f"{first} before the newest")
    later = gaps[1:]
    if later.size and (int(later.max()) > first or sum(later.tolist()) > first):
        raise CorruptSketchError(f"{name}: expected {what} times up to the newest, found later ones")
    ts = (np.int64(newest) - np.int64(first) + np.concatenate([[0], np.cumsum(later.astype(np.int64))])).astype(
        np.int64)
    if m > 1 and not np.all((later > 0) | (hashes[1:] > hashes[:-1])):
        raise CorruptSketchError(f"{name}: expected one of the {what} per time and hash, ordered by time then hash")
    return ts
