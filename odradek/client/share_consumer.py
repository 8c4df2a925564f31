"""The asyncio share consumer (KIP-932): a member of a share group, reading records that the
partition leaders hand to one member at a time.

``subscribe`` names the topics; the group coordinator assigns every partition of them to
every member (ShareGroupHeartbeat, in a background task). ``poll`` fetches through a share
session with each leader (ShareFetch) and returns the records this member acquired; their
acquisition locks run for the group's ``share.record.lock.duration.ms``.

Acknowledgement (``share_acknowledgement_mode``):
  * ``implicit`` (the default, as Kafka's): the next ``poll``, ``commit`` or ``close``
    accepts every record the previous ``poll`` returned;
  * ``explicit``: call ``acknowledge(record, "accept" | "release" | "reject")`` for each
    record; RELEASE hands it back for another delivery, REJECT archives it.
``key_deserializer`` and ``value_deserializer`` turn keys and values into what ``poll``
returns, as the consumer's do; a record they cannot turn is rejected (archived, never
delivered again, as Kafka's share consumer does) and ``poll`` raises SerializationError
naming it (the other records of that poll come with the next one). ``client_rack`` is sent
as the member's rack (``rack_id``).

Acknowledgements ride on the next ShareFetch; ``commit`` sends them at once
(ShareAcknowledge) and returns each partition's error. ``close`` sends what is left, closes
the share sessions (releasing what this member still holds) and leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from odradek.client import client_config as config_mod
from odradek.client.client_errors import ClientClosedError, ConfigError, SerializationError
from odradek.client.consumer.fetcher import decode_records
from odradek.client.netclient import NetClient
from odradek.client.structs import TopicPartition
from odradek.protocol.errors import ErrorCode, error_for
from odradek.protocol.record_batch import iter_batches

log = logging.getLogger(__name__)

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
ACK_TYPES = {"accept": 1, "release": 2, "reject": 3}
_REJOIN = (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch)
_NEW_SESSION = (ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch)


class ShareConsumer:
    """Options: the common client options plus ``group_id`` (required),
    ``share_acknowledgement_mode`` (implicit/explicit), ``max_poll_records``,
    ``fetch_max_wait_ms``, ``fetch_max_bytes``, ``key_deserializer``, ``value_deserializer``,
    ``client_rack``."""

    def __init__(self, config: dict | None = None, **options):
        self.config = config_mod.resolve("share_consumer", config, options)
        if not self.config["group_id"]:
            raise ConfigError("a share consumer needs group_id (the share group to join)")
        self.group_id: str = self.config["group_id"]
        self.explicit = self.config["share_acknowledgement_mode"] == "explicit"
        self._client = NetClient(self.config, "share-consumer", allow_auto_topic_creation=False)
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._topics: tuple[str, ...] = ()
        self._sent_topics: tuple[str, ...] | None = None
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._assigned_ids: dict = {}  # the last assignment, by topic id
        self._sessions: dict[int, tuple[int, set[TopicPartition]]] = {}  # leader -> (next epoch, partitions)
        self._acks: dict[TopicPartition, dict[int, int]] = {}  # pending: partition -> offset -> type
        self._delivered: list = []  # the last poll's records (implicit mode accepts them)
        self._ready: list = []  # decoded records held back by a deserialization error, for the next poll
        self._deliveries: dict[tuple[TopicPartition, int], int] = {}
        self._interval = 1.0
        self._heartbeat_task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._assigned = asyncio.Event()
        self._closed = False
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._closed:
            raise ClientClosedError("share consumer is closed")
        if not self._started:
            self._started = True
            self._client.start()
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def subscribe(self, topics) -> None:
        """Read ``topics`` (a list of names); replaces the previous subscription."""
        self._topics = tuple(sorted(set([topics] if isinstance(topics, str) else topics)))
        self._client.add_topics(self._topics)
        self._wake.set()

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def delivery_count(self, record) -> int:
        """How many times ``record`` (from the last poll) has been delivered, this time included."""
        return self._deliveries.get((TopicPartition(record.topic, record.partition), record.offset), 1)

    # -- membership ----------------------------------------------------------------------

    async def _coordinator(self) -> int:
        code, node, host, port = await self._client.find_coordinator(0, self.group_id)
        if code:
            raise error_for(code)(f"FindCoordinator for share group {self.group_id!r}")
        conn_id = 0x7FFFFFFF - node
        self._client.register_node(conn_id, host, port)
        return conn_id

    async def _heartbeat(self, node: int, epoch: int):
        topics = self._topics if epoch == 0 or self._topics != self._sent_topics else None
        body = {"group_id": self.group_id, "member_id": self.member_id, "member_epoch": epoch,
                "rack_id": self.config["client_rack"], "subscribed_topic_names": list(topics) if topics is not None else None}
        resp = await self._client.call(node, SHARE_GROUP_HEARTBEAT, body)
        if not resp.error_code and topics is not None:
            self._sent_topics = topics
        return resp

    async def _heartbeat_loop(self) -> None:
        node = None
        while not self._closed:
            try:
                if not self._topics:
                    await self._sleep(self._interval)
                    continue
                if node is None:
                    node = await self._coordinator()
                resp = await self._heartbeat(node, self.member_epoch)
                code = ErrorCode(resp.error_code)
                if code in _REJOIN:
                    self.member_epoch = 0
                    continue
                if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
                    node = None
                    await self._sleep(0.1)
                    continue
                if code:
                    raise error_for(int(code))(resp.error_message or "ShareGroupHeartbeat")
                self.member_epoch = resp.member_epoch
                self._interval = max(resp.heartbeat_interval.total_seconds(), 0.05)
                if resp.assignment is not None:
                    self._assigned_ids = {t.topic_id: frozenset(t.partitions) for t in resp.assignment.topic_partitions}
                await self._resolve_assignment()
                await self._sleep(self._interval)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the coordinator moved or went away: find it again
                log.info("share group %s: heartbeat failed (%s); retrying", self.group_id, exc)
                node = None
                await self._sleep(0.2)

    async def _resolve_assignment(self) -> None:
        names = {t.topic_id: name for name, t in self._client.cluster.topics.items()}
        if any(tid not in names for tid in self._assigned_ids):
            await self._client.refresh(5)
            names = {t.topic_id: name for name, t in self._client.cluster.topics.items()}
        self._assignment = frozenset(
            TopicPartition(names[tid], p) for tid, ps in self._assigned_ids.items() if tid in names for p in ps
        )
        if self._assignment:
            self._assigned.set()
        else:
            self._assigned.clear()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    # -- acknowledgements ----------------------------------------------------------------

    def acknowledge(self, record, type: str = "accept") -> None:
        """Acknowledge one record of the last poll: ``accept``, ``release`` or ``reject``."""
        kind = ACK_TYPES.get(type)
        if kind is None:
            raise ValueError(f"acknowledge type must be one of {', '.join(ACK_TYPES)}; got {type!r}")
        self._acks.setdefault(TopicPartition(record.topic, record.partition), {})[record.offset] = kind

    def _accept_delivered(self) -> None:
        if not self.explicit:
            for r in self._delivered:
                self._acks.setdefault(TopicPartition(r.topic, r.partition), {}).setdefault(r.offset, ACK_TYPES["accept"])
        self._delivered = []

    @staticmethod
    def _batches(acks: dict[int, int]) -> list[dict]:
        out: list[dict] = []
        for offset in sorted(acks):
            kind = acks[offset]
            if out and out[-1]["last_offset"] == offset - 1 and out[-1]["acknowledge_types"] == [kind]:
                out[-1]["last_offset"] = offset
            else:
                out.append({"first_offset": offset, "last_offset": offset, "acknowledge_types": [kind]})
        return out

    # -- fetching ------------------------------------------------------------------------

    def _by_leader(self) -> dict[int, set[TopicPartition]]:
        out: dict[int, set[TopicPartition]] = {}
        for tp in self._assignment | set(self._acks):
            leader = self._client.cluster.leader_for(tp)
            if leader >= 0:
                out.setdefault(leader, set()).add(tp)
        return out

    async def poll(self, timeout: float = 1.0) -> list:
        """The records this member acquired, waiting up to ``timeout`` seconds for some."""
        if self._closed:
            raise ClientClosedError("share consumer is closed")
        await self.start()
        self._accept_delivered()
        if self._ready:
            self._delivered, self._ready = self._ready, []
            return self._delivered
        deadline = time.monotonic() + timeout
        if not self._assignment:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._assigned.wait(), max(timeout, 0))
        leaders = self._by_leader()
        if not leaders:
            return []
        wait_ms = max(int((deadline - time.monotonic()) * 1000), 0)
        answers = await asyncio.gather(
            *(self._fetch(node, tps, wait_ms) for node, tps in leaders.items()), return_exceptions=True
        )
        records: list = []
        for got in answers:
            if isinstance(got, BaseException):
                log.info("share group %s: a share fetch failed (%s)", self.group_id, got)
            else:
                records += got
        return self._deserialized(records)

    def _deserialized(self, records: list) -> list:
        kdes, vdes = self.config["key_deserializer"], self.config["value_deserializer"]
        if kdes is None and vdes is None:
            self._delivered = records
            return records
        out, failures = [], []
        for r in records:
            try:
                key = kdes(r.key) if kdes is not None and r.key is not None else r.key
                value = vdes(r.value) if vdes is not None and r.value is not None else r.value
            except Exception as exc:
                tp = TopicPartition(r.topic, r.partition)
                self._acks.setdefault(tp, {})[r.offset] = ACK_TYPES["reject"]
                failures.append(f"offset {r.offset} of {r.topic}-{r.partition}: {exc}")
                continue
            out.append(tuple.__new__(type(r), (r[0], r[1], key, value, r[4])))  # as the consumer's fetcher does
        if failures:
            self._ready = out
            self._delivered = []
            raise SerializationError(
                f"deserializing {len(failures)} record(s) failed, so they were rejected: {'; '.join(failures[:3])}"
            )
        self._delivered = out
        return out

    def _ids(self) -> dict[str, object]:
        return {name: t.topic_id for name, t in self._client.cluster.topics.items()}

    async def _fetch(self, node: int, tps: set[TopicPartition], wait_ms: int) -> list:
        epoch, in_session = self._sessions.get(node, (0, set()))
        wanted = {tp for tp in tps if tp in self._assignment}
        acks = {tp: self._acks.pop(tp) for tp in tps if tp in self._acks}
        ids = self._ids()
        send = (wanted - in_session) | set(acks) if epoch else wanted | set(acks)
        by_topic: dict[str, list] = {}
        for tp in sorted(send):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "acknowledgement_batches": self._batches(acks.get(tp, {}))}
            )
        forgotten: dict[str, list[int]] = {}
        for tp in in_session - wanted if epoch else ():
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": self.group_id, "member_id": self.member_id, "share_session_epoch": epoch,
            "max_wait": wait_ms, "min_bytes": 1, "max_bytes": self.config["fetch_max_bytes"],
            "max_records": self.config["max_poll_records"], "batch_size": self.config["max_poll_records"],
            "topics": [{"topic_id": ids[t], "partitions": ps} for t, ps in by_topic.items() if t in ids],
            "forgotten_topics_data": [{"topic_id": ids[t], "partitions": ps} for t, ps in forgotten.items() if t in ids],
        }
        resp = await self._client.call(node, SHARE_FETCH, body, timeout=wait_ms / 1000 + 30)
        if resp.error_code in _NEW_SESSION:
            self._sessions.pop(node, None)  # the leader lost it (restart): open a new one next poll
            return []
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or "ShareFetch")
        self._sessions[node] = (epoch + 1 if epoch < 2**31 - 1 else 1, wanted)
        names = {t.topic_id: name for name, t in self._client.cluster.topics.items()}
        out: list = []
        for t in resp.responses:
            name = names.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                if p.error_code or not p.acquired_records or not p.records:
                    continue
                tp = TopicPartition(name, p.partition_index)
                ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
                for batch in iter_batches(p.records):
                    if getattr(getattr(batch, "header", None), "is_control", False):
                        continue
                    for r in decode_records(batch, tp):
                        for first, last, count in ranges:
                            if first <= r.offset <= last:
                                out.append(r)
                                self._deliveries[(tp, r.offset)] = count
                                break
        if len(self._deliveries) > 100_000:
            self._deliveries = {k: v for k, v in self._deliveries.items() if k[0] in self._assignment}
        return out

    async def commit(self) -> dict[TopicPartition, BaseException | None]:
        """Send pending acknowledgements now (ShareAcknowledge); each partition's outcome."""
        await self.start()
        self._accept_delivered()
        return await self._send_acks(final=False)

    async def _send_acks(self, final: bool) -> dict[TopicPartition, BaseException | None]:
        results: dict[TopicPartition, BaseException | None] = {}
        ids = self._ids()
        for node, tps in self._by_leader().items():
            epoch, in_session = self._sessions.get(node, (0, set()))
            acks = {tp: self._acks.pop(tp) for tp in tps if tp in self._acks}
            if not epoch or (not acks and not final):
                continue
            by_topic: dict[str, list] = {}
            for tp, offsets in sorted(acks.items()):
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "acknowledgement_batches": self._batches(offsets)}
                )
            body = {
                "group_id": self.group_id, "member_id": self.member_id,
                "share_session_epoch": -1 if final else epoch,
                "topics": [{"topic_id": ids[t], "partitions": ps} for t, ps in by_topic.items() if t in ids],
            }
            resp = await self._client.call(node, SHARE_ACKNOWLEDGE, body)
            if final:
                self._sessions.pop(node, None)
            else:
                self._sessions[node] = (epoch + 1, in_session)
            names = {v: k for k, v in ids.items()}
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(names.get(t.topic_id, ""), p.partition_index)
                    code = int(resp.error_code or p.error_code)
                    results[tp] = error_for(code)(f"acknowledging {tp.topic}-{tp.partition}") if code else None
        return results

    async def close(self) -> None:
        """Acknowledge what is pending, close the share sessions and leave the group."""
        if self._closed:
            return
        try:
            if self._started:
                self._accept_delivered()
                with contextlib.suppress(Exception):
                    await self._send_acks(final=True)
                if self._heartbeat_task is not None:
                    self._heartbeat_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await self._heartbeat_task
                if self.member_epoch > 0:
                    with contextlib.suppress(Exception):
                        await self._heartbeat(await self._coordinator(), -1)
        finally:
            self._closed = True
            await self._client.close()


__all__ = ["ShareConsumer"]
