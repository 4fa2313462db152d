"""The elements form of L_p sketches: a sparse key's elements, kept exactly.

A :class:`~lp_norms.SlidingLpNorm` holds, per bucket, ``rows`` float64
sums (405 at p = 2, eps = delta = 0.1): a network source with 25 flows a day
takes tens of kilobytes.  While its window holds at most ``rows`` elements
(one per time and index, values summed) the sketch keeps the elements
themselves instead, and answers from them exactly.  :class:`Elements` holds
the elements of many sketches flat (sketch ``i``'s at ``offsets[i]:offsets[i
+ 1]``, by time, then index hash) and gives what the class and
:class:`~lp_norms.columnar.LpColumn` both compute from them, with the same
floats in both: the canonical elements (:meth:`Elements.canonical`) and each
group's exact norm (:meth:`Elements.norms`).

Examples
--------
>>> import numpy as np
>>> e = Elements.canonical(np.array([0, 0, 0]), np.array([5, 5, 6]), np.array([3, 3, 4], np.uint64),
...                        np.array([1.0, 2.0, 4.0]), np.array([9]), 10, 1)
>>> e.values.tolist()                       # (5, 3) twice: one element of 3
[3.0, 4.0]
>>> e.norms(2.0, cutoffs([9], 10), np.array([0])).tolist()      # sqrt(3**2 + 4**2)
[5.0]
"""

from __future__ import annotations

import numpy as np

from ehist.columnar import sealed_blobs, varints_at
from ehist.flat_rows import FlatRows, cutoffs
from ehist.segments import gather
from ehist.serialization import varint_stream
from ehist.validation import INT64_MIN

__all__ = ["Elements", "cutoff", "cutoffs", "no_elements"]


def cutoff(now: int, window: int) -> int:
    """``now - window`` for one query (Python ints, ``now`` past int64
    allowed), held inside int64: no time is above int64's largest, every
    valid time is above its smallest."""
    return max(INT64_MIN, min(int(now) - int(window), 2**63 - 1))


def no_elements() -> tuple:
    """One sketch's elements when it has none."""
    return Elements.none()


def _first_varints(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple:
    """``(values, stop bytes, bad)`` of the varint opening each region
    ``buf[starts[i]:ends[i]]``, from its first ten bytes alone (bad:
    running past the region's end, or malformed)."""
    n = starts.size
    at = starts[:, None] + np.arange(10)
    inside = at < ends[:, None]
    window = np.where(inside, buf[np.minimum(at, buf.size - 1)], 0x80)
    closing = window < 0x80
    found = closing.any(axis=1)
    stop = starts + np.where(found, closing.argmax(axis=1), 0)
    values, malformed = varints_at(buf, np.where(found, starts, 0), np.where(found, stop, 0)) if n else \
        (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool))
    return values, stop, ~found | malformed


class Elements(FlatRows):
    """The elements of many sketches in the elements form: sketch ``i``'s
    ``offsets[i]:offsets[i + 1]``, their times (int64), index hashes
    (uint64) and values (float64, > 0)."""

    __slots__ = ()
    value_dtype = np.float64

    def norms(self, p: float, cut, group_starts) -> np.ndarray:
        """Each group's exact L_p norm (group ``g``: sketches
        ``group_starts[g]`` to the next start) over the elements after
        ``cut[s]`` for each sketch ``s`` (:func:`cutoffs`, or
        :func:`cutoff`): every index's values in the
        window summed over the group's sketches in order (a stable sort by
        index), then ``(sum f**p)**(1/p)``, each sum taken in order
        (``np.add.reduceat``: the same floats one group or many)."""
        starts = np.asarray(group_starts, dtype=np.int64)
        groups = starts.size
        group_of = np.repeat(np.arange(groups, dtype=np.int64), np.diff(np.append(starts, len(self))))
        owner = self.owner
        inside = self.ts > np.asarray(cut, dtype=np.int64)[owner]
        g, h, v = group_of[owner[inside]], self.hashes[inside], self.values[inside]
        order = np.lexsort((h, g))
        g, h, v = g[order], h[order], v[order]
        out = np.zeros(groups, dtype=np.float64)
        if not g.size:
            return out
        first = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (h[1:] != h[:-1])])
        f = np.add.reduceat(v, first)
        g = g[first]
        at_g = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        with np.errstate(over="ignore"):
            out[g[at_g]] = np.add.reduceat(f ** p, at_g) ** (1.0 / p)
        return out

    # ------------------------------------------------------------ encoding
    def to_bytes(self, head: bytes, flags: int, newest: np.ndarray) -> list:
        """Each sketch's bytes in the elements form (every one updated:
        ``newest[i]``): ``head`` (preamble and parameters), ``flags``, the
        newest time, then count, hashes, time gaps and values
        (:meth:`~lp_norms.SlidingLpNorm.to_bytes`), in one pass."""
        n = len(self)
        if n == 0:
            return []
        counts = self.counts
        gaps = np.diff(self.ts, prepend=self.ts[:1]) if self.ts.size else self.ts.copy()
        firsts = self.offsets[:-1][counts > 0]
        gaps[firsts] = newest[counts > 0] - self.ts[firsts]
        m_bytes, m_len = varint_stream(counts.astype(np.uint64))
        g_bytes, g_len = varint_stream(gaps.astype(np.uint64))
        h_bytes = np.ascontiguousarray(self.hashes.astype("<u8")).view(np.uint8)
        v_bytes = np.ascontiguousarray(self.values.astype("<f8")).view(np.uint8)
        sources = [m_bytes, h_bytes, g_bytes, v_bytes]
        base = np.cumsum([0] + [x.size for x in sources[:-1]])
        m_end = np.cumsum(m_len)
        g_at = np.concatenate([[0], np.cumsum(g_len)])[self.offsets]
        starts = np.stack([base[0] + m_end - m_len, base[1] + 8 * self.offsets[:-1], base[2] + g_at[:-1],
                           base[3] + 8 * self.offsets[:-1]], axis=1).ravel()
        ends = np.stack([base[0] + m_end, base[1] + 8 * self.offsets[1:], base[2] + g_at[1:],
                         base[3] + 8 * self.offsets[1:]], axis=1).ravel()
        payload = gather(np.concatenate(sources), starts, ends)
        at = np.concatenate([[0], np.cumsum((ends - starts).reshape(n, 4).sum(axis=1))])
        return sealed_blobs(head, np.full(n, flags, dtype=np.uint16), newest, np.ones(n, dtype=bool), payload,
                            at[:-1], at[1:])

    @classmethod
    def read(cls, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, newest: np.ndarray, most: int,
             window: int) -> tuple[np.ndarray, "Elements"]:
        """``(ok, elements)`` of blobs in the elements form, their elements
        at ``buf[starts[i]:ends[i]]`` (after the newest time, before the
        checksum): every check of the sketch's own reader (at most
        ``most`` elements, times inside the window and in order, one per
        time and hash, finite values above 0); the elements of the blobs
        ``ok`` rejects are left out (their own reader names what is wrong)."""
        n = starts.size
        from ehist import compiled

        if compiled.active():
            from .compiled import read_elements

            ok, counts, ts, hashes, values = read_elements(buf, starts, ends, newest, most, window)
            return ok, Elements(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ts, hashes, values)
        m, stop, bad = _first_varints(buf, starts, ends)
        ok = ~bad & (m <= np.uint64(most))
        m = np.where(ok, m, 0).astype(np.int64)
        h_at = np.where(ok, stop + 1, starts)
        g_at = h_at + 8 * m
        v_at = ends - 8 * m
        ok &= g_at + m <= v_at  # a varint at least a byte each
        m = np.where(ok, m, 0)
        g_at, v_at = np.where(ok, g_at, h_at), np.where(ok, v_at, h_at)
        region = v_at - g_at
        body = gather(buf, g_at, v_at)
        b_at = np.concatenate([[0], np.cumsum(region)])
        stops = np.flatnonzero(body < 0x80)
        per = np.searchsorted(stops, b_at[1:]) - np.searchsorted(stops, b_at[:-1])
        closed = np.ones(n, dtype=bool)
        filled = region > 0
        closed[filled] = body[b_at[1:][filled] - 1] < 0x80
        ok &= (per == m) & closed
        keep = np.flatnonzero(ok)
        k = m[keep]
        first_stop = np.searchsorted(stops, b_at[:-1])[keep]
        local = np.arange(int(k.sum())) - np.repeat(np.concatenate([[0], np.cumsum(k)])[:-1], k)
        idx = np.repeat(first_stop, k) + local
        v_stop = stops[idx] if idx.size else idx
        v_start = np.where(local > 0, stops[np.maximum(idx - 1, 0)] + 1, np.repeat(b_at[keep], k)) if idx.size \
            else idx
        gaps, malformed = varints_at(body, v_start, v_stop)
        owner = np.repeat(keep, k)
        bad_blob = np.zeros(n, dtype=bool)
        np.logical_or.at(bad_blob, owner, malformed)
        first = np.concatenate([[0], np.cumsum(k)])[:-1]
        gap0 = np.zeros(n, dtype=np.uint64)
        some = k > 0
        gap0[keep[some]] = gaps[first[some]]
        bad_blob |= (m > 0) & ((gap0 >= np.uint64(window)) | (gap0 >= np.uint64(2**63)))
        g0 = np.where(bad_blob, 0, gap0).astype(np.int64)
        bad_blob |= (m > 0) & (newest <= np.int64(INT64_MIN) + g0)
        later = local > 0
        big = gaps > np.uint64(2**63 - 1)
        np.logical_or.at(bad_blob, owner[big], True)
        g = np.where(big | ~later, 0, gaps).astype(np.int64)
        bad_blob |= np.bincount(owner, weights=g.astype(np.float64), minlength=n) > g0.astype(np.float64) + 2.0 ** 11
        run = np.cumsum(g)  # modular sums: exact differences within a blob
        offset = run - np.repeat(np.concatenate([[0], run])[first], k)
        last = np.zeros(n, dtype=np.int64)
        if offset.size:
            np.maximum.at(last, owner, offset)
        bad_blob |= last > g0
        ts = (newest[owner] - g0[owner]) + offset
        hashes = gather(buf, h_at[keep], h_at[keep] + 8 * k).view("<u8").astype(np.uint64) if k.sum() \
            else np.zeros(0, dtype=np.uint64)
        values = gather(buf, v_at[keep], v_at[keep] + 8 * k).view("<f8").astype(np.float64) if k.sum() \
            else np.zeros(0, dtype=np.float64)
        same = np.zeros(ts.size, dtype=bool)
        same[1:] = (owner[1:] == owner[:-1]) & ((ts[1:] < ts[:-1]) | ((ts[1:] == ts[:-1]) & (hashes[1:] <= hashes[:-1])))
        np.logical_or.at(bad_blob, owner[same], True)
        with np.errstate(over="ignore", invalid="ignore"):
            np.logical_or.at(bad_blob, owner, ~(values > 0) | ~np.isfinite(values))
            sums = np.bincount(owner, weights=np.abs(values), minlength=n) if values.size else np.zeros(n)
        bad_blob |= ~np.isfinite(sums) | (sums >= 1e300)  # near float64's end: the sketch's reader decides
        ok &= ~bad_blob
        good = ok[owner]
        return ok, Elements(np.concatenate([[0], np.cumsum(np.where(ok, m, 0))]).astype(np.int64), ts[good],
                            hashes[good], values[good])
