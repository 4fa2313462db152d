"""What every family's union of a lone sketch must give
(:meth:`udaf.family.Family.kept_alone`): its own bytes where the
family's decoder takes it, ``merge_all``'s bytes (and its errors) for
any byte of it altered, an older version's written anew."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from ehist import CorruptSketchError
from ehist.serialization import PREAMBLE_BYTES


def outcome(fn):
    """``("ok", fn())``, or ``("error", the name of the error it raises)``."""
    try:
        return "ok", fn()
    except (CorruptSketchError, ValueError) as exc:
        return "error", type(exc).__name__


def assert_lone_sketches_keep_their_bytes(spec_class, synopsis, blob: bytes, old: bytes | None = None) -> None:
    """``spec_class.merge_groups`` of ``blob`` alone, beside a pair, and of
    ``blob`` with each byte after the preamble replaced by 0, 1, itself
    with the low bit flipped and 0x80, the checksum made good:
    ``synopsis.merge_all``'s bytes where ``synopsis.from_bytes`` takes it,
    the same error where it refuses (five or more of each); ``old`` (an
    older version's bytes) written anew."""
    pair = synopsis.merge_all([synopsis.from_bytes(blob), synopsis.from_bytes(blob)]).to_bytes()
    assert spec_class.merge_groups([blob, blob, blob], np.array([0, 1])) == [blob, pair]
    taken = refused = 0
    for at in range(PREAMBLE_BYTES, len(blob) - 4):
        for byte in {0, 1, blob[at] ^ 1, 0x80}:
            body = blob[:at] + bytes([byte]) + blob[at + 1:-4]
            altered = body + struct.pack("<I", zlib.crc32(body))
            expected = outcome(lambda: [synopsis.merge_all([synopsis.from_bytes(altered)]).to_bytes()])
            assert outcome(lambda: spec_class.merge_groups([altered], np.array([0]))) == expected, (at, byte)
            taken += expected[0] == "ok"
            refused += expected[0] != "ok"
    assert taken >= 5 and refused >= 5
    if old is not None:
        assert spec_class.merge_groups([old], np.array([0])) == [synopsis.from_bytes(old).to_bytes()] != [old]
