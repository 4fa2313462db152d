"""Byte-format building blocks shared by every synopsis in the project.

Every serialized synopsis starts with the same 6-byte preamble and ends with
a CRC-32 of everything before it, all little-endian::

    offset  size  field
    ------  ----  -----------------------------------------------------
         0     2  magic b"EH" (0x45 0x48)
         2     1  family id (see FAMILIES)
         3     1  format version of that family
         4     2  flags (uint16, family-specific bits)
         6     *  family parameters and payload
      -4 (end) 4  CRC-32 (zlib) of bytes [0, len - 4)

Integers in payloads are unsigned LEB128 varints (7 bits a byte, high bit
set on every byte but the last, minimal length), encoded and decoded with
numpy, never one Python call per value, except for short arrays (below
``_SMALL_ENCODE`` / ``_SMALL_DECODE`` values) where a plain loop is faster.

Decoding checks in a fixed order and raises
:class:`~ehist.errors.CorruptSketchError` saying what was expected and what
was found: length of the preamble, magic, family, version, checksum, then
the family's own fields.  A count read from the buffer is compared with
the bytes left before anything is allocated, so a corrupt length can never
make us allocate more than the buffer could hold (items of at least one
byte each; an exponential histogram's buckets that share a timestamp take
one bit of seven, so at most 7 per byte there).

Examples
--------
>>> encode_varints(np.array([0, 1, 127, 128, 300], dtype=np.uint64)).hex()
'00017f8001ac02'
>>> Reader(bytes.fromhex('00017f8001ac02')).varints(5).tolist()
[0, 1, 127, 128, 300]
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from .errors import CorruptSketchError

__all__ = [
    "MAGIC",
    "FAMILIES",
    "encode_varints",
    "encode_varints_sized",
    "varint_lengths",
    "varint_stream",
    "Layout",
    "Writer",
    "Reader",
    "seal",
    "scale_down",
    "check_tick",
    "open_sealed",
    "open_synopsis",
    "family_of",
    "register_family",
    "ticked_newest",
    "read_tick",
    "check_newest",
    "times_before",
    "MAGIC_AT",
    "FAMILY_AT",
    "VERSION_AT",
    "FLAGS_AT",
    "PREAMBLE_BYTES",
]

MAGIC = b"EH"
_INT64_MIN = -(2**63)
#: Family ids of the project's synopses (byte 2 of the preamble).
FAMILIES = {
    "ExponentialHistogram": 1,
    "StableSketch": 2,
    "SlidingLpNorm": 3,
    "SlidingFM": 4,
    "SlidingHyperLogLog": 5,
    "SlidingCountMin": 6,
    "SlidingHeavyHitters": 7,
    "SlidingQuantiles": 8,
}
_FAMILY_NAMES = {v: k for k, v in FAMILIES.items()}
#: Family ids from here up are for families defined outside the project
#: (:func:`register_family`); below, the project's own.
EXTENSION_IDS = 64


def register_family(name: str, family_id: int) -> None:
    """Give a synopsis family defined outside the project its preamble id
    (in ``[64, 255]``; the ids below are the project's), so that its
    :class:`Layout` writes it and :func:`family_of` finds the family of
    its bytes.  Call it where the family's class is defined, before its
    layout: a Spark worker that imports the module registers it there
    too.  Registering a name again with its own id does nothing.

    >>> register_family("ExponentialHistogram", 70)
    Traceback (most recent call last):
    ...
    ValueError: family ExponentialHistogram already has id 1, not 70
    >>> register_family("SlidingMax", 3)
    Traceback (most recent call last):
    ...
    ValueError: a family id must be an int in [64, 255] (the ids below are the project's), got 3
    """
    if isinstance(family_id, bool) or not isinstance(family_id, int) or not EXTENSION_IDS <= family_id <= 255:
        raise ValueError(f"a family id must be an int in [{EXTENSION_IDS}, 255] (the ids below are the project's), "
                         f"got {family_id!r}")
    if FAMILIES.get(name, family_id) != family_id:
        raise ValueError(f"family {name} already has id {FAMILIES[name]}, not {family_id}")
    if _FAMILY_NAMES.get(family_id, name) != name:
        raise ValueError(f"family id {family_id} is {_FAMILY_NAMES[family_id]}'s")
    FAMILIES[name] = family_id
    _FAMILY_NAMES[family_id] = name


def family_of(data) -> str | None:
    """The family named by a buffer's preamble (``'SlidingFM'``...), or
    None when the bytes do not start with this project's preamble.  Reads
    no further: :func:`open_sealed` checks the rest.

    >>> family_of(b"EH\\x04\\x02..."), family_of(b"xyz")
    ('SlidingFM', None)
    """
    head = bytes(data[:3])
    if len(head) < 3 or head[:2] != MAGIC:
        return None
    return _FAMILY_NAMES.get(head[2])
_PREAMBLE = struct.Struct("<2sBBH")
#: Offsets of the preamble's fields (the table above), for readers of many
#: buffers at once (the columnar decoders); PREAMBLE_BYTES: where a
#: family's parameters start.
MAGIC_AT, FAMILY_AT, VERSION_AT, FLAGS_AT, PREAMBLE_BYTES = 0, 2, 3, 4, _PREAMBLE.size
_CRC = struct.Struct("<I")
_MAX_VARINT_BYTES = 10
# Up to these sizes varints are encoded / decoded in plain Python: numpy's
# fixed cost per call (~20-40 us) exceeds the loop's (measured crossovers:
# ~300 values to encode, ~50 to decode; a synopsis' arrays are mostly small).
_SMALL_ENCODE = 256
_SMALL_DECODE = 48


def encode_varints(values: np.ndarray) -> bytes:
    """Encode non-negative integers (< 2**64) as minimal LEB128 varints."""
    v = np.asarray(values).astype(np.uint64, copy=False).ravel()
    if v.size == 0:
        return b""
    if v.size <= _SMALL_ENCODE:
        out = bytearray()
        for x in v.tolist():
            while x >= 0x80:
                out.append((x & 0x7F) | 0x80)
                x >>= 7
            out.append(x)
        return bytes(out)
    return encode_varints_sized(v, varint_lengths(v))


def varint_stream(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes as uint8, each value's byte length)``: :func:`encode_varints`
    of many uint64 values for callers that slice the output per synopsis
    (compiled when :mod:`ehist.compiled` is active, else numpy)."""
    from . import compiled

    v = np.ascontiguousarray(values, dtype=np.uint64)
    if compiled.active():
        return compiled.encode_varints(v)
    nbytes = varint_lengths(v)
    return np.frombuffer(encode_varints_sized(v, nbytes), dtype=np.uint8), nbytes


def varint_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes each uint64 value takes as a varint (int64 array)."""
    v = np.asarray(values, dtype=np.uint64)
    nbytes = np.ones(v.size, dtype=np.int64)
    for i in range(1, _MAX_VARINT_BYTES):
        nbytes += v >= np.uint64(1 << (7 * i))
    return nbytes


def encode_varints_sized(v: np.ndarray, nbytes: np.ndarray) -> bytes:
    """:func:`encode_varints` of uint64 ``v`` given ``varint_lengths(v)``
    (a caller that slices the output per synopsis needs those anyway)."""
    if v.size == 0:
        return b""
    ends = np.cumsum(nbytes)
    at = ends - nbytes  # where each value's next byte goes
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    more = nbytes > 1
    out[at] = (v & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
    # only the values with more bytes go round again: a shrinking subset
    sel = np.flatnonzero(more)
    rest, left, at = v[sel] >> np.uint64(7), nbytes[sel] - 1, at[sel] + 1
    while rest.size:
        more = left > 1
        out[at] = (rest & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        sel = np.flatnonzero(more)
        rest, left, at = rest[sel] >> np.uint64(7), left[sel] - 1, at[sel] + 1
    return out.tobytes()


class Writer:
    """Accumulates the pieces of a serialized synopsis."""

    def __init__(self, family: str, version: int, flags: int):
        self._parts = [_PREAMBLE.pack(MAGIC, FAMILIES[family], version, flags)]

    def struct(self, fmt: str, *values) -> "Writer":
        self._parts.append(struct.pack("<" + fmt, *values))
        return self

    def varints(self, values) -> "Writer":
        self._parts.append(encode_varints(np.asarray(values, dtype=np.uint64)))
        return self

    def raw(self, data: bytes) -> "Writer":
        self._parts.append(bytes(data))
        return self

    def finish(self) -> bytes:
        return seal(b"".join(self._parts))


def scale_down(values: np.ndarray) -> tuple[int, np.ndarray]:
    """(tick, values // tick) for uint64 ``values``: the tick is their gcd
    when that is 2 or more (whole milliseconds or seconds of timestamps in
    microseconds), else 1.  Format version 2 stores such a tick, exactly
    when it is 2 or more; :func:`check_tick` is the reader's side."""
    tick = int(np.gcd.reduce(values)) if values.size else 0
    if tick < 2:
        return 1, values
    return tick, values // np.uint64(tick)


def ticked_newest(r: "Reader", flags: int, name: str, has_newest: int = 1, tick_flag: int = 2):
    """The head of a synopsis whose ages may be stored in ticks
    (:func:`scale_down`; the tick flag from format version 2 on):
    ``(newest, ticked)``, or None for an empty synopsis (read to its end).
    Refuses a tick flag before version 2 or on an empty synopsis."""
    ticked = bool(flags & tick_flag)
    if ticked and r.version < 2:
        raise CorruptSketchError(f"{name}: expected no tick flag in format version {r.version}")
    if not flags & has_newest:
        if ticked:
            raise CorruptSketchError(f"{name}: expected no tick flag on an empty sketch")
        r.expect_end()
        return None
    return check_newest(r.struct("q", "newest timestamp")[0], name), ticked


def read_tick(r: "Reader", ticked: bool, name: str) -> int:
    """The stored tick (at least 2) when ``ticked``, else 1."""
    tick = r.varint("age tick") if ticked else 1
    if ticked and tick < 2:
        raise CorruptSketchError(f"{name}: expected an age tick of at least 2, found {tick}")
    return tick


def check_tick(values: np.ndarray, tick: int, name: str, each: str, all_: str) -> None:
    """Raise CorruptSketchError unless the stored ``values`` fit the tick
    rule of :func:`scale_down`: no tick (1) and a gcd below 2, or a tick
    and a gcd of 1.  ``each`` / ``all_`` name the values in messages."""
    g = int(np.gcd.reduce(values)) if values.size else 0
    if tick == 1 and g >= 2:
        raise CorruptSketchError(f"{name}: expected a tick flag: every {each} is a multiple of {g}")
    if tick > 1 and g != 1:
        raise CorruptSketchError(f"{name}: expected {all_} in units of tick {tick} with gcd 1, found gcd {g}")


def unscale_ages(ages: np.ndarray, tick: int, window: int, name: str) -> np.ndarray:
    """Stored ages (uint64) times ``tick``, checking that the tick follows
    the rule of :func:`scale_down` (:func:`check_tick`) and that every age
    stays below the window; raises CorruptSketchError otherwise."""
    check_tick(ages, tick, name, "age", "ages")
    top = int(ages.max()) if ages.size else 0
    if top >= -(-window // tick):
        raise CorruptSketchError(f"{name}: expected ages below the window {window}, found {top} ticks of {tick}")
    return ages * np.uint64(tick)


def check_newest(newest: int, name: str) -> int:
    """The one rule for a stored newest timestamp, in every family's
    decoder: above -2**63 (no update takes a timestamp of -2**63)."""
    if newest == _INT64_MIN:
        raise CorruptSketchError(f"{name}: expected a newest timestamp above -2**63, found {newest}")
    return newest


def times_before(newest: int, ages, name: str, what: str = "timestamps") -> np.ndarray:
    """``newest - ages`` as int64 (``ages`` non-negative, uint64 or int64),
    refused unless every time stays above -2**63: below int64 it would wrap
    to a time later than ``newest``.

    >>> times_before(10, np.array([0, 3], dtype=np.uint64), "x").tolist()
    [10, 7]
    >>> times_before(-2**63 + 2, np.array([5], dtype=np.uint64), "HLL")
    Traceback (most recent call last):
    ...
    ehist.errors.CorruptSketchError: HLL: expected timestamps within int64, found newest -9223372036854775806 less an age of 5
    """
    a = np.asarray(ages)
    top = int(a.max()) if a.size else 0
    if top > newest - (_INT64_MIN + 1):
        raise CorruptSketchError(f"{name}: expected {what} within int64, found newest {newest} less an age of {top}")
    # modular uint64 arithmetic is exact here: every result lies within int64
    return (np.array(newest, dtype=np.int64).view(np.uint64) - a.astype(np.uint64)).view(np.int64)


def seal(body: bytes) -> bytes:
    """Append the CRC-32 trailer to ``body``."""
    return body + _CRC.pack(zlib.crc32(body) & 0xFFFFFFFF)


def _as_bytes(data) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(
        f"expected bytes, bytearray or memoryview, got {type(data).__name__}"
    )


def open_sealed(data, family: str, versions: tuple[int, ...]) -> tuple["Reader", int, int]:
    """Check preamble and checksum; return a reader over the payload.

    Returns
    -------
    (reader, version, flags)
    """
    buf = _as_bytes(data)
    name = family
    minimum = _PREAMBLE.size + _CRC.size
    if len(buf) < minimum:
        raise CorruptSketchError(
            f"{name}: expected at least {minimum} bytes (preamble and checksum), "
            f"found {len(buf)}"
        )
    magic, fam, version, flags = _PREAMBLE.unpack_from(buf, 0)
    if magic != MAGIC:
        raise CorruptSketchError(
            f"{name}: expected magic {MAGIC!r}, found {magic!r}: these bytes "
            "are not an ehist synopsis"
        )
    if fam != FAMILIES[family]:
        found = _FAMILY_NAMES.get(fam, f"unknown family {fam}")
        raise CorruptSketchError(
            f"{name}: expected family id {FAMILIES[family]} ({family}), "
            f"found {fam} ({found})"
        )
    if version not in versions:
        raise CorruptSketchError(
            f"{name}: expected format version in {sorted(versions)}, found "
            f"{version} (written by a newer release?)"
        )
    (stored,) = _CRC.unpack_from(buf, len(buf) - _CRC.size)
    actual = zlib.crc32(memoryview(buf)[: len(buf) - _CRC.size]) & 0xFFFFFFFF
    if stored != actual:
        raise CorruptSketchError(
            f"{name}: expected checksum {stored:#010x}, found {actual:#010x}: "
            "the bytes were altered or truncated"
        )
    reader = Reader(buf, _PREAMBLE.size, len(buf) - _CRC.size, name)
    reader.version = version
    return reader, version, flags


class Reader:
    """Bounds-checked sequential reader over a byte buffer."""

    def __init__(self, buf: bytes, start: int = 0, end: int | None = None, name: str = "sketch"):
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end
        self.name = name
        self.version = None  # the format version, once open_sealed has read it

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> None:
        if n > self.remaining:
            raise CorruptSketchError(
                f"{self.name}: expected {n} more bytes for {what}, found "
                f"{self.remaining}"
            )

    def struct(self, fmt: str, what: str) -> tuple:
        s = struct.Struct("<" + fmt)
        self._need(s.size, what)
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def raw(self, n: int, what: str) -> bytes:
        self._need(n, what)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def varint(self, what: str = "a varint") -> int:
        return int(self.varints(1, what)[0])

    def varints(self, count: int, what: str = "varints") -> np.ndarray:
        """Decode ``count`` varints (uint64)."""
        count = int(count)
        if count < 0:
            raise CorruptSketchError(f"{self.name}: negative count for {what}")
        if count == 0:
            return np.zeros(0, dtype=np.uint64)
        # Every varint takes at least one byte: check before allocating.
        self._need(count, f"{count} {what}")
        if count <= _SMALL_DECODE:
            return self._small_varints(count, what)
        window = np.frombuffer(
            self.buf, dtype=np.uint8, count=min(self.remaining, count * _MAX_VARINT_BYTES),
            offset=self.pos,
        )
        stops = np.flatnonzero(window < 0x80)
        if stops.size < count and window.size < self.remaining:
            raise CorruptSketchError(
                f"{self.name}: expected {count} {what} of at most "
                f"{_MAX_VARINT_BYTES} bytes each, found a longer run of continuation bytes"
            )
        if stops.size < count:
            raise CorruptSketchError(
                f"{self.name}: expected {count} {what}, found {stops.size} "
                "complete ones before the end of the buffer"
            )
        stops = stops[:count]
        end = int(stops[-1]) + 1
        starts = np.empty(count, dtype=np.int64)
        starts[0] = 0
        starts[1:] = stops[:-1] + 1
        lengths = stops - starts + 1
        if int(lengths.max()) > _MAX_VARINT_BYTES:
            raise CorruptSketchError(
                f"{self.name}: expected varints of at most {_MAX_VARINT_BYTES} "
                f"bytes in {what}, found one of {int(lengths.max())}"
            )
        body = window[:end]
        last = body[stops]
        if np.any((lengths > 1) & (last == 0)):
            raise CorruptSketchError(f"{self.name}: non-minimal varint in {what}")
        if np.any((lengths == _MAX_VARINT_BYTES) & (last > 1)):
            raise CorruptSketchError(f"{self.name}: varint in {what} exceeds 64 bits")
        group = np.repeat(np.arange(count), lengths)
        shift = (np.arange(end) - starts[group]) * 7
        parts = (body & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
        values = np.add.reduceat(parts, starts)
        self.pos += end
        return values

    def _small_varints(self, count: int, what: str) -> np.ndarray:
        """:meth:`varints` for a few values, in plain Python (numpy's
        per-call cost dominates there), with the same checks."""
        buf, pos, end = self.buf, self.pos, self.end
        out = []
        for i in range(count):
            x = shift = 0
            start = pos
            while True:
                if pos >= end:
                    raise CorruptSketchError(
                        f"{self.name}: expected {count} {what}, found {i} "
                        "complete ones before the end of the buffer"
                    )
                b = buf[pos]
                pos += 1
                x |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if pos - start == _MAX_VARINT_BYTES:
                    raise CorruptSketchError(
                        f"{self.name}: expected {count} {what} of at most "
                        f"{_MAX_VARINT_BYTES} bytes each, found a longer run of continuation bytes"
                    )
            if b == 0 and pos - start > 1:
                raise CorruptSketchError(f"{self.name}: non-minimal varint in {what}")
            if b > 1 and pos - start == _MAX_VARINT_BYTES:
                raise CorruptSketchError(f"{self.name}: varint in {what} exceeds 64 bits")
            out.append(x)
        self.pos = pos
        return np.array(out, dtype=np.uint64)

    def expect_end(self) -> None:
        if self.remaining:
            raise CorruptSketchError(
                f"{self.name}: expected the payload to end here, found "
                f"{self.remaining} trailing bytes"
            )


def open_synopsis(data, family: str, version, known_flags: int, fmt: str, what: str, factory, least=None):
    """Open a synopsis's bytes up to its parameters.

    ``version``: the format version read, or a tuple of them (the reader's
    ``version`` says which one the bytes are).  Checks preamble and
    checksum (:func:`open_sealed`), rejects unknown
    flag bits, reads the parameters with ``struct`` format ``fmt`` and
    builds the empty synopsis with ``factory(*parameters)``, turning a
    parameter error into CorruptSketchError.  ``least(flags, *parameters)``,
    when given, is the fewest payload bytes such a synopsis takes: fewer
    left are refused before ``factory`` allocates what the parameters say.

    Returns
    -------
    (reader, flags, synopsis)
    """
    versions = tuple(version) if isinstance(version, (tuple, list)) else (version,)
    r, _version, flags = open_sealed(data, family, versions)
    if flags & ~known_flags:
        raise CorruptSketchError(
            f"{family}: expected flags within {known_flags:#06x}, found {flags:#06x}"
        )
    params = r.struct(fmt, what)
    if least is not None:
        try:
            need = least(flags, *params)
        except (TypeError, ValueError, OverflowError):
            need = 0  # the factory names the bad parameter
        if r.remaining < need:
            raise CorruptSketchError(f"{family}: expected at least {need} bytes for {what} {tuple(params)}, "
                                     f"found {r.remaining}")
    try:
        synopsis = factory(*params)
    except ValueError as exc:
        raise CorruptSketchError(f"{family}: invalid parameters: {exc}") from None
    return r, flags, synopsis


@dataclass(frozen=True)
class Layout:
    """A family's byte layout, declared once beside its class: the family
    (its id in :data:`FAMILIES`), the format ``version`` written and the
    versions ``read``, the known ``flags`` bits (bit 0 "has newest" where a
    family has one), the ``struct`` format of the ``parameters`` after the
    preamble and how messages name them (``what``).  The class's codec, its
    columnar codec and its golden files read the same declaration.

    >>> FM = Layout("SlidingFM", 2, (1, 2), 3, "qIQ", "window, num_bitmaps and seed")
    >>> FM.family_id, FM.head.size        # preamble and parameters
    (4, 26)
    """

    family: str
    version: int
    read: tuple
    flags: int
    parameters: str
    what: str

    @property
    def family_id(self) -> int:
        return FAMILIES[self.family]

    @property
    def head(self) -> struct.Struct:
        """The preamble and the parameters, as one ``struct``."""
        return struct.Struct("<2sBBH" + self.parameters)

    def parameter_bytes(self, blob) -> bytes:
        """The bytes of a blob's parameters (after the preamble), to group
        or compare sketches before decoding them; no check (decoding
        checks).

        >>> FM = Layout("SlidingFM", 2, (1, 2), 3, "qIQ", "window, num_bitmaps and seed")
        >>> FM.parameter_bytes(bytes(6) + bytes(range(20)) + b"rest") == bytes(range(20))
        True
        """
        return bytes(blob[PREAMBLE_BYTES:self.head.size])

    def writer(self, flags: int, *parameters) -> "Writer":
        """A :class:`Writer` of this layout's preamble and ``parameters``."""
        return Writer(self.family, self.version, flags).struct(self.parameters, *parameters)

    def open(self, data, factory, least=None):
        """:func:`open_synopsis` of this layout: ``(reader, flags, synopsis)``."""
        return open_synopsis(data, self.family, self.read, self.flags, self.parameters, self.what, factory, least)
