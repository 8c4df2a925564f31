"""kafka-python 3.x against the broker, with its defaults (idempotence on): keyed produce
across partitions, headers, timestamps, gzip, offsets by time, and its admin client."""

from __future__ import annotations

import time

import pytest
from broker_e2e import CODEC_IDS, java_partition, stored_batch_codecs
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError


@pytest.fixture
def kp_admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def kp_producer(broker, **conf) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000, **conf)


def kp_read(broker, topic: str, partitions, expected: int, timeout: float = 30.0) -> dict[int, list]:
    cons = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        out: dict[int, list] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while sum(len(v) for v in out.values()) < expected and time.monotonic() < deadline:
            for tp, records in cons.poll(timeout_ms=200).items():
                out[tp.partition].extend(records)
        assert sum(len(v) for v in out.values()) == expected
        return out
    finally:
        cons.close()


def create(kp_admin, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    kp_admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])


def test_default_idempotent_producer_keys_headers_no_duplicates(broker, kp_admin, topic_name):
    partitions = 6
    create(kp_admin, topic_name, partitions)
    prod = kp_producer(broker, linger_ms=5)
    assert prod.config["enable_idempotence"] is True
    futures = []
    for i in range(900):
        key = f"key-{i % 97}".encode()
        futures.append(
            prod.send(topic_name, key=key, value=f"v{i}".encode(), headers=[("i", str(i).encode())])
        )
    metas = [f.get(timeout=30) for f in futures]
    prod.close()

    for i, meta in enumerate(metas):
        assert meta.partition == java_partition(f"key-{i % 97}".encode(), partitions)
    got = kp_read(broker, topic_name, range(partitions), 900)
    values = [r.value for rs in got.values() for r in rs]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(900))  # every record, once
    for p, records in got.items():
        assert [r.offset for r in records] == list(range(len(records)))
        order = [int(r.value[1:]) for r in records]
        assert order == sorted(order), f"partition {p} out of production order"
        for r in records:
            assert r.headers == [("i", r.value[1:])]
            assert java_partition(r.key, partitions) == p


def test_gzip_and_timestamps(broker, kp_admin, topic_name):
    create(kp_admin, topic_name, 1)
    prod = kp_producer(broker, compression_type="gzip", linger_ms=20)
    base = 1_620_000_000_000
    for i in range(200):
        prod.send(topic_name, value=(f"gz-{i}-" * 10).encode(), partition=0, timestamp_ms=base + i)
    prod.flush(30)
    prod.close()

    (records,) = kp_read(broker, topic_name, [0], 200).values()
    assert [r.value for r in records] == [(f"gz-{i}-" * 10).encode() for i in range(200)]
    assert [(r.timestamp_type, r.timestamp) for r in records] == [(0, base + i) for i in range(200)]
    assert stored_batch_codecs(broker, topic_name) == {CODEC_IDS["gzip"]}


def test_log_append_time_topic(broker, kp_admin, topic_name):
    create(kp_admin, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    prod = kp_producer(broker)
    before = int(time.time() * 1000)
    meta = prod.send(topic_name, value=b"x", partition=0, timestamp_ms=42).get(timeout=30)
    after = int(time.time() * 1000)
    prod.close()
    assert before - 1000 <= meta.timestamp <= after + 1000
    (records,) = kp_read(broker, topic_name, [0], 1).values()
    assert records[0].timestamp_type == 1
    assert before - 1000 <= records[0].timestamp <= after + 1000


def test_offsets_for_times_and_watermarks(broker, kp_admin, topic_name):
    create(kp_admin, topic_name, 2)
    prod = kp_producer(broker)
    base = 1_630_000_000_000
    for i in range(40):
        prod.send(topic_name, value=str(i).encode(), partition=i % 2, timestamp_ms=base + 10 * i)
    prod.flush(30)
    prod.close()

    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        assert cons.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert cons.end_offsets(tps) == {tps[0]: 20, tps[1]: 20}
        found = cons.offsets_for_times({tps[0]: base + 55, tps[1]: base + 55})
        # Partition 0 holds i = 0, 2, 4, ... (ts base + 20k); partition 1 holds i = 1, 3, ...
        assert (found[tps[0]].offset, found[tps[0]].timestamp) == (3, base + 60)
        assert (found[tps[1]].offset, found[tps[1]].timestamp) == (3, base + 70)
        assert cons.offsets_for_times({tps[0]: base + 10_000})[tps[0]] is None
    finally:
        cons.close()


def test_admin_client_topics_partitions_and_configs(broker, kp_admin, topic_name):
    create(kp_admin, topic_name, 2, {"retention.ms": "86400000"})
    assert topic_name in kp_admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([NewTopic(topic_name, 2, 1)])

    kp_admin.create_partitions({topic_name: NewPartitions(4)})
    (described,) = kp_admin.describe_topics([topic_name])
    assert len(described["partitions"]) == 4

    described = kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    (by_name,) = described.values()
    entries = by_name[topic_name]
    assert entries["retention.ms"]["value"] == "86400000", entries.get("retention.ms")

    kp_admin.delete_topics([topic_name])
    assert topic_name not in kp_admin.list_topics()
