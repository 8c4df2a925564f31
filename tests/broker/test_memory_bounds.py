"""What a client that does not read, or sends large requests slowly, may cost the broker
(issue 25): a real broker process, real sockets. benchmarks/resource_limits.py measures the
same patterns at full size (the unread_fetch and slow_big_frames rows)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from broker_e2e import (
    RawClient,
    assert_serving,
    create_topic,
    decode_batches,
    fetch_body,
    log_mentions,
    produce_and_flush,
    produce_body,
    producer,
    record_batch,
    rss_kib,
)
from kio.schema.errors import ErrorCode

from odradek.protocol.messages import build_request, decode_response, encode_request

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
API_VERSIONS_BODY = {"client_software_name": "memory-bounds", "client_software_version": "1"}
MiB = 1 << 20


def peak_rss_kib(broker, seconds: float) -> int:
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_kib(broker))
        time.sleep(0.05)
    return peak


def fetch_frame(topic: str, correlation: int, max_bytes: int, *, min_bytes: int = 1, max_wait_ms: int = 0) -> bytes:
    body = dict(fetch_body(topic, 0, 0, max_wait_ms=max_wait_ms, max_bytes=max_bytes), min_bytes=min_bytes)
    return encode_request(FETCH, 12, correlation, "memory-bounds", build_request(FETCH, 12, body))


def connect(broker, rcvbuf: int = 4096) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((broker.host, broker.port))
    return s


def read_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        assert k, f"the broker closed the connection {got} bytes into {n}"
        got += k
    return bytes(buf)


def read_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", read_exactly(s, 4))
    return read_exactly(s, size)


def fill(broker, topic: str, count: int) -> list[bytes]:
    """``count`` records of 100 kB, each different; their values in order."""
    values = [i.to_bytes(4, "big") * 25_000 for i in range(count)]
    produce_and_flush(producer(broker, linger_ms=5), topic, [{"value": v, "partition": 0} for v in values], timeout=60)
    return values


@pytest.mark.parametrize("zero_copy", ["0", "1"], ids=["pread", "sendfile"])
def test_unread_pipelined_big_fetches_hold_little_and_are_answered_whole_once_read(
    own_broker, topic_name, monkeypatch, zero_copy
):
    """10 connections each pipeline 3 Fetch requests for 20 MiB of a 24 MB partition and do
    not read. The answers are streamed from the log as the sockets drain, so the broker does
    not hold them (it held ~20 MiB per connection when answers were read whole: +200 MiB);
    once the clients read, every answer is complete and carries the records produced."""
    monkeypatch.setenv("ODRADEK_ZERO_COPY", zero_copy)
    b = own_broker()
    create_topic(b, topic_name)
    values = fill(b, topic_name, 240)
    before = rss_kib(b)
    socks = []
    try:
        for _ in range(10):
            s = connect(b)
            s.sendall(b"".join(fetch_frame(topic_name, c, 20 * MiB) for c in (1, 2, 3)))
            socks.append(s)
        peak = peak_rss_kib(b, 3.0)
        with RawClient(b) as other:  # everyone else is served meanwhile
            assert other.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
        grown = (max(peak, rss_kib(b)) - before) / 1024
        assert grown < 80, f"10 non-reading connections grew the broker by {grown:.0f} MiB"
        for s in socks:
            s.settimeout(60)
            for correlation in (1, 2, 3):
                frame = read_frame(s)
                answered, response = decode_response(FETCH, 12, frame)
                assert answered == correlation
                (part,) = response.responses[0].partitions
                assert part.error_code == ErrorCode.none
                fetched = [r.value for batch in decode_batches(part.records) for r in batch]
                assert len(fetched) >= 180, f"only {len(fetched)} records in a 20 MiB answer"
                assert fetched == values[: len(fetched)]
    finally:
        for s in socks:
            s.close()
    assert_serving(b, topic_name)


def test_small_requests_are_answered_while_slow_large_requests_fill_the_pool(own_broker, topic_name):
    """20 connections announce 8 MiB requests and send 3 MiB of each: the first takes all of
    queued.max.request.bytes and the others wait unread. Another client's ApiVersions,
    Metadata and 1 KiB Produce do not wait for the pool (Kafka's pool would mute them too)."""
    b = own_broker(**{"socket.request.max.bytes": 8 * MiB, "queued.max.request.bytes": 8 * MiB})
    create_topic(b, topic_name)
    hogs = []
    try:
        for _ in range(20):
            hog = socket.create_connection((b.host, b.port))
            hog.setblocking(False)
            data = memoryview(struct.pack(">i", 8 * MiB) + b"\x00" * (3 * MiB))
            sent = 0
            deadline = time.monotonic() + 2  # as much as the broker and the kernel take
            while sent < len(data) and time.monotonic() < deadline:
                try:
                    sent += hog.send(data[sent:])
                except BlockingIOError:
                    time.sleep(0.01)
            hogs.append(hog)
        log_mentions(b, "queued.max.request.bytes (8388608) reached", timeout=15)
        with RawClient(b, timeout=10) as other:
            assert other.request(API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none
            metadata = other.request(METADATA, 9, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
            assert [t.error_code for t in metadata.topics] == [ErrorCode.none]
            produced = other.request(PRODUCE, 9, produce_body(topic_name, 0, record_batch([b"s" * 1024]), acks=1))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    finally:
        for hog in hogs:
            hog.close()
    assert_serving(b, topic_name)


def test_the_default_request_pool_is_derived_from_memory_and_logged(own_broker):
    b = own_broker()
    line = log_mentions(b, "queued.max.request.bytes: ")
    limit = int(line.split("queued.max.request.bytes: ")[1].split()[0])
    assert limit >= 100 * MiB  # at least socket.request.max.bytes (Kafka's default, 100 MiB)
    assert "1/256 of the" in line


@pytest.mark.parametrize("zero_copy", ["0", "1"], ids=["pread", "sendfile"])
def test_a_peer_closing_mid_fetch_is_an_ordinary_disconnect(own_broker, topic_name, monkeypatch, zero_copy):
    """Consumers that reset their connection while a large answer is going out, or while
    their fetch waits in the purgatory (its answer then meets a reset socket): no traceback
    in the broker's log (it used to log BrokenPipeError from sendfile), and it serves on."""
    monkeypatch.setenv("ODRADEK_ZERO_COPY", zero_copy)
    b = own_broker()
    create_topic(b, topic_name)
    fill(b, topic_name, 60)
    for _ in range(3):
        s = connect(b)
        s.sendall(fetch_frame(topic_name, 1, 8 * MiB))
        s.settimeout(10)
        assert s.recv(1000)  # the answer has started
        reset(s)
    waiting = []
    for _ in range(3):
        s = connect(b)
        s.sendall(fetch_frame(topic_name, 1, 8 * MiB, min_bytes=1 << 30, max_wait_ms=500))
        waiting.append(s)
    time.sleep(0.1)  # let the broker read them: a parked fetch stops its connection's reading
    for s in waiting:
        reset(s)
    with RawClient(b, timeout=10) as later:  # parked after them, so it expires after them
        later.request(FETCH, 12, dict(fetch_body(topic_name, 0, 0, max_wait_ms=500), min_bytes=1 << 30))
    assert_serving(b, topic_name)
    b.stop()
    log = b.log_text()
    assert "Traceback" not in log and "Exception in callback" not in log, log[-3000:]


def reset(s: socket.socket) -> None:
    """Close with a reset (RST), as a crashed client's kernel does, not a FIN."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
