"""IP connection-rate quotas (issue 17, KIP-612): ``connection_creation_rate`` for ip entities,
``<default>`` and a specific address, through AlterClientQuotas and DescribeClientQuotas; a
connection over its address's rate is closed unread, other addresses are unaffected."""

from __future__ import annotations

import pytest
from broker_e2e import RawClient
from test_client_quotas import alter_quota

from odradek.protocol.errors import ErrorCode
from odradek.testing.embedded import EmbeddedBroker

API_VERSIONS = 18
BODY = {"client_software_name": "t", "client_software_version": "1"}
OTHER_IP = "127.0.0.2"  # another loopback address: Linux routes all of 127/8 to lo


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


def served(b, source: str | None, count: int) -> int:
    """Open ``count`` connections from ``source`` at once; how many answer ApiVersions (the
    others must be closed by the broker, unanswered)."""
    clients = [RawClient(b, timeout=30, source=source) for _ in range(count)]
    answered = 0
    try:
        for c in clients:
            c.send(API_VERSIONS, 3, BODY)
        for c in clients:
            frame = c.read_frame()
            if frame is not None:
                answered += 1
    finally:
        for c in clients:
            c.close()
    return answered


def describe(b, components: list[dict]) -> list[tuple[tuple, list]]:
    with RawClient(b, source=OTHER_IP) as raw:  # 127.0.0.1 may be over its quota
        resp = raw.request(48, 1, {"components": components, "strict": False})
    assert resp.error_code == 0, resp
    return sorted(
        (tuple((e.entity_type, e.entity_name) for e in entry.entity), [(v.key, v.value) for v in entry.values])
        for entry in resp.entries
    )


def test_connection_creation_rate_per_ip_closes_connections_over_the_default_only(broker):
    assert alter_quota(broker, [("ip", OTHER_IP)], "connection_creation_rate", 1000) == 0
    # 1 a second, over Kafka's window of at least 10 s: 10 connections, then closed.
    assert alter_quota(broker, [("ip", None)], "connection_creation_rate", 1) == 0
    answered = served(broker, None, 20)
    assert 5 <= answered <= 12, answered
    assert served(broker, OTHER_IP, 20) == 20
    assert describe(broker, [{"entity_type": "ip", "match_type": 2, "match": None}]) == [
        ((("ip", OTHER_IP),), [("connection_creation_rate", 1000.0)])
    ]
    assert describe(broker, [{"entity_type": "ip", "match_type": 1, "match": None}]) == [
        ((("ip", None),), [("connection_creation_rate", 1.0)])
    ]
    # Removing the default lets 127.0.0.1 connect again.
    assert alter_quota(broker, [("ip", None)], "connection_creation_rate", None, source=OTHER_IP) == 0
    assert served(broker, None, 20) == 20


def test_ip_quota_entities_are_validated(broker):
    assert alter_quota(broker, [("ip", "not-an-ip")], "connection_creation_rate", 5) == ErrorCode.invalid_request
    assert alter_quota(broker, [("ip", "10.0.0.1"), ("user", "a")], "connection_creation_rate", 5) == ErrorCode.invalid_request
    assert alter_quota(broker, [("ip", "10.0.0.1")], "producer_byte_rate", 5) == ErrorCode.invalid_request
    assert alter_quota(broker, [("ip", "::1")], "connection_creation_rate", 5) == 0
    assert describe(broker, []) == [((("ip", "::1"),), [("connection_creation_rate", 5.0)])]
