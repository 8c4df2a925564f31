"""Request-time quotas (issue 17, KIP-124): ``request_percentage`` per client id and user,
charged with the event loop's time per request; confluent-kafka sees throttle_time_ms and
its request rate drops, while a client id without a quota runs unaffected."""

from __future__ import annotations

import time

import pytest
from broker_e2e import RawClient
from confluent_kafka import Producer
from test_client_quotas import _Store, alter_quota

from odradek.broker.client_quotas import DEFAULT, ClientQuotas
from odradek.protocol.errors import ErrorCode
from odradek.testing.embedded import EmbeddedBroker

TOPICS = 150  # a Metadata request for all of them costs the loop a millisecond or two


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        for i in range(TOPICS):
            b.create_topic(f"rq-{i:03d}")
        yield b


def metadata_loop(b, client_id: str, seconds: float) -> tuple[float, list[int]]:
    """Metadata for every topic, one request after another; (requests a second, throttles)."""
    throttles: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "client.id": client_id,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    count = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        md = p.list_topics(timeout=30)
        assert len([t for t in md.topics if t.startswith("rq-")]) == TOPICS
        count += 1
        p.poll(0)
    elapsed = time.monotonic() - started
    p.poll(0)
    p.flush(5)
    return count / elapsed, throttles


def test_request_percentage_throttles_one_client_id_and_not_another(broker):
    # 1 % of the loop: 10 ms a second, a few Metadata requests a second.
    assert alter_quota(broker, [("client-id", "rq-slow")], "request_percentage", 1.0) == 0
    try:
        slow_rate, slow_throttles = metadata_loop(broker, "rq-slow", 5)
        fast_rate, fast_throttles = metadata_loop(broker, "rq-fast", 2)
    finally:
        assert alter_quota(broker, [("client-id", "rq-slow")], "request_percentage", None) == 0
    print(f"slow {slow_rate:.1f}/s, fast {fast_rate:.1f}/s, throttles {slow_throttles[:10]}")
    assert slow_throttles and max(slow_throttles) > 0, "no throttle_time_ms reported"
    assert not any(fast_throttles), fast_throttles
    # Generous: under a contended CPU a request's measured time only grows, which throttles
    # the quota'd client more, never the other one.
    assert slow_rate * 3 < fast_rate, (slow_rate, fast_rate)


def test_request_percentage_under_a_user_default_applies_per_user():
    """(<default> user, client id) precedence: the same rules as the byte rates."""
    q = ClientQuotas(_Store([({"user": DEFAULT, "client-id": None}, {"request_percentage": 5.0})]), 11, 1)
    assert q.request_time
    assert q.quota("request_percentage", "alice", "app") == (5.0, ("alice", None))
    # 60 ms of loop time within a window of 10 s is 0.6 %: within 5 %.
    assert q.record_request_time("User:alice", "app", 60_000_000) == 0
    # Another 600 ms takes alice to 6.6 %: throttled, capped at one sample (1 s).
    throttle = q.record_request_time("User:alice", "app", 600_000_000)
    assert 0 < throttle <= 1000
    assert q.record_request_time("User:bob", "app", 60_000_000) == 0  # bob's own budget


def test_request_percentage_is_accepted_by_alter_and_describe(broker):
    entity = [("user", "carol"), ("client-id", "app")]
    assert alter_quota(broker, entity, "request_percentage", 25.0) == 0
    assert alter_quota(broker, [("client-id", "x")], "connection_creation_rate", 5) == ErrorCode.invalid_request
    with RawClient(broker) as raw:
        components = [
            {"entity_type": "user", "match_type": 0, "match": "carol"},
            {"entity_type": "client-id", "match_type": 2, "match": None},
        ]
        resp = raw.request(48, 1, {"components": components, "strict": True})
    assert resp.error_code == 0, resp
    assert [[(v.key, v.value) for v in e.values] for e in resp.entries] == [[("request_percentage", 25.0)]]
    assert alter_quota(broker, entity, "request_percentage", None) == 0


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_throttle_time_set_in_a_produce_response_built_as_bytes(version):
    from odradek.broker.handlers.produce import _response
    from odradek.broker.request_time_quota import with_throttle
    from odradek.protocol import messages

    raw = with_throttle(_response(version, [("t", [(0, 0, 41, -1, 0, None)])]), 1234)
    frame = messages.response_prefix(0, version, 7, len(raw.parts[0])) + raw.parts[0]
    correlation, body = messages.decode_response(0, version, frame[4:])
    assert correlation == 7
    assert body.throttle_time.total_seconds() == 1.234
    assert body.responses[0].partition_responses[0].base_offset == 41


def test_a_throttled_producer_loses_nothing(broker):
    """Produce answers carry the request-time throttle (confluent-kafka reports it); every
    record is still acknowledged."""
    broker.create_topic("rq-produce")
    assert alter_quota(broker, [("client-id", "rq-producer")], "request_percentage", 0.01) == 0
    throttles: list = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "rq-producer",
            "linger.ms": 0,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    acked = []
    try:
        deadline = time.monotonic() + 60
        for i in range(100):
            p.produce("rq-produce", b"%d" % i, on_delivery=lambda err, msg: acked.append(err))
            p.poll(0.01)
            if throttles and i >= 5:
                break
        while len(acked) < i + 1 and time.monotonic() < deadline:
            p.poll(0.1)
    finally:
        assert alter_quota(broker, [("client-id", "rq-producer")], "request_percentage", None) == 0
    assert throttles and max(throttles) > 0
    assert len(acked) == i + 1 and not any(acked), acked[:5]
