"""The byte layout of an :class:`~ehist.ExponentialHistogram`, declared once.

Every reader and writer of these bytes (``ExponentialHistogram.to_bytes`` /
``from_bytes``, the columnar codec of :mod:`ehist.columnar`, and through
them :mod:`udaf`) takes its version, flags, offsets and field formats from
here (DataSketches' ``PreambleUtil``), so a rule added to one cannot miss
its twin.  The shared preamble (magic, family, version, flags, CRC) is
:mod:`ehist.serialization`'s.

Layout (after the common preamble of :mod:`ehist.serialization`,
family id 1, format version 2)::

    offset  size    field
    ------  ------  ---------------------------------------------
         0       6  preamble: magic, family 1, version 2,
                    flags: bit 0 has_newest, bit 1 merged,
                    bit 2 shared timestamps, bit 3 tick
         6       8  window (int64)
        14       8  eps (float64)
        22       8  newest (int64)            [if has_newest]
         .   varint n_buckets
         .   varint n_runs, then n_runs pairs (exponent, run length):
                    bucket sizes 2**exponent, newest bucket first
         .   varint tick >= 2: the gcd of the deltas and widths
                    below, stored divided by it          [if tick]
         .   ceil(n / 7) bytes, 7 bits each, lowest first: bit i set
                    when bucket i has bucket i - 1's newest
                    timestamp                 [if shared timestamps]
         .   g x varint  timestamp deltas: newest - hi[0], then
                    hi[i-1] - hi[i] for every bucket i the bitmap
                    does not mark (g = n - bits set; never 0 then)
         .   varint  hi[n-1] - lo[n-1]            [ordered]
             n x varint  hi[i] - lo[i]            [merged]
       end-4     4  CRC-32 of everything before

An ordered histogram's ``lo[i]`` is ``hi[i + 1]`` (``hi[i]`` for a
bucket of size 1), so only the last one is stored.  Sizes are
exponents, run-length encoded (an ordered histogram has one run per
size).  A sum spreads each value over buckets of one timestamp (the
newest value of 1,500 at eps 0.01 fills ~250 buckets): version 2
marks them in the bitmap, written exactly when it is shorter than a
zero delta (one byte) per shared timestamp, that is when more than
ceil(n / 7) buckets share one.  Timestamps of whole milliseconds or
seconds (in microseconds) have deltas that are multiples of 1,000:
the tick stores them divided by their gcd, written exactly when it
is 2 or more.  Version 1 (still read) is the same layout without
the tick and the bitmap.

The rows form (format version 3): a histogram whose window holds at most
``k = ceil(1 / eps)`` rows (one per timestamp, values summed) may keep
the rows themselves (:meth:`ExponentialHistogram.of_rows`; sketch tables
write a key's few rows so): a few bytes a row where a sum's canonical
buckets take hundreds, and every answer exact::

    offset  size    field
    ------  ------  ---------------------------------------------
         0       6  preamble: magic, family 1, version 3,
                    flags: bit 0 has_newest (always set),
                    bit 3 tick, bit 4 values
         6       8  window (int64)
        14       8  eps (float64)
        22       8  newest (int64)
         .   varint m, the row count (at most k)
         .   varint tick >= 2: the gcd of the gaps   [if tick]
         m x varint  time gaps, oldest row first: newest - t[0],
                    then t[j] - t[j - 1] (each above 0)
         m x varint  values, each >= 1 (all 1 without the
                    values flag: none written)        [if values]
       end-4     4  CRC-32 of everything before

Readers of versions 1 and 2 refuse version 3 by its version: upgrade
readers before writers.
"""

from __future__ import annotations

import struct

import numpy as np

from .serialization import FAMILIES, FLAGS_AT, PREAMBLE_BYTES, VERSION_AT, Layout

__all__ = ["FAMILY", "FORMAT_VERSION", "ROWS_VERSION", "READ_VERSIONS", "FLAG_HAS_NEWEST", "FLAG_MERGED",
           "FLAG_SHARED", "FLAG_TICK", "FLAG_VALUES", "KNOWN_FLAGS", "PARAMETERS", "HEAD", "NEWEST", "HEAD_BYTES",
           "FLAGS_AT", "VERSION_AT",
           "BITS", "MAX_EXPONENT", "LAYOUT", "flags_of", "version_of", "head_fields"]

FAMILY = FAMILIES["ExponentialHistogram"]
FORMAT_VERSION = 2
#: The rows form's format version (written for a histogram keeping its rows).
ROWS_VERSION = 3
READ_VERSIONS = (1, 2, 3)
FLAG_HAS_NEWEST = 1
FLAG_MERGED = 2
FLAG_SHARED = 4  # version 2: a bitmap marks buckets sharing the previous one's timestamp
FLAG_TICK = 8  # version 2: deltas and widths are in units of a tick (their gcd)
FLAG_VALUES = 16  # version 3: values other than 1 are written
KNOWN_FLAGS = FLAG_HAS_NEWEST | FLAG_MERGED | FLAG_SHARED | FLAG_TICK | FLAG_VALUES
#: ``struct`` format of the parameters after the preamble: window, eps.
PARAMETERS = "qd"
#: The declaration every codec of the family reads (ehist.serialization.Layout).
LAYOUT = Layout("ExponentialHistogram", FORMAT_VERSION, READ_VERSIONS, KNOWN_FLAGS, PARAMETERS, "window and eps")
#: Preamble and parameters; the newest timestamp follows when flagged.
HEAD = struct.Struct("<2sBBH" + PARAMETERS)
NEWEST = struct.Struct("<q")
#: Bytes before the payload of a histogram with a newest timestamp.
HEAD_BYTES = HEAD.size + NEWEST.size
#: Bitmap bits per byte (each byte a one-byte varint).
BITS = 7
MAX_EXPONENT = 62
_FIELDS = np.dtype([("window", "<i8"), ("eps", "<f8"), ("newest", "<i8")])


def flags_of(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The flags byte of the histograms starting at ``starts`` in ``buf``."""
    return buf[starts + FLAGS_AT]


def version_of(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return buf[starts + VERSION_AT]


def head_fields(buf: np.ndarray, starts: np.ndarray):
    """``(window, eps, newest)`` arrays of histograms with a newest
    timestamp starting at ``starts`` in ``buf`` (uint8)."""
    fields = np.ascontiguousarray(buf[starts[:, None] + np.arange(PREAMBLE_BYTES, HEAD_BYTES)]).view(_FIELDS).ravel()
    return fields["window"].astype(np.int64), fields["eps"].astype(np.float64), fields["newest"].astype(np.int64)
