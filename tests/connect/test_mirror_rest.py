"""MirrorMaker 2's connectors on a standalone worker process, created through the REST API with
Kafka's class names and keys: a topic copied from one Odradek broker to another, and a group's
committed offsets translated and committed on the target, so a consumer there resumes where it
stopped on the source."""

from __future__ import annotations

import pytest
from connect_support import WorkerProcess, quickstart_worker
from support import wait_until

from odradek import Admin, Consumer, Producer, TopicPartition
from odradek.client import NewTopic
from odradek.connect.mirror.mirror_wire import Checkpoint
from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def target_broker(tmp_path_factory):
    proc = BrokerProcess(
        tmp_path_factory.mktemp("target") / "data", overrides={"group.initial.rebalance.delay.ms": "0"}
    )
    proc.start()
    yield proc
    proc.stop()


def mirror_config(source, target, connector_class, **extra):
    return {
        "connector.class": f"org.apache.kafka.connect.mirror.{connector_class}",
        "tasks.max": "1",
        "source.cluster.alias": "west",
        "target.cluster.alias": "east",
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        **extra,
    }


def state_of(worker, name):
    status = worker.get(f"/connectors/{name}/status").json()
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def read(bootstrap, topics, want, group=None, timeout=60):
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    with Consumer({**config, "group.id": group} if group else config) as consumer:
        if group:
            consumer.subscribe(topics)
        else:
            consumer.assign(topics)
        got: list = []
        wait_until(
            lambda: len(got) >= want, timeout, f"{want} records", step=lambda: got.extend(consumer.poll(0.5))
        )
        return got


def test_mirror_through_the_rest_api(broker, target_broker, tmp_path, topic_name):
    source, target = broker, target_broker
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    with Producer({"bootstrap.servers": source.bootstrap_servers}) as producer:
        for i in range(50):
            producer.send(topic_name, value=b"v%d" % i, key=b"k%d" % i, partition=i % 2)
        producer.flush()
    group = f"{topic_name}-readers"
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.alter_group_offsets(
            group, {TopicPartition(topic_name, 0): 10, TopicPartition(topic_name, 1): 25}
        )

    worker = WorkerProcess(tmp_path, quickstart_worker(target.bootstrap_servers, tmp_path)).start()
    remote = f"west.{topic_name}"
    try:
        mirror = mirror_config(
            source, target, "MirrorSourceConnector", topics=topic_name, **{"offset.lag.max": "0"}
        )
        created = worker.request("POST", "/connectors", json={"name": "west-to-east", "config": mirror})
        assert created.status_code == 201, created.text
        wait_until(
            lambda: state_of(worker, "west-to-east") == ("RUNNING", ["RUNNING"]), 60, "the mirror to run"
        )
        copied = read(target.bootstrap_servers, [TopicPartition(remote, 0), TopicPartition(remote, 1)], 50)
        assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
            (i % 2, b"k%d" % i, b"v%d" % i) for i in range(50)
        )

        checkpoints = mirror_config(
            source,
            target,
            "MirrorCheckpointConnector",
            groups=group,
            **{
                "emit.checkpoints.interval.seconds": "1",
                "sync.group.offsets.enabled": "true",
                "sync.group.offsets.interval.seconds": "1",
            },
        )
        created = worker.request(
            "POST", "/connectors", json={"name": "west-checkpoints", "config": checkpoints}
        )
        assert created.status_code == 201, created.text
        records = read(target.bootstrap_servers, [TopicPartition("west.checkpoints.internal", 0)], 2)
        found = {(c.group, c.topic, c.partition): (c.upstream_offset, c.downstream_offset)
                 for c in (Checkpoint.decode(r.key, r.value) for r in records)}  # fmt: skip
        assert found == {(group, remote, 0): (10, 10), (group, remote, 1): (25, 25)}

        with Admin({"bootstrap.servers": target.bootstrap_servers}) as admin:
            wait_until(
                lambda: (
                    {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
                    == {TopicPartition(remote, 0): 10, TopicPartition(remote, 1): 25}
                ),
                60,
                "the group's offsets on the target",
            )
        # The group fails over to the target: it reads exactly what it had not read on the source.
        worker.request("DELETE", "/connectors/west-checkpoints")
        rest = read(target.bootstrap_servers, [remote], 15, group=group)
        assert sorted(r.value for r in rest) == sorted(
            b"v%d" % i for i in range(50) if i // 2 >= (10 if i % 2 == 0 else 25)
        )
    finally:
        worker.kill()
