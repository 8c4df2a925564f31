"""Variable-length integers of the Kafka record format and of flexible protocol versions.

Unsigned varints are base-128, least significant group first, high bit set on every byte
but the last (protobuf's encoding). Signed varints are zigzag-mapped first, so small
negative numbers stay short: 0 → 0, -1 → 1, 1 → 2, -2 → 3, …

Kafka bounds the length: a varint (int32) takes at most 5 bytes, a varlong (int64) at
most 10. A longer encoding is an error here as it is in Kafka's ``ByteUtils``; so is a
buffer that ends inside a varint. Both raise :class:`VarintError`; the record codec turns
that into the Kafka error code that fits where the varint was.

Decoders take ``(buf, pos)`` and return ``(value, next_pos)``; ``buf`` is anything
indexable by position that yields ints (bytes, bytearray, memoryview).

Hot loops (the record decoder) inline the one-byte case and call :func:`read_raw` for
the rest; encoders look the common short values up in a table.
"""

from __future__ import annotations

__all__ = [
    "VarintError",
    "decode_unsigned_varint",
    "decode_varint",
    "decode_varlong",
    "encode_raw",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "read_raw",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "skip_tagged_fields",
    "zigzag_decode",
    "zigzag_encode",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


class VarintError(ValueError):
    """A varint longer than its type allows, out of range, or cut off by the end of the buffer."""


def encode_raw(n: int) -> bytes:
    """Base-128 bytes of any non-negative int, unbounded (a zigzagged varlong, say); the
    slow path behind the table lookups."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Encodings of every value below 2**14 (one and two byte varints), shared and immutable.
TABLE_SIZE = 1 << 14
TABLE: tuple[bytes, ...] = tuple(encode_raw(n) for n in range(TABLE_SIZE))


def zigzag_encode(n: int) -> int:
    """Map a signed int64 to an unsigned one: 0, -1, 1, -2 → 0, 1, 2, 3."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def read_raw(buf, pos: int, max_bytes: int = MAX_VARLONG_BYTES) -> tuple[int, int]:
    """Read an unsigned base-128 value of at most ``max_bytes`` bytes at ``pos``.

    The general case behind the inlined one-byte fast path of the record decoder.
    Raises ``IndexError`` (not VarintError) when the buffer ends first; callers that
    inline this translate both.
    """
    result = 0
    shift = 0
    limit = 7 * max_bytes
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= limit:
            raise VarintError(f"varint longer than {max_bytes} bytes")


def encode_unsigned_varint(n: int) -> bytes:
    if n < TABLE_SIZE:
        if n < 0:
            raise VarintError(f"unsigned varint cannot hold {n}")
        return TABLE[n]
    if n > UINT32_MAX:
        raise VarintError(f"unsigned varint cannot hold {n}")
    return encode_raw(n)


def decode_unsigned_varint(buf, pos: int = 0) -> tuple[int, int]:
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value, pos = read_raw(buf, pos, MAX_VARINT_BYTES)
    except IndexError:
        raise VarintError("buffer ends inside a varint") from None
    return value & UINT32_MAX, pos


def encode_varint(n: int) -> bytes:
    """Zigzag varint of an int32."""
    if not INT32_MIN <= n <= INT32_MAX:
        raise VarintError(f"{n} does not fit in an int32 varint")
    z = (n << 1) ^ (n >> 63)
    return TABLE[z] if z < TABLE_SIZE else encode_raw(z)


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of an int64."""
    if not INT64_MIN <= n <= INT64_MAX:
        raise VarintError(f"{n} does not fit in an int64 varlong")
    z = (n << 1) ^ (n >> 63)
    return TABLE[z] if z < TABLE_SIZE else encode_raw(z)


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Zigzag int32 at ``pos``: ``(value, next_pos)``. Wraps like Java's int on a 5-byte overflow."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        z, pos = read_raw(buf, pos, MAX_VARINT_BYTES)
    except IndexError:
        raise VarintError("buffer ends inside a varint") from None
    z &= UINT32_MAX
    return (z >> 1) ^ -(z & 1), pos


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Zigzag int64 at ``pos``: ``(value, next_pos)``."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        z, pos = read_raw(buf, pos, MAX_VARLONG_BYTES)
    except IndexError:
        raise VarintError("buffer ends inside a varlong") from None
    z &= (1 << 64) - 1
    return (z >> 1) ^ -(z & 1), pos


def size_of_unsigned_varint(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


def size_of_varint(n: int) -> int:
    return size_of_unsigned_varint((n << 1) ^ (n >> 63))


size_of_varlong = size_of_varint


def skip_tagged_fields(buf, pos: int) -> int:
    """Position after the tagged-field section at ``pos`` (flexible protocol versions): a
    count, then per field a tag, a size and that many bytes. VarintError when it runs past
    the end of ``buf``."""
    if buf[pos] == 0:  # no tagged fields: the usual case
        return pos + 1
    count, pos = decode_unsigned_varint(buf, pos)
    for _ in range(count):
        _, pos = decode_unsigned_varint(buf, pos)
        size, pos = decode_unsigned_varint(buf, pos)
        pos += size
    if pos > len(buf):
        raise VarintError("tagged fields run past the end of the buffer")
    return pos
