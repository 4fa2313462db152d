"""What a spec reads of a batch of rows (:class:`Data`), and the 8-byte
words those rows wait as in streaming state (:class:`StateWords`).

The streaming state keeps events the watermark has not passed yet as a
matrix of int64 words, one row per event and a fixed number of columns per
spec, laid out before any row is read. A spec declares those columns once
(:meth:`udaf.spec.Spec.state_words`); this module writes and reads them for
every family:

>>> import numpy as np
>>> words = StateWords((Word("value", "float64", absent=float("nan")),))
>>> data = Data(np.array([True, False, True]), {"value": np.array([2.5, 4.0])})
>>> back = words.decode(words.encode(data))
>>> back.present.tolist(), back.arrays["value"].tolist()
([True, False, True], [2.5, 4.0])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["Data", "Word", "StateWords"]


@dataclass
class Data:
    """A batch's inputs for one spec: ``present`` marks the rows whose
    inputs are all non-null (the rows the synopsis summarizes); each array
    in ``arrays`` has one entry per present row."""

    present: np.ndarray
    arrays: dict = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "Data":
        """The data of some present rows (positions among the present)."""
        return Data(np.ones(len(rows), dtype=bool), {k: v[rows] for k, v in self.arrays.items()})


@dataclass(frozen=True)
class Word:
    """One int64 column of the state's waiting events: the bits of array
    ``name`` of a :class:`Data`, read back as ``dtype``.

    ``absent``: the value written for a row that is not present (a row
    reads back as present when none of its words equals its ``absent``);
    it must be no value an input can take (hash64 never gives 0; a checked
    value is never NaN nor negative). ``constant``: the value of every
    present row, written in place of an input the spec does not read (the
    state keeps its width) and not read back. ``of(data)``: the array when
    it is derived from the data (hashes), rather than ``data.arrays[name]``.
    """

    name: str
    dtype: str
    absent: object = None
    constant: object = None
    of: Callable | None = None

    def bits(self, value) -> np.int64:
        """``value`` as ``dtype``, then its 8 bytes as an int64."""
        return np.array([value], dtype=self.dtype).view(np.int64)[0]


@dataclass(frozen=True)
class StateWords:
    """The columns a spec's events wait as in streaming state (none: a
    spec whose rows have no inputs, ``Count``)."""

    columns: tuple = ()

    @property
    def width(self) -> int:
        """Words per event: the state schema is laid out from it."""
        return len(self.columns)

    def encode(self, data: Data) -> np.ndarray:
        """Every row's words (rows x :attr:`width` int64)."""
        present = data.present
        out = np.zeros((present.size, self.width), dtype=np.int64)
        for j, word in enumerate(self.columns):
            if word.absent is not None:
                out[:, j] = word.bits(word.absent)
            if word.constant is not None:
                out[present, j] = word.bits(word.constant)
            else:
                values = word.of(data) if word.of is not None else data.arrays[word.name]
                out[present, j] = np.asarray(values).astype(word.dtype, copy=False).view(np.int64)
        return out

    def decode(self, words: np.ndarray) -> Data:
        """The :class:`Data` of :meth:`encode`'s words: the present rows'
        arrays (constant columns left out)."""
        present = np.ones(words.shape[0], dtype=bool)
        for j, word in enumerate(self.columns):
            if word.absent is not None:
                present &= words[:, j] != word.bits(word.absent)
        return Data(present, {word.name: np.ascontiguousarray(words[present, j]).view(word.dtype)
                              for j, word in enumerate(self.columns) if word.constant is None})

    @classmethod
    def unused(cls, width: int) -> "StateWords":
        """``width`` columns of zeros (a slot of release 0.1's state layout
        that the query does not use)."""
        return cls(tuple(Word(f"unused{j}", "int64", constant=0) for j in range(width)))
