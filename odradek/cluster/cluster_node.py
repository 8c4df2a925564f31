"""A broker's part in a ZooKeeper-mode cluster: its session, its registration, and the one
task that handles every cluster event (Kafka's KafkaZkClient + the broker side of
KafkaController's event manager).

``ClusterNode.connect()`` (before the logs load, so that a start that cannot succeed fails at
once, in one line): connect to ZooKeeper, create Kafka's persistent paths, read or create
``/cluster/id``, generate a broker id from ``/brokers/seqid`` when none is configured, and
refuse a ``broker.id`` that another live broker holds. ``register()`` (once the listeners
serve): the ephemeral ``/brokers/ids/<id>`` — its czxid is this broker's epoch — then the
controller election and the config-change watch.

One task, ``_run``, takes events off one queue: ZooKeeper watches and session changes (the
ZkClient puts them there), broker answers the controller handed back, and calls from request
handlers (``call``). So the controller's state and this broker's registration have one owner.

ZooKeeper trouble: while the connection is lost (SUSPENDED) the broker keeps serving with the
metadata it has, and says so once. If the session expires (LOST) its registration and
/controller are gone and another controller may already have moved its leaderships: it stops
acting as a leader at once (every local partition answers NOT_LEADER_OR_FOLLOWER) and, when
the next session opens, registers again; the controller then tells it what it leads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from odradek._tasks import cancel_and_wait
from odradek.cluster import zk_data
from odradek.cluster.change_notifications import NotificationListener
from odradek.cluster.controller_channel import BrokerLink, BrokerLinkError
from odradek.cluster.partitions import TopicPartition
from odradek.cluster.zk_client import (
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    WatchEvent,
    WatchKind,
    ZkClient,
    ZooKeeperError,
    ZooKeeperUnreachableError,
)
from odradek.cluster.zk_controller import NotActiveController, ZkController
from odradek.protocol.inter_broker import controlled_shutdown_schema as cs_schema

log = logging.getLogger(__name__)


# How much longer than zookeeper.session.timeout.ms a dead session's registration may last:
# ZooKeeper expires sessions on tick boundaries (2 s ticks by default) and may round a
# requested timeout up to its minimum of two ticks.
STALE_SESSION_MARGIN_S = 4.0
STALE_SESSION_POLL_S = 0.2


class ClusterStartupError(Exception):
    """The broker cannot join the cluster; one line that says what to do."""


class ClusterNode:
    def __init__(self, config, endpoints: list[zk_data.BrokerEndpoint], rack: str | None, security=None):
        self.config = config
        self.security = security  # a ConnectionSecurity: how to reach the other brokers' inter-broker listener
        self.endpoints = endpoints
        self.rack = rack
        self.events: asyncio.Queue = asyncio.Queue()
        self.zk = ZkClient.from_config(
            {
                "zookeeper.connect": config.get("zookeeper.connect"),
                "zookeeper.session.timeout.ms": config.get("zookeeper.session.timeout.ms"),
                "zookeeper.connection.timeout.ms": config.get("zookeeper.connection.timeout.ms"),
            },
            events=self.events,
        )
        self.broker_id = config.node_id
        self.broker_epoch = -1
        self.cluster_id = ""
        self.controller: ZkController | None = None
        self.registered_session: int | None = None
        self.on_session_lost: Callable[[], None] = lambda: None  # the broker stops leading
        self.on_registered: Callable[[int], None] = lambda broker_epoch: None
        self.on_config_change: Callable[[str], object] = lambda entity_path: None  # may return a coroutine
        self.on_controller_known: Callable[[int], None] = lambda controller_id: None  # from /controller
        self._task: asyncio.Task | None = None
        # /config/changes, and the ACL change paths: each a sequence of notifications (by path)
        self.notifications: dict[str, NotificationListener] = {}
        self.listen(zk_data.CONFIG_CHANGES_PATH, zk_data.CONFIG_CHANGE_PREFIX, self._on_config_notification)
        self._pending_watches: set[str] = set()
        self._suspended_since: float | None = None
        self.stopping = asyncio.Event()  # the broker's stop request: a start still waiting gives up

    # ---------------------------------------------------------------- start

    async def connect(self, stored_cluster_id: str | None, stored_broker_id: int | None) -> None:
        try:
            await self.zk.start()
        except ZooKeeperUnreachableError as exc:
            raise ClusterStartupError(str(exc)) from None
        except ValueError as exc:
            raise ClusterStartupError(str(exc)) from None
        for path in zk_data.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        self.cluster_id = await self._cluster_id(stored_cluster_id)
        self.broker_id = await self._broker_id(stored_broker_id)
        await self._wait_out_earlier_registration()

    async def _wait_out_earlier_registration(self) -> None:
        """A registration of our id held by another session is either an earlier life of this
        broker (killed with -9: ZooKeeper removes it when that session expires) or a live broker
        with the same id. Kafka refuses at once (a restart after a crash then fails until the
        session expires); we wait as long as a dead session can last and refuse only if it
        outlives that, or if another session takes the id meanwhile."""
        path = zk_data.broker_path(self.broker_id)
        holder = await self.zk.exists(path)
        if holder is None:
            return
        owner = holder.ephemeral_owner
        if owner:  # a persistent znode (owner 0) never expires: refuse at once
            wait_s = self.zk.session_timeout_ms / 1000 + STALE_SESSION_MARGIN_S
            log.warning(
                "broker.id %d is registered by an earlier session 0x%x (at %s); waiting up to %.0f s for it to "
                "expire (zookeeper.session.timeout.ms + %.0f s)",
                self.broker_id,
                owner,
                await self._registration_text(),
                wait_s,
                STALE_SESSION_MARGIN_S,
            )
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                try:
                    await asyncio.wait_for(self.stopping.wait(), STALE_SESSION_POLL_S)
                except TimeoutError:
                    pass
                else:
                    raise ClusterStartupError(
                        f"stopped while waiting for the earlier registration of broker.id {self.broker_id} to expire"
                    )
                holder = await self.zk.exists(path)
                if holder is None:
                    return
                if holder.ephemeral_owner != owner:
                    break  # another broker registered this id meanwhile: a live one
        raise ClusterStartupError(self._duplicate_message(await self._registration_text()))

    async def _cluster_id(self, stored: str | None) -> str:
        try:
            data, _ = await self.zk.get(zk_data.CLUSTER_ID_PATH)
            cluster_id = zk_data.decode_cluster_id(data)
        except NoNodeError:
            cluster_id = stored or zk_data.new_cluster_id()
            try:
                await self.zk.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(cluster_id), makepath=True)
            except NodeExistsError:  # another broker was first
                data, _ = await self.zk.get(zk_data.CLUSTER_ID_PATH)
                cluster_id = zk_data.decode_cluster_id(data)
        if stored and stored != cluster_id:
            raise ClusterStartupError(
                f"the log dirs belong to cluster {stored}, but ZooKeeper at {self.zk.connect_string} holds cluster "
                f"{cluster_id}; point zookeeper.connect at the right ensemble/chroot or use other log.dirs"
            )
        return cluster_id

    async def _broker_id(self, stored: int | None) -> int:
        configured = self.config.node_id
        if configured >= 0:
            if stored is not None and stored != configured:
                raise ClusterStartupError(
                    f"the log dirs belong to broker {stored}, but broker.id is {configured}; "
                    f"set broker.id={stored} or use other log.dirs"
                )
            return configured
        if stored is not None:
            return stored
        if not self.config.get("broker.id.generation.enable"):
            raise ClusterStartupError("broker.id is not set and broker.id.generation.enable is false; set broker.id")
        # Kafka's generated ids: the version of /brokers/seqid after a write, above reserved.broker.max.id
        stat = await self.zk.set(zk_data.BROKER_SEQUENCE_ID_PATH, b"")
        generated = self.config.get("reserved.broker.max.id") + stat.version
        log.info("generated broker id %d (reserved.broker.max.id + /brokers/seqid version)", generated)
        return generated

    async def _registration_text(self) -> str:
        try:
            data, _ = await self.zk.get(zk_data.broker_path(self.broker_id))
            reg = zk_data.decode_broker_registration(self.broker_id, data)
            return ", ".join(e.connection_string for e in reg.endpoints)
        except (NoNodeError, zk_data.ZkDataError):
            return "unknown address"

    def _duplicate_message(self, where: str) -> str:
        return (
            f"broker.id {self.broker_id} is already registered in ZooKeeper ({self.zk.connect_string}"
            f"{zk_data.broker_path(self.broker_id)}) by a live broker at {where}; give this broker another "
            "broker.id, or stop the other one"
        )

    def registration(self) -> zk_data.BrokerRegistration:
        return zk_data.BrokerRegistration(self.broker_id, tuple(self.endpoints), self.rack, timestamp_ms=_now_ms())

    async def register(self) -> None:
        """Create ``/brokers/ids/<id>``, start the event task, and join the controller election."""
        await self._create_registration(first=True)
        self.controller = ZkController(self.broker_id, self.zk, self.config, security=self.security)
        self.controller.on_change = lambda: self.on_controller_known(self.controller.active_controller_id)
        self.controller._post = self.post
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-events")
        await self.call(self.controller.elect)

    async def update_registration(self, endpoints: list[zk_data.BrokerEndpoint]) -> None:
        """Rewrite ``/brokers/ids/<id>`` with new endpoints (a dynamic ``advertised.listeners``);
        the znode and its session stay, so the controller sees a modified broker, not a new one."""
        self.endpoints = list(endpoints)
        await self.zk.set(zk_data.broker_path(self.broker_id), zk_data.encode_broker_registration(self.registration()))

    async def _create_registration(self, *, first: bool) -> None:
        data = zk_data.encode_broker_registration(self.registration())
        path = zk_data.broker_path(self.broker_id)
        deadline = time.monotonic() + self.zk.session_timeout_ms / 1000
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
                break
            except NodeExistsError:
                stat = await self.zk.exists(path)
                if stat is not None and stat.ephemeral_owner == self.zk.session_id:
                    break  # ours (a create that succeeded as the connection dropped)
                if first or time.monotonic() > deadline:
                    raise ClusterStartupError(self._duplicate_message(await self._registration_text())) from None
                await asyncio.sleep(0.2)  # our old session's znode, not yet expired
        stat = await self.zk.exists(path)
        self.broker_epoch = stat.czxid
        self.registered_session = self.zk.session_id
        self.on_registered(self.broker_epoch)
        log.info(
            "registered broker %d in ZooKeeper at %s (broker epoch %d, cluster %s, rack %s)",
            self.broker_id,
            path,
            self.broker_epoch,
            self.cluster_id,
            self.rack,
        )

    # ---------------------------------------------------------------- the event task

    def post(self, event) -> None:
        """Queue an event: an async callable run on the event task."""
        self.events.put_nowait(event)

    async def call(self, fn, *args):
        """Run ``await fn(*args)`` on the event task and return its result (or raise its error)."""
        future = asyncio.get_running_loop().create_future()

        async def run():
            try:
                result = await fn(*args)
            except BaseException as exc:
                if not future.done():
                    future.set_exception(exc)
                if isinstance(exc, ControllerMovedError | ZooKeeperError):
                    raise
                return
            if not future.done():
                future.set_result(result)

        self.post(run)
        return await future

    async def _run(self) -> None:
        while True:
            event = await self.events.get()
            try:
                if isinstance(event, SessionEvent):
                    await self._on_session(event)
                elif isinstance(event, WatchEvent):
                    await self._on_watch(event)
                else:
                    await event()
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                await self.controller.resign(str(exc))
                self._pending_watches.add(zk_data.CONTROLLER_PATH)
                await self._retry_pending()
            except ZooKeeperError as exc:
                log.warning("a cluster event failed on ZooKeeper (%s); will retry once connected", exc)
                if isinstance(event, WatchEvent):
                    self._pending_watches.add(event.path)
            except Exception:
                log.exception("handling cluster event %r failed", event)

    async def _on_session(self, event: SessionEvent) -> None:
        if event.state is SessionState.SUSPENDED:
            self._suspended_since = time.monotonic()
            log.warning(
                "lost the connection to ZooKeeper (%s); serving with the metadata we have while reconnecting",
                self.zk.connect_string,
            )
            return
        if event.state is SessionState.LOST:
            log.warning(
                "ZooKeeper session of broker %d expired: its registration is gone and its leaderships may have "
                "moved; it stops leading until the controller tells it again",
                self.broker_id,
            )
            self.registered_session = None
            self.on_session_lost()
            if self.controller is not None:
                await self.controller.resign("the ZooKeeper session expired")
            return
        if self._suspended_since is not None:
            log.info(
                "reconnected to ZooKeeper after %.1f s (session %s)",
                time.monotonic() - self._suspended_since,
                "kept" if event.session_id == self.registered_session else "new",
            )
            self._suspended_since = None
        if self.registered_session is not None and event.session_id != self.registered_session:
            self.registered_session = None
            self.on_session_lost()
            if self.controller is not None:
                await self.controller.resign("the ZooKeeper session changed")
        if self.registered_session is None and self.controller is not None:
            await self._create_registration(first=False)
            self._pending_watches |= {zk_data.CONTROLLER_PATH, *self.notifications}
            if self.controller.active:
                self._pending_watches |= {zk_data.BROKER_IDS_PATH, zk_data.TOPICS_PATH}
        await self._retry_pending()

    async def _retry_pending(self) -> None:
        pending, self._pending_watches = self._pending_watches, set()
        for path in sorted(pending):
            await self._on_watch(WatchEvent(WatchKind.CHANGED, path))

    async def _on_watch(self, event: WatchEvent) -> None:
        if event.kind is WatchKind.DROPPED:
            self._pending_watches.add(event.path)
            return
        path = event.path
        c = self.controller
        if c is None:
            return
        if path == zk_data.CONTROLLER_PATH:
            await c.on_controller_change()
        elif path == zk_data.BROKER_IDS_PATH or path.startswith(zk_data.BROKER_IDS_PATH + "/"):
            await c.on_broker_change()  # a broker came or went, or (its znode) changed endpoints
        elif path == zk_data.TOPICS_PATH:
            await c.on_topic_change()
        elif path.startswith(zk_data.TOPICS_PATH + "/"):
            await c.on_partition_modification(path.rsplit("/", 1)[-1])
        elif path == zk_data.DELETE_TOPICS_PATH:
            await c.on_topic_deletion()
        elif path == zk_data.ISR_CHANGE_NOTIFICATION_PATH:
            await c.on_isr_change_notification()
        elif path == zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH:
            await c.on_log_dir_event_notification()
        elif path == zk_data.REASSIGN_PARTITIONS_PATH:
            await c.on_zk_reassignment()
        elif path == zk_data.PREFERRED_REPLICA_ELECTION_PATH:
            await c.on_zk_preferred_election()
        elif path in self.notifications:
            await self.notifications[path].poll()

    # ---------------------------------------------------------------- change notifications

    def listen(self, path: str, prefix: str, on_notification: Callable[[bytes], object]) -> None:
        """Hand each new ``<path>/<prefix><seq>`` notification to ``on_notification(data)`` on the
        event task (it may return a coroutine). Call ``start_listening()`` after adding them."""
        self.notifications[path] = NotificationListener(self.zk, path, prefix, on_notification)

    async def start_listening(self) -> None:
        """Watch every notification path, taking what is there as handled: call it right before
        reading the state they announce changes of, so that no change falls in between."""
        for listener in self.notifications.values():
            await listener.start()

    async def _on_config_notification(self, data: bytes) -> None:
        """``/config/changes``: a notification names an entity whose config to re-read."""
        try:
            entity_path = zk_data.decode_config_change(data)
        except zk_data.ZkDataError as exc:
            log.warning("ignoring a config change notification: %s", exc)
            return
        result = self.on_config_change(entity_path)
        if asyncio.iscoroutine(result):
            await result

    # ---------------------------------------------------------------- API calls on the controller

    def is_active_controller(self) -> bool:
        return self.controller is not None and self.controller.active

    def nudge_topics(self) -> None:
        """A handler just wrote ZooKeeper: let our controller (if active) look without waiting for the watch."""
        if self.is_active_controller():
            self.post(self.controller.on_topic_change)
            self.post(self.controller.on_topic_deletion)

    async def on_controller(self, method: str, *args):
        """Run a controller method on the event task; NotActiveController if we are not it."""
        if not self.is_active_controller():
            raise NotActiveController(f"broker {self.broker_id} is not the controller")
        return await self.call(getattr(self.controller, method), *args)

    # ---------------------------------------------------------------- log dir failures

    async def report_log_dir_failure(self, log_dir: str) -> None:
        """Tell the controller a log dir of this broker failed: Kafka's
        ``/log_dir_event_notification/log_dir_event_<seq>``. Retried while ZooKeeper is away."""
        while True:
            try:
                path = await self.zk.create(
                    zk_data.log_dir_event_path(), zk_data.encode_log_dir_event(self.broker_id), sequential=True, makepath=True
                )
                log.info("reported the failure of log dir %s to the controller (%s)", log_dir, path)
                return
            except ZooKeeperError as exc:
                log.warning("could not report the failure of log dir %s yet: %s; retrying", log_dir, exc)
                await asyncio.sleep(1)

    # ---------------------------------------------------------------- shutdown

    async def controlled_shutdown(self, controller_address: Callable[[int], tuple[str, int] | None]) -> bool:
        """Ask the controller to move this broker's leaderships away (Kafka's controlled shutdown);
        True once it leads no partition with other replicas. Kafka's retries: up to
        ``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms``
        apart, while the controller cannot be reached or answers partitions it could not move
        (no other replica in sync); then False, and the broker shuts down anyway."""
        attempts = max(0, self.config.get("controlled.shutdown.max.retries"))
        backoff = max(0, self.config.get("controlled.shutdown.retry.backoff.ms")) / 1000
        remaining: set | None = None
        for attempt in range(1, attempts + 1):
            t0 = time.perf_counter()
            try:
                remaining = await self._ask_for_controlled_shutdown(controller_address)
            except (BrokerLinkError, NotActiveController, ZooKeeperError, ConnectionError) as exc:
                log.warning("controlled shutdown attempt %d of %d failed: %s", attempt, attempts, exc)
                remaining = None
            if remaining is not None and not remaining:
                log.info("controlled shutdown of broker %d done in %.0f ms", self.broker_id, (time.perf_counter() - t0) * 1000)
                return True
            if remaining:
                log.warning(
                    "controlled shutdown attempt %d of %d: broker %d still leads %d partitions (%s)",
                    attempt,
                    attempts,
                    self.broker_id,
                    len(remaining),
                    _names(remaining),
                )
            if attempt < attempts:
                log.info("retrying the controlled shutdown in %.0f ms", backoff * 1000)
                await asyncio.sleep(backoff)
        if remaining:
            log.warning(
                "shutting down without a complete controlled shutdown after %d attempts; partitions left "
                "led by broker %d (unavailable until another replica leads them): %s",
                attempts,
                self.broker_id,
                _names(remaining, limit=None),
            )
        else:
            log.warning(
                "shutting down without a controlled shutdown: the controller could not be reached in %d attempts",
                attempts,
            )
        return False

    async def _ask_for_controlled_shutdown(self, controller_address) -> set | None:
        if self.is_active_controller():
            return await self.on_controller("controlled_shutdown", self.broker_id, self.broker_epoch)
        controller_id = self.controller.active_controller_id if self.controller else -1
        address = controller_address(controller_id) if controller_id >= 0 else None
        if address is None:
            raise NotActiveController("no controller is known")
        link = BrokerLink(
            address[0],
            address[1],
            controller_id,
            f"broker-{self.broker_id}",
            self.config.get("controller.socket.timeout.ms") / 1000,
            self.security,
        )
        try:
            response = await link.request(
                cs_schema.API_KEY,
                cs_schema.VERSION,
                cs_schema.ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch),
            )
        finally:
            link.close()
        if response.error_code:
            raise NotActiveController(f"controller {controller_id} answered error {int(response.error_code)}")
        return {TopicPartition(p.topic_name, p.partition_index) for p in response.remaining_partitions}

    async def close(self) -> None:
        if self.controller is not None and self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(self.call(self.controller.close), 5)
            except (TimeoutError, ZooKeeperError, ControllerMovedError):
                pass
        await cancel_and_wait(self._task)
        await self.zk.close()  # our ephemeral znodes go now, not after the session timeout


def _names(partitions, limit: int | None = 10) -> str:
    names = sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)
    more = f" and {len(names) - limit} more" if limit is not None and len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def demoted(state):
    """A partition state with no leader: what a broker that lost its session serves from."""
    return replace(state, leader=-1)


def _now_ms() -> int:
    return int(time.time() * 1000)
