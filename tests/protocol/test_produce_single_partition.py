"""The Produce fast lane's parser and response template against the general code paths.

``parse_single_partition`` must read exactly what ``decode_produce_request`` reads for the
one shape it accepts (v3-v11, null transactional id, one topic with one partition, no
tagged fields) and give None, never raise, for anything else; ``one_partition_produce_frame``
must be byte-for-byte the frame the general packer builds.
"""

from __future__ import annotations

import random
import struct

import pytest

from odradek.protocol import hot_responses, messages
from odradek.protocol.produce_request import decode_produce_request, parse_single_partition
from odradek.protocol.varint import encode_unsigned_varint

VERSIONS = range(3, 12)
METADATA_BODY = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}
RECORDS = bytes(range(256)) * 3  # 768 bytes: a two-byte varint length in flexible versions


def _frame(version, body, correlation_id=7, client_id="c", api_key=0) -> bytes:
    """A request frame built by kio, without its 4-byte size prefix."""
    entity = messages.build_request(api_key, version, body)
    whole = messages.encode_request(api_key, version, correlation_id, client_id, entity)
    assert struct.unpack_from(">i", whole)[0] == len(whole) - 4
    return whole[4:]


def _body(topics, acks=-1, transactional_id=None) -> dict:
    return {"transactional_id": transactional_id, "acks": acks, "timeout": 1500, "topic_data": topics}


def _one(topic="orders", index=0, records=RECORDS, **kw) -> dict:
    return _body([{"name": topic, "partition_data": [{"index": index, "records": records}]}], **kw)


def _general(frame):
    """What the general path reads: (version, correlation id, acks, topic, partition, records)."""
    header, pos = messages.parse_request_header(frame)
    req = decode_produce_request(frame, pos, header.api_version)
    assert req.transactional_id is None
    ((topic,),) = [req.topic_data]
    ((part,),) = [topic.partition_data]
    records = None if part.records is None else bytes(part.records)
    return header.api_version, header.correlation_id, req.acks, topic.name, part.index, records


def _fast(frame):
    got = parse_single_partition(frame)
    if got is None:
        return None
    version, correlation_id, acks, topic, partition, records = got
    assert isinstance(records, memoryview), "records must be a view into the frame, not a copy"
    return version, correlation_id, acks, topic, partition, bytes(records)


# ---- the accepted shape ---------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("topic", "index", "records", "acks", "correlation_id", "client_id"),
    [
        ("orders", 0, RECORDS, -1, 7, "c"),
        ("t", 3, b"\x01" * 70, 1, 0, None),
        ("ünïcode-τόπος", 2147483647, b"", 0, -5, ""),
        ("x" * 200, -1, b"\xff" * 20000, -1, 2147483647, "client-" * 40),
        ("a.b_c-d", 12, b"\x00", 2, -2147483648, "k"),  # acks 2: parsed, the lane declines it
    ],
)
def test_single_partition_matches_general_parser(
    version, topic, index, records, acks, correlation_id, client_id
):
    frame = _frame(version, _one(topic, index, records, acks=acks), correlation_id, client_id)
    expected = (version, correlation_id, acks, topic, index, records)
    assert _general(frame) == expected
    assert _fast(frame) == expected
    # Any buffer type the network layer might hand over.
    assert _fast(bytearray(frame)) == expected
    assert _fast(memoryview(frame)) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_records_view_points_into_the_frame(version):
    frame = bytearray(_frame(version, _one(records=b"abcdef")))
    records = parse_single_partition(frame)[5]
    assert records.obj is frame
    frame[-1 if version < 9 else -4] = ord("Z")  # the last record byte (flexible: 3 tag bytes after it)
    assert bytes(records) == b"abcdeZ"


@pytest.mark.parametrize("version", VERSIONS)
def test_random_single_partition_requests_match(version):
    rng = random.Random(version)
    for _ in range(40):
        name = "".join(rng.choice("abcXYZ._-é") for _ in range(rng.randint(1, 300)))
        records = rng.randbytes(rng.choice([0, 1, 126, 127, 128, 16383, 16384, rng.randint(0, 5000)]))
        index = rng.randint(-(2**31), 2**31 - 1)
        acks = rng.choice([-1, 0, 1])
        cid = rng.randint(-(2**31), 2**31 - 1)
        frame = _frame(version, _one(name, index, records, acks=acks), cid, rng.choice([None, "", "cli"]))
        assert _fast(frame) == _general(frame) == (version, cid, acks, name, index, records)


# ---- shapes the lane leaves to the general path ----------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_transactional_id_gives_none(version):
    for txn in ("tx", ""):
        frame = _frame(version, _one(transactional_id=txn))
        header, pos = messages.parse_request_header(frame)
        assert decode_produce_request(frame, pos, version).transactional_id == txn  # valid request
        assert parse_single_partition(frame) is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "topics",
    [
        pytest.param(
            [{"name": "t", "partition_data": [{"index": 0, "records": b"a"}, {"index": 1, "records": b"b"}]}],
            id="two-partitions",
        ),
        pytest.param(
            [
                {"name": "t", "partition_data": [{"index": 0, "records": b"a"}]},
                {"name": "u", "partition_data": [{"index": 0, "records": b"b"}]},
            ],
            id="two-topics",
        ),
        pytest.param([], id="zero-topics"),
        pytest.param([{"name": "t", "partition_data": []}], id="zero-partitions"),
        pytest.param([{"name": "t", "partition_data": [{"index": 0, "records": None}]}], id="null-records"),
    ],
)
def test_other_shapes_give_none(version, topics):
    frame = _frame(version, _body(topics))
    header, pos = messages.parse_request_header(frame)
    req = decode_produce_request(frame, pos, version)  # the general parser reads it fine
    assert len(req.topic_data) == len(topics)
    assert parse_single_partition(frame) is None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_versions_give_none(version):
    # A real v0-v2 layout (no transactional id): acks=-1 reads like a null transactional id,
    # so only the version check keeps it out.
    body = (
        struct.pack(">hii", -1, 1500, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 1, 0, 3) + b"abc"
    )
    frame = struct.pack(">hhih", 0, version, 7, 1) + b"c" + body
    header, pos = messages.parse_request_header(frame)
    req = decode_produce_request(frame, pos, version)
    assert (req.acks, req.topic_data[0].name, bytes(req.topic_data[0].partition_data[0].records)) == (
        -1,
        "t",
        b"abc",
    )
    assert parse_single_partition(frame) is None
    # A v3 body labelled v0-v2 is refused as well.
    v3 = bytearray(_frame(3, _one()))
    struct.pack_into(">h", v3, 2, version)
    assert parse_single_partition(v3) is None


def test_v12_is_read_and_versions_from_13_give_none():
    assert parse_single_partition(_frame(12, _one()))[0] == 12  # v12: the v11 layout
    for version in (13, 100, -1):
        frame = bytearray(_frame(11, _one()))
        struct.pack_into(">h", frame, 2, version)
        assert parse_single_partition(frame) is None


@pytest.mark.parametrize("api_key", [1, 3, 256, -1])
def test_other_api_keys_give_none(api_key):
    for version in (3, 9):
        frame = bytearray(_frame(version, _one()))
        struct.pack_into(">h", frame, 0, api_key)
        assert parse_single_partition(frame) is None
    metadata = _frame(9, METADATA_BODY, api_key=3)
    assert parse_single_partition(metadata) is None


_TAGS = (
    encode_unsigned_varint(1) + encode_unsigned_varint(0) + encode_unsigned_varint(2) + b"hi"
)  # one tagged field: tag 0, 2 bytes


def _flexible_frame(version, *, header=b"\x00", request=b"\x00", topic=b"\x00", partition=b"\x00"):
    """A hand-built flexible Produce frame with the given tagged-field sections."""
    head = struct.pack(">hhih", 0, version, 7, 1) + b"c" + header
    body = (
        b"\x00"  # null transactional id
        + struct.pack(">hi", 1, 1500)
        + encode_unsigned_varint(2)  # one topic
        + encode_unsigned_varint(3)  # a name of 2 bytes
        + b"tp"
        + encode_unsigned_varint(2)
        + struct.pack(">i", 4)
        + encode_unsigned_varint(4)
        + b"rec"
        + partition
        + topic
        + request
    )
    return head + body


@pytest.mark.parametrize("version", range(9, 12))
def test_hand_built_flexible_frame_without_tags_is_accepted(version):
    frame = _flexible_frame(version)
    assert frame == _frame(version, _one("tp", 4, b"rec", acks=1))  # the same bytes as kio's
    assert _fast(frame) == (version, 7, 1, "tp", 4, b"rec")


@pytest.mark.parametrize("version", range(9, 12))
@pytest.mark.parametrize("where", ["header", "request", "topic", "partition"])
def test_tagged_fields_give_none(version, where):
    frame = _flexible_frame(version, **{where: _TAGS})
    assert _general(frame) == (version, 7, 1, "tp", 4, b"rec")  # valid for the general path
    assert parse_single_partition(frame) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_gives_none(version):
    frame = _frame(version, _one("topic", 1, b"0123456789" * 14, acks=1), client_id="client")
    assert _fast(frame) is not None
    for cut in range(len(frame)):
        assert parse_single_partition(frame[:cut]) is None, f"prefix of {cut} of {len(frame)} bytes"
        assert parse_single_partition(memoryview(frame)[:cut]) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_garbage_gives_none(version):
    frame = _frame(version, _one())
    for extra in (b"\x00", b"\x01", b"\x00" * 3):
        assert parse_single_partition(frame + extra) is None
        header, pos = messages.parse_request_header(frame + extra)
        with pytest.raises(ValueError):
            decode_produce_request(frame + extra, pos, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_utf8_topic_gives_none(version):
    frame = bytearray(_frame(version, _one("abcd")))
    at = frame.index(b"abcd")
    frame[at : at + 4] = b"a\xff\xfed"  # same length, not UTF-8
    assert parse_single_partition(frame) is None
    header, pos = messages.parse_request_header(frame)
    with pytest.raises(ValueError):
        decode_produce_request(frame, pos, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_corrupted_frames_never_raise_and_agree_with_general_parser(version):
    """Single-byte corruptions: the fast parser never raises, and whatever it accepts the
    general parser reads identically."""
    rng = random.Random(1000 + version)
    frame = _frame(version, _one("topic", 2, b"r" * 130, acks=1), client_id="id")
    accepted = 0
    for at in range(len(frame)):
        for value in {0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)}:
            mutated = bytearray(frame)
            mutated[at] = value
            got = _fast(mutated)
            if got is None:
                continue
            accepted += 1
            assert _general(mutated) == got, f"byte {at} set to {value}"
    assert accepted > len(frame)  # many corruptions (e.g. in the records) remain valid


def test_non_minimal_varints_match_general_parser():
    # A topic name length written as a two-byte varint: legal, and read the same by both.
    frame = _flexible_frame(9)
    at = frame.index(b"tp") - 1
    assert frame[at] == 3
    patched = frame[:at] + b"\x83\x00" + frame[at + 1 :]
    assert _general(patched) == (9, 7, 1, "tp", 4, b"rec")
    assert _fast(patched) == _general(patched)


# ---- the response template ------------------------------------------------------------------


def _expected_frame(
    version, correlation_id, topic, partition, base_offset, log_append_time, log_start_offset
):
    (body,) = hot_responses.produce_response(
        version, [(topic, [(partition, 0, base_offset, log_append_time, log_start_offset, None)])]
    )
    return messages.response_prefix(0, version, correlation_id, len(body)) + body


NUMBERS = [
    (0, "orders", 0, 0, -1, 0),
    (1, "orders", 5, 42, -1, 7),
    (-1, "ünïcode-τόπος", 2147483647, 2**63 - 1, 2**63 - 1, 2**63 - 2),
    (2147483647, "x" * 300, -1, -1, -1, -1),
    (-2147483648, "a", 12, 2**40 + 3, 1_700_000_000_000, 2**33),
]


@pytest.mark.parametrize("version", range(0, 12))
@pytest.mark.parametrize("numbers", NUMBERS)
def test_one_partition_frame_equals_general_packer(version, numbers):
    expected = _expected_frame(version, *numbers)
    got = hot_responses.one_partition_produce_frame(version, *numbers)
    assert isinstance(got, bytes)
    assert got == expected
    assert struct.unpack_from(">i", got)[0] == len(got) - 4


@pytest.mark.parametrize("version", range(3, 12))
def test_one_partition_frame_decodes_with_kio(version):
    frame = hot_responses.one_partition_produce_frame(version, 99, "ünïcode", 4, 2**50, -1, 17)
    correlation_id, resp = messages.decode_response(0, version, frame[4:])
    assert correlation_id == 99
    ((topic,),) = [resp.responses]
    (part,) = topic.partition_responses
    assert topic.name == "ünïcode"
    assert (part.index, part.error_code, part.base_offset) == (4, 0, 2**50)
    if version >= 5:
        assert part.log_start_offset == 17
    if version >= 8:
        assert part.error_message is None and part.record_errors == ()


@pytest.mark.parametrize("version", range(0, 12))
def test_template_reuse_gives_correct_frames(version):
    topic = f"reuse-{version}-τ"
    hot_responses._ONE_PARTITION_FRAMES.pop((version, topic), None)
    first = hot_responses.one_partition_produce_frame(version, 1, topic, 0, 10, -1, 0)
    assert (version, topic) in hot_responses._ONE_PARTITION_FRAMES
    template = hot_responses._ONE_PARTITION_FRAMES[(version, topic)]
    second = hot_responses.one_partition_produce_frame(version, 2, topic, 3, 11, 1_700_000_000_123, 5)
    third = hot_responses.one_partition_produce_frame(version, -7, topic, 0, 10, -1, 0)
    assert hot_responses._ONE_PARTITION_FRAMES[(version, topic)] is template  # reused, not rebuilt
    assert first == _expected_frame(version, 1, topic, 0, 10, -1, 0)
    assert second == _expected_frame(version, 2, topic, 3, 11, 1_700_000_000_123, 5)
    assert third == _expected_frame(version, -7, topic, 0, 10, -1, 0)
    assert first != third and first[8:] == third[8:]  # only the correlation id differs
    # Another topic of the same length at the same version does not share the template's name.
    other = topic[:-1] + "u"
    assert hot_responses.one_partition_produce_frame(version, 1, other, 0, 10, -1, 0) == _expected_frame(
        version, 1, other, 0, 10, -1, 0
    )


def test_template_cache_overflow_stays_correct():
    for i in range(4200):
        topic = f"many-{i}"
        got = hot_responses.one_partition_produce_frame(9, i, topic, i % 7, i * 3, -1, i)
        if i % 500 == 0 or i > 4090:
            assert got == _expected_frame(9, i, topic, i % 7, i * 3, -1, i)
    assert len(hot_responses._ONE_PARTITION_FRAMES) <= 4096
    assert hot_responses.one_partition_produce_frame(9, 5, "many-0", 1, 2, -1, 3) == _expected_frame(
        9, 5, "many-0", 1, 2, -1, 3
    )
