"""confluent-kafka helpers for the pipeline tests: an independent client to produce test
input and to read outputs back record by record."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict | None = None,
    replication_factor: int = 1,
    replicas: list[list[int]] | None = None,
) -> None:
    """Create ``name``; ``replicas`` places each partition's replicas (the first leads)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if replicas:
        topic = NewTopic(name, len(replicas), replica_assignment=replicas, config=config or {})
    else:
        topic = NewTopic(name, partitions, replication_factor, config=config or {})
    admin.create_topics([topic])[name].result(30)


def produce(bootstrap: str, topic: str, records: list[dict], **config) -> list[tuple[int, int]]:
    """Produce dicts of key/value/partition/headers/timestamp; returns (partition, offset) each."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    reports: list = [None] * len(records)

    def done(i):
        def callback(err, msg):
            if err is not None:
                raise RuntimeError(str(err))
            reports[i] = (msg.partition(), msg.offset())

        return callback

    for i, r in enumerate(records):
        kwargs = {k: r[k] for k in ("key", "value", "partition", "headers", "timestamp") if k in r}
        producer.produce(topic, on_delivery=done(i), **kwargs)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert all(r is not None for r in reports)
    return reports


def read_topic(bootstrap: str, topic: str, partitions: int | None = None) -> list[Rec]:
    """Every record of ``topic`` up to its current end, in (partition, offset) order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "pipeline-tests-reader", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = sorted(meta.partitions) if partitions is None else list(range(partitions))
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        wanted = sum(ends.values()) - sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in parts
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        out: list[Rec] = []
        # Gives up after 30 s without a record (a loaded machine can take seconds to the first fetch).
        deadline = time.monotonic() + 30
        while len(out) < wanted and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            deadline = time.monotonic() + 30
            if msg.error():
                raise RuntimeError(str(msg.error()))
            out.append(
                Rec(
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def user_headers(rec: Rec) -> tuple:
    """A record's headers without the exactly-once sink's tag."""
    return tuple(h for h in rec.headers if h[0] != "odradek.sink")


def _epoch_ms(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() * 1000)


def check_page_views(
    bootstrap: str, events: list[dict], minute_topic: str, top_topic: str, top_n: int, closed_before: int
) -> None:
    """The page-views pipeline's outputs, record by record, against its input ``events``:
    one count per (page, minute) for the windows that end before ``closed_before`` (stream time
    passed their end plus the grace period), none twice; the latest top-``top_n`` table by
    all-time views."""
    expected = Counter((e["page"], e["ts"] // 60_000 * 60_000) for e in events if e["ts"] < closed_before)
    got = {}
    for r in read_topic(bootstrap, minute_topic):
        v = json.loads(r.value)
        start, end = _epoch_ms(v["window_start"]), _epoch_ms(v["window_end"])
        assert end - start == 60_000 and r.key == v["page"].encode()
        assert (v["page"], start) not in got, "a window was emitted twice"
        got[(v["page"], start)] = v["views"]
    assert got == dict(expected)
    # Top N by all-time views (ties by page name): the latest value per rank key (a tombstone
    # deletes a rank, as compaction will).
    totals = Counter(e["page"] for e in events)
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
    latest = {}
    for r in read_topic(bootstrap, top_topic):
        latest[r.key] = None if r.value is None else json.loads(r.value)
    latest = {rank: value for rank, value in latest.items() if value is not None}
    assert latest == {
        f"{rank:03d}".encode(): {"rank": rank, "page": page, "views": views}
        for rank, (page, views) in enumerate(top, 1)
    }


def registry_read(spark, broker, topic: str, **options):
    """``spark.read.format("odradek")`` of ``topic`` on a broker with its registry beside it
    (the ``registry_broker`` fixture), with more options."""
    reader = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("schema.registry.url", broker.registry_url)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def registry_write(df, broker, topic: str, **options) -> None:
    """A batch write of ``df`` to ``topic`` with the registry beside the broker."""
    writer = (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("schema.registry.url", broker.registry_url)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()
