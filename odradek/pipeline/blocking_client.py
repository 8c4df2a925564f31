"""A small blocking Kafka client for Spark tasks: metadata, offsets, fetch, produce.

Spark runs the data source's ``read`` and ``write`` in short-lived Python tasks on
executors. They need a handful of requests, answered fast and in a fixed order, with no
background threads to start or stop: this module is that, a blocking transport around the
sans-IO requesting side of a connection that the Python client also uses
(``odradek.protocol.client_connection``). It speaks to Odradek or to any Kafka broker.

One ``Connection`` per broker, one socket, requests answered in order (Kafka's rule);
``send`` and ``receive`` are split so that a reader can ask for the next fetch before it
decodes the current one. ``Cluster`` holds the bootstrap list, the metadata (leaders by
topic-partition) and the connections, and refreshes metadata when a broker says it is
no longer the leader. Not thread-safe: one owner (one Spark task, or the driver).

Security: ``security`` is the client's Kafka-named settings (``security.protocol``,
``ssl.*``, ``sasl.*``, as strings, so they travel to executors); a connection wraps its
socket in TLS and runs the SASL exchange (SaslHandshake, SaslAuthenticate) after
ApiVersions, as the asyncio client's connection does. Wrong credentials raise
``SaslAuthenticationFailedError``, never retried.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.client.client_config import parse_bootstrap
from odradek.protocol import api_keys, errors, messages
from odradek.protocol.client_connection import MAX_RESPONSE_SIZE, ClientConnection, FrameError
from odradek.protocol.sasl_mechanisms import SaslFailure

if TYPE_CHECKING:
    from odradek.net.connection_security import ConnectionSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0

# Versions this module was written against (all use topic names, not ids).
_MAX = {
    api_keys.PRODUCE: 9,
    api_keys.FETCH: 12,
    api_keys.LIST_OFFSETS: 7,
    api_keys.METADATA: 9,
    api_keys.SASL_HANDSHAKE: 1,
    api_keys.SASL_AUTHENTICATE: 2,
}

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


# Kafka-named client security settings (security.protocol, ssl.*, sasl.*) as (key, value) pairs.
SecuritySettings = tuple[tuple[str, str], ...]
SECURITY_KEY_PREFIXES = ("security.protocol", "ssl.", "sasl.")


def is_security_key(name: str) -> bool:
    return name.lower().startswith(SECURITY_KEY_PREFIXES)


@functools.lru_cache(maxsize=16)
def security_of(settings: SecuritySettings) -> ConnectionSecurity | None:
    """The TLS context and SASL credentials of ``settings`` (None for PLAINTEXT), made once per
    process: an SSL context is not sent to executors, its settings are. A bad setting raises
    the client's ``ConfigError`` naming it."""
    if not settings:
        return None
    from odradek.client.client_config import connection_security, resolve

    return connection_security(
        resolve("admin", {"bootstrap.servers": "127.0.0.1:9092", **dict(settings)}, {})
    )


class WireError(errors.KafkaError):
    """A failure on the way to a broker (connection refused, closed, timed out)."""

    retriable = True
    invalid_metadata = True


class TlsTrustError(WireError):
    """The broker's certificate is not trusted (Kafka's SslAuthenticationException): not retried."""

    retriable = False
    invalid_metadata = False


class Retry:
    """Retrying one operation through a leader change or a broker restart.

    A broker killed or restarted takes seconds to be replaced as leader (its ZooKeeper
    session must expire first), so retriable failures (a refused connection,
    NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION on a broker that has not heard of
    the topic yet, ...) are retried, with fresh metadata and a growing backoff, for the
    cluster's request timeout in all; other errors, and the last one, are raised.
    """

    def __init__(self, cluster: Cluster, what: str):
        self.cluster = cluster
        self.what = what
        self.deadline = time.monotonic() + cluster.timeout
        self.delay = _FIRST_BACKOFF_S
        self.failures = 0

    def after(self, exc: Exception) -> None:
        """Back off after ``exc``, or raise it when it is not retriable or time is up."""
        self.failures += 1
        if not getattr(exc, "retriable", False) or time.monotonic() + self.delay > self.deadline:
            raise exc
        if self.failures == 1:
            log.info("%s: %s; retrying with fresh metadata", self.what, exc)
        self.cluster.partitions.clear()
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, _MAX_BACKOFF_S)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int


class Connection:
    """One socket to one broker; requests go out and answers come back in order.

    The blocking transport of ``ClientConnection``: that core frames, numbers and decodes,
    negotiates versions (capped at ``_MAX``); this class moves the bytes, reading each
    answer whole (a size prefix, then exactly that many bytes into one buffer).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "odradek-spark",
        timeout: float = 30.0,
        security: ConnectionSecurity | None = None,
    ):
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self._core = ClientConnection(client_id, version_caps=_MAX)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireError(f"cannot connect to {host}:{port}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._sock = sock
        if security is not None and security.ssl_context is not None:
            try:
                self._sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise TlsTrustError(
                    f"TLS to {host}:{port} failed: {exc.verify_message}; check ssl.ca.location "
                    "(ssl.truststore.location) names the CA that signed the broker's certificate"
                ) from None
            except OSError as exc:
                sock.close()
                raise WireError(f"TLS to {host}:{port} failed: {exc}") from None
        self._negotiate()
        if security is not None and security.sasl:
            self._authenticate(security)

    def _negotiate(self) -> None:
        while True:
            version, values = self._core.api_versions_request()
            if self._core.api_versions_answered(self.request(api_keys.API_VERSIONS, values, version=version)):
                return

    def _authenticate(self, security: ConnectionSecurity) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate (KIP-152)."""
        where = f"{self.host}:{self.port}"
        if api_keys.SASL_HANDSHAKE not in self.versions or api_keys.SASL_AUTHENTICATE not in self.versions:
            self.close()
            raise errors.UnsupportedVersionError(
                f"{where} does not speak SASL (SaslHandshake v1, SaslAuthenticate)"
            )
        shake = self.request(api_keys.SASL_HANDSHAKE, {"mechanism": security.mechanism}, version=1)
        if shake.error_code:
            self.close()
            raise errors.error_for(shake.error_code)(
                f"{where} does not enable SASL mechanism {security.mechanism} on this listener "
                f"(it enables {', '.join(shake.mechanisms) or 'none'}): check security.protocol and sasl.mechanism"
            )
        client = security.sasl_client()
        token = client.first()
        while token is not None:
            resp = self.request(api_keys.SASL_AUTHENTICATE, {"auth_bytes": token})
            if resp.error_code:
                self.close()
                raise errors.error_for(resp.error_code)(
                    f"{where}: {resp.error_message or 'SASL authentication failed'}"
                )
            try:
                token = client.step(resp.auth_bytes)
            except SaslFailure as exc:
                self.close()
                raise errors.SaslAuthenticationFailedError(f"{where}: {exc}") from None

    @property
    def versions(self) -> dict[int, int]:
        return self._core.versions

    @property
    def in_flight(self) -> int:
        """Requests sent whose answers are not read yet."""
        return self._core.in_flight

    def version(self, api_key: int) -> int:
        try:
            return self._core.versions[api_key]
        except KeyError:
            raise errors.UnsupportedVersionError(
                f"{messages.api_name(api_key)} is not supported by {self.host}:{self.port}"
            ) from None

    def send(
        self, api_key: int, values: dict, *, version: int | None = None, expect_response: bool = True
    ) -> int:
        """Send a request; returns its correlation id for :meth:`receive`.

        ``expect_response=False`` is for Produce with acks=0, which the broker never answers.
        """
        if version is None:
            version = self.version(api_key)
        correlation_id, frame = self._core.request(api_key, version, values, expect_response=expect_response)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise WireError(f"send to {self.host}:{self.port} failed: {exc}") from None
        return correlation_id

    def receive(self, correlation_id: int):
        """The response to the oldest request in flight, which must be ``correlation_id``."""
        expected = self._core.oldest_in_flight()
        if expected != correlation_id:
            raise RuntimeError(f"responses are read in order: expected {expected}, asked {correlation_id}")
        try:
            response = self._core.response(self._read_frame())
        except FrameError as exc:
            self.close()
            raise WireError(f"bad response from {self.host}:{self.port}: {exc}") from None
        if response.correlation_id != expected:
            self.close()
            raise WireError(
                f"{self.host}:{self.port} answered correlation id {response.correlation_id}, expected {expected}"
            )
        if response.error is not None:
            raise response.error
        return response.entity

    def request(self, api_key: int, values: dict, *, version: int | None = None):
        return self.receive(self.send(api_key, values, version=version))

    def _read_frame(self) -> memoryview:
        head = self._read_exactly(4)
        (size,) = _SIZE.unpack(head)
        if not 0 <= size <= MAX_RESPONSE_SIZE:
            self.close()
            raise WireError(f"{self.host}:{self.port} sent a response size of {size} bytes")
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        sock = self._sock
        try:
            while got < n:
                k = sock.recv_into(view[got:], n - got)
                if not k:
                    raise OSError("connection closed by the broker")
                got += k
        except OSError as exc:
            self.close()
            raise WireError(f"receive from {self.host}:{self.port} failed: {exc}") from None
        return view

    def close(self) -> None:
        sock, self._sock = getattr(self, "_sock", None), None
        if sock is not None:
            sock.close()

    @property
    def closed(self) -> bool:
        return self._sock is None


class Cluster:
    """Bootstrap servers, metadata, and a connection per broker, for one owner."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "odradek-spark",
        timeout: float = 30.0,
        security: SecuritySettings = (),
    ):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout = timeout
        self.security_settings = tuple(sorted(dict(security).items()))
        self._security = security_of(self.security_settings)
        self.brokers: dict[int, tuple[str, int]] = {}
        self.partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._connections: dict[int, Connection] = {}
        self._bootstrap_conn: Connection | None = None

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def has_pending(self) -> bool:
        """Whether a request is still waiting for its answer on some connection."""
        conns = [*self._connections.values(), self._bootstrap_conn]
        return any(c is not None and c.in_flight for c in conns)

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    # -- connections and metadata ---------------------------------------------------------

    def _any_connection(self) -> Connection:
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return self._bootstrap_conn
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                self._bootstrap_conn = self._connect(host, port)
                return self._bootstrap_conn
            except WireError as exc:
                if not exc.retriable:
                    raise
                last = exc
        raise WireError(f"no bootstrap server reachable ({last})")

    def connection(self, node_id: int) -> Connection:
        conn = self._connections.get(node_id)
        if conn is None or conn.closed:
            if node_id not in self.brokers:
                self.refresh(None)
            try:
                host, port = self.brokers[node_id]
            except KeyError:
                raise errors.LeaderNotAvailableError(f"broker {node_id} is not in the metadata") from None
            conn = self._connect(host, port)
            self._connections[node_id] = conn
        return conn

    def _connect(self, host: str, port: int) -> Connection:
        return Connection(host, port, client_id=self.client_id, timeout=self.timeout, security=self._security)

    def refresh(self, topics: Iterable[str] | None) -> dict[str, dict[int, PartitionInfo]]:
        """Fetch metadata for ``topics`` (None: every topic); returns and caches it."""
        conn = self._any_connection()
        names = None if topics is None else [{"name": t} for t in topics]
        try:
            response = conn.request(api_keys.METADATA, {"topics": names, "allow_auto_topic_creation": False})
        except WireError:
            response = self._any_connection().request(
                api_keys.METADATA, {"topics": names, "allow_auto_topic_creation": False}
            )
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        found = {}
        for t in response.topics:
            if t.error_code:
                if t.error_code == errors.ErrorCode.unknown_topic_or_partition:
                    self.partitions.pop(t.name, None)
                    continue
                errors.raise_for(t.error_code, f"metadata for topic {t.name}")
            if t.is_internal and topics is None:
                continue
            found[t.name] = {
                p.partition_index: PartitionInfo(t.name, p.partition_index, p.leader_id, p.leader_epoch)
                for p in t.partitions
            }
        self.partitions.update(found)
        return found

    def topic_partitions(self, topics: Iterable[str], *, refresh: bool = False) -> dict[str, list[int]]:
        """Partition indexes per topic; topics that do not exist are left out."""
        topics = list(topics)
        missing = [t for t in topics if t not in self.partitions]
        if refresh or missing:
            self.refresh(topics)
        return {t: sorted(self.partitions[t]) for t in topics if t in self.partitions}

    def all_topics(self) -> list[str]:
        return sorted(self.refresh(None))

    def leader(self, topic: str, partition: int) -> int:
        info = self.partitions.get(topic, {}).get(partition)
        if info is None or info.leader < 0:
            self.refresh([topic])
            info = self.partitions.get(topic, {}).get(partition)
        if info is None:
            raise errors.UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        if info.leader < 0:
            raise errors.LeaderNotAvailableError(f"{topic}-{partition} has no leader")
        return info.leader

    def _by_leader(self, tps: Iterable[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        out: dict[int, list] = {}
        for tp in tps:
            out.setdefault(self.leader(*tp), []).append(tp)
        return out

    def retry(self, what: str) -> Retry:
        """A retry budget of ``timeout`` seconds for one operation (see ``Retry``)."""
        return Retry(self, what)

    # -- admin ----------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, *, replication_factor: int = -1, configs: dict | None = None
    ) -> bool:
        """Create a topic and wait until its leaders serve it; returns False when it already existed.

        The CreateTopics request goes through the Python client's admin, which sends it to
        the controller and follows the controller when it moves (NOT_CONTROLLER). -1
        partitions or replicas take the brokers' defaults (``num.partitions``,
        ``default.replication.factor``).
        """
        from odradek.client.blocking import Admin
        from odradek.client.structs import NewTopic

        topic = NewTopic(
            name, partitions, replication_factor, {k: str(v) for k, v in (configs or {}).items()}
        )
        servers = ",".join(f"{host}:{port}" for host, port in self.bootstrap)
        admin = Admin(
            {
                "bootstrap_servers": servers,
                "client_id": self.client_id,
                "default_api_timeout_ms": int(self.timeout * 1000),
                **dict(self.security_settings),
            }
        )
        try:
            admin.create_topics([topic])
            created = True
        except errors.TopicAlreadyExistsError:
            created = False  # by someone else, maybe a moment ago: wait for it all the same
        finally:
            admin.close()
        self.await_topic(name)
        return created

    def await_topic(self, name: str) -> dict[int, PartitionInfo]:
        """Wait until every partition of ``name`` has a leader that itself lists the topic
        with that leadership (a new topic reaches the brokers a moment after the controller
        made it); returns its partitions. UnknownTopicOrPartitionError after ``timeout``."""
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while True:
            found = self._served(name)
            if found:
                return found
            if time.monotonic() > deadline:
                raise errors.UnknownTopicOrPartitionError(
                    f"topic {name} is not served by its leaders after {self.timeout:.0f}s"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _served(self, name: str) -> dict[int, PartitionInfo] | None:
        try:
            found = self.refresh([name]).get(name)
            if not found or any(p.leader < 0 for p in found.values()):
                return None
            for node in {p.leader for p in found.values()}:
                seen = self._leaders_seen_by(node, name)
                if any(seen.get(i) != node for i, p in found.items() if p.leader == node):
                    return None
        except (WireError, errors.KafkaError) as exc:
            if not getattr(exc, "retriable", False):
                raise
            self.partitions.pop(name, None)
            return None
        return found

    def _leaders_seen_by(self, node: int, topic: str) -> dict[int, int]:
        """``{partition: leader}`` of ``topic`` as broker ``node``'s own metadata has it."""
        response = self.connection(node).request(
            api_keys.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
        return {
            p.partition_index: p.leader_id
            for t in response.topics
            if t.name == topic and not t.error_code
            for p in t.partitions
        }

    # -- offsets --------------------------------------------------------------------------

    def list_offsets(
        self, specs: dict[tuple[str, int], int], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """``{tp: timestamp}`` → ``{tp: (offset, timestamp)}``; -2 earliest, -1 latest.

        The offset is -1 when no record has a timestamp at or after the one asked for.
        """
        result: dict[tuple[str, int], tuple[int, int]] = {}
        todo = dict(specs)
        retry = self.retry("list offsets")
        while todo:
            try:
                for node, tps in self._by_leader(todo).items():
                    topics: dict[str, list] = {}
                    for topic, partition in tps:
                        topics.setdefault(topic, []).append(
                            {
                                "partition_index": partition,
                                "current_leader_epoch": -1,
                                "timestamp": todo[(topic, partition)],
                            }
                        )
                    response = self.connection(node).request(
                        api_keys.LIST_OFFSETS,
                        {
                            "replica_id": -1,
                            "isolation_level": isolation_level,
                            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                        },
                    )
                    for t in response.topics:
                        for p in t.partitions:
                            tp = (t.name, p.partition_index)
                            errors.raise_for(p.error_code, f"list offsets {t.name}-{p.partition_index}")
                            result[tp] = (p.offset, p.timestamp)
                            todo.pop(tp, None)
            except (WireError, errors.KafkaError) as exc:
                retry.after(exc)
        return result

    def offsets(
        self, tps: Iterable[tuple[str, int]], timestamp: int, *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[tuple[str, int], int]:
        return {
            tp: off
            for tp, (off, _) in self.list_offsets(
                {tp: timestamp for tp in tps}, isolation_level=isolation_level
            ).items()
        }

    # -- fetch ----------------------------------------------------------------------------

    def fetch_request(
        self, tp: tuple[str, int], offset: int, *, max_bytes: int, isolation_level: int, max_wait_ms: int = 0
    ):
        """Send one Fetch for one partition; returns (connection, correlation id)."""
        conn = self.connection(self.leader(*tp))
        corr = conn.send(
            api_keys.FETCH,
            {
                "replica_id": -1,
                "max_wait": max_wait_ms,
                "min_bytes": 1 if max_wait_ms else 0,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": tp[0],
                        "partitions": [
                            {
                                "partition": tp[1],
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
            },
        )
        return conn, corr

    @staticmethod
    def fetch_result(conn: Connection, corr: int):
        """The single partition of a fetch response (error code already checked by the caller)."""
        response = conn.receive(corr)
        errors.raise_for(response.error_code, "fetch")
        return response.responses[0].partitions[0]

    # -- produce --------------------------------------------------------------------------

    def produce(
        self, node: int, batches: dict[tuple[str, int], bytes], *, acks: int = -1, timeout_ms: int = 30000
    ) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """One Produce request to ``node``: ``{tp: batch}`` → ``{tp: (error code, base offset, message)}``."""
        topics: dict[str, list] = {}
        for (topic, partition), data in batches.items():
            topics.setdefault(topic, []).append({"index": partition, "records": data})
        values = {
            "transactional_id": None,
            "acks": acks,
            "timeout": timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }
        if acks == 0:
            self.connection(node).send(api_keys.PRODUCE, values, expect_response=False)
            return {tp: (0, -1, None) for tp in batches}
        response = self.connection(node).request(api_keys.PRODUCE, values)
        out = {}
        for t in response.responses:
            for p in t.partition_responses:
                out[(t.name, p.index)] = (int(p.error_code), p.base_offset, p.error_message)
        return out


# -- one cluster per worker process ------------------------------------------------------------

_SHARED: dict[tuple, Cluster] = {}


@contextlib.contextmanager
def borrowed(
    bootstrap_servers: str, *, client_id: str, timeout: float, security: SecuritySettings = ()
) -> Iterator[Cluster]:
    """This process's Cluster for these settings, kept between Spark tasks.

    Spark reuses Python workers, so a task finds the previous task's connections and
    metadata and skips the connect, ApiVersions and Metadata round trips. If the task
    fails or stops early (an exception, or a generator closed half-way), responses may be
    left unread on the sockets: the connections are closed, and the next task reconnects.
    """
    key = (bootstrap_servers, client_id, timeout, tuple(security), os.getpid())
    cluster = _SHARED.pop(key, None)  # taken out while in use: nested borrows get their own
    if cluster is None:
        cluster = Cluster(bootstrap_servers, client_id=client_id, timeout=timeout, security=security)
    try:
        yield cluster
    except BaseException:
        cluster.close()
        raise
    if key in _SHARED or cluster.has_pending():
        cluster.close()
    else:
        _SHARED[key] = cluster
