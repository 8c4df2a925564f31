"""Broker configuration: Kafka's ``server.properties`` keys, types, defaults and checks.

A Kafka operator's configuration carries over: the keys, types and defaults are Kafka's
(``KafkaConfig``, ``ServerLogConfigs``, ``SocketServerConfigs``, ``CleanerConfig``, the group
and transaction coordinator configs), and so are the precedence rules between synonyms
(``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``, ``log.roll.ms`` >
``log.roll.hours``, ``log.flush.interval.ms`` > ``log.flush.scheduler.interval.ms``,
``log.dirs`` > ``log.dir``). Unknown keys and invalid values fail at start with a
``ConfigError`` whose message names the key and says what was expected. Where Odradek
chooses differently from Kafka it says so here:

* defaults: ``listeners=PLAINTEXT://127.0.0.1:9092`` and ``log.dir=./odradek-data``.
* ``node.id`` / ``broker.id``: either may be set (both must then agree). Unset means 0 on a
  single node; with ``zookeeper.connect`` it means -1, "let the cluster layer generate one" as
  Kafka does from ``reserved.broker.max.id`` + 1.
* KRaft keys (``process.roles``, ``controller.quorum.voters``, ``controller.listener.names``,
  ``metadata.log.*``, ...) are accepted and ignored with a warning; listeners named in
  ``controller.listener.names`` are neither bound nor advertised.
* internal topics: ``offsets.topic.replication.factor`` and
  ``transaction.state.log.replication.factor`` default to 3 as in Kafka, but where Kafka fails
  to create the topic on a smaller cluster, ``internal_topic_replication_factor`` caps the
  factor at the number of live brokers and logs a warning.
* an empty advertised host means this machine's host name (Kafka uses the canonical host
  name); a 0.0.0.0 or :: advertised host is refused, as in Kafka.
* ``segment.bytes`` / ``log.segment.bytes`` accept 14 bytes and up (Kafka 3.x; 4.x wants 1 MiB).
* thread counts (``num.network.threads``, ``num.io.threads``, ``num.recovery.threads.per.data.dir``,
  ...) and other Kafka keys Odradek has no use for (Java plugin classes, JVM TLS settings,
  purgatory purge intervals, tiered storage, ...) are validated and reported but have no
  effect (``INFORMATIONAL`` in ``broker_keys``; their documentation says so): Odradek runs on
  one event loop and loads no Java classes. Setting one logs a warning that lists them.
* ``server.properties`` is read as UTF-8 (falling back to Latin-1, Java's encoding).
* ``auto.create.topics.max.per.request`` is Odradek's own key: the most topics one Metadata
  request may auto-create (the rest get THROTTLING_QUOTA_EXCEEDED and may be asked again).
* security: ``check_security()`` (called before a broker serves) builds each listener's TLS
  and SASL settings and refuses what cannot be enforced (an unsupported SASL mechanism, a
  JKS key store, ``ssl.client.auth=required`` without a TLS listener, an ``authorizer.class.name``
  other than Kafka's two ACL authorizers or Odradek's; in a cluster, an inter-broker listener
  the brokers cannot log in to, see ``security/inter_broker_security.py``), so a broker never
  serves in a weaker mode than configured;
  ``ssl.*`` / ``sasl.*`` keys no listener uses are accepted with a warning.

Where the parts live (Kafka's split in brackets):

* ``odradek.config_def``: keys, types, validators, value parsing and rendering [``ConfigDef``];
* ``broker_keys``: the table of broker keys, one line each [``KafkaConfig``'s definitions];
* ``odradek.storage.log_config``: the table of topic keys and their broker synonyms [``LogConfig``];
* ``listeners``: listeners, advertised listeners, security protocols, per-listener keys;
* this module: ``BrokerConfig``, the typed configuration with its derived values and
  cross-key checks [``KafkaConfig``];
* ``dynamic_config``: the keys that may change at run time and their levels
  [``DynamicBrokerConfig``];
* ``topic_configs``: topic overrides checked, and topic defaults taken from broker keys;
* ``config_entries``: DescribeConfigs' entries with sources and synonyms [``ConfigHelper``];
* ``odradek.properties``: the ``.properties`` file format.

Immutable once built; safe to share between threads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odradek.broker.broker_keys import (
    BROKER_CONFIGS,
    FREE_PREFIXES,
    NOT_BROKER_KEYS,
    SECURITY_PREFIXES,
    looks_secret,
    parse_host_counts,
)
from odradek.broker.listeners import LISTENER_PREFIX, Endpoint, listener_of, resolve_listeners
from odradek.config_def import (
    DEPRECATED,
    HOUR_MS,
    INFORMATIONAL,
    KRAFT,
    MINUTE_MS,
    ConfigError,
    ConfigSource,
    parse_value,
    suggest,
)
from odradek.properties import PropertiesError, load_properties, parse_properties
from odradek.storage.log_config import TOPIC_CONFIGS

__all__ = ["BrokerConfig", "ConfigError"]

log = logging.getLogger(__name__)


class BrokerConfig:
    """The broker's static configuration: every Kafka broker key, typed.

    Build it with ``BrokerConfig.load(path, overrides)`` (``server.properties`` plus
    ``--override`` pairs), ``BrokerConfig.from_properties(text)``, or ``BrokerConfig(mapping)``
    where values are strings as in a file or Python values (``1024``, ``True``, lists).
    """

    def __init__(self, props: Mapping[str, Any] | None = None):
        given = dict(props or {})
        problems: list[tuple[str, str]] = []
        values: dict[str, Any] = {}
        explicit: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, raw in given.items():
            key = key.strip()
            if raw is None:
                continue
            d = BROKER_CONFIGS.get(key)
            if d is None:
                if key.startswith(LISTENER_PREFIX) or key.startswith(FREE_PREFIXES):
                    extra[key] = str(raw).strip()
                elif key in NOT_BROKER_KEYS:
                    problems.append((key, f"{key}: {NOT_BROKER_KEYS[key]}"))
                elif key in TOPIC_CONFIGS and key not in BROKER_CONFIGS:
                    syn = TOPIC_CONFIGS[key].synonyms
                    hint = f"; the broker-wide default is {syn[0][0]!r}" if syn else ""
                    problems.append((key, f"{key}: a topic-level config, not a broker config{hint}"))
                else:
                    problems.append((key, f"{key}: unknown broker config{suggest(key, BROKER_CONFIGS)}"))
                continue
            try:
                value = parse_value(d, raw)
            except ConfigError as exc:
                problems.append((key, exc.message))
                continue
            if value is None:  # an empty value for a key without default: as if unset
                continue
            values[key] = value
            explicit[key] = raw
        if problems:
            _raise(problems)
        for name, d in BROKER_CONFIGS.items():
            values.setdefault(name, d.default)
        self._values = values
        self._explicit = explicit
        self._extra = extra
        self._security_checked = False
        try:
            self._derive()
        except ConfigError as exc:
            _raise(exc.problems)
        self._warn()

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        """``server.properties`` at ``path`` (if any), then ``overrides`` on top."""
        try:
            props: dict[str, Any] = load_properties(path) if path is not None else {}
        except PropertiesError as exc:
            raise ConfigError(str(exc)) from None
        props.update(overrides or {})
        return cls(props)

    @classmethod
    def from_properties(cls, text: str, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        try:
            props: dict[str, Any] = parse_properties(text)
        except PropertiesError as exc:
            raise ConfigError(str(exc)) from None
        props.update(overrides or {})
        return cls(props)

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A new config: this one's explicit settings with ``overrides`` on top."""
        props = {**self._explicit, **self._extra}
        props.update(overrides)
        return BrokerConfig(props)

    # -- access --------------------------------------------------------------------------------

    def group_protocols(self) -> list[str]:
        """The group protocols on: ``group.coordinator.rebalance.protocols``, plus share when
        Kafka's internal ``group.share.enable`` is true."""
        protocols = list(self._values["group.coordinator.rebalance.protocols"])
        if self._values["group.share.enable"] and "share" not in protocols:
            protocols.append("share")
        return protocols

    def get(self, name: str) -> Any:
        """The typed value of a key (its default when unset; None for unset keys without one)."""
        try:
            value = self._values[name]
        except KeyError:
            if name in self._extra:
                return self._extra[name]
            raise KeyError(f"unknown broker config {name!r}") from None
        return list(value) if isinstance(value, list) else value

    __getitem__ = get

    def is_set(self, name: str) -> bool:
        """True if the key was given explicitly (file or override)."""
        return name in self._explicit or name in self._extra

    def source(self, name: str) -> ConfigSource:
        for source, layer in self._dynamic.items():
            if name in layer:
                return source
        static = self.static
        return ConfigSource.STATIC_BROKER_CONFIG if static.is_set(name) else ConfigSource.DEFAULT_CONFIG

    @property
    def originals(self) -> dict[str, Any]:
        """Every explicitly given key with its raw value (passwords included: do not log it)."""
        return {**self._explicit, **self._extra}

    @property
    def extra(self) -> dict[str, str]:
        """Prefixed keys kept as strings (``listener.name.<listener>.*``, ``sasl.login.*``, ...)."""
        return dict(self._extra)

    def __repr__(self) -> str:
        shown = {
            k: (
                "<hidden>"
                if (BROKER_CONFIGS.get(k) and BROKER_CONFIGS[k].sensitive) or looks_secret(k)
                else v
            )
            for k, v in self.originals.items()
        }
        return f"BrokerConfig({shown!r})"

    # -- dynamic layers (KIP-226; odradek/broker/dynamic_config.py keeps and applies them) ------

    _static: BrokerConfig | None = None
    _dynamic: Mapping[ConfigSource, Mapping[str, str]] = MappingProxyType({})

    def with_dynamic(self, defaults: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The configuration in force: the static one (``server.properties``), under the
        cluster-wide dynamic defaults, under this broker's dynamic configs (Kafka's precedence).
        Raises ``ConfigError`` naming a bad key, like the constructor."""
        static = self.static
        props = {**static.originals, **defaults, **per_broker}
        cfg = BrokerConfig(props)
        cfg._static = static
        cfg._dynamic = MappingProxyType(
            {
                ConfigSource.DYNAMIC_BROKER_CONFIG: dict(per_broker),
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: dict(defaults),
            }
        )
        return cfg

    @property
    def static(self) -> BrokerConfig:
        """The configuration the broker started with, without dynamic layers."""
        return self._static or self

    def dynamic_layer(self, source: ConfigSource) -> dict[str, str]:
        """The dynamic keys given at one level (DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        return dict(self._dynamic.get(source, {}))

    # -- derived values ------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        """This broker's id: node.id or broker.id; unset → 0 (single node) or -1 (cluster, to generate)."""
        return self._node_id

    @property
    def cluster_mode(self) -> bool:
        """True when ``zookeeper.connect`` is set."""
        return bool(self._values["zookeeper.connect"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self._log_dirs)

    @property
    def listeners(self) -> list[Endpoint]:
        """Endpoints to bind (controller listeners of a KRaft config left out)."""
        return list(self._listeners.bound)

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """Endpoints given to clients. Port 0 means "the port ``listeners`` bound"."""
        return list(self._listeners.advertised)

    def advertised_endpoints(self, bound_ports: Mapping[str, int]) -> list[Endpoint]:
        """Advertised endpoints with ephemeral ports (0) replaced by the bound ones, by listener name."""
        return self._listeners.advertised_endpoints(bound_ports)

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """``max.connections.per.ip.overrides`` as {host: limit} (hosts as written)."""
        return dict(self._ip_overrides)

    def check_security(self):
        """Build what each listener demands (TLS context, SASL mechanisms; see
        ``broker/security/listener_security.py``) and refuse what Odradek cannot enforce, so
        a broker never serves in a weaker mode than configured: raises ``ConfigError``
        naming the first such key. Returns ``{listener name: ListenerSecurity}``; warns
        (once) about ``ssl.*`` / ``sasl.*`` keys no listener uses."""
        from odradek.broker.security.authorizer import AUTHORIZER_CLASSES, parse_super_users
        from odradek.broker.security.listener_security import listener_securities

        authorizer = self._values["authorizer.class.name"]
        if authorizer and authorizer not in AUTHORIZER_CLASSES:
            raise ConfigError(
                f"authorizer.class.name: {authorizer} is not available; use one of {', '.join(AUTHORIZER_CLASSES)} "
                "(all three are Odradek's ACL authorizer with Kafka's semantics)",
                "authorizer.class.name",
            )
        parse_super_users(self._values["super.users"])
        securities = listener_securities(self, self._listeners.bound)
        tls = {name for name, sec in securities.items() if sec.ssl_context is not None}
        client_auth = {k: v for k, v in self._extra.items() if k.endswith(".ssl.client.auth")}
        client_auth["ssl.client.auth"] = self._values["ssl.client.auth"]
        for key, value in client_auth.items():
            listener = listener_of(key)
            applies = tls if listener is None else tls & {listener}
            if str(value).strip().lower() == "required" and not applies:
                raise ConfigError(
                    f"{key}: client certificates need a TLS listener (SSL or SASL_SSL), and "
                    f"{listener or 'no listener'} is not one; refusing to accept clients without them",
                    key,
                )
        secured = any(sec.protocol != "PLAINTEXT" for sec in securities.values())
        unused = sorted(
            k for k in self.originals if k.startswith(SECURITY_PREFIXES) or ".ssl." in k or ".sasl." in k
        )
        if unused and not secured and not self._security_checked:
            log.warning("ignoring %s: no listener uses SSL or SASL", ", ".join(unused))
        if self.cluster_mode:  # the brokers must be able to log in to each other
            from odradek.broker.security.inter_broker_security import inter_broker_security

            inter_broker_security(self)
        self._security_checked = True
        return securities

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return dict(self._listeners.protocols)

    @property
    def inter_broker_listener_name(self) -> str:
        return self._listeners.inter_broker

    @property
    def log_roll_ms(self) -> int:
        return self._first_of(("log.roll.ms", 1), ("log.roll.hours", HOUR_MS))

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._first_of(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS))

    @property
    def log_retention_ms(self) -> int:
        """ms > minutes > hours; any negative value means -1, keep forever."""
        return self._retention_ms

    @property
    def log_flush_interval_ms(self) -> int:
        return self._first_of(("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))

    @property
    def offsets_retention_ms(self) -> int:
        return self._values["offsets.retention.minutes"] * MINUTE_MS

    def internal_topic_replication_factor(self, key: str, live_brokers: int) -> int:
        """The replication factor for an internal topic, capped at ``live_brokers``.

        ``key`` is ``offsets.topic.replication.factor`` or
        ``transaction.state.log.replication.factor``. Kafka refuses to create the topic while
        fewer brokers are alive; Odradek uses what it has and logs a warning.
        """
        wanted = self._values[key]
        if live_brokers >= wanted:
            return wanted
        got = max(1, live_brokers)
        log.warning("%s is %d but only %d broker(s) are alive; using %d", key, wanted, live_brokers, got)
        return got

    def _first_of(self, *keys: tuple[str, int]) -> int:
        for key, factor in keys:
            value = self._values[key]
            if value is not None:
                return value * factor
        raise AssertionError(f"no value for {keys}")

    def _derive(self) -> None:
        v = self._values
        # ids
        node_id, broker_id = v["node.id"], v["broker.id"]
        if node_id >= 0 and broker_id >= 0 and node_id != broker_id:
            raise ConfigError(
                f"node.id ({node_id}) and broker.id ({broker_id}) must be equal when both are set", "node.id"
            )
        configured = node_id if node_id >= 0 else broker_id
        if configured < 0:
            configured = -1 if self.cluster_mode else 0
        elif (
            self.cluster_mode
            and v["broker.id.generation.enable"]
            and configured > v["reserved.broker.max.id"]
        ):
            raise ConfigError(
                f"broker.id: {configured} is above reserved.broker.max.id ({v['reserved.broker.max.id']}); "
                "raise reserved.broker.max.id or pick a smaller id",
                "broker.id",
            )
        self._node_id = configured
        # log dirs
        self._log_dirs = list(v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"])
        # retention
        retention = self._first_of(
            ("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)
        )
        if retention == 0:
            key = next(
                k
                for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
                if v[k] is not None
            )
            raise ConfigError(f"{key}: expected -1 (unlimited) or a positive value, got 0", key)
        self._retention_ms = -1 if retention < 0 else retention
        # connections and requests
        self._ip_overrides = parse_host_counts(v["max.connections.per.ip.overrides"] or "")
        if v["max.connections.per.ip"] == 0 and not self._ip_overrides:
            raise ConfigError(
                "max.connections.per.ip: 0 is allowed only with max.connections.per.ip.overrides "
                "naming the addresses that may connect",
                "max.connections.per.ip",
            )
        queued = v["queued.max.request.bytes"]
        if queued is not None and 0 < queued < v["socket.request.max.bytes"]:
            raise ConfigError(
                f"queued.max.request.bytes: must be -1 (no limit) or at least socket.request.max.bytes "
                f"({v['socket.request.max.bytes']}), so that the largest request fits; got {queued}",
                "queued.max.request.bytes",
            )
        # share groups: each default within its bounds (Kafka's ShareGroupConfig.validate)
        for key, low, high in (
            ("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
            ("group.share.delivery.count.limit", "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
            ("group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
        ):
            if not v[low] <= v[key] <= v[high]:
                raise ConfigError(f"{key}: must be between {low} ({v[low]}) and {high} ({v[high]}); got {v[key]}", key)
        # replication timing
        wait = v["replica.fetch.wait.max.ms"]
        if wait > v["replica.socket.timeout.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms: must not exceed replica.socket.timeout.ms",
                "replica.fetch.wait.max.ms",
            )
        if wait > v["replica.lag.time.max.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms: must not exceed replica.lag.time.max.ms",
                "replica.fetch.wait.max.ms",
            )
        if v["log.cleaner.min.compaction.lag.ms"] > v["log.cleaner.max.compaction.lag.ms"]:
            raise ConfigError(
                "log.cleaner.min.compaction.lag.ms: must not exceed log.cleaner.max.compaction.lag.ms",
                "log.cleaner.min.compaction.lag.ms",
            )
        self._listeners = resolve_listeners(v, self._explicit, self._extra)

    def _warn(self) -> None:
        kraft = [k for k in self._explicit if BROKER_CONFIGS[k].note == KRAFT]
        if kraft:
            log.warning(
                "ignoring KRaft settings %s: Odradek runs as a single node or with ZooKeeper "
                "(controller listeners are not bound)",
                ", ".join(sorted(kraft)),
            )
        informational = [k for k in self._explicit if BROKER_CONFIGS[k].note == INFORMATIONAL]
        if informational:
            log.warning(
                "settings with no effect in Odradek (accepted and shown by DescribeConfigs only; "
                "`odradek configs describe --broker ID --all` marks them): %s",
                ", ".join(sorted(informational)),
            )
        deprecated = [k for k in self._explicit if BROKER_CONFIGS[k].note == DEPRECATED]
        if deprecated:
            log.info("deprecated Kafka settings accepted: %s", ", ".join(sorted(deprecated)))


def _raise(problems: list[tuple[str, str]]) -> None:
    if len(problems) == 1:
        key, message = problems[0]
        raise ConfigError(message, key, problems)
    lines = "\n".join(f"  {message}" for _, message in problems)
    raise ConfigError(f"{len(problems)} invalid broker settings:\n{lines}", problems[0][0], problems)
