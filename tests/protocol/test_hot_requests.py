"""The hand-packed Produce request is byte-for-byte what kio writes, for every version."""

import pytest

from odradek.protocol import api_keys, messages
from odradek.protocol.client_versions import client_versions
from odradek.protocol.hot_requests import produce_request
from odradek.protocol.request_builder import build_request


@pytest.mark.parametrize("version", list(client_versions(api_keys.PRODUCE)))
@pytest.mark.parametrize("txn", [None, "tx-1"])
@pytest.mark.parametrize("client_id", ["odradek-producer-1", None])
def test_produce_request_matches_kio(version, txn, client_id):
    topic_data = [
        ("orders", [(0, [b"\x01" * 61, bytearray(b"abc")]), (3, [b"\x02" * 70])]),
        ("x", [(1, [b"z"])]),
    ]
    ours = b"".join(produce_request(version, 77, client_id, -1, 30000, topic_data, txn))
    entity = build_request(
        api_keys.PRODUCE,
        version,
        {
            "transactional_id": txn,
            "acks": -1,
            "timeout": 30000,
            "topic_data": [
                {
                    "name": name,
                    "partition_data": [{"index": i, "records": b"".join(bufs)} for i, bufs in parts],
                }
                for name, parts in topic_data
            ],
        },
    )
    assert ours == messages.encode_request(api_keys.PRODUCE, version, 77, client_id, entity)
