"""The network client shared by the producer, consumer and admin: connections and metadata.

``NetClient`` owns one connection per broker (bootstrap addresses get negative ids until
metadata names the brokers), reconnects with exponential backoff, and keeps the
``ClusterMetadata`` snapshot fresh. It owns one long-lived task, the metadata refresher:
it refreshes when asked (``request_update``) or when the snapshot is older than
``metadata_max_age_ms``, backing off after failures.

An authentication failure (wrong credentials, a SASL mechanism or security protocol the
listener does not use: ``is_authentication_failure``) is fatal, as in Kafka's clients: every
metadata wait fails with it at once instead of retrying until its deadline. So does a topic
the broker answers TOPIC_AUTHORIZATION_FAILED for, in ``wait_for_topic``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random

from odradek.client.client_config import connection_security
from odradek.client.client_errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.cluster_metadata import ClusterMetadata
from odradek.net.connection import Connection
from odradek.net.connection_errors import is_authentication_failure
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, error_for

from .structs import BrokerInfo

log = logging.getLogger("odradek.client")

_client_ids = itertools.count(1)


def default_client_id(kind: str) -> str:
    return f"odradek-{kind}-{next(_client_ids)}"


class Backoff:
    """Exponential backoff with jitter, as Kafka's clients do."""

    def __init__(self, base_ms: int, max_ms: int):
        self.base = base_ms / 1000
        self.max = max(max_ms, base_ms) / 1000
        self.failures = 0

    def next(self) -> float:
        delay = min(self.max, self.base * (2 ** min(self.failures, 20)))
        self.failures += 1
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.failures = 0


class NetClient:
    def __init__(self, config: dict, kind: str, allow_auto_topic_creation: bool = True):
        self.config = config
        self.client_id = config["client_id"] or default_client_id(kind)
        self.request_timeout_ms = config["request_timeout_ms"]
        self.security = connection_security(config)  # None for PLAINTEXT
        self._bootstrap = config["bootstrap_servers"]
        self._allow_auto_create = allow_auto_topic_creation
        self.cluster = ClusterMetadata()
        self._conns: dict[int, Connection] = {}
        self._connecting: dict[int, asyncio.Task] = {}
        self._node_backoff: dict[int, tuple[Backoff, float]] = {}
        self._topics: set[str] = set()
        self._all_topics = False
        self._update_waiters: list[asyncio.Future] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._last_refresh = 0.0
        self._last_error: BaseException | None = None
        self._fatal: BaseException | None = None  # an authentication failure, until a refresh succeeds
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners = []  # callables(cluster) run after each refresh
        self._connection_listeners = []  # callables(node_id) run after each new connection
        self._extra_nodes: dict[int, tuple[str, int]] = {}  # e.g. the group coordinator's connection
        self._bootstrap_index = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._task is not None:
            return
        if self._closed:
            raise ClientClosedError("client is closed")
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._wakeup.set()
        self._task = self._loop.create_task(self._metadata_loop(), name=f"{self.client_id}-metadata")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [t for t in [self._task, *self._connecting.values()] if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:  # noqa: S110 - shutting down; the task's error is irrelevant now
                pass
        for conn in list(self._conns.values()):
            conn.on_close = None
            conn.close(ClientClosedError("client closed"))
        self._conns.clear()
        for w in self._update_waiters:
            if not w.done():
                w.set_exception(ClientClosedError("client closed"))
                w.exception()  # nobody may be waiting: do not log it as unretrieved
        self._update_waiters.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("client is closed")

    # -- connections ---------------------------------------------------------------------

    def register_node(self, conn_id: int, host: str, port: int) -> None:
        """Give an extra connection id its own address (a second connection to a broker)."""
        if self._extra_nodes.get(conn_id) != (host, port):
            self._extra_nodes[conn_id] = (host, port)
            conn = self._conns.pop(conn_id, None)
            if conn is not None:
                conn.on_close = None
                conn.close()

    def _address(self, node_id: int) -> tuple[str, int]:
        extra = self._extra_nodes.get(node_id)
        if extra is not None:
            return extra
        if node_id < 0:
            return self._bootstrap[(-node_id - 1) % len(self._bootstrap)]
        b = self.cluster.brokers.get(node_id)
        if b is None:
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return b.host, b.port

    def connection(self, node_id: int) -> Connection | None:
        """The connected connection to ``node_id``; starts connecting if there is none."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        self._start_connect(node_id)
        return None

    def _start_connect(self, node_id: int) -> asyncio.Task | None:
        if self._closed:
            return None
        task = self._connecting.get(node_id)
        if task is not None:
            return task
        info = self._node_backoff.get(node_id)
        if info is not None and info[1] > self._loop.time():
            return None
        task = self._loop.create_task(self._connect(node_id), name=f"{self.client_id}-connect-{node_id}")
        self._connecting[node_id] = task
        task.add_done_callback(self._connect_done)
        return task

    def _connect_done(self, task: asyncio.Task) -> None:
        for node_id, t in list(self._connecting.items()):
            if t is task:
                del self._connecting[node_id]
        if not task.cancelled() and task.exception() is not None:
            self._last_error = task.exception()
            if is_authentication_failure(self._last_error):
                self._fatal_failure(self._last_error)
        if self._wakeup is not None:
            self._wakeup.set()  # metadata waits and the sender may be waiting for this

    async def _connect(self, node_id: int) -> Connection:
        host, port = self._address(node_id)
        conn = Connection(host, port, node_id, self.client_id, self.request_timeout_ms, security=self.security)
        try:
            await conn.connect(self.config["socket_connection_setup_timeout_ms"] / 1000)
        except BaseException:
            backoff = self._node_backoff.get(node_id, (None,))[0] or Backoff(
                self.config["reconnect_backoff_ms"], self.config["reconnect_backoff_max_ms"]
            )
            self._node_backoff[node_id] = (backoff, self._loop.time() + backoff.next())
            raise
        self._node_backoff.pop(node_id, None)
        conn.on_close = self._on_conn_close
        self._conns[node_id] = conn
        for cb in list(self._connection_listeners):
            cb(node_id)
        return conn

    def add_connection_listener(self, cb) -> None:
        self._connection_listeners.append(cb)

    def _on_conn_close(self, conn: Connection, exc: BaseException) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
        if not self._closed and 0 <= conn.node_id and conn.node_id not in self._extra_nodes:
            log.info("connection to broker %s closed: %s", conn.node_id, exc)
            self.request_update()

    async def get_connection(self, node_id: int) -> Connection:
        self.check_open()
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            info = self._node_backoff.get(node_id)
            if info is not None:
                delay = info[1] - self._loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            task = self._start_connect(node_id)
            if task is None:
                self.check_open()
                raise KafkaConnectionError(f"broker {node_id} is not reachable")
        return await asyncio.shield(task)

    async def call(self, node_id: int, api_key: int, values, *, version=None, timeout=None):
        conn = await self.get_connection(node_id)
        return await conn.send(api_key, values, version=version, timeout=timeout)

    def least_loaded_node(self) -> int:
        """A broker to send metadata-style requests to: connected and idle first."""
        best, best_load = None, None
        brokers = list(self.cluster.brokers)
        random.shuffle(brokers)
        for node_id in brokers:
            conn = self._conns.get(node_id)
            if conn is not None and not conn.closed:
                load = conn.in_flight
            else:
                info = self._node_backoff.get(node_id)
                if info is not None and info[1] > self._loop.time():
                    continue
                load = 1000
            if best_load is None or load < best_load:
                best, best_load = node_id, load
        if best is not None:
            return best
        for node_id, conn in self._conns.items():
            if not conn.closed and node_id not in self._extra_nodes:
                return node_id
        n = len(self._bootstrap)
        for i in range(n):
            node_id = -((self._bootstrap_index + i) % n) - 1
            info = self._node_backoff.get(node_id)
            if info is None or info[1] <= self._loop.time():
                self._bootstrap_index += i + 1
                return node_id
        self._bootstrap_index += 1
        return -((self._bootstrap_index % n) + 1)

    async def any_connection(self) -> Connection:
        node = self.least_loaded_node()
        try:
            return await self.get_connection(node)
        except KafkaConnectionError:
            # Metadata may name brokers that are gone: try the bootstrap servers too.
            last = None
            for i in range(len(self._bootstrap)):
                try:
                    return await self.get_connection(-(i + 1))
                except KafkaConnectionError as exc:
                    last = exc
            raise last from None

    async def find_coordinator(self, key_type: int, key: str) -> tuple[int, int, str, int]:
        """One FindCoordinator round trip on any connection, for a group (key type 0) or a
        transactional id (1): ``(error code, node id, host, port)``."""
        conn = await self.any_connection()

        def values(version):
            if version >= 4:  # KIP-699: batched keys
                return {"key_type": key_type, "coordinator_keys": [key]}
            return {"key": key, "key_type": key_type}

        resp = await conn.send(api_keys.FIND_COORDINATOR, values)
        found = resp.coordinators[0] if hasattr(resp, "coordinators") else resp
        return int(found.error_code), int(found.node_id), found.host, int(found.port)

    def api_version(self, api_key: int) -> int | None:
        """The negotiated version on any open connection (None if none is open)."""
        for conn in self._conns.values():
            if not conn.closed:
                return conn.versions.get(api_key)
        return None

    # -- metadata ------------------------------------------------------------------------

    def add_topics(self, topics) -> bool:
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            return True
        return False

    def set_topics(self, topics) -> None:
        self._topics = set(topics)

    def want_all_topics(self, flag: bool = True) -> None:
        self._all_topics = flag

    def add_metadata_listener(self, cb) -> None:
        self._listeners.append(cb)

    def request_update(self) -> asyncio.Future:
        fut = self._loop.create_future()
        if self._closed:
            fut.set_exception(ClientClosedError("client is closed"))
            fut.exception()
            return fut
        self._update_waiters.append(fut)
        self._wakeup.set()
        return fut

    def update_requested(self) -> None:
        """Thread-safe nudge (no future)."""
        if self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def _fatal_failure(self, exc: BaseException) -> None:
        """An authentication failure: every metadata wait ends with it now, and
        ``raise_fatal`` raises it until a refresh succeeds."""
        self._fatal = exc
        waiters, self._update_waiters = self._update_waiters, []
        for w in waiters:
            if not w.done():
                w.set_exception(exc)
                w.exception()  # nobody may be waiting any more: not an unretrieved error

    async def refresh(self, timeout: float) -> ClusterMetadata:
        fut = self.request_update()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(fut)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"metadata refresh did not complete in {timeout:.1f}s{self._error_hint()}"
            ) from None
        return self.cluster

    def _error_hint(self) -> str:
        if self._last_error is None:
            return ""
        if not self.cluster.brokers:
            addrs = ",".join(f"{h}:{p}" for h, p in self._bootstrap)
            return f": cannot reach any bootstrap server ({addrs}): {self._last_error}"
        return f": {self._last_error}"

    def raise_fatal(self, topics=()) -> None:
        """Raise the authentication failure that stops this client, or TopicAuthorizationFailedError
        when the last metadata answer denied one of ``topics`` (a consumer's poll: as Kafka's)."""
        if self._fatal is not None:
            raise self._fatal
        denied = sorted(t for t in topics if self.cluster.topic_errors.get(t) == ErrorCode.topic_authorization_failed)
        if denied:
            raise error_for(ErrorCode.topic_authorization_failed)(f"not authorized to access topics {denied}")

    async def wait_for_topic(self, topic: str, timeout: float, fail_if_missing: bool = False) -> ClusterMetadata:
        """Wait until ``topic`` has partitions in the metadata; raise KafkaTimeoutError otherwise.

        A broker answer of TOPIC_AUTHORIZATION_FAILED raises TopicAuthorizationFailedError at
        once (as Kafka's producer does). With ``fail_if_missing``, so does an answer of
        UNKNOWN_TOPIC_OR_PARTITION (UnknownTopicOrPartitionError): the broker neither has the
        topic nor created it for this request; without it the wait goes on, for a topic that
        someone may be creating."""
        self.check_open()
        self.add_topics([topic])
        deadline = self._loop.time() + timeout
        while True:
            cluster = self.cluster
            if cluster.partition_count(topic):
                return cluster
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                err = cluster.topic_errors.get(topic)
                why = f" (broker says {wire_error_name(err)})" if err else self._error_hint()
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms{why}"
                )
            fut = self.request_update()
            try:
                async with asyncio.timeout(remaining):
                    await asyncio.shield(fut)
            except TimeoutError:
                continue
            _raise_final_topic_error(self.cluster, topic, fail_if_missing)
            if topic in self.cluster.topic_errors and not self.cluster.partition_count(topic):
                await asyncio.sleep(
                    min(self.config["retry_backoff_ms"] / 1000, max(0, deadline - self._loop.time()))
                )

    async def _metadata_loop(self) -> None:
        backoff = Backoff(self.config["retry_backoff_ms"], self.config["retry_backoff_max_ms"])
        max_age = self.config["metadata_max_age_ms"] / 1000
        while True:
            wait = self._last_refresh + max_age - self._loop.time()
            if wait > 0 and not self._wakeup.is_set():
                try:
                    async with asyncio.timeout(wait):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
            self._wakeup.clear()
            try:
                await self._refresh_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._last_error = exc
                if is_authentication_failure(exc):
                    self._fatal_failure(exc)
                delay = backoff.next()
                log.debug("metadata refresh failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                self._wakeup.set()
                continue
            backoff.reset()
            self._last_error = self._fatal = None
            self._close_idle()

    async def _refresh_once(self) -> None:
        conn = await self.any_connection()
        topics = None if self._all_topics else [{"name": t} for t in sorted(self._topics)]

        def values(version):
            if version == 0 and topics is None:
                return {"topics": ()}
            return {
                "topics": topics,
                "allow_auto_topic_creation": self._allow_auto_create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            }

        resp = await conn.send(api_keys.METADATA, values)
        self.cluster = ClusterMetadata.from_response(resp, self.cluster, all_topics=self._all_topics)
        self._last_refresh = self._loop.time()
        for node_id, b in self.cluster.brokers.items():
            c = self._conns.get(node_id)
            if c is not None and (c.host, c.port) != (b.host, b.port):
                c.close()
        waiters, self._update_waiters = self._update_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(self.cluster)
        for cb in self._listeners:
            cb(self.cluster)

    def _close_idle(self) -> None:
        idle = self.config["connections_max_idle_ms"]
        if idle < 0:
            return
        now = self._loop.time()
        for conn in list(self._conns.values()):
            if conn.in_flight == 0 and now - conn.last_used > idle / 1000:
                conn.on_close = None
                self._conns.pop(conn.node_id, None)
                conn.close()

    def brokers(self) -> list[BrokerInfo]:
        return list(self.cluster.brokers.values())


def _raise_final_topic_error(cluster: ClusterMetadata, topic: str, fail_if_missing: bool) -> None:
    if cluster.partition_count(topic):
        return
    code = cluster.topic_errors.get(topic)
    if code == ErrorCode.topic_authorization_failed:
        raise error_for(code)(f"not authorized to access topic {topic!r}")
    if fail_if_missing and code == ErrorCode.unknown_topic_or_partition:
        raise error_for(code)(f"topic {topic!r} does not exist, and the broker did not create it")


def wire_error_name(code: int | None) -> str:
    from odradek.protocol.errors import error_for

    return error_for(code).code.name.upper() if code else "NONE"
