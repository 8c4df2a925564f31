"""Our zero-copy Produce parser must read exactly what kio's writer wrote, at every version."""

import pytest

from odradek.protocol import messages
from odradek.protocol.produce_request import decode_produce_request


def _frame(version, body):
    return memoryview(messages.encode_request(0, version, 7, "c", messages.build_request(0, version, body)))[
        4:
    ]


@pytest.mark.parametrize("version", range(3, 12))
def test_parser_matches_kio(version):
    body = {
        "transactional_id": "tx" if version >= 3 else None,
        "acks": -1,
        "timeout": 1500,
        "topic_data": [
            {
                "name": "orders",
                "partition_data": [{"index": 0, "records": b"\x01" * 70}, {"index": 3, "records": None}],
            },
            {"name": "ünïcode", "partition_data": []},
        ],
    }
    payload = _frame(version, body)
    header, pos = messages.parse_request_header(payload)
    req = decode_produce_request(payload, pos, version)
    assert (req.transactional_id, req.acks, req.timeout.total_seconds()) == ("tx", -1, 1.5)
    orders, other = req.topic_data
    assert orders.name == "orders" and other.name == "ünïcode" and other.partition_data == ()
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
