"""Client quotas (issue 17, step 4): producer byte rate per client id with Kafka's throttling,
measured over 16 s with confluent-kafka; AlterClientQuotas/DescribeClientQuotas; precedence."""

from __future__ import annotations

import time

import pytest
from broker_e2e import RawClient
from confluent_kafka import Producer

from odradek.broker.client_quotas import DEFAULT, ClientQuotas
from odradek.protocol.errors import ErrorCode
from odradek.testing.embedded import EmbeddedBroker

QUOTA = 100_000  # bytes/s
RECORD = b"q" * 1000


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


def alter_quota(b, entity: list[tuple[str, str | None]], key: str, value: float | None, source: str | None = None) -> int:
    with RawClient(b, source=source) as raw:
        resp = raw.request(
            49,
            1,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                        "ops": [{"key": key, "value": value or 0.0, "remove": value is None}],
                    }
                ],
                "validate_only": False,
            },
        )
        return int(resp.entries[0].error_code)


def produce_for(b, client_id: str, seconds: float, throttles: list):
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "client.id": client_id,
            "linger.ms": 5,
            "acks": 1,
            "queue.buffering.max.kbytes": 256,
            "batch.size": 16384,  # requests small next to the quota, as the bound assumes
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            p.produce("quota-topic", RECORD, on_delivery=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    elapsed = time.monotonic() - started
    p.poll(0)
    done = acked[0]  # acknowledged within the measured time; the rest is dropped
    p.purge()
    p.flush(30)
    return done, elapsed


def test_producer_byte_rate_throttles_one_client_id_and_not_another(broker):
    broker.create_topic("quota-topic")
    assert alter_quota(broker, [("client-id", "slow")], "producer_byte_rate", QUOTA) == 0
    throttles: list = []
    acked, elapsed = produce_for(broker, "slow", 16, throttles)
    # Kafka's window: at most the quota over the elapsed time plus the 10 s the rate is
    # averaged over; at least half the quota over the elapsed time.
    assert QUOTA * elapsed / 2 <= acked <= QUOTA * (elapsed + 10), (acked, elapsed)
    assert throttles and max(throttles) > 0, "no throttle_time_ms reported"
    fast_throttles: list = []
    fast, fast_elapsed = produce_for(broker, "fast", 3, fast_throttles)
    assert fast > 10 * QUOTA * fast_elapsed, (fast, fast_elapsed)
    assert not any(fast_throttles)


def test_describe_and_alter_client_quotas(broker):
    assert alter_quota(broker, [("user", "alice"), ("client-id", None)], "consumer_byte_rate", 2048) == 0
    assert alter_quota(broker, [("ip", "1.2.3.4")], "producer_byte_rate", 1) == ErrorCode.invalid_request
    with RawClient(broker) as raw:
        resp = raw.request(48, 1, {"components": [{"entity_type": "user", "match_type": 0, "match": "alice"}], "strict": False})
    assert resp.error_code == 0
    (entry,) = resp.entries
    assert {(e.entity_type, e.entity_name) for e in entry.entity} == {("user", "alice"), ("client-id", None)}
    assert [(v.key, v.value) for v in entry.values] == [("consumer_byte_rate", 2048.0)]
    assert alter_quota(broker, [("user", "alice"), ("client-id", None)], "consumer_byte_rate", None) == 0
    with RawClient(broker) as raw:
        resp = raw.request(48, 1, {"components": [], "strict": False})
    assert resp.entries == ()


class _Store:
    def __init__(self, entries):
        self.entries = entries

    def client_quotas(self):
        return self.entries


def test_quota_precedence_is_kafkas():
    q = ClientQuotas(
        _Store(
            [
                ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1.0}),
                ({"user": "alice", "client-id": None}, {"producer_byte_rate": 2.0}),
                ({"user": DEFAULT, "client-id": DEFAULT}, {"producer_byte_rate": 3.0}),
                ({"user": None, "client-id": "app"}, {"producer_byte_rate": 4.0}),
                ({"user": None, "client-id": DEFAULT}, {"producer_byte_rate": 5.0}),
            ]
        ),
        11,
        1,
    )
    key = "producer_byte_rate"
    assert q.quota(key, "alice", "app") == (1.0, ("alice", "app"))
    assert q.quota(key, "alice", "other") == (2.0, ("alice", None))
    assert q.quota(key, "bob", "app") == (3.0, ("bob", "app"))  # <default>/<default> before client-only
    q2 = ClientQuotas(_Store([({"user": None, "client-id": "app"}, {key: 4.0}), ({"user": None, "client-id": DEFAULT}, {key: 5.0})]), 11, 1)
    assert q2.quota(key, "bob", "app") == (4.0, (None, "app"))
    assert q2.quota(key, "bob", "cli") == (5.0, (None, "cli"))  # each client id its own budget
    assert q2.quota("consumer_byte_rate", "bob", "app") == (None, None)


def test_odradek_configs_alter_and_describe_client_quotas(broker):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
    from cli_helpers import run_odradek

    b = ["-b", broker.bootstrap_servers]
    r = run_odradek("configs", "alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1048576", *b)
    assert r.code == 0, r
    r = run_odradek("configs", "alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=2048", *b)
    assert r.code == 0, r
    r = run_odradek("configs", "describe", "--entity-type", "clients", "--entity-name", "app", "-o", "json", *b)
    assert r.code == 0, r
    assert r.json() == [{"entity": {"client-id": "app"}, "quotas": {"producer_byte_rate": 1048576.0}}]
    r = run_odradek("configs", "describe", "--entity-type", "users", "--entity-default", "-o", "json", *b)
    assert r.json() == [{"entity": {"user": None}, "quotas": {"consumer_byte_rate": 2048.0}}]
    r = run_odradek("configs", "alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "connection_creation_rate=10", *b)
    assert r.code != 0 and "connection_creation_rate" in r.err, r
