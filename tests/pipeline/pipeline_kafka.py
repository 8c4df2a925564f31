"""confluent-kafka helpers for the pipeline tests: an independent client to produce test
input and to read outputs back record by record."""

from __future__ import annotations

from dataclasses import dataclass

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


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(30)


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
        empty = 0
        while len(out) < wanted and empty < 50:
            msg = consumer.poll(0.2)
            if msg is None:
                empty += 1
                continue
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
