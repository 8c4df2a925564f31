"""Broker configuration (odradek/broker/config.py and broker_keys.py): server.properties
loading, Kafka's keys, defaults and precedence, errors that name the key."""

from __future__ import annotations

import logging

import pytest

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.config import BrokerConfig
from odradek.broker.listeners import Endpoint
from odradek.config_def import ConfigError, ConfigSource
from odradek.protocol.errors import ErrorCode, InvalidConfigError
from odradek.storage.log_config import TOPIC_CONFIGS


def error_for(props) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    return info.value


# -- loading --------------------------------------------------------------------------------

KAFKA_ZK_SAMPLE = """\
############################# Server Basics #############################
broker.id=0
############################# Socket Server Settings #############################
#listeners=PLAINTEXT://:9092
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""

KAFKA_KRAFT_SAMPLE = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafka_zookeeper_sample_loads(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_ZK_SAMPLE)
    cfg = BrokerConfig.load(path)
    assert cfg.node_id == 0
    assert cfg.cluster_mode
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.get("offsets.topic.replication.factor") == 1
    assert cfg.get("group.initial.rebalance.delay.ms") == 0
    assert cfg.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]


def test_kafka_kraft_sample_loads_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        cfg = BrokerConfig.from_properties(KAFKA_KRAFT_SAMPLE)
    assert "process.roles" in caplog.text and "controller.quorum.bootstrap.servers" in caplog.text
    assert cfg.node_id == 1
    assert not cfg.cluster_mode
    assert cfg.listeners == [Endpoint("PLAINTEXT", "", 9092, "PLAINTEXT")]
    assert cfg.advertised_listeners == [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert cfg.inter_broker_listener_name == "PLAINTEXT"


def test_overrides_beat_the_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/a\n")
    cfg = BrokerConfig.load(path, {"num.partitions": "7"})
    assert cfg.get("num.partitions") == 7
    assert cfg.log_dirs == ["/a"]
    assert cfg.source("num.partitions") == ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source("num.io.threads") == ConfigSource.DEFAULT_CONFIG


def test_malformed_properties_file_is_a_config_error(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("a=1\nb=\\u12x4\n")
    with pytest.raises(ConfigError, match=r"server.properties:2: malformed \\uxxxx"):
        BrokerConfig.load(path)


def test_file_in_utf8_and_latin1(tmp_path):
    p1 = tmp_path / "u.properties"
    p1.write_bytes("broker.rack=zürich\n".encode())
    p2 = tmp_path / "l.properties"
    p2.write_bytes("broker.rack=zürich\n".encode("latin-1"))
    assert BrokerConfig.load(p1).get("broker.rack") == "zürich"
    assert BrokerConfig.load(p2).get("broker.rack") == "zürich"


def test_python_values_are_accepted():
    cfg = BrokerConfig(
        {"log.segment.bytes": 1024, "auto.create.topics.enable": False, "log.dirs": ["/x", "/y"]}
    )
    assert cfg.get("log.segment.bytes") == 1024
    assert cfg.get("auto.create.topics.enable") is False
    assert cfg.log_dirs == ["/x", "/y"]
    assert cfg["num.partitions"] == 1


def test_with_overrides_keeps_the_rest():
    cfg = BrokerConfig({"num.partitions": "3", "broker.rack": "r1"})
    new = cfg.with_overrides({"num.partitions": "5"})
    assert new.get("num.partitions") == 5 and new.get("broker.rack") == "r1"
    assert cfg.get("num.partitions") == 3


def test_defaults():
    cfg = BrokerConfig()
    expect = {
        "num.partitions": 1,
        "default.replication.factor": 1,
        "auto.create.topics.enable": True,
        "delete.topic.enable": True,
        "log.segment.bytes": 1 << 30,
        "log.roll.hours": 168,
        "log.index.interval.bytes": 4096,
        "log.index.size.max.bytes": 10 << 20,
        "log.flush.interval.messages": (1 << 63) - 1,
        "log.flush.interval.ms": None,
        "log.flush.offset.checkpoint.interval.ms": 60000,
        "log.retention.bytes": -1,
        "log.retention.check.interval.ms": 300000,
        "log.cleanup.policy": ["delete"],
        "log.cleaner.enable": True,
        "log.cleaner.threads": 1,
        "log.cleaner.min.cleanable.ratio": 0.5,
        "log.cleaner.delete.retention.ms": 86400000,
        "log.segment.delete.delay.ms": 60000,
        "message.max.bytes": 1048588,
        "socket.request.max.bytes": 104857600,
        "compression.type": "producer",
        "log.message.timestamp.type": "CreateTime",
        "min.insync.replicas": 1,
        "unclean.leader.election.enable": False,
        "connections.max.idle.ms": 600000,
        "max.connections": (1 << 31) - 1,
        "replica.lag.time.max.ms": 30000,
        "offsets.topic.num.partitions": 50,
        "offsets.topic.replication.factor": 3,
        "offsets.retention.minutes": 10080,
        "offsets.retention.check.interval.ms": 600000,
        "offset.metadata.max.bytes": 4096,
        "group.initial.rebalance.delay.ms": 3000,
        "group.min.session.timeout.ms": 6000,
        "group.max.session.timeout.ms": 1800000,
        "group.max.size": (1 << 31) - 1,
        "transaction.state.log.num.partitions": 50,
        "transaction.max.timeout.ms": 900000,
        "zookeeper.connect": None,
    }
    assert {k: cfg.get(k) for k in expect} == expect
    assert cfg.node_id == 0
    assert cfg.log_dirs == ["./odradek-data"]
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.log_roll_ms == 168 * 3_600_000
    assert cfg.log_roll_jitter_ms == 0
    assert cfg.log_flush_interval_ms == (1 << 63) - 1
    assert cfg.offsets_retention_ms == 10080 * 60_000


def test_get_returns_copies_of_lists():
    cfg = BrokerConfig()
    cfg.get("log.cleanup.policy").append("compact")
    assert cfg.get("log.cleanup.policy") == ["delete"]
    with pytest.raises(KeyError):
        cfg.get("no.such.key")


# -- precedence -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "props, expected",
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-7"}, -1),
        ({"log.retention.ms": ""}, 168 * 3_600_000),
    ],
)
def test_retention_precedence(props, expected):
    assert BrokerConfig(props).log_retention_ms == expected


def test_retention_zero_is_refused():
    err = error_for({"log.retention.minutes": "0"})
    assert err.key == "log.retention.minutes"
    assert "log.retention.minutes" in str(err)


def test_roll_and_flush_precedence():
    cfg = BrokerConfig(
        {"log.roll.hours": "2", "log.roll.jitter.hours": "1", "log.flush.scheduler.interval.ms": "500"}
    )
    assert cfg.log_roll_ms == 7_200_000
    assert cfg.log_roll_jitter_ms == 3_600_000
    assert cfg.log_flush_interval_ms == 500
    cfg = cfg.with_overrides(
        {"log.roll.ms": "1000", "log.roll.jitter.ms": "10", "log.flush.interval.ms": "20"}
    )
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms, cfg.log_flush_interval_ms) == (1000, 10, 20)


def test_log_dirs_win_over_log_dir():
    assert BrokerConfig({"log.dir": "/one"}).log_dirs == ["/one"]
    assert BrokerConfig({"log.dir": "/one", "log.dirs": "/a, /b"}).log_dirs == ["/a", "/b"]
    err = error_for({"log.dirs": "/a,/a"})
    assert err.key == "log.dirs"


@pytest.mark.parametrize(
    "props, node_id",
    [
        ({}, 0),
        ({"node.id": "3"}, 3),
        ({"broker.id": "4"}, 4),
        ({"broker.id": "5", "node.id": "5"}, 5),
        ({"zookeeper.connect": "zk:2181"}, -1),
        ({"zookeeper.connect": "zk:2181", "broker.id": "2"}, 2),
    ],
)
def test_node_id(props, node_id):
    assert BrokerConfig(props).node_id == node_id


def test_node_id_conflicts():
    assert error_for({"node.id": "1", "broker.id": "2"}).key == "node.id"
    err = error_for({"zookeeper.connect": "zk:2181", "broker.id": "1001"})
    assert err.key == "broker.id" and "reserved.broker.max.id" in str(err)
    assert BrokerConfig(
        {"zookeeper.connect": "zk", "broker.id": "1001", "broker.id.generation.enable": "false"}
    )
    assert error_for({"node.id": "-2"}).key == "node.id"


def test_internal_topic_replication_factor_is_capped(caplog):
    cfg = BrokerConfig()
    with caplog.at_level(logging.WARNING):
        assert cfg.internal_topic_replication_factor("offsets.topic.replication.factor", 1) == 1
    assert "offsets.topic.replication.factor is 3" in caplog.text
    assert cfg.internal_topic_replication_factor("transaction.state.log.replication.factor", 5) == 3


# -- errors ---------------------------------------------------------------------------------


def test_invalid_integer_message_names_the_key():
    err = error_for({"log.segment.bytes": "abc"})
    assert str(err) == "log.segment.bytes: expected an integer >= 14, got 'abc'"
    assert err.key == "log.segment.bytes"
    assert isinstance(err, InvalidConfigError) and err.code == ErrorCode.invalid_config
    assert (
        str(error_for({"log.segment.bytes": "10"}))
        == "log.segment.bytes: expected an integer >= 14, got '10'"
    )


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("num.partitions", "0", "num.partitions: expected an integer >= 1, got '0'"),
        ("num.partitions", "1_000", "num.partitions: expected an integer >= 1, got '1_000'"),
        ("num.partitions", "3.0", "num.partitions: expected an integer >= 1, got '3.0'"),
        (
            "num.partitions",
            "99999999999",
            "num.partitions: expected an integer between -2147483648 and 2147483647, got '99999999999'",
        ),
        (
            "offsets.topic.replication.factor",
            "40000",
            "offsets.topic.replication.factor: expected an integer between -32768 and 32767, got '40000'",
        ),
        ("auto.create.topics.enable", "yes", "auto.create.topics.enable: expected true or false, got 'yes'"),
        (
            "compression.type",
            "brotli",
            "compression.type: expected one of uncompressed, zstd, lz4, snappy, gzip, producer, got 'brotli'",
        ),
        (
            "log.cleanup.policy",
            "delete,archive",
            "log.cleanup.policy: expected a comma-separated list of compact, delete, got 'delete,archive'",
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            "1.5",
            "log.cleaner.min.cleanable.ratio: expected a number between 0 and 1, got '1.5'",
        ),
        (
            "compression.gzip.level",
            "0",
            "compression.gzip.level: expected an integer between 1 and 9, or -1, got '0'",
        ),
        ("log.segment.bytes", "", "log.segment.bytes: expected an integer >= 14, got ''"),
    ],
)
def test_invalid_values(key, value, expected):
    assert str(error_for({key: value})) == expected


def test_values_are_trimmed_and_case_insensitive_where_kafka_is():
    cfg = BrokerConfig(
        {
            "num.partitions": " 4 ",
            "delete.topic.enable": "FALSE",
            "log.message.timestamp.type": "logappendtime",
        }
    )
    assert cfg.get("num.partitions") == 4
    assert cfg.get("delete.topic.enable") is False
    assert cfg.get("log.message.timestamp.type") == "LogAppendTime"


def test_unknown_key_is_named_with_a_suggestion():
    err = error_for({"log.retention.hour": "5"})
    assert str(err) == "log.retention.hour: unknown broker config; did you mean 'log.retention.hours'?"
    assert err.key == "log.retention.hour"
    assert str(error_for({"frobnicate": "1"})) == "frobnicate: unknown broker config"


def test_keys_that_belong_elsewhere():
    assert "meta.properties" in str(error_for({"cluster.id": "abc"}))
    assert "'log.retention.ms'" in str(error_for({"retention.ms": "1"}))


def test_all_problems_are_reported_at_once():
    err = error_for({"num.partitions": "x", "bogus": "1", "log.segment.bytes": "1"})
    assert [k for k, _ in err.problems] == ["num.partitions", "bogus", "log.segment.bytes"]
    assert str(err).startswith("3 invalid broker settings:")
    assert err.key == "num.partitions"


def test_replication_timing_checks():
    assert error_for({"replica.fetch.wait.max.ms": "40000"}).key == "replica.fetch.wait.max.ms"


def test_prefixed_keys():
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
            "listener.name.internal.ssl.keystore.location": "/ks.jks",
            "listener.name.internal.ssl.keystore.password": "secret",
            "sasl.login.refresh.window.factor": "0.8",
        }
    )
    assert cfg.get("listener.name.internal.ssl.keystore.location") == "/ks.jks"
    assert "secret" not in repr(cfg)


def test_settings_with_no_effect_are_named_in_one_warning_and_documented_so(tmp_path, caplog):
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_ZK_SAMPLE + "log.preallocate=true\nprincipal.builder.class=com.example.Builder\n")
    with caplog.at_level(logging.WARNING, logger="odradek.broker.config"):
        BrokerConfig.load(path)
    lines = [r.getMessage() for r in caplog.records if "no effect in Odradek" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    named = lines[0].rsplit(": ", 1)[1].split(", ")
    assert named == ["log.preallocate", "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir", "principal.builder.class"]
    assert "no effect in Odradek" in BROKER_CONFIGS["log.preallocate"].documentation
    assert "no effect in Odradek" in TOPIC_CONFIGS["preallocate"].documentation
    # Keys that take effect say nothing of the kind.
    assert "no effect" not in BROKER_CONFIGS["connection.failed.authentication.delay.ms"].documentation
