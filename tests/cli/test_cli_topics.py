"""`odradek topics ...` against a real broker; effects checked with confluent-kafka's AdminClient."""

from __future__ import annotations

from confluent_kafka.admin import ConfigResource, ResourceType


def _partitions(ck_admin, topic):
    # All topics: asking for one by name would auto-create it (auto.create.topics.enable).
    md = ck_admin.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return t.partitions


def test_create_is_visible_to_confluent_admin(odradek, ck_admin, topic_name):
    r = odradek(
        "topics",
        "create",
        topic_name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
    )
    assert r.code == 0, r
    assert r.out.strip() == f"Created topic {topic_name}."
    parts = _partitions(ck_admin, topic_name)
    assert sorted(parts) == [0, 1, 2]
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = ck_admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"


def test_create_kafka_style_flags_and_if_not_exists(odradek, ck_admin, topic_name):
    r = odradek(
        "topics",
        "create",
        "--topic",
        topic_name,
        "--partitions",
        "2",
        "--config",
        "cleanup.policy=compact,min.compaction.lag.ms=10",
    )
    assert r.code == 0, r
    again = odradek("topics", "create", topic_name, "--partitions", "2")
    assert again.code == 1, again
    assert f"topic '{topic_name}' already exists" in again.err
    assert "--if-not-exists" in again.err  # the fix is named
    ok = odradek("topics", "create", topic_name, "--if-not-exists")
    assert ok.code == 0, ok
    assert "already exists" in ok.out
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = ck_admin.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.compaction.lag.ms"].value == "10"


def test_create_with_replica_assignment(odradek, ck_admin, topic_name):
    r = odradek("topics", "create", topic_name, "--replica-assignment", "0,0,0,0")
    assert r.code == 0, r
    parts = _partitions(ck_admin, topic_name)
    assert sorted(parts) == [0, 1, 2, 3]
    assert all(list(p.replicas) == [0] for p in parts.values())


def test_create_errors_name_problem_and_fix(odradek, topic_name):
    r = odradek("topics", "create", topic_name, "--replication-factor", "3")
    assert r.code == 1, r
    assert "replication" in r.err.lower() and "--replication-factor 1" in r.err
    bad = odradek("topics", "create", topic_name, "--config", "no.such.config=1")
    assert bad.code == 1, bad
    assert "no.such.config" in bad.err
    usage = odradek("topics", "create", topic_name, "--config", "novalue")
    assert usage.code == 2, usage
    assert "KEY=VALUE" in usage.err
    missing = odradek("topics", "create")
    assert missing.code == 2 and "Missing topic" in missing.err


def test_list_table_and_json(odradek, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    table = odradek("topics", "list")
    assert table.code == 0, table
    header, *rows = table.lines()
    assert header.split() == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL"]
    assert [topic_name, "2", "1"] in [row.split() for row in rows]
    data = odradek("topics", "list", "-o", "json").json()
    assert {"topic": topic_name, "partitions": 2, "replication_factor": 1, "internal": False} in data
    names = odradek("topics", "list", "--names-only", "--exclude-internal").lines()
    assert topic_name in names and not any(n.startswith("__") for n in names)


def test_describe_prints_leader_replicas_isr(odradek, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2", "--config", "retention.ms=123456").code == 0
    r = odradek("topics", "describe", topic_name)
    assert r.code == 0, r
    first, *parts = r.lines()
    assert first.startswith(f"Topic: {topic_name}\tTopicId: ")
    assert "PartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=123456" in first
    assert parts == [
        f"\tTopic: {topic_name}\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        f"\tTopic: {topic_name}\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0",
    ]
    data = odradek("topics", "describe", "--topic", topic_name, "-o", "json").json()
    assert data[0]["topic"] == topic_name and data[0]["configs"] == {"retention.ms": "123456"}
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in data[0]["partitions"]] == [
        (0, 0, [0], [0]),
        (1, 0, [0], [0]),
    ]
    # nothing is under-replicated on a healthy single broker
    under = odradek("topics", "describe", topic_name, "--under-replicated-partitions")
    assert under.code == 0 and under.out == ""
    missing = odradek("topics", "describe", topic_name + "-nope")
    assert missing.code == 1 and "odradek topics list" in missing.err


def test_alter_partitions_and_configs(odradek, ck_admin, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    r = odradek("topics", "alter", topic_name, "--partitions", "5", "--config", "retention.ms=60000")
    assert r.code == 0, r
    assert sorted(_partitions(ck_admin, topic_name)) == [0, 1, 2, 3, 4]
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    assert ck_admin.describe_configs([res])[res].result(10)["retention.ms"].value == "60000"
    shrink = odradek("topics", "alter", topic_name, "--partitions", "3")
    assert shrink.code == 1 and "cannot shrink" in shrink.err
    removed = odradek("topics", "alter", topic_name, "--delete-config", "retention.ms")
    assert removed.code == 0, removed
    assert ck_admin.describe_configs([res])[res].result(10)["retention.ms"].is_default


def test_delete(odradek, ck_admin, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    r = odradek("topics", "delete", topic_name)
    assert r.code == 0, r
    assert r.out.strip() == f"Deleted topic {topic_name}."
    assert _partitions(ck_admin, topic_name) is None
    again = odradek("topics", "delete", topic_name)
    assert again.code == 1 and "--if-exists" in again.err
    assert odradek("topics", "delete", topic_name, "--if-exists").code == 0
