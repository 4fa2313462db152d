"""Heavy hitters over sliding windows: ECM-sketches over prefix levels.

See :class:`SlidingHeavyHitters`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ehist.validation import integral_array, check_positive_int, checked_total, coerce_timestamps, \
    coerce_values, resolve_query, sort_batch
from ehist.errors import CorruptSketchError, SumOverflowError
from ehist.hashing import hash64
from ehist.serialization import Layout, Writer
from ehist.synopsis import Synopsis

from . import count_min as _cm
from .count_min import SlidingCountMin, exact_frequencies, in_window, live_rows, read_rows

__all__ = ["SlidingHeavyHitters", "HeavyHitter"]

#: ``struct`` format of the parameters after the preamble: bits, level bits.
#: The byte layout (drawn in :meth:`SlidingHeavyHitters.to_bytes`): format 2
#: holds levels of compact counters (no flags), 1 is still read, 3 is the
#: rows form (the flags of :data:`frequencies.count_min.ROWS_VERSION`'s).
LAYOUT = Layout("SlidingHeavyHitters", version=2, read=(1, 2, 3), flags=1 | _cm.FLAG_ROWS | _cm.FLAG_VALUES,
                parameters="BB", what="bits and level bits")
#: The rows form's parameters after bits and level bits: the levels' window,
#: eps, delta, eh_eps and seed, then the newest time.
ROWS_PARAMETERS = _cm.LAYOUT.parameters + "q"


def _check_phi(phi) -> None:
    if isinstance(phi, bool) or not isinstance(phi, (int, float, np.floating, np.integer)) \
            or not 0.0 < float(phi) <= 1.0 or math.isnan(float(phi)):
        raise ValueError(f"phi must be a number in (0, 1], got {phi!r}")


class HeavyHitter(NamedTuple):
    """One item of :meth:`SlidingHeavyHitters.heavy_hitters`."""

    item: int
    estimate: float
    lower: int
    upper: int


def levels_of(bits: int, level_bits: int) -> tuple[int, ...]:
    """Prefix lengths of the levels, shortest first, the last ``bits``.

    >>> levels_of(10, 4)
    (4, 8, 10)
    """
    bits = check_positive_int(bits, "bits", 1, 64)
    level_bits = check_positive_int(level_bits, "level_bits", 1, min(bits, 16))
    return tuple(range(level_bits, bits, level_bits)) + (bits,)


class SlidingHeavyHitters(Synopsis):
    r"""The items above a fraction ``phi`` of a sliding window's total.

    Items are integer ids in ``[0, 2**bits)`` (IPv4 addresses: ``bits=32``;
    any id: 64).  Level ``j`` is a :class:`SlidingCountMin` of the ids'
    leading ``lengths[j]`` bits, ``lengths = (level_bits, 2 level_bits, ...,
    bits)``; the last level counts the ids themselves.  A query walks down:
    it keeps the prefixes whose upper bound reaches ``phi`` times a lower
    bound on the window's total and expands their ``2**level_bits``
    children (Cormode and Muthukrishnan's hierarchical Count-Min, with
    exponential histograms as counters: the ECM-sketch's heavy hitters).

    Parameters
    ----------
    window : int
        ``N``, the longest window, in timestamp units.
    bits : int, default 32
        Ids are below ``2**bits`` (1 to 64).
    eps, delta, eh_eps, seed
        As for :class:`SlidingCountMin`, for every level.
    level_bits : int, default 4
        Bits added per level (1 to 16): fewer levels (faster updates, one
        Count-Min sketch per level) against more children per expansion.

    Notes
    -----
    **Guarantees.** For a query ``heavy_hitters(phi, now, w)`` with ``T`` the window's
    total and ``f(x)`` item ``x``'s frequency:

    * every ``x`` with ``f(x) >= phi T`` is reported, always: its prefixes'
      counters hold at least ``f(x)``, their upper bounds never less, and
      the threshold ``phi T_lower`` is at most ``phi T``;
    * a reported ``x`` has ``f(x) >= (phi (1 - 2 eh_eps) / (1 + 2 eh_eps) -
      eps) T`` with probability at least ``1 - delta`` (its upper bound is
      within ``2 eh_eps`` of a counter, and the smallest counter within
      ``eps T`` of ``f(x)`` with that probability);
    * each reported item's ``(lower, upper)`` are
      :meth:`SlidingCountMin.frequency_bounds`.

    **The rows form.** As :class:`SlidingCountMin`, while the window holds
    at most ``width`` rows (one per time and id) the sketch keeps them
    instead of its levels' counters (one list for all levels), and every
    answer is exact: the heavy hitters are the ids whose frequency reaches
    ``max(phi T, 1)``, each with ``estimate == lower == upper``.  Past
    ``width`` rows it takes the levels those rows build.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ts = np.arange(20_000)
    >>> ids = rng.integers(0, 2**32, ts.size)              # background
    >>> ids[ts % 5 == 0] = 167772161                       # 10.0.0.1: 20%
    >>> s = SlidingHeavyHitters(window=1000, bits=32).update(ts, ids)
    >>> top = s.heavy_hitters(0.1)                         # 200 of the last 1000
    >>> [h.item for h in top], top[0].lower <= 200 <= top[0].upper
    ([167772161], True)
    """

    def __init__(self, window: int, bits: int = 32, eps: float = 0.01, delta: float = 0.01,
                 eh_eps: float | None = None, seed: int = 0, level_bits: int = 4):
        self._lengths = levels_of(bits, level_bits)
        self._bits, self._level_bits = int(bits), int(level_bits)
        # the levels hold counters (in the rows form: none, their newest the sketch's)
        self._levels = [SlidingCountMin(window, eps, delta, eh_eps, seed)._counters_only() for _ in self._lengths]
        self._rows: tuple | None = _cm._no_rows()  # (times, ids, values), or None once the levels hold counters

    @property
    def rows(self) -> int | None:
        """The rows held in the rows form (None once the levels hold counters)."""
        return None if self._rows is None else int(self._rows[0].size)

    @property
    def width(self) -> int:
        """Count-Min columns per row: the most rows the rows form holds."""
        return self._levels[-1].width

    def _as_counters(self) -> "SlidingHeavyHitters":
        """This sketch with its levels' counters: itself when it holds
        them, else a new one holding what its rows build (each level
        :meth:`SlidingCountMin._as_counters` of the rows' prefixes)."""
        if self._rows is None:
            return self
        out = object.__new__(type(self))
        out._lengths, out._bits, out._level_bits = self._lengths, self._bits, self._level_bits
        out._rows = None
        newest = self.newest
        ts, ids, v = self._rows
        levels = []
        for j, level in enumerate(self._levels):
            x = level._counters_only()
            if newest is not None:
                x._rows, x._newest = (ts, self._prefix_hashes(ids, j), v), newest
                x = x._as_counters()
            levels.append(x)
        out._levels = levels
        return out

    # ----------------------------------------------------------- properties
    @property
    def bits(self) -> int:
        return self._bits

    @property
    def level_bits(self) -> int:
        return self._level_bits

    @property
    def levels(self) -> tuple:
        """The levels' sketches, shortest prefix first (do not change them;
        in the rows form, the counters its rows build)."""
        return tuple(self._as_counters()._levels)

    @property
    def items(self) -> SlidingCountMin:
        """The last level: the ids' own frequencies (in the rows form, the
        counters its rows build)."""
        return self._as_counters()._levels[-1]

    @property
    def window(self):
        """The longest window."""
        return self._levels[-1].window

    @property
    def eps(self):
        """Count-Min error (fraction of the window's total)."""
        return self._levels[-1].eps

    @property
    def delta(self):
        """Failure probability per query."""
        return self._levels[-1].delta

    @property
    def eh_eps(self):
        """Relative error of each counter."""
        return self._levels[-1].eh_eps

    @property
    def seed(self):
        """Hash seed."""
        return self._levels[-1].seed

    @property
    def newest(self):
        """Newest timestamp seen (None when empty)."""
        return self._levels[-1].newest

    _names = ("bits", "level_bits", "window", "eps", "delta", "eh_eps", "seed")
    _state = ("_levels", "_rows")

    def _params(self) -> tuple:
        return (self._bits, self._level_bits) + self._levels[-1]._params()

    def __len__(self) -> int:
        """Buckets kept, over all levels (rows kept, in the rows form)."""
        return int(self._rows[0].size) if self._rows is not None else sum(len(x) for x in self._levels)

    def _repr_params(self) -> list:
        return [f"window={self.window}", f"bits={self._bits}", f"eps={self.eps:g}", f"delta={self.delta:g}",
                f"levels={len(self._levels)}"]

    def _repr_state(self) -> list:
        if self._rows is not None:
            return [f"rows={len(self)}", f"newest={self.newest}"]
        return [f"buckets={len(self)}", f"newest={self.newest}"]

    def _same_state(self, other) -> bool:
        return _cm.same_rows(self._rows, other._rows) and super()._same_state(other)

    @classmethod
    def _examples(cls) -> list:
        ts = np.arange(0, 3000, 7)
        ids = np.where(ts % 3 == 0, 1000, ts % 4000)
        parts = [cls(500, bits=12, eps=0.1, delta=0.1, level_bits=4).update(ts[p::2], ids[p::2]) for p in range(2)]
        few = [cls(500, bits=12, eps=0.1, delta=0.1, level_bits=4).update(ts[p:40:3], ids[p:40:3], ts[p:40:3] % 4)
               for p in range(2)]
        # parts[0] holds 36 rows (width 28): its levels, example 1, are what update gives them
        return [cls(500, bits=12, eps=0.1, delta=0.1, level_bits=4), parts[0], cls.merge_all(parts), few[0],
                cls.merge_all(few)]

    # --------------------------------------------------------------- update
    def _ids(self, items) -> np.ndarray:
        """Ids as uint64, checked to lie in ``[0, 2**bits)``."""
        if hasattr(items, "to_numpy") and not isinstance(items, np.ndarray):
            items = items.to_numpy()
        if isinstance(items, (list, tuple)) and items and all(
                isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in items):
            # Python ints up to 2**64 - 1: numpy would make floats of a list past int64
            if any(not 0 <= int(i) < 1 << self._bits for i in items):
                bad = next(int(i) for i in items if not 0 <= int(i) < 1 << self._bits)
                raise ValueError(f"items must be integer ids in [0, 2**{self._bits}), found {bad}")
            return np.array([int(i) for i in items], dtype=np.uint64)
        x = integral_array(items, "items")
        if x.ndim != 1:
            x = x.reshape(-1)
        if x.dtype.kind == "b":
            raise ValueError("items must be integer ids, got booleans")
        if x.size and x.dtype.kind == "i" and int(x.min()) < 0:
            raise ValueError(f"items must be integer ids in [0, 2**{self._bits}), found {int(x.min())}")
        x = x.astype(np.uint64)
        if x.size and self._bits < 64 and int(x.max()) >= 1 << self._bits:
            raise ValueError(f"items must be integer ids in [0, 2**{self._bits}), found {int(x.max())}")
        return x

    def _prefix_hashes(self, ids: np.ndarray, j: int) -> np.ndarray:
        return hash64(ids >> np.uint64(self._bits - self._lengths[j]), self.seed)

    def update(self, timestamps, items, values=None) -> "SlidingHeavyHitters":
        """Insert a batch of ``(timestamp, id, value)`` rows, vectorized.

        Same rules as :meth:`SlidingCountMin.update`; ids outside ``[0,
        2**bits)`` are refused.  The whole batch is checked first: on an
        error no level changes.
        """
        ts = coerce_timestamps(timestamps)
        ids = self._ids(items)
        if ids.shape[0] != ts.shape[0]:
            raise ValueError(f"timestamps and items have different lengths ({ts.shape[0]} and {ids.shape[0]})")
        v = coerce_values(values, ts.shape[0])
        if ts.size == 0:
            return self
        ts, order = sort_batch(ts, np.arange(ts.size), self.newest)
        ids = ids[order]
        v = None if v is None else v[order]
        checked_total(None if v is None else v.astype(np.int64), ts.size,
                      int(self._rows[2].sum()) if self._rows is not None else max(x._row_total() for x in self._levels))
        if self._rows is not None:
            newest = int(ts[-1]) if self.newest is None else max(self.newest, int(ts[-1]))
            old_ts, old_ids, old_v = self._rows
            rows = live_rows(np.concatenate([old_ts, ts]), np.concatenate([old_ids, ids]),
                             np.concatenate([old_v, np.ones(ts.size, np.int64) if v is None else v.astype(np.int64)]),
                             newest, self.window)
            for level in self._levels:
                level._newest = newest
            self._rows = rows
            if rows[0].size > self.width:  # past width rows: the levels' counters of every row held
                self._levels, self._rows = self._as_counters()._levels, None
            return self
        for j, level in enumerate(self._levels):
            level._insert(ts, self._prefix_hashes(ids, j), v)
        return self

    def add(self, timestamp: int, item: int, value: int = 1) -> "SlidingHeavyHitters":
        """Insert one row."""
        return self.update([timestamp], [item], [value])

    # ---------------------------------------------------------------- query
    def heavy_hitters(self, phi: float, now: int | None = None, window: int | None = None) -> list:
        """The ids whose frequency may reach ``phi`` times the window's total.

        Parameters
        ----------
        phi : float in (0, 1]
        now, window
            As for :meth:`SlidingCountMin.bounds`.

        Returns
        -------
        list of :class:`HeavyHitter`
            ``(item, estimate, lower, upper)``, largest estimate first; see
            the class's guarantees.
        """
        _check_phi(phi)
        if self._rows is not None:
            return _exact_hitters(phi, [self._rows], [self.newest], now, window, self.window)
        return self._descend(phi, [level._counter_bounds(now, window) for level in self._levels])

    @classmethod
    def union_heavy_hitters(cls, sketches, phi: float, now: int | None = None, window: int | None = None) -> list:
        """:meth:`heavy_hitters` of the union of ``sketches`` (same
        parameters; partitions or sites of one stream) without merging
        them: every counter's bounds are the sums of the parts' at one
        cutoff (:meth:`SlidingCountMin.union_bounds`), as of ``now``
        (default: the newest part's), so the same guarantees hold.

        >>> a = SlidingHeavyHitters(100, bits=8).update([1, 2], [7, 7])
        >>> b = SlidingHeavyHitters(100, bits=8).update([2, 3], [7, 9])
        >>> [h.item for h in SlidingHeavyHitters.union_heavy_hitters([a, b], 0.5)]
        [7]
        """
        _check_phi(phi)
        sk, now = cls._compatible_at(sketches, now)
        live = [s for s in sk if s.newest is not None]
        if all(s._rows is not None for s in live):  # the rows form alone: their rows, exact
            return _exact_hitters(phi, [s._rows for s in live], [s.newest for s in live], now, window,
                                  sk[0].window)
        sk = [s._as_counters() for s in sk]
        return sk[0]._descend(phi, [SlidingCountMin.union_bounds([s._levels[j] for s in sk], now, window)
                                    for j in range(len(sk[0]._levels))])

    def _descend(self, phi: float, bounds: list) -> list:
        """The walk down the levels, from every level's counter bounds."""
        total_lower, _ = self._levels[-1].total_from_bounds(*bounds[-1])
        threshold = max(float(phi) * total_lower, 1.0)
        candidates = np.arange(1 << self._lengths[0], dtype=np.uint64)
        for j, level in enumerate(self._levels):
            est, lower, upper = level.answers_from_bounds(hash64(candidates, self.seed), *bounds[j])
            keep = upper >= threshold
            candidates, est, lower, upper = candidates[keep], est[keep], lower[keep], upper[keep]
            if j + 1 < len(self._levels):
                step = self._lengths[j + 1] - self._lengths[j]
                candidates = ((candidates[:, None] << np.uint64(step))
                              | np.arange(1 << step, dtype=np.uint64)[None, :]).ravel()
        order = np.lexsort((candidates, -est))
        return [HeavyHitter(int(candidates[i]), float(est[i]), int(lower[i]), int(upper[i])) for i in order]

    def frequencies(self, items, now: int | None = None, window: int | None = None):
        """:meth:`SlidingCountMin.frequencies` of ids (exact, in the rows form)."""
        ids = self._ids(items)
        if self._rows is not None:
            return exact_frequencies(self._rows, ids, now, window, self.newest, self.window)
        return self._levels[-1].frequencies_of_hashes(self._prefix_hashes(ids, -1), now, window)

    def frequency(self, item: int, now: int | None = None, window: int | None = None) -> float:
        """Estimated frequency of one id."""
        return float(self.frequencies([item], now, window)[0][0])

    def frequency_bounds(self, item: int, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """``(lower, upper)`` on one id's frequency (see SlidingCountMin)."""
        _, lower, upper = self.frequencies([item], now, window)
        return int(lower[0]), int(upper[0])

    def bounds(self, now: int | None = None, window: int | None = None) -> tuple[int, int]:
        """Bounds on the window's total (exact, in the rows form)."""
        if self._rows is not None:
            now, window = resolve_query(now, window, self.newest, self.window)
            total = 0 if now is None else int(self._rows[2][in_window(self._rows[0], now, window)].sum())
            return total, total
        return self._levels[-1].bounds(now, window)

    def estimate(self, now: int | None = None, window: int | None = None) -> float:
        """The window's total, within ``eh_eps`` of it."""
        lower, upper = self.bounds(now, window)
        return lower * 0.5 + upper * 0.5

    # ---------------------------------------------------------------- merge
    @classmethod
    def _union(cls, sk: list) -> "SlidingHeavyHitters":
        """The rows form's parts whose rows fit: their rows; otherwise level
        by level (:meth:`SlidingCountMin.merge_all`), each part in the rows
        form taking its levels' counters first."""
        live = [s for s in sk if s.newest is not None]
        if len(live) <= 1:
            return (live[0] if live else sk[0]).copy()
        if all(s._rows is not None for s in live):
            newest = max(s.newest for s in live)
            if sum(int(s._rows[2].sum()) for s in live) > 2**63 - 1:
                raise SumOverflowError("merged window total would overflow int64")
            rows = live_rows(*(np.concatenate(p) for p in zip(*(s._rows for s in live))), newest, live[0].window)
            if rows[0].size <= live[0].width:
                out = live[0].copy()
                out._rows = rows
                for level in out._levels:
                    level._newest = newest
                return out
        sk = [s._as_counters() for s in sk]
        out = sk[0].copy()
        out._levels = [SlidingCountMin.merge_all([s._levels[j] for s in sk]) for j in range(len(out._levels))]
        out._rows = None
        return out

    # -------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """Its levels' sketches, as versioned, checked bytes.

        In :mod:`ehist.serialization`'s framing (family 7, version 2; no
        flags)::

            offset  size    field
                 0       6  preamble
                 6       1  bits
                 7       1  level bits
                 8   varint L: levels (as levels_of(bits, level_bits) says)
                 .   L x varint  byte length of each level's sketch
                 .   the L levels, SlidingCountMin.to_bytes() each,
                            shortest prefix first (the same window, eps,
                            delta, eh_eps, seed and newest in every one)
               end-4     4  CRC-32 of everything before

        A sketch in the rows form (updated, at most ``width`` rows) is
        version 3, flags bit 0 (has newest), bit 1 (rows) and bit 2 when a
        value is not 1: bits and level bits, the levels' window, eps,
        delta, eh_eps and seed (as :class:`SlidingCountMin`'s), the newest
        time (int64), then :meth:`SlidingCountMin.to_bytes`'s rows with the
        ids (below ``2**bits``) in place of item hashes.
        """
        if self._rows is not None and self.newest is not None:
            ts, ids, v = self._rows
            ones = bool((v == 1).all())
            w = Writer("SlidingHeavyHitters", _cm.ROWS_VERSION, 1 | _cm.FLAG_ROWS | (0 if ones else _cm.FLAG_VALUES))
            w.struct("BB", self._bits, self._level_bits).struct(ROWS_PARAMETERS, *self._levels[-1]._params(),
                                                                 self.newest)
            return _cm.write_rows(w, ts, ids, v, self.newest, ones).finish()
        blobs = [x.to_bytes() for x in self._levels]
        w = LAYOUT.writer(0, self._bits, self._level_bits)
        w.varints([len(blobs)]).varints(np.array([len(b) for b in blobs], dtype=np.uint64))
        return w.raw(b"".join(blobs)).finish()

    @classmethod
    def from_bytes(cls, data) -> "SlidingHeavyHitters":
        """Decode :meth:`to_bytes` output.

        Raises
        ------
        CorruptSketchError (a ValueError)
            Truncated, altered or foreign bytes, levels that disagree.
        """
        name = "SlidingHeavyHitters"
        r, flags, lengths = LAYOUT.open(data, levels_of)
        if (flags != 0) != (r.version == _cm.ROWS_VERSION) or (flags and flags & 3 != 3):
            raise CorruptSketchError(f"{name}: expected flags (has newest and rows) with version "
                                     f"{_cm.ROWS_VERSION} only, found {flags:#06x} in version {r.version}")
        if flags:
            params = r.struct(ROWS_PARAMETERS, "the levels' parameters and newest")
            try:
                out = cls(params[0], lengths[-1], *params[1:5], level_bits=lengths[0])
            except ValueError as exc:
                raise CorruptSketchError(f"{name}: {exc}") from None
            newest = _cm.check_newest(params[5], name)
            rows = read_rows(r, name, out._levels[-1], int(newest), bool(flags & _cm.FLAG_VALUES))
            r.expect_end()
            if rows[1].size and out._bits < 64 and int(rows[1].max()) >> out._bits:
                raise CorruptSketchError(f"{name}: expected ids below 2**{out._bits}, found {int(rows[1].max())}")
            out._rows = rows
            for level in out._levels:
                level._newest = int(newest)
            return out
        n = r.varint("level count")
        if n != len(lengths):
            raise CorruptSketchError(f"{name}: expected {len(lengths)} levels, found {n}")
        sizes = r.varints(n, "level lengths")
        if int(sizes.sum()) != r.remaining:
            raise CorruptSketchError(f"{name}: expected level lengths summing to the {r.remaining} bytes left, "
                                     f"found {int(sizes.sum())}")
        try:
            levels = [SlidingCountMin.from_bytes(r.raw(int(k), "a level")) for k in sizes.tolist()]
        except CorruptSketchError as exc:
            raise CorruptSketchError(f"{name}: a level: {exc}") from None
        if any(x.rows is not None and x.newest is not None for x in levels):
            raise CorruptSketchError(f"{name}: expected levels holding counters, found one in the rows form")
        levels = [x._as_counters() if x.rows is not None else x for x in levels]  # never updated: counters alike
        first = levels[0]
        for x in levels[1:]:
            if x._params() != first._params() or x.newest != first.newest:
                raise CorruptSketchError(f"{name}: expected every level with the first's parameters and newest "
                                         f"timestamp, found {x._params() + (x.newest,)} and "
                                         f"{first._params() + (first.newest,)}")
        out = object.__new__(cls)
        out._lengths = lengths
        out._bits, out._level_bits = lengths[-1], lengths[0]
        out._levels = levels
        out._rows = None if first.newest is not None else _cm._no_rows()  # never updated: the rows form, as new
        return out


def _exact_hitters(phi: float, parts: list, newest: list, now, window, full: int) -> list:
    """The heavy hitters of the rows of ``parts`` (``(ts, ids, values)``
    each, newest times ``newest``), summed: every id whose frequency in
    the window reaches ``max(phi T, 1)``, exact, largest first."""
    ids, values = [], []
    for rows, stamp in zip(parts, newest):
        at_i, w = resolve_query(now, window, stamp, full)
        if at_i is None:  # never updated: no row
            continue
        inside = in_window(rows[0], at_i, w)
        ids.append(rows[1][inside])
        values.append(rows[2][inside])
    if not ids:
        resolve_query(now, window, None, full)
        return []
    ids, values = np.concatenate(ids), np.concatenate(values)
    if float(values.sum(dtype=np.float64)) >= 2.0 ** 62 and sum(values.tolist()) > 2**63 - 1:
        raise SumOverflowError("the union's window total would overflow int64")
    items, first = np.unique(ids, return_index=False, return_inverse=True)[:2] if ids.size else (ids, ids)
    sums = np.zeros(items.size, dtype=np.int64)
    np.add.at(sums, first, values)
    threshold = max(float(phi) * float(values.sum()), 1.0)
    keep = sums >= threshold
    items, sums = items[keep], sums[keep]
    order = np.lexsort((items, -sums))
    return [HeavyHitter(int(items[i]), float(sums[i]), int(sums[i]), int(sums[i])) for i in order]
