"""A share group across partition-leadership moves in a cluster (KIP-932): the share consumer
goes on from the state persisted in ``__share_group_state`` on each new leader, and a broker
that lost the leadership forgets its in-memory share partition, so when the leadership comes
back it serves the persisted state, not what it remembered."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.share.share_partition import ACKNOWLEDGED
from odradek.broker.share.share_state_topic import (
    STATE_TOPIC,
    decode_key,
    decode_snapshot,
    share_partition_of,
)
from tests.cluster.control_support import cluster_on
from tests.support import wait_until

OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 300,
    "group.share.session.timeout.ms": 6000,
    "share.coordinator.state.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 2,
    "share.coordinator.state.topic.min.isr": 1,
}


def odradek(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "odradek", *map(str, args)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def move_leadership(cluster, tmp_path, to: int, other: int, *topics: str) -> None:
    """Make ``to`` the preferred replica of partition 0 of ``topics`` and elect it
    (``odradek reassign`` + ``odradek leader-election``)."""
    plan = {"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [to, other]} for t in topics]}
    path = tmp_path / f"plan-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(plan))
    odradek("reassign", "execute", path, "-b", cluster.bootstrap_servers)
    odradek("leader-election", "--election-type", "preferred", "--all-topic-partitions", "-b", cluster.bootstrap_servers)
    cluster.wait_for(
        lambda md: all(md.topics[t][0].leader == to and len(md.topics[t][0].isr) == 2 for t in topics),
        60, f"broker {to} leading {topics}",
    )


def acknowledged_upto(cluster, group: str) -> int:
    """How many first records of the group's share partition the replicated snapshot (read
    below the high watermark, so on both brokers) shows acknowledged (or before its start)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(STATE_TOPIC, 0, 0)])
    latest = None
    try:
        _, high = c.get_watermark_offsets(TopicPartition(STATE_TOPIC, 0), timeout=10)
        while True:
            m = c.poll(1.0)
            if m is None or m.error():
                break
            key = decode_key(m.key()) if m.key() else None
            if key is not None and key[0] == group and m.value() is not None:
                latest = decode_snapshot(m.value())
            if m.offset() >= high - 1:
                break
    finally:
        c.close()
    if latest is None:
        return 0
    records = share_partition_of(latest).records
    done = latest.start_offset
    while records.get(done) is not None and records[done].state == ACKNOWLEDGED:
        done += 1
    return done


def test_a_share_consumer_goes_on_from_persisted_state_when_the_leadership_moves_and_comes_back(zookeeper, tmp_path):
    with cluster_on(zookeeper, 2, overrides=OVERRIDES) as cluster:
        boot = cluster.bootstrap_servers
        # __share_group_state appears once a share partition needs it
        cluster.create_topic("warm", partitions=1, replication_factor=2)
        warm = ShareConsumer({"bootstrap.servers": boot, "group.id": "warm"})
        warm.subscribe(["warm"])

        def state_topic_led() -> bool:
            warm.poll(0.2)
            topics = cluster.metadata().topics
            return STATE_TOPIC in topics and topics[STATE_TOPIC][0].leader > 0

        wait_until(state_topic_led, 60, "the share-group state topic")
        warm.close()
        first = cluster.leader(STATE_TOPIC, 0)
        second = next(b for b in cluster.brokers if b != first)
        # the share partition's leader also leads its state partition: it saves the state there
        topic, group = f"q-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[first, second]])])[topic].result(15)
        cluster.wait_for(lambda md: topic in md.topics and len(md.topics[topic][0].isr) == 2, 30, "the topic")

        consumer = ShareConsumer({"bootstrap.servers": boot, "group.id": group})
        consumer.subscribe([topic])
        producer = Producer({"bootstrap.servers": boot, "acks": "all"})
        received: list[bytes] = []
        produced: list[bytes] = []

        def produce(prefix: str, count: int) -> set[bytes]:
            values = [f"{prefix}{i}".encode() for i in range(count)]
            for v in values:
                producer.produce(topic, value=v)
            assert producer.flush(15) == 0
            produced.extend(values)
            return set(values)

        def poll() -> None:
            received.extend(m.value() for m in consumer.poll(0.2) or [] if m.error() is None)

        # the group starts at the end of the log (share.auto.offset.reset=latest): probe until it reads
        def probe() -> None:
            produce(f"probe{len(produced)}-", 1)
            poll()

        wait_until(lambda: received, 30, "the share consumer reading", step=probe)
        start = produced.index(received[0])  # records from here on are the group's

        def read(values: set[bytes]) -> None:
            wait_until(lambda: values <= set(received), 30, f"{len(values)} records", step=poll)
            wait_until(lambda: acknowledged_upto(cluster, group) >= len(produced), 30,
                       "their acknowledgements replicated", step=poll)

        read(produce("a", 10))
        move_leadership(cluster, tmp_path, second, first, topic, STATE_TOPIC)
        read(produce("b", 10))
        move_leadership(cluster, tmp_path, first, second, topic, STATE_TOPIC)
        read(produce("c", 10))
        for _ in range(5):
            poll()
        consumer.close()
        assert sorted(received) == sorted(produced[start:])  # every record once, none redelivered
