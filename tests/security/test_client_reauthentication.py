"""Re-authentication (KIP-368) in Odradek's own client (issue 17): with connections.max.reauth.ms
at 2 s, a producer and a group consumer keep working for 6 s on the connections they opened,
re-authenticating on them instead of being dropped by the broker and reconnecting."""

from __future__ import annotations

import time

from security_support import sasl_listeners

from odradek.client.blocking import Consumer, Producer

TOPIC = "reauth-odradek"


def sasl_peers(b) -> set[str]:
    """The client addresses of the broker's SASL_PLAINTEXT connections right now."""
    return b.embedded.call(
        lambda broker: {c.peer for c in broker.network.connections if c.listener == "SASL_PLAINTEXT"}
    )


def test_odradek_client_reauthenticates_instead_of_reconnecting(tls, secured_broker):
    b = secured_broker(sasl_listeners(tls, **{"connections.max.reauth.ms": "2000"}))
    conf = {
        "bootstrap.servers": b.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    b.embedded.create_topic(TOPIC)
    sent = got = 0
    with Producer({**conf, "linger.ms": 0}) as p, Consumer(
        {**conf, "group.id": "reauth-g", "auto.offset.reset": "earliest", "heartbeat.interval.ms": 500}
    ) as c:
        c.subscribe([TOPIC])
        p.send(TOPIC, b"first").result(30)
        sent = 1
        deadline = time.monotonic() + 30
        while got < 1 and time.monotonic() < deadline:
            got += len(c.poll(0.2))
        assert got == 1, "the consumer never received the first record"
        first_peers = sasl_peers(b)
        seen = set(first_peers)
        started = time.monotonic()
        while time.monotonic() - started < 6:  # three session lifetimes
            p.send(TOPIC, b"x").result(30)
            sent += 1
            got += len(c.poll(0.1))
            seen |= sasl_peers(b)
        deadline = time.monotonic() + 30
        while got < sent and time.monotonic() < deadline:
            got += len(c.poll(0.2))
    assert got == sent, (got, sent)
    assert seen == first_peers, f"new connections after the first: {sorted(seen - first_peers)}"
    assert "did not re-authenticate" not in b.log_text()
