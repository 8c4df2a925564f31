"""The ``__consumer_offsets`` records of consumer groups (KIP-848) and share groups (KIP-932),
byte-compatible with Kafka 4.

Every key is an int16 record type followed by the group id (and a member id or a regular
expression); every value is an int16 version (0 here) then flexible fields::

    type  key                                   value
    3     ConsumerGroupMetadata(group)           epoch int32
    4     ConsumerGroupPartitionMetadata(group)  [topic_id uuid, name, partitions int32, racks []]
    5     ConsumerGroupMemberMetadata(g, member) instance_id?, rack_id?, client_id, client_host,
                                                 topics [string], regex?, rebalance_timeout int32,
                                                 server_assignor?, tag 0: classic member
                                                 metadata (session_timeout int32, protocols
                                                 [name, metadata bytes]) of a member that
                                                 speaks the classic protocol
    6     ConsumerGroupTargetAssignmentMetadata  assignment_epoch int32
    7     ConsumerGroupTargetAssignmentMember    [topic_id uuid, partitions [int32]]
    8     ConsumerGroupCurrentMemberAssignment   member_epoch, previous_member_epoch int32,
                                                 state int8, assigned [..], pending_revocation [..]
    9     ShareGroupPartitionMetadata(group)     as type 4
    10    ShareGroupMemberMetadata(g, member)    rack_id?, client_id, client_host, topics [string]
    11    ShareGroupMetadata(group)              epoch int32
    12    ShareGroupTargetAssignmentMetadata     assignment_epoch int32
    13    ShareGroupTargetAssignmentMember       as type 7
    14    ShareGroupCurrentMemberAssignment      member_epoch, previous_member_epoch, state,
                                                 assigned
    15    ShareGroupStatePartitionMetadata(g)    initializing, initialized [topic_id, name,
                                                 partitions, create_timestamp], deleting
                                                 [topic_id, name]
    16    ConsumerGroupRegularExpression(g, re)  topics [string], version int64, timestamp int64

A null value is a tombstone. Schemas from Kafka's group-coordinator ``*Key.json`` and
``*Value.json``; the code is ours. Pure functions over bytes: ``encode_key``/``decode_key``,
``encode_value``/``decode_value`` by record type.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from odradek.broker.record_reader import Reader, Writer, value_reader
from odradek.protocol import errors
from odradek.protocol.varint import encode_unsigned_varint

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
SHARE_GROUP_PARTITION_METADATA = 9
SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
CONSUMER_GROUP_REGULAR_EXPRESSION = 16

CONSUMER_TYPES = frozenset((3, 4, 5, 6, 7, 8, 16))
SHARE_TYPES = frozenset((9, 10, 11, 12, 13, 14, 15))
_WITH_MEMBER = frozenset((5, 7, 8, 10, 13, 14, 16))

_RECORD = "group coordinator record"

# partitions by topic id
Assignment = dict[uuid.UUID, frozenset[int]]


class ModernKey(NamedTuple):
    kind: int
    group: str
    member: str | None = None  # the member id, or the regular expression (type 16)


class TopicMetadata(NamedTuple):
    topic_id: uuid.UUID
    name: str
    partitions: int


class ClassicMemberMetadata(NamedTuple):
    """What a member speaking the classic protocol in a consumer group joined with."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the member's order


class ConsumerMemberValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


class ShareMemberValue(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]


class CurrentAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment  # always empty for share groups


class StatePartitionsValue(NamedTuple):
    """Which topic-partitions of a share group have state in ``__share_group_state``."""

    initializing: dict[uuid.UUID, tuple[str, frozenset[int]]]
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]]
    deleting: dict[uuid.UUID, str]


class RegexValue(NamedTuple):
    topics: frozenset[str]
    version: int
    timestamp: int


# -- keys -------------------------------------------------------------------------------


def encode_key(key: ModernKey) -> bytes:
    w = Writer(key.kind, False)
    w.string(key.group)
    if key.kind in _WITH_MEMBER:
        w.string(key.member or "")
    return w.getvalue()


def decode_key(kind: int, key: bytes) -> ModernKey | None:
    """The key of record type ``kind`` (its bytes start with it); None for types not here."""
    if kind not in CONSUMER_TYPES and kind not in SHARE_TYPES:
        return None
    r = Reader(key, 2, record=_RECORD)
    group = r.string() or ""
    member = r.string() if kind in _WITH_MEMBER else None
    return ModernKey(kind, group, member)


# -- values -----------------------------------------------------------------------------


def _assignment(w: Writer, assignment: Assignment) -> None:
    items = [(tid, sorted(ps)) for tid, ps in sorted(assignment.items()) if ps]
    w.array(len(items))
    for tid, partitions in items:
        w.uuid(tid)
        w.int32_array(partitions)
        w.tags()


def _read_assignment(r: Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array()):
        tid = r.uuid()
        partitions = frozenset(r.int32_array())
        r.skip_tags()
        if partitions:
            out[tid] = out.get(tid, frozenset()) | partitions
    return out


def _topic_partitions_info(w: Writer, topics: dict, with_timestamp: bool) -> None:
    w.array(len(topics))
    for tid, (name, partitions) in sorted(topics.items()):
        w.uuid(tid)
        w.string(name)
        w.int32_array(sorted(partitions))
        if with_timestamp:
            w.int64(-1)
        w.tags()


def _read_topic_partitions_info(r: Reader) -> dict:
    out = {}
    for _ in range(r.array()):
        tid = r.uuid()
        name = r.string() or ""
        partitions = frozenset(r.int32_array())
        r.int64()  # create timestamp
        r.skip_tags()
        out[tid] = (name, partitions)
    return out


def _classic_tag(w: Writer, classic: ClassicMemberMetadata) -> None:
    """The tagged-field section holding tag 0, the classic member metadata."""
    body = Writer(0, True)
    body.int32(classic.session_timeout_ms)
    body.array(len(classic.protocols))
    for name, metadata in classic.protocols:
        body.string(name)
        body.bytes_(metadata)
        body.tags()
    body.tags()
    data = body.getvalue()[2:]  # without the version Writer starts with
    w.parts += [encode_unsigned_varint(1), encode_unsigned_varint(0), encode_unsigned_varint(len(data)), data]


def _read_classic(data: bytes) -> ClassicMemberMetadata:
    r = Reader(data, 0, True, _RECORD)
    session = r.int32()
    protocols = []
    for _ in range(r.array()):
        name = r.string() or ""
        protocols.append((name, r.bytes_()))
        r.skip_tags()
    r.skip_tags()
    return ClassicMemberMetadata(session, tuple(protocols))


def encode_value(kind: int, value) -> bytes:
    w = Writer(0, True)
    if kind in (CONSUMER_GROUP_METADATA, SHARE_GROUP_METADATA):
        w.int32(value)
    elif kind in (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA):
        w.int32(value)
    elif kind in (CONSUMER_GROUP_PARTITION_METADATA, SHARE_GROUP_PARTITION_METADATA):
        w.array(len(value))
        for t in value:
            w.uuid(t.topic_id)
            w.string(t.name)
            w.int32(t.partitions)
            w.array(0)  # partition racks (not used after Kafka 4.0)
            w.tags()
    elif kind == CONSUMER_GROUP_MEMBER_METADATA:
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.string_array(value.topics)
        w.string(value.regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic is not None:
            _classic_tag(w, value.classic)
            return w.getvalue()
    elif kind == SHARE_GROUP_MEMBER_METADATA:
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.string_array(value.topics)
    elif kind in (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER):
        _assignment(w, value)
    elif kind in (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        _assignment(w, value.assigned)
        if kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            _assignment(w, value.pending_revocation)
    elif kind == SHARE_GROUP_STATE_PARTITION_METADATA:
        _topic_partitions_info(w, value.initializing, True)
        _topic_partitions_info(w, value.initialized, True)
        w.array(len(value.deleting))
        for tid, name in sorted(value.deleting.items()):
            w.uuid(tid)
            w.string(name)
            w.tags()
    elif kind == CONSUMER_GROUP_REGULAR_EXPRESSION:
        w.string_array(sorted(value.topics))
        w.int64(value.version)
        w.int64(value.timestamp)
    else:
        raise ValueError(f"no value format for record type {kind}")
    w.tags()
    return w.getvalue()


def decode_value(kind: int, value: bytes):
    """The value of a record of type ``kind``; raises CorruptMessageError."""
    r, _ = value_reader(value, range(0, 1), f"value of record type {kind}", 0, _RECORD)
    if kind in (
        CONSUMER_GROUP_METADATA,
        SHARE_GROUP_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
    ):
        out = r.int32()
    elif kind in (CONSUMER_GROUP_PARTITION_METADATA, SHARE_GROUP_PARTITION_METADATA):
        out = []
        for _ in range(r.array()):
            tid = r.uuid()
            name = r.string() or ""
            count = r.int32()
            for _ in range(r.array()):
                r.int32()
                r.string_array()
                r.skip_tags()
            r.skip_tags()
            out.append(TopicMetadata(tid, name, count))
    elif kind == CONSUMER_GROUP_MEMBER_METADATA:
        out = ConsumerMemberValue(
            r.string(),
            r.string(),
            r.string() or "",
            r.string() or "",
            tuple(r.string_array()),
            r.string(),
            r.int32(),
            r.string(),
        )
        classic = r.tags().get(0)
        return out._replace(classic=_read_classic(classic)) if classic is not None else out
    elif kind == SHARE_GROUP_MEMBER_METADATA:
        out = ShareMemberValue(r.string(), r.string() or "", r.string() or "", tuple(r.string_array()))
    elif kind in (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER):
        out = _read_assignment(r)
    elif kind in (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT):
        epoch, previous, state = r.int32(), r.int32(), r.int8()
        assigned = _read_assignment(r)
        pending = _read_assignment(r) if kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT else {}
        out = CurrentAssignmentValue(epoch, previous, state, assigned, pending)
    elif kind == SHARE_GROUP_STATE_PARTITION_METADATA:
        initializing = _read_topic_partitions_info(r)
        initialized = _read_topic_partitions_info(r)
        deleting = {}
        for _ in range(r.array()):
            tid = r.uuid()
            deleting[tid] = r.string() or ""
            r.skip_tags()
        out = StatePartitionsValue(initializing, initialized, deleting)
    elif kind == CONSUMER_GROUP_REGULAR_EXPRESSION:
        out = RegexValue(frozenset(r.string_array()), r.int64(), r.int64())
    else:
        raise errors.CorruptMessageError(f"unknown group record type {kind}")
    r.skip_tags()
    return out
