"""Metadata requests whose work grows with their item count: a million names does not stall
other clients, and auto-creation is capped per request (issue 12)."""

from __future__ import annotations

import struct
import threading
import time
from types import SimpleNamespace

import pytest
from broker_e2e import RawClient, assert_serving, log_mentions, produce_and_flush, producer
from kio.schema.errors import ErrorCode

from odradek.broker.handlers import metadata
from odradek.cluster.metadata_image import BrokerInfo
from odradek.protocol import messages

METADATA = 3


def metadata_v4_frame(names: list[str], allow_auto_create: bool, correlation: int = 1) -> bytes:
    """Metadata v4 packed by hand: a million kio request entities would take longer than the test."""
    client_id = b"limits"
    parts = [struct.pack(">hhih", METADATA, 4, correlation, len(client_id)), client_id]
    parts.append(struct.pack(">i", len(names)))
    for name in names:
        raw = name.encode()
        parts.append(struct.pack(">h", len(raw)) + raw)
    parts.append(b"\x01" if allow_auto_create else b"\x00")
    payload = b"".join(parts)
    return struct.pack(">i", len(payload)) + payload


def v4_topics(payload: bytes) -> tuple[int, int, str]:
    """From a Metadata v4 response: (topic count, first topic's error code, its name),
    read by hand, since decoding a million topics would dominate the test."""
    pos = 8  # correlation id, throttle time
    (brokers,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    for _ in range(brokers):
        pos += 4
        (host_len,) = struct.unpack_from(">h", payload, pos)
        pos += 2 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", payload, pos)
        pos += 2 + max(rack_len, 0)
    (cluster_len,) = struct.unpack_from(">h", payload, pos)
    pos += 2 + max(cluster_len, 0) + 4  # cluster id, controller id
    count, error_code, name_len = struct.unpack_from(">ihh", payload, pos)
    pos += 8
    return count, error_code, payload[pos : pos + name_len].decode()


def test_million_name_metadata_does_not_stall_another_clients_produce(broker, topic_name):
    prod = producer(broker, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"warm-up", "partition": 0}])
    names = [f"absent-{i:07d}" for i in range(1_000_000)]
    request = metadata_v4_frame(names, allow_auto_create=False)
    latencies: list[float] = []
    done = threading.Event()

    def produce_one_at_a_time():
        while not done.is_set():
            start = time.perf_counter()
            produce_and_flush(prod, topic_name, [{"value": b"meanwhile", "partition": 0}])
            latencies.append(time.perf_counter() - start)

    other = threading.Thread(target=produce_one_at_a_time)
    other.start()
    try:
        with RawClient(broker, timeout=120) as raw:
            started = time.perf_counter()
            raw.send_raw(request)
            response = raw.read_frame()
            took = time.perf_counter() - started
    finally:
        done.set()
        other.join()
    assert v4_topics(response) == (1_000_000, ErrorCode.unknown_topic_or_partition, "absent-0000000")
    assert len(latencies) >= 5, "the other client got (almost) nothing done meanwhile"
    # A broker that stalled on the big request would hold a produce for most of the time the
    # request took; on a busy machine (the suite runs in parallel) both take longer, so the
    # bound is a share of that time, and at least 1 s.
    assert max(latencies) < max(1.0, took / 4), (
        f"another client's produce waited {max(latencies):.2f}s of the {took:.2f}s the request took"
    )


def test_metadata_auto_create_is_capped_per_request(own_broker, topic_name):
    b = own_broker(**{"auto.create.topics.max.per.request": 5})
    names = [f"{topic_name}-{i:02d}" for i in range(30)]
    body = {
        "topics": [{"name": n, "topic_id": None} for n in names],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    with RawClient(b) as raw:
        first = raw.request(METADATA, 12, body)
        created = [t.name for t in first.topics if t.error_code == ErrorCode.none]
        refused = [t.name for t in first.topics if t.error_code == ErrorCode.throttling_quota_exceeded]
        assert created == names[:5] and refused == names[5:]
        assert [t.name for t in first.topics] == names  # answered in request order
        line = log_mentions(b, "auto.create.topics.max.per.request")
        assert "created 5" in line and "other 25" in line
        # The error is retriable: asking again creates the next five.
        second = raw.request(METADATA, 12, body)
        assert [t.name for t in second.topics if t.error_code == ErrorCode.none] == names[:10]
        listed = raw.request(METADATA, 12, dict(body, topics=None))
        assert sorted(t.name for t in listed.topics if t.name.startswith(topic_name)) == names[:10]
    assert_serving(b, names[0])


@pytest.mark.parametrize("version", range(13))
def test_topics_spliced_into_a_metadata_frame_match_the_plain_encoding(version):
    image = SimpleNamespace(
        topics={}, brokers={0: BrokerInfo(0, "h", 9)}, controller_id=0
    )
    broker = SimpleNamespace(image=image, cluster_id="cluster", authorizer=None)
    request = SimpleNamespace(api_version=version, correlation_id=41, listener="PLAINTEXT", body=SimpleNamespace())
    entries = [metadata._error_entry(f"topic-{i}", ErrorCode.unknown_topic_or_partition) for i in range(3)]
    topic_class = metadata._topic_class(version)
    encoded = [messages.encode_body(messages.build(topic_class, e)) for e in entries]
    plain = messages.encode_response(
        METADATA, version, 41, messages.build_response(METADATA, version, metadata._response(broker, entries, "PLAINTEXT"))
    )
    assert metadata._frame_with_topics(broker, request, len(encoded), [b"".join(encoded)]) == plain
