"""Records in v2 batches (Kafka's ``DefaultRecord``): one record encoded, decoded or scanned.

``batch.py`` owns the fixed 61-byte v2 header, ``record_batch.py`` and ``batch_builder.py``
whole batches; this module owns one record, the unit inside a batch's (decompressed)
payload. Pure functions over bytes.

A v2 record (varint = zigzag varint, see ``varint.py``)::

    length          varint   bytes after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - batch.baseTimestamp
    offsetDelta     varint   offset - batch.baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         [keyLength varint, key utf-8 (never null), valueLength varint, value]

In a LogAppendTime batch every record's timestamp reads as the batch's maxTimestamp.

Who calls what: producers append records through ``batch_builder`` (which uses
:func:`append_record`); consumers decode them through ``record_decoders.decode_records``,
whose reference path is :func:`decode_records_one_by_one`; storage (the cleaner,
recovery) uses :func:`scan_records` (keys, deltas and byte spans, values skipped).
Errors are Kafka's ``InvalidRecordError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from odradek.protocol import errors
from odradek.protocol.varint import TABLE, TABLE_SIZE, VarintError, encode_raw, read_raw

Header = tuple[str, bytes | None]

MIN_RECORD_SIZE = 7  # length, attributes, ts, offset, key, value, header count: 1 byte each
# Most bytes a record adds beyond key, value and headers: length 5 + attributes 1 +
# timestamp delta 10 + offset delta 5 (Kafka's DefaultRecord.MAX_RECORD_OVERHEAD).
MAX_RECORD_OVERHEAD = 21

_NULL = b"\x01"  # zigzag varint of -1
_ZERO = b"\x00"
_new_tuple = tuple.__new__


class Record(NamedTuple):
    """A record as a v2 batch stores it: offset and timestamp relative to the batch."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()


class DecodedRecord(NamedTuple):
    """A record with its absolute offset and timestamp, as a consumer sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()


class NewRecord(NamedTuple):
    """A record to be produced: a plain ``(key, value, headers, timestamp)`` tuple works too.

    ``timestamp`` is milliseconds since the epoch; None means "now".
    """

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp: int | None = None


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [encode_raw(len(headers) << 1)]
    for key, value in headers:
        if key is None:
            raise errors.InvalidRecordError("record header keys cannot be null")
        raw_key = key.encode() if isinstance(key, str) else bytes(key)
        parts.append(encode_raw(len(raw_key) << 1))
        parts.append(raw_key)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_raw(len(value) << 1))
            parts.append(value)
    return b"".join(parts)


def append_record(parts: list, offset_delta: int, timestamp_delta: int, key, value, headers) -> int:
    """Append the encoded pieces of one record to ``parts``; return its encoded size.

    The producer's hot path: table lookups for short varints, no intermediate bytes
    except the length prefix, one join per batch.
    """
    z = (timestamp_delta << 1) ^ (timestamp_delta >> 63)
    ts_bytes = TABLE[z] if 0 <= z < TABLE_SIZE else encode_raw(z)
    z = (offset_delta << 1) ^ (offset_delta >> 63)
    offset_bytes = TABLE[z] if 0 <= z < TABLE_SIZE else encode_raw(z)
    if key is None:
        key_len = _NULL
        key = b""
    else:
        z = len(key) << 1
        key_len = TABLE[z] if z < TABLE_SIZE else encode_raw(z)
    if value is None:
        value_len = _NULL
        value = b""
    else:
        z = len(value) << 1
        value_len = TABLE[z] if z < TABLE_SIZE else encode_raw(z)
    header_bytes = _encode_headers(headers) if headers else _ZERO
    size = (
        1
        + len(ts_bytes)
        + len(offset_bytes)
        + len(key_len)
        + len(key)
        + len(value_len)
        + len(value)
        + len(header_bytes)
    )
    z = size << 1
    size_bytes = TABLE[z] if z < TABLE_SIZE else encode_raw(z)
    parts += (size_bytes, _ZERO, ts_bytes, offset_bytes, key_len, key, value_len, value, header_bytes)
    return size + len(size_bytes)


def encode_record(record: Record) -> bytes:
    """The wire bytes of one v2 record (length prefix included)."""
    parts: list = []
    append_record(parts, *record)
    return b"".join(parts)


def estimate_record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()) -> int:
    """An upper bound of the bytes a record adds to an uncompressed batch."""
    size = MAX_RECORD_OVERHEAD + 10  # + key and value length varints
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        size += len(_encode_headers(headers))
    else:
        size += 1
    return size


def _read_zigzag(data, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """The zigzag varint at ``data[pos]`` as ``(value, next_pos)``; one- and two-byte ones inline."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    if data[pos + 1] < 0x80:
        z = (b & 0x7F) | (data[pos + 1] << 7)
        return (z >> 1) ^ -(z & 1), pos + 2
    z, pos = read_raw(data, pos, max_bytes)
    return (z >> 1) ^ -(z & 1), pos


def _read_record_head(data, pos: int, end: int) -> tuple:
    """The record at ``data[pos:]`` up to its key: ``(record_end, timestamp_delta,
    offset_delta, key or None, position after the key)``. InvalidRecordError if its length
    does not fit before ``end``; IndexError or VarintError if a field does not parse.

    The hot loop of decoding and compaction: one-byte varints (most of them) are inline.
    """
    b = data[pos]
    length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_zigzag(data, pos)
    record_end = pos + length
    if length < MIN_RECORD_SIZE - 1 or record_end > end:
        raise errors.InvalidRecordError(
            f"invalid record size {length} with {end - pos} bytes left in the batch"
        )
    b = data[pos + 1]  # after the unused attributes byte
    ts_delta, pos = ((b >> 1) ^ -(b & 1), pos + 2) if b < 0x80 else _read_zigzag(data, pos + 1, 10)
    b = data[pos]
    offset_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_zigzag(data, pos)
    b = data[pos]
    n, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_zigzag(data, pos)
    if n < 0:
        return record_end, ts_delta, offset_delta, None, pos
    return record_end, ts_delta, offset_delta, data[pos : pos + n], pos + n


def _check_records_end(pos: int, end: int, count: int) -> None:
    if pos != end:
        raise errors.InvalidRecordError(
            f"incorrect declared batch size, {end - pos} bytes remain after {count} records"
        )


def decode_records_one_by_one(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None,
) -> list:
    """Decode ``count`` records from ``data[pos:end]``, which they must fill exactly, one at a
    time and checking each: the reference decoder, and the one that reports what is wrong
    (``record_decoders.decode_records`` tries faster ways first).

    Builds ``cls`` tuples of ``(offset_base + offsetDelta, timestamp, key, value,
    headers)``: with bases 0 these are :class:`Record` deltas, with the batch's bases
    :class:`DecodedRecord` absolutes. ``fixed_timestamp`` overrides every timestamp
    (LogAppendTime).
    """
    out: list = []
    append = out.append
    new = _new_tuple
    if count < 0 or count * MIN_RECORD_SIZE > end - pos:
        raise errors.InvalidRecordError(f"record count {count} does not fit in {end - pos} bytes of records")
    try:
        for _ in range(count):
            start = pos
            record_end, timestamp_delta, offset_delta, key, pos = _read_record_head(data, pos, end)
            n, pos = _read_zigzag(data, pos)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            if data[pos] == 0:
                headers: tuple = ()
                pos += 1
            else:
                headers, pos = decode_headers(data, pos)
            if pos != record_end:
                raise errors.InvalidRecordError(
                    f"invalid record size: {record_end - start} bytes declared, {pos - start} read"
                )
            append(
                new(
                    cls,
                    (
                        offset_base + offset_delta,
                        timestamp_base + timestamp_delta if fixed_timestamp is None else fixed_timestamp,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except (IndexError, VarintError) as exc:
        raise errors.InvalidRecordError(f"found invalid record structure: {exc}") from None
    _check_records_end(pos, end, count)
    return out


def scan_records(data, pos: int, end: int, count: int) -> list[tuple]:
    """``count`` records of ``data[pos:end]``, which they must fill, as ``(offset_delta,
    timestamp_delta, key or None, value_is_null, start, end)`` tuples, ``data[start:end]``
    being the record's whole encoding (length prefix included), for copying it unchanged.

    Lighter than :func:`decode_records_one_by_one`: values and headers are skipped, not parsed. Raises
    InvalidRecordError if the records do not parse.
    """
    out: list[tuple] = []
    append = out.append
    try:
        for _ in range(count):
            start = pos
            record_end, timestamp_delta, offset_delta, key, pos = _read_record_head(data, pos, end)
            value_null = data[pos] == 1  # zigzag(-1): the only negative length a record may have
            append((offset_delta, timestamp_delta, key, value_null, start, record_end))
            pos = record_end
    except (IndexError, VarintError) as exc:
        raise errors.InvalidRecordError(f"found invalid record structure: {exc}") from None
    _check_records_end(pos, end, count)
    return out


def decode_headers(data: bytes, pos: int) -> tuple[tuple, int]:
    """The header count and headers of a record at ``data[pos]``: ``(headers, next_pos)``."""
    z, pos = read_raw(data, pos, 5)
    count = (z >> 1) ^ -(z & 1)
    if count < 0:
        raise errors.InvalidRecordError(f"invalid number of record headers {count}")
    headers = []
    for _ in range(count):
        z, pos = read_raw(data, pos, 5)
        n = (z >> 1) ^ -(z & 1)
        if n < 0:
            raise errors.InvalidRecordError(f"invalid negative header key size {n}")
        raw_key = data[pos : pos + n]
        if len(raw_key) != n:
            raise IndexError("header key runs past the record")
        pos += n
        try:
            key = raw_key.decode()
        except UnicodeDecodeError:
            raise errors.InvalidRecordError("record header key is not valid UTF-8") from None
        z, pos = read_raw(data, pos, 5)
        n = (z >> 1) ^ -(z & 1)
        if n < 0:
            value = None
        else:
            value = data[pos : pos + n]
            pos += n
        headers.append((key, value))
    return tuple(headers), pos


def as_bytes(buf, pos: int, end: int | None) -> tuple[bytes, int, int]:
    """``(data, pos, end)`` to slice records from: ``buf`` itself if it is bytes, else a copy
    of ``buf[pos:end]`` (a bytearray or memoryview is copied once, here)."""
    if end is None:
        end = len(buf)
    if isinstance(buf, bytes):
        return buf, pos, end
    return bytes(memoryview(buf)[pos:end]), 0, end - pos
