"""Records inside batches: v2 record batches (read and written) and legacy message sets (read).

``batch.py`` owns the fixed 61-byte v2 header; this module owns what follows it. Pure
functions and small classes over bytes: no sockets, files or clocks (except that a
record given no timestamp gets the current time, as Kafka's producer does).

A v2 record (``DefaultRecord``), after the batch header, possibly inside the compressed
payload (varint = zigzag varint, see ``varint.py``)::

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

A legacy message (magic 0 and 1; one entry of a message set)::

    offset int64, size int32 (bytes after it), crc uint32 (zlib CRC-32 of magic..end),
    magic int8, attributes int8 (bits 0-2 codec, bit 3 LogAppendTime in magic 1),
    timestamp int64 (magic 1 only), key int32-length bytes, value int32-length bytes

A compressed legacy message (a "wrapper") holds a whole inner message set, compressed,
as its value. Inner offsets of a magic 1 wrapper are relative (0..n-1) and the
wrapper's offset is the absolute offset of the last inner message; magic 0 inner
offsets are absolute.

The API, by who calls it:

* producers: :func:`build_batch` (a list of records at once) or :class:`BatchBuilder`
  (record by record, with sizes for the accumulator);
* consumers: :func:`iter_batches` / :func:`iter_records` over a fetch response,
  :func:`decode_batch` for one batch; batches are :class:`RecordBatch` (v2) or
  :class:`LegacyBatch`, both yielding :class:`DecodedRecord`; ``RecordBatch.records(cls)``
  and :func:`decode_records` decode straight into a client's own tuple subclass;
* the broker's produce path: :func:`validate_batch` (header-only checks plus the CRC),
  :func:`validate_legacy` and :func:`convert_legacy_to_v2`, :func:`recompress_batch`,
  :func:`records_have_null_keys`;
* transactions: :func:`build_control_batch` and :meth:`RecordBatch.end_txn_marker`;
* storage (cleaner, recovery): :func:`scan_records` (keys, deltas and byte spans, values
  skipped) and :func:`encode_batch` from :class:`Record` deltas.

Errors are Kafka's: ``CorruptMessageError`` for bytes that fail a checksum or do not
parse as a batch, ``InvalidRecordError`` for records that parse badly or break a
batch-level rule, ``MessageTooLargeError`` for a batch over ``max.message.bytes``,
``UnsupportedCompressionTypeError`` for unknown codecs.
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    read_header,
)
from odradek.protocol.varint import TABLE, TABLE_SIZE, VarintError, encode_raw, read_raw

__all__ = [
    "ABORT",
    "COMMIT",
    "BatchBuilder",
    "DecodedRecord",
    "EndTxnMarker",
    "LegacyBatch",
    "NewRecord",
    "Record",
    "RecordBatch",
    "build_batch",
    "build_control_batch",
    "check_batch_crc",
    "check_batch_magic",
    "check_batch_size",
    "check_client_batch_fields",
    "check_compression_codec",
    "check_max_message_bytes",
    "check_record_count",
    "convert_legacy_to_v2",
    "decode_batch",
    "decode_control_key",
    "decode_records",
    "decode_end_txn_marker",
    "encode_batch",
    "encode_control_key",
    "encode_end_txn_marker",
    "encode_record",
    "estimate_record_size",
    "iter_batches",
    "iter_records",
    "recompress_batch",
    "records_have_null_keys",
    "scan_records",
    "validate_batch",
    "validate_legacy",
]

Header = tuple[str, bytes | None]

# Same layout as batch.py's private struct: the whole v2 header in one pack.
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_OFFSET_AND_SIZE = struct.Struct(">qi")
_LEGACY_HEAD = struct.Struct(">IbB")  # crc, magic, attributes (after offset and size)

_CRC_START = ATTRIBUTES_OFFSET
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_MIN_RECORD_SIZE = 7  # length, attributes, ts, offset, key, value, header count: 1 byte each
# Most bytes a record adds beyond key, value and headers: length 5 + attributes 1 +
# timestamp delta 10 + offset delta 5 (Kafka's DefaultRecord.MAX_RECORD_OVERHEAD).
MAX_RECORD_OVERHEAD = 21

_NULL = b"\x01"  # zigzag varint of -1
_ZERO = b"\x00"
_new_tuple = tuple.__new__


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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


# -- single records ---------------------------------------------------------------------


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


def _append_record(parts: list, offset_delta: int, timestamp_delta: int, key, value, headers) -> int:
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
    _append_record(parts, *record)
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
    if length < _MIN_RECORD_SIZE - 1 or record_end > end:
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


def _decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None,
) -> list:
    """Decode ``count`` records from ``data[pos:end]``, which they must fill exactly.

    Builds ``cls`` tuples of ``(offset_base + offsetDelta, timestamp, key, value,
    headers)``: with bases 0 these are :class:`Record` deltas, with the batch's bases
    :class:`DecodedRecord` absolutes. ``fixed_timestamp`` overrides every timestamp
    (LogAppendTime).
    """
    out: list = []
    append = out.append
    new = _new_tuple
    if count < 0 or count * _MIN_RECORD_SIZE > end - pos:
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
                headers, pos = _decode_headers(data, pos)
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

    Lighter than :func:`decode_records`: values and headers are skipped, not parsed. Raises
    InvalidRecordError if the records do not parse.
    """
    out = []
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


# -- bulk decoding of uniform batches ----------------------------------------------------


def _zz_bytes(z):
    return bytes([z]) if z < 0x80 else bytes([(z & 0x7F) | 0x80, z >> 7])


_V12 = rb"(?:[\x00-\x7f]|[\x80-\xff][\x00-\x7f])"
_VAR12: dict | None = None  # every 1- and 2-byte varint -> its zigzag value
_OD_ENC: tuple = ()  # the varint of offset delta i, for i < 8192
_UNIFORM: dict = {}


def _uniform_tables():
    global _VAR12, _OD_ENC
    t = {bytes([b]): (b >> 1) ^ -(b & 1) for b in range(0x80)}
    for b0 in range(0x80, 0x100):
        for b1 in range(0x80):
            z = (b0 & 0x7F) | (b1 << 7)
            t[bytes([b0, b1])] = (z >> 1) ^ -(z & 1)
    _OD_ENC = tuple(_zz_bytes(2 * i) for i in range(8192))
    _VAR12 = t
    return t


def _uniform_pattern(vl: bytes, n: int):
    key = (vl, n)
    pat = _UNIFORM.get(key)
    if pat is None:
        k = 3 + len(vl) + n  # attributes, null key, value length, value, header count
        lens = [_zz_bytes(2 * (k + w)) for w in (2, 3, 4)]  # + timestamp and offset widths
        if k + 4 >= 8192 or len({len(e) for e in lens}) != 1:
            pat = False
        else:
            e2, e3, e4 = (re.escape(e) for e in lens)
            v1 = rb"[\x00-\x7f]"
            v2 = rb"[\x80-\xff][\x00-\x7f]"
            # the length field must fit the widths of the timestamp and offset varints
            fits = b"|".join(
                (
                    e2 + rb"\x00" + v1 + v1,
                    e3 + rb"\x00(?:" + v1 + v2 + b"|" + v2 + v1 + b")",
                    e4 + rb"\x00" + v2 + v2,
                )
            )
            record = rb".{%d}\x00(%s)(%s)\x01%s(.{%d})\x00" % (len(lens[0]), _V12, _V12, re.escape(vl), n)
            pat = re.compile(rb"(?=(?:" + fits + rb")\x01)" + record, re.S)
        if len(_UNIFORM) >= 256:
            _UNIFORM.clear()
        _UNIFORM[key] = pat
    return pat


def _value_length_at(data, p):
    """(value-length varint bytes, position after the record) of the null-key record at p, or None."""
    b = data[p]
    if b < 0x80:
        ln = (b >> 1) ^ -(b & 1)
        p += 1
    else:
        z = (b & 0x7F) | (data[p + 1] << 7)
        ln = (z >> 1) ^ -(z & 1)
        p += 2
    rend = p + ln
    p += 1
    p += 1 if data[p] < 0x80 else 2
    p += 1 if data[p] < 0x80 else 2
    if data[p] != 1:
        return None
    p += 1
    vl = data[p : p + 1] if data[p] < 0x80 else data[p : p + 2]
    return vl, rend


def _decode_uniform(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp):
    """Batches of null-key, header-less records whose values all have one length, in C.

    The common shape of a producer's batch. One regular expression per value length
    matches a whole record, checking its length field against the timestamp and offset
    varint widths in a lookahead; ``findall`` then returns every record's timestamp and
    offset varints and its value in one call. Offsets must be consecutive and the matches
    must tile the payload exactly; anything else returns None (see :func:`_decode_fast`).
    """
    if count < 8 or count > 8192:
        return None
    try:
        first = _value_length_at(data, pos)
        if first is None:
            return None
        second = _value_length_at(data, first[1])
        if second is None or second[0] != first[0]:
            return None
    except IndexError:
        return None
    vl = first[0]
    table = _VAR12 or _uniform_tables()
    n = table.get(vl, -1)
    if n < 0:
        return None
    pat = _uniform_pattern(vl, n)
    if not pat:
        return None
    found = pat.findall(data, pos, end)
    if len(found) != count:
        return None
    stamps, deltas, values = zip(*found, strict=True)
    if deltas != _OD_ENC[:count]:
        return None
    width = len(_zz_bytes(2 * (3 + len(vl) + n + 2)))
    if count * (width + 3 + len(vl) + n) + sum(map(len, stamps)) + sum(map(len, deltas)) != end - pos:
        return None
    return list(
        map(
            _new_tuple,
            repeat(cls, count),
            zip(
                range(offset_base, offset_base + count),
                map(timestamp_base.__add__, map(table.__getitem__, stamps))
                if fixed_timestamp is None
                else repeat(fixed_timestamp, count),
                repeat(None, count),
                values,
                repeat((), count),
                strict=True,
            ),
        )
    )


# zigzag decodings of every one-byte varint (0..127)
_ZZ1 = [(z >> 1) ^ -(z & 1) for z in range(0x80)]


def _decode_fast(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None,
) -> list | None:
    """The common case of :func:`_decode_records`, in bulk: None when it does not apply.

    Handles records with consecutive offset deltas (0, 1, 2, ...) and no headers, the way
    producers write them; anything else (compacted batches, headers, odd varints) returns
    None and the caller decodes with :func:`_decode_records`, which also reports errors.
    The loop only collects timestamps, keys and values; the record tuples are built at the
    end by ``map``/``zip`` in C instead of one Python-level constructor call per record.
    """
    if count <= 0 or count * _MIN_RECORD_SIZE > end - pos:
        return None
    zz = _ZZ1
    values: list = []
    vappend = values.append
    stamps: list = []
    tappend = stamps.append
    keys: list | None = None
    try:
        for i in range(count):
            # length (1 or 2 bytes)
            b = data[pos]
            if b < 0x80:
                record_end = pos + 1 + zz[b]
                pos += 2  # and the attributes byte
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                record_end = pos + 2 + ((z >> 1) ^ -(z & 1))
                pos += 3
            if record_end > end:
                return None
            # timestamp delta (1 or 2 bytes)
            b = data[pos]
            if b < 0x80:
                tappend(timestamp_base + zz[b])
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                tappend(timestamp_base + ((z >> 1) ^ -(z & 1)))
                pos += 2
            # offset delta: must be i
            b = data[pos]
            if b < 0x80:
                if zz[b] != i:
                    return None
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                if (z >> 1) ^ -(z & 1) != i:
                    return None
                pos += 2
            # key
            b = data[pos]
            if b == 1:  # null
                pos += 1
                if keys is not None:
                    keys.append(None)
            else:
                if b < 0x80:
                    n = zz[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c >= 0x80:
                        return None
                    z = (b & 0x7F) | (c << 7)
                    n = (z >> 1) ^ -(z & 1)
                    pos += 2
                if n < 0:
                    return None
                if keys is None:
                    keys = [None] * i
                keys.append(data[pos : pos + n])
                pos += n
            # value
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                n = (z >> 1) ^ -(z & 1)
                pos += 2
            if n < 0:
                if n != -1:
                    return None
                vappend(None)
            else:
                vappend(data[pos : pos + n])
                pos += n
            # no headers, and exactly the declared length
            if data[pos] or pos + 1 != record_end:
                return None
            pos = record_end
    except IndexError:
        return None
    if pos != end:
        return None
    return list(
        map(
            _new_tuple,
            repeat(cls, count),
            zip(
                range(offset_base, offset_base + count),
                stamps if fixed_timestamp is None else repeat(fixed_timestamp, count),
                repeat(None, count) if keys is None else keys,
                values,
                repeat((), count),
                strict=True,
            ),
        )
    )


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None = None,
) -> list:
    """``count`` records from ``data[pos:end]`` as ``cls`` tuples (a tuple subclass).

    Each is ``cls((offset_base + offsetDelta, timestamp, key, value, headers))`` built with
    ``tuple.__new__`` (``cls.__new__`` is not called), ``headers`` a tuple of ``(str,
    bytes | None)``; ``fixed_timestamp`` overrides every timestamp (LogAppendTime).
    InvalidRecordError when the records do not fill ``data[pos:end]`` exactly.
    """
    out = _decode_uniform(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp)
    if out is None:
        out = _decode_fast(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp)
    if out is None:
        out = _decode_records(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp)
    return out


def _decode_headers(data: bytes, pos: int) -> tuple[tuple, int]:
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


# -- building v2 batches ----------------------------------------------------------------


def _attributes(compression: int, timestamp_type: int, transactional: bool, control: bool) -> int:
    if not 0 <= compression <= codecs.ZSTD:
        raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {compression}")
    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    return attributes


def _assemble(
    body,
    *,
    count: int,
    attributes: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    compression_level: int | None = None,
) -> bytes:
    """Header + (compressed) records, with the CRC-32C filled in."""
    codec = attributes & COMPRESSION_MASK
    payload = codecs.compress(codec, body, compression_level) if codec else body
    header = bytearray(
        _V2_HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[_CRC_START:]))
    _UINT32.pack_into(header, 17, crc)
    return b"".join((header, payload))


def build_batch(
    records: Iterable[NewRecord | tuple],
    *,
    base_offset: int = 0,
    compression: int = codecs.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """A v2 batch of ``records``, each ``(key, value, headers, timestamp_ms | None)``.

    Offset deltas are 0, 1, 2, …; the base timestamp is ``base_timestamp`` or the first
    record's (as Kafka's producer does); records without a timestamp get the current
    time. Raises ValueError for an empty list (use :func:`encode_batch` for the empty
    batches compaction leaves).
    """
    parts: list = []
    offset_delta = 0
    max_timestamp = NO_TIMESTAMP
    now = None
    for key, value, headers, timestamp in records:
        if timestamp is None:
            if now is None:
                now = _now_ms()
            timestamp = now
        if base_timestamp is None:
            base_timestamp = timestamp
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        _append_record(parts, offset_delta, timestamp - base_timestamp, key, value, headers)
        offset_delta += 1
    if not offset_delta:
        raise ValueError("a record batch needs at least one record")
    return _assemble(
        b"".join(parts),
        count=offset_delta,
        attributes=_attributes(compression, timestamp_type, transactional, control),
        base_offset=base_offset,
        last_offset_delta=offset_delta - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        compression_level=compression_level,
    )


def encode_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int = NO_TIMESTAMP,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression: int = codecs.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    compression_level: int | None = None,
    attributes: int | None = None,
) -> bytes:
    """A v2 batch of records given with their deltas (gaps allowed, empty allowed).

    ``max_timestamp`` defaults to the largest record timestamp (``base_timestamp`` for an
    empty batch); ``last_offset_delta`` to the largest offset delta (0 when empty).
    ``attributes``, when given, replaces the flags built from ``compression``,
    ``timestamp_type``, ``transactional`` and ``control`` (to carry bits over verbatim).
    """
    parts: list = []
    count = 0
    top_delta = -1
    top_timestamp_delta = None
    for offset_delta, timestamp_delta, key, value, headers in records:
        _append_record(parts, offset_delta, timestamp_delta, key, value, headers)
        count += 1
        if offset_delta > top_delta:
            top_delta = offset_delta
        if top_timestamp_delta is None or timestamp_delta > top_timestamp_delta:
            top_timestamp_delta = timestamp_delta
    if max_timestamp is None:
        max_timestamp = base_timestamp + (top_timestamp_delta or 0)
    if last_offset_delta is None:
        last_offset_delta = max(top_delta, 0)
    if attributes is None:
        attributes = _attributes(compression, timestamp_type, transactional, control)
    return _assemble(
        b"".join(parts),
        count=count,
        attributes=attributes,
        base_offset=base_offset,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        compression_level=compression_level,
    )


class BatchBuilder:
    """Accumulates records for one v2 batch, one ``append`` at a time.

    For the producer's accumulator: it appends while ``size_in_bytes`` plus
    :func:`estimate_record_size` of the next record fits ``batch.size``, then calls
    :meth:`build` with the producer fields known at send time. Sizes are uncompressed.
    Not thread-safe; one owner.
    """

    __slots__ = ("_parts", "_count", "_size", "_base_timestamp", "_max_timestamp", "compression")

    def __init__(self, compression: int = codecs.NONE):
        if not 0 <= compression <= codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {compression}")
        self.compression = compression
        self._parts: list = []
        self._count = 0
        self._size = HEADER_SIZE
        self._base_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batch so far, before compression."""
        return self._size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
    ) -> int:
        """Add a record; returns its offset delta (its index in the batch)."""
        if timestamp is None:
            timestamp = _now_ms()
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        offset_delta = self._count
        self._size += _append_record(
            self._parts, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        self._count = offset_delta + 1
        return offset_delta

    def build(
        self,
        *,
        base_offset: int = 0,
        timestamp_type: int = CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        partition_leader_epoch: int = -1,
        compression_level: int | None = None,
    ) -> bytes:
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        return _assemble(
            b"".join(self._parts),
            count=self._count,
            attributes=_attributes(self.compression, timestamp_type, transactional, False),
            base_offset=base_offset,
            last_offset_delta=self._count - 1,
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
            compression_level=compression_level,
        )


# -- control records (transaction markers) ----------------------------------------------

ABORT = 0
COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch


class EndTxnMarker(NamedTuple):
    """The content of a transaction marker's control record."""

    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    return _CONTROL_KEY.pack(version, control_type)


def decode_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, type)`` of a control record key."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise errors.InvalidRecordError("control record key is too short")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise errors.InvalidRecordError(f"invalid control record key version {version}")
    return version, control_type


def encode_end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    return _END_TXN_MARKER.pack(version, coordinator_epoch)


def decode_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of a transaction marker's value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise errors.InvalidRecordError("end transaction marker value is too short")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise errors.InvalidRecordError(f"invalid end transaction marker version {version}")
    return version, coordinator_epoch


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker: a transactional control batch of one ABORT/COMMIT record."""
    if control_type not in (ABORT, COMMIT):
        raise ValueError(f"not a transaction marker type: {control_type}")
    if timestamp is None:
        timestamp = _now_ms()
    record = Record(0, 0, encode_control_key(control_type), encode_end_txn_marker(coordinator_epoch), ())
    return encode_batch(
        [record],
        base_offset=base_offset,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


# -- reading v2 batches -----------------------------------------------------------------


class RecordBatch:
    """One v2 batch: its parsed header and its bytes, records decoded on demand.

    Iterating yields :class:`DecodedRecord` (absolute offsets and timestamps).
    """

    __slots__ = ("header", "_buf", "_pos")
    magic = 2

    def __init__(self, buf: bytes, pos: int, header: BatchHeader):
        self.header = header
        self._buf = buf
        self._pos = pos

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
            f"count={h.record_count}, codec={codecs.CODEC_NAMES.get(h.compression, h.compression)}, "
            f"size={h.size}{', control' if h.is_control else ''})"
        )

    @property
    def data(self) -> bytes:
        """The batch's bytes, exactly."""
        return self._buf[self._pos : self._pos + self.header.size]

    base_offset = property(lambda self: self.header.base_offset)
    last_offset = property(lambda self: self.header.last_offset)
    next_offset = property(lambda self: self.header.next_offset)
    size = property(lambda self: self.header.size)
    compression = property(lambda self: self.header.compression)
    timestamp_type = property(lambda self: self.header.timestamp_type)
    is_transactional = property(lambda self: self.header.is_transactional)
    is_control = property(lambda self: self.header.is_control)
    producer_id = property(lambda self: self.header.producer_id)
    producer_epoch = property(lambda self: self.header.producer_epoch)
    base_sequence = property(lambda self: self.header.base_sequence)
    max_timestamp = property(lambda self: self.header.max_timestamp)

    def crc_is_valid(self) -> bool:
        h = self.header
        return crc32c.crc32c(memoryview(self._buf)[self._pos + _CRC_START : self._pos + h.size]) == h.crc

    def _payload(self) -> tuple[bytes, int, int]:
        """The (decompressed) records section as ``(data, start, end)``."""
        h = self.header
        start = self._pos + HEADER_SIZE
        end = self._pos + h.size
        if h.compression == codecs.NONE:
            return self._buf, start, end
        data = codecs.decompress(h.compression, memoryview(self._buf)[start:end])
        return data, 0, len(data)

    def raw_records(self) -> list[Record]:
        """The records with their deltas, as stored."""
        data, start, end = self._payload()
        return _decode_records(data, start, end, self.header.record_count, Record, 0, 0, None)

    def records(self, cls: type = DecodedRecord) -> list:
        """The records with absolute offsets and timestamps, as ``cls`` tuples.

        ``cls`` is :class:`DecodedRecord` or any tuple subclass taking ``(offset,
        timestamp, key, value, headers)``; it is built with ``tuple.__new__`` (its own
        ``__new__`` is not called), so a client can decode into its own record class.
        """
        h = self.header
        data, start, end = self._payload()
        fixed = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        return decode_records(data, start, end, h.record_count, cls, h.base_offset, h.base_timestamp, fixed)

    def __iter__(self) -> Iterator[DecodedRecord]:
        return iter(self.records())

    def end_txn_marker(self) -> EndTxnMarker | None:
        """The transaction marker in a control batch (None for other batches)."""
        if not self.header.is_control:
            return None
        records = self.raw_records()
        if not records:
            return None
        _, control_type = decode_control_key(records[0].key)
        if control_type not in (ABORT, COMMIT):
            return None
        _, coordinator_epoch = decode_end_txn_marker(records[0].value)
        return EndTxnMarker(control_type, coordinator_epoch)


def decode_batch(buf, pos: int = 0, *, check_crc: bool = True) -> RecordBatch | LegacyBatch:
    """The complete batch at ``pos`` (v2, or a legacy message); CorruptMessageError if cut short."""
    data, pos, end = _as_bytes(buf, pos, None)
    if pos + LOG_OVERHEAD + 5 > end:
        raise errors.CorruptMessageError("buffer too short for a record batch")
    magic = data[pos + MAGIC_OFFSET]
    if magic < 2:
        legacy = _read_legacy(data, pos, end)
        if legacy is None:
            raise errors.CorruptMessageError("legacy message runs past the end of the buffer")
        if check_crc and not legacy.crc_is_valid():
            raise errors.CorruptMessageError(f"legacy message at offset {legacy.offset} fails its CRC")
        return legacy
    check_batch_magic(magic)
    if pos + HEADER_SIZE > end:
        raise errors.CorruptMessageError("buffer too short for a record batch header")
    header = read_header(data, pos)
    check_batch_size(data, pos, header, end)
    batch = RecordBatch(data, pos, header)
    if check_crc and not batch.crc_is_valid():
        raise errors.CorruptMessageError(
            f"record batch at offset {header.base_offset} is corrupt (stored crc {header.crc})"
        )
    return batch


def _as_bytes(buf, pos: int, end: int | None) -> tuple[bytes, int, int]:
    """Bytes to slice records from (copying from a bytearray or memoryview once)."""
    if end is None:
        end = len(buf)
    if isinstance(buf, bytes):
        return buf, pos, end
    return bytes(memoryview(buf)[pos:end]), 0, end - pos


def iter_batches(
    buf, pos: int = 0, end: int | None = None, *, check_crc: bool = True
) -> Iterator[RecordBatch | LegacyBatch]:
    """Each complete batch in ``buf[pos:end]``, v2 or legacy, in order.

    Stops quietly at an incomplete trailing batch (fetch responses may end with one).
    Raises CorruptMessageError, as Kafka's log reader does, for a length too small to
    be a message, an unknown magic, and (unless ``check_crc=False``) a failed CRC.
    """
    data, pos, end = _as_bytes(buf, pos, end)
    while pos + LOG_OVERHEAD <= end:
        _, length = _OFFSET_AND_SIZE.unpack_from(data, pos)
        if length < _LEGACY_MIN_SIZE[0]:
            raise errors.CorruptMessageError(f"batch length {length} is below the minimum message overhead")
        size = length + LOG_OVERHEAD
        if pos + MAGIC_OFFSET >= end:
            return
        magic = data[pos + MAGIC_OFFSET]
        if magic > 2:
            raise errors.CorruptMessageError(f"invalid magic byte {magic}")
        if pos + size > end:
            return
        if magic == 2:
            header = read_header(data, pos) if size >= HEADER_SIZE else None
            if header is None:
                raise errors.CorruptMessageError(f"record batch size {size} is below the header size")
            batch = RecordBatch(data, pos, header)
        else:
            batch = _read_legacy(data, pos, end)
        if check_crc and not batch.crc_is_valid():
            raise errors.CorruptMessageError(
                f"batch at offset {batch.base_offset if magic == 2 else batch.offset} fails its CRC"
            )
        yield batch
        pos += size


def iter_records(buf, pos: int = 0, end: int | None = None, *, include_control: bool = False):
    """Every record of every complete batch in ``buf``, control batches left out by default."""
    for batch in iter_batches(buf, pos, end):
        if batch.is_control and not include_control:
            continue
        yield from batch.records()


def records_have_null_keys(batch) -> bool:
    """Whether any record lacks a key (compacted topics reject those: INVALID_RECORD)."""
    if not isinstance(batch, (RecordBatch, LegacyBatch)):
        batch = decode_batch(batch)
    if isinstance(batch, LegacyBatch):
        return any(r.key is None for r in batch.records())
    return any(r.key is None for r in batch.raw_records())


def recompress_batch(buf, target_codec: int, *, pos: int = 0, compression_level: int | None = None) -> bytes:
    """The batch at ``pos`` with its records compressed by ``target_codec`` instead.

    Everything else is kept: offsets and deltas, timestamps, producer fields, the
    partition leader epoch and the other attribute bits. Checks the CRC first, so a
    corrupt batch is not given a fresh checksum.
    """
    batch = decode_batch(buf, pos)
    if not isinstance(batch, RecordBatch):
        raise errors.UnsupportedForMessageFormatError("recompress_batch handles v2 batches only")
    h = batch.header
    if h.compression == target_codec:
        return batch.data
    records = batch.raw_records()
    _attributes(target_codec, CREATE_TIME, False, False)  # validates the codec
    return encode_batch(
        records,
        base_offset=h.base_offset,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        last_offset_delta=h.last_offset_delta,
        attributes=(h.attributes & ~COMPRESSION_MASK) | target_codec,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        compression_level=compression_level,
    )


# -- validation on the produce path -------------------------------------------------------
# Small named checks, each with Kafka's error, in the order Kafka applies them
# (UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch). None decodes
# records; the CRC check is the only one that reads the whole batch.


def check_batch_magic(magic: int) -> None:
    if magic > 2 or magic < 0:
        raise errors.CorruptMessageError(f"invalid magic byte {magic}")
    if magic < 2:
        raise errors.InvalidRecordError(
            f"record batch with magic {magic} where v2 is required (legacy message sets go through validate_legacy)"
        )


def check_batch_size(buf, pos: int, header: BatchHeader, end: int | None = None) -> None:
    """The batch is at least a header long and its declared length is all there."""
    size = header.size
    if size < HEADER_SIZE:
        raise errors.CorruptMessageError(
            f"record batch size {size} is smaller than the minimum batch overhead {HEADER_SIZE}"
        )
    available = (len(buf) if end is None else end) - pos
    if size > available:
        raise errors.CorruptMessageError(
            f"record batch declares {size} bytes but only {available} are present"
        )


def check_max_message_bytes(header: BatchHeader, max_message_bytes: int) -> None:
    """Kafka's RecordTooLargeException, whose code is MESSAGE_TOO_LARGE."""
    if header.size > max_message_bytes:
        raise errors.MessageTooLargeError(
            f"the record batch is {header.size} bytes, over the maximum of {max_message_bytes}"
        )


def check_batch_crc(buf, pos: int, header: BatchHeader) -> None:
    crc = crc32c.crc32c(memoryview(buf)[pos + _CRC_START : pos + header.size])
    if crc != header.crc:
        raise errors.CorruptMessageError(f"record batch is corrupt (stored crc {header.crc}, computed {crc})")


def check_compression_codec(header: BatchHeader) -> None:
    if header.compression > codecs.ZSTD:
        raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {header.compression}")


def check_record_count(header: BatchHeader, *, from_client: bool = True) -> None:
    """Record count against the offset range.

    From a client the batch must be dense: count > 0 and lastOffsetDelta + 1 == count.
    Batches written by the broker itself (replication, recovery) may have gaps left by
    compaction, or no records at all, but never more records than offsets.
    """
    count = header.record_count
    span = header.last_offset_delta + 1
    if from_client:
        if span <= 0:
            raise errors.InvalidRecordError(
                f"batch has an invalid offset range: lastOffsetDelta {header.last_offset_delta}"
            )
        if count <= 0:
            raise errors.InvalidRecordError(f"invalid reported count for record batch: {count}")
        if span != count:
            raise errors.InvalidRecordError(
                f"inconsistent batch offset range ({span} offsets) and count of records {count}"
            )
    elif count < 0 or count > max(span, 0):
        raise errors.InvalidRecordError(f"record count {count} does not fit offset range of {span} offsets")


def check_client_batch_fields(header: BatchHeader) -> None:
    """What a producer may not send: control batches, idempotent batches without a sequence."""
    if header.is_control:
        raise errors.InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise errors.InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in a batch with producerId {header.producer_id}"
        )


def validate_batch(
    buf,
    pos: int = 0,
    header: BatchHeader | None = None,
    *,
    max_message_bytes: int,
    from_client: bool = True,
) -> BatchHeader:
    """Check one v2 batch on the produce path without decoding its records; returns its header.

    Raises CorruptMessageError (bad magic, truncated, bad CRC), InvalidRecordError (a
    legacy magic, counts, control batch or missing sequence from a client),
    MessageTooLargeError (over ``max_message_bytes``) or
    UnsupportedCompressionTypeError.
    """
    if header is None:
        if len(buf) - pos < HEADER_SIZE:
            if len(buf) - pos > MAGIC_OFFSET:
                check_batch_magic(buf[pos + MAGIC_OFFSET])
            raise errors.CorruptMessageError("buffer too short for a record batch header")
        header = read_header(buf, pos)
    check_batch_magic(header.magic)
    check_batch_size(buf, pos, header)
    check_max_message_bytes(header, max_message_bytes)
    check_batch_crc(buf, pos, header)
    check_compression_codec(header)
    check_record_count(header, from_client=from_client)
    if from_client:
        check_client_batch_fields(header)
    return header


# -- legacy message sets (magic 0 and 1) ------------------------------------------------

_LEGACY_MIN_SIZE = (14, 22)  # bytes after the size field: crc, magic, attributes, [ts], key and value lengths


class LegacyBatch:
    """One top-level message of a magic 0/1 message set; a wrapper when compressed.

    Offers the reading side of :class:`RecordBatch`: iterate for :class:`DecodedRecord`.
    """

    __slots__ = ("_buf", "_pos", "size", "offset", "crc", "magic", "attributes", "timestamp", "key", "value")
    is_control = False
    is_transactional = False
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1

    def __init__(
        self,
        buf: bytes,
        pos: int,
        size: int,
        offset: int,
        crc: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
    ):
        self._buf = buf
        self._pos = pos
        self.size = size
        self.offset = offset
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(offset={self.offset}, magic={self.magic}, "
            f"codec={codecs.CODEC_NAMES.get(self.compression, self.compression)}, size={self.size})"
        )

    @property
    def data(self) -> bytes:
        return self._buf[self._pos : self._pos + self.size]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic > 0 and self.attributes & TIMESTAMP_TYPE_BIT:
            return LOG_APPEND_TIME
        return CREATE_TIME

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        if not self.compression:
            return self.offset
        records = self.records()
        return records[0].offset if records else self.offset

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    def crc_is_valid(self) -> bool:
        return zlib.crc32(memoryview(self._buf)[self._pos + MAGIC_OFFSET : self._pos + self.size]) == self.crc

    def inner(self) -> list[LegacyBatch]:
        """The inner messages of a compressed wrapper, as stored (relative offsets in magic 1)."""
        if not self.compression:
            return [self]
        if self.value is None:
            raise errors.CorruptMessageError("compressed legacy message without a value")
        data = codecs.decompress(self.compression, self.value, magic=self.magic)
        messages = []
        pos = 0
        end = len(data)
        while pos < end:
            message = _read_legacy(data, pos, end)
            if message is None:
                raise errors.CorruptMessageError("truncated message inside a compressed legacy message")
            messages.append(message)
            pos += message.size
        return messages

    def records(self) -> list[DecodedRecord]:
        if not self.compression:
            return [DecodedRecord(self.offset, self.timestamp, self.key, self.value, ())]
        inner = self.inner()
        if not inner:
            return []
        if any(m.compression for m in inner):
            raise errors.InvalidRecordError("compressed legacy message inside a compressed message")
        base = 0
        if self.magic > 0:
            base = self.offset - inner[-1].offset
            if base < 0:  # wrapper offset not set by the producer: keep the relative offsets
                base = 0
        log_append = self.timestamp_type == LOG_APPEND_TIME
        return [
            DecodedRecord(base + m.offset, self.timestamp if log_append else m.timestamp, m.key, m.value, ())
            for m in inner
        ]

    def __iter__(self) -> Iterator[DecodedRecord]:
        return iter(self.records())


def _read_legacy(data: bytes, pos: int, end: int) -> LegacyBatch | None:
    """Parse the legacy message at ``pos``; None when it does not fit before ``end``."""
    if pos + LOG_OVERHEAD > end:
        return None
    offset, length = _OFFSET_AND_SIZE.unpack_from(data, pos)
    message_end = pos + LOG_OVERHEAD + length
    if length < _LEGACY_MIN_SIZE[0]:
        raise errors.CorruptMessageError(
            f"message size {length} is less than the minimum message overhead {_LEGACY_MIN_SIZE[0]}"
        )
    if message_end > end:
        return None
    crc, magic, attributes = _LEGACY_HEAD.unpack_from(data, pos + LOG_OVERHEAD)
    if magic not in (0, 1):
        raise errors.CorruptMessageError(f"invalid magic byte {magic} in a legacy message set")
    p = pos + MAGIC_OFFSET + 2
    if magic == 1:
        if length < _LEGACY_MIN_SIZE[1]:
            raise errors.CorruptMessageError(f"magic 1 message size {length} is too small")
        (timestamp,) = _INT64.unpack_from(data, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    key, p = _legacy_bytes(data, p, message_end)
    value, p = _legacy_bytes(data, p, message_end)
    if p != message_end:
        raise errors.CorruptMessageError(f"legacy message declares {length} bytes but holds {p - pos - 12}")
    return LegacyBatch(
        data, pos, LOG_OVERHEAD + length, offset, crc, magic, attributes, timestamp, key, value
    )


def _legacy_bytes(data: bytes, p: int, end: int) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise errors.CorruptMessageError("legacy message too short for its key or value length")
    (n,) = _INT32.unpack_from(data, p)
    p += 4
    if n < 0:
        return None, p
    if p + n > end:
        raise errors.CorruptMessageError("legacy message key or value runs past the message")
    return data[p : p + n], p + n


def _legacy_messages(buf, pos: int, end: int | None) -> Iterator[LegacyBatch]:
    """The top-level messages of a legacy message set; the set must be complete."""
    data, pos, end = _as_bytes(buf, pos, end)
    while pos < end:
        if pos + MAGIC_OFFSET + 1 <= end and data[pos + MAGIC_OFFSET] == 2:
            raise errors.InvalidRecordError("a v2 record batch inside a legacy message set")
        message = _read_legacy(data, pos, end)
        if message is None:
            raise errors.CorruptMessageError("legacy message set ends inside a message")
        yield message
        pos += message.size


def validate_legacy(
    buf, pos: int = 0, end: int | None = None, *, max_message_bytes: int | None = None
) -> int:
    """Check a whole magic 0/1 message set, inner messages included; returns its record count.

    CorruptMessageError for bad CRCs (outer or inner) and malformed messages,
    InvalidRecordError for nested compression or inner magic mismatches,
    UnsupportedCompressionTypeError for zstd or unknown codecs, MessageTooLargeError
    for a top-level message over ``max_message_bytes``.
    """
    count = 0
    for message in _legacy_messages(buf, pos, end):
        if max_message_bytes is not None and message.size > max_message_bytes:
            raise errors.MessageTooLargeError(
                f"the message is {message.size} bytes, over the maximum of {max_message_bytes}"
            )
        if not message.crc_is_valid():
            raise errors.CorruptMessageError(f"message at offset {message.offset} fails its CRC")
        codec = message.compression
        if codec == codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError("zstd needs message format v2")
        if codec > codecs.ZSTD:
            raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")
        if not codec:
            count += 1
            continue
        inner = message.inner()
        for m in inner:
            if not m.crc_is_valid():
                raise errors.CorruptMessageError(f"inner message at offset {m.offset} fails its CRC")
            if m.compression:
                raise errors.InvalidRecordError("compressed legacy message inside a compressed message")
            if m.magic != message.magic:
                raise errors.InvalidRecordError(
                    f"inner message magic {m.magic} does not match wrapper magic {message.magic}"
                )
        count += len(inner)
    return count


def _v2_from_absolute(
    records: list[DecodedRecord], *, compression: int, timestamp_type: int, max_timestamp: int | None
) -> bytes:
    """A v2 batch of records given with absolute offsets.

    Offsets are kept when they increase strictly and fit the int32 deltas, else
    numbered from the first. Timestamps must differ by what a varlong holds.
    """
    base_offset = records[0].offset
    keep = all(a.offset < b.offset for a, b in zip(records, records[1:], strict=False))
    keep = keep and records[-1].offset - base_offset <= _INT32_MAX
    base_timestamp = records[0].timestamp
    deltas = [
        Record((r.offset - base_offset) if keep else i, r.timestamp - base_timestamp, r.key, r.value, ())
        for i, r in enumerate(records)
    ]
    if any(not _INT64_MIN <= d.timestamp_delta <= _INT64_MAX for d in deltas):
        raise errors.InvalidTimestampError("legacy message timestamps too far apart for one v2 batch")
    return encode_batch(
        deltas,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp if max_timestamp is not None else max(r.timestamp for r in records),
        compression=compression,
        timestamp_type=timestamp_type,
    )


def convert_legacy_to_v2(buf, pos: int = 0, end: int | None = None) -> bytes:
    """Equivalent v2 batches for a complete magic 0/1 message set (validated first).

    Each compressed wrapper becomes one batch with the same codec; runs of uncompressed
    messages with the same timestamp type become one uncompressed batch. Offsets are
    kept when they increase strictly, otherwise numbered from the first; magic 0
    timestamps stay -1 (no timestamp); LogAppendTime wrappers keep their time.
    """
    validate_legacy(buf, pos, end)
    batches: list[bytes] = []
    pending: list[DecodedRecord] = []
    pending_type = CREATE_TIME

    def flush() -> None:
        if pending:
            batches.append(
                _v2_from_absolute(
                    pending, compression=codecs.NONE, timestamp_type=pending_type, max_timestamp=None
                )
            )
            pending.clear()

    for message in _legacy_messages(buf, pos, end):
        if message.compression:
            flush()
            records = message.records()
            if records:
                log_append = message.timestamp_type == LOG_APPEND_TIME
                batches.append(
                    _v2_from_absolute(
                        records,
                        compression=message.compression,
                        timestamp_type=message.timestamp_type,
                        max_timestamp=message.timestamp if log_append else None,
                    )
                )
            continue
        if pending and message.timestamp_type != pending_type:
            flush()
        pending_type = message.timestamp_type
        pending.extend(message.records())
    flush()
    return b"".join(batches)
