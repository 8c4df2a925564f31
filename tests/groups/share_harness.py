"""What the share-group tests share: a topic with records and a group reading it from the
start, confluent-kafka ShareConsumers, and the ``odradek`` command."""

from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from support import set_group_configs

OVERRIDES = {  # share groups are on by default (group.coordinator.rebalance.protocols)
    "group.share.heartbeat.interval.ms": 300,
    "group.share.session.timeout.ms": 3000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 2000,
    "group.share.delivery.count.limit": 3,
}


def setup_group(broker, count: int, partitions: int = 1, **group_configs: str) -> tuple[str, str, set[bytes]]:
    """A topic with ``count`` records and a share group reading it from the start (plus
    ``group_configs``, ``_`` for ``.``)."""
    topic = f"q-{uuid.uuid4().hex[:8]}"
    group = f"sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    set_group_configs(admin, group, share_auto_offset_reset="earliest", **group_configs)
    values = {f"r{i}".encode() for i in range(count)}
    produce(broker, topic, sorted(values))
    return topic, group, values


def produce(broker, topic: str, values) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(10) == 0


def share_consumer(broker, group: str, topic: str, **conf) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def polled(c: ShareConsumer, timeout: float = 0.2) -> list:
    return [m for m in c.poll(timeout) or [] if m.error() is None]


def odradek(broker, *args):
    """``odradek ARGS --bootstrap-server ... -o json``, run as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args, "--bootstrap-server", broker.bootstrap_servers, "-o", "json"],
        capture_output=True, text=True, timeout=60,
    )
