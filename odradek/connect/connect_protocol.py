"""Kafka Connect's group sub-protocol bytes (``ConnectProtocol`` and ``IncrementalCooperativeConnectProtocol``).

Member metadata: version (int16: 0 ``default``, 1 ``compatible``, 2 ``sessioned``), the worker's
URL (string), the config topic offset it has read (int64), and from version 1 its current
allocation (nullable bytes: version, then its connector assignments). Assignment: version,
error (int16), the leader's member id and URL, the config offset, the assigned connectors with
their task ids (-1: the connector itself) and, from version 1, the revoked ones and the
scheduled rebalance delay (int32 ms). Kafka's primitive encodings: big-endian, strings with an
int16 length, arrays with an int32 count.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PROTOCOL_VERSIONS = {"default": 0, "compatible": 1, "sessioned": 2}
PROTOCOLS_OFFERED = {  # connect.protocol -> the protocols a member offers, preferred first
    "eager": ["default"],
    "compatible": ["compatible", "default"],
    "sessioned": ["sessioned", "compatible", "default"],
}
CONNECTOR_TASK = -1

Allocation = dict[str, list[int]]  # connector -> task ids (CONNECTOR_TASK for the connector)


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">h", v))
        return self

    def i32(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def i64(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, s: str) -> _Writer:
        data = s.encode()
        self.parts.append(struct.pack(">h", len(data)) + data)
        return self

    def nullable_bytes(self, b: bytes | None) -> _Writer:
        self.parts.append(struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b)
        return self

    def allocation(self, alloc: Allocation) -> _Writer:
        self.i32(len(alloc))
        for connector, tasks in sorted(alloc.items()):
            self.string(connector).i32(len(tasks))
            for task in tasks:
                self.i32(task)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0

    def _take(self, fmt: str):
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def i16(self) -> int:
        return self._take(">h")

    def i32(self) -> int:
        return self._take(">i")

    def i64(self) -> int:
        return self._take(">q")

    def string(self) -> str:
        n = self.i16()
        value = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        value = self.data[self.pos:self.pos + n]
        self.pos += n
        return value

    def allocation(self) -> Allocation:
        out: Allocation = {}
        for _ in range(self.i32()):
            connector = self.string()
            out[connector] = [self.i32() for _ in range(self.i32())]
        return out


@dataclass
class WorkerMetadata:
    url: str
    config_offset: int
    allocation: Allocation = field(default_factory=dict)


def encode_metadata(protocol: str, meta: WorkerMetadata) -> bytes:
    version = PROTOCOL_VERSIONS[protocol]
    out = _Writer().i16(version).string(meta.url).i64(meta.config_offset)
    if version >= 1:
        out.nullable_bytes(_Writer().i16(version).allocation(meta.allocation).bytes())
    return out.bytes()


def decode_metadata(data: bytes) -> WorkerMetadata:
    r = _Reader(data)
    version = r.i16()
    meta = WorkerMetadata(r.string(), r.i64())
    if version >= 1 and r.pos < len(r.data):
        alloc = r.nullable_bytes()
        if alloc:
            inner = _Reader(alloc)
            inner.i16()
            meta.allocation = inner.allocation()
    return meta


@dataclass
class Assignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    assigned: Allocation = field(default_factory=dict)
    revoked: Allocation = field(default_factory=dict)
    delay_ms: int = 0


def encode_assignment(protocol: str, a: Assignment) -> bytes:
    version = PROTOCOL_VERSIONS[protocol]
    out = _Writer().i16(version).i16(a.error).string(a.leader).string(a.leader_url).i64(a.config_offset)
    out.allocation(a.assigned)
    if version >= 1:
        out.allocation(a.revoked).i32(a.delay_ms)
    return out.bytes()


def decode_assignment(data: bytes) -> Assignment:
    r = _Reader(data)
    version = r.i16()
    a = Assignment(r.i16(), r.string(), r.string(), r.i64(), r.allocation())
    if version >= 1:
        a.revoked, a.delay_ms = r.allocation(), r.i32()
    return a
