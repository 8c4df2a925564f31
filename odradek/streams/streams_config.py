"""Kafka Streams' configuration keys, checked, with Kafka's defaults, and what each becomes in Spark.

``application.id`` names the app's internal topics (``<id>-<store>-changelog``) and its
checkpoint directory (``<state.dir>/<id>``); ``commit.interval.ms`` is the trigger interval;
``num.stream.threads`` the local parallelism (``local[N]`` when no ``spark.master`` is set);
``processing.guarantee`` ``exactly_once_v2`` writes through the data source's exactly-once
sink. ``spark.*`` keys go to the SparkSession as they are. An unknown key or a bad value
raises ``ConfigException`` naming it.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from odradek.streams.serdes import Serde, Serdes


class ConfigException(ValueError):
    """An invalid Streams configuration, in one line naming the key."""


LOG_AND_CONTINUE = "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"
LOG_AND_FAIL = "org.apache.kafka.streams.errors.LogAndFailExceptionHandler"
_HANDLERS = {
    LOG_AND_CONTINUE: LOG_AND_CONTINUE,
    "LogAndContinueExceptionHandler": LOG_AND_CONTINUE,
    LOG_AND_FAIL: LOG_AND_FAIL,
    "LogAndFailExceptionHandler": LOG_AND_FAIL,
}
_GUARANTEES = {"at_least_once", "exactly_once_v2", "exactly_once", "exactly_once_beta"}

# Keys we read, with Kafka's defaults (None: required or no default).
DEFAULTS: dict[str, Any] = {
    "application.id": None,
    "bootstrap.servers": None,
    "default.key.serde": Serdes.ByteArray(),
    "default.value.serde": Serdes.ByteArray(),
    "processing.guarantee": "at_least_once",
    "commit.interval.ms": None,  # 30000, or 100 under exactly-once (Kafka's defaults)
    "num.stream.threads": 1,
    "replication.factor": -1,  # the brokers' default.replication.factor
    "state.dir": os.path.join(tempfile.gettempdir(), "kafka-streams"),
    "default.deserialization.exception.handler": LOG_AND_FAIL,
    "client.id": "",
    "auto.offset.reset": "earliest",
}
# Keys a Kafka Streams app may carry that have no effect here: Spark owns what they tune.
IGNORED = {
    "cache.max.bytes.buffering",
    "statestore.cache.max.bytes",
    "num.standby.replicas",
    "topology.optimization",
    "max.task.idle.ms",
    "buffered.records.per.partition",
    "poll.ms",
}
# Families of keys with no effect here either (metrics.*: Spark has its own metrics).
IGNORED_PREFIXES = ("metrics.",)
# Keys for the serdes' configure() (the registry serdes'), passed on as they are.
SERDE_KEYS = {"auto.register.schemas", "use.latest.version", "specific.avro.reader"}
# The client security keys (security.protocol, ssl.*, sasl.*) go to every client the app makes:
# the data source's readers and writers (as kafka.* options) and the admin calls.
SECURITY_PREFIXES = ("security.protocol", "ssl.", "sasl.")


class StreamsConfig:
    """A checked Streams configuration. ``StreamsConfig.APPLICATION_ID_CONFIG`` etc. name the keys."""

    APPLICATION_ID_CONFIG = "application.id"
    BOOTSTRAP_SERVERS_CONFIG = "bootstrap.servers"
    DEFAULT_KEY_SERDE_CLASS_CONFIG = "default.key.serde"
    DEFAULT_VALUE_SERDE_CLASS_CONFIG = "default.value.serde"
    PROCESSING_GUARANTEE_CONFIG = "processing.guarantee"
    COMMIT_INTERVAL_MS_CONFIG = "commit.interval.ms"
    NUM_STREAM_THREADS_CONFIG = "num.stream.threads"
    REPLICATION_FACTOR_CONFIG = "replication.factor"
    STATE_DIR_CONFIG = "state.dir"
    DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG = "default.deserialization.exception.handler"
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE_V2 = "exactly_once_v2"

    def __init__(self, config: dict[str, Any] | StreamsConfig):
        self.original: dict[str, Any] = dict(config.original if isinstance(config, StreamsConfig) else config)
        self.spark = {k: str(v) for k, v in self.original.items() if k.startswith("spark.")}
        values = dict(DEFAULTS)
        security: dict[str, str] = {}
        for key, value in self.original.items():
            if (
                key.startswith(("spark.", "schema.registry.", "basic.auth.", *IGNORED_PREFIXES))
                or key in IGNORED | SERDE_KEYS
            ):
                continue
            if key.startswith(SECURITY_PREFIXES):
                security[key] = str(value)
                continue
            if key not in DEFAULTS:
                raise ConfigException(
                    f"unknown Streams config key {key!r}: use Kafka Streams' keys "
                    f"({', '.join(sorted(k for k in DEFAULTS))}) or spark.*"
                )
            values[key] = value
        for key in ("application.id", "bootstrap.servers"):
            if not values[key]:
                raise ConfigException(f"{key} is required")
        self.application_id = str(values["application.id"])
        if not all(c.isalnum() or c in "._-" for c in self.application_id):
            raise ConfigException(
                f"application.id {self.application_id!r} may hold only letters, digits, '.', '_' and '-' "
                "(it prefixes topic names)"
            )
        self.bootstrap_servers = str(values["bootstrap.servers"])
        self.security = _security(security)
        self.key_serde = _serde("default.key.serde", values["default.key.serde"])
        self.value_serde = _serde("default.value.serde", values["default.value.serde"])
        self.key_serde.configure(self.original, True)
        self.value_serde.configure(self.original, False)
        guarantee = str(values["processing.guarantee"])
        if guarantee not in _GUARANTEES:
            raise ConfigException(f"processing.guarantee={guarantee!r}: use at_least_once or exactly_once_v2")
        self.exactly_once = guarantee != "at_least_once"
        default_commit = 100 if self.exactly_once else 30_000
        self.commit_interval_ms = _integer(
            "commit.interval.ms", values["commit.interval.ms"] or default_commit, 0
        )
        self.num_stream_threads = _integer("num.stream.threads", values["num.stream.threads"], 1)
        self.replication_factor = _integer("replication.factor", values["replication.factor"], -1)
        if self.replication_factor == 0:
            raise ConfigException("replication.factor must be -1 (the brokers' default) or at least 1")
        self.state_dir = str(values["state.dir"])
        handler = values["default.deserialization.exception.handler"]
        handler_name = handler if isinstance(handler, str) else getattr(handler, "__name__", str(handler))
        if handler_name not in _HANDLERS:
            raise ConfigException(
                f"default.deserialization.exception.handler={handler_name!r}: use {LOG_AND_CONTINUE} "
                f"or {LOG_AND_FAIL}"
            )
        self.continue_on_bad_records = _HANDLERS[handler_name] == LOG_AND_CONTINUE
        self.auto_offset_reset = str(values["auto.offset.reset"])
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ConfigException(f"auto.offset.reset={self.auto_offset_reset!r}: use earliest or latest")

    @property
    def checkpoint_dir(self) -> str:
        return os.path.join(self.state_dir, self.application_id)


def _security(settings: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The client security settings as the data source carries them, checked now (a bad key or a
    missing password fails here, named, rather than in a Spark task)."""
    from odradek.client.client_errors import ConfigError
    from odradek.pipeline.blocking_client import security_of

    pairs = tuple(sorted(settings.items()))
    try:
        security_of(pairs)
    except ConfigError as exc:
        raise ConfigException(str(exc)) from None
    return pairs


def _serde(key: str, value: Any) -> Serde:
    try:
        return Serdes.from_class_name(value)
    except ValueError as exc:
        raise ConfigException(f"{key}: {exc}") from None


def _integer(key: str, value: Any, minimum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigException(f"{key}={value!r} is not an integer") from None
    if number < minimum:
        raise ConfigException(f"{key}={number} must be at least {minimum}")
    return number
