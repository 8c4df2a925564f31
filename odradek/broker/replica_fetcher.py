"""Followers copying their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

``ReplicaFetcherManager`` keeps one ``ReplicaFetcher`` per (source broker, fetcher id): a
partition goes to fetcher ``abs(31 * java_hash(topic) + partition) % num.replica.fetchers``
of its leader, as in Kafka. Each fetcher is one task over one connection to its leader and
loops:

1. **Truncate** the partitions that just became followers (or lost their place). A leader
   speaking Fetch v12+ does it through the fetch itself (KIP-595, as Kafka 2.7+ fetchers
   do; ``inter.broker.protocol.version`` below 2.7 keeps Fetch v11): each partition names the leader epoch of its last batch (``last_fetched_epoch``)
   and, where this log diverged, the leader answers ``diverging_epoch`` (its largest epoch
   at or below ours and where that ends) instead of records. Otherwise (an older leader, a
   log without epochs, or after OFFSET_OUT_OF_RANGE) ask with OffsetForLeaderEpoch where
   our latest epoch ends on the leader. Either answer cuts the log by KIP-101/KIP-279's
   rule (``_truncation_offset``): at the smaller of both ends of that epoch, or, when this
   log does not have the leader's epoch, at the end of our largest epoch below it and ask
   again. A leader that knows no epochs: cut at the high watermark.
2. **Fetch** from each partition's log end offset with the follower Fetch (``replica_id`` =
   this broker; ``replica.fetch.wait.max.ms``, ``replica.fetch.min.bytes``,
   ``replica.fetch.max.bytes`` per partition, ``replica.fetch.response.max.bytes`` in all)
   in an incremental fetch session (KIP-227, ``fetch_session_handler.py``): after one full
   fetch, a request lists only the partitions whose offsets or epochs changed (those parked or
   truncating are forgotten meanwhile) and the answer only those with something new,
   append the leader's batches as they are (``Partition.append_as_follower``: same offsets,
   same CRCs, producer state and leader epochs rebuilt from them) and take the leader's high
   watermark and log start offset. Partitions the follower replication throttle holds back
   (``follower.replication.throttled.rate``, cluster/replication_quota.py) are left out.

Counted for ``/metrics``: the bytes appended (``ReplicationBytesInPerSec``, per topic) and
each partition's lag behind the leader's high watermark after its last fetch (Kafka's
FetcherLagMetrics ``ConsumerLag``; ``ReplicaFetcherManager.max_lag`` is ``MaxLag``).

A fetcher retires when it has no partitions left (they moved to another leader, or away from
this broker) and when the broker shuts down. It then closes its fetch session with a last
Fetch (the session's id, epoch -1, no partitions), waiting at most ``replica.fetch.wait.max.ms``
plus ``SESSION_CLOSE_GRACE_MS``, so that the leader frees the session's cache slot at once
instead of keeping it until it goes stale (KIP-227). A leader that does not answer in time
just drops it later.

Errors are per partition: OFFSET_OUT_OF_RANGE truncates again (or starts over at the
leader's log start offset when this replica is below it); NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH park the partition for
``replica.fetch.backoff.ms`` until the controller's next LeaderAndIsr moves it; a failed
connection backs the whole fetcher off and reconnects. Nothing here raises into the loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass

from odradek._tasks import cancel_and_wait
from odradek.broker.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID
from odradek.broker.fetch_session_handler import FetchSessionHandler
from odradek.broker.group.partitioning import java_string_hash
from odradek.cluster.controller_channel import connect_to_broker
from odradek.net.connection import Connection
from odradek.net.connection_errors import ClientError
from odradek.net.connection_security import ConnectionSecurity
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode
from odradek.storage.log import UnexpectedAppendOffsetError

log = logging.getLogger(__name__)

_LINK_ERRORS = (ClientError, OSError)  # the connection failed or timed out: reconnect

FETCH_KEY, LIST_OFFSETS_KEY, OFFSET_FOR_LEADER_EPOCH_KEY = 1, 2, 23
FETCH_VERSION = 12  # topics by name, last_fetched_epoch / diverging_epoch (KIP-595)
FETCH_VERSION_BEFORE_KIP_595 = 11  # a leader without v12: truncate with OffsetForLeaderEpoch
LIST_OFFSETS_VERSION = 4
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
EARLIEST_TIMESTAMP = -2
SESSION_CLOSE_GRACE_MS = 2000  # a retiring fetcher's session close waits at most this beyond replica.fetch.wait.max.ms

_PARKING_ERRORS = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.kafka_storage_error,
}


@dataclass(frozen=True)
class FetcherConfig:
    node_id: int
    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    num_fetchers: int = 1
    truncate_on_fetch: bool = True  # Fetch v12 (KIP-595); False below inter.broker.protocol.version 2.7
    security: ConnectionSecurity | None = None  # inter.broker.listener.name's TLS and SASL, as a client
    socket_receive_buffer_bytes: int = -1  # replica.socket.receive.buffer.bytes (-1: the OS's)

    @classmethod
    def from_getter(cls, node_id: int, get, security: ConnectionSecurity | None = None) -> FetcherConfig:
        return cls(
            node_id,
            get("replica.fetch.wait.max.ms"),
            get("replica.fetch.min.bytes"),
            get("replica.fetch.max.bytes"),
            get("replica.fetch.response.max.bytes"),
            get("replica.fetch.backoff.ms"),
            get("replica.socket.timeout.ms"),
            max(1, get("num.replica.fetchers")),
            _protocol_at_least(get("inter.broker.protocol.version"), (2, 7)),
            security,
            get("replica.socket.receive.buffer.bytes"),
        )


@dataclass
class FetchState:
    """One partition on a fetcher: its leader's epoch, whether it must truncate first, and
    whether that must ask OffsetForLeaderEpoch (rather than the Fetch v12 itself)."""

    leader_epoch: int
    truncating: bool = True
    ask_leader: bool = False
    parked_until: float = 0.0
    lag: int = 0  # the leader's high watermark minus our log end, after the last fetch


class ReplicaFetcher:
    """One task fetching every partition this broker follows on one leader."""

    def __init__(self, manager: ReplicaFetcherManager, source, fetcher_id: int):
        self.manager = manager
        self.source = source  # BrokerInfo of the leader
        self.fetcher_id = fetcher_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self.session = FetchSessionHandler()  # KIP-227: fetches name only what changed
        self._wakeup = asyncio.Event()
        self._conn: Connection | None = None
        self._unanswered: asyncio.Future | None = None  # a fetch the close cancelled while it was out
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{fetcher_id}-broker-{source.node_id}"
        )

    def __repr__(self) -> str:
        return f"ReplicaFetcher[{self.fetcher_id}, leader {self.source.node_id}]"

    @property
    def client_id(self) -> str:
        """Kafka's name for the fetcher thread (the ``clientId`` tag of its metrics)."""
        return f"ReplicaFetcherThread-{self.fetcher_id}-{self.source.node_id}"

    def add(self, key: tuple[str, int], leader_epoch: int) -> None:
        self.partitions[key] = FetchState(leader_epoch)
        self._wakeup.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)

    async def close(self) -> None:
        """Stop fetching; then, best effort and bounded in time, close the fetch session so
        that the leader frees its cache slot now rather than when it goes stale (KIP-227)."""
        await cancel_and_wait(self._task)
        conn, self._conn = self._conn, None
        unanswered, self._unanswered = self._unanswered, None
        if conn is None:
            return
        try:
            if not conn.closed:
                config = self.manager.config
                budget = min(config.wait_max_ms + SESSION_CLOSE_GRACE_MS, config.socket_timeout_ms) / 1000
                await asyncio.wait_for(self._close_session(conn, unanswered), budget)
        except Exception as exc:  # best effort: a link error, a timeout, an odd answer
            log.info(
                "%r: could not close fetch session %d (%s); leader %d drops it when it goes stale",
                self,
                self.session.session_id,
                str(exc) or type(exc).__name__,
                self.source.node_id,
            )
        finally:
            conn.close()

    async def _close_session(self, conn: Connection, unanswered) -> None:
        """A full fetch of nothing with the session's id and FINAL_EPOCH: the leader drops the
        session and answers without one. A fetch the cancel cut short (``unanswered``) is
        awaited first: a full one may have opened a session this fetcher has not heard of."""
        if unanswered is not None:
            response = await unanswered
            self.session.answered(response.error_code, response.session_id)
        session_id = self.session.session_id
        if session_id == INVALID_SESSION_ID:
            return
        config = self.manager.config
        version = self._fetch_version(conn)
        request = messages.build_request(
            FETCH_KEY,
            version,
            {
                "replica_id": config.node_id,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": config.response_max_bytes,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": FINAL_EPOCH,
                "topics": [],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        response = await conn.send(FETCH_KEY, request, version=version)
        self.session.closed()
        log.debug("%r: closed fetch session %d (%s)", self, session_id, ErrorCode(response.error_code).name)

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        config = self.manager.config
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                conn = await self._connection()
                await self._truncate(conn)
                fetched = await self._fetch(conn)
            except _LINK_ERRORS as exc:
                log.warning("%r: %s; retrying in %d ms", self, exc, config.backoff_ms)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                await asyncio.sleep(config.backoff_ms / 1000)
                continue
            except Exception:
                log.exception("%r failed a round; retrying in %d ms", self, config.backoff_ms)
                await asyncio.sleep(config.backoff_ms / 1000)
                continue
            if not fetched:  # every partition parked: wait for a change or the backoff
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), config.backoff_ms / 1000)
                except TimeoutError:
                    pass

    async def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            config = self.manager.config
            self._conn = await connect_to_broker(
                self.source.host,
                self.source.port,
                self.source.node_id,
                f"broker-{config.node_id}-fetcher-{self.fetcher_id}",
                config.socket_timeout_ms,
                config.security,
                config.socket_receive_buffer_bytes,
            )
        return self._conn

    def _partition(self, key):
        return self.manager.replica_manager.partitions.get(key)

    # -- truncation (KIP-101 / KIP-279) --------------------------------------------------

    def _fetch_version(self, conn: Connection) -> int:
        top = conn.broker_versions.get(FETCH_KEY, (0, FETCH_VERSION_BEFORE_KIP_595))[1]
        if top >= FETCH_VERSION and self.manager.config.truncate_on_fetch:
            return FETCH_VERSION
        return FETCH_VERSION_BEFORE_KIP_595

    async def _truncate(self, conn: Connection) -> None:
        todo = {k: s for k, s in self.partitions.items() if s.truncating}
        if not todo:
            return
        by_fetch = self._fetch_version(conn) >= FETCH_VERSION
        asks: dict[str, list[dict]] = {}
        for (topic, index), state in todo.items():
            partition = self._partition((topic, index))
            if partition is None:
                self.partitions.pop((topic, index), None)
                continue
            latest = partition.log.latest_epoch
            if latest is None:  # no epochs known here: keep what is below the high watermark
                self._cut(partition, partition.high_watermark, "no leader epochs in the local log")
                state.truncating = False
                continue
            if by_fetch and not state.ask_leader:  # the fetch names ``latest``; the leader answers
                state.truncating = False
                continue
            asks.setdefault(topic, []).append(
                {"partition": index, "current_leader_epoch": state.leader_epoch, "leader_epoch": latest}
            )
        if not asks:
            return
        request = messages.build_request(
            OFFSET_FOR_LEADER_EPOCH_KEY,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": self.manager.config.node_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in asks.items()],
            },
        )
        response = await conn.send(OFFSET_FOR_LEADER_EPOCH_KEY, request, version=OFFSET_FOR_LEADER_EPOCH_VERSION)
        for t in response.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                state = self.partitions.get(key)
                partition = self._partition(key)
                if state is None or partition is None:
                    continue
                if p.error_code:
                    self._park(key, state, p.error_code, "OffsetForLeaderEpoch")
                    continue
                offset, done = _truncation_offset(partition, p.leader_epoch, p.end_offset)
                self._cut(partition, offset, f"leader epoch {p.leader_epoch} ends at {p.end_offset} on the leader")
                if done:  # else ask again with the epoch our log now ends with (KIP-279)
                    state.truncating = state.ask_leader = False

    def _cut(self, partition, offset: int, why: str) -> None:
        leo = partition.log_end_offset
        if offset >= leo:
            partition.truncate_to(leo)  # nothing to cut; an epoch entry at the end may go
            return
        hw = partition.high_watermark
        if offset < hw:
            log.warning(
                "%s: truncating below the high watermark (%d < %d): %s; records a consumer may have "
                "seen are dropped (an unclean leader election?)",
                partition,
                offset,
                hw,
                why,
            )
        log.info("%s: truncating from %d to %d (%s)", partition, leo, offset, why)
        partition.truncate_to(offset)

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, conn: Connection) -> bool:
        config = self.manager.config
        now = time.monotonic()
        throttle = self.manager.throttle
        wanted: dict[tuple[str, int], tuple] = {}
        for key, state in self.partitions.items():
            if state.truncating or state.parked_until > now:
                continue
            partition = self._partition(key)
            if partition is None or (throttle is not None and throttle.holds_back(partition)):
                continue
            latest = partition.log.latest_epoch
            wanted[key] = (
                partition.log_end_offset,
                partition.log_start_offset,
                state.leader_epoch,
                -1 if latest is None else latest,
            )
        if not wanted:
            return False
        version = self._fetch_version(conn)
        session_id, epoch, send, forget = self.session.build(wanted)
        topics: dict[str, list[dict]] = {}
        for (topic, index), (offset, log_start, leader_epoch, last_fetched) in send.items():
            topics.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": last_fetched,
                    "log_start_offset": log_start,
                    "partition_max_bytes": config.max_bytes,
                }
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        request = messages.build_request(
            FETCH_KEY,
            version,
            {
                "replica_id": config.node_id,
                "max_wait": config.wait_max_ms,
                "min_bytes": config.min_bytes,
                "max_bytes": config.response_max_bytes,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
                "rack_id": "",
            },
        )
        timeout = (config.wait_max_ms + config.socket_timeout_ms) / 1000
        pending = conn.send(FETCH_KEY, request, version=version, timeout=timeout)
        try:
            response = await asyncio.shield(pending)
        except asyncio.CancelledError:
            self._unanswered = pending  # for close(): the leader may open a session with it
            self.session.reset()
            raise
        except BaseException:
            self.session.reset()
            raise
        if not self.session.answered(response.error_code, response.session_id):
            log.info(
                "%r: leader %d dropped fetch session %d (%s); starting a new one",
                self,
                self.source.node_id,
                session_id,
                ErrorCode(response.error_code).name,
            )
            return True
        if response.error_code:
            raise ClientError(f"leader {self.source.node_id} refused the fetch: {response.error_code!r}")
        replicas = self.manager.replica_manager
        for t in response.responses:
            for p in t.partitions:
                key = (t.topic, p.partition_index)
                state = self.partitions.get(key)
                partition = self._partition(key)
                if state is None or partition is None or partition.is_leader:
                    continue
                if p.error_code == ErrorCode.offset_out_of_range:
                    await self._out_of_range(conn, key, state, partition)
                    continue
                if p.error_code:
                    self._park(key, state, p.error_code, "Fetch")
                    continue
                diverging = getattr(p, "diverging_epoch", None)  # v12+
                if diverging is not None and diverging.end_offset >= 0:
                    offset, _ = _truncation_offset(partition, diverging.epoch, diverging.end_offset)
                    self._cut(
                        partition,
                        offset,
                        f"the fetch diverged: leader epoch {diverging.epoch} ends at {diverging.end_offset} "
                        f"on leader {self.source.node_id}",
                    )
                    continue  # the next fetch names the epoch the log ends with now
                try:
                    if p.records:
                        partition.append_as_follower(p.records)
                        partition.counters.replication_bytes_in += len(p.records)
                    partition.update_follower_high_watermark(p.high_watermark, p.log_start_offset)
                    if throttle is not None:
                        throttle.fetched(partition, len(p.records or b""), p.high_watermark)
                    state.lag = max(0, p.high_watermark - partition.log_end_offset)
                except UnexpectedAppendOffsetError as exc:  # our log moved meanwhile: fetch again
                    log.warning("%s: %s", partition, exc)
                    continue
                except errors.KafkaError as exc:
                    log.error("%s: cannot append what leader %d sent: %s", partition, self.source.node_id, exc)
                    state.parked_until = time.monotonic() + config.backoff_ms / 1000
                    continue
                replicas.on_follower_append(key)
        return True

    async def _out_of_range(self, conn, key, state: FetchState, partition) -> None:
        """Our log end is outside the leader's log: below its start, start over there;
        else (we are ahead) truncate by leader epoch again."""
        topic, index = key
        request = messages.build_request(
            LIST_OFFSETS_KEY,
            LIST_OFFSETS_VERSION,
            {
                "replica_id": self.manager.config.node_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": index,
                                "current_leader_epoch": state.leader_epoch,
                                "timestamp": EARLIEST_TIMESTAMP,
                            }
                        ],
                    }
                ],
            },
        )
        response = await conn.send(LIST_OFFSETS_KEY, request, version=LIST_OFFSETS_VERSION)
        answer = response.topics[0].partitions[0]
        if answer.error_code:
            self._park(key, state, answer.error_code, "ListOffsets")
            return
        if partition.log_end_offset < answer.offset:
            log.info(
                "%s: log end %d is below leader %d's log start %d; starting over there",
                partition,
                partition.log_end_offset,
                self.source.node_id,
                answer.offset,
            )
            partition.truncate_fully_and_start_at(answer.offset)
        else:
            state.truncating = state.ask_leader = True

    def _park(self, key, state: FetchState, code: int, what: str) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        log.info(
            "%s-%d: %s from leader %d answered %s; waiting for the controller",
            key[0],
            key[1],
            what,
            self.source.node_id,
            name,
        )
        state.parked_until = time.monotonic() + self.manager.config.backoff_ms / 1000


def _protocol_at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    """Whether ``inter.broker.protocol.version`` (e.g. "2.6" or "2.6-IV0"; unset: the
    newest) is ``wanted`` or later."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return match is None or (int(match[1]), int(match[2])) >= wanted


def _truncation_offset(partition, leader_epoch: int, end_offset: int) -> tuple[int, bool]:
    """Where to cut this replica's log, given that the leader's largest epoch at or below
    ours is ``leader_epoch`` and ends at ``end_offset`` there (KIP-101, KIP-279); and whether
    that is final. When our log has no batches of ``leader_epoch`` it is not: cut at the end
    of our largest epoch below it and compare again."""
    leo = partition.log_end_offset
    if end_offset < 0:  # the leader knows no epoch at or below ours
        return partition.high_watermark, True
    if leader_epoch < 0:
        return min(end_offset, leo), True
    own_epoch, own_end = partition.log.end_offset_for_epoch(leader_epoch)
    if own_end < 0:  # no epochs here at all
        return min(end_offset, leo), True
    if own_epoch != leader_epoch:
        return min(own_end, leo), False
    return min(own_end, end_offset, leo), True


class ReplicaFetcherManager:
    """The fetchers of this broker, by (leader, fetcher id); called only from the event loop."""

    def __init__(self, replica_manager, config: FetcherConfig):
        self.replica_manager = replica_manager
        self.config = config
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[tuple[str, int], tuple[int, int]] = {}  # partition -> its fetcher's key
        self.throttle = None  # a cluster.replication_quota.FollowerThrottle, set in cluster mode

    def fetcher_id(self, topic: str, index: int) -> int:
        return abs(31 * java_string_hash(topic) + index) % self.config.num_fetchers

    def add_partition(self, key: tuple[str, int], leader, leader_epoch: int) -> None:
        """Fetch ``key`` from ``leader`` (a BrokerInfo) from now on, truncating first."""
        self.remove_partition(key)
        where = (leader.node_id, self.fetcher_id(*key))
        fetcher = self.fetchers.get(where)
        if fetcher is None or (fetcher.source.host, fetcher.source.port) != (leader.host, leader.port):
            if fetcher is not None:
                self._retire(where)
            fetcher = self.fetchers[where] = ReplicaFetcher(self, leader, where[1])
        fetcher.add(key, leader_epoch)
        self._where[key] = where

    def remove_partition(self, key: tuple[str, int]) -> None:
        where = self._where.pop(key, None)
        if where is None:
            return
        fetcher = self.fetchers.get(where)
        if fetcher is not None:
            fetcher.remove(key)
            if not fetcher.partitions:
                self._retire(where)

    def max_lag(self) -> int:
        """The largest lag of any partition fetched (Kafka's ReplicaFetcherManager MaxLag)."""
        return max((s.lag for f in self.fetchers.values() for s in f.partitions.values()), default=0)

    def lags(self):
        """(fetcher client id, topic, partition, lag) for every partition fetched."""
        for fetcher in self.fetchers.values():
            for (topic, index), state in fetcher.partitions.items():
                yield fetcher.client_id, topic, index, state.lag

    def leader_of(self, key: tuple[str, int]) -> int | None:
        where = self._where.get(key)
        return where[0] if where else None

    def _retire(self, where) -> None:
        fetcher = self.fetchers.pop(where)
        for key in list(fetcher.partitions):
            self._where.pop(key, None)
        task = asyncio.get_running_loop().create_task(fetcher.close(), name=f"close-{fetcher!r}")
        self.replica_manager.track(task)

    async def close(self) -> None:
        """Close every fetcher at once: each closes its fetch session with its leader, and a
        leader slow to answer holds up only its own."""
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._where.clear()
        results = await asyncio.gather(*(fetcher.close() for fetcher in fetchers), return_exceptions=True)
        for fetcher, result in zip(fetchers, results, strict=True):
            if isinstance(result, Exception):
                log.error("%r failed to close", fetcher, exc_info=result)
