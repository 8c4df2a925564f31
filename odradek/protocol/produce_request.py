"""Produce requests (v0-v13), parsed by hand without copying the records.

Produce is the broker's hottest request. kio decodes it correctly but copies every
partition's records into a new ``bytes``; this parser returns memoryviews into the
request frame instead, so a batch goes from the socket buffer to the log file with no
copy in between. The views are valid only while the frame is (the network layer
handles a frame synchronously before it reuses its buffer), so a handler must finish
with them before it awaits anything.

Also covers v0-v2, which kio has no schemas for: Kafka still accepts them, and
librdkafka before 2.11 (Debian's kcat) only compresses when a broker advertises
Produce from v0. Their record sets are legacy message sets (magic 0 or 1).

Layouts (Kafka's ProduceRequest.json): v0-v2 acks, timeout, topics; v3+ put a nullable
transactional id first; v9+ are flexible (compact strings, arrays and bytes, tagged
fields after each structure); v13 names each topic by its 16-byte id instead of its name
(KIP-516: ``topic_id`` is set and ``name`` empty; the broker resolves it). v12 is v11's
layout. The objects carry kio's attribute names.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import NamedTuple

from odradek.protocol.varint import decode_unsigned_varint, skip_tagged_fields

FLEXIBLE_FROM = 9
TOPIC_IDS_FROM = 13
FIRST_KIO_VERSION = 3  # kio has schemas from here; we parse every version ourselves

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32_I32 = struct.Struct(">ii")
_I32_I32_I32 = struct.Struct(">iii")
_REQUEST_HEAD = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_NO_TXN_ACKS_TIMEOUT_TOPICS = struct.Struct(">hhii")  # v3-v8: null txn id, acks, timeout, 1 topic


class PartitionProduceData(NamedTuple):
    index: int  # type: ignore[assignment]  # Kafka's field name; it hides tuple.index, which no one calls
    records: memoryview | None


class TopicProduceData(NamedTuple):
    name: str  # "" from v13 until the broker resolves ``topic_id``
    partition_data: tuple
    topic_id: uuid.UUID | None = None  # v13+


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple


def _take(view: memoryview, pos: int, size: int, end: int) -> tuple[memoryview, int]:
    stop = pos + size
    if stop > end:
        raise ValueError("request is truncated")
    return view[pos:stop], stop


def _array_length(count: int, pos: int, end: int) -> int:
    if count < 0 or count > end - pos:
        raise ValueError(f"invalid array length {count}")
    return count


def decode_produce_request(payload, pos: int, version: int) -> ProduceRequest:
    """Parse the body of a Produce request frame starting at ``pos``; raises ValueError."""
    view = memoryview(payload)
    try:
        if version >= FLEXIBLE_FROM:
            return _decode_flexible(view, pos, version >= TOPIC_IDS_FROM)
        return _decode_classic(view, pos, version)
    except (IndexError, struct.error) as exc:  # a read past the end of the frame
        raise ValueError("request is truncated") from exc


def _decode_flexible(view: memoryview, pos: int, by_id: bool) -> ProduceRequest:
    """v9+: compact strings, arrays and bytes (length + 1 as a varint, 0 for null) and tagged
    fields after each structure; ``by_id`` (v13+): a topic is its 16-byte id, not its name."""
    end = len(view)
    size, pos = decode_unsigned_varint(view, pos)
    transactional_id = None
    if size:
        raw, pos = _take(view, pos, size - 1, end)
        transactional_id = str(raw, "utf-8")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += 6
    topics = []
    n_topics, pos = decode_unsigned_varint(view, pos)
    for _ in range(_array_length(n_topics - 1, pos, end)):
        topic_id = None
        if by_id:
            raw, pos = _take(view, pos, 16, end)
            name, topic_id = "", uuid.UUID(bytes=bytes(raw))
        else:
            size, pos = decode_unsigned_varint(view, pos)
            if not size:
                raise ValueError("null topic name")
            raw, pos = _take(view, pos, size - 1, end)
            name = str(raw, "utf-8")
        partitions = []
        n_partitions, pos = decode_unsigned_varint(view, pos)
        for _ in range(_array_length(n_partitions - 1, pos, end)):
            index = _I32.unpack_from(view, pos)[0]
            size, pos = decode_unsigned_varint(view, pos + 4)
            records = None
            if size:
                records, pos = _take(view, pos, size - 1, end)
            partitions.append(PartitionProduceData(index, records))
            pos = skip_tagged_fields(view, pos)
        topics.append(TopicProduceData(name, tuple(partitions), topic_id))
        pos = skip_tagged_fields(view, pos)
    pos = skip_tagged_fields(view, pos)
    return _finish(transactional_id, acks, timeout_ms, topics, pos, end)


def _decode_classic(view: memoryview, pos: int, version: int) -> ProduceRequest:
    """v0-v8: int16-sized strings, int32-sized arrays and bytes (-1 for null)."""
    end = len(view)
    transactional_id = None
    if version >= 3:
        size = _I16.unpack_from(view, pos)[0]
        pos += 2
        if size >= 0:
            raw, pos = _take(view, pos, size, end)
            transactional_id = str(raw, "utf-8")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += 6
    topics = []
    n_topics = _I32.unpack_from(view, pos)[0]
    pos += 4
    for _ in range(_array_length(n_topics, pos, end)):
        size = _I16.unpack_from(view, pos)[0]
        if size < 0:
            raise ValueError("null topic name")
        raw, pos = _take(view, pos + 2, size, end)
        name = str(raw, "utf-8")
        partitions = []
        n_partitions = _I32.unpack_from(view, pos)[0]
        pos += 4
        for _ in range(_array_length(n_partitions, pos, end)):
            index, size = _I32_I32.unpack_from(view, pos)
            pos += 8
            records = None
            if size >= 0:
                records, pos = _take(view, pos, size, end)
            partitions.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, tuple(partitions)))
    return _finish(transactional_id, acks, timeout_ms, topics, pos, end)


def parse_single_partition(frame) -> tuple | None:
    """The usual Produce request, read straight from its frame (header included):
    v3-v12, no transactional id, one topic holding one partition's records (v13, which names
    the topic by id, takes the general path). Returns
    ``(api_version, correlation_id, acks, topic, partition, records)`` with ``records`` a
    view into ``frame``, or None for any other shape and for anything malformed, which
    the general path (``decode_produce_request``) then reads, or explains.

    The broker's fast lane for one-record requests: it skips the header object, the
    request tuples and the per-field helpers of the general parser.
    """
    view = memoryview(frame)
    end = len(view)
    try:
        api_key, version, correlation_id, client_len = _REQUEST_HEAD.unpack_from(view, 0)
        if api_key != 0 or not 3 <= version < TOPIC_IDS_FROM:
            return None
        pos = 10 + (client_len if client_len > 0 else 0)
        if version >= FLEXIBLE_FROM:
            # header tags, null transactional id, then acks and timeout, a 1-topic array
            if view[pos] or view[pos + 1] or view[pos + 8] != 2:
                return None
            acks = _I16.unpack_from(view, pos + 2)[0]
            size = view[pos + 9]
            if size < 0x80:
                pos += 10
            else:
                size, pos = decode_unsigned_varint(view, pos + 9)
            if not size:
                return None
            stop = pos + size - 1
            topic = str(view[pos:stop], "utf-8")
            if view[stop] != 2:  # a 1-partition array
                return None
            partition = _I32.unpack_from(view, stop + 1)[0]
            size, pos = decode_unsigned_varint(view, stop + 5)  # records: mostly two or three bytes
            stop = pos + size - 1
            # the records, then the partition's, the topic's and the request's empty tags
            if not size or stop + 3 != end or view[stop] or view[stop + 1] or view[stop + 2]:
                return None
        else:
            txn_len, acks, _, n_topics = _NO_TXN_ACKS_TIMEOUT_TOPICS.unpack_from(view, pos)
            if txn_len != -1 or n_topics != 1:
                return None
            size = _I16.unpack_from(view, pos + 12)[0]
            pos += 14
            stop = pos + size
            if size < 0:
                return None
            topic = str(view[pos:stop], "utf-8")
            n_partitions, partition, size = _I32_I32_I32.unpack_from(view, stop)
            pos = stop + 12
            stop = pos + size
            if n_partitions != 1 or size < 0 or stop != end:
                return None
        return version, correlation_id, acks, topic, partition, view[pos:stop]
    except (IndexError, ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        return None


def _finish(transactional_id, acks: int, timeout_ms: int, topics: list, pos: int, end: int) -> ProduceRequest:
    if pos != end:
        raise ValueError(f"{end - pos} unexpected bytes after the request")
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics))
