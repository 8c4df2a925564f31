"""Our zero-copy Produce parser must read exactly what kio's writer wrote, at every version."""

import struct
import uuid

import pytest

from odradek.protocol import messages
from odradek.protocol.produce_request import decode_produce_request, parse_single_partition


def _frame(version, body):
    return memoryview(messages.encode_request(0, version, 7, "c", messages.build_request(0, version, body)))[
        4:
    ]


ORDERS_ID, OTHER_ID = uuid.uuid4(), uuid.uuid4()


@pytest.mark.parametrize("version", range(3, 14))
def test_parser_matches_kio(version):
    body = {
        "transactional_id": "tx" if version >= 3 else None,
        "acks": -1,
        "timeout": 1500,
        "topic_data": [
            {
                "name": "orders",
                "topic_id": ORDERS_ID,  # v13+ (KIP-516), in place of the name
                "partition_data": [{"index": 0, "records": b"\x01" * 70}, {"index": 3, "records": None}],
            },
            {"name": "ünïcode", "topic_id": OTHER_ID, "partition_data": []},
        ],
    }
    payload = _frame(version, body)
    header, pos = messages.parse_request_header(payload)
    req = decode_produce_request(payload, pos, version)
    assert (req.transactional_id, req.acks, req.timeout.total_seconds()) == ("tx", -1, 1.5)
    orders, other = req.topic_data
    if version >= 13:
        assert (orders.name, orders.topic_id, other.topic_id) == ("", ORDERS_ID, OTHER_ID)
    else:
        assert (orders.name, other.name, orders.topic_id) == ("orders", "ünïcode", None)
    assert other.partition_data == ()
    p0, p3 = orders.partition_data
    assert (p0.index, bytes(p0.records)) == (0, b"\x01" * 70)
    assert (p3.index, p3.records) == (3, None)
    assert isinstance(p0.records, memoryview), "records must not be copied"


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncated_request_is_rejected(cut):
    payload = _frame(
        9,
        {
            "acks": 1,
            "timeout": 1,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 30}]}],
        },
    )
    header, pos = messages.parse_request_header(payload)
    with pytest.raises(ValueError):
        decode_produce_request(payload[:-cut], pos, 9)


def test_trailing_bytes_are_rejected():
    payload = bytes(_frame(7, {"acks": 1, "timeout": 1, "topic_data": []})) + b"\x00"
    header, pos = messages.parse_request_header(payload)
    with pytest.raises(ValueError):
        decode_produce_request(payload, pos, 7)


HUGE_COMPACT = b"\xff\xff\xff\xff\x0f"  # a compact length of 2**32 - 1


@pytest.mark.parametrize(
    "version,body",
    [
        # flexible: topics, partitions and records lengths of 2**32 - 1
        (9, b"\x00" + b"\xff\xff\x00\x00\x07\xd0" + HUGE_COMPACT),
        (9, b"\x00" + b"\xff\xff\x00\x00\x07\xd0" + b"\x02\x02t" + HUGE_COMPACT),
        (9, b"\x00" + b"\xff\xff\x00\x00\x07\xd0" + b"\x02\x02t\x02\x00\x00\x00\x00" + HUGE_COMPACT),
        # null topics array (compact 0)
        (9, b"\x00" + b"\xff\xff\x00\x00\x07\xd0" + b"\x00\x00"),
        # classic: an int32 topics count of 2**31 - 1, a records size of 2**31 - 1
        (3, b"\xff\xff" + b"\xff\xff\x00\x00\x07\xd0" + b"\x7f\xff\xff\xff"),
        (7, b"\xff\xff" + b"\xff\xff\x00\x00\x07\xd0" + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
         + b"\x00\x00\x00\x00\x7f\xff\xff\xff"),
    ],
)
def test_hostile_lengths_are_malformed_and_never_allocated(version, body):
    """The hand-written Produce parser bounds every count and size by the bytes left, as
    wellformed.py does for the kio-decoded requests; the fast lane declines them."""
    payload = struct.pack(">hhih", 0, version, 1, 1) + b"c" + (b"\x00" if version >= 9 else b"") + body
    header, pos = messages.parse_request_header(payload)
    with pytest.raises(messages.MalformedRequest):
        messages.decode_request_body(header, payload, pos)
    assert parse_single_partition(payload) is None
