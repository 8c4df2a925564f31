"""The broker: wires storage, metadata, replica manager, purgatories and the network.

``Broker(config)`` is started and stopped inside a running event loop (``await
broker.start()`` / ``await broker.shutdown()``); ``run(config)`` is the process entry
point used by ``odradek server``: it raises the soft RLIMIT_NOFILE to the hard limit,
installs uvloop when available, starts the broker, and shuts it down cleanly on SIGTERM
or SIGINT (flush, checkpoints, clean-shutdown marker), so the next start skips recovery.

Start order, so that a start that cannot succeed fails at once, in one line
(``StartupError``) and before touching any data: check and lock every log dir (``.lock``,
see storage.dir_lock), bind the listeners, then read identities, load the logs and serve.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from odradek._tasks import cancel_and_wait
from odradek.broker import handlers
from odradek.broker.client_quotas import ClientQuotas
from odradek.broker.config import BrokerConfig
from odradek.broker.config_entries import broker_config_entries, topic_config_entries
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.group.group_configs import GroupConfigs
from odradek.broker.group.group_coordinator import GroupCoordinator
from odradek.broker.network import NetworkServer
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import DelayedOperationPurgatory
from odradek.broker.queued_request_bytes import limit_in_force, log_default_limit
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.security.authorizer import Authorizer
from odradek.broker.security.inter_broker_security import inter_broker_security
from odradek.broker.security.request_gates import RequestGates
from odradek.broker.share.share_coordinator import ShareCoordinator
from odradek.broker.share.share_fetch_manager import ShareFetchManager
from odradek.broker.timing_wheel import SystemTimer
from odradek.broker.topic_configs import effective_topic_config, validate_topic_configs
from odradek.broker.txn.transaction_coordinator import TransactionCoordinator
from odradek.cluster.controller import Controller
from odradek.cluster.metadata_image import BrokerInfo
from odradek.cluster.replication_quota import ReplicationQuotas
from odradek.cluster.store import LocalMetadataStore
from odradek.http.broker_http import BrokerHttp
from odradek.http.http_server import HttpBindError
from odradek.protocol import errors
from odradek.protocol.sasl_mechanisms import ScramCredential
from odradek.protocol.uuids import encode_uuid
from odradek.storage.checkpoint import (
    LOG_MANAGER_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_meta_properties,
    write_meta_properties,
)
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner, loop_caller
from odradek.storage.dir_lock import DirLock, LogDirInUseError
from odradek.storage.fd_budget import (
    FDS_PER_PARTITION,
    open_files_limit,
    partition_capacity,
    raise_open_files_limit,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The broker cannot start; the message is one line that says what to do."""


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return encode_uuid(uuid.uuid4())


class Broker:
    def __init__(self, config: BrokerConfig):
        self.listener_security = config.check_security()
        # How this broker connects to the others (controller requests, follower fetches, markers)
        self.inter_broker_security = inter_broker_security(config) if config.cluster_mode else None
        self.authorizer = None
        self.config = config
        self.node_id: int = config.node_id
        self.rack = config.get("broker.rack")
        self.default_partitions = config.get("num.partitions")
        self.default_replication_factor = config.get("default.replication.factor")
        # Fetch answers are streamed from the log as the socket drains (broker/response_writes.py),
        # by reading a chunk and writing it. sendfile (ODRADEK_ZERO_COPY=1, plaintext only) costs
        # less broker CPU per MiB (benchmarks/network_bench.py, fetch rows: 0.52 against 0.72 ms
        # at 1 MiB answers, 0.20 against 0.55 at 32 MiB) but doubles the round trip of a small
        # answer (0.51 against 0.26 ms median for 14 kB: two system calls and two segments), which
        # consumers polling for fresh records feel; so it stays opt-in for consumers.
        self.zero_copy = os.environ.get("ODRADEK_ZERO_COPY", "0") == "1"
        # Follower fetches: one leader sends every byte to each follower, and sendfile saves the
        # copy (benchmarks/replication_bench.py, the role rows).
        self.follower_zero_copy = os.environ.get("ODRADEK_FOLLOWER_ZERO_COPY", "1") == "1"
        self.started = asyncio.Event()
        self.cluster = None  # the ClusterNode in cluster mode (zookeeper.connect set)
        self._tasks: list[asyncio.Task] = []
        self._stopped = False
        # Set on SIGTERM/SIGINT; a start still waiting for ZooKeeper gives up on it.
        self.stop_requested = asyncio.Event()
        self._dir_locks: list[DirLock] = []
        self.http: BrokerHttp | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.perf_counter()
        registry = handlers.load_all()
        log_dirs = [Path(d).absolute() for d in self.config.log_dirs]
        for d in log_dirs:
            self._dir_locks.append(_lock_log_dir(d))

        self.network = NetworkServer(
            self,
            max_request_size=self.config.get("socket.request.max.bytes"),
            max_connections=self.config.get("max.connections"),
            max_connections_per_ip=self.config.get("max.connections.per.ip"),
            max_connections_per_ip_overrides=self.config.max_connections_per_ip_overrides,
            queued_max_request_bytes=limit_in_force(
                self.config.get("queued.max.request.bytes"), self.config.get("socket.request.max.bytes")
            ),
            max_connection_creation_rate=self.config.get("max.connection.creation.rate"),
            idle_timeout_s=self.config.get("connections.max.idle.ms") / 1000,
            registry=registry,
            # With an authorizer each connection offers the lanes its cached Write decisions.
            fast_lanes=handlers.FAST_LANES,
            zero_copy=self.zero_copy or self.follower_zero_copy,
            security=self.listener_security,
            scram_lookup=self.scram_credential,
            send_buffer_bytes=self.config.get("socket.send.buffer.bytes"),
            receive_buffer_bytes=self.config.get("socket.receive.buffer.bytes"),
        )
        await self._bind()
        try:
            self.http = BrokerHttp.for_broker(self)  # binds http.listeners; serves once Kafka does
        except HttpBindError as exc:
            raise StartupError(str(exc)) from None
        advertised = self._advertised()
        if self.config.cluster_mode:
            await self._connect_cluster(log_dirs, advertised)
        else:
            try:
                self.cluster_id = self._load_or_create_identity(log_dirs)
            except errors.InconsistentClusterIdError as exc:
                raise StartupError(exc.message) from None
            self.store = LocalMetadataStore(
                log_dirs[0],
                self.cluster_id,
                BrokerInfo(self.node_id, advertised[0], advertised[1], self.rack, self._advertised_endpoints()),
            )
        self.client_quotas = ClientQuotas(
            self.store,
            self.config.get("quota.window.num"),
            self.config.get("quota.window.size.seconds"),
            on_change=self._quotas_changed,
        )
        self.authorizer = Authorizer.from_config(self.config, self.store)
        if self.authorizer is not None:
            self.network.gates = RequestGates(self.authorizer)
        # KIP-226: the dynamic levels stored with the metadata; self.config is now the config in force.
        self.dynamic_config = DynamicBrokerConfig.attach(self)
        self.replication_quotas = ReplicationQuotas(self.node_id, self.config.get)  # throttles (cluster mode)
        controller_settings = dict(
            default_partitions=self.default_partitions,
            default_replication_factor=self.default_replication_factor,
            validate_configs=self._validate_topic_configs,
            max_partitions_per_request=self.config.get("max.partitions.per.request"),
            broker_partition_limit=self._partition_limit,
        )
        if self.cluster is not None:
            from odradek.cluster.topic_admin import ClusterTopicAdmin

            self.controller = ClusterTopicAdmin(
                self.store, zk=self.cluster.zk, nudge_controller=self.cluster.nudge_topics, **controller_settings
            )
        else:
            self.controller = Controller(self.store, **controller_settings)
        try:
            self.log_manager = LogManager(
                [str(d) for d in log_dirs],
                self.log_config_for(None),
                config_for=self.log_config_for,
                producer_id_expiration_ms=self.config.get("producer.id.expiration.ms"),
            )
        except OSError as exc:
            raise StartupError(
                f"cannot load the logs: {exc.strerror or exc} on {exc.filename or 'a log dir'}; fix "
                "that file's permissions or disk, or move it out of the log dir"
            ) from None
        self._warn_if_over_capacity()
        self.timer = SystemTimer(loop=asyncio.get_running_loop())
        self.fetch_purgatory = DelayedOperationPurgatory("fetch", self.timer)
        self.fetch_sessions = FetchSessionCache(self.config.get("max.incremental.fetch.session.cache.slots"))
        self.produce_purgatory = DelayedOperationPurgatory("produce", self.timer)
        self.delete_records_purgatory = DelayedOperationPurgatory("delete-records", self.timer)
        self.replica_manager = ReplicaManager(
            self.node_id,
            self.log_manager,
            self.store,
            self.log_config_for,
            on_append=self.fetch_purgatory.check_and_complete,
            on_ready=lambda topic: self.controller.notify("ready", topic),
        )
        self.replica_manager.on_high_watermark = self._on_high_watermark
        if self.cluster is None:  # in a cluster, LeaderAndIsr and StopReplica say which replicas to host
            self.replica_manager.sync_all()
        self.controller.on_change(self._on_metadata_change)  # in a cluster: topic config changes
        self.group_configs = GroupConfigs(self.store, lambda: self.config)
        self.group_coordinator = GroupCoordinator.for_broker(self)  # listens after the replica manager
        self.group_coordinator.context.group_configs = self.group_configs
        self.group_coordinator.start()
        self.share_coordinator = ShareCoordinator(self)
        self.share_fetches = ShareFetchManager(self)
        self.group_coordinator.on_share_member_gone(self.share_fetches.release_member)
        self.group_coordinator.on_share_group_deleted(self.share_fetches.delete_group)
        self.group_coordinator.context.share_initialize = self.share_fetches.initialize_partitions
        self.group_coordinator.context.share_topic_deleted = self.share_fetches.delete_state
        self.producer_ids = ProducerIdManager(self.store)
        self.transaction_coordinator = TransactionCoordinator.for_broker(self)  # after the groups: markers
        self.transaction_coordinator.start()  # on __consumer_offsets complete transactional commits
        self.replica_manager.on_role_change = self._on_role_change
        if self.cluster is not None:
            from odradek.broker.isr_updater import IsrUpdater

            self.enable_replication(IsrUpdater(self.cluster.zk))

        # -- log cleaner (compaction; odradek/storage/cleaner_manager.py) --
        self.log_cleaner = LogCleaner(
            self.log_manager,
            CleanerConfig.from_getter(self.config.get),
            call_owner=loop_caller(asyncio.get_running_loop()),
            use_processes=True,  # passes run in worker processes, off this process's GIL
        )
        self.log_cleaner.start()
        # -- end log cleaner --

        self._tasks.append(asyncio.get_running_loop().create_task(self._periodic_flush()))
        await self.network.start_serving()
        if self.config.get("queued.max.request.bytes") is None and self.network.queued is not None:
            log_default_limit(self.network.queued.limit)
        if self.cluster is not None:
            await self._register_in_cluster()
        if self.http is not None:
            self.http.start()
        self.started.set()
        log.info(
            "odradek broker %d started in %.0f ms, cluster %s, listening on %s, %d partitions, "
            "open file limit %d",
            self.node_id,
            (time.perf_counter() - t0) * 1000,
            self.cluster_id,
            ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.network.bound.items()),
            len(self.log_manager),
            open_files_limit(),
        )

    # -- cluster mode ----------------------------------------------------------------------

    async def _connect_cluster(self, log_dirs: list[Path], advertised: tuple[str, int]) -> None:
        """Join the ZooKeeper-mode cluster as far as a start needs before loading logs: the
        session, the cluster id and this broker's id (see cluster.cluster_node)."""
        from odradek.cluster import zk_data
        from odradek.cluster.cluster_node import ClusterNode, ClusterStartupError
        from odradek.cluster.zk_store import ZkMetadataStore

        stored_cluster, stored_node = self._stored_identity(log_dirs)
        self.cluster = ClusterNode(self.config, self._registration_endpoints(), self.rack, self.inter_broker_security)
        self.cluster.stopping = self.stop_requested
        try:
            await self.cluster.connect(stored_cluster, stored_node)
        except ClusterStartupError as exc:
            await self.cluster.zk.close()
            raise StartupError(str(exc)) from None
        self.node_id = self.cluster.broker_id
        self.cluster_id = self.cluster.cluster_id
        for d in log_dirs:
            if read_meta_properties(str(d)) is None:
                write_meta_properties(str(d), self.node_id, self.cluster_id)
        self.store = ZkMetadataStore(
            self.cluster.zk,
            self.cluster_id,
            BrokerInfo(self.node_id, advertised[0], advertised[1], self.rack, self._advertised_endpoints()),
            self.config.advertised_listeners[0].name,
        )
        # ACL changes are announced in paths of their own; watch them all before reading the state
        security = self.store.security
        security.on_acls_changed = self._acls_changed
        for path, pattern in ((zk_data.LITERAL_ACL_CHANGES_PATH, "LITERAL"), (zk_data.EXTENDED_ACL_CHANGES_PATH, "PREFIXED")):
            self.cluster.listen(path, zk_data.ACL_CHANGE_PREFIX, functools.partial(security.on_acl_notification, pattern))
        await self.cluster.start_listening()
        await self.store.load()
        self.cluster.on_session_lost = self._stop_leading
        self.cluster.on_config_change = self._on_config_change
        self.cluster.on_controller_known = self._on_controller_known

    def _stored_identity(self, log_dirs: list[Path]) -> tuple[str | None, int | None]:
        cluster_id = node_id = None
        for d in log_dirs:
            meta = read_meta_properties(str(d))
            if meta is None:
                continue
            stored_node = int(meta.get("node.id", meta.get("broker.id", -1)))
            if node_id is not None and stored_node != node_id or cluster_id is not None and meta.get("cluster.id") != cluster_id:
                raise StartupError(f"log dirs disagree on the broker id or cluster id ({d}/meta.properties)")
            node_id, cluster_id = stored_node, meta.get("cluster.id")
        return cluster_id, node_id

    async def _register_in_cluster(self) -> None:
        from odradek.cluster.cluster_node import ClusterStartupError

        self.cluster.on_registered = self._on_registered
        try:
            await self.cluster.register()
        except ClusterStartupError as exc:
            raise StartupError(str(exc)) from None

    def _on_registered(self, broker_epoch: int) -> None:
        """Requests the controller meant for an earlier registration are refused from now on."""
        self.replica_manager.broker_epoch = broker_epoch

    def _stop_leading(self) -> None:
        """The ZooKeeper session expired: another broker may lead our partitions by now."""
        from odradek.cluster.cluster_node import demoted

        for partition in self.replica_manager.partitions.values():
            if partition.is_leader:
                partition.state = demoted(partition.state)

    def _on_controller_known(self, controller_id: int) -> None:
        """This broker's own watch on /controller named the active controller: Metadata and
        NOT_CONTROLLER answers name it even before the controller's first UpdateMetadata arrives."""
        if controller_id >= 0:
            self.store.image.controller_id = controller_id

    async def _on_config_change(self, entity_path: str) -> None:
        changed = await self.store.reload_config(entity_path)
        if changed is None:
            return
        entity_type, name = changed
        if entity_type == "topics":
            config = self.log_config_for(name)
            for (topic, _), partition in list(self.replica_manager.partitions.items()):
                if topic == name:
                    partition.update_config(config)
            self.controller.notify("configs", name)
        elif entity_type in ("users", "clients", "ips"):  # quotas and SCRAM credentials
            self.client_quotas.reload()
        else:
            self.dynamic_config.reload()

    def _acls_changed(self) -> None:
        """Another broker changed ACLs in ZooKeeper (or our write merged theirs)."""
        if self.authorizer is not None:
            self.authorizer.reload()

    def controller_address(self, controller_id: int) -> tuple[str, int] | None:
        info = self.image.brokers.get(controller_id)
        return info.address(self.config.inter_broker_listener_name) if info is not None else None

    async def _bind(self) -> None:
        try:
            await self.network.bind(self.config.listeners, self.config.get("socket.listen.backlog.size"))
        except OSError as exc:
            failed = next((lst for lst in self.config.listeners if lst.name not in self.network.bound), None)
            where = f"{failed.name}://{failed.host}:{failed.port}" if failed else "the listeners"
            if exc.errno == errno.EADDRINUSE:
                problem = f"port {failed.port if failed else '?'} is already in use by another process"
                fix = "stop that process or choose another port in listeners"
            elif exc.errno == errno.EACCES:
                problem = "permission denied (ports below 1024 need privileges)"
                fix = "choose a port above 1023 in listeners"
            elif exc.errno == errno.EADDRNOTAVAIL:
                problem = "that address does not belong to this machine"
                fix = "use one of its addresses (or 0.0.0.0) in listeners"
            else:
                problem, fix = exc.strerror or str(exc), "check listeners"
            raise StartupError(f"cannot listen on {where}: {problem}; {fix}") from None

    def _partition_limit(self, broker_id: int) -> tuple[int, str]:
        """This broker's partition limit and where it comes from (the controller asks)."""
        configured = self.config.get("max.broker.partitions")
        capacity = partition_capacity()
        if configured <= capacity:
            return configured, "max.broker.partitions"
        return capacity, (
            f"RLIMIT_NOFILE={open_files_limit()} leaves descriptors for {capacity} partitions in use at "
            f"{FDS_PER_PARTITION} each; raise the limit (ulimit -n, LimitNOFILE=) to host more"
        )

    def _warn_if_over_capacity(self) -> None:
        hosted = len(self.log_manager)
        limit, why = self._partition_limit(self.node_id)
        if hosted > limit:
            log.warning(
                "this broker hosts %d partitions, more than its limit of %d (%s): they load, but "
                "new partitions are refused, and using more than that many at once fails with "
                "KAFKA_STORAGE_ERROR once descriptors run out",
                hosted,
                limit,
                why,
            )

    def _load_or_create_identity(self, log_dirs: list[Path]) -> str:
        cluster_id = None
        for d in log_dirs:
            meta = read_meta_properties(str(d))
            if meta is None:
                continue
            stored_node = int(meta.get("node.id", meta.get("broker.id", self.node_id)))
            if stored_node != self.node_id:
                raise errors.InconsistentClusterIdError(
                    f"{d}/meta.properties belongs to node {stored_node}, but this broker is node {self.node_id}; "
                    f"set node.id={stored_node} or use another log.dirs"
                )
            if cluster_id is not None and meta.get("cluster.id") != cluster_id:
                raise errors.InconsistentClusterIdError(f"log dirs disagree on the cluster id ({d})")
            cluster_id = meta.get("cluster.id")
        cluster_id = cluster_id or new_cluster_id()
        for d in log_dirs:
            if read_meta_properties(str(d)) is None:
                write_meta_properties(str(d), self.node_id, cluster_id)
        return cluster_id

    def _quotas_changed(self, quotas: ClientQuotas) -> None:
        """The produce fast lane skips quotas: it is off while a producer or request quota exists."""
        lanes = self.network.fast_lanes
        if quotas.has("producer_byte_rate") or quotas.request_time:
            lanes.clear()
        else:
            lanes.update(handlers.FAST_LANES)

    def allowed(self, request, operation: str, resource_type: str = "Cluster", name: str = "kafka-cluster") -> bool:
        """Whether the request's principal may do ``operation`` on the resource (always, without
        an authorizer)."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(request, operation, resource_type, name)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored SCRAM credential of ``user`` for ``mechanism`` (the SASL exchange's lookup)."""
        text = self.store.scram_credentials(user).get(mechanism)
        return ScramCredential.from_text(mechanism, text) if text else None

    def _registration_endpoints(self) -> list:
        """The advertised listeners as ``/brokers/ids/<id>`` lists them, ephemeral ports resolved."""
        from odradek.cluster.zk_data import BrokerEndpoint

        endpoints = []
        for listener in self.config.advertised_listeners:
            bound = self.network.bound.get(listener.name)
            host = listener.host or (bound[0] if bound else "127.0.0.1")
            port = listener.port or (bound[1] if bound else 0)
            endpoints.append(BrokerEndpoint(listener.name, host, port, listener.security_protocol))
        return endpoints

    def readvertise(self) -> None:
        """Give clients the advertised listeners now in force (``advertised.listeners`` changed
        dynamically): a single node updates its metadata at once; in a cluster the broker
        rewrites its registration, and the controller, which watches it, tells every broker."""
        host, port = self._advertised()
        log.info("advertised listeners now %s", ", ".join(str(e) for e in self.config.advertised_listeners))
        if self.cluster is None:
            self.store.image.brokers[self.node_id] = BrokerInfo(
                self.node_id, host, port, self.rack, self._advertised_endpoints()
            )
            return
        task = asyncio.get_running_loop().create_task(
            self.cluster.update_registration(self._registration_endpoints()), name="broker-reregistration"
        )
        self._tasks.append(task)

    def _advertised(self) -> tuple[str, int]:
        listener = self.config.advertised_listeners[0]
        host, port = listener.host, listener.port
        bound = self.network.bound.get(listener.name)
        if bound and port == 0:
            port = bound[1]
        if not host:
            host = bound[0] if bound else "127.0.0.1"
        return host, port

    def _advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """Every advertised listener's (host, port), ephemeral ports resolved."""
        ports = {name: port for name, (_, port) in self.network.bound.items()}
        return {
            e.name: (e.host or self.network.bound.get(e.name, ("127.0.0.1",))[0], e.port)
            for e in self.config.advertised_endpoints(ports)
        }

    def bound_port(self, listener: str | None = None) -> int:
        if listener is None:
            return next(iter(self.network.bound.values()))[1]
        return self.network.bound[listener][1]

    async def _periodic_flush(self) -> None:
        """Time-based flushes, offset checkpoints, retention and producer-id expiry, off the
        event loop, each on its own interval (Kafka's LogManager, ReplicaManager and UnifiedLog
        tasks). All but the high-watermark checkpoint and producer-id expiry first run
        ``log.initial.task.delay.ms`` after start."""
        loop = asyncio.get_running_loop()
        get = self.config.get
        intervals = {
            # at least every second, so a topic's flush.ms is kept with the default scheduler
            "flush": min(get("log.flush.scheduler.interval.ms"), 1000),
            RECOVERY_POINT_CHECKPOINT: get("log.flush.offset.checkpoint.interval.ms"),
            LOG_START_OFFSET_CHECKPOINT: get("log.flush.start.offset.checkpoint.interval.ms"),
            REPLICATION_OFFSET_CHECKPOINT: get("replica.high.watermark.checkpoint.interval.ms"),
            "retention": get("log.retention.check.interval.ms"),
            "producers": get("producer.id.expiration.check.interval.ms"),
        }
        tick = max(min(*intervals.values(), 1000), 10) / 1000
        start, initial = time.monotonic(), get("log.initial.task.delay.ms") / 1000
        due = {task: start + (0 if task == REPLICATION_OFFSET_CHECKPOINT else initial) for task in intervals}
        due["producers"] = start + intervals["producers"] / 1000  # as Kafka: first after one interval
        while True:
            await asyncio.sleep(max(min(min(due.values()) - time.monotonic(), tick), 0.01))
            now = time.monotonic()
            ready = {task for task, at in due.items() if now >= at}
            for task in ready:
                due[task] = now + intervals[task] / 1000
            try:
                if "flush" in ready:
                    await loop.run_in_executor(None, self.log_manager.flush_due, int(time.time() * 1000))
                checkpoints = [name for name in LOG_MANAGER_CHECKPOINTS if name in ready]
                if checkpoints:
                    self.log_manager.checkpoint_all(self.replica_manager.high_watermarks(), checkpoints)
                if "retention" in ready:
                    self.log_manager.cleanup(int(time.time() * 1000))
                if "producers" in ready:
                    self.log_manager.expire_producers(int(time.time() * 1000))
            except Exception:
                log.exception("periodic log maintenance failed")

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        started = self.started.is_set()
        if started:
            log.info("odradek broker %d shutting down", self.node_id)
        if self.cluster is not None and started and self.config.get("controlled.shutdown.enable"):
            await self.cluster.controlled_shutdown(self.controller_address)
        if self.http is not None:
            await self.http.close()
        if hasattr(self, "network"):
            await self.network.stop()
        await cancel_and_wait(*self._tasks)
        if self.cluster is not None:  # leave the cluster: our znodes go now, not after the session timeout
            for part in (getattr(self, "controller", None), self.cluster, getattr(self, "store", None)):
                close = getattr(part, "close", None)
                if close is not None:
                    await close()
        if hasattr(self, "share_fetches"):
            await self.share_fetches.close()
        if hasattr(self, "replica_manager"):
            await self.replica_manager.close()
        if hasattr(self, "fetch_purgatory"):
            self.fetch_purgatory.close()
            self.produce_purgatory.close()
            self.delete_records_purgatory.close()
        if hasattr(self, "transaction_coordinator"):
            await self.transaction_coordinator.close()
        if hasattr(self, "marker_channel"):
            await self.marker_channel.close()
        if hasattr(self, "group_coordinator"):
            await self.group_coordinator.close()
        if hasattr(self, "log_cleaner"):  # before the logs close; its threads may wait on the loop
            await asyncio.to_thread(self.log_cleaner.shutdown)
        if hasattr(self, "log_manager"):
            hws = self.replica_manager.high_watermarks() if hasattr(self, "replica_manager") else None
            self.log_manager.shutdown(hws)
        for lock in self._dir_locks:
            lock.release()
        if not started:
            return
        offline = getattr(self, "log_manager", None) and self.log_manager.offline_dirs
        if offline:
            log.warning(
                "odradek broker %d stopped; offline log dirs were not marked clean: %s",
                self.node_id,
                ", ".join(offline),
            )
        else:
            log.info("odradek broker %d stopped cleanly", self.node_id)

    # -- what handlers use -----------------------------------------------------------------

    @property
    def image(self):
        return self.store.image

    def log_config_for(self, topic: str | None) -> LogConfig:
        overrides = {}
        if topic is not None:
            info = self.store.image.topics.get(topic)
            if info is not None:
                overrides = info.configs
            elif self.cluster is not None:  # LeaderAndIsr can come before UpdateMetadata
                overrides = self.store.known_topic_configs(topic)
        return LogConfig.from_dict(effective_topic_config(overrides, self.config))

    def topic_config_entries(self, overrides: dict[str, str]):
        return topic_config_entries(overrides, self.config)

    def broker_config_entries(self):
        return broker_config_entries(self.config)

    def _validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        return validate_topic_configs(configs, self.config)

    def auto_create_topic(self, name: str):
        for coordinator in (self.group_coordinator, self.transaction_coordinator):
            if coordinator.topic.name == name:  # internal: created with the coordinator's layout
                coordinator.topic.ensure_created()
                return self.image.topics.get(name)
        return self.controller.create_topic(name)

    def _on_high_watermark(self, key) -> None:
        """A high watermark moved (or the leadership did): waiting produces and fetches retry."""
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.delete_records_purgatory.check_and_complete(key)

    def enable_replication(self, isr_updater=None) -> None:
        """Cluster mode (called once the broker is registered): the controller's LeaderAndIsr
        decides what this broker leads and follows, followers fetch, leaders keep the ISR
        (written to ZooKeeper through ``isr_updater``, a ``broker.isr_updater.IsrUpdater``),
        and transaction markers reach partitions led by other brokers."""
        from odradek.broker.txn.marker_channel import MarkerChannel

        self.replica_manager.enable_replication(self.config.get, isr_updater, self.inter_broker_security)
        self.replica_manager.fetchers.throttle = self.replication_quotas.follower
        if self.cluster is not None:
            loop = asyncio.get_running_loop()
            self.log_manager.on_dir_offline = lambda d: loop.call_soon_threadsafe(self._log_dir_failed, d)
        txn = self.transaction_coordinator
        self.marker_channel = MarkerChannel(self, txn._poke, self.config.get("request.timeout.ms"))
        txn._write_markers = self.marker_channel.write_markers

    def _log_dir_failed(self, log_dir: str) -> None:
        """Cluster mode: a log dir went offline. Its followers stop fetching and the controller is
        told (``/log_dir_event_notification``); it then moves their leaderships (Kafka's
        handleLogDirFailure)."""
        for key in list(self.replica_manager.partitions):
            if self.log_manager.is_offline(*key):
                self.replica_manager.fetchers.remove_partition(key)
        self._tasks.append(
            asyncio.get_running_loop().create_task(self.cluster.report_log_dir_failure(log_dir), name="log-dir-event")
        )

    def _on_role_change(self, partition, leader: bool) -> None:
        """Cluster mode: this broker started or stopped leading ``partition``; a coordinator
        loads or unloads it when it is one of its internal topic's."""
        for coordinator in (self.group_coordinator, self.transaction_coordinator):
            if coordinator.topic.name == partition.topic:
                coordinator.sync_partitions()

    def _on_metadata_change(self, event: str, topic: str) -> None:
        self.replica_manager.sync_topic(topic)
        if event == "deleted":
            self.share_fetches.topic_deleted(topic)

    def unsupported_version_response(self, header):
        if header.api_key != 18:
            return None
        from odradek.broker.handlers.api_versions import unsupported_version_response

        return unsupported_version_response(header.correlation_id, self)


def _lock_log_dir(d: Path) -> DirLock:
    """Check that ``d`` is a usable log dir (creating it if missing) and lock it; raises
    StartupError saying what is wrong and what to do."""
    try:
        if d.exists() and not d.is_dir():
            raise StartupError(f"log dir {d} is a file, not a directory; point log.dirs at a directory")
        d.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StartupError(f"log dir {d} cannot be created: part of its path is a file; fix log.dirs") from None
    except OSError as exc:
        raise StartupError(
            f"log dir {d} cannot be created: {exc.strerror}; create it with write access for this "
            "user, or choose another log.dirs"
        ) from None
    try:
        if not os.access(d, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "permission denied")
        return DirLock(str(d))
    except LogDirInUseError as exc:
        raise StartupError(f"{exc}; stop the broker using it or choose another log.dirs") from None
    except OSError as exc:
        if exc.errno == errno.EROFS or os.statvfs(d).f_flag & os.ST_RDONLY:
            raise StartupError(
                f"log dir {d} is not writable: it is on a read-only file system; remount it "
                "read-write or choose another log.dirs"
            ) from None
        raise StartupError(
            f"log dir {d} is not writable by user id {os.geteuid()} ({exc.strerror}); give that "
            "user write access to it or choose another log.dirs"
        ) from None


def run(config: BrokerConfig, beside: Callable[[Broker], Awaitable[Any]] | None = None) -> None:
    """Run a broker in this process until SIGTERM or SIGINT. Raises StartupError.

    ``beside(broker)``, when given, starts a companion on the broker's event loop once the
    broker serves (the launcher's schema registry, a client of it); what it returns is
    closed (``await x.close()``) before the broker shuts down."""
    before, after = raise_open_files_limit()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def main() -> None:
        broker = Broker(config)
        stop = broker.stop_requested
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        companion = None
        try:
            await broker.start()
            if after != before:
                log.info("raised the open file limit (RLIMIT_NOFILE) from %d to its hard limit %d", before, after)
            if beside is not None:
                companion = await beside(broker)
            await stop.wait()
        finally:
            if companion is not None:
                await companion.close()
            await broker.shutdown()

    asyncio.run(main())
