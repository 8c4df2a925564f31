"""Topic-level log configuration: the table of Kafka's topic config keys, and ``LogConfig``.

``TOPIC_CONFIGS`` is the one table of topic keys (Kafka's ``LogConfig`` config definitions):
each key's type, default, check and documentation, and the broker keys that supply its
default when a topic has no override of its own (``ServerTopicConfigSynonyms``), in
precedence order, each with the factor that turns its unit into the topic key's
(``retention.ms`` ← ``log.retention.ms`` / ``log.retention.minutes`` × 60000 /
``log.retention.hours`` × 3600000). The broker builds its topic-config handling
(CreateTopics, AlterConfigs, DescribeConfigs) from this table; adding a topic key is one line
here, plus a ``LogConfig`` field if the log uses it.

``LogConfig`` holds one field per key the log uses, spelled with underscores
(``segment.bytes`` → ``segment_bytes``), defaulted from the table. ``from_dict`` parses the
string values a client sends (or the broker's effective values) and raises ``ConfigError``
(a ``ValueError``) naming the offending key.

Immutable: a config change builds a new object (``with_overrides``) and hands it to
``Log.update_config``. Safe to share between threads.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ..config_def import (
    ACTIVE,
    BOOL,
    DEPRECATED,
    DOUBLE,
    HOUR_MS,
    INFORMATIONAL,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    MINUTE_MS,
    STR,
    AtLeast,
    Between,
    ConfigDef,
    ConfigError,
    Either,
    InvalidValue,
    ListOf,
    OneOf,
    Validator,
    config_table,
    parse_value,
    render_value,
    suggest,
)

__all__ = [
    "COMPRESSION_CODECS",
    "COMPRESSION_TYPES",
    "LONG_MAX",
    "NO_OP_TOPIC_CONFIGS",
    "TOPIC_CONFIGS",
    "LogConfig",
]

# Kafka's BrokerCompressionType names, in its order (error messages list them so).
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# Codec ids in the batch attributes (bits 0-2) for each topic compression.type.
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


class ThrottledReplicas(Validator):
    description = "'*' or a comma-separated list of partition:broker pairs"
    whole = True

    def __call__(self, value):
        if value is None or value == [] or value == ["*"]:
            return value
        for item in value:
            if not re.fullmatch(r"\d+\s*:\s*\d+", item):
                raise InvalidValue(self.description)
        return [re.sub(r"\s+", "", v) for v in value]


def _topic(name, type_, default, validator, doc, *synonyms: str | tuple[str, int], note: str = ACTIVE) -> ConfigDef:
    syn = tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms)
    return ConfigDef(name, type_, default, validator, doc, note, syn)


# fmt: off
TOPIC_CONFIGS: dict[str, ConfigDef] = config_table(
    _topic("cleanup.policy", LIST, ["delete"], ListOf(*CLEANUP_POLICIES, allow_empty=True), "delete (drop old segments), compact (keep the latest record per key), both, or empty (neither: keep everything, as Kafka 4 allows).", "log.cleanup.policy"),
    _topic("compression.type", STR, "producer", OneOf(*COMPRESSION_TYPES), "Compression of stored batches; producer keeps the producer's.", "compression.type"),
    _topic("compression.gzip.level", INT, -1, Either(-1, Between(1, 9)), "Gzip level when compression.type is gzip.", "compression.gzip.level"),
    _topic("compression.lz4.level", INT, 9, Between(1, 17), "LZ4 level when compression.type is lz4.", "compression.lz4.level"),
    _topic("compression.zstd.level", INT, 3, Between(-131072, 22), "Zstd level when compression.type is zstd.", "compression.zstd.level"),
    _topic("delete.retention.ms", LONG, 86400000, AtLeast(0), "How long tombstones stay in a compacted topic.", "log.cleaner.delete.retention.ms"),
    _topic("file.delete.delay.ms", LONG, 60000, AtLeast(0), "Delay before a deleted segment's files are removed.", "log.segment.delete.delay.ms"),
    _topic("flush.messages", LONG, LONG_MAX, AtLeast(1), "Messages appended before an fsync.", "log.flush.interval.messages"),
    _topic("flush.ms", LONG, LONG_MAX, AtLeast(0), "Most time between fsyncs.", "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _topic("follower.replication.throttled.replicas", LIST, [], ThrottledReplicas(), "Replicas throttled on the follower side, as partition:broker,... or *."),
    _topic("index.interval.bytes", INT, 4096, AtLeast(0), "Bytes of log between offset index entries.", "log.index.interval.bytes"),
    _topic("leader.replication.throttled.replicas", LIST, [], ThrottledReplicas(), "Replicas throttled on the leader side, as partition:broker,... or *."),
    _topic("local.retention.bytes", LONG, -2, AtLeast(-2), "Tiered storage: local retention size; -2: retention.bytes (Odradek has no tiered storage).", "log.local.retention.bytes", note=INFORMATIONAL),
    _topic("local.retention.ms", LONG, -2, AtLeast(-2), "Tiered storage: local retention time; -2: retention.ms (Odradek has no tiered storage).", "log.local.retention.ms", note=INFORMATIONAL),
    _topic("max.compaction.lag.ms", LONG, LONG_MAX, AtLeast(1), "Most age of a record before it must be compacted.", "log.cleaner.max.compaction.lag.ms"),
    _topic("max.message.bytes", INT, 1048588, AtLeast(0), "Largest record batch accepted, in bytes.", "message.max.bytes"),
    ConfigDef("message.format.version", STR, "3.0-IV1", None, "Message format version; ignored since format v2 is the only one written (Kafka 3.x: a no-op from inter-broker protocol 3.0 on; removed in Kafka 4).", DEPRECATED, (("log.message.format.version", 1),)),
    _topic("message.downconversion.enable", BOOL, True, None, "Down-convert batches for old fetchers.", "log.message.downconversion.enable", note=DEPRECATED),
    _topic("message.timestamp.after.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the future a CreateTime timestamp may be.", "log.message.timestamp.after.max.ms"),
    _topic("message.timestamp.before.max.ms", LONG, LONG_MAX, AtLeast(0), "How far in the past a CreateTime timestamp may be.", "log.message.timestamp.before.max.ms"),
    _topic("message.timestamp.difference.max.ms", LONG, LONG_MAX, AtLeast(0), "Most difference between a CreateTime timestamp and the broker's clock (deprecated).", "log.message.timestamp.difference.max.ms"),
    _topic("message.timestamp.type", STR, "CreateTime", OneOf(*TIMESTAMP_TYPES), "CreateTime (the producer's) or LogAppendTime (the broker's).", "log.message.timestamp.type"),
    _topic("min.cleanable.dirty.ratio", DOUBLE, 0.5, Between(0, 1), "Least dirty-to-total ratio worth compacting.", "log.cleaner.min.cleanable.ratio"),
    _topic("min.compaction.lag.ms", LONG, 0, AtLeast(0), "Least age of a record before it can be compacted.", "log.cleaner.min.compaction.lag.ms"),
    _topic("min.insync.replicas", INT, 1, AtLeast(1), "Replicas that must acknowledge an acks=all write.", "min.insync.replicas"),
    _topic("preallocate", BOOL, False, None, "Preallocate segment files (Odradek's segment files grow as they are written).", "log.preallocate", note=INFORMATIONAL),
    _topic("remote.storage.enable", BOOL, False, None, "Tiered storage (not supported by Odradek)."),
    _topic("retention.bytes", LONG, -1, None, "Largest size of a partition before old segments go; -1: no limit.", "log.retention.bytes"),
    _topic("retention.ms", LONG, 604800000, AtLeast(-1), "Keep segments this long; -1: forever.", "log.retention.ms", ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
    _topic("segment.bytes", INT, 1073741824, AtLeast(14), "Largest size of a segment file.", "log.segment.bytes"),
    _topic("segment.index.bytes", INT, 10485760, AtLeast(4), "Largest size of an index file.", "log.index.size.max.bytes"),
    _topic("segment.jitter.ms", LONG, 0, AtLeast(0), "Most random jitter subtracted from segment.ms.", "log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS)),
    _topic("segment.ms", LONG, 604800000, AtLeast(1), "Roll a new segment after this long.", "log.roll.ms", ("log.roll.hours", HOUR_MS)),
    _topic("unclean.leader.election.enable", BOOL, False, None, "Allow a replica outside the ISR to become leader.", "unclean.leader.election.enable"),
)
# fmt: on

# Topic keys accepted and described for compatibility that change nothing (not in LogConfig).
NO_OP_TOPIC_CONFIGS = frozenset({"message.format.version"})
_LOG_KEYS = {name: d for name, d in TOPIC_CONFIGS.items() if name not in NO_OP_TOPIC_CONFIGS}


def _field_value(value: Any) -> Any:
    """A parsed value as LogConfig keeps it: lists as tuples (LogConfig is immutable)."""
    return tuple(value) if isinstance(value, list) else value


def _default(name: str) -> Any:
    return _field_value(TOPIC_CONFIGS[name].default)


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    min_insync_replicas: int = _default("min.insync.replicas")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    preallocate: bool = _default("preallocate")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    leader_replication_throttled_replicas: tuple[str, ...] = _default("leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: tuple[str, ...] = _default(
        "follower.replication.throttled.replicas"
    )
    local_retention_ms: int = _default("local.retention.ms")
    local_retention_bytes: int = _default("local.retention.bytes")
    remote_storage_enable: bool = _default("remote.storage.enable")

    # ---- derived values used on hot paths -------------------------------------------

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime (the batch attribute bit's value)."""
        return 1 if self.message_timestamp_type == "LogAppendTime" else 0

    @property
    def compression_codec(self) -> int | None:
        """Codec id the topic forces, or None for ``producer`` (keep what the producer sent)."""
        return COMPRESSION_CODECS.get(self.compression_type)

    @property
    def timestamp_before_max_ms(self) -> int:
        return min(self.message_timestamp_before_max_ms, self.message_timestamp_difference_max_ms)

    @property
    def timestamp_after_max_ms(self) -> int:
        return min(self.message_timestamp_after_max_ms, self.message_timestamp_difference_max_ms)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    # ---- parsing ----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: dict[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Parse Kafka topic keys (``"segment.bytes": "1024"``) over ``base`` (defaults if None)."""
        parsed = {}
        for key, raw in values.items():
            d = _LOG_KEYS.get(key)
            if d is None:
                raise ConfigError(f"{key}: unknown log config{suggest(key, _LOG_KEYS)}", key)
            parsed[key.replace(".", "_")] = _field_value(parse_value(d, raw))
        return dataclasses.replace(base or cls(), **parsed)

    def with_overrides(self, values: dict[str, Any]) -> LogConfig:
        return LogConfig.from_dict(values, base=self)

    def to_dict(self) -> dict[str, str | None]:
        """Kafka keys → string values (None for null), as DescribeConfigs shows them."""
        return {key: render_value(d, getattr(self, key.replace(".", "_"))) for key, d in _LOG_KEYS.items()}

    @staticmethod
    def keys() -> tuple[str, ...]:
        return tuple(_LOG_KEYS)


assert {k.replace(".", "_") for k in _LOG_KEYS} == {f.name for f in dataclasses.fields(LogConfig)}
