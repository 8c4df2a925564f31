"""Dynamic broker configs (KIP-226): broker settings changed at run time, per broker or cluster-wide.

Levels, highest precedence first (Kafka's): this broker's dynamic configs
(DYNAMIC_BROKER_CONFIG, entity "<id>"), the cluster-wide dynamic defaults
(DYNAMIC_DEFAULT_BROKER_CONFIG, entity "<default>": the empty resource name of the admin APIs),
``server.properties`` (STATIC_BROKER_CONFIG), Kafka's defaults (DEFAULT_CONFIG). Only the keys
of ``DYNAMIC_BROKER_CONFIGS`` (below) may be set dynamically; a request naming another is
refused whole with INVALID_REQUEST "Cannot update these configs dynamically: ...", as Kafka's
brokers answer, and so is one whose values do not check (thread counts may change by at most a
factor of two, as in Kafka).

Both levels live in the metadata store (``MetadataStore.broker_configs``; in a cluster,
ZooKeeper's ``/config/brokers/<entity>``), so they survive restarts. Values that no longer
check when loaded are dropped with an error in the log, as Kafka does, and the broker starts.
A store that learns of a change made by another broker calls ``reload``.

A change takes effect at once: ``broker.config`` becomes the new configuration in force, and
the components that keep values of their own are told (``_apply_to_broker``): every log's
config (topic defaults such as ``message.max.bytes`` or ``log.retention.ms``, for topics
without an override), the log cleaner (restarted with its new settings, as Kafka restarts its
cleaner threads), the connection limit, producer-id expiry and transaction verification.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.config import BrokerConfig
from odradek.cluster.store import DEFAULT_BROKER_ENTITY
from odradek.config_def import ConfigError
from odradek.protocol import errors
from odradek.storage.log_config import NO_OP_TOPIC_CONFIGS, TOPIC_CONFIGS

log = logging.getLogger(__name__)

# -- the keys that may change at run time ----------------------------------------------------
#
# Kafka's dynamically updatable broker keys (DynamicBrokerConfig.AllDynamicConfigs) that mean
# something here. Listener, SSL and SASL keys (per broker in Kafka) wait for security support;
# until then they are read-only like every other key. All of these may be set for one broker
# or as the cluster-wide default.

# The broker-wide defaults of topic configs: each topic key's first synonym (DynamicLogConfig).
DYNAMIC_LOG_CONFIGS = frozenset(
    d.synonyms[0][0] for d in TOPIC_CONFIGS.values() if d.synonyms and d.name not in NO_OP_TOPIC_CONFIGS
)
DYNAMIC_CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "message.max.bytes",
    }
)
# Thread pools (no effect here, one event loop), changed by at most a factor of two, as in Kafka.
DYNAMIC_THREAD_CONFIGS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"}
)
# Kafka's SocketServer keys: only the connection limit is applied at run time here (the
# per-address limits and the creation rate stay read-only until the network server takes them).
DYNAMIC_SOCKET_CONFIGS = frozenset({"max.connections"})
DYNAMIC_PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
# Replication throttles (Kafka's DynamicConfig.Broker): applied by cluster/replication_quota.py.
DYNAMIC_REPLICATION_QUOTA_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate"})
# Set per broker only (Kafka's DynamicBrokerConfig.PerBrokerConfigs), refused at the cluster
# default; a change re-registers the broker's endpoints (Broker.readvertise).
PER_BROKER_CONFIGS = frozenset({"advertised.listeners"})
DYNAMIC_BROKER_CONFIGS = (
    PER_BROKER_CONFIGS
    |     DYNAMIC_LOG_CONFIGS
    | DYNAMIC_CLEANER_CONFIGS
    | DYNAMIC_THREAD_CONFIGS
    | DYNAMIC_SOCKET_CONFIGS
    | DYNAMIC_PRODUCER_STATE_CONFIGS
    | DYNAMIC_REPLICATION_QUOTA_CONFIGS
    | {"metric.reporters"}
)
assert DYNAMIC_BROKER_CONFIGS <= set(BROKER_CONFIGS), DYNAMIC_BROKER_CONFIGS - set(BROKER_CONFIGS)

Listener = Callable[[BrokerConfig, BrokerConfig], None]


def _names(keys) -> str:
    return ", ".join(sorted(keys))


class DynamicBrokerConfig:
    """The dynamic levels of one broker's configuration and the configuration in force."""

    def __init__(self, static: BrokerConfig, node_id: int, store):
        self.static = static.static
        self.node_id = node_id
        self.store = store
        self._listeners: list[Listener] = []
        self.current = self._load()

    @classmethod
    def attach(cls, broker) -> DynamicBrokerConfig:
        """Load ``broker``'s dynamic configs from its store, make ``broker.config`` the
        configuration in force and keep it so; components the broker creates afterwards
        read their settings from it."""
        dynamic = cls(broker.config, broker.node_id, broker.store)
        restarter = _CleanerRestarter(broker)
        dynamic.on_change(lambda old, new: _apply_to_broker(broker, old, new, restarter))
        if dynamic.current is not broker.config:
            old, broker.config = broker.config, dynamic.current
            if hasattr(broker, "network"):
                broker.network.max_connections = dynamic.current.get("max.connections")
            if _changed(old, dynamic.current, PER_BROKER_CONFIGS):
                broker.readvertise()  # registered with server.properties' addresses a moment ago
        return dynamic

    def on_change(self, listener: Listener) -> None:
        """``listener(old, new)`` after every change of the configuration in force."""
        self._listeners.append(listener)

    # -- levels ------------------------------------------------------------------------------

    def entity(self, resource_name: str | None) -> str:
        """The store entity of a BROKER resource name: this broker's id, or "" for the defaults."""
        if not resource_name:
            return DEFAULT_BROKER_ENTITY
        try:
            node = int(resource_name)
        except ValueError:
            raise errors.InvalidRequestError(
                f"Node id must be an integer, but it is: {resource_name}"
            ) from None
        if node != self.node_id:
            raise errors.InvalidRequestError(
                f"Unexpected broker id, expected {self.node_id}, but received {resource_name}"
            )
        return str(node)

    def configs_of(self, entity: str) -> dict[str, str]:
        """The dynamic configs stored for ``entity`` that still apply (strings, as given); as
        Kafka, a stored key that no longer checks is left out (and dropped by the next change)."""
        return {k: v for k, v in self.store.broker_configs(entity).items() if self._loadable(k, v)}

    def _load(self) -> BrokerConfig:
        levels = {}
        for entity in (DEFAULT_BROKER_ENTITY, str(self.node_id)):
            stored = self.store.broker_configs(entity)
            levels[entity] = self.configs_of(entity)
            for key in sorted(set(stored) - set(levels[entity])):
                log.error(
                    "ignoring the stored dynamic config %s=%r of broker entity %s: it does not apply",
                    key,
                    stored[key],
                    entity,
                )
        try:
            return self.static.with_dynamic(levels[DEFAULT_BROKER_ENTITY], levels[str(self.node_id)])
        except ConfigError as exc:
            log.error(
                "dynamic broker configs could not be applied together (%s); using server.properties", exc
            )
            return self.static

    @staticmethod
    def _loadable(key: str, value: str) -> bool:
        if key not in DYNAMIC_BROKER_CONFIGS:
            return False
        try:
            BrokerConfig({key: value})
        except ConfigError:
            return False
        return True

    # -- changes -----------------------------------------------------------------------------

    def alter(self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Make ``configs`` the whole dynamic set of ``entity`` (this broker's id or
        "<default>"), after checking it; raises InvalidRequestError saying what is wrong."""
        configs = dict(configs)
        self._check_keys(configs)
        per_broker_only = PER_BROKER_CONFIGS & set(configs) if entity == DEFAULT_BROKER_ENTITY else set()
        if per_broker_only:
            raise errors.InvalidRequestError(
                f"Cannot update these configs at default cluster level, broker id must be specified: {_names(per_broker_only)}"
            )
        per_broker = str(self.node_id)
        levels = {e: self.configs_of(e) for e in (DEFAULT_BROKER_ENTITY, per_broker)}
        levels[entity] = configs
        try:
            candidate = self.static.with_dynamic(levels[DEFAULT_BROKER_ENTITY], levels[per_broker])
        except ConfigError as exc:
            raise errors.InvalidRequestError(exc.message) from None
        self._check_thread_counts(candidate)
        if validate_only:
            return
        self.store.set_broker_configs(entity, configs)
        log.info(
            "dynamic configs of %s set: %s",
            "the cluster default" if entity == DEFAULT_BROKER_ENTITY else f"broker {entity}",
            _names(configs) or "(none)",
        )
        self._apply(candidate)

    def reload(self) -> None:
        """Re-read both levels from the store (another broker changed them) and apply them."""
        new = self._load()
        self._apply(new)

    def _apply(self, new: BrokerConfig) -> None:
        old, self.current = self.current, new
        for listener in self._listeners:
            listener(old, new)

    @staticmethod
    def _check_keys(configs: Mapping[str, str]) -> None:
        unknown = [k for k in configs if k not in BROKER_CONFIGS]
        if unknown:
            raise errors.InvalidRequestError(f"Unknown broker configs: {_names(unknown)}")
        static_only = [k for k in configs if k not in DYNAMIC_BROKER_CONFIGS]
        if static_only:
            raise errors.InvalidRequestError(
                f"Cannot update these configs dynamically: {_names(static_only)} (they are read "
                "from server.properties when the broker starts)"
            )

    def _check_thread_counts(self, candidate: BrokerConfig) -> None:
        """Kafka's limits on resizing thread pools at run time: at least 1, at least half
        and at most double the current count."""
        for key in DYNAMIC_THREAD_CONFIGS | {"log.cleaner.threads"}:
            new, old = candidate.get(key), self.current.get(key)
            if new == old:
                continue
            what = f"Dynamic thread count update validation failed for {key}={new}"
            if new < 1:
                raise errors.InvalidRequestError(f"{what}, value should be at least 1")
            if new < old / 2:
                raise errors.InvalidRequestError(
                    f"{what}, value should be at least half the current value {old}"
                )
            if new > old * 2:
                raise errors.InvalidRequestError(
                    f"{what}, value should not be greater than double the current value {old}"
                )


# -- effects on the running broker ------------------------------------------------------------


def _changed(old: BrokerConfig, new: BrokerConfig, keys) -> set[str]:
    return {k for k in keys if old.get(k) != new.get(k)}


def _apply_to_broker(broker, old: BrokerConfig, new: BrokerConfig, restarter: _CleanerRestarter) -> None:
    broker.config = new
    if _changed(old, new, PER_BROKER_CONFIGS):
        broker.readvertise()
    if _changed(old, new, DYNAMIC_LOG_CONFIGS):
        # Topic defaults: every log without an override of its own follows the new value.
        broker.log_manager.default_config = broker.log_config_for(None)
        broker.replica_manager.sync_all()
    if _changed(old, new, DYNAMIC_CLEANER_CONFIGS):
        restarter.restart()
    if _changed(old, new, DYNAMIC_SOCKET_CONFIGS):
        broker.network.max_connections = new.get("max.connections")
    if _changed(old, new, DYNAMIC_REPLICATION_QUOTA_CONFIGS):
        broker.replication_quotas.update(new.get)
    if _changed(old, new, DYNAMIC_PRODUCER_STATE_CONFIGS):
        expiration = new.get("producer.id.expiration.ms")
        broker.log_manager.producer_id_expiration_ms = expiration  # for logs created from now on
        for plog in broker.log_manager.logs():
            plog.producer_state.producer_id_expiration_ms = expiration
        txn = broker.transaction_coordinator
        txn.config = txn.config._replace(
            verify_partitions=new.get("transaction.partition.verification.enable")
        )


class _CleanerRestarter:
    """Restarts the broker's log cleaner with the configuration in force, one restart at a time
    (stopping the cleaner waits for its threads, so it runs off the event loop). The task is
    one of the broker's background tasks, cancelled at shutdown."""

    def __init__(self, broker):
        self.broker = broker
        self._task: asyncio.Task | None = None
        self._again = False

    def restart(self) -> None:
        self._again = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner-restart")
            self.broker._tasks.append(self._task)

    async def _run(self) -> None:
        from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner

        while self._again:
            self._again = False
            broker = self.broker
            old = broker.log_cleaner
            await asyncio.to_thread(old.shutdown)
            config = CleanerConfig.from_getter(broker.config.get)
            cleaner = LogCleaner(
                broker.log_manager, config, call_owner=old.call_owner, use_processes=old.use_processes
            )
            cleaner.start()
            broker.log_cleaner = cleaner
            log.info("log cleaner restarted: %s", dataclasses.asdict(config))
