"""Hostile connection patterns against a real broker: memory stays bounded and comes back,
the connection and request-byte limits hold, and a good client keeps producing and
consuming through every one of them (issue 12). benchmarks/resource_limits.py measures the
same patterns at full size and prints a table."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from broker_e2e import (
    RawClient,
    assert_serving,
    create_topic,
    fetch_body,
    log_mentions,
    produce_and_flush,
    produce_body,
    producer,
    record_batch,
    rss_kib,
)
from kio.schema.errors import ErrorCode
from support import wait_until

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.protocol.messages import build_request, encode_request

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
API_VERSIONS_BODY = {"client_software_name": "limits", "client_software_version": "1"}
MiB = 1 << 20


def frame(api_key: int, version: int, body: dict, correlation: int = 1) -> bytes:
    return encode_request(api_key, version, correlation, "limits", build_request(api_key, version, body))


def fetch_frame(topic: str, correlation: int, *, max_bytes: int, min_bytes: int, max_wait_ms: int) -> bytes:
    body = dict(fetch_body(topic, 0, 0, max_wait_ms=max_wait_ms, max_bytes=max_bytes), min_bytes=min_bytes)
    return frame(FETCH, 12, body, correlation)


def answered_connections(broker, n: int) -> list[RawClient]:
    """n connections that each had an ApiVersions request answered."""
    raws = [RawClient(broker) for _ in range(n)]
    for raw in raws:
        assert raw.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
    return raws


def connect(broker, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((broker.host, broker.port))
    return s


def close_all(socks) -> None:
    for s in socks:
        s.close()


def fill_partition(broker, topic: str, megabytes: int) -> None:
    items = [{"value": b"r" * 100_000, "partition": 0} for _ in range(megabytes * 10)]
    produce_and_flush(producer(broker, linger_ms=5), topic, items, timeout=60)


# -- receive buffers ---------------------------------------------------------------------


def test_announced_huge_frames_do_not_allocate_their_size(own_broker, topic_name):
    b = own_broker()
    create_topic(b, topic_name)
    before = rss_kib(b)
    socks = []
    try:
        for _ in range(20):
            s = connect(b)
            s.sendall(struct.pack(">i", 100 * MiB) + b"\x00")  # 100 MiB announced, one byte sent
            socks.append(s)
        assert_serving(b, topic_name)  # answered after every socket's byte was read
        grown = (rss_kib(b) - before) / 1024
        assert grown < 64, f"20 announced 100 MiB frames grew the broker by {grown:.0f} MiB"
    finally:
        close_all(socks)
    assert_serving(b, topic_name)


def test_idle_connections_cost_at_most_32_kib_each(own_broker):
    b = own_broker()
    with RawClient(b) as warm:  # the first requests load code; keep that out of the measure
        warm.request(API_VERSIONS, 3, API_VERSIONS_BODY)
    before = rss_kib(b)
    n = 2000
    request = frame(API_VERSIONS, 3, API_VERSIONS_BODY)
    socks = []
    try:
        for _ in range(n):
            socks.append(connect(b))
        for s in socks:
            s.sendall(request)
        for s in socks:
            (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
            assert len(s.recv(size, socket.MSG_WAITALL)) == size
        per_connection = (rss_kib(b) - before) / n
        assert per_connection <= 32, f"{per_connection:.1f} KiB per idle connection"
    finally:
        close_all(socks)


# -- back-pressure -----------------------------------------------------------------------


@pytest.mark.parametrize("delayed", [False, True], ids=["answerable", "parked-in-purgatory"])
def test_non_reading_pipelined_fetches_hold_bounded_memory_and_free_it(own_broker, topic_name, delayed):
    b = own_broker()
    fill_partition(b, topic_name, 11)
    before = rss_kib(b)
    socks = []
    peak = 0
    try:
        for _ in range(5):
            s = connect(b, rcvbuf=4096)
            # 200 Fetch requests for 10 MiB each, sent at once and never read. Parked ones
            # (min_bytes out of reach) are all answered when their 300 ms wait expires.
            s.sendall(
                b"".join(
                    fetch_frame(
                        topic_name,
                        c,
                        max_bytes=10 * MiB,
                        min_bytes=1 << 30 if delayed else 1,
                        max_wait_ms=300 if delayed else 0,
                    )
                    for c in range(1, 201)
                )
            )
            socks.append(s)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            peak = max(peak, rss_kib(b))
            time.sleep(0.05)
        assert_serving(b, topic_name)
        peak = max(peak, rss_kib(b))
    finally:
        close_all(socks)
    grown = (peak - before) / 1024
    assert grown < 250, f"5 non-reading clients grew the broker by {grown:.0f} MiB"
    wait_until(
        lambda: rss_kib(b) - before < 64 * 1024,
        timeout=15,
        message=f"RSS back near {before // 1024} MiB after the clients left (now {rss_kib(b) // 1024} MiB)",
    )
    assert_serving(b, topic_name)


# -- connection and request-byte limits --------------------------------------------------------


def test_max_connections_per_ip_refuses_the_extra_connection(own_broker, topic_name):
    b = own_broker(**{"max.connections.per.ip": 3})
    raws = answered_connections(b, 3)
    try:
        with RawClient(b) as extra:
            assert extra.closed_by_broker(timeout=10)
        assert "max.connections.per.ip: 3" in log_mentions(b, "127.0.0.1 already has 3 connections")
        raws.pop().close()

        def one_more() -> bool:
            with RawClient(b) as raw:
                raw.send(API_VERSIONS, 3, API_VERSIONS_BODY)
                return raw.read_frame() is not None

        wait_until(one_more, timeout=10, message="a connection to be accepted once one is closed")
    finally:
        close_all(r.sock for r in raws)
    assert_serving(b, topic_name)


def test_max_connections_per_ip_overrides_raise_the_limit_by_host_name(own_broker):
    b = own_broker(**{"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "localhost:4"})
    raws = answered_connections(b, 4)
    try:
        with RawClient(b) as extra:
            assert extra.closed_by_broker(timeout=10)
        assert "max.connections.per.ip.overrides: 4" in log_mentions(b, "already has 4 connections")
    finally:
        close_all(r.sock for r in raws)


def test_queued_max_request_bytes_holds_new_large_requests_until_bytes_free_up(own_broker, topic_name):
    b = own_broker(**{"socket.request.max.bytes": MiB, "queued.max.request.bytes": MiB})
    create_topic(b, topic_name)
    hogs = []
    try:
        # Two half-sent 700 KiB requests: the first takes 700 KiB of the pool, the second
        # overshoots what is left (Kafka's pool lets a request do that while any is left).
        for _ in range(2):
            hog = connect(b)
            hog.sendall(struct.pack(">i", 700 * 1024) + b"\x00" * 100_000)
            hogs.append(hog)
        with RawClient(b) as barrier:  # once this is answered, the broker has read the hogs
            assert barrier.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
        # A complete, valid 600 KiB Produce request now waits for the pool, unread.
        waiting = RawClient(b, timeout=30)
        value = b"w" * (600 * 1024)
        waiting.send(PRODUCE, 9, produce_body(topic_name, 0, record_batch([value]), acks=1))
        line = log_mentions(b, "queued.max.request.bytes (1048576) reached", timeout=10)
        assert waiting.local_address in line
        # Requests that fit a connection's small buffer still flow meanwhile.
        with RawClient(b) as small:
            assert small.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
        waiting.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.sock.recv(1, socket.MSG_PEEK)
        # One hog leaves: its bytes go back to the pool and the waiting request goes through.
        hogs.pop(0).close()
        waiting.sock.settimeout(30)
        _, response = waiting.receive(PRODUCE, 9)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        log_mentions(b, "every connection reads again")
        waiting.close()
    finally:
        close_all(hogs)
    assert_serving(b, topic_name)


def test_connection_limit_settings_are_checked_like_kafka():
    cfg = BrokerConfig({"max.connections.per.ip.overrides": "10.0.0.7:50, client.example.com:0,[::1]:3"})
    assert cfg.max_connections_per_ip_overrides == {"10.0.0.7": 50, "client.example.com": 0, "::1": 3}
    for bad in ("10.0.0.7", "10.0.0.7:many", "bad host:3"):
        with pytest.raises(ConfigError) as info:
            BrokerConfig({"max.connections.per.ip.overrides": bad})
        assert info.value.key == "max.connections.per.ip.overrides"
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"max.connections.per.ip": 0})
    assert info.value.key == "max.connections.per.ip"
    assert BrokerConfig({"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "10.0.0.7:5"})
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"queued.max.request.bytes": 1000})
    assert info.value.key == "queued.max.request.bytes" and "socket.request.max.bytes" in str(info.value)
    assert BrokerConfig({"queued.max.request.bytes": 200 * MiB}).get("queued.max.request.bytes") == 200 * MiB
