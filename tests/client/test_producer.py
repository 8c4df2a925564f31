"""The blocking producer against a real broker: what goes on the wire comes back intact."""

from __future__ import annotations

import threading
import time

import pytest

from odradek import Consumer, Producer, TopicPartition
from odradek.client.client_errors import (
    ClientClosedError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SerializationError,
)
from odradek.client.producer.partitioner import murmur2_partition
from odradek.client.producer.producer import ProducerRecord


def read_all(bootstrap, topic, partitions, expected, timeout=20.0, **options):
    """Everything in ``topic`` (assign + seek to beginning), as ConsumerRecords."""
    out = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(c.poll(0.5))
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_with_each_codec(bootstrap, make_topic, topic, codec):
    make_topic(topic, 2)
    with Producer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20) as p:
        futures = [
            p.send(topic, value=b"value-%d" % i * (i % 7 + 1), key=b"key-%d" % i, headers=[("n", b"%d" % i)])
            for i in range(500)
        ]
        p.flush()
        metas = [f.result(10) for f in futures]
    assert all(m.topic == topic and m.offset >= 0 for m in metas)
    got = read_all(bootstrap, topic, 2, 500)
    assert len(got) == 500
    by_key = {r.key: r for r in got}
    for i in range(500):
        r = by_key[b"key-%d" % i]
        assert r.value == b"value-%d" % i * (i % 7 + 1)
        assert r.headers == (("n", b"%d" % i),)
        assert r.partition == metas[i].partition and r.offset == metas[i].offset


def test_headers_timestamps_and_nulls(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    ts = 1_600_000_000_123
    with Producer(bootstrap_servers=bootstrap) as p:
        md1 = p.send(topic, value=None, key=b"tombstone", timestamp_ms=ts).result(10)
        md2 = p.send(
            topic, value=b"v", key=None, headers=[("a", b"1"), ("b", None), ("c", b"")], timestamp_ms=ts + 5
        ).result(10)
        md3 = p.send(topic, value="text", key="k").result(10)
    assert md1.timestamp == ts and md2.timestamp == ts + 5
    assert (md1.offset, md2.offset, md3.offset) == (0, 1, 2)
    r1, r2, r3 = read_all(bootstrap, topic, 1, 3)
    assert (r1.key, r1.value, r1.timestamp) == (b"tombstone", None, ts)
    assert (r2.key, r2.value, r2.timestamp) == (None, b"v", ts + 5)
    assert r2.headers == (("a", b"1"), ("b", None), ("c", b""))
    assert (r3.key, r3.value) == (b"k", b"text")
    assert abs(r3.timestamp - time.time() * 1000) < 60_000


def test_idempotent_producer_numbers_batches(bootstrap, make_topic, topic, kafka):
    if not kafka.supports(22):
        pytest.skip("broker has no InitProducerId")
    make_topic(topic, 3)
    with Producer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=2, batch_size=2000) as p:
        futures = [p.send(topic, b"x" * 100, key=b"%d" % (i % 30)) for i in range(3000)]
        p.flush()
        assert all(f.succeeded() for f in futures)
        assert p._core.sender.idempotent and p._core.sender.producer_id >= 0
        pid = p._core.sender.producer_id
    # The batches on the log carry the producer id and consecutive sequences per partition.
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, i) for i in range(3)])
        seen = read_all(bootstrap, topic, 3, 3000)
        assert len(seen) == 3000
    conn_batches = _raw_batches(bootstrap, topic, 3)
    for part, batches in conn_batches.items():
        expected_seq = 0
        for b in batches:
            assert b.producer_id == pid
            assert b.base_sequence == expected_seq, part
            expected_seq += b.header.record_count


def _raw_batches(bootstrap, topic, partitions):
    """The record batches of each partition, straight from Fetch (bypassing the consumer)."""
    import asyncio

    from odradek.client.client_config import resolve
    from odradek.client.netclient import NetClient
    from odradek.protocol import api_keys
    from odradek.protocol.record_batch import iter_batches

    async def run():
        client = NetClient(resolve("admin", None, {"bootstrap_servers": bootstrap}), "test")
        client.start()
        try:
            cluster = await client.wait_for_topic(topic, 10)
            out = {}
            for p in range(partitions):
                leader = cluster.leader_for(TopicPartition(topic, p))
                batches = []
                offset = 0
                while True:
                    resp = await client.call(
                        leader,
                        api_keys.FETCH,
                        {
                            "replica_id": -1,
                            "max_wait": 10,
                            "min_bytes": 1,
                            "max_bytes": 10_000_000,
                            "session_epoch": -1,
                            "topics": [
                                {
                                    "topic": topic,
                                    "partitions": [
                                        {
                                            "partition": p,
                                            "fetch_offset": offset,
                                            "current_leader_epoch": -1,
                                            "last_fetched_epoch": -1,
                                            "log_start_offset": -1,
                                            "partition_max_bytes": 10_000_000,
                                        }
                                    ],
                                }
                            ],
                        },
                    )
                    data = resp.responses[0].partitions[0].records
                    new = list(iter_batches(data)) if data else []
                    new = [b for b in new if b.next_offset > offset]
                    if not new:
                        break
                    batches.extend(new)
                    offset = new[-1].next_offset
                out[p] = batches
            return out
        finally:
            await client.close()

    return asyncio.run(run())


def test_keyed_records_land_where_murmur2_says(bootstrap, make_topic, topic):
    make_topic(topic, 7)
    with Producer(bootstrap_servers=bootstrap) as p:
        futures = {b"user-%d" % i: p.send(topic, b"v", key=b"user-%d" % i) for i in range(200)}
        p.flush()
        for key, f in futures.items():
            assert f.result(10).partition == murmur2_partition(key, 7)


def test_unkeyed_records_stick_to_a_partition_per_batch(bootstrap, make_topic, topic):
    make_topic(topic, 6)
    with Producer(bootstrap_servers=bootstrap, batch_size=1000, linger_ms=50) as p:
        futures = [p.send(topic, b"x" * 90) for _ in range(100)]
        p.flush()
        parts = [f.result(10).partition for f in futures]
    runs = sum(1 for a, b in zip(parts, parts[1:], strict=False) if a != b)
    assert 3 <= runs <= 20  # ~1000 bytes per partition, then a switch
    assert len(set(parts)) > 1


def test_explicit_partition_and_out_of_range(bootstrap, make_topic, topic):
    make_topic(topic, 3)
    with Producer(bootstrap_servers=bootstrap) as p:
        assert p.send(topic, b"v", partition=2).result(10).partition == 2
        with pytest.raises(ValueError, match="out of range"):
            p.send(topic, b"v", partition=3)
        assert p.partitions_for(topic) == {0, 1, 2}


def test_oversize_record_fails_fast(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    with Producer(bootstrap_servers=bootstrap, max_request_size=10_000) as p:
        t = time.monotonic()
        with pytest.raises(RecordTooLargeError, match="max_request_size") as info:
            p.send(topic, b"x" * 20_000)
        assert time.monotonic() - t < 1
        assert info.value.code.name == "message_too_large" and not info.value.retriable
        assert p.send(topic, b"small").result(10).offset == 0


def test_serializers_interceptors_and_serializer_errors(bootstrap, make_topic, topic):
    import json

    make_topic(topic, 1)
    acked = []

    class Stamp:
        def on_send(self, record: ProducerRecord):
            return record._replace(headers=[*(record.headers or []), ("stamped", b"yes")])

        def on_acknowledgement(self, metadata, exc):
            acked.append((metadata, exc))

    with Producer(
        bootstrap_servers=bootstrap,
        value_serializer=lambda v: json.dumps(v).encode(),
        key_serializer=str.encode,
        interceptors=[Stamp()],
    ) as p:
        p.send(topic, {"a": 1}, key="k").result(10)
        with pytest.raises(
            SerializationError, match=f"value_serializer failed for a record to topic '{topic}'"
        ):
            p.send(topic, {"bad": {1, 2}}, key="k")
    assert len(acked) == 1 and acked[0][1] is None and acked[0][0].offset == 0
    (r,) = read_all(bootstrap, topic, 1, 1)
    assert json.loads(r.value) == {"a": 1} and r.key == b"k" and r.headers == (("stamped", b"yes"),)


def test_callbacks_and_concurrent_senders(bootstrap, make_topic, topic):
    make_topic(topic, 4)
    done = []
    with Producer(bootstrap_servers=bootstrap) as p:

        def work(n):
            for i in range(500):
                p.send(topic, b"%d-%d" % (n, i)).add_done_callback(lambda f: done.append(f.result(0)))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
    assert len(done) == 2000
    assert len({(m.partition, m.offset) for m in done}) == 2000


def test_unreachable_bootstrap_times_out_after_max_block(unused_port):
    with Producer(bootstrap_servers=f"127.0.0.1:{unused_port}", max_block_ms=1500) as p:
        t = time.monotonic()
        with pytest.raises(
            KafkaTimeoutError, match="not present in metadata after 1500 ms.*bootstrap"
        ) as info:
            p.send("orders", b"x")
        assert 1.4 < time.monotonic() - t < 5
        assert str(unused_port) in str(info.value)


def test_buffer_full_blocks_then_times_out(topic):
    from blackhole import BlackHoleBroker

    with (
        BlackHoleBroker(topic) as bh,
        Producer(
            bootstrap_servers=bh.bootstrap_servers,
            buffer_memory=3000,
            batch_size=1000,
            max_block_ms=400,
            acks=1,
            enable_idempotence=False,
            request_timeout_ms=60_000,
        ) as p,
    ):
        futures = [p.send(topic, b"x" * 500) for _ in range(3)]  # three batches fill the pool
        t = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            p.send(topic, b"x" * 500)
        assert 0.35 < time.monotonic() - t < 3
        assert not any(f.done() for f in futures)
        p.close(timeout=0)
        assert all(isinstance(f.exception(0), ClientClosedError) for f in futures)


def test_delivery_timeout_fails_records_that_get_no_answer(topic):
    from blackhole import BlackHoleBroker

    with (
        BlackHoleBroker(topic) as bh,
        Producer(
            bootstrap_servers=bh.bootstrap_servers,
            delivery_timeout_ms=1500,
            request_timeout_ms=1000,
            linger_ms=0,
            acks=1,
            enable_idempotence=False,
            retry_backoff_ms=50,
        ) as p,
    ):
        fut = p.send(topic, b"x")
        with pytest.raises(KafkaTimeoutError):
            fut.result(10)
        assert 0 in bh.requests  # the produce request did go out


def test_closed_producer_raises(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    p = Producer(bootstrap_servers=bootstrap)
    fut = p.send(topic, b"last")
    p.close()
    assert fut.result(0).offset == 0  # close flushes
    with pytest.raises(ClientClosedError):
        p.send(topic, b"x")
    with pytest.raises(ClientClosedError):
        p.flush()
    p.close()  # twice is fine


def test_acks_zero_and_one(bootstrap, make_topic, topic):
    make_topic(topic, 1)
    with Producer(bootstrap_servers=bootstrap, acks=0) as p:
        md = p.send(topic, b"a").result(10)
        assert md.offset == -1
    with Producer(bootstrap_servers=bootstrap, acks=1) as p:
        assert p.send(topic, b"b").result(10).offset >= 0
    assert len(read_all(bootstrap, topic, 1, 2)) == 2
