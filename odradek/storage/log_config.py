"""Topic-level log configuration: Kafka's topic config keys, defaults and validation.

``LogConfig`` holds one field per Kafka topic-level key, spelled with underscores
(``segment.bytes`` → ``segment_bytes``) and defaulted as Kafka does. ``from_dict`` parses
the string values a client sends in CreateTopics/AlterConfigs (or a broker's mapped
``log.*`` keys) and fails with a ``ValueError`` naming the offending key.

Immutable: a config change builds a new object (``with_overrides``) and hands it to
``Log.update_config``. Safe to share between threads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
# Codec ids in the batch attributes (bits 0-2) for each topic compression.type.
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    cleanup_policy: tuple[str, ...] = ("delete",)
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    min_insync_replicas: int = 1
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    message_downconversion_enable: bool = True
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_storage_enable: bool = False

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
            spec = _SPECS.get(key)
            if spec is None:
                raise ValueError(f"Unknown topic config key {key!r}")
            parsed[key.replace(".", "_")] = spec.parse(key, raw)
        return dataclasses.replace(base or cls(), **parsed)

    def with_overrides(self, values: dict[str, Any]) -> LogConfig:
        return LogConfig.from_dict(values, base=self)

    def to_dict(self) -> dict[str, str]:
        """Kafka keys → string values, as DescribeConfigs shows them."""
        out = {}
        for key, spec in _SPECS.items():
            value = getattr(self, key.replace(".", "_"))
            out[key] = spec.render(value)
        return out

    @staticmethod
    def keys() -> tuple[str, ...]:
        return tuple(_SPECS)


class _Spec:
    __slots__ = ("kind", "low", "high", "choices", "allow_empty")

    def __init__(self, kind, low=None, high=None, choices=None, allow_empty=False):
        self.kind = kind
        self.low = low
        self.high = high
        self.choices = choices
        self.allow_empty = allow_empty

    def parse(self, key: str, raw: Any) -> Any:
        kind = self.kind
        try:
            if kind in ("int", "long"):
                if isinstance(raw, bool):
                    raise ValueError
                value = int(raw.strip()) if isinstance(raw, str) else int(raw)
                if isinstance(raw, float) and raw != value:
                    raise ValueError
                limit = INT_MAX if kind == "int" else LONG_MAX
                if not -limit - 1 <= value <= limit:
                    raise ValueError
            elif kind == "double":
                value = float(raw)
            elif kind == "bool":
                if isinstance(raw, bool):
                    value = raw
                elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                    value = raw.strip().lower() == "true"
                else:
                    raise ValueError
            elif kind == "list":
                if isinstance(raw, str):
                    value = tuple(p.strip() for p in raw.split(",") if p.strip())
                else:
                    value = tuple(str(p) for p in raw)
            else:
                value = str(raw).strip() if kind == "choice" else str(raw)
        except (TypeError, ValueError):
            raise ValueError(f"Invalid value {raw!r} for topic config {key!r}: expected {kind}") from None
        if self.low is not None and value < self.low:
            raise ValueError(f"Invalid value {raw!r} for topic config {key!r}: must be at least {self.low}")
        if self.high is not None and value > self.high:
            raise ValueError(f"Invalid value {raw!r} for topic config {key!r}: must be at most {self.high}")
        if self.choices is not None:
            items = value if kind == "list" else (value,)
            if kind == "choice" and value not in self.choices:
                lowered = {c.lower(): c for c in self.choices}
                if value.lower() in lowered:
                    return lowered[value.lower()]
            for item in items:
                if item not in self.choices:
                    raise ValueError(
                        f"Invalid value {raw!r} for topic config {key!r}: must be one of {list(self.choices)}"
                    )
            if kind == "list" and not items and not self.allow_empty:
                raise ValueError(f"Invalid value {raw!r} for topic config {key!r}: empty list")
        return value

    def render(self, value: Any) -> str:
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "list":
            return ",".join(value)
        return str(value)


_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("int", low=14),
    "segment.ms": _Spec("long", low=1),
    "segment.jitter.ms": _Spec("long", low=0),
    "segment.index.bytes": _Spec("int", low=4),
    "index.interval.bytes": _Spec("int", low=0),
    "flush.messages": _Spec("long", low=1),
    "flush.ms": _Spec("long", low=0),
    "max.message.bytes": _Spec("int", low=0),
    "message.timestamp.type": _Spec("choice", choices=TIMESTAMP_TYPES),
    "message.timestamp.difference.max.ms": _Spec("long", low=0),
    "message.timestamp.before.max.ms": _Spec("long", low=0),
    "message.timestamp.after.max.ms": _Spec("long", low=0),
    "compression.type": _Spec("choice", choices=COMPRESSION_TYPES),
    "compression.gzip.level": _Spec("int", low=-1, high=9),
    "compression.lz4.level": _Spec("int", low=1, high=17),
    "compression.zstd.level": _Spec("int", low=-131072, high=22),
    # Empty: neither compaction nor retention deletes anything (Kafka 4 accepts it).
    "cleanup.policy": _Spec("list", choices=CLEANUP_POLICIES, allow_empty=True),
    "retention.ms": _Spec("long", low=-1),
    "retention.bytes": _Spec("long"),
    "min.insync.replicas": _Spec("int", low=1),
    "file.delete.delay.ms": _Spec("long", low=0),
    "min.cleanable.dirty.ratio": _Spec("double", low=0.0, high=1.0),
    "delete.retention.ms": _Spec("long", low=0),
    "min.compaction.lag.ms": _Spec("long", low=0),
    "max.compaction.lag.ms": _Spec("long", low=1),
    "preallocate": _Spec("bool"),
    "unclean.leader.election.enable": _Spec("bool"),
    "message.downconversion.enable": _Spec("bool"),
    "leader.replication.throttled.replicas": _Spec("string"),
    "follower.replication.throttled.replicas": _Spec("string"),
    "local.retention.ms": _Spec("long", low=-2),
    "local.retention.bytes": _Spec("long", low=-2),
    "remote.storage.enable": _Spec("bool"),
}

assert {k.replace(".", "_") for k in _SPECS} == {f.name for f in dataclasses.fields(LogConfig)}
