"""Reading the versioned keys and values that coordinators keep in internal topics.

``__consumer_offsets`` and ``__transaction_state`` records use Kafka's message encoding:
fixed-width big-endian integers, and strings, byte arrays and arrays that are
length-prefixed (int16/int32) in older versions and compact (unsigned varint length + 1,
then tagged fields) in flexible ones. A value starts with its int16 schema version. This
module owns the reading of those fields; each schema module says what the fields are.
Any malformed input raises CorruptMessageError.
"""

from __future__ import annotations

import struct

from odradek.protocol import errors
from odradek.protocol.varint import decode_unsigned_varint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    """Fields read in order from ``buf`` from ``pos``; ``record`` names it in errors."""

    __slots__ = ("buf", "pos", "flexible", "record")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False, record: str = "record"):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible
        self.record = record

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise errors.CorruptMessageError(f"{self.record} is truncated")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def int8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def _uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except (ValueError, IndexError) as exc:
            raise errors.CorruptMessageError(f"bad varint in {self.record}: {exc}") from exc
        return value

    def string(self) -> str | None:
        n = self._uvarint() - 1 if self.flexible else self.int16()
        return None if n < 0 else self._take(n).decode()

    def bytes_(self) -> bytes:
        n = self._uvarint() - 1 if self.flexible else self.int32()
        return b"" if n < 0 else bytes(self._take(n))

    def array(self) -> int:
        n = self._uvarint() - 1 if self.flexible else self.int32()
        return max(n, 0)

    def tags(self) -> dict[int, bytes]:
        """The tagged fields (none unless flexible), by tag."""
        out: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self._uvarint()):
                tag = self._uvarint()
                out[tag] = self._take(self._uvarint())
        return out

    def skip_tags(self) -> None:
        self.tags()


def value_reader(
    value: bytes | None, versions: range, what: str, flexible_from: int, record: str
) -> tuple[Reader, int]:
    """A Reader after the value's int16 version, and that version; ``what`` names the value
    in errors for a missing or unknown version, ``record`` in errors while reading it."""
    if value is None or len(value) < 2:
        raise errors.CorruptMessageError(f"{what} is too short")
    version = _I16.unpack_from(value, 0)[0]
    if version not in versions:
        raise errors.CorruptMessageError(f"unknown {what} version {version}")
    return Reader(value, 2, version >= flexible_from, record), version
