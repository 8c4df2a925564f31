"""`odradek streams reset` as kafka-streams-application-reset.sh: the app's group goes back to the
start of its input topics (intermediate topics to their ends), its internal topics are deleted, its
checkpoints removed; --dry-run changes nothing. Checked with confluent-kafka against a real broker."""

from __future__ import annotations

import json

from click.testing import CliRunner
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import TopicPartition as CkTopicPartition

from odradek.cli.streams_reset import reset
from odradek.client.blocking import Admin, Producer
from odradek.client.structs import NewTopic, TopicPartition


def committed(bootstrap, group, topic, partitions):
    consumer = CkConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def test_reset_rewinds_the_group_deletes_internal_topics_and_checkpoints(broker, topic_name, tmp_path):
    app = f"app-{topic_name}"
    lines, middle = f"{topic_name}-lines", f"{topic_name}-middle"
    internal = [f"{app}-counts-changelog", f"{app}-KSTREAM-AGGREGATE-0000000003-repartition"]
    bootstrap = broker.bootstrap_servers
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics(
            [NewTopic(t, 2, 1) for t in [lines, middle, *internal, f"{topic_name}-other-changelog"]]
        )
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(10):
            producer.send(lines, f"line {i}".encode(), partition=i % 2)
            producer.send(middle, b"x", partition=0)
        producer.flush()
    with Admin(bootstrap_servers=bootstrap) as admin:  # where a stopped app left its group
        admin.alter_group_offsets(app, {TopicPartition(lines, 0): 5, TopicPartition(lines, 1): 4})
    checkpoint = tmp_path / "state" / app
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("{}")
    args = ["--bootstrap-server", bootstrap, "--application-id", app, "--input-topics", lines,
            "--intermediate-topics", middle, "--state-dir", str(tmp_path / "state"), "-o", "json"]  # fmt: skip

    dry = CliRunner().invoke(reset, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)
    assert plan["executed"] is False and plan["deleted_topics"] == sorted(internal)
    assert committed(bootstrap, app, lines, 2) == {0: 5, 1: 4}
    assert checkpoint.exists()

    done = CliRunner().invoke(reset, args)
    assert done.exit_code == 0, done.output
    assert committed(bootstrap, app, lines, 2) == {0: 0, 1: 0}
    assert committed(bootstrap, app, middle, 2) == {0: 10, 1: 0}
    assert not checkpoint.exists()
    with Admin(bootstrap_servers=bootstrap) as admin:
        left = set(admin.list_topics())
    assert not left & set(internal)
    assert f"{topic_name}-other-changelog" in left  # another app's topic stays


def test_reset_refuses_missing_topics_with_a_hint(broker, topic_name, tmp_path):
    result = CliRunner().invoke(
        reset,
        [
            "--bootstrap-server",
            broker.bootstrap_servers,
            "--application-id",
            f"app-{topic_name}",
            "--input-topics",
            f"{topic_name}-absent",
            "--state-dir",
            str(tmp_path),
        ],  # fmt: skip
    )
    assert result.exit_code != 0
    assert f"no such topic: {topic_name}-absent" in result.output
