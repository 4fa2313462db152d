"""The byte layout of a :class:`~distinct.SlidingHyperLogLog`, declared once.

Its scalar codec (``SlidingHyperLogLog.to_bytes`` / ``from_bytes``) and its
columnar codec (:mod:`distinct.columnar`, many sketches at once) take the
version, flags, offsets and field formats from here (DataSketches'
``PreambleUtil``); the shared preamble and CRC are
:mod:`ehist.serialization`'s.  Family id 5, format version 2:

::

    offset  size  field
         0     6  preamble (magic b"EH", family 5, version 2, flags:
                  bit 0 has_newest, bit 1 tick)
         6     8  window (int64)
        14     1  precision (uint8)
        15     8  seed (uint64)
        23     8  newest (int64)                   [if has_newest]
         .     *  varint n_entries
         .     *  varint tick >= 2: the gcd of the ages    [if tick]
         .     *  n varints: register deltas (entries sorted by
                  register, then time)
         .     n  ranks (uint8)
         .     *  n varints: (newest - timestamp) / tick
     end-4     4  CRC-32

The tick is written exactly when the ages' gcd is 2 or more (event
times of whole milliseconds or seconds, in microseconds).  Version
1 (still read) has no tick.
"""

from __future__ import annotations

import struct

import numpy as np

from ehist.serialization import FAMILIES, FLAGS_AT, VERSION_AT, Layout

__all__ = ["FAMILY", "FORMAT_VERSION", "READ_VERSIONS", "FLAG_HAS_NEWEST", "FLAG_TICK", "KNOWN_FLAGS", "LAYOUT",
           "PARAMETERS", "PREAMBLE", "PARAMS", "NEWEST", "FIELDS", "HEAD_BYTES", "FLAGS_AT", "VERSION_AT",
           "flags_of", "version_of", "head_fields"]

FAMILY = FAMILIES["SlidingHyperLogLog"]
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
FLAG_HAS_NEWEST = 1
FLAG_TICK = 2  # version 2: ages stored in units of their gcd
KNOWN_FLAGS = FLAG_HAS_NEWEST | FLAG_TICK
#: ``struct`` format of the parameters after the preamble: window, precision, seed.
PARAMETERS = "qBQ"
#: The declaration every codec of the family reads (ehist.serialization.Layout).
LAYOUT = Layout("SlidingHyperLogLog", FORMAT_VERSION, READ_VERSIONS, KNOWN_FLAGS, PARAMETERS,
                "window, precision and seed")
PREAMBLE = struct.Struct("<2sBBH")
PARAMS = struct.Struct("<" + PARAMETERS)
NEWEST = struct.Struct("<q")
#: The parameters and the newest timestamp, as one record after the preamble.
FIELDS = np.dtype([("window", "<i8"), ("precision", "u1"), ("seed", "<u8"), ("newest", "<i8")])
#: Bytes before the payload of a sketch with a newest timestamp.
HEAD_BYTES = PREAMBLE.size + FIELDS.itemsize


def flags_of(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The flags byte of the sketches starting at ``starts`` in ``buf``."""
    return buf[starts + FLAGS_AT]


def version_of(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return buf[starts + VERSION_AT]


def head_fields(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The :data:`FIELDS` records of sketches with a newest timestamp
    starting at ``starts`` in ``buf`` (uint8)."""
    return np.ascontiguousarray(buf[starts[:, None] + np.arange(PREAMBLE.size, HEAD_BYTES)]).view(FIELDS).ravel()
