"""Produce requests v0-v2, which kio has no schemas for.

Kafka still accepts them, and old librdkafka (Debian's kcat, librdkafka 2.0.2) only
enables gzip, snappy and lz4 when a broker advertises Produce from v0, so we parse these
three versions by hand. Their layout is identical: acks int16, timeout int32, then
topics [name string, partitions [index int32, records bytes]]. The request object has
the same attribute names as kio's ProduceRequest so the handler does not care which
version it got. Their record sets are legacy message sets (magic 0 or 1).
"""

from __future__ import annotations

import datetime
import struct
from typing import NamedTuple

FIRST_KIO_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hi")


class PartitionProduceData(NamedTuple):
    index: int
    records: bytes | None


class TopicProduceData(NamedTuple):
    name: str
    partition_data: tuple


class LegacyProduceRequest(NamedTuple):
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple
    transactional_id: None = None


class _Reader:
    def __init__(self, buf, pos: int):
        self.buf = buf
        self.pos = pos

    def _take(self, n: int):
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ValueError("request is truncated")
        chunk = self.buf[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        return bytes(self._take(self.int16())).decode()

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        return None if size < 0 else bytes(self._take(size))

    def array(self, read_item) -> tuple:
        count = self.int32()
        if count < 0 or count > len(self.buf):
            raise ValueError(f"invalid array length {count}")
        return tuple(read_item() for _ in range(count))


def decode_produce_request(payload, pos: int) -> LegacyProduceRequest:
    r = _Reader(payload, pos)
    acks, timeout_ms = _HEAD.unpack(r._take(6))

    def partition() -> PartitionProduceData:
        return PartitionProduceData(r.int32(), r.nullable_bytes())

    def topic() -> TopicProduceData:
        return TopicProduceData(r.string(), r.array(partition))

    topics = r.array(topic)
    if r.pos != len(payload):
        raise ValueError(f"{len(payload) - r.pos} unexpected bytes after the request")
    return LegacyProduceRequest(acks, datetime.timedelta(milliseconds=timeout_ms), topics)
