"""Keys and values of the records in ``__consumer_offsets``, byte-compatible with Kafka.

Every record key starts with an int16 that names its type (Kafka calls it the key
version); every non-null value starts with an int16 schema version::

    key type 0, 1   OffsetCommitKey      group string, topic string, partition int32
    key type 2      GroupMetadataKey     group string
    key type 3+     records of the KIP-848 consumer protocol (not used here, skipped)

    OffsetCommitValue
      v0  offset int64, metadata string, commitTimestamp int64
      v1  v0 + expireTimestamp int64           (commits that carried a retention time)
      v2  same as v0
      v3  offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
      v4  v3, flexible (compact strings, tagged fields)

    GroupMetadataValue
      protocolType string, generation int32, protocol string?, leader string?,
      currentStateTimestamp int64 (v2+), members [MemberMetadata]
      MemberMetadata: memberId string, groupInstanceId string? (v3+), clientId string,
        clientHost string, rebalanceTimeout int32 (v1+), sessionTimeout int32,
        subscription bytes, assignment bytes
      v4 is v3, flexible

A null value is a tombstone: the offset or the group is gone. We write key type 1 and 2,
OffsetCommitValue v3 (v1 when the commit has an expire timestamp) and GroupMetadataValue
v3, as Kafka 3.x does, and read every version above. Schemas come from Kafka's
``OffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json`` and
``GroupMetadataValue.json``; the code is ours. Pure functions over bytes.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.broker.record_reader import Reader, value_reader
from odradek.broker.record_reader import Writer as _Writer
from odradek.protocol import errors

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class OffsetCommitValue(NamedTuple):
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in v1 records; -1 means "use offsets.retention.minutes"


class MemberRecord(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


_RECORD = "group coordinator record"


# -- keys -------------------------------------------------------------------------------


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(1, False)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return w.getvalue()


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_TYPE, False)
    w.string(group)
    return w.getvalue()


def decode_key(key: bytes | None) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a ``__consumer_offsets`` record; None for record types we do not use."""
    if key is None or len(key) < 2:
        raise errors.CorruptMessageError("group coordinator record without a key")
    kind = _I16.unpack_from(key, 0)[0]
    r = Reader(key, 2, record=_RECORD)
    if kind in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey(r.string() or "", r.string() or "", r.int32())
    if kind == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.string() or "")
    return None


# -- offset commit values ---------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = 1 if value.expire_timestamp >= 0 else 3
    w = _Writer(version, version >= 4)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata or "")
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    w.tags()
    return w.getvalue()


def decode_offset_commit_value(value: bytes) -> OffsetCommitValue:
    r, version = value_reader(value, range(0, 5), "OffsetCommitValue", 4, _RECORD)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


# -- group metadata values --------------------------------------------------------------


def encode_group_metadata_value(value: GroupMetadataValue, version: int = 3) -> bytes:
    w = _Writer(version, version >= 4)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return w.getvalue()


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    r, version = value_reader(value, range(0, 5), "GroupMetadataValue", 4, _RECORD)
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session = rebalance = 0
        if version >= 1:
            rebalance = r.int32()
        session = r.int32()
        if version == 0:
            rebalance = session
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberRecord(
                member_id, instance_id, client_id, client_host, rebalance, session, subscription, assignment
            )
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# -- the consumer protocol, as far as the coordinator needs it --------------------------


def subscribed_topics(subscription: bytes) -> list[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: v0 is the prefix of all).

    Raises CorruptMessageError when the bytes do not follow the consumer protocol.
    """
    r = Reader(subscription, record=_RECORD)
    r.int16()  # version
    return [r.string() or "" for _ in range(r.array())]


class Subscription(NamedTuple):
    """A ``ConsumerProtocolSubscription`` (v0-v3; later versions read as v3, Kafka's rule)."""

    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # v1+: what the member owns now
    rack_id: str | None  # v3+


def decode_subscription(data: bytes) -> Subscription:
    """Raises CorruptMessageError when the bytes do not follow the consumer protocol."""
    r = Reader(data, record="consumer protocol subscription")
    version = r.int16()
    if version < 0:
        raise errors.CorruptMessageError(f"consumer protocol subscription version {version}")
    topics = tuple(r.string() or "" for _ in range(r.array()))
    r.bytes_()  # user data
    owned: dict[str, frozenset[int]] = {}
    rack = None
    if version >= 1 and not r.at_end:  # the later fields are ignorable: a writer may stop early
        for _ in range(r.array()):
            topic = r.string() or ""
            owned[topic] = owned.get(topic, frozenset()) | frozenset(r.int32_array())
        if version >= 2 and not r.at_end:
            r.int32()  # generation
        if version >= 3 and not r.at_end:
            rack = r.string()
    return Subscription(version, topics, owned, rack)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of a ``ConsumerProtocolAssignment`` (empty bytes: none)."""
    if not data:
        return {}
    r = Reader(data, record="consumer protocol assignment")
    r.int16()  # version: every version starts with the partitions
    out: dict[str, frozenset[int]] = {}
    for _ in range(r.array()):
        topic = r.string() or ""
        out[topic] = out.get(topic, frozenset()) | frozenset(r.int32_array())
    return out


def encode_assignment(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """A ``ConsumerProtocolAssignment`` in ``version`` (capped at 3), without user data."""
    w = _Writer(min(max(version, 0), 3), False)
    items = sorted((t, sorted(ps)) for t, ps in partitions.items() if ps)
    w.array(len(items))
    for topic, ps in items:
        w.string(topic)
        w.int32_array(ps)
    w.parts.append(struct.pack(">i", -1))  # null user data
    return w.getvalue()
