"""The broker: wires storage, metadata, replica manager, purgatories and the network.

``Broker(config)`` is started and stopped inside a running event loop (``await
broker.start()`` / ``await broker.shutdown()``); ``run(config)`` is the process entry
point used by ``odradek server``: it installs uvloop when available, starts the broker,
and shuts it down cleanly on SIGTERM or SIGINT (flush, checkpoints, clean-shutdown
marker), so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import time
import uuid
from pathlib import Path

from odradek._tasks import cancel_and_wait
from odradek.broker import handlers
from odradek.broker.config import (
    BrokerConfig,
    broker_config_entries,
    effective_topic_config,
    topic_config_entries,
    validate_topic_configs,
)
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.network import NetworkServer
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import DelayedOperationPurgatory
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.timing_wheel import SystemTimer
from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.cluster.controller import Controller
from odradek.cluster.metadata import BrokerInfo
from odradek.cluster.store import LocalMetadataStore
from odradek.http.broker_http import BrokerHttp
from odradek.protocol import errors
from odradek.storage.checkpoint import read_meta_properties, write_meta_properties
from odradek.storage.cleaner_manager import CleanerConfig, LogCleaner, loop_caller
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

log = logging.getLogger(__name__)


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id: int = config.node_id
        self.rack = config.get("broker.rack")
        self.default_partitions = config.get("num.partitions")
        self.default_replication_factor = config.get("default.replication.factor")
        # Fetch record data is pread into memory and written by the transport; measured on
        # loopback this costs about a third less broker CPU per 1 MB fetch than sendfile
        # (benchmarks/broker_bench.py, consume rows). ODRADEK_ZERO_COPY=1 sends file slices
        # with sendfile instead.
        self.zero_copy = os.environ.get("ODRADEK_ZERO_COPY", "0") == "1"
        self.started = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._stopped = False
        self.http: BrokerHttp | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.perf_counter()
        registry = handlers.load_all()
        log_dirs = [Path(d) for d in self.config.log_dirs]
        for d in log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_or_create_identity(log_dirs)

        self.network = NetworkServer(
            self,
            max_request_size=self.config.get("socket.request.max.bytes"),
            max_connections=self.config.get("max.connections"),
            idle_timeout_s=self.config.get("connections.max.idle.ms") / 1000,
            registry=registry,
            fast_lanes=handlers.FAST_LANES,
            zero_copy=self.zero_copy,
        )
        await self.network.bind(self.config.listeners)
        self.http = BrokerHttp.for_broker(self)  # binds http.listeners; serves once Kafka does
        advertised = self._advertised()

        self.store = LocalMetadataStore(
            log_dirs[0], self.cluster_id, BrokerInfo(self.node_id, advertised[0], advertised[1], self.rack)
        )
        self.controller = Controller(
            self.store,
            default_partitions=self.default_partitions,
            default_replication_factor=self.default_replication_factor,
            validate_configs=self._validate_topic_configs,
        )
        self.log_manager = LogManager(
            [str(d) for d in log_dirs], self.log_config_for(None), config_for=self.log_config_for
        )
        self.timer = SystemTimer(loop=asyncio.get_running_loop())
        self.fetch_purgatory = DelayedOperationPurgatory("fetch", self.timer)
        self.replica_manager = ReplicaManager(
            self.node_id,
            self.log_manager,
            self.store,
            self.log_config_for,
            on_append=self.fetch_purgatory.check_and_complete,
        )
        self.replica_manager.sync_all()
        self.controller.on_change(self._on_metadata_change)
        self.group_coordinator = GroupCoordinator.for_broker(self)  # listens after the replica manager
        self.group_coordinator.start()
        self.producer_ids = ProducerIdManager(self.store)
        self.transaction_coordinator = TransactionCoordinator.for_broker(self)  # after the groups: markers
        self.transaction_coordinator.start()  # on __consumer_offsets complete transactional commits

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
        if self.http is not None:
            self.http.start()
        self.started.set()
        log.info(
            "odradek broker %d started in %.0f ms, cluster %s, listening on %s",
            self.node_id,
            (time.perf_counter() - t0) * 1000,
            self.cluster_id,
            ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.network.bound.items()),
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

    def _advertised(self) -> tuple[str, int]:
        listener = self.config.advertised_listeners[0]
        host, port = listener.host, listener.port
        bound = self.network.bound.get(listener.name)
        if bound and port == 0:
            port = bound[1]
        if not host:
            host = bound[0] if bound else "127.0.0.1"
        return host, port

    def bound_port(self, listener: str | None = None) -> int:
        if listener is None:
            return next(iter(self.network.bound.values()))[1]
        return self.network.bound[listener][1]

    async def _periodic_flush(self) -> None:
        """Time-based flushes, offset checkpoints and retention, off the event loop."""
        loop = asyncio.get_running_loop()
        flush_interval = self.config.get("log.flush.scheduler.interval.ms")
        checkpoint_interval = self.config.get("log.flush.offset.checkpoint.interval.ms")
        retention_interval = self.config.get("log.retention.check.interval.ms")
        interval = max(min(flush_interval, checkpoint_interval, retention_interval, 1000), 10) / 1000
        last_checkpoint = last_retention = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            try:
                await loop.run_in_executor(None, self.log_manager.flush_due, now_ms)
                if (time.monotonic() - last_checkpoint) * 1000 >= checkpoint_interval:
                    self.log_manager.checkpoint_all(self.replica_manager.high_watermarks())
                    last_checkpoint = time.monotonic()
                if (time.monotonic() - last_retention) * 1000 >= retention_interval:
                    self.log_manager.cleanup(now_ms)
                    last_retention = time.monotonic()
            except Exception:
                log.exception("periodic log maintenance failed")

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        log.info("odradek broker %d shutting down", self.node_id)
        if self.http is not None:
            await self.http.close()
        if hasattr(self, "network"):
            await self.network.stop()
        await cancel_and_wait(*self._tasks)
        if hasattr(self, "fetch_purgatory"):
            self.fetch_purgatory.close()
        if hasattr(self, "transaction_coordinator"):
            await self.transaction_coordinator.close()
        if hasattr(self, "group_coordinator"):
            await self.group_coordinator.close()
        if hasattr(self, "log_cleaner"):  # before the logs close; its threads may wait on the loop
            await asyncio.to_thread(self.log_cleaner.shutdown)
        if hasattr(self, "log_manager"):
            self.log_manager.shutdown(self.replica_manager.high_watermarks())
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
        return LogConfig.from_dict(effective_topic_config(overrides, self.config))

    def topic_config_entries(self, overrides: dict[str, str]):
        return topic_config_entries(overrides, self.config)

    def broker_config_entries(self):
        return broker_config_entries(self.config)

    def _validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        return validate_topic_configs(configs, self.config)

    def auto_create_topic(self, name: str):
        return self.controller.create_topic(name)

    def _on_metadata_change(self, event: str, topic: str) -> None:
        self.replica_manager.sync_topic(topic)

    def unsupported_version_response(self, header):
        if header.api_key != 18:
            return None
        from odradek.broker.handlers.api_versions import unsupported_version_response

        return unsupported_version_response(header.correlation_id)


def run(config: BrokerConfig) -> None:
    """Run a broker in this process until SIGTERM or SIGINT."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def main() -> None:
        broker = Broker(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await broker.start()
            await stop.wait()
        finally:
            await broker.shutdown()

    asyncio.run(main())
