"""The schema walk that stands in front of kio (odradek/protocol/wellformed.py), without sockets."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from kio.schema.index import api_key_map
from kio_samples import sample

from odradek.protocol import messages, wellformed
from odradek.protocol.inter_broker import SCHEMAS as INTER_BROKER_SCHEMAS
from odradek.protocol.varint import encode_unsigned_varint

LIST_OFFSETS_V7 = bytes.fromhex(
    "000000300002000700000008000772646b61666b6100ffffffff01ffffffff31020000000100000000fffffffffffffffe000000"
)
OFFSET_FETCH_V9 = bytes.fromhex("00000020000900090000000a000772646b61666b6100fffffffe6700ffffffff00000000")


def every_message_class():
    for api_key in [*api_key_map, *INTER_BROKER_SCHEMAS]:
        for version in messages.known_versions(api_key):
            if api_key == messages.PRODUCE_KEY and version < 3:
                continue  # no kio schema (produce_request parses them)
            yield messages.request_class(api_key, version)
            yield messages.response_class(api_key, version)


def decode(frame: bytes):
    payload = frame[4:]
    header, pos = messages.parse_request_header(payload)
    return messages.decode_request_body(header, payload, pos)


def test_every_schema_round_trips_through_the_walk_and_kio():
    """Valid messages of every API and version pass, and the walk ends where kio ends."""
    rng = random.Random(12)
    for cls in every_message_class():
        for _ in range(5):
            body = messages.encode_body(sample(cls, rng))
            view = memoryview(body).toreadonly()
            assert wellformed.check(cls, view, 0) == len(body), cls
            assert messages._reader(cls)(view, 0)[1] == len(body), cls


@pytest.mark.parametrize("frame", [LIST_OFFSETS_V7, OFFSET_FETCH_V9], ids=["list-offsets-v7", "offset-fetch-v9"])
def test_huge_compact_array_length_is_malformed_not_an_abort(frame):
    with pytest.raises(messages.MalformedRequest, match="runs past the end of the frame"):
        decode(frame)


def test_array_count_is_bounded_by_the_smallest_item():
    # ListOffsets v7 partitions are 16 bytes and a tag byte each: 2 of them need 34 bytes.
    cls = messages.request_class(2, 7)
    body = b"\xff\xff\xff\xff\x00" + b"\x02" + b"\x02t" + b"\x03" + b"\x00" * 20 + b"\x00\x00"
    with pytest.raises(wellformed.MalformedMessage, match=r"array of 2 items \(at least 17 bytes each\)"):
        wellformed.check(cls, memoryview(body), 0)


def test_classic_array_of_fixed_items_is_checked_by_its_byte_size():
    # Fetch v4 forgotten topics do not exist; ListOffsets v1 partitions are 12 bytes each.
    cls = messages.request_class(2, 1)
    body = b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x10\x00" + b"\x00" * 12
    with pytest.raises(wellformed.MalformedMessage, match=r"4096 items \(at least 12 bytes each\)"):
        wellformed.check(cls, memoryview(body), 0)


def test_null_where_the_schema_forbids_it():
    create_topics_v7 = messages.request_class(19, 7)
    with pytest.raises(wellformed.MalformedMessage, match="null array"):
        wellformed.check(create_topics_v7, memoryview(b"\x00" + b"\x00\x00\x03\xe8" + b"\x00\x00"), 0)
    list_offsets_v3 = messages.request_class(2, 3)
    with pytest.raises(wellformed.MalformedMessage, match="null array"):
        wellformed.check(list_offsets_v3, memoryview(b"\xff\xff\xff\xff\x00\xff\xff\xff\xff"), 0)
    find_coordinator_v3 = messages.request_class(10, 3)
    with pytest.raises(wellformed.MalformedMessage, match="null string"):
        wellformed.check(find_coordinator_v3, memoryview(b"\x00\x00\x00"), 0)


def test_null_where_the_schema_allows_it():
    metadata_v12 = messages.request_class(3, 12)
    body = b"\x00" + b"\x00\x00" + b"\x00"  # topics null (all), two booleans, no tags
    assert wellformed.check(metadata_v12, memoryview(body), 0) == len(body)
    metadata_v1 = messages.request_class(3, 1)
    assert wellformed.check(metadata_v1, memoryview(b"\xff\xff\xff\xff"), 0) == 4


def test_tagged_field_must_fill_its_declared_size():
    """kio reads a known tag with the field's reader and ignores the size: a size that
    disagrees would let the walk and kio part ways."""
    fetch_v12 = messages.request_class(1, 12)  # tag 0: cluster_id, a compact string
    fixed = b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00" * 3 + b"\x00" + b"\x00\x00\x00\x00" * 2
    tail = b"\x01" + b"\x01" + b"\x01"  # topics, forgotten topics, rack id: empty
    good = b"\x01" + b"\x00" + b"\x04" + b"\x04abc"
    assert wellformed.check(fetch_v12, memoryview(fixed + tail + good), 0) == len(fixed + tail + good)
    short = b"\x01" + b"\x00" + b"\x02" + b"\x04abc"
    with pytest.raises(wellformed.MalformedMessage, match="tagged field 0"):
        wellformed.check(fetch_v12, memoryview(fixed + tail + short), 0)
    unknown = b"\x01" + b"\x63" + encode_unsigned_varint(1 << 30) + b"x"
    with pytest.raises(wellformed.MalformedMessage, match="tagged field 99"):
        wellformed.check(fetch_v12, memoryview(fixed + tail + unknown), 0)


def test_nullable_struct_marker_is_minus_one_or_one():
    cls = messages.response_class(68, 0)  # ConsumerGroupHeartbeat v0: assignment is a nullable struct
    head = b"\x00" * 6 + b"\x00\x00" + b"\x00" * 8  # throttle, error, two null strings, epoch, interval
    null = head + b"\xff" + b"\x00"
    present = head + b"\x01" + b"\x01\x00" + b"\x00"  # an assignment with no partitions
    for body in (null, present):
        assert wellformed.check(cls, memoryview(body), 0) == len(body)
    with pytest.raises(wellformed.MalformedMessage, match="marker 2"):
        wellformed.check(cls, memoryview(head + b"\x02" + b"\x01\x00" + b"\x00"), 0)


def test_overlong_varint_is_malformed():
    cls = messages.request_class(18, 3)
    with pytest.raises(wellformed.MalformedMessage, match="longer than 5 bytes"):
        wellformed.check(cls, memoryview(b"\xff" * 8), 0)


def test_mutated_messages_never_get_past_the_walk_to_a_different_kio_reading():
    """Flip, insert and delete bytes of valid messages: the walk refuses the message, or kio
    raises, or kio ends exactly where the walk did. Run in a child so an abort is a failure."""
    child = subprocess.run(
        [sys.executable, "-c", _MUTATE, str(len(list(every_message_class())))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=__file__.rsplit("/", 1)[0],
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert "disagreements 0" in child.stdout, child.stdout


_MUTATE = """
import random
from kio_samples import sample
from odradek.protocol import messages, wellformed
from test_wellformed import every_message_class
rng = random.Random(2026)
disagreements = 0
for cls in every_message_class():
    for _ in range(4):
        b = bytearray(messages.encode_body(sample(cls, rng)))
        for _ in range(rng.randint(1, 3)):
            if not b:
                break
            p = rng.randrange(len(b))
            op = rng.random()
            if op < 0.6:
                b[p] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
            elif op < 0.8:
                del b[p : p + rng.randint(1, 4)]
            else:
                b[p:p] = rng.randbytes(rng.randint(1, 5))
        view = memoryview(bytes(b)).toreadonly()
        try:
            end = wellformed.check(cls, view, 0)
        except wellformed.MalformedMessage:
            continue
        try:
            _, kio_end = messages._reader(cls)(view, 0)
        except Exception:
            continue
        disagreements += kio_end != end
print("disagreements", disagreements)
"""


def test_hostile_response_is_malformed_for_the_client():
    # ApiVersions v3 response whose api_keys compact length is ff ff ff ff 0f
    payload = b"\x00\x00\x00\x07" + b"\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8
    with pytest.raises(messages.MalformedResponse, match="runs past the end of the frame"):
        messages.decode_response(18, 3, payload)
    with pytest.raises(messages.MalformedResponse):
        messages.decode_response(18, 3, b"\x00\x00")


def test_embedded_consumer_protocol_bytes_are_checked_too():
    """A group member writes its subscription bytes; the group leader's client decodes them.
    An array length of 2**31 - 1 there aborted the leader's process inside kio."""
    from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription

    hostile = b"\x00\x01" + b"\x7f\xff\xff\xff" + b"\x00" * 10
    with pytest.raises(wellformed.MalformedMessage, match="2147483647 items"):
        messages.decode_entity(ConsumerProtocolSubscription, hostile, 2)
    good = b"\x00\x01" + b"\x00\x00\x00\x01\x00\x01a" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"
    entity, size = messages.decode_entity(ConsumerProtocolSubscription, good, 2)
    assert entity.topics == ("a",) and size == len(good) - 2
