"""Topic and config administration through confluent_kafka.admin: CreateTopics (validate_only,
per-topic configs, bad names, duplicates, bad configs), DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DescribeCluster."""

from __future__ import annotations

import time

import pytest
from broker_e2e import (
    RawClient,
    admin,
    consume,
    create_topic,
    log_start,
    produce_and_flush,
    producer,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from support import wait_until

CREATE_TOPICS = 19


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)
    return info.value.args[0]


def topic_exists(broker, name: str) -> bool:
    return name in admin(broker).list_topics(timeout=10).topics


def partition_count(broker, name: str) -> int:
    return len(admin(broker).list_topics(name, timeout=10).topics[name].partitions)


def topic_configs(broker, name: str) -> dict[str, ConfigEntry]:
    client = admin(broker)
    futures = client.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    (future,) = futures.values()
    return future.result(timeout=15)


# -- CreateTopics ---------------------------------------------------------------------------


def test_create_topic_with_partitions_and_configs(broker, topic_name):
    create_topic(broker, topic_name, 6, {"retention.ms": "123456", "cleanup.policy": "delete"})
    meta = admin(broker).list_topics(topic_name, timeout=10).topics[topic_name]
    assert meta.error is None
    assert sorted(meta.partitions) == list(range(6))
    for p in meta.partitions.values():
        assert p.leader == 0 and p.replicas == [0] and p.isrs == [0]

    configs = topic_configs(broker, topic_name)
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].is_default


def test_create_topics_validate_only_creates_nothing(broker, topic_name):
    client = admin(broker)
    futures = client.create_topics(
        [NewTopic(topic_name, 3, 1, config={"retention.ms": "1000"})], validate_only=True
    )
    assert futures[topic_name].result(timeout=15) is None
    assert not topic_exists(broker, topic_name)

    bad = client.create_topics(
        [NewTopic(topic_name, 3, 1, config={"retention.ms": "soon"})], validate_only=True
    )
    assert error_of(bad[topic_name]).code() == KafkaError.INVALID_CONFIG
    assert not topic_exists(broker, topic_name)


@pytest.mark.parametrize("name", [".", "..", "has space", "slash/ed", "caf\u00e9", "x" * 250, "star*"])
def test_create_topic_with_invalid_name_fails(broker, name):
    client = admin(broker)
    futures = client.create_topics([NewTopic(name, 1, 1)])
    assert error_of(futures[name]).code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)
    assert name not in admin(broker).list_topics(timeout=10).topics


def test_create_existing_topic_fails_and_keeps_the_original(broker, topic_name):
    create_topic(broker, topic_name, 2)
    client = admin(broker)
    futures = client.create_topics([NewTopic(topic_name, 5, 1)])
    assert error_of(futures[topic_name]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert partition_count(broker, topic_name) == 2


RAW_CREATE_ERRORS = {
    "existing": ErrorCode.topic_already_exists,
    "invalid-name": ErrorCode.invalid_topic_exception,
    "zero-partitions": ErrorCode.invalid_partitions,
    "three-replicas": ErrorCode.invalid_replication_factor,
    "bad-config": ErrorCode.invalid_config,
    "duplicate": ErrorCode.invalid_request,
}


@pytest.mark.parametrize("case", list(RAW_CREATE_ERRORS))
@pytest.mark.parametrize("version", [4, 5, 7])
def test_create_topics_errors_at_each_version(broker, topic_name, version, case):
    """Each CreateTopics failure gets its error code at every version (v5+ answers also carry
    partitions, replication factor and configs, which an error entry must still fill)."""
    if case == "existing":
        create_topic(broker, topic_name, 2)
    topic = {
        "name": topic_name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    topics = [topic]
    if case == "invalid-name":
        topic["name"] = topic_name + "!"
    elif case == "zero-partitions":
        topic["num_partitions"] = 0
    elif case == "three-replicas":
        topic["replication_factor"] = 3
    elif case == "bad-config":
        topic["configs"] = [{"name": "retention.ms", "value": "soon"}]
    elif case == "duplicate":
        topics = [topic, topic]
    with RawClient(broker) as raw:
        response = raw.request(
            CREATE_TOPICS, version, {"topics": topics, "timeout": 10000, "validate_only": False}
        )
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {topic["name"]: RAW_CREATE_ERRORS[case]}  # Kafka answers a duplicate once
    if case == "existing":
        assert partition_count(broker, topic_name) == 2
    else:
        assert not topic_exists(broker, topic["name"])


@pytest.mark.parametrize(
    "config",
    [
        {"no.such.config": "1"},
        {"retention.ms": "forever"},
        {"cleanup.policy": "shred"},
        {"segment.bytes": "1"},
        {"message.timestamp.type": "WallClock"},
        {"compression.type": "brotli"},
        {"min.insync.replicas": "0"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_create_topic_with_bad_config_fails(broker, topic_name, config):
    client = admin(broker)
    futures = client.create_topics([NewTopic(topic_name, 1, 1, config=config)])
    assert error_of(futures[topic_name]).code() == KafkaError.INVALID_CONFIG
    assert not topic_exists(broker, topic_name)


def test_create_topic_with_broker_defaults(broker, topic_name):
    """num_partitions=-1 and replication_factor=-1 ask for the broker's defaults (KIP-464)."""
    client = admin(broker)
    futures = client.create_topics([NewTopic(topic_name)])
    futures[topic_name].result(timeout=15)
    assert partition_count(broker, topic_name) == 1


# -- DeleteTopics ---------------------------------------------------------------------------


def test_delete_topic_removes_it_and_its_data(broker, topic_name):
    create_topic(broker, topic_name, 2)
    produce_and_flush(producer(broker), topic_name, [{"value": b"old", "partition": p} for p in (0, 1)])
    client = admin(broker)
    client.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=15)

    assert not topic_exists(broker, topic_name)
    # Kafka renames a deleted log to <topic>-<p>.<uuid>-delete and removes it later.
    wait_until(
        lambda: not any((broker.data_dir / f"{topic_name}-{p}").exists() for p in (0, 1)),
        message="the deleted topic's partition directories to go",
    )
    # A new topic of the same name starts empty.
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker), topic_name, [{"value": b"new", "partition": 0}])
    got = consume(broker, topic_name, [0])[0]
    assert [(r.offset, r.value) for r in got] == [(0, b"new")]


def test_delete_unknown_topic_fails(broker, topic_name):
    client = admin(broker)
    futures = client.delete_topics([topic_name], operation_timeout=10)
    assert error_of(futures[topic_name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# -- CreatePartitions -----------------------------------------------------------------------


def test_create_partitions_grows_topic_and_new_partitions_work(broker, topic_name):
    create_topic(broker, topic_name, 2)
    client = admin(broker)
    client.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(timeout=15)
    assert partition_count(broker, topic_name) == 5

    prod = producer(broker)
    produce_and_flush(prod, topic_name, [{"value": f"p{p}".encode(), "partition": p} for p in range(5)])
    got = consume(broker, topic_name, range(5))
    assert {p: [r.value for r in rs] for p, rs in got.items()} == {p: [f"p{p}".encode()] for p in range(5)}


def test_create_partitions_validate_only_and_invalid_counts(broker, topic_name):
    create_topic(broker, topic_name, 3)
    client = admin(broker)
    client.create_partitions([NewPartitions(topic_name, 6)], validate_only=True)[topic_name].result(
        timeout=15
    )
    assert partition_count(broker, topic_name) == 3

    for fewer_or_same in (2, 3):
        futures = client.create_partitions([NewPartitions(topic_name, fewer_or_same)])
        assert error_of(futures[topic_name]).code() == KafkaError.INVALID_PARTITIONS
    assert partition_count(broker, topic_name) == 3

    futures = client.create_partitions([NewPartitions(topic_name + "-missing", 4)])
    assert error_of(futures[topic_name + "-missing"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# -- configs --------------------------------------------------------------------------------


def test_describe_broker_configs(broker):
    client = admin(broker)
    (future,) = client.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    configs = future.result(timeout=15)
    assert configs["message.max.bytes"].value == "1048588"
    assert configs["log.segment.bytes"].value == "1073741824"
    assert configs["num.partitions"].value == "1"
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_describe_configs_of_unknown_topic_fails(broker, topic_name):
    client = admin(broker)
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic_name)]).values()
    assert error_of(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_the_whole_topic_config(broker, topic_name):
    create_topic(broker, topic_name, 1, {"retention.ms": "1000", "segment.ms": "600000"})
    client = admin(broker)
    resource = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.ms": "2000"})
    (future,) = client.alter_configs([resource]).values()
    future.result(timeout=15)

    configs = topic_configs(broker, topic_name)
    assert configs["retention.ms"].value == "2000"
    # AlterConfigs is not incremental: what the request leaves out returns to its default.
    assert configs["segment.ms"].value == "604800000"
    assert configs["segment.ms"].is_default


def test_alter_configs_validate_only_and_invalid_value(broker, topic_name):
    create_topic(broker, topic_name, 1, {"retention.ms": "1000"})
    client = admin(broker)
    only = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.ms": "5000"})
    (future,) = client.alter_configs([only], validate_only=True).values()
    future.result(timeout=15)
    assert topic_configs(broker, topic_name)["retention.ms"].value == "1000"

    bad = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"retention.ms": "-5x"})
    (future,) = client.alter_configs([bad]).values()
    assert error_of(future).code() == KafkaError.INVALID_CONFIG
    assert topic_configs(broker, topic_name)["retention.ms"].value == "1000"


def test_incremental_alter_configs_set_delete_append(broker, topic_name):
    create_topic(broker, topic_name, 1, {"retention.ms": "1000", "segment.ms": "600000"})
    client = admin(broker)
    ops = [
        ConfigEntry("retention.ms", "7000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=ops)
    (future,) = client.incremental_alter_configs([resource]).values()
    future.result(timeout=15)

    configs = topic_configs(broker, topic_name)
    assert configs["retention.ms"].value == "7000"
    assert configs["segment.ms"].value == "604800000"
    assert configs["segment.ms"].is_default
    assert configs["cleanup.policy"].value == "delete,compact"

    bad = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = client.incremental_alter_configs([bad]).values()
    assert error_of(future).code() == KafkaError.INVALID_CONFIG
    assert topic_configs(broker, topic_name)["retention.ms"].value == "7000"


def test_altered_max_message_bytes_takes_effect(broker, topic_name):
    create_topic(broker, topic_name, 1)
    prod = producer(broker, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"x" * 5000, "partition": 0}])

    client = admin(broker)
    op = ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)
    (future,) = client.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[op])]
    ).values()
    future.result(timeout=15)

    errors = []
    prod.produce(topic_name, b"y" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    prod.flush(15)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"x" * 5000]


def test_incremental_alter_configs_on_unknown_topic_fails(broker, topic_name):
    client = admin(broker)
    op = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
    (future,) = client.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[op])]
    ).values()
    assert error_of(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# -- cluster --------------------------------------------------------------------------------


def test_describe_cluster_matches_meta_properties(broker):
    props = dict(
        line.split("=", 1)
        for line in (broker.data_dir / "meta.properties").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    client = admin(broker)
    result = client.describe_cluster().result(timeout=15)
    assert result.cluster_id == props["cluster.id"]
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(0, "127.0.0.1", broker.port)]
    assert result.controller.id == 0

    meta = client.list_topics(timeout=10)
    assert meta.cluster_id == props["cluster.id"]
    assert meta.controller_id == 0
    assert meta.orig_broker_id == 0


def test_metadata_auto_creates_topic_with_default_partitions(broker, topic_name):
    meta = producer(broker).list_topics(topic_name, timeout=10)
    wait_until(lambda: topic_exists(broker, topic_name), message="auto-created topic")
    meta = admin(broker).list_topics(topic_name, timeout=10).topics[topic_name]
    assert meta.error is None
    assert list(meta.partitions) == [0]


# -- IncrementalAlterConfigs edge cases clients rely on ------------------------------------------


def test_subtract_may_leave_cleanup_policy_empty(broker, topic_name):
    """Kafka 4 accepts an empty cleanup.policy (neither compaction nor retention deletes)."""
    create_topic(broker, topic_name, 1, {"cleanup.policy": "delete"})
    op = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
    (future,) = admin(broker).incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[op])]
    ).values()
    future.result(timeout=15)
    entry = topic_configs(broker, topic_name)["cleanup.policy"]
    assert (entry.value, entry.source) == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    produce_and_flush(producer(broker, linger_ms=0), topic_name, [{"value": b"kept", "partition": 0}])
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"kept"]


def test_empty_cleanup_policy_keeps_everything(own_broker, topic_name):
    broker = own_broker(**{"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0"})
    old = int(time.time() * 1000) - 3_600_000
    records = [{"value": b"v" * 200, "partition": 0, "timestamp": old} for _ in range(20)]
    prod = producer(broker, linger_ms=0, batch_size=400)
    for name, policy in ((topic_name, "delete"), (topic_name + "-none", "")):
        create_topic(broker, name, 1, {"cleanup.policy": policy, "retention.ms": "1000", "segment.bytes": "1024"})
        produce_and_flush(prod, name, records)
    wait_until(lambda: log_start(broker, topic_name) > 0, timeout=15, message="retention of the delete topic")
    assert log_start(broker, topic_name + "-none") == 0


def test_message_format_version_is_accepted_as_a_no_op(broker, topic_name):
    """Kafka 3.x takes the deprecated topic key and ignores it; clients and tools still send it."""
    create_topic(broker, topic_name, 1, {"message.format.version": "2.8"})
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        resource = KConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"message.format.version": "3.0-IV1"})
        result = client.alter_configs([resource])
    finally:
        client.close()
    assert result == {"topic": {topic_name: "OK"}}
    entry = topic_configs(broker, topic_name)["message.format.version"]
    assert (entry.value, entry.source) == ("3.0-IV1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    produce_and_flush(producer(broker, linger_ms=0), topic_name, [{"value": b"v2 batches", "partition": 0}])
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"v2 batches"]


def test_alter_configs_request_checks_as_kafka(broker, topic_name):
    """A resource named twice, a key named twice, a null value: INVALID_REQUEST, nothing applied."""
    create_topic(broker, topic_name, 1, {"retention.ms": "1000"})

    def one(configs):
        return {"resource_type": 2, "resource_name": topic_name, "configs": configs}

    set_ = {"name": "retention.ms", "config_operation": 0, "value": "2000"}
    cases = [
        [one([set_]), one([set_])],
        [one([set_, set_])],
        [one([{"name": "retention.ms", "config_operation": 0, "value": None}])],
        [{"resource_type": 2, "resource_name": "", "configs": [set_]}],
    ]
    with RawClient(broker) as raw:
        for resources in cases:
            got = raw.request(44, 1, {"resources": resources, "validate_only": False}).responses
            assert {int(r.error_code) for r in got} == {ErrorCode.invalid_request}, got
    assert topic_configs(broker, topic_name)["retention.ms"].value == "1000"
