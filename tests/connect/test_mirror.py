"""The mirror connectors' tasks between two real Odradek brokers: a topic copied to
``<alias>.<topic>`` record for record (keys, values, headers, timestamps, partitions), its config
and partition count kept in step, a restarted task resuming, and a consumer group's committed
offsets translated to the target through the offset syncs — checkpoint records in Kafka's
format, and the target group's offsets committed so a consumer there reads on where it stopped.

The test plays the worker: it produces the tasks' SourceRecords to the target broker and
acknowledges each with ``commit_record`` (as the worker does once the target acknowledged it).
"""

from __future__ import annotations

import json
import time

import pytest

from odradek.client import Admin, ConfigResource, Consumer, NewTopic, Producer, TopicPartition
from odradek.connect.errors import ConfigException
from odradek.connect.mirror import (
    MirrorCheckpointConnector,
    MirrorCheckpointTask,
    MirrorSourceConnector,
    MirrorSourceTask,
)
from odradek.connect.mirror.mirror_wire import Checkpoint, OffsetSync
from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Two single-broker clusters: (source, target)."""
    procs = [
        BrokerProcess(
            tmp_path_factory.mktemp(name) / "data", overrides={"group.initial.rebalance.delay.ms": "0"}
        )
        for name in ("source", "target")
    ]
    for proc in procs:
        proc.start()
    yield procs
    for proc in procs:
        proc.stop()


class WorkerContext:
    def __init__(self):
        self.committed = {}
        self.offset_storage_reader = self
        self.reconfigurations = 0

    def offset(self, partition):
        return self.committed.get(json.dumps(partition, sort_keys=True))

    def request_task_reconfiguration(self):
        self.reconfigurations += 1


def props(source, target, **extra):
    return {
        "source.cluster.alias": "west",
        "target.cluster.alias": "east",
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset.lag.max": "0",
        "emit.checkpoints.interval.seconds": "0",
        "sync.group.offsets.interval.seconds": "0",
        **extra,
    }


def run_source_task(task, producer, context, want, timeout=30):
    """Poll and deliver ``want`` records to the target as a worker would; records polled beyond
    them are dropped undelivered (the worker dies holding them)."""
    delivered, deadline = [], time.monotonic() + timeout
    while len(delivered) < want and time.monotonic() < deadline:
        for record in (task.poll() or [])[: want - len(delivered)]:
            headers = [(h.key, h.value) for h in record.headers]
            metadata = producer.send_and_wait(
                record.topic,
                value=record.value,
                key=record.key,
                headers=headers,
                partition=record.kafka_partition,
                timestamp_ms=record.timestamp,
                timeout=10,
            )
            task.commit_record(record, metadata)
            context.committed[json.dumps(record.source_partition, sort_keys=True)] = record.source_offset
            delivered.append(record)
    task.commit()
    assert len(delivered) == want
    return delivered


def read_all(bootstrap, topic, partitions, want, timeout=30, group=None):
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    if group:
        config["group.id"] = group
    consumer = Consumer(config)
    try:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got, deadline = [], time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        return got
    finally:
        consumer.close()


def test_mirror_topic_and_translate_group_offsets(clusters, topic_name):
    source, target = clusters
    topic = topic_name
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1, {"retention.ms": "123456789"})])
    producer = Producer({"bootstrap.servers": source.bootstrap_servers})
    for i in range(60):
        producer.send(
            topic, value=f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"%d" % i)], partition=i % 2
        )
    producer.flush()
    # A group on the source reads part of the topic and commits.
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.alter_group_offsets("billing", {TopicPartition(topic, 0): 20, TopicPartition(topic, 1): 7})

    config = props(source, target, topics=topic)
    connector = MirrorSourceConnector()
    context = WorkerContext()
    connector.initialize(context)
    connector.start(config)
    target_producer = Producer({"bootstrap.servers": target.bootstrap_servers})
    remote = f"west.{topic}"
    try:
        (task_config,) = connector.task_configs(1)
        assert sorted(task_config["task.assigned.partitions"].split(",")) == [f"{topic}-0", f"{topic}-1"]
        with Admin({"bootstrap.servers": target.bootstrap_servers}) as admin:
            assert len(admin.describe_topics([remote])[remote].partitions) == 2
            configs = admin.describe_configs([ConfigResource("topic", remote)])
            assert next(iter(configs.values()))["retention.ms"].value == "123456789"

        task = MirrorSourceTask()
        task.initialize(context)
        task.start(task_config)
        run_source_task(task, target_producer, context, 40)
        task.stop()  # the task stops after 40 records; a new one resumes after the committed offsets
        task = MirrorSourceTask()
        task.initialize(context)
        task.start(task_config)
        run_source_task(task, target_producer, context, 20)
        task.stop()

        mirrored = read_all(target.bootstrap_servers, remote, 2, 60)
        assert sorted((r.partition, r.key, r.value, r.headers) for r in mirrored) == sorted(
            (i % 2, f"k{i}".encode(), f"v{i}".encode(), (("h", b"%d" % i),)) for i in range(60)
        )
        syncs = read_all(source.bootstrap_servers, "mm2-offset-syncs.east.internal", 1, 60)
        assert {OffsetSync.decode(r.key, r.value).topic for r in syncs} == {topic}

        # Checkpoints: the group's offsets translated, and committed to the target's group.
        checkpoint_connector = MirrorCheckpointConnector()
        checkpoint_connector.initialize(WorkerContext())
        checkpoint_connector.start({**config, "groups": "billing", "sync.group.offsets.enabled": "true"})
        try:
            (cp_config,) = checkpoint_connector.task_configs(4)
            assert cp_config["task.assigned.groups"] == "billing"
            cp_task = MirrorCheckpointTask()
            cp_task.initialize(WorkerContext())
            cp_task.start(cp_config)
            records = []
            deadline = time.monotonic() + 20
            while not records and time.monotonic() < deadline:
                records = cp_task.poll() or []
            cp_task.stop()
        finally:
            checkpoint_connector.stop()
        checkpoints = sorted((Checkpoint.decode(r.key, r.value) for r in records), key=lambda c: c.partition)
        assert [
            (c.group, c.topic, c.partition, c.upstream_offset, c.downstream_offset) for c in checkpoints
        ] == [
            ("billing", remote, 0, 20, 20),
            ("billing", remote, 1, 7, 7),
        ]
        assert {r.topic for r in records} == {"west.checkpoints.internal"}
        with Admin({"bootstrap.servers": target.bootstrap_servers}) as admin:
            committed = admin.list_group_offsets("billing")
        assert {tp: om.offset for tp, om in committed.items()} == {
            TopicPartition(remote, 0): 20,
            TopicPartition(remote, 1): 7,
        }
        # A consumer of the group failing over to the target reads exactly what it had not read.
        rest = read_all(target.bootstrap_servers, remote, 2, 33, group="billing")
        assert sorted(r.value for r in rest) == sorted(
            f"v{i}".encode() for i in range(60) if i // 2 >= (20 if i % 2 == 0 else 7)
        )
    finally:
        connector.stop()
        producer.close()
        target_producer.close()


def test_new_source_partitions_reach_the_target(clusters, topic_name):
    source, target = clusters
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    context = WorkerContext()
    connector = MirrorSourceConnector()
    connector.initialize(context)
    connector.start(props(source, target, topics=topic_name, **{"refresh.topics.interval.ms": "200"}))
    remote = f"west.{topic_name}"
    try:
        assert [c["task.assigned.partitions"] for c in connector.task_configs(4)] == [f"{topic_name}-0"]
        with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
            admin.create_partitions({topic_name: 3})
        deadline = time.monotonic() + 30
        while context.reconfigurations == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert context.reconfigurations >= 1
        assert sorted(c["task.assigned.partitions"] for c in connector.task_configs(4)) == [
            f"{topic_name}-0",
            f"{topic_name}-1",
            f"{topic_name}-2",
        ]
        with Admin({"bootstrap.servers": target.bootstrap_servers}) as admin:
            assert len(admin.describe_topics([remote])[remote].partitions) == 3
    finally:
        connector.stop()


def test_mirror_config_errors_name_the_key():
    with pytest.raises(ConfigException) as caught:
        MirrorSourceConnector().start({"source.cluster.bootstrap.servers": "127.0.0.1:1"})
    assert caught.value.key == "target.cluster.bootstrap.servers"
    result = MirrorCheckpointConnector().validate(
        {"topics": "orders(", "emit.checkpoints.interval.seconds": "x"}
    )
    errors = {v.name for v in result.config_values if v.errors}
    assert errors == {
        "topics",
        "emit.checkpoints.interval.seconds",
        "source.cluster.bootstrap.servers",
        "target.cluster.bootstrap.servers",
    }
