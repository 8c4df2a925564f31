"""Byte-for-byte interoperability with confluent-kafka (librdkafka) and kafka-python."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from odradek import Consumer, Producer, TopicPartition


def confluent_read(bootstrap, topic, partitions, expected, timeout=20.0):
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "interop-reader",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_what_we_produce(bootstrap, make_topic, topic, codec):
    make_topic(topic, 3)
    sent = {}
    with Producer(bootstrap_servers=bootstrap, compression_type=codec) as p:
        for i in range(300):
            key = b"k%d" % i
            md = p.send(
                topic,
                b"v%d" % i * 20,
                key=key,
                headers=[("i", b"%d" % i)],
                timestamp_ms=1_700_000_000_000 + i,
            )
            sent[key] = md
        p.flush()
    got = confluent_read(bootstrap, topic, 3, 300)
    assert len(got) == 300
    for m in got:
        i = int(m.key()[1:])
        md = sent[m.key()].result(0)
        assert m.value() == b"v%d" % i * 20
        assert m.headers() == [("i", b"%d" % i)]
        assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + i)
        assert (m.partition(), m.offset()) == (md.partition, md.offset)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_we_read_what_confluent_produces(bootstrap, make_topic, topic, codec):
    make_topic(topic, 3)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    for i in range(300):
        p.produce(
            topic,
            value=b"v%d" % i * 20,
            key=b"k%d" % i,
            headers=[("i", b"%d" % i)],
            timestamp=1_700_000_000_000 + i,
        )
    assert p.flush(20) == 0
    got = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        deadline = time.monotonic() + 20
        while len(got) < 300 and time.monotonic() < deadline:
            got.extend(c.poll(0.5))
    assert len(got) == 300
    for r in got:
        i = int(r.key[1:])
        assert (
            r.value == b"v%d" % i * 20
            and r.headers == (("i", b"%d" % i),)
            and r.timestamp == 1_700_000_000_000 + i
        )


def test_keyed_partitioning_matches_confluent_murmur2_random(bootstrap, make_topic, topic):
    partitions = 12
    make_topic(topic, partitions)
    keys = (
        [b"", b"a", b"ab", b"abc", b"abcd", b"key-%d" % 7]
        + [b"user-%d" % i for i in range(300)]
        + [bytes(range(256))]
    )
    cp = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    theirs = {}

    def on_delivery(err, msg):
        assert err is None
        theirs[msg.key()] = msg.partition()

    for k in keys:
        cp.produce(topic, value=b"c", key=k, on_delivery=on_delivery)
    assert cp.flush(20) == 0
    with Producer(bootstrap_servers=bootstrap) as p:
        ours = {k: p.send(topic, b"o", key=k) for k in keys}
        p.flush()
        ours = {k: f.result(0).partition for k, f in ours.items()}
    assert ours == theirs


def test_kafka_python_reads_what_we_produce(bootstrap, make_topic, topic):
    import kafka

    make_topic(topic, 1)
    with Producer(bootstrap_servers=bootstrap, compression_type="gzip") as p:
        for i in range(50):
            p.send(topic, b"v%d" % i, key=b"k%d" % i)
        p.flush()
    c = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    try:
        c.assign([kafka.TopicPartition(topic, 0)])
        c.seek_to_beginning()
        values = []
        for m in c:
            values.append(m.value)
            if len(values) == 50:
                break
    finally:
        c.close()
    assert values == [b"v%d" % i for i in range(50)]
