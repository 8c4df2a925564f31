"""An asyncio face on kazoo: awaitable ZooKeeper reads and writes, watches and session changes as events.

``ZkClient`` owns one kazoo client (which runs its own threads). Every call returns an
awaitable; kazoo's completion is handed back to the event loop with
``call_soon_threadsafe``, so no code of ours ever runs on kazoo's threads. Watches and
session-state changes never call back into our state either: they become ``WatchEvent`` and
``SessionEvent`` objects on an asyncio queue (the controller passes its own event queue, so
ZooKeeper notifications line up with everything else it handles, as in Kafka's
ControllerEventManager).

What it adds to plain kazoo, following Kafka's KafkaZkClient / ZooKeeperClient:

* ``zookeeper.connect`` strings with a chroot (``127.0.0.1:2181/odradek``); the chroot is
  created if missing, as a Kafka broker does.
* Kafka's keys for timeouts (``zookeeper.session.timeout.ms``, default 18 s;
  ``zookeeper.connection.timeout.ms``, default the session timeout) and a one-line
  ``ZooKeeperUnreachableError`` when the ensemble cannot be reached in time.
* Conditional writes (``set``/``delete`` with an expected znode version) and multi-op
  transactions that can be fenced by the controller epoch: every state write of Kafka's
  controller is ``check(/controller_epoch, version)`` plus the write, so a controller that
  lost its election cannot change anything (``ControllerMovedError``).
* Requests made while disconnected wait for the connection (up to the connection timeout).
  Reads that lose the connection mid-flight are retried once it is back; writes raise
  ``ConnectionLossError`` because only the caller knows whether repeating one is safe.

Watches are one-shot, as in ZooKeeper: re-read with ``watch=True`` to watch again. When the
connection drops, kazoo forgets pending watches; each is delivered once as
``WatchKind.DROPPED`` so the owner knows to re-read (and re-watch) after the next CONNECTED.
A session that expires is reported as LOST; kazoo then opens a new session (CONNECTED with a
new ``session_id``), and the owner re-creates its ephemeral znodes.

Called by the ZooKeeper-backed metadata store, broker registration and the controller;
knows nothing of Kafka's data (zk_data has the paths and JSON).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, KazooState

from odradek.cluster.zk_data import CONTROLLER_EPOCH_PATH

log = logging.getLogger(__name__)
# kazoo warns on every reconnect attempt; while ZooKeeper is down that is a line a second. Our
# own INFO line per session-state change says it once. Lower this logger's level to debug kazoo.
kazoo_log = logging.getLogger(f"{__name__}.kazoo")
kazoo_log.setLevel(logging.ERROR)

DEFAULT_SESSION_TIMEOUT_MS = 18_000
MATCH_ANY_VERSION = -1

# Reconnect quickly after a ZooKeeper restart (kazoo's default backs off to 60 s).
_RECONNECT_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0, "max_jitter": 0.2}


# ---------------------------------------------------------------- errors


class ZooKeeperError(Exception):
    """A ZooKeeper request failed; ``path`` names the znode when there is one."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path
        # For a failed transaction: the index of the operation that failed.
        self.op_index: int | None = None


class ZooKeeperUnreachableError(ZooKeeperError):
    """No ZooKeeper server answered within the connection timeout."""


class ConnectionLossError(ZooKeeperError):
    """The connection dropped before the answer came; the request may or may not have happened."""


class SessionExpiredError(ZooKeeperError):
    """The session expired: its ephemeral znodes are gone and its watches with them."""


class ClientClosedError(ZooKeeperError):
    """The client was closed."""


class NoNodeError(ZooKeeperError):
    pass


class NodeExistsError(ZooKeeperError):
    pass


class BadVersionError(ZooKeeperError):
    """A conditional write named a znode version that is no longer current."""


class NotEmptyError(ZooKeeperError):
    pass


class ControllerMovedError(ZooKeeperError):
    """A fenced transaction's check of /controller_epoch failed: another controller was elected."""


_ERRORS: dict[type[Exception], type[ZooKeeperError]] = {
    kz.NoNodeError: NoNodeError,
    kz.NodeExistsError: NodeExistsError,
    kz.BadVersionError: BadVersionError,
    kz.NotEmptyError: NotEmptyError,
    kz.ConnectionLoss: ConnectionLossError,
    kz.OperationTimeoutError: ConnectionLossError,
    kz.SessionExpiredError: SessionExpiredError,
    kz.ConnectionClosedError: ClientClosedError,
}


def _translate(exc: BaseException, path: str | None) -> BaseException:
    for kazoo_type, ours in _ERRORS.items():
        if isinstance(exc, kazoo_type):
            what = ours.__name__.removesuffix("Error")
            return ours(f"{what} for {path}" if path else what, path)
    if isinstance(exc, kz.KazooException):
        return ZooKeeperError(f"{type(exc).__name__} for {path}: {exc}", path)
    return exc


# ---------------------------------------------------------------- events and values


class SessionState(Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"  # connection lost; the session may still be alive
    LOST = "LOST"  # the session expired (or the client was closed)


class WatchKind(Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILDREN = "CHILDREN"
    DROPPED = "DROPPED"  # the connection dropped; the watch is gone without having fired


@dataclass(frozen=True)
class WatchEvent:
    kind: WatchKind
    path: str


@dataclass(frozen=True)
class SessionEvent:
    state: SessionState
    session_id: int | None


_SESSION_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

_WATCH_KINDS = {
    EventType.CREATED: WatchKind.CREATED,
    EventType.DELETED: WatchKind.DELETED,
    EventType.CHANGED: WatchKind.CHANGED,
    EventType.CHILD: WatchKind.CHILDREN,
}


@dataclass(frozen=True)
class ZnodeStat:
    """The parts of a znode's Stat that Kafka uses: ``version`` for conditional writes,
    ``czxid`` as a broker's epoch, ``ephemeral_owner`` to tell whose ephemeral node it is."""

    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    num_children: int
    data_length: int
    ctime_ms: int
    mtime_ms: int

    @classmethod
    def from_kazoo(cls, stat) -> ZnodeStat:
        return cls(
            stat.version,
            stat.czxid,
            stat.mzxid,
            stat.ephemeralOwner,
            stat.numChildren,
            stat.dataLength,
            stat.ctime,
            stat.mtime,
        )


# ---------------------------------------------------------------- transaction operations


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckOp


# ---------------------------------------------------------------- configuration


ZK_CHUNK = 500  # znodes read or written per batch of concurrent ZooKeeper calls


async def gather_chunked(calls: list, chunk: int = ZK_CHUNK) -> list:
    """Await coroutines ``chunk`` at a time (kazoo pipelines them over the one session);
    each call's result or exception, in order."""
    results = []
    for start in range(0, len(calls), chunk):
        results += await asyncio.gather(*calls[start : start + chunk], return_exceptions=True)
    return results


def split_connect_string(connect: str) -> tuple[str, str | None]:
    """``"h1:2181,h2:2181/odradek"`` → ``("h1:2181,h2:2181", "/odradek")``."""
    connect = connect.strip()
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(
            f"zookeeper.connect {connect!r} names no host (expected host:port[,host:port][/chroot])"
        )
    if not slash or chroot == "":
        return hosts, None
    chroot = "/" + chroot
    if chroot.endswith("/") or "//" in chroot:
        raise ValueError(
            f"zookeeper.connect {connect!r}: the chroot path {chroot!r} is not a valid znode path"
        )
    return hosts, chroot


def _positive_ms(config: Mapping[str, str], key: str, default: int) -> int:
    raw = config.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not a number of milliseconds") from None
    if value <= 0:
        raise ValueError(f"{key}={raw!r} must be positive")
    return value


# ---------------------------------------------------------------- the client


class ZkClient:
    """One ZooKeeper session, used from one asyncio event loop."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        events: asyncio.Queue | None = None,
    ):
        self.connect_string = connect.strip()
        self.hosts, self.chroot = split_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.events: asyncio.Queue = events if events is not None else asyncio.Queue()
        self.state = SessionState.LOST
        self._kazoo: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected = asyncio.Event()
        self._closed = False
        self._data_watchers: dict[str, Callable] = {}
        self._child_watchers: dict[str, Callable] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, str], *, events: asyncio.Queue | None = None) -> ZkClient:
        """Build from Kafka's broker keys: ``zookeeper.connect``, ``zookeeper.session.timeout.ms``,
        ``zookeeper.connection.timeout.ms``."""
        connect = config.get("zookeeper.connect")
        if not connect:
            raise ValueError("zookeeper.connect is not set (expected host:port[,host:port][/chroot])")
        session = _positive_ms(config, "zookeeper.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS)
        connection = _positive_ms(config, "zookeeper.connection.timeout.ms", session)
        return cls(connect, session_timeout_ms=session, connection_timeout_ms=connection, events=events)

    # ------------------------------------------------------------ lifecycle

    @property
    def session_id(self) -> int | None:
        client_id = self._kazoo.client_id if self._kazoo is not None else None
        return client_id[0] if client_id else None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password): what a second connection needs to take over (or expire) this session."""
        return self._kazoo.client_id if self._kazoo is not None else None

    def _new_kazoo(self, hosts: str) -> KazooClient:
        return KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000,
            connection_retry=dict(_RECONNECT_RETRY),
            logger=kazoo_log,
        )

    def _unreachable(self) -> ZooKeeperUnreachableError:
        return ZooKeeperUnreachableError(
            f"cannot reach ZooKeeper at {self.hosts} within {self.connection_timeout_ms} ms "
            f"(zookeeper.connection.timeout.ms); is it running? (zookeeper.connect={self.connect_string})"
        )

    async def start(self) -> ZkClient:
        """Connect (creating the chroot if needed); ZooKeeperUnreachableError if no server answers."""
        if self._kazoo is not None:
            raise RuntimeError("ZkClient.start() called twice")
        self._loop = asyncio.get_running_loop()
        if self.chroot:
            await self._ensure_chroot()
        self._kazoo = self._new_kazoo(f"{self.hosts}{self.chroot or ''}")
        self._kazoo.add_listener(self._on_kazoo_state)
        self._kazoo.start_async()
        try:
            await asyncio.wait_for(self._connected.wait(), self.connection_timeout_ms / 1000)
        except TimeoutError:
            await self.close()
            raise self._unreachable() from None
        return self

    async def _ensure_chroot(self) -> None:
        # As Kafka does: a short-lived session without the chroot creates it.
        bootstrap = self._new_kazoo(self.hosts)
        loop = asyncio.get_running_loop()
        try:
            started = await loop.run_in_executor(
                None, bootstrap.start_async().wait, self.connection_timeout_ms / 1000
            )
            if not started or not bootstrap.connected:
                raise self._unreachable()
            await self._await(bootstrap.ensure_path_async(self.chroot), self.chroot)
        finally:
            await loop.run_in_executor(None, _stop_kazoo, bootstrap)

    async def close(self) -> None:
        """End the session (its ephemeral znodes go at once). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        kazoo, self._kazoo = self._kazoo, None
        if kazoo is not None:
            kazoo.remove_listener(self._on_kazoo_state)
            await asyncio.get_running_loop().run_in_executor(None, _stop_kazoo, kazoo)
        self.state = SessionState.LOST
        self._connected.set()  # wake requests waiting for a connection: they now find the client closed

    async def __aenter__(self) -> ZkClient:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ------------------------------------------------------------ kazoo threads → event loop

    def _hop(self, callback: Callable, *args) -> None:
        """Run ``callback(*args)`` on our event loop; called from kazoo's threads."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    def _on_kazoo_state(self, state: str) -> None:
        self._hop(self._apply_state, _SESSION_STATES[state])

    def _apply_state(self, state: SessionState) -> None:
        if self._closed:
            return
        self.state = state
        if state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        session_id = self.session_id if state is SessionState.CONNECTED else None
        log.info("ZooKeeper session %s (%s)", state.value, self.connect_string)
        self.events.put_nowait(SessionEvent(state, session_id))

    def _watcher(self, registry: dict[str, Callable], path: str) -> Callable:
        # One callable per path and kind, so kazoo (which keeps watchers in a set) fires it once.
        watcher = registry.get(path)
        if watcher is None:

            def watcher(event, path=path):
                kind = _WATCH_KINDS.get(event.type, WatchKind.DROPPED)
                self._hop(self._deliver_watch, WatchEvent(kind, path))

            registry[path] = watcher
        return watcher

    def _deliver_watch(self, event: WatchEvent) -> None:
        if not self._closed:
            self.events.put_nowait(event)

    async def _await(self, async_result, path: str | None):
        """Wait for a kazoo IAsyncResult without blocking the loop; kazoo errors become ours."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result):
            if future.done():
                return
            if result.successful():
                future.set_result(result.value)
            else:
                future.set_exception(_translate(result.exception, path))

        async_result.rawlink(lambda result: loop.call_soon_threadsafe(settle, result))
        return await future

    # ------------------------------------------------------------ requests

    def _client(self) -> KazooClient:
        if self._closed or self._kazoo is None:
            raise ClientClosedError(
                "the ZooKeeper client is closed" if self._closed else "ZkClient.start() not called"
            )
        return self._kazoo

    async def wait_until_connected(self, timeout_ms: int | None = None) -> None:
        """Return once connected; ConnectionLossError after ``timeout_ms`` (default: the connection timeout)."""
        self._client()
        if self._connected.is_set():
            return
        timeout = (timeout_ms or self.connection_timeout_ms) / 1000
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            raise ConnectionLossError(
                f"not connected to ZooKeeper at {self.hosts} for {timeout * 1000:.0f} ms (state {self.state.value})"
            ) from None

    async def _call(self, path: str | None, start: Callable[[KazooClient], object], *, retry: bool):
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        while True:
            await self.wait_until_connected(max(1, int((deadline - time.monotonic()) * 1000)))
            try:
                return await self._await(start(self._client()), path)
            except ConnectionLossError:
                if not retry or time.monotonic() >= deadline:
                    raise

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat]:
        """The znode's data and stat; NoNodeError if absent. ``watch``: one CHANGED/DELETED event."""
        watcher = self._watcher(self._data_watchers, path) if watch else None
        data, stat = await self._call(path, lambda k: k.get_async(path, watcher), retry=True)
        return data or b"", ZnodeStat.from_kazoo(stat)

    async def exists(self, path: str, *, watch: bool = False) -> ZnodeStat | None:
        """The stat, or None; ``watch`` fires on CREATED, CHANGED or DELETED."""
        watcher = self._watcher(self._data_watchers, path) if watch else None
        stat = await self._call(path, lambda k: k.exists_async(path, watcher), retry=True)
        return ZnodeStat.from_kazoo(stat) if stat is not None else None

    async def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        """Child names, sorted; NoNodeError if absent. ``watch``: one CHILDREN (or DELETED) event."""
        watcher = self._watcher(self._child_watchers, path) if watch else None
        children = await self._call(path, lambda k: k.get_children_async(path, watcher), retry=True)
        return sorted(children)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode and return its path (with the counter, for sequential ones)."""
        return await self._call(
            path,
            lambda k: k.create_async(path, data, ephemeral=ephemeral, sequence=sequential, makepath=makepath),
            retry=False,
        )

    async def set(self, path: str, data: bytes, *, version: int = MATCH_ANY_VERSION) -> ZnodeStat:
        """Replace a znode's data; with ``version``, only if the znode is still at that version."""
        stat = await self._call(path, lambda k: k.set_async(path, data, version), retry=False)
        return ZnodeStat.from_kazoo(stat)

    async def delete(self, path: str, *, version: int = MATCH_ANY_VERSION, recursive: bool = False) -> None:
        """Delete a znode (and, with ``recursive``, everything below it; absent nodes are fine then)."""
        if recursive:
            try:
                children = await self.get_children(path)
            except NoNodeError:
                return
            for child in children:
                await self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
            try:
                await self._call(path, lambda k: k.delete_async(path, version), retry=False)
            except NoNodeError:
                pass
            return
        await self._call(path, lambda k: k.delete_async(path, version), retry=False)

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents if missing (Kafka's makeSurePersistentPathExists)."""
        await self._call(path, lambda k: k.ensure_path_async(path), retry=True)

    async def transaction(self, ops: Sequence[Op], *, controller_epoch_zk_version: int | None = None) -> list:
        """Apply ``ops`` atomically: all or none. Results in order: the created path for CreateOp,
        a ZnodeStat for SetDataOp, None for DeleteOp and CheckOp.

        With ``controller_epoch_zk_version``, the transaction first checks that /controller_epoch
        is still at that version (Kafka's controller fencing) and raises ControllerMovedError if not.
        A failing op raises its error (BadVersionError, NoNodeError, ...) with ``op_index`` set."""
        ops = list(ops)
        if controller_epoch_zk_version is not None:
            ops.insert(0, CheckOp(CONTROLLER_EPOCH_PATH, controller_epoch_zk_version))

        def start(k: KazooClient):
            tx = k.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
                elif isinstance(op, SetDataOp):
                    tx.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    tx.delete(op.path, op.version)
                elif isinstance(op, CheckOp):
                    tx.check(op.path, op.version)
                else:
                    raise TypeError(f"not a transaction operation: {op!r}")
            return tx.commit_async()

        results = await self._call(None, start, retry=False)
        for index, result in enumerate(results):
            if isinstance(result, kz.RolledBackError | kz.RuntimeInconsistency) or not isinstance(
                result, Exception
            ):
                continue
            op = ops[index]
            if controller_epoch_zk_version is not None and index == 0:
                raise ControllerMovedError(
                    f"controller epoch znode {CONTROLLER_EPOCH_PATH} is no longer at version "
                    f"{controller_epoch_zk_version}: another controller was elected",
                    CONTROLLER_EPOCH_PATH,
                )
            error = _translate(result, op.path)
            error.op_index = index - (1 if controller_epoch_zk_version is not None else 0)
            raise error
        if controller_epoch_zk_version is not None:
            results = results[1:]
        return [
            ZnodeStat.from_kazoo(r) if isinstance(r, tuple) else (r if isinstance(r, str) else None)
            for r in results
        ]


def _stop_kazoo(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()
