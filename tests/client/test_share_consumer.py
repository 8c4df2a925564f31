"""Odradek's share consumer (KIP-932), blocking and asyncio, against a broker with share
groups on; confluent-kafka's ShareConsumer in the same group."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer as ConfluentShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)
from support import set_group_configs, started_broker, wait_until

from odradek.aio import ShareConsumer as AioShareConsumer
from odradek.client import ShareConsumer
from odradek.client.client_errors import SerializationError

OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 200,
    "group.share.session.timeout.ms": 5000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 5000,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("share-client") / "data", OVERRIDES)


def queue(broker, count: int) -> tuple[str, str, set[bytes]]:
    """A topic with ``count`` records and a share group reading it from the start."""
    topic, group = f"sq-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    set_group_configs(admin, group, share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    values = {f"v{i}".encode() for i in range(count)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, value=v, partition=i % 2)
    assert p.flush(10) == 0
    return topic, group, values


def test_blocking_share_consumers_with_librdkafka_get_each_record_once(broker):
    topic, group, values = queue(broker, 300)
    ours = [ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, max_poll_records=20)
            for _ in range(2)]
    theirs = ConfluentShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    got: list[bytes] = []
    try:
        for c in ours:
            c.subscribe([topic])
        theirs.subscribe([topic])

        def step():
            for c in ours:
                got.extend(r.value for r in c.poll(0.1))
            got.extend(m.value() for m in theirs.poll(0.1) or [] if m.error() is None)

        wait_until(lambda: len(got) >= len(values), 30, "every record", step=step)
        for _ in range(3):
            step()  # nothing more: every record was accepted (implicitly) once
        assert {tp.partition for tp in ours[0].assignment()} == {0, 1}
    finally:
        for c in ours:
            c.close()
        theirs.close()
    assert sorted(got) == sorted(values)


def test_explicit_release_redelivers_and_reject_archives(broker):
    topic, group, values = queue(broker, 4)
    c = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                      share_acknowledgement_mode="explicit")
    try:
        c.subscribe([topic])
        first: list = []
        wait_until(lambda: len(first) >= 4, 20, "the records", step=lambda: first.extend(c.poll(0.2)))
        assert all(c.delivery_count(r) == 1 for r in first)
        released = next(r for r in first if r.value == b"v0")
        rejected = next(r for r in first if r.value == b"v1")
        c.acknowledge(released, "release")
        c.acknowledge(rejected, "reject")
        for r in first:
            if r not in (released, rejected):
                c.acknowledge(r, "accept")
        assert all(err is None for err in c.commit().values())
        again: list = []
        wait_until(lambda: again, 20, "the released record", step=lambda: again.extend(c.poll(0.2)))
        assert [(r.value, c.delivery_count(r)) for r in again] == [(b"v0", 2)]
        c.acknowledge(again[0], "accept")
        c.commit()
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert c.poll(0.2) == []  # v1 was archived, the rest accepted
        with pytest.raises(ValueError, match="accept, release, reject"):
            c.acknowledge(again[0], "maybe")
    finally:
        c.close()


def test_asyncio_share_consumer_and_a_closed_members_records_go_to_another(broker):
    topic, group, values = queue(broker, 50)

    async def main():
        a = AioShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             share_acknowledgement_mode="explicit", max_poll_records=1000)
        async with a:
            a.subscribe([topic])
            held: list = []
            deadline = time.monotonic() + 20
            while len(held) < len(values) and time.monotonic() < deadline:
                held += await a.poll(0.2)
            assert sorted(r.value for r in held) == sorted(values)
        # a closed without acknowledging: its records are released at once, not after the lock
        b = AioShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group)
        async with b:
            b.subscribe(topic)
            got: list = []
            counts: set[int] = set()
            deadline = time.monotonic() + 4  # shorter than the 5 s lock
            while len(got) < len(values) and time.monotonic() < deadline:
                polled = await b.poll(0.2)
                got += [r.value for r in polled]
                counts |= {b.delivery_count(r) for r in polled}
            assert sorted(got) == sorted(values)
            assert counts == {2}  # the second delivery of each

    asyncio.run(main())


def _share_group_rack_ids(broker, group: str) -> list[str | None]:
    """The members' rack ids, as ShareGroupDescribe (v1) shows them."""
    import socket
    import struct

    from odradek.protocol.messages import decode_response, encode_request
    from odradek.protocol.request_builder import build_request

    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        body = build_request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
        sock.sendall(encode_request(77, 1, 1, "t", body))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
    _, answer = decode_response(77, 1, data[4:])
    return [m.rack_id for m in answer.groups[0].members]


def test_share_consumer_deserializes_rejects_what_it_cannot_and_sends_its_rack(broker):
    topic, group, _ = queue(broker, 0)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    good = {f"k{i}": f"v{i}" for i in range(20)}
    for k, v in sorted(good.items()):
        p.produce(topic, key=k.encode(), value=v.encode(), partition=0)
    p.produce(topic, key=b"bad", value=b"\xff\xfe", partition=0)  # not UTF-8
    assert p.flush(10) == 0
    c = ShareConsumer(
        bootstrap_servers=broker.bootstrap_servers, group_id=group, client_rack="rack-7",
        key_deserializer=lambda b: b.decode(), value_deserializer=lambda b: b.decode(),
    )
    got: dict[str, str] = {}
    failures: list[str] = []

    def step():
        try:
            for r in c.poll(0.2):
                assert isinstance(r.key, str) and isinstance(r.value, str)
                assert r.key not in got  # each record once
                got[r.key] = r.value
        except SerializationError as exc:
            failures.append(str(exc))

    try:
        c.subscribe([topic])
        wait_until(lambda: got == good and failures, 30, "every good record and the bad one's error", step=step)
        assert len(failures) == 1 and "offset 20" in failures[0]
        assert _share_group_rack_ids(broker, group) == ["rack-7"]
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            step()  # the rejected record never comes back
        assert len(failures) == 1 and got == good
    finally:
        c.close()
