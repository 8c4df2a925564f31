"""max.connection.creation.rate (issue 17, quotas): new connections beyond the rate wait
their turn (Kafka holds its acceptor back); none is refused or lost."""

from __future__ import annotations

import time

from broker_e2e import RawClient

API_VERSIONS = 18
BODY = {"client_software_name": "t", "client_software_version": "1"}


def test_connections_beyond_the_creation_rate_are_served_late_not_refused(own_broker):
    b = own_broker(**{"max.connection.creation.rate": 4})
    time.sleep(1.1)  # let the bucket refill after the start-up probe (a precondition, not a wait for an outcome)
    started = time.monotonic()
    clients = [RawClient(b) for _ in range(12)]
    try:
        for c in clients:
            c.send(API_VERSIONS, 3, BODY)
        for c in clients:
            assert c.receive(API_VERSIONS, 3)[1].error_code == 0
        elapsed = time.monotonic() - started
    finally:
        for c in clients:
            c.close()
    # 4 at once (one second's burst), the other 8 at 4 a second: about 2 s; every one answered.
    assert elapsed >= 1.5, f"12 connections at 4/s were all served within {elapsed:.2f}s"
