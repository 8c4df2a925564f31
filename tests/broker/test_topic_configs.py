"""Topic configs as the broker applies them (odradek/broker/topic_configs.py): overrides
checked and normalised, defaults taken from broker keys, the table shared with storage's
LogConfig."""

from __future__ import annotations

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.topic_configs import effective_topic_config, validate_topic_configs
from odradek.config_def import ConfigError
from odradek.protocol.errors import ErrorCode
from odradek.storage.log_config import NO_OP_TOPIC_CONFIGS, TOPIC_CONFIGS, LogConfig


def test_topic_config_table_matches_the_log_config():
    assert set(TOPIC_CONFIGS) - NO_OP_TOPIC_CONFIGS == set(LogConfig.keys())


def test_validate_topic_configs_normalises():
    out = validate_topic_configs(
        {
            "cleanup.policy": " compact , delete ",
            "message.timestamp.type": "logappendtime",
            "compression.type": "none",
            "retention.ms": " -1 ",
            "min.cleanable.dirty.ratio": "0.25",
            "preallocate": "TRUE",
            "leader.replication.throttled.replicas": "0:1, 1 : 2",
            "follower.replication.throttled.replicas": "*",
        }
    )
    assert out == {
        "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "uncompressed",
        "retention.ms": "-1",
        "min.cleanable.dirty.ratio": "0.25",
        "preallocate": "true",
        "leader.replication.throttled.replicas": "0:1,1:2",
        "follower.replication.throttled.replicas": "*",
    }


@pytest.mark.parametrize(
    "configs, message",
    [
        ({"segment.bytes": "1"}, "segment.bytes: expected an integer >= 14, got '1'"),
        ({"retention.ms": "-2"}, "retention.ms: expected an integer >= -1, got '-2'"),
        (
            {"cleanup.policy": "forever"},
            "cleanup.policy: expected a comma-separated list of compact, delete, got 'forever'",
        ),
        ({"min.insync.replicas": "0"}, "min.insync.replicas: expected an integer >= 1, got '0'"),
        ({"max.message.bytes": "big"}, "max.message.bytes: expected an integer >= 0, got 'big'"),
        (
            {"min.cleanable.dirty.ratio": "2"},
            "min.cleanable.dirty.ratio: expected a number between 0 and 1, got '2'",
        ),
        (
            {"compression.lz4.level": "18"},
            "compression.lz4.level: expected an integer between 1 and 17, got '18'",
        ),
        (
            {"compression.type": "lzma"},
            "compression.type: expected one of uncompressed, zstd, lz4, snappy, gzip, producer, got 'lzma'",
        ),
        (
            {"message.timestamp.type": "Now"},
            "message.timestamp.type: expected one of CreateTime, LogAppendTime, got 'Now'",
        ),
        (
            {"unclean.leader.election.enable": "1"},
            "unclean.leader.election.enable: expected true or false, got '1'",
        ),
        (
            {"leader.replication.throttled.replicas": "a:b"},
            "leader.replication.throttled.replicas: expected '*' or a comma-separated list of partition:broker pairs, got 'a:b'",
        ),
        ({"retention.hours": "1"}, "retention.hours: unknown topic config; did you mean 'retention.ms'?"),
        ({"log.retention.hours": "1"}, "log.retention.hours: unknown topic config; that is a broker config"),
        ({"segment.ms": None}, "segment.ms: a value is required"),
        (
            {"remote.storage.enable": "true"},
            "remote.storage.enable: tiered storage is not supported by Odradek",
        ),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "min.compaction.lag.ms: min.compaction.lag.ms (10) must not exceed max.compaction.lag.ms (5)",
        ),
    ],
)
def test_validate_topic_configs_errors(configs, message):
    with pytest.raises(ConfigError) as info:
        validate_topic_configs(configs)
    assert str(info.value) == message
    assert info.value.code == ErrorCode.invalid_config
    assert info.value.key == next(iter(configs))


def test_compaction_lag_check_sees_the_broker_default():
    cfg = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"})
    with pytest.raises(ConfigError, match="must not exceed"):
        validate_topic_configs({"min.compaction.lag.ms": "200"}, cfg)
    validate_topic_configs({"min.compaction.lag.ms": "200"})


def test_effective_topic_config_takes_broker_defaults_and_overrides():
    cfg = BrokerConfig(
        {
            "log.retention.hours": "1",
            "log.roll.ms": "60000",
            "log.cleanup.policy": "compact",
            "message.max.bytes": "2000000",
            "log.segment.bytes": "1048576",
            "log.flush.scheduler.interval.ms": "1000",
            "log.message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",
        }
    )
    eff = effective_topic_config({}, cfg)
    assert set(eff) == set(TOPIC_CONFIGS) - NO_OP_TOPIC_CONFIGS
    assert eff["retention.ms"] == "3600000"
    assert eff["segment.ms"] == "60000"
    assert eff["cleanup.policy"] == "compact"
    assert eff["max.message.bytes"] == "2000000"
    assert eff["segment.bytes"] == "1048576"
    assert eff["flush.ms"] == "1000"
    assert eff["message.timestamp.type"] == "LogAppendTime"
    assert eff["min.insync.replicas"] == "2"
    lc = LogConfig.from_dict(eff)
    assert lc.retention_ms == 3_600_000 and lc.compact and lc.max_message_bytes == 2_000_000

    eff = effective_topic_config({"retention.ms": "5000", "cleanup.policy": "delete,compact"}, cfg)
    assert eff["retention.ms"] == "5000" and eff["cleanup.policy"] == "delete,compact"
    assert LogConfig.from_dict(eff).retention_ms == 5000

    assert effective_topic_config({}, BrokerConfig({"log.retention.hours": "-1"}))["retention.ms"] == "-1"
    defaults = LogConfig.from_dict(effective_topic_config({}, BrokerConfig()))
    assert defaults == LogConfig()


def test_effective_topic_config_rejects_bad_overrides():
    with pytest.raises(ConfigError):
        effective_topic_config({"segment.bytes": "x"}, BrokerConfig())
