"""The byte formats of MirrorMaker 2's offset syncs and checkpoints, as Kafka writes them.

Both use Kafka's protocol types: STRING is an int16 length then UTF-8 bytes, INT32/INT64/INT16
big-endian. An offset sync has key (topic STRING, partition INT32) and value (upstream offset
INT64, downstream offset INT64). A checkpoint has key (group STRING, topic STRING, partition
INT32) and value (version INT16 = 0, upstream offset INT64, downstream offset INT64, metadata
STRING). Java MirrorMaker tools (``OffsetSyncFormatter``, ``CheckpointFormatter``,
``RemoteClusterUtils.translateOffsets``) read what we write and the other way round.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CHECKPOINT_VERSION = 0


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _read_string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    start = at + 2
    return data[start : start + length].decode(), start + length


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        topic, at = _read_string(key, 0)
        (partition,) = struct.unpack_from(">i", key, at)
        upstream, downstream = struct.unpack_from(">qq", value, 0)
        return cls(topic, partition, upstream, downstream)


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the remote (downstream) topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(
            ">hqq", CHECKPOINT_VERSION, self.upstream_offset, self.downstream_offset
        ) + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        group, at = _read_string(key, 0)
        topic, at = _read_string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
        version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint value version {version} is not one this reader knows (0)")
        metadata, _ = _read_string(value, 18)
        return cls(group, topic, partition, upstream, downstream, metadata)
