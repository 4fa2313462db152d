"""What the distinct-count families (:mod:`udaf.hll_spec`,
:mod:`udaf.fm_spec`) share: the items of one column, hashed by
:func:`ehist.hashing.hash64` with the spec's seed, their exact answers,
per-row frames, native SQL and streaming words.  A shared family module:
the spec modules import it, never each other."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ehist.hashing import hash64

from .exact import in_window, per_key_distinct
from .frames import frame_distinct
from .inputs import ITEM, items
from .capabilities import NativeAnswer
from .data import Data, StateWords, Word
from .spec import Spec, key_now

__all__ = ["HashedItems"]


class HashedItems(Spec):
    """What the distinct-count families share: items of one column, hashed
    by :func:`ehist.hashing.hash64` with the spec's seed."""

    accepts = {"column": ITEM}
    arg_names = {"column": "item"}

    def read(self, columns, n, key_of=None):
        present, kept = items(columns["column"], self.column, self.who)
        return Data(present, {"item": kept})

    def _hashes(self, data: Data) -> np.ndarray:
        if "hash" not in data.arrays:
            data.arrays["hash"] = hash64(data.arrays["item"], self.seed)
        return data.arrays["hash"]

    def update(self, sketch, t, data):
        return sketch.update_hashes(t, self._hashes(data))

    def exact(self, t, run, keys, data, window, at=None):
        present = data.present
        inside = in_window(t, run, key_now(t, present, run, keys, at), window) & present
        codes = np.full(t.size, -1, dtype=np.int64)
        codes[present] = pd.factorize(data.arrays["item"])[0] if "item" in data.arrays \
            else pd.factorize(data.arrays["hash"])[0]
        return per_key_distinct(codes, inside, run, keys)

    def frames(self, lo, hi, data, window):
        pos = np.flatnonzero(data.present)
        sub_lo, sub_hi = np.searchsorted(pos, lo), np.searchsorted(pos, hi)
        codes = pd.factorize(data.arrays["item"])[0] if "item" in data.arrays else pd.factorize(data.arrays["hash"])[0]
        return frame_distinct(codes, sub_lo, sub_hi)

    def native_answer(self, schema):
        return NativeAnswer(aggregate=lambda columns, inside, key_text:
                            f"count(DISTINCT CASE WHEN {inside} THEN {columns['column']} END)")

    def reduction(self, schema, key_text):
        # each item's latest time: the older rows of an item change no
        # register (a null time stays null, to be reported with its key)
        return (self.column,), {"__ts": "CASE WHEN count(__ts) < count(1) THEN NULL ELSE max(__ts) END"}, self

    def state_words(self):
        # 0: no item (hash64 never gives it, p 2**-64)
        return StateWords((Word("hash", "uint64", absent=0, of=self._hashes),))
