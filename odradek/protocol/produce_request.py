"""Produce requests (v0-v11), parsed by hand without copying the records.

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
fields after each structure). The objects carry kio's attribute names.
"""

from __future__ import annotations

import datetime
import struct
from typing import NamedTuple

FLEXIBLE_FROM = 9
FIRST_KIO_VERSION = 3  # kio has schemas from here; we parse every version ourselves

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class PartitionProduceData(NamedTuple):
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):
    name: str
    partition_data: tuple


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple


class _Reader:
    __slots__ = ("view", "pos", "end")

    def __init__(self, view: memoryview, pos: int):
        self.view = view
        self.pos = pos
        self.end = len(view)

    def take(self, n: int) -> memoryview:
        start = self.pos
        stop = start + n
        if n < 0 or stop > self.end:
            raise ValueError("request is truncated")
        self.pos = stop
        return self.view[start:stop]

    def int32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise ValueError("request is truncated")
        self.pos = pos + 4
        return _I32.unpack_from(self.view, pos)[0]

    def int16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise ValueError("request is truncated")
        self.pos = pos + 2
        return _I16.unpack_from(self.view, pos)[0]

    def uvarint(self) -> int:
        view, pos = self.view, self.pos
        if pos < self.end and view[pos] < 0x80:  # the usual one-byte case
            self.pos = pos + 1
            return view[pos]
        value = shift = 0
        while True:
            if pos >= self.end:
                raise ValueError("truncated varint")
            byte = view[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    # -- Kafka types, classic and compact ---------------------------------------------

    def string(self, flexible: bool) -> str | None:
        size = self.uvarint() - 1 if flexible else self.int16()
        return None if size < 0 else str(self.take(size), "utf-8")

    def nullable_bytes(self, flexible: bool) -> memoryview | None:
        size = self.uvarint() - 1 if flexible else self.int32()
        return None if size < 0 else self.take(size)

    def array_length(self, flexible: bool) -> int:
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < 0 or count > self.end - self.pos:
            raise ValueError(f"invalid array length {count}")
        return count


def decode_produce_request(payload, pos: int, version: int) -> ProduceRequest:
    """Parse the body of a Produce request frame starting at ``pos``; raises ValueError."""
    r = _Reader(memoryview(payload), pos)
    flexible = version >= FLEXIBLE_FROM
    transactional_id = r.string(flexible) if version >= 3 else None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack(r.take(6))
    topics = []
    for _ in range(r.array_length(flexible)):
        name = r.string(flexible)
        if name is None:
            raise ValueError("null topic name")
        partitions = []
        for _ in range(r.array_length(flexible)):
            index = r.int32()
            partitions.append(PartitionProduceData(index, r.nullable_bytes(flexible)))
            if flexible:
                r.skip_tagged_fields()
        topics.append(TopicProduceData(name, tuple(partitions)))
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    if r.pos != r.end:
        raise ValueError(f"{r.end - r.pos} unexpected bytes after the request")
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics))
