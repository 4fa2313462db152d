"""A column of serialized synopses in one buffer.

The columnar decoders (:mod:`ehist.columnar`, :mod:`distinct.columnar`,
:mod:`frequencies.columnar`, :mod:`quantiles.columnar`) read many sketches
at once from one byte buffer and each sketch's start and length.  A
:class:`Blobs` is that view: built from a list of bytes (joined once), or
from the buffers of an Arrow binary column without copying a byte
(:func:`udaf._arrow.blobs_of`), so a batch of sketches goes from Spark to
a compiled decoder with no Python object per row.

It is a read-only sequence of ``bytes`` (``None`` for a null), so code
written for a list of bytes reads it unchanged; the columnar paths use its
arrays.

>>> b = Blobs.of([b"EH\\x01\\x02", None, b"xyz"])
>>> len(b), b[0], b[1], b.lengths.tolist(), b.present.tolist()
(3, b'EH\\x01\\x02', None, [4, 0, 3], [True, False, True])
>>> b.families().tolist(), b.take([2, 0]).tolist()
([1, -1, -1], [b'xyz', b'EH\\x01\\x02'])
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np

from . import compiled
from .serialization import FAMILY_AT, FLAGS_AT, MAGIC

_CRC = struct.Struct("<I")
_NEWEST = struct.Struct("<q")
_U64 = np.uint64

__all__ = ["Blobs", "sealed_blobs", "split", "segment_gcds", "ZLIB_CRC_FROM"]


class Blobs(Sequence):
    """Sketch ``i`` is ``buf[starts[i]:starts[i] + lengths[i]]``, or None
    where ``present[i]`` is False (its length is then 0).

    Parameters
    ----------
    buf : uint8 array
        The bytes of every sketch (a view; never written).
    starts, lengths : int64 arrays
        Each sketch's offset in ``buf`` and its length.
    present : bool array, optional
        False for nulls (default: every row present).
    """

    __slots__ = ("buf", "starts", "lengths", "present")

    def __init__(self, buf, starts, lengths, present=None):
        self.buf = np.asarray(buf, dtype=np.uint8)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.present = np.ones(self.starts.size, dtype=bool) if present is None else np.asarray(present, dtype=bool)
        if not (self.starts.shape == self.lengths.shape == self.present.shape and self.starts.ndim == 1):
            raise ValueError("starts, lengths and present must be 1-d arrays of one length")
        if self.starts.size and (self.starts.min() < 0 or (self.starts + self.lengths).max() > self.buf.size
                                 or self.lengths.min() < 0):
            raise ValueError("every sketch must lie inside the buffer")

    @classmethod
    def of(cls, blobs) -> "Blobs":
        """``blobs`` itself when it is a :class:`Blobs`; else a list of
        bytes-like objects (or None) joined into one buffer.

        Raises
        ------
        TypeError
            An item that is neither bytes-like nor None.
        """
        if isinstance(blobs, Blobs):
            return blobs
        items = list(blobs)
        for b in items:
            if b is not None and not isinstance(b, (bytes, bytearray, memoryview)):
                raise TypeError(f"expected bytes, bytearray or memoryview, got {type(b).__name__}")
        present = np.fromiter((b is not None for b in items), dtype=bool, count=len(items))
        lengths = np.fromiter((0 if b is None else len(b) for b in items), dtype=np.int64, count=len(items))
        starts = np.zeros(len(items), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        buf = np.frombuffer(b"".join(b for b in items if b is not None), dtype=np.uint8)
        return cls(buf, starts, lengths, present)

    def __len__(self) -> int:
        return self.starts.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self))))
        if not self.present[i]:
            return None
        a = int(self.starts[i])
        return self.buf[a:a + int(self.lengths[i])].tobytes()

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self) -> str:
        return f"Blobs({len(self)} sketches, {int(self.lengths.sum())} bytes)"

    def tolist(self) -> list:
        """The sketches as a list of bytes (None for nulls).

        A few sketches of a large shared buffer (a :meth:`take` or a slice
        of an Arrow batch's column) copy only their own bytes: the per-key
        paths iterate slices of a batch, and copying the whole buffer for
        each made them quadratic in the batch (measured: 94 ms per key of
        four 350 KB L_p sketches in a batch of 400, 1.3 ms after).

        >>> b = Blobs.of([b"abc", None, b"defg"])
        >>> b[1:].tolist(), b.take([2, 0]).tolist()
        ([None, b'defg'], [b'defg', b'abc'])
        """
        spans = zip(self.starts.tolist(), self.lengths.tolist(), self.present.tolist())
        if self.buf.size > 2 * int(self.lengths.sum()) + 4096:  # a part of the buffer: its own bytes
            buf = self.buf
            return [buf[a:a + n].tobytes() if p else None for a, n, p in spans]
        data = self.buf.tobytes() if self.buf.size else b""
        return [data[a:a + n] if p else None for a, n, p in spans]

    def take(self, indices) -> "Blobs":
        """The sketches at ``indices`` (positions or a boolean mask), in
        that order, over the same buffer."""
        idx = np.asarray(indices)
        idx = np.flatnonzero(idx) if idx.dtype == bool else idx.astype(np.int64, copy=False)
        return Blobs(self.buf, self.starts[idx], self.lengths[idx], self.present[idx])

    def families(self) -> np.ndarray:
        """Each sketch's family id (:data:`ehist.serialization.FAMILIES`)
        from its preamble, -1 for bytes without the preamble's magic, and
        for nulls; reads nothing further (the decoders check the rest)."""
        out = np.full(len(self), -1, dtype=np.int64)
        has = self.present & (self.lengths > FAMILY_AT)
        at = self.starts[has]
        magic = (self.buf[at] == MAGIC[0]) & (self.buf[at + 1] == MAGIC[1])
        out[np.flatnonzero(has)[magic]] = self.buf[at[magic] + FAMILY_AT]
        return out

    def bytes_at(self, offset: int, size: int) -> np.ndarray:
        """``(n, size)`` uint8: bytes ``offset`` to ``offset + size`` of
        every sketch (the caller knows each is long enough)."""
        return self.buf[self.starts[:, None] + offset + np.arange(size)]

    def groups(self, offset: int, size: int) -> list:
        """Positions of the sketches with equal bytes ``offset`` to
        ``offset + size`` (a family's parameters, to decode sketches of one
        window or precision together), one array per distinct value, in
        order of first appearance; a sketch too short for them (corrupt:
        its decoder says so) is grouped by the bytes it has.

        >>> Blobs.of([b"ab1", b"ab2", b"ab1", b"a"]).groups(2, 1)
        [array([0, 2]), array([1]), array([3])]
        """
        n = len(self)
        if n == 0:
            return []
        whole = self.lengths >= offset + size
        if whole.all():
            rows = self.bytes_at(offset, size)
            if (rows == rows[0]).all():
                return [np.arange(n)]
        first: dict = {}
        keys = np.empty(n, dtype=np.int64)
        for i, b in enumerate(self):
            keys[i] = first.setdefault(b"" if b is None else b[offset:offset + size], len(first))
        return [np.flatnonzero(keys == k) for k in range(len(first))]


#: Where the compiled loops check checksums by their table loop
#: (:func:`ehist.compiled.crc_by_zlib` False: zlib's library not found),
#: blobs of this many bytes or more are checked by zlib, one call each:
#: zlib's CRC-32 runs at ~2 GB/s here against the table loop's ~0.7 GB/s,
#: and a call costs about a microsecond (measured: 300 L_p sketches of 420
#: KB, 0.064 s against 0.15-0.2 s; 400 heavy-hitter sketches of 118 KB,
#: 0.013-0.021 s against 0.035-0.038 s).
ZLIB_CRC_FROM = 4096


def sealed_blobs(head: bytes, flags, newest, has_newest, payload: np.ndarray, byte_starts, byte_ends) -> list:
    """Whole blobs of many synopses of one family and parameters (the
    writer's side of :func:`sealed_heads`): ``head`` (preamble and
    parameters) with blob ``i``'s ``flags[i]``, its little-endian
    ``newest[i]`` where ``has_newest[i]``, its payload
    ``payload[byte_starts[i]:byte_ends[i]]`` (uint8) and the CRC-32 of all
    of it (:mod:`ehist.serialization`'s framing); one compiled pass when
    the compiled loops run (by their table loop, large blobs: zlib's CRC-32
    each, see :data:`ZLIB_CRC_FROM`)."""
    count = np.size(byte_starts)
    large = count and int(np.sum(np.asarray(byte_ends) - np.asarray(byte_starts))) >= ZLIB_CRC_FROM * count
    if compiled.active() and (not large or compiled.crc_by_zlib()):
        return split(*compiled.seal(head, flags, newest, has_newest, payload, byte_starts, byte_ends, FLAGS_AT))
    payload = np.ascontiguousarray(payload, dtype=np.uint8).tobytes()
    flags = np.asarray(flags).tolist()
    heads = {f: head[:FLAGS_AT] + struct.pack("<H", f) + head[FLAGS_AT + 2:] for f in set(flags)}
    crc32, pack_crc, pack_newest = zlib.crc32, _CRC.pack, _NEWEST.pack
    out = []
    for f, stamp, has_n, a, b in zip(flags, np.asarray(newest).tolist(), np.asarray(has_newest).tolist(),
                                     np.asarray(byte_starts).tolist(), np.asarray(byte_ends).tolist()):
        body = heads[f] + (pack_newest(stamp) if has_n else b"") + payload[a:b]
        out.append(body + pack_crc(crc32(body)))
    return out


def split(buf: np.ndarray, offsets) -> list:
    """``buf[offsets[i]:offsets[i + 1]]`` of every ``i``, as bytes (one copy
    of the buffer, sliced).

    >>> split(np.arange(65, 70, dtype=np.uint8), np.array([0, 2, 2, 5]))
    [b'AB', b'', b'CDE']
    """
    whole = np.ascontiguousarray(buf, dtype=np.uint8).tobytes()
    bounds = np.asarray(offsets).tolist()
    return [whole[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def segment_gcds(x: np.ndarray, owner: np.ndarray, size: int) -> np.ndarray:
    """gcd of the ``x`` of each owner (0 for none); ``owner`` sorted (a
    column's tick: the gcd of each sketch's time deltas, the family
    packages' codecs too)."""
    out = np.zeros(size, dtype=_U64)
    if x.size:
        first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        out[owner[first]] = np.gcd.reduceat(x, first)
    return out
