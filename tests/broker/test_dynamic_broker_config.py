"""Dynamic broker configs (KIP-226) through confluent-kafka's and kafka-python's admin clients:
per broker and cluster-wide, in force at once, described with the right source and
read-only flag, refused for static keys as Kafka refuses them, and kept across restarts.

Each test runs a broker of its own: a dynamic change reaches every topic of a broker.
"""

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
    wait_until,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

BROKER = ResourceType.BROKER


def alter(broker, name: str, **ops) -> None:
    """IncrementalAlterConfigs on broker ``name`` ("" for the cluster default): value None deletes."""
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v,
            incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET,
        )
        for k, v in ops.items()
    ]
    if name != "0":  # librdkafka names live brokers only: send what Kafka's admin would
        _raw_alter(broker, name, entries)
        return
    resource = ConfigResource(BROKER, name, incremental_configs=entries)
    (future,) = admin(broker).incremental_alter_configs([resource]).values()
    future.result(timeout=15)


def _raw_alter(broker, name: str, entries) -> None:
    body = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": name,
                "configs": [
                    {"name": e.name, "config_operation": e.incremental_operation.value, "value": e.value}
                    for e in entries
                ],
            }
        ],
        "validate_only": False,
    }
    with RawClient(broker) as raw:
        (result,) = raw.request(44, 1, body).responses
    if result.error_code:
        raise KafkaException(KafkaError(int(result.error_code), result.error_message))


def alter_error(broker, name: str, key: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        alter(broker, name, **{key.replace(".", "_"): value})
    return info.value.args[0]


def describe(broker, rtype, name: str) -> dict:
    """{name: ConfigEntry}, or for the cluster default ("") {name: (value, source)}."""
    if name == "":
        body = {
            "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": False,
        }
        with RawClient(broker) as raw:
            (result,) = raw.request(32, 4, body).results
        assert result.error_code == 0, result
        return {c.name: (c.value, int(c.config_source)) for c in result.configs}
    (future,) = admin(broker).describe_configs([ConfigResource(rtype, name)]).values()
    return future.result(timeout=15)


def raw_synonyms(broker, name: str, key: str) -> list:
    """The synonyms DescribeConfigs v4 lists for ``key`` of broker ``name``, in order."""
    body = {
        "resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": [key]}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    with RawClient(broker) as raw:
        (result,) = raw.request(32, 4, body).results
    (entry,) = result.configs
    return list(entry.synonyms)


def test_message_max_bytes_changes_what_a_produce_may_send_at_once(own_broker, topic_name):
    broker = own_broker()
    create_topic(broker, topic_name)
    create_topic(broker, topic_name + "-own", config={"max.message.bytes": "100000"})
    prod = producer(broker, linger_ms=0)
    big = {"value": b"x" * 5000, "partition": 0}
    produce_and_flush(prod, topic_name, [big])

    alter(broker, "0", message_max_bytes="2000")
    reports = []
    prod.produce(topic_name, b"y" * 5000, partition=0, on_delivery=lambda err, msg: reports.append(err))
    prod.flush(15)
    assert [e.code() for e in reports] == [KafkaError.MSG_SIZE_TOO_LARGE]
    produce_and_flush(prod, topic_name + "-own", [big])  # a topic override still wins

    configs = describe(broker, ResourceType.TOPIC, topic_name)
    assert configs["max.message.bytes"].value == "2000"
    assert configs["max.message.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    alter(broker, "0", message_max_bytes=None)  # DELETE: back to server.properties / default
    produce_and_flush(prod, topic_name, [big])
    assert len(consume(broker, topic_name, [0])[0]) == 2


def test_sources_read_only_and_precedence_of_the_levels(own_broker):
    broker = own_broker(**{"log.retention.ms": "86400000"})
    alter(broker, "", log_retention_ms="3600000", log_cleaner_backoff_ms="20000")
    alter(broker, "0", log_cleaner_backoff_ms="30000")

    configs = describe(broker, BROKER, "0")
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert [(s.name, s.value, s.source) for s in raw_synonyms(broker, "0", "log.retention.ms")] == [
        ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.retention.ms", "86400000", ConfigSource.STATIC_BROKER_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    backoff = configs["log.cleaner.backoff.ms"]
    assert (backoff.value, backoff.source) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not backoff.is_read_only and not retention.is_read_only
    assert (
        configs["log.dirs"].is_read_only
        and configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    )
    assert (
        configs["num.partitions"].is_read_only
        and configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    )

    defaults = describe(broker, BROKER, "")  # the cluster-wide level lists only what is set there
    assert defaults == {
        "log.retention.ms": ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        "log.cleaner.backoff.ms": ("20000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
    }


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_static_keys_and_bad_values_are_refused_as_kafka_refuses_them(own_broker):
    broker = own_broker()
    err = alter_error(broker, "0", "log.dirs", "/elsewhere")
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.dirs" in err.str()
    assert alter_error(broker, "", "num.io.threads", "17").code() == KafkaError.INVALID_REQUEST  # > 2 x 8
    assert alter_error(broker, "0", "log.retention.ms", "soon").code() == KafkaError.INVALID_REQUEST
    wrong = alter_error(broker, "7", "log.retention.ms", "1000")
    assert wrong.code() == KafkaError.INVALID_REQUEST and "expected 0" in wrong.str()
    assert describe(broker, BROKER, "") == {}  # nothing was stored

    # Legacy AlterConfigs replaces the level's whole set.
    alter(broker, "0", log_cleaner_backoff_ms="30000", background_threads="12")
    resource = ConfigResource(BROKER, "0", set_config={"background.threads": "15"})
    (future,) = admin(broker).alter_configs([resource]).values()
    future.result(timeout=15)
    configs = describe(broker, BROKER, "0")
    assert configs["background.threads"].value == "15"
    assert configs["log.cleaner.backoff.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_dynamic_configs_survive_a_restart(own_broker):
    broker = own_broker()
    alter(broker, "", log_retention_ms="7200000")
    alter(broker, "0", message_max_bytes="3000")
    broker.restart()
    configs = describe(broker, BROKER, "0")
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == (
        "3000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert "odradek broker 0 started" in broker.log_text()


def test_cluster_default_retention_applies_to_topics_without_an_override(own_broker, topic_name):
    broker = own_broker(**{"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0"})
    kept = topic_name + "-kept"
    create_topic(broker, topic_name, config={"segment.bytes": "1024"})
    create_topic(broker, kept, config={"segment.bytes": "1024", "retention.ms": "-1"})
    old = int(time.time() * 1000) - 3_600_000  # an hour ago
    records = [{"value": b"v" * 200, "partition": 0, "timestamp": old} for _ in range(30)]
    prod = producer(broker, linger_ms=0, batch_size=400)  # a batch per record: many segments
    for topic in (topic_name, kept):
        produce_and_flush(prod, topic, records)
    assert log_start(broker, topic_name) == 0

    alter(broker, "", log_retention_ms="60000")
    wait_until(
        lambda: log_start(broker, topic_name) > 0, timeout=15, message="retention to delete old segments"
    )
    assert log_start(broker, kept) == 0


def test_log_cleaner_restarts_with_its_new_settings(own_broker, topic_name):
    """The cleaner starts idle for an hour between passes; lowering log.cleaner.backoff.ms
    restarts it, and the compacted topic gets compacted."""
    broker = own_broker(**{"log.cleaner.backoff.ms": "3600000"})
    create_topic(
        broker,
        topic_name,
        config={"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"},
    )
    prod = producer(broker, linger_ms=0, batch_size=1000)
    items = [
        {"key": b"k%d" % (i % 5), "value": b"v%03d" % i + b"." * 100, "partition": 0} for i in range(200)
    ]
    produce_and_flush(prod, topic_name, items)
    assert len(consume(broker, topic_name, [0])[0]) == 200  # the cleaner's pass at start found nothing

    alter(broker, "0", log_cleaner_backoff_ms="100", log_cleaner_threads="2")

    def compacted():
        got = consume(broker, topic_name, [0])[0]
        return len(got) < 50 and got

    got = wait_until(compacted, timeout=20, message="the restarted cleaner to compact the topic")
    latest = {r.key: r.value for r in got}
    assert latest == {b"k%d" % k: b"v%03d" % (195 + k) + b"." * 100 for k in range(5)}
    assert "log cleaner restarted" in broker.log_text()


def test_kafka_python_sees_and_alters_broker_configs(own_broker):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    broker = own_broker()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        client.alter_configs(
            [KConfigResource(ConfigResourceType.BROKER, "0", configs={"log.cleaner.backoff.ms": "25000"})]
        )
        result = client.describe_configs([KConfigResource(ConfigResourceType.BROKER, "0")])
    finally:
        client.close()
    text = repr(result)
    assert "log.cleaner.backoff.ms" in text and "25000" in text
    assert describe(broker, BROKER, "0")["log.cleaner.backoff.ms"].value == "25000"


def test_max_connections_changes_at_once(own_broker):
    broker = own_broker()
    with RawClient(broker) as first:

        def set_limit(value):
            op = {"name": "max.connections", "config_operation": 0, "value": value}
            body = {
                "resources": [{"resource_type": 4, "resource_name": "0", "configs": [op]}],
                "validate_only": False,
            }
            (result,) = first.request(44, 1, body).responses
            assert result.error_code == 0, result

        set_limit("1")
        with RawClient(broker) as second:
            assert second.closed_by_broker(timeout=5)  # over the new limit: refused
        set_limit("100")
        with RawClient(broker) as third:
            assert (
                third.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code
                == 0
            )
    assert "max.connections (1) reached" in broker.log_text()


def test_aiokafka_alters_and_describes_a_broker_config(own_broker):
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType

    broker = own_broker()

    async def run():
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await client.start()
        try:
            altered = await client.alter_configs(
                [AConfigResource(ConfigResourceType.BROKER, "0", {"log.cleaner.backoff.ms": "20000"})]
            )
            (described,) = await client.describe_configs([AConfigResource(ConfigResourceType.BROKER, "0")])
        finally:
            await client.close()
        return altered, described

    altered, described = asyncio.run(run())
    codes = [r[0] for response in altered for r in response.resources]
    assert codes == [0]
    (result,) = described.resources
    entries = {c[0]: c for c in result[4]}  # (name, value, read_only, source or is_default, ...)
    name, value, read_only, *_ = entries["log.cleaner.backoff.ms"]
    assert (value, read_only) == ("20000", False)
    assert entries["log.dirs"][2] is True


def test_advertised_listeners_is_a_per_broker_dynamic_key(own_broker):
    """As Kafka (DynamicListenerConfig, per broker): described read-write and not sensitive, with
    its source and synonyms; set per broker, refused at the cluster default; clients are given
    the new address at once, and after a restart."""
    broker = own_broker()
    entry = describe(broker, BROKER, "0")["advertised.listeners"]
    assert (entry.value, entry.source, entry.is_read_only, entry.is_sensitive) == (
        None,  # unset: clients get the listeners
        ConfigSource.DEFAULT_CONFIG.value,
        False,
        False,
    )
    assert raw_synonyms(broker, "0", "advertised.listeners") == []
    assert admin(broker).list_topics(timeout=10).brokers[0].host == "127.0.0.1"

    address = f"PLAINTEXT://localhost:{broker.port}"
    err = alter_error(broker, "", "advertised.listeners", address)
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "broker id must be specified: advertised.listeners" in err.str()
    bad = alter_error(broker, "0", "advertised.listeners", f"ELSEWHERE://localhost:{broker.port}")
    assert bad.code() == KafkaError.INVALID_REQUEST and "listener ELSEWHERE" in bad.str()

    alter(broker, "0", advertised_listeners=address)
    entry = describe(broker, BROKER, "0")["advertised.listeners"]
    assert (entry.value, entry.source, entry.is_read_only, entry.is_sensitive) == (
        address,
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
        False,
    )
    assert [(s.name, s.value, s.source) for s in raw_synonyms(broker, "0", "advertised.listeners")] == [
        ("advertised.listeners", address, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    ]
    assert admin(broker).list_topics(timeout=10).brokers[0].host == "localhost"

    broker.restart()
    assert admin(broker).list_topics(timeout=10).brokers[0].host == "localhost"
    alter(broker, "0", advertised_listeners=None)
    assert admin(broker).list_topics(timeout=10).brokers[0].host == "127.0.0.1"
