"""The rows form of many ECM-sketches at once: built, read, united, answered.

An ECM-sketch whose window holds at most ``width`` rows keeps the rows
themselves (:class:`~frequencies.SlidingCountMin`, "the rows form": one
``(time, item hash, value)`` per time and item).  A table of sparse keys
(network sources with tens of flows a day) is mostly such sketches: a row
is ~11 bytes against ``depth`` histograms of ~12 bytes each, and every
answer is a sum over rows.  :class:`Rows` holds the rows of many sketches
flat (sketch ``i``'s rows ``offsets[i]:offsets[i + 1]``, by time, then
hash) so that building, uniting, answering and encoding them are a few
numpy passes for all of them; :class:`~frequencies.columnar.CountMinColumn`
keeps one beside its counters.

Contract (``tests/test_frequencies_columnar.py``): each step gives what
the sketch's own method gives, byte for byte (:func:`~frequencies.count_min.live_rows`
for the canonical rows, :meth:`~frequencies.SlidingCountMin.to_bytes` for
the bytes).

Examples
--------
>>> import numpy as np
>>> rows = Rows.canonical(np.array([0, 0, 1]), np.array([5, 5, 7]), np.array([3, 3, 9], np.uint64),
...                       np.array([1, 2, 1]), np.array([5, 7]), 10, 2)
>>> rows.offsets.tolist(), rows.values.tolist()        # sketch 0: (5, 3) twice, one row of 3
([0, 1, 2], [3, 1])
>>> rows.totals(np.array([5, 7]), 10).tolist()
[3, 1]
"""

from __future__ import annotations

import struct
import numpy as np

from ehist import compiled
from ehist.columnar import region_varints, sealed_blobs, varints_at
from ehist.serialization import FAMILIES, MAGIC, PREAMBLE_BYTES, varint_stream
from ehist.flat_rows import FlatRows, cutoffs
from ehist.segments import gather
from ehist.validation import INT64_MAX, INT64_MIN

from . import count_min as _cm

__all__ = ["Rows", "cutoffs"]

_U64 = np.uint64
#: preamble, parameters and newest: where a rows form blob's rows begin
_HEAD = struct.Struct(_cm.LAYOUT.head.format + "q")
_CRC = 4


class Rows(FlatRows):
    """The rows of many sketches in the rows form (a sketch in the
    counter form: no row): sketch ``i``'s ``offsets[i]:offsets[i + 1]``,
    their times (int64), item hashes (uint64) and values (int64, >= 1);
    :meth:`~ehist.flat_rows.FlatRows.canonical` is
    :func:`~frequencies.count_min.live_rows` of every sketch at once."""

    __slots__ = ()

    # ------------------------------------------------------------- answers
    def _inside(self, at, window: int) -> np.ndarray:
        return self.ts > cutoffs(at, window)[self.owner]

    def totals(self, at, window: int) -> np.ndarray:
        """Each sketch's total in the window ending at ``at[i]`` (int64)."""
        inside = self._inside(at, window)
        out = np.zeros(len(self), dtype=np.int64)
        np.add.at(out, self.owner[inside], self.values[inside])
        return out

    def frequencies(self, want: np.ndarray, at, window: int) -> np.ndarray:
        """Each sketch's total of the rows of hash ``want[i]`` in the window
        ending at ``at[i]`` (int64)."""
        owner = self.owner
        hit = self._inside(at, window) & (self.hashes == want[owner])
        out = np.zeros(len(self), dtype=np.int64)
        np.add.at(out, owner[hit], self.values[hit])
        return out

    def counter_sums(self, at, window: int, width: int, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sketch, counter, sum)`` of every counter the rows in the
        window ending at ``at[i]`` reach: the exact counters of each
        sketch, sorted by sketch, then counter."""
        inside = self._inside(at, window)
        owner = self.owner[inside]
        ids = _cm.counter_ids(self.hashes[inside], width, depth)  # (depth, rows)
        size = width * depth
        key = (np.broadcast_to(owner, ids.shape) * size + ids).ravel()
        v = np.broadcast_to(self.values[inside], ids.shape).ravel()
        order = np.argsort(key, kind="stable")
        key, v = key[order], v[order]
        if key.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        key = key[first]
        return key // size, key % size, np.add.reduceat(v, first)

    # ------------------------------------------------------------ encoding
    def to_bytes(self, params: tuple, newest: np.ndarray, head: bytes | None = None) -> list:
        """Each sketch's :meth:`~frequencies.SlidingCountMin.to_bytes` in
        the rows form (every one updated: ``newest[i]``); ``head``: another
        family's preamble and parameters before the newest time (the heavy
        hitters'), in place of the ECM-sketch's of ``params``."""
        n = len(self)
        if n == 0:
            return []
        counts = self.counts
        owner = self.owner
        valued = np.bincount(owner, weights=self.values != 1, minlength=n) > 0
        gaps = np.diff(self.ts, prepend=self.ts[:1]) if self.ts.size else self.ts
        firsts = self.offsets[:-1][counts > 0]
        gaps = gaps.copy()
        gaps[firsts] = newest[counts > 0] - self.ts[firsts]
        m_bytes, m_len = varint_stream(counts.astype(_U64))
        g_bytes, g_len = varint_stream(gaps.astype(_U64))
        v_rows = valued[owner]
        v_bytes, v_len = varint_stream(self.values[v_rows].astype(_U64))
        h_bytes = np.ascontiguousarray(self.hashes.astype("<u8")).view(np.uint8)
        # each sketch's four spans, one source buffer: count, hashes, times, values
        sources = [m_bytes, h_bytes, g_bytes, v_bytes]
        base = np.cumsum([0] + [s.size for s in sources[:-1]])
        m_end = np.cumsum(m_len)
        g_end = np.cumsum(g_len)
        g_at = np.concatenate([[0], g_end])[self.offsets]
        v_per = np.bincount(owner[v_rows], weights=v_len, minlength=n).astype(np.int64) if v_len.size \
            else np.zeros(n, np.int64)
        v_at = np.concatenate([[0], np.cumsum(v_per)])
        starts = np.stack([base[0] + m_end - m_len, base[1] + 8 * self.offsets[:-1], base[2] + g_at[:-1],
                           base[3] + v_at[:-1]], axis=1).ravel()
        ends = np.stack([base[0] + m_end, base[1] + 8 * self.offsets[1:], base[2] + g_at[1:],
                         base[3] + v_at[1:]], axis=1).ravel()
        payload = gather(np.concatenate(sources), starts, ends)
        sizes = (ends - starts).reshape(n, 4).sum(axis=1)
        at = np.concatenate([[0], np.cumsum(sizes)])
        flags = np.where(valued, 1 | _cm.FLAG_ROWS | _cm.FLAG_VALUES, 1 | _cm.FLAG_ROWS).astype(np.uint16)
        if head is None:
            head = _cm.LAYOUT.head.pack(MAGIC, FAMILIES["SlidingCountMin"], _cm.ROWS_VERSION, 0, *params)
        return sealed_blobs(head, flags, newest, np.ones(n, dtype=bool), payload, at[:-1], at[1:])

    # ------------------------------------------------------------ decoding
    @classmethod
    def read(cls, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, newest: np.ndarray, valued: np.ndarray,
             width: int, window: int, head: int = _HEAD.size) -> tuple[np.ndarray, "Rows"]:
        """``(ok, rows)`` of rows form blobs (preamble, parameters and
        checksum already checked; ``newest`` and ``valued`` from their
        heads): every check of :func:`~frequencies.count_min.read_rows`;
        the rows of the blobs ``ok`` rejects are left out (their own
        decoder names what is wrong); ``head``: the bytes before the rows
        (another family's: the heavy hitters')."""
        n = starts.size
        pos = starts + head
        ends = starts + lengths - _CRC
        if compiled.active():
            from .compiled import read_rows

            ok, counts, ts, hashes, values = read_rows(buf, pos, ends, newest, valued, width, window)
            return ok, Rows(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ts, hashes, values)
        read = region_varints(buf, pos, ends)
        m, stop, bad = read(np.zeros(n, dtype=np.int64), np.arange(n))
        ok = ~bad & (m <= _U64(width))
        m = np.where(ok, m, 0).astype(np.int64)
        h_at = np.where(ok, stop + 1, pos)
        t_at = h_at + 8 * m
        ok &= t_at <= ends
        m = np.where(ok, m, 0)
        t_at = np.where(ok, t_at, h_at)
        # the varints after the hashes: m times, then m values where valued; their stops close each one
        k = m * np.where(valued, 2, 1)
        region = np.where(ok, ends - t_at, 0)
        body = gather(buf, t_at, t_at + region)
        b_at = np.concatenate([[0], np.cumsum(region)])
        stops = np.flatnonzero(body < 0x80)
        per = np.searchsorted(stops, b_at[1:]) - np.searchsorted(stops, b_at[:-1])
        closed = np.ones(n, dtype=bool)  # a region's last byte closes its last varint
        filled = region > 0
        closed[filled] = body[b_at[1:][filled] - 1] < 0x80
        ok &= (per == k) & closed & (filled == (k > 0))
        keep = np.flatnonzero(ok)
        # every varint of the kept blobs: value and owner
        first_stop = np.searchsorted(stops, b_at[:-1])
        sel = np.repeat(keep, k[keep])
        idx = (np.repeat(first_stop[keep], k[keep]) + np.arange(sel.size)
               - np.repeat(np.concatenate([[0], np.cumsum(k[keep])])[:-1], k[keep]))
        v_stop = stops[idx] if idx.size else idx
        v_start = np.where(idx > np.repeat(first_stop[keep], k[keep]), stops[np.maximum(idx - 1, 0)] + 1,
                           b_at[sel]) if idx.size else idx
        values, malformed = varints_at(body, v_start, v_stop)
        bad_blob = np.zeros(n, dtype=bool)
        np.logical_or.at(bad_blob, sel, malformed)
        local = np.arange(sel.size) - np.repeat(np.concatenate([[0], np.cumsum(k[keep])])[:-1], k[keep])
        is_time = local < np.repeat(m[keep], k[keep])
        gaps, vals = values[is_time], values[~is_time]
        r_owner = sel[is_time]
        r_first = np.concatenate([[0], np.cumsum(m[keep])])[:-1]
        # times: newest - first gap, then running sums of the later gaps (each checked below)
        gap0 = np.zeros(n, dtype=_U64)
        has_rows = keep[m[keep] > 0]
        gap0[has_rows] = gaps[r_first[m[keep] > 0]]
        bad_blob |= (m > 0) & ((gap0 >= _U64(window)) | (gap0.astype(np.float64) >= 2.0 ** 63))
        g0 = np.where(bad_blob, 0, gap0).astype(np.int64)
        bad_blob |= (m > 0) & (newest <= np.int64(INT64_MIN) + g0)  # the first time past int64's floor
        later = np.ones(gaps.size, dtype=bool)
        later[r_first[m[keep] > 0]] = False
        big = gaps > _U64(INT64_MAX)
        np.logical_or.at(bad_blob, r_owner[big], True)
        g = np.where(big | ~later, 0, gaps).astype(np.int64)
        # a blob's later gaps sum to at most its first (float sums flag any that might pass int64)
        sums_f = np.bincount(r_owner, weights=g.astype(np.float64), minlength=n)
        bad_blob |= sums_f > g0.astype(np.float64) + 2.0 ** 11
        run = np.cumsum(g)
        before = np.concatenate([[0], run])[np.concatenate([[0], np.cumsum(m[keep])])[:-1]]
        offset = run - np.repeat(before, m[keep])  # within each blob
        ts = (newest[r_owner] - g0[r_owner]) + offset
        last = np.zeros(n, dtype=np.int64)
        if ts.size:
            np.maximum.at(last, r_owner, offset)
        bad_blob |= last > g0
        hashes = gather(buf, h_at[keep], h_at[keep] + 8 * m[keep]).view("<u8").astype(_U64) if m[keep].sum() \
            else np.zeros(0, _U64)
        # one row per (time, hash), by time then hash
        same = np.zeros(ts.size, dtype=bool)
        same[1:] = (r_owner[1:] == r_owner[:-1]) & ((ts[1:] < ts[:-1]) | ((ts[1:] == ts[:-1])
                                                                        & (hashes[1:] <= hashes[:-1])))
        np.logical_or.at(bad_blob, r_owner[same], True)
        # values: >= 1, within int64 in total, not all 1 where the flag says otherwise
        v_owner = sel[~is_time]
        v = np.ones(ts.size, dtype=np.int64)
        if vals.size:
            np.logical_or.at(bad_blob, v_owner, (vals < _U64(1)) | (vals > _U64(INT64_MAX)))
            totals = np.bincount(v_owner, weights=vals.astype(np.float64), minlength=n)
            bad_blob |= totals >= 2.0 ** 62  # near int64: the sketch's decoder decides it exactly
            ones = np.ones(n, dtype=bool)
            np.logical_and.at(ones, v_owner, vals == _U64(1))
            bad_blob |= valued & ones & (m > 0)
            v[np.repeat(valued[keep], m[keep])] = np.minimum(vals, _U64(INT64_MAX)).astype(np.int64)
        bad_blob |= valued & (m == 0)
        ok &= ~bad_blob
        good_rows = ok[r_owner]
        counts = np.where(ok, m, 0)
        return ok, Rows(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ts[good_rows],
                        hashes[good_rows], v[good_rows])


def rows_sealed(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, family: str = "SlidingCountMin",
                head_size: int = _HEAD.size) -> np.ndarray:
    """Which blobs are ``family``'s sketches in the rows form with a good
    preamble (version 3; flags has newest and rows, maybe values) and
    checksum (``head_size``: the bytes before the rows)."""
    ok = lengths >= head_size + 1 + _CRC
    at = starts[ok]
    head = buf[at[:, None] + np.arange(PREAMBLE_BYTES)]
    flags = head[:, 4]
    ok[ok] = ((head[:, 0] == MAGIC[0]) & (head[:, 1] == MAGIC[1]) & (head[:, 2] == FAMILIES[family])
              & (head[:, 3] == _cm.ROWS_VERSION) & (head[:, 5] == 0)
              & ((flags == 1 | _cm.FLAG_ROWS) | (flags == 1 | _cm.FLAG_ROWS | _cm.FLAG_VALUES)))
    rest = np.flatnonzero(ok)
    if compiled.active():
        ok[rest] = compiled.crc_matches(buf, starts[rest], lengths[rest])
    else:
        import zlib
        mv = memoryview(buf)
        for i in rest.tolist():
            a, n = int(starts[i]), int(lengths[i])
            ok[i] = zlib.crc32(mv[a:a + n - 4]) == int.from_bytes(mv[a + n - 4:a + n], "little")
    return ok
