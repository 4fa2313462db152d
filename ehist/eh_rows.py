"""The rows form of many exponential histograms at once: built, read, united, answered.

A histogram whose window holds at most ``k = ceil(1 / eps)`` rows may keep
the rows themselves (:meth:`ExponentialHistogram.of_rows`, "the rows
form", format version 3 of :mod:`ehist.eh_layout`): a network source's 25
flows of a day are 25 ``(time, bytes)`` rows, ~100 bytes, where a sum's
canonical buckets take ~900 and its unions at four sites ~1,700.  A
sketch table of sparse keys is mostly such histograms.  :class:`HistogramRows`
holds the rows of many flat (:class:`~ehist.flat_rows.FlatRows`, no item
hash: every hash 0) so that building, reading, uniting, answering and
writing them are a few numpy passes (and one compiled read) for all.

Contract (``tests/test_columnar.py``): each step gives what the class
gives, byte for byte: :meth:`HistogramRows.of_runs` and
:meth:`HistogramRows.to_bytes` are :meth:`ExponentialHistogram.of_rows`
and its bytes, :meth:`HistogramRows.read` its reader,
:meth:`HistogramRows.united` :meth:`ExponentialHistogram.merge_all` of
histograms all in the rows form (past ``k`` rows, or in a union with
buckets, :meth:`~ehist.columnar.HistogramColumn.from_rows` builds their
buckets).

Examples
--------
>>> import numpy as np
>>> rows = HistogramRows.of_runs(np.array([5, 9, 9, 7]), np.array([0, 3]), np.array([700, 20, 3, 1]), 100)
>>> rows.offsets.tolist(), rows.ts.tolist(), rows.values.tolist()
([0, 2, 3], [5, 9, 7], [700, 23, 1])
>>> rows.bounds(np.array([20, 7]), 12).tolist()       # (8, 20]: the 23; (-5, 7]: the 1
[23, 1]
"""

from __future__ import annotations

import zlib

import numpy as np

from . import compiled
from . import eh_layout as L
from .blobs import sealed_blobs, segment_gcds
from .flat_rows import FlatRows, cutoffs
from .segments import gather
from .serialization import MAGIC, varint_stream
from .validation import k_of_eps

__all__ = ["HistogramRows", "rows_blobs"]

_U64 = np.uint64
_CRC = 4
_ROWS_FLAGS = (L.FLAG_HAS_NEWEST, L.FLAG_HAS_NEWEST | L.FLAG_TICK, L.FLAG_HAS_NEWEST | L.FLAG_VALUES,
               L.FLAG_HAS_NEWEST | L.FLAG_TICK | L.FLAG_VALUES)


class HistogramRows(FlatRows):
    """The rows of many histograms in the rows form: histogram ``i``'s
    ``offsets[i]:offsets[i + 1]``, by time, one per time (hashes all 0),
    values (int64) >= 1."""

    __slots__ = ()

    @classmethod
    def of_runs(cls, ts, starts, values, window: int, newest=None) -> "HistogramRows":
        """Each run's rows as :meth:`ExponentialHistogram.of_rows` keeps
        them (run ``i``: ``ts[starts[i]:starts[i + 1]]``, sorted by time;
        ``values`` None: ones), inside the window as of ``newest[i]``
        (default: the run's last time); no check of ``k``."""
        ts = np.asarray(ts, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        counts = np.diff(np.append(starts, ts.size))
        owner = np.repeat(np.arange(starts.size, dtype=np.int64), counts)
        if newest is None:
            newest = np.where(counts > 0, ts[np.maximum(np.append(starts[1:], ts.size) - 1, 0)] if ts.size else 0, 0)
        v = np.ones(ts.size, dtype=np.int64) if values is None else np.asarray(values).astype(np.int64)
        return cls.canonical(owner, ts, np.zeros(ts.size, dtype=_U64), v, newest, window, starts.size)

    # ------------------------------------------------------------- answers
    def bounds(self, at, window: int) -> np.ndarray:
        """Each histogram's exact sum in the window ending at ``at[i]``
        (int64: lower and upper bound alike)."""
        return self.sums_after(cutoffs(at, window))

    def sums_after(self, cut) -> np.ndarray:
        """Each histogram's sum of the rows after its ``cut[i]`` (int64)."""
        owner = self.owner
        inside = self.ts > np.asarray(cut, dtype=np.int64)[owner]
        return np.bincount(owner[inside], weights=self.values[inside], minlength=len(self)).astype(np.int64) \
            if self.values.size and float(self.values.sum(dtype=np.float64)) < 2.0 ** 52 else \
            _exact_sums(owner[inside], self.values[inside], len(self))

    def totals(self) -> np.ndarray:
        """Each histogram's total as a float (to tell sums near int64's end)."""
        return np.bincount(self.owner, weights=self.values.astype(np.float64), minlength=len(self))

    def histogram(self, i: int, window: int, eps: float, newest: int):
        """Histogram ``i`` as :class:`~ehist.ExponentialHistogram` holds it
        in the rows form (its rows canonical, ``newest`` at or after the
        last)."""
        from .exponential_histogram import ExponentialHistogram

        h = ExponentialHistogram(window, eps)
        t, _, v = self.sketch(i)
        h._rows, h._newest, h._total = (t, v), int(newest), int(sum(v.tolist()))
        return h

    # ------------------------------------------------------------- unions
    def united(self, group_starts, newest, window: int) -> "HistogramRows":
        """Each group's union (group ``g``: histograms ``group_starts[g]``
        to the next start) as of its ``newest[g]``: its rows inside the
        window, one per time, values summed (totals must stay in int64:
        :meth:`totals` of the parts tells)."""
        group_starts = np.asarray(group_starts, dtype=np.int64)
        group_of = np.repeat(np.arange(group_starts.size, dtype=np.int64),
                             np.diff(np.append(group_starts, len(self))))
        return type(self).canonical(group_of[self.owner], self.ts, self.hashes, self.values, newest, window,
                                    group_starts.size)

    # ------------------------------------------------------------ encoding
    def to_bytes(self, window: int, eps: float, newest) -> list:
        """Each histogram's :meth:`~ehist.ExponentialHistogram.to_bytes` in
        the rows form (``newest[i]`` its newest time)."""
        n = len(self)
        if n == 0:
            return []
        newest = np.asarray(newest, dtype=np.int64)
        counts, owner = self.counts, self.owner
        gaps = np.diff(self.ts, prepend=self.ts[:1]) if self.ts.size else self.ts.copy()
        firsts = self.offsets[:-1][counts > 0]
        gaps[firsts] = newest[counts > 0] - self.ts[firsts]
        gaps = gaps.view(_U64)
        tick = segment_gcds(gaps, owner, n)
        ticked = tick >= 2
        scaled = gaps // np.where(ticked, tick, 1).astype(_U64)[owner]
        valued = np.bincount(owner, weights=self.values != 1, minlength=n) > 0
        m_bytes, m_len = varint_stream(counts.astype(_U64))
        t_bytes, t_len = varint_stream(tick[ticked].astype(_U64))
        g_bytes, g_len = varint_stream(scaled)
        v_rows = valued[owner]
        v_bytes, v_len = varint_stream(self.values[v_rows].astype(_U64))
        # each histogram's four spans, one source buffer: count, tick, gaps, values
        sources = [m_bytes, t_bytes, g_bytes, v_bytes]
        base = np.cumsum([0] + [s.size for s in sources[:-1]])
        m_end = np.cumsum(m_len)
        t_per = np.zeros(n, dtype=np.int64)
        t_per[ticked] = t_len
        t_at = np.concatenate([[0], np.cumsum(t_per)])
        g_at = np.concatenate([[0], np.cumsum(g_len)])[self.offsets]
        v_per = np.bincount(owner[v_rows], weights=v_len, minlength=n).astype(np.int64) if v_len.size \
            else np.zeros(n, np.int64)
        v_at = np.concatenate([[0], np.cumsum(v_per)])
        starts = np.stack([base[0] + m_end - m_len, base[1] + t_at[:-1], base[2] + g_at[:-1], base[3] + v_at[:-1]],
                          axis=1).ravel()
        ends = np.stack([base[0] + m_end, base[1] + t_at[1:], base[2] + g_at[1:], base[3] + v_at[1:]], axis=1).ravel()
        payload = gather(np.concatenate(sources), starts, ends)
        at = np.concatenate([[0], np.cumsum((ends - starts).reshape(n, 4).sum(axis=1))])
        flags = (L.FLAG_HAS_NEWEST | np.where(ticked, L.FLAG_TICK, 0) | np.where(valued, L.FLAG_VALUES, 0)).astype(
            np.uint16)
        head = L.HEAD.pack(MAGIC, L.FAMILY, L.ROWS_VERSION, 0, window, eps)
        return sealed_blobs(head, flags, newest, np.ones(n, dtype=bool), payload, at[:-1], at[1:])

    # ------------------------------------------------------------ decoding
    @classmethod
    def read(cls, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, window: int, eps: float):
        """``(ok, rows, newest)`` of rows form blobs of one ``window`` and
        ``eps`` (preamble, parameters and checksum already checked:
        :func:`rows_blobs`), with every check of
        :meth:`ExponentialHistogram.from_bytes`; the blobs ``ok`` rejects
        have no rows (their own decoder names what is wrong).  Compiled
        where numba runs, else each blob by the class's reader."""
        n = starts.size
        w, e, newest = L.head_fields(buf, starts) if n else (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))
        flags = np.where((w == window) & (e == eps), L.flags_of(buf, starts), 0).astype(np.int64)  # 0: refused
        k = k_of_eps(eps)
        if compiled.active():
            ok, counts, ts, values = _kernel()(np.ascontiguousarray(buf), starts + L.HEAD_BYTES,
                                               starts + lengths - _CRC, flags, newest, np.int64(k), _U64(window))
            return ok, cls(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ts,
                           np.zeros(ts.size, dtype=_U64), values), newest
        from .errors import CorruptSketchError
        from .exponential_histogram import ExponentialHistogram

        ok = np.zeros(n, dtype=bool)
        parts = []
        for i in range(n):
            a = int(starts[i])
            if not flags[i]:
                parts.append(None)
                continue
            try:
                h = ExponentialHistogram.from_bytes(buf[a:a + int(lengths[i])].tobytes())
            except (CorruptSketchError, ValueError):
                parts.append(None)
                continue
            ok[i] = True
            t, v = h.rows
            parts.append((t, np.zeros(t.size, dtype=_U64), v))
        return ok, cls.of(parts), newest


def _exact_sums(owner: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """int64 sums by owner (float sums are exact only below 2**53)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, owner, values)
    return out


def rows_blobs(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which blobs are histograms in the rows form by their preamble
    (magic, family 1, version 3, the rows form's flags) with a matching
    checksum."""
    ok = lengths >= L.HEAD_BYTES + 1 + _CRC
    idx = np.flatnonzero(ok)
    a = starts[idx]
    ok[idx] = ((buf[a] == MAGIC[0]) & (buf[a + 1] == MAGIC[1]) & (buf[a + L.VERSION_AT - 1] == L.FAMILY)
               & (buf[a + L.VERSION_AT] == L.ROWS_VERSION) & np.isin(buf[a + L.FLAGS_AT], _ROWS_FLAGS)
               & (buf[a + L.FLAGS_AT + 1] == 0))
    rest = np.flatnonzero(ok)
    if compiled.active():
        ok[rest] = compiled.crc_matches(buf, starts[rest], lengths[rest])
        return ok
    mv = memoryview(buf)
    for i in rest.tolist():
        a, n = int(starts[i]), int(lengths[i])
        ok[i] = zlib.crc32(mv[a:a + n - 4]) == int.from_bytes(mv[a + n - 4:a + n], "little")
    return ok


# ------------------------------------------------------------------ compiled
def _read_all(buf, starts, ends, flags, newest, k, window):
    """The compiled reader of :meth:`HistogramRows.read`: ``(ok, counts,
    ts, values)``, every check of the class's reader (a blob it rejects:
    no row)."""
    n = starts.size
    cap = 0
    for i in range(n):  # the rows each blob declares (at most k, a byte each at least): the output's room
        m, pos, good = _varint(buf, starts[i], ends[i])
        if good and m <= np.uint64(k) and np.uint64(ends[i] - pos) >= m:
            cap += np.int64(m)
    ok = np.zeros(n, dtype=np.bool_)
    counts = np.zeros(n, dtype=np.int64)
    ts = np.empty(cap, dtype=np.int64)
    vs = np.empty(cap, dtype=np.int64)
    at = 0
    u64_max = np.uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(n):
        end = ends[i]
        if flags[i] == 0:  # another window or eps
            continue
        m, pos, good = _varint(buf, starts[i], end)
        if not good or m > np.uint64(k) or np.uint64(end - pos) < m:
            continue
        c = np.int64(m)
        tick = np.uint64(1)
        if flags[i] & 8:
            tick, pos, good = _varint(buf, pos, end)
            if not good or tick < np.uint64(2):
                continue
        g_all = np.uint64(0)
        g0 = np.uint64(0)
        run = np.uint64(0)
        limit = u64_max // tick
        for j in range(c):
            g, pos, good = _varint(buf, pos, end)
            if not good or g > limit:
                good = False
                break
            if g_all != np.uint64(1):  # a running gcd of 1 stays 1
                g_all = _gcd(g_all, g)
            g = g * tick
            if j == 0:
                if g >= window or g >= np.uint64(newest[i]) + np.uint64(2**63):
                    good = False
                    break
                g0 = g
            else:
                if g == np.uint64(0) or g > g0 - run:
                    good = False
                    break
                run += g
            ts[at + j] = newest[i] - np.int64(g0) + np.int64(run)
        if not good:
            continue
        if (tick > np.uint64(1) and g_all != np.uint64(1)) or (tick == np.uint64(1) and g_all >= np.uint64(2)):
            continue
        if flags[i] & 16:
            good, pos = _values(buf, pos, end, c, vs, at)
            if not good:
                continue
        else:
            for j in range(c):
                vs[at + j] = 1
        if pos != end:
            continue
        ok[i] = True
        counts[i] = c
        at += c
    return ok, counts, ts[:at].copy(), vs[:at].copy()


_KERNEL = None
_varint = _gcd = _values = None  # the compiled read_varint, gcd and read_row_values, which _read_all calls


def _kernel():
    global _KERNEL, _varint, _gcd, _values
    if _KERNEL is None:
        _varint, _gcd = compiled.jit(compiled.read_varint), compiled.jit(compiled.gcd)
        _values = compiled.row_values()
        _KERNEL = compiled.kernel(_read_all)
    return _KERNEL

