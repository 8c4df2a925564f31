"""Reading and writing the versioned keys and values that coordinators keep in internal topics.

``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` records use
Kafka's message encoding: fixed-width big-endian integers, 16-byte uuids, and strings, byte
arrays and arrays that are length-prefixed (int16/int32) in older versions and compact
(unsigned varint length + 1, then tagged fields) in flexible ones. A key or value starts
with its int16 type or schema version. This module owns the encoding of those fields
(``Reader``, ``Writer``); each schema module says what the fields are. Any malformed input
raises CorruptMessageError.
"""

from __future__ import annotations

import struct
import uuid

from odradek.protocol import errors
from odradek.protocol.varint import decode_unsigned_varint, encode_unsigned_varint

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

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def int32_array(self) -> list[int]:
        return [self.int32() for _ in range(self.array())]

    def string_array(self) -> list[str]:
        return [self.string() or "" for _ in range(self.array())]

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

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


class Writer:
    """Fields written in order after an int16 (a value's version, a key's type)."""

    __slots__ = ("parts", "flexible")

    def __init__(self, version: int, flexible: bool):
        self.parts = [_I16.pack(version)]
        self.flexible = flexible

    def int8(self, n: int) -> None:
        self.parts.append(_I8.pack(n))

    def int16(self, n: int) -> None:
        self.parts.append(_I16.pack(n))

    def int32(self, n: int) -> None:
        self.parts.append(_I32.pack(n))

    def int64(self, n: int) -> None:
        self.parts.append(_I64.pack(n))

    def uuid(self, u: uuid.UUID) -> None:
        self.parts.append(u.bytes)

    def string(self, s: str | None) -> None:
        if s is None:
            self.parts.append(b"\x00" if self.flexible else _I16.pack(-1))
            return
        data = s.encode()
        self.parts.append(encode_unsigned_varint(len(data) + 1) if self.flexible else _I16.pack(len(data)))
        self.parts.append(data)

    def bytes_(self, b: bytes) -> None:
        self.parts.append(encode_unsigned_varint(len(b) + 1) if self.flexible else _I32.pack(len(b)))
        self.parts.append(bytes(b))

    def array(self, n: int) -> None:
        self.parts.append(encode_unsigned_varint(n + 1) if self.flexible else _I32.pack(n))

    def int32_array(self, values) -> None:
        values = list(values)
        self.array(len(values))
        for v in values:
            self.int32(v)

    def string_array(self, values) -> None:
        values = list(values)
        self.array(len(values))
        for v in values:
            self.string(v)

    def tags(self) -> None:
        """An empty tagged-field section (flexible versions only)."""
        if self.flexible:
            self.parts.append(b"\x00")

    def getvalue(self) -> bytes:
        return b"".join(self.parts)
