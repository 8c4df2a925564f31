"""DescribeConfigs entries (odradek/broker/config_entries.py): values, sources, read-only
flags, types, documentation and synonyms in Kafka's order, for topics and brokers."""

from __future__ import annotations

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.config import BrokerConfig
from odradek.broker.config_entries import broker_config_entries, topic_config_entries
from odradek.config_def import ConfigSource, ConfigType
from odradek.storage.log_config import TOPIC_CONFIGS


def test_config_source_and_type_numbering():
    assert [
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
    ] == [1, 2, 3, 4, 5, 6]
    assert [ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.PASSWORD] == [
        1,
        2,
        3,
        5,
        9,
    ]


def test_topic_config_entries():
    cfg = BrokerConfig({"log.retention.minutes": "30", "log.cleanup.policy": "compact"})
    entries = {e.name: e for e in topic_config_entries({"segment.bytes": "1048576"}, cfg)}
    assert list(entries) == sorted(TOPIC_CONFIGS)

    seg = entries["segment.bytes"]
    assert (seg.value, seg.source, seg.type, seg.read_only, seg.is_sensitive) == (
        "1048576",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigType.INT,
        False,
        False,
    )
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("segment.bytes", "1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]

    ret = entries["retention.ms"]
    assert (ret.value, ret.source, ret.type) == (
        "1800000",
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigType.LONG,
    )
    assert [(s.name, s.value, s.source) for s in ret.synonyms] == [
        ("log.retention.minutes", "30", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]

    cleanup = entries["cleanup.policy"]
    assert (cleanup.value, cleanup.source, cleanup.type) == (
        "compact",
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigType.LIST,
    )

    ratio = entries["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.source, ratio.type) == ("0.5", ConfigSource.DEFAULT_CONFIG, ConfigType.DOUBLE)

    remote = entries["remote.storage.enable"]
    assert (remote.value, remote.source, remote.synonyms) == ("false", ConfigSource.DEFAULT_CONFIG, [])
    assert all(e.documentation for e in entries.values())


def test_topic_config_entries_without_a_broker_config_use_kafka_defaults():
    entries = {e.name: e for e in topic_config_entries({}, None)}
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["max.message.bytes"].value == "1048588"


def test_broker_config_entries():
    cfg = BrokerConfig(
        {
            "ssl.keystore.password": "hunter2",
            "log.retention.hours": "24",
            "listener.name.plaintext.sasl.jaas.config": "x required;",
            "listener.name.plaintext.foo": "bar",
        }
    )
    entries = {e.name: e for e in broker_config_entries(cfg)}
    assert set(BROKER_CONFIGS) <= set(entries)

    pw = entries["ssl.keystore.password"]
    assert (pw.value, pw.is_sensitive, pw.type, pw.source) == (
        None,
        True,
        ConfigType.PASSWORD,
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [(s.name, s.value) for s in pw.synonyms] == [("ssl.keystore.password", None)]

    hours = entries["log.retention.hours"]
    assert (hours.value, hours.source, hours.read_only) == ("24", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert [(s.name, s.value, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG)
    ]
    ms = entries["log.retention.ms"]
    assert (ms.value, ms.source) == (None, ConfigSource.DEFAULT_CONFIG)

    parts = entries["num.partitions"]
    assert (parts.value, parts.source, parts.type) == ("1", ConfigSource.DEFAULT_CONFIG, ConfigType.INT)
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092"
    assert "Accepted for compatibility" in entries["num.io.threads"].documentation

    jaas = entries["listener.name.plaintext.sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert entries["listener.name.plaintext.foo"].value == "bar"
    assert "hunter2" not in repr(entries)
