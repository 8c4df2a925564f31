"""The worker's configuration: Kafka Connect's worker keys (seed 002, table 2.4.5) with Kafka's defaults.

``WorkerConfig.from_properties(props, distributed)`` checks every value (a ``ConfigError``
naming the key and what it expects: one line) and warns once per unknown key, naming it.
Client keys (``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``ssl.*``) go to every
client the worker makes; ``producer.*``, ``consumer.*`` and ``admin.*`` to that kind only,
overriding the shared ones — as Kafka's worker passes them.

Immutable once built; safe from any thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from odradek.client.client_config import _KINDS
from odradek.config_def import (
    BOOL,
    CLASS,
    INT,
    LIST,
    LONG,
    SHORT,
    STR,
    AtLeast,
    ConfigDef,
    ConfigError,
    OneOf,
    config_table,
    parse_value,
)

log = logging.getLogger("odradek.connect")

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

COMMON_KEYS = config_table(
    ConfigDef("bootstrap.servers", LIST, ["localhost:9092"], doc="Brokers to bootstrap from."),
    ConfigDef("client.id", STR, "", doc="Prefix of the client ids of the worker's clients."),
    ConfigDef("key.converter", CLASS, None, doc="Converter of record keys (required)."),
    ConfigDef("value.converter", CLASS, None, doc="Converter of record values (required)."),
    ConfigDef(
        "header.converter", CLASS, "org.apache.kafka.connect.storage.SimpleHeaderConverter", doc="Header converter."
    ),
    ConfigDef("offset.flush.interval.ms", LONG, 60000, AtLeast(0), doc="How often task offsets are committed."),
    ConfigDef("offset.flush.timeout.ms", LONG, 5000, AtLeast(0), doc="How long an offset commit may wait."),
    ConfigDef("listeners", LIST, None, doc="REST listeners, http://host:port or https://host:port."),
    ConfigDef("rest.host.name", STR, None, doc="REST host (when listeners is unset)."),
    ConfigDef("rest.port", INT, 8083, AtLeast(0), doc="REST port (when listeners is unset)."),
    ConfigDef("rest.advertised.host.name", STR, None, doc="Host other workers reach this one at."),
    ConfigDef("rest.advertised.port", INT, None, doc="Port other workers reach this one at."),
    ConfigDef("rest.advertised.listener", STR, None, OneOf("http", "https"), doc="Scheme advertised."),
    ConfigDef("task.shutdown.graceful.timeout.ms", LONG, 5000, AtLeast(0), doc="Time tasks get to stop."),
    ConfigDef("plugin.path", LIST, [], doc="Directories of connector plugins (.py files and packages)."),
    ConfigDef("connector.client.config.override.policy", STR, "All", OneOf("All", "None", "Principal"),
              doc="Which client.override keys a connector may set."),
    ConfigDef("topic.creation.enable", BOOL, True, doc="Whether source connectors may create their topics."),
    ConfigDef("access.control.allow.origin", STR, "", doc="CORS allowed origin of the REST API."),
    ConfigDef("rest.basic.auth.users", LIST, [], doc="user:password pairs allowed on the REST API (basic auth)."),
    ConfigDef("listeners.https.ssl.keystore.location", STR, None, doc="PEM certificate+key of the HTTPS listener."),
    ConfigDef("listeners.https.ssl.key.location", STR, None, doc="PEM key of the HTTPS listener when apart."),
    ConfigDef("errors.retry.timeout.ms", LONG, 0, doc="Worker-wide default of the connectors' key."),
)

DISTRIBUTED_KEYS = config_table(
    ConfigDef("group.id", STR, None, doc="The Connect cluster's group (required)."),
    ConfigDef("config.storage.topic", STR, None, doc="Topic of connector configs (required)."),
    ConfigDef("offset.storage.topic", STR, None, doc="Topic of source offsets (required)."),
    ConfigDef("status.storage.topic", STR, None, doc="Topic of statuses (required)."),
    ConfigDef("config.storage.replication.factor", SHORT, 3, doc="-1: the brokers' default."),
    ConfigDef("offset.storage.replication.factor", SHORT, 3, doc="-1: the brokers' default."),
    ConfigDef("status.storage.replication.factor", SHORT, 3, doc="-1: the brokers' default."),
    ConfigDef("offset.storage.partitions", INT, 25, AtLeast(1), doc="Partitions of the offset topic."),
    ConfigDef("status.storage.partitions", INT, 5, AtLeast(1), doc="Partitions of the status topic."),
    ConfigDef("heartbeat.interval.ms", INT, 3000, AtLeast(1), doc="Group heartbeat interval."),
    ConfigDef("session.timeout.ms", INT, 10000, AtLeast(1), doc="Group session timeout."),
    ConfigDef("rebalance.timeout.ms", INT, 60000, AtLeast(1), doc="Time a member has to rejoin."),
    ConfigDef("worker.sync.timeout.ms", INT, 3000, AtLeast(0), doc="Time to catch up with the config topic."),
    ConfigDef("worker.unsync.backoff.ms", INT, 300000, AtLeast(0), doc="Back-off after failing to catch up."),
    ConfigDef("scheduled.rebalance.max.delay.ms", INT, 300000, AtLeast(0),
              doc="How long a departed worker's work waits for it before moving."),
    ConfigDef("connect.protocol", STR, "sessioned", OneOf("eager", "compatible", "sessioned"),
              doc="Connect's group sub-protocol."),
    ConfigDef("exactly.once.source.support", STR, "disabled", OneOf("disabled", "preparing", "enabled"),
              doc="KIP-618 exactly-once source tasks."),
)

STANDALONE_KEYS = config_table(
    ConfigDef("offset.storage.file.filename", STR, None, doc="File of source offsets (required)."),
)

# Key families passed through: client keys, prefixed client keys, converter settings.
PASSED_PREFIXES = ("producer.", "consumer.", "admin.", "key.converter.", "value.converter.", "header.converter.",
                   "config.provider", "listeners.https.", "rest.extension", "metric", "sasl.", "ssl.")
CLIENT_PREFIXES = ("security.protocol", "sasl.", "ssl.")


class WorkerConfig:
    def __init__(self, values: dict[str, Any], raw: dict[str, str], distributed: bool):
        self.values = values
        self.raw = raw
        self.distributed = distributed

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @classmethod
    def from_properties(cls, props: Mapping[str, str], distributed: bool) -> WorkerConfig:
        table = {**COMMON_KEYS, **(DISTRIBUTED_KEYS if distributed else STANDALONE_KEYS)}
        values = {name: parse_value(d, props.get(name)) for name, d in table.items()}
        required = ["key.converter", "value.converter"]
        required += (
            ["group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"]
            if distributed
            else ["offset.storage.file.filename"]
        )
        for key in required:
            if not values[key]:
                raise ConfigError(f"{key}: required, and not set in the worker config", key)
        for key in props:
            if key not in table and not key.startswith(PASSED_PREFIXES) and key not in _CLIENT_EXTRA:
                log.warning("unknown worker config key %r: ignored", key)
        config = cls(values, dict(props), distributed)
        config.rest_listeners  # noqa: B018 — checks the listeners now, not when binding them
        return config

    def client_options(self, kind: str) -> dict[str, Any]:
        """Options of an Odradek client of ``kind`` (producer, consumer, admin) as the worker's keys set them."""
        known = _KINDS[kind]
        out: dict[str, Any] = {"bootstrap_servers": ",".join(self.values["bootstrap.servers"])}
        for key, value in self.raw.items():
            if key.startswith(CLIENT_PREFIXES) and _canonical(key) in known:
                out[_canonical(key)] = value
        prefix = kind + "."
        for key, value in self.raw.items():
            if key.startswith(prefix) and _canonical(key[len(prefix):]) in known:
                out[_canonical(key[len(prefix):])] = value
        return out

    def converter_config(self, which: str) -> dict[str, str]:
        """The ``<which>.*`` settings of a converter (``key.converter.schemas.enable`` → ``schemas.enable``)."""
        prefix = which + "."
        return {k[len(prefix):]: v for k, v in self.raw.items() if k.startswith(prefix)}

    @property
    def rest_listeners(self) -> list[tuple[str, str, int]]:
        """``(scheme, host, port)`` of each REST listener."""
        listeners = self.values["listeners"]
        if not listeners:
            return [("http", self.values["rest.host.name"] or "0.0.0.0", self.values["rest.port"])]
        out = []
        for url in listeners:
            scheme, sep, rest = url.partition("://")
            host, _, port = rest.rpartition(":")
            if not sep or scheme.lower() not in ("http", "https") or not port.isdigit():
                raise ConfigError(f"listeners: expected http://host:port or https://host:port, got {url!r}", "listeners")
            out.append((scheme.lower(), host.strip("[]") or "0.0.0.0", int(port)))
        return out


_CLIENT_EXTRA = ("security.protocol",)


def _canonical(name: str) -> str:
    return name.strip().replace(".", "_").replace("-", "_").lower()
