"""Pure parts of the group coordinator: Kafka's partitionFor hash and the __consumer_offsets records."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.partitioning import java_string_hash, kafka_abs, partition_for
from odradek.protocol import errors

# Printed by a real JVM: (String.hashCode(), Utils.abs(hash) % 50)
JAVA = {
    "": (0, 0),
    "hello": (99162322, 22),
    "polygenelubricants": (-2147483648, 0),  # hashCode == Integer.MIN_VALUE
    "\U0001f600": (1772899, 49),  # a surrogate pair: two UTF-16 code units
    "my-group": (-1906497762, 12),
    "test-group": (627841412, 12),
    "Ünïcødé-grüppe": (2063181706, 6),
    "consumer-group-0042": (-84876989, 39),
}


@pytest.mark.parametrize("group", list(JAVA))
def test_partition_for_matches_java(group):
    h, p = JAVA[group]
    assert java_string_hash(group) == h
    assert partition_for(group, 50) == p


def test_kafka_abs_maps_int_min_to_zero():
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_bytes():
    key = schema.encode_offset_commit_key("g", "t", 7)
    assert key == struct.pack(">h", 1) + _s("g") + _s("t") + struct.pack(">i", 7)
    assert schema.decode_key(key) == schema.OffsetCommitKey("g", "t", 7)
    # key version 0 is read the same way
    assert schema.decode_key(struct.pack(">h", 0) + key[2:]) == schema.OffsetCommitKey("g", "t", 7)


def test_group_metadata_key_bytes_and_unknown_types():
    key = schema.encode_group_metadata_key("grp")
    assert key == struct.pack(">h", 2) + _s("grp")
    assert schema.decode_key(key) == schema.GroupMetadataKey("grp")
    assert schema.decode_key(struct.pack(">h", 3) + _s("grp")) is None  # KIP-848 records are skipped
    with pytest.raises(errors.CorruptMessageError):
        schema.decode_key(b"\x00")


def test_offset_commit_value_v3_bytes():
    value = schema.OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    data = schema.encode_offset_commit_value(value)
    assert data == struct.pack(">hqi", 3, 42, 5) + _s("m") + struct.pack(">q", 1000)
    assert schema.decode_offset_commit_value(data) == value


def test_offset_commit_value_v1_carries_expire_timestamp():
    value = schema.OffsetCommitValue(42, "", 1000, -1, 5000)
    data = schema.encode_offset_commit_value(value)
    assert data == struct.pack(">hq", 1, 42) + _s("") + struct.pack(">qq", 1000, 5000)
    assert schema.decode_offset_commit_value(data) == value


def test_offset_commit_value_old_and_flexible_versions():
    v0 = struct.pack(">hq", 0, 9) + _s("meta") + struct.pack(">q", 77)
    assert schema.decode_offset_commit_value(v0) == schema.OffsetCommitValue(9, "meta", 77, -1, -1)
    # v4: compact string (length + 1 as an unsigned varint), then an empty tagged-field section;
    # a tagged field must be skipped
    v4 = struct.pack(">hqi", 4, 9, 3) + b"\x05meta" + struct.pack(">q", 77) + b"\x01\x00\x02ab"
    assert schema.decode_offset_commit_value(v4) == schema.OffsetCommitValue(9, "meta", 77, 3, -1)
    assert schema.decode_offset_commit_value(
        schema.encode_offset_commit_value(schema.OffsetCommitValue(9, "meta", 77, 3), version=4)
    ) == schema.OffsetCommitValue(9, "meta", 77, 3)
    with pytest.raises(errors.CorruptMessageError):
        schema.decode_offset_commit_value(struct.pack(">hq", 9, 1))
    with pytest.raises(errors.CorruptMessageError):
        schema.decode_offset_commit_value(v0[:-3])


MEMBER = schema.MemberRecord("m-1", "inst", "client", "/127.0.0.1", 300000, 10000, b"sub", b"assign")
GROUP_VALUE = schema.GroupMetadataValue("consumer", 3, "range", "m-1", 123456, (MEMBER,))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_round_trips(version):
    data = schema.encode_group_metadata_value(GROUP_VALUE, version)
    got = schema.decode_group_metadata_value(data)
    expected = GROUP_VALUE
    if version < 3:
        expected = expected._replace(members=(MEMBER._replace(group_instance_id=None),))
    if version == 0:
        expected = expected._replace(members=(expected.members[0]._replace(rebalance_timeout=10000),))
    if version < 2:
        expected = expected._replace(current_state_timestamp=-1)
    assert got == expected


def test_group_metadata_value_v3_bytes():
    data = schema.encode_group_metadata_value(GROUP_VALUE, 3)
    expected = (
        struct.pack(">h", 3)
        + _s("consumer")
        + struct.pack(">i", 3)
        + _s("range")
        + _s("m-1")
        + struct.pack(">q", 123456)
        + struct.pack(">i", 1)
        + _s("m-1")
        + _s("inst")
        + _s("client")
        + _s("/127.0.0.1")
        + struct.pack(">ii", 300000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 6)
        + b"assign"
    )
    assert data == expected


def test_empty_group_value_has_null_protocol_and_leader():
    value = schema.GroupMetadataValue("consumer", 4, None, None, 1, ())
    data = schema.encode_group_metadata_value(value)
    assert schema.decode_group_metadata_value(data) == value
    assert struct.pack(">h", -1) * 2 in data


def test_subscribed_topics_of_consumer_protocol():
    sub = struct.pack(">hi", 1, 2) + _s("a") + _s("b") + struct.pack(">i", -1) + struct.pack(">i", 0)
    assert schema.subscribed_topics(sub) == ["a", "b"]
    with pytest.raises(errors.CorruptMessageError):
        schema.subscribed_topics(b"\x00")
