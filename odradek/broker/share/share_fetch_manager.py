"""ShareFetch and ShareAcknowledge on a partition leader (Kafka's SharePartitionManager).

Each member of a share group fetches through a *share session* with every leader it reads
from: epoch 0 opens it with a list of partitions, each later request carries the next epoch
and may add partitions (``topics``) or drop them (``forgotten_topics_data``), and -1 closes it
(the member's acquired records are released). A session outlives its member's leaving the
group (librdkafka leaves, then sends its last acknowledgements) until the client closes it,
or it is idle for ``IDLE_EVICT_S``. A fetch first applies the acknowledgements it carries,
then acquires available records of the session's partitions for the member
(``share_partition.py``) and answers their batches with the acquired offset ranges. Each
acquisition lock runs out on the broker's timer (``acquisition_lock.py``): the records come
back at once, waiting fetches are woken, and a late acknowledgement is INVALID_RECORD_STATE.

Settings per group (``broker/group/group_configs.py``, defaulting to the broker's
``group.share.*`` keys): ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.partition.max.record.locks``, ``share.isolation.level`` (read_committed reads up to
the last stable offset and archives aborted transactions' records undelivered),
``share.renew.acknowledge.enable`` and ``share.auto.offset.reset``, which decides where a
group starts reading a partition the first time.

The records' state belongs to the share partition's share coordinator (``share_coordinator.py``,
on this broker or another, reached through ``share_persister.py``): it is read when the leader
first serves a share partition (ReadShareGroupState; a share partition never written starts
where ``share.auto.offset.reset`` says, and that start is written at once), and written after
every change (WriteShareGroupState): an acknowledgement is answered once its write reached the
ISR of the state partition, acquisitions are written behind. A share partition idle for ten
minutes, or whose leadership moved, or whose group was deleted, or whose write was fenced (its
offsets were reset elsewhere), leaves memory.
Sessions are in memory; the group configs in the metadata store. A fetch that finds nothing
to acquire waits in the broker's fetch purgatory (``delayed_share_fetch.py``).

Threading: the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from odradek.broker.share.acquisition_lock import AcquisitionLockTimeout
from odradek.broker.share.delayed_share_fetch import DelayedShareFetch
from odradek.broker.share.share_coordinator import Key
from odradek.broker.share.share_partition import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    RELEASE,
    RENEW,
    SharePartition,
    aborted_batches,
    batch_ranges,
)
from odradek.broker.share.share_persister import SharePersister
from odradek.broker.share.share_state_topic import ShareState, share_partition_of, state_batches
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_MAX_WAIT_S = 5.0  # a share fetch waits at most this long, whatever it asks
IDLE_EVICT_S = 600  # a share partition nobody read for this long leaves memory
SWEEP_S = 60  # how often (at most) idle share partitions are looked for
_READ_BYTES = 1 << 20  # read per partition and fetch: max_records is usually reached well before

RECORD_LIMIT = 1  # ShareAcquireMode (v2): 0 batch-optimized, 1 record-limit


def _record_limit(body) -> bool:
    return getattr(body, "share_acquire_mode", 0) == RECORD_LIMIT


@dataclass
class ShareSession:
    epoch: int = 0  # the epoch the next request must carry
    partitions: set = field(default_factory=set)  # (topic id, partition)
    last_used: float = field(default_factory=time.monotonic)


class ShareFetchManager:
    def __init__(self, broker):
        self.broker = broker
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}  # (group, topic, partition)
        self.sessions: dict[tuple[str, str], ShareSession] = {}  # (group, member)
        self._used: dict[tuple[str, str, int], float] = {}  # share partition -> last read (monotonic s)
        self._last_sweep = time.monotonic()
        self._loading: dict[tuple[str, str, int], asyncio.Event] = {}
        self.persister = SharePersister(broker, broker.share_coordinator, self._fenced)

    async def close(self) -> None:
        await self.persister.close()

    # -- group configs (``broker/group/group_configs.py``) -----------------------------------

    def _lock_ms(self, group_id: str) -> int:
        return self.broker.group_configs.int_value(group_id, "share.record.lock.duration.ms")

    def _delivery_limit(self, group_id: str) -> int:
        return self.broker.group_configs.int_value(group_id, "share.delivery.count.limit")

    def _max_locks(self, group_id: str) -> int:
        return self.broker.group_configs.int_value(group_id, "share.partition.max.record.locks")

    def _read_committed(self, group_id: str) -> bool:
        return self.broker.group_configs.value(group_id, "share.isolation.level") == "read_committed"

    def _renew_enabled(self, group_id: str) -> bool:
        return self.broker.group_configs.value(group_id, "share.renew.acknowledge.enable") == "true"

    def _start_offset(self, group_id: str, partition) -> int:
        reset = self.broker.group_configs.value(group_id, "share.auto.offset.reset")
        return partition.log_start_offset if reset == "earliest" else partition.high_watermark

    # -- sessions -----------------------------------------------------------------------------

    def _session(self, group_id: str, member_id: str, epoch: int, final_ok: bool) -> ShareSession | None:
        key = (group_id, member_id)
        if epoch == 0:
            self.release_member(group_id, member_id)
            session = self.sessions[key] = ShareSession()
            return session
        session = self.sessions.get(key)
        if session is None:
            raise errors.ShareSessionNotFoundError(f"no share session of member {member_id} in group {group_id}")
        if epoch == -1:
            return session if final_ok else None
        if epoch != session.epoch:
            raise errors.InvalidShareSessionEpochError(f"share session epoch {epoch}; expected {session.epoch}")
        session.last_used = time.monotonic()
        return session

    def _evict_idle_sessions(self, now: float) -> None:
        """Close the sessions nobody used for ``IDLE_EVICT_S`` whose member holds no records
        (a member that left its group and never closed them; what it held comes back when its
        locks run out). A member that was only quiet opens a new one (SHARE_SESSION_NOT_FOUND)."""
        holding = {
            (group_id, r.member)
            for (group_id, _, _), sp in self.partitions.items()
            for r in sp.records.values()
            if r.state == ACQUIRED
        }
        for key in [k for k, s in self.sessions.items() if now - s.last_used >= IDLE_EVICT_S and k not in holding]:
            self.release_member(*key)

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member left its group or closed its session: its records are available again."""
        session = self.sessions.pop((group_id, member_id), None)
        released = [(t, i) for (g, t, i), sp in list(self.partitions.items()) if g == group_id and sp.release_member(member_id)]
        for topic, index in released:
            self._wake(topic, index)
        if session is not None:  # its own parked fetch ends
            for topic_id, index in session.partitions:
                info = self.broker.image.topic_by_id(topic_id)
                if info is not None:
                    self._wake(info.name, index)

    def delete_group(self, group_id: str, partitions: dict | None = None) -> None:
        """The share group was deleted: its state (DeleteShareGroupState, for the share
        partitions held here and ``partitions``, ``{topic id: partitions}`` its coordinator
        knew of), sessions and configs go."""
        doomed = {(t, i) for t, ps in (partitions or {}).items() for i in ps}
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
            self._used.pop(key, None)
            info = self.broker.image.topics.get(key[1])
            if info is not None:
                doomed.add((info.topic_id, key[2]))
        for topic_id, index in sorted(doomed, key=str):
            self.persister.save((group_id, topic_id, index), None)
        for key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[key]
        self.broker.group_configs.delete(group_id)

    def topic_deleted(self, topic: str) -> None:
        """``topic`` was deleted: the share partitions of it held here go, with their state at
        their share coordinators, so a topic made anew under the name starts afresh (delivery
        counts from 1). The group coordinators delete the rest (``delete_state``)."""
        for key in [k for k in self.partitions if k[1] == topic]:
            sp = self.partitions.pop(key)
            self._used.pop(key, None)
            if sp.topic_id is not None:
                self.persister.save((key[0], sp.topic_id, key[2]), None)

    def delete_state(self, group_id: str, partitions: dict) -> None:
        """DeleteShareGroupState of ``group_id``'s share partitions ``{topic id: partitions}``
        (their topic was deleted)."""
        for topic_id, indexes in partitions.items():
            for index in sorted(indexes):
                self.persister.save((group_id, topic_id, index), None)

    async def describe_offset(self, group_id: str, topic_id, index: int) -> dict:
        """DescribeShareGroupOffsets of one partition: its start offset (-1 without share
        state), the leader epoch of its state and its lag (records from the start offset on
        not yet acknowledged or archived; -1 where the partition is led elsewhere)."""
        row = {"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": 0}
        try:
            state = await self.persister.summary((group_id, topic_id, index))
        except errors.KafkaError as exc:
            return {**row, "error_code": exc.code, "error_message": exc.message}
        row.update(start_offset=state.start_offset, leader_epoch=state.leader_epoch)
        info = self.broker.image.topic_by_id(topic_id)
        partition = self.broker.replica_manager.partitions.get((info.name, index)) if info is not None else None
        if state.start_offset >= 0 and partition is not None and partition.is_leader:
            sp = self.partitions.get((group_id, info.name, index))
            start = sp.start_offset if sp is not None else state.start_offset
            done = sum(1 for r in sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED)) if sp is not None else 0
            row.update(start_offset=start, lag=max(partition.high_watermark - start - done, 0))
        return row

    async def delete_offsets(self, group_id: str, topic_id, name: str, count: int) -> int:
        """DeleteShareGroupOffsets of one topic: the share state of its ``count`` partitions
        goes (the group is empty); the error code."""
        for index in range(count):
            key = (group_id, name, index)
            self.partitions.pop(key, None)
            self._used.pop(key, None)
            code = await self.persister.save((group_id, topic_id, index), None)
            if code:
                return int(code)
        return 0

    async def alter_start_offset(self, group_id: str, topic: str, index: int, offset: int) -> int:
        """AlterShareGroupOffsets for one partition: the group's share partition starts afresh at
        ``offset`` (between the log start and end, where this broker leads the partition and can
        tell), with a new state epoch (InitializeShareGroupState). Its leader elsewhere reads the
        new state when a member next opens a share session with it. Its error code."""
        info = self.broker.image.topics.get(topic)
        if info is None or not 0 <= index < len(info.partitions):
            return int(ErrorCode.unknown_topic_or_partition)
        key = (group_id, info.topic_id, index)
        partition = self.broker.replica_manager.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            try:
                current = await self.persister.summary(key)
                await self.persister.initialize(key, current.state_epoch + 1, offset)
            except errors.KafkaError as exc:
                return int(exc.code)
            return 0
        try:
            await self._ensure_loaded(group_id, info.topic_id, index)
            partition, old = self._share_partition(group_id, info.topic_id, index)
            if not partition.log_start_offset <= offset <= partition.high_watermark:
                return int(ErrorCode.offset_out_of_range)
            sp = SharePartition(offset)
            sp.state_epoch, sp.leader_epoch, sp.topic_id = old.state_epoch + 1, old.leader_epoch, info.topic_id
            await self.persister.initialize(key, sp.state_epoch, offset)
        except errors.KafkaError as exc:
            return int(exc.code)
        self.partitions[(group_id, topic, index)] = sp
        return 0

    async def initialize_partitions(self, group_id: str, topic_id, partitions) -> set[int]:
        """The group coordinator's InitializeShareGroupState for newly subscribed partitions:
        the ones whose share state exists now (made here, or there already)."""
        done = set()
        for index in sorted(partitions):
            try:
                await self.persister.initialize((group_id, topic_id, index), 0, -1)
            except errors.FencedStateEpochError:
                pass  # it has a state already
            except errors.KafkaError as exc:
                log.warning("share group %s: initializing %s-%d failed: %s", group_id, topic_id, index, exc)
                continue
            done.add(index)
        return done

    # -- ShareFetch ---------------------------------------------------------------------------

    def _leader(self, group_id: str, topic: str, index: int):
        """The partition, led here; a share partition loaded at an older leader epoch goes (its
        leadership went elsewhere and came back: another leader may have moved it on)."""
        key = (group_id, topic, index)
        partition = self.broker.replica_manager.get_partition(topic, index)
        sp = self.partitions.get(key)
        if not partition.is_leader or (sp is not None and sp.leader_epoch != partition.leader_epoch):
            self.partitions.pop(key, None)  # the (new) leader loads its state
            self._used.pop(key, None)
        if not partition.is_leader:
            raise errors.NotLeaderOrFollowerError(f"this broker does not lead {topic}-{index}")
        return partition

    async def _ensure_loaded(self, group_id: str, topic_id, index: int) -> None:
        """Read the share partition's state from its share coordinator unless it is in memory
        (one read at a time per share partition); raises KafkaError."""
        topic = self._name(topic_id)
        key = (group_id, topic, index)
        while True:
            partition = self._leader(group_id, topic, index)
            if key in self.partitions:
                return
            loading = self._loading.get(key)
            if loading is not None:
                await loading.wait()
                continue
            loading = self._loading[key] = asyncio.Event()
            try:
                self._evict_idle(time.monotonic())
                state = await self.persister.read((group_id, topic_id, index), partition.leader_epoch)
                if key in self.partitions or not partition.is_leader:
                    continue
                if state.start_offset >= 0:
                    sp = share_partition_of(state)
                    sp.leader_epoch, sp.topic_id = partition.leader_epoch, topic_id
                    self.partitions[key] = sp
                    self._used[key] = time.monotonic()
                    continue
                sp = SharePartition(self._start_offset(group_id, partition))
                sp.state_epoch, sp.leader_epoch, sp.topic_id = state.state_epoch, partition.leader_epoch, topic_id
                self.partitions[key] = sp
                self._used[key] = time.monotonic()
                self._save(group_id, topic_id, index, sp)  # the start the reset chose stays
            finally:
                del self._loading[key]
                loading.set()

    def _share_partition(self, group_id: str, topic_id, index: int):
        """(Partition, SharePartition) of a share partition loaded here; raises KafkaError
        (COORDINATOR_LOAD_IN_PROGRESS while its state is not read yet)."""
        topic = self._name(topic_id)
        partition = self._leader(group_id, topic, index)
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        if sp is None:
            raise errors.CoordinatorLoadInProgressError(f"the share state of {topic}-{index} is being read")
        self._used[key] = time.monotonic()
        return partition, sp

    def _reread_if_quiet(self, group_id: str, topic_id, index: int) -> None:
        """A member opens a share session: a share partition of the group that nobody holds
        records of and whose writes are all done is read again from its coordinator, which may
        have a newer state (its offsets were reset, or the group deleted and made anew)."""
        info = self.broker.image.topic_by_id(topic_id)
        if info is None:
            return
        sp = self.partitions.get((group_id, info.name, index))
        if sp is None or self.persister.pending((group_id, topic_id, index)):
            return
        if not any(r.state == ACQUIRED for r in sp.records.values()):
            del self.partitions[(group_id, info.name, index)]
            self._used.pop((group_id, info.name, index), None)

    def _fenced(self, key: Key) -> None:
        """A write of ``key`` was fenced (its offsets were reset, or a newer leader took
        over): the in-memory state is stale and goes; the next use reads it again."""
        info = self.broker.image.topic_by_id(key[1])
        if info is not None:
            self.partitions.pop((key[0], info.name, key[2]), None)
            self._used.pop((key[0], info.name, key[2]), None)

    def _evict_idle(self, now: float) -> None:
        """Forget share partitions nobody read for ``IDLE_EVICT_S`` that hold no acquired
        records and whose state is saved: the next read loads them back from
        ``__share_group_state``. Checked when a share partition is first needed, at most once
        ``SWEEP_S``."""
        if now - self._last_sweep < SWEEP_S:
            return
        self._last_sweep = now
        self._evict_idle_sessions(now)
        for key, used in list(self._used.items()):
            sp = self.partitions.get(key)
            if sp is None or now - used < IDLE_EVICT_S or sp.counts()["acquired"]:
                continue
            info = self.broker.image.topics.get(key[1])
            if info is None or not self.persister.pending((key[0], info.topic_id, key[2])):
                del self.partitions[key]
                del self._used[key]

    def _save(self, group_id: str, topic_id, index: int, sp: SharePartition) -> asyncio.Future:
        """Write the share partition's state to its coordinator; the future gets the error code."""
        partition = self.broker.replica_manager.partitions.get((self._name(topic_id), index))
        leader_epoch = partition.leader_epoch if partition is not None else -1
        state = ShareState(sp.state_epoch, leader_epoch, sp.start_offset, state_batches(sp))
        return self.persister.save((group_id, topic_id, index), state)

    def _name(self, topic_id) -> str:
        info = self.broker.image.topic_by_id(topic_id)
        if info is None:
            raise errors.UnknownTopicIdError(f"no topic with id {topic_id}")
        return info.name

    async def acknowledge(self, group_id: str, member_id: str, topic_id, index: int, batches) -> int:
        """Apply acknowledgement batches ``(first, last, types)``; the partition's error code,
        once the change is written."""
        try:
            await self._ensure_loaded(group_id, topic_id, index)
            _, sp = self._share_partition(group_id, topic_id, index)
        except errors.KafkaError as exc:
            return int(exc.code)
        renew_ok = self._renew_enabled(group_id)
        if not renew_ok and any(RENEW in types for _, _, types in batches):
            return int(ErrorCode.invalid_record_state)  # share.renew.acknowledge.enable is false
        ok = True
        changed = False
        now, limit, lock_ms = int(time.time() * 1000), self._delivery_limit(group_id), self._lock_ms(group_id)
        for first, last, types in batches:
            done = sp.acknowledge(member_id, first, last, list(types), now, limit, lock_ms)
            changed = changed or done
            ok = ok and done
            if done and RENEW in types:
                self._lock(group_id, topic_id, index, member_id, first, last, now + lock_ms, lock_ms)
        if changed:
            saved = self._save(group_id, topic_id, index, sp)
            if any(RELEASE in types for _, _, types in batches):
                self._wake(self._name(topic_id), index)
            code = await saved
            if code:
                return code
        return 0 if ok else int(ErrorCode.invalid_record_state)

    def _acquire(self, group_id: str, member_id: str, topic_id, index: int, max_records: int, max_bytes: int,
                 record_limit: bool = False):
        """(error code, records bytes or None, acquired runs)."""
        try:
            partition, sp = self._share_partition(group_id, topic_id, index)
        except errors.CoordinatorLoadInProgressError:
            return 0, None, []  # its state could not be read yet: nothing to acquire this time
        except errors.KafkaError as exc:
            return int(exc.code), None, []
        now = int(time.time() * 1000)
        sp.expire_locks(now)
        start = max(sp.start_offset, partition.log_start_offset)
        while start < sp.end_offset and (r := sp.records.get(start)) is not None and r.state != 0:
            start += 1  # skip what is in flight or done
        committed = self._read_committed(group_id)
        if start >= (partition.last_stable_offset if committed else partition.high_watermark):
            return 0, None, []
        read = partition.read(start, min(max_bytes, _READ_BYTES), isolation_level=int(committed))
        if read.records is None:
            return 0, None, []
        data = read.records.read()
        batches = batch_ranges(data)
        aborted = set()
        if committed:
            aborted = aborted_batches(data, batches, partition.aborted_transactions(start, read.records, partition.last_stable_offset))
        lock_ms, before = self._lock_ms(group_id), sp.start_offset
        runs, used = sp.acquire(
            batches, member_id, now, lock_ms, max_records, self._delivery_limit(group_id), self._max_locks(group_id),
            aborted, record_limit,
        )
        if not runs:
            if sp.start_offset != before:  # aborted records archived
                self._save(group_id, topic_id, index, sp)
            return 0, None, []
        self._save(group_id, topic_id, index, sp)  # the delivery counts
        for first, last, _ in runs:
            self._lock(group_id, topic_id, index, member_id, first, last, now + lock_ms, lock_ms)
        records = b"".join(data[batches[i][2] : batches[i][2] + batches[i][3]] for i in used)
        return 0, records, runs

    def _lock(self, group_id: str, topic_id, index: int, member_id: str, first: int, last: int, deadline: int, lock_ms: int):
        """Put the acquisition lock of ``first``..``last`` on the broker's timer."""
        self.broker.timer.add(AcquisitionLockTimeout(
            lock_ms, lambda: self.lock_timed_out(group_id, topic_id, index, member_id, first, last, deadline)
        ))

    def lock_timed_out(self, group_id: str, topic_id, index: int, member_id: str, first: int, last: int, deadline: int):
        info = self.broker.image.topic_by_id(topic_id)
        sp = self.partitions.get((group_id, info.name, index)) if info is not None else None
        if sp is None or not sp.expire(member_id, first, last, deadline, self._delivery_limit(group_id)):
            return
        self._save(group_id, topic_id, index, sp)
        self._wake(info.name, index)

    async def share_fetch(self, body, readable=None) -> dict:
        """``readable(topic id)``: whether the member's principal may still Read the topic;
        session partitions of topics it may not are answered TOPIC_AUTHORIZATION_FAILED and
        not fetched (they stay in the session, and are served again once allowed)."""
        group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
        answer = {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "acquisition_lock_timeout": self._lock_ms(group_id),
            "responses": [],
            "node_endpoints": [],
        }
        try:
            session = self._session(group_id, member_id, epoch, final_ok=True)
        except errors.KafkaError as exc:
            answer.update(error_code=exc.code, error_message=exc.message)
            return answer
        rows: dict[tuple, dict] = {}
        for t in body.topics:
            for p in t.partitions:
                key = (t.topic_id, p.partition_index)
                if epoch == 0:
                    self._reread_if_quiet(group_id, t.topic_id, p.partition_index)
                if epoch != -1:
                    session.partitions.add(key)
                acks = [(b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches]
                row = rows[key] = self.fetch_row(p.partition_index)
                if acks:
                    row["acknowledge_error_code"] = await self.acknowledge(
                        group_id, member_id, t.topic_id, p.partition_index, acks
                    )
        for t in body.forgotten_topics_data:
            for index in t.partitions:
                session.partitions.discard((t.topic_id, index))
        if epoch == -1:
            self.release_member(group_id, member_id)
        elif getattr(body, "is_renew_ack", False):  # v2: only renews locks, acquires nothing
            session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        else:
            session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
            denied = frozenset(k for k in session.partitions if readable is not None and not readable(k[0]))
            for topic_id, index in list(session.partitions):
                if (topic_id, index) in denied:
                    continue
                try:
                    await self._ensure_loaded(group_id, topic_id, index)
                except errors.KafkaError:
                    pass  # answered by the acquisition below
            for key in denied:
                row = rows[key] = rows.get(key) or self.fetch_row(key[1])
                row["error_code"] = ErrorCode.topic_authorization_failed
            if denied:  # an error to tell: answer at once, with what can be acquired now
                self._fetch_all(group_id, member_id, session, rows, body.max_records, body.max_bytes, denied,
                                _record_limit(body))
            else:
                await self._wait_for_records(group_id, member_id, session, rows, body)
        by_topic: dict = {}
        for (topic_id, _), row in rows.items():
            by_topic.setdefault(topic_id, []).append(row)
        answer["responses"] = [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]
        answer["node_endpoints"] = self._endpoints()
        return answer

    async def _wait_for_records(self, group_id, member_id, session, rows, body) -> None:
        """Acquire records now, or park in the fetch purgatory until some can be acquired or
        ``max_wait`` (at most 5 s) runs out."""
        strict = _record_limit(body)
        op = DelayedShareFetch(
            lambda: self._fetch_all(group_id, member_id, session, rows, body.max_records, body.max_bytes, record_limit=strict),
            lambda: self.sessions.get((group_id, member_id)) is session,
            int(min(body.max_wait.total_seconds(), _MAX_WAIT_S) * 1000),
        )
        keys = []
        for topic_id, index in session.partitions:
            info = self.broker.image.topic_by_id(topic_id)
            if info is not None:
                keys.append((info.name, index))
        if self.broker.fetch_purgatory.try_complete_else_watch(op, keys):
            return
        await op
        if not op.got and self.sessions.get((group_id, member_id)) is session:
            # acquisition locks that ran out while it waited make records available: one last try
            self._fetch_all(group_id, member_id, session, rows, body.max_records, body.max_bytes, record_limit=strict)

    def _wake(self, topic: str, index: int) -> None:
        """Records of ``topic``-``index`` became available again: waiting share fetches retry."""
        self.broker.fetch_purgatory.check_and_complete((topic, index))

    def _fetch_all(self, group_id, member_id, session, rows, max_records: int, max_bytes: int, skip=frozenset(),
                   record_limit: bool = False) -> bool:
        got = False
        left = max(max_records, 1)
        for key in sorted(session.partitions, key=str):
            if left <= 0:
                break
            if key in skip:
                continue
            row = rows.get(key) or self.fetch_row(key[1])
            code, records, runs = self._acquire(group_id, member_id, key[0], key[1], left, max_bytes, record_limit)
            if code:
                row.update(error_code=code)
                rows[key] = row
                continue
            if runs:
                row["records"] = records
                row["acquired_records"] = [
                    {"first_offset": a, "last_offset": b, "delivery_count": n} for a, b, n in runs
                ]
                rows[key] = row
                left -= sum(b - a + 1 for a, b, _ in runs)
                got = True
        return got

    def fetch_row(self, index: int) -> dict:
        return {
            "partition_index": index,
            "error_code": 0,
            "error_message": None,
            "acknowledge_error_code": 0,
            "acknowledge_error_message": None,
            "current_leader": {"leader_id": self.broker.node_id, "leader_epoch": -1},
            "records": b"",  # kio's schema has it non-nullable
            "acquired_records": [],
        }

    def acknowledge_row(self, index: int) -> dict:
        return {
            "partition_index": index,
            "error_code": 0,
            "error_message": None,
            "current_leader": {"leader_id": self.broker.node_id, "leader_epoch": -1},
        }

    def _endpoints(self) -> list[dict]:
        info = self.broker.image.brokers.get(self.broker.node_id)
        if info is None:
            return []
        return [{"node_id": self.broker.node_id, "host": info.host, "port": info.port, "rack": None}]

    # -- ShareAcknowledge ---------------------------------------------------------------------

    async def share_acknowledge(self, body) -> dict:
        group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
        answer = {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "acquisition_lock_timeout": self._lock_ms(group_id),  # v2
            "responses": [],
            "node_endpoints": [],
        }
        try:
            if epoch == 0:
                raise errors.InvalidShareSessionEpochError("ShareAcknowledge cannot open a share session (epoch 0)")
            session = self._session(group_id, member_id, epoch, final_ok=True)
        except errors.KafkaError as exc:
            answer.update(error_code=exc.code, error_message=exc.message)
            return answer
        for t in body.topics:
            parts = []
            for p in t.partitions:
                acks = [(b.first_offset, b.last_offset, b.acknowledge_types) for b in p.acknowledgement_batches]
                code = await self.acknowledge(group_id, member_id, t.topic_id, p.partition_index, acks)
                parts.append({**self.acknowledge_row(p.partition_index), "error_code": code})
            answer["responses"].append({"topic_id": t.topic_id, "partitions": parts})
        if epoch == -1:
            self.release_member(group_id, member_id)
        else:
            session.epoch = epoch + 1
        answer["node_endpoints"] = self._endpoints()
        return answer
