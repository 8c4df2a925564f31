"""The group coordinator: classic consumer groups and their committed offsets.

It owns every group whose ``__consumer_offsets`` partition this broker leads (the state
machine is described in ``classic_group_state.py``). Handlers call one method per API; a method checks
that this broker coordinates the group (INVALID_GROUP_ID, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS), applies the request, writes what must survive a restart
to the group's partition, and answers — at once, or later through a callback for
JoinGroup and SyncGroup, which wait for the rest of the group.

Persistence: a SyncGroup from the leader writes the group (GroupMetadataValue) before
anyone gets an assignment; an emptied group is written too; each OffsetCommit is one
batch of OffsetCommitValue records; deletions and expiries are tombstones. On startup,
and when this broker becomes leader of a partition, the partition is replayed into
groups (Stable ones keep their members, whose sessions restart) — small partitions at
once, large ones chunk by chunk in a task, answering COORDINATOR_LOAD_IN_PROGRESS
meanwhile. Appends are local leader appends (acks=1).

Timers (session expiry, the join and sync phases, the initial rebalance delay) are
delayed operations on the broker's timing wheel; see ``delayed.py``.

Differences from Kafka: the initial rebalance delay restarts with each new member
rather than adding whole delays (so a fleet that starts together is assigned
``group.initial.rebalance.delay.ms`` after its last member joined, never later than the
rebalance timeout); a partition-count change of a subscribed topic starts a rebalance
here too, not only when the leader notices it; offsets of a deleted topic are dropped.

Threading: everything runs on the event loop; nothing here blocks for long.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import NamedTuple

from odradek._tasks import cancel_and_wait, start_task
from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, OffsetAndMetadata
from odradek.broker.group.classic_group_member import ClassicGroupMember, JoinResult, SyncResult
from odradek.broker.group.classic_group_state import (
    COMMIT_REFUSAL,
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    HEARTBEAT_ANSWER,
    NON_EMPTY_STATES,
    PREPARING_REBALANCE,
    STABLE,
)
from odradek.broker.group.delayed import DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin
from odradek.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from odradek.broker.purgatory import DelayedOperationPurgatory
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)
CLASSIC_GROUP_TYPE = "classic"

TopicPartition = tuple[str, int]


class GroupConfig(NamedTuple):
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    load_buffer_size: int = 5 * 1024 * 1024
    new_member_join_timeout_ms: int = 300000

    @classmethod
    def from_broker_config(cls, config) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
            max_size=config.get("group.max.size"),
            offsets_retention_ms=config.get("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
            load_buffer_size=config.get("offsets.load.buffer.size"),
        )


class JoinRequest(NamedTuple):
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = False  # JoinGroup v4+: MEMBER_ID_REQUIRED for new dynamic members
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)
    reason: str | None = None


# Errors of an append to __consumer_offsets, as clients should see them (Kafka's mapping).
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


def _group_append_error(code) -> int:
    code = ErrorCode(int(code))
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return int(ErrorCode.unknown_server_error)
    return int(_APPEND_ERRORS.get(code, code))


def _commit_append_error(code) -> int:
    code = ErrorCode(int(code))
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return int(ErrorCode.invalid_commit_offset_size)
    return int(_APPEND_ERRORS.get(code, code))


# Transactional offset commits not yet decided: producer id -> group -> partition -> offset.
PendingTxnOffsets = dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]


class _Replay:
    """What replaying one partition has found so far: the latest value per key, and the
    transactional commits still waiting for their transaction's marker."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.groups: dict[str, schema.GroupMetadataValue | None] = {}
        self.pending: PendingTxnOffsets = {}
        self.skipped = 0

    def apply(self, key: bytes | None, value: bytes | None, producer_id: int = -1, committed=None) -> None:
        if committed is not None:  # a transaction marker
            for group_id, offsets in self.pending.pop(producer_id, {}).items():
                if committed:
                    self.offsets.setdefault(group_id, {}).update(offsets)
            return
        try:
            k = schema.decode_key(key)
            if isinstance(k, schema.OffsetCommitKey):
                tp = (k.topic, k.partition)
                if value is None:
                    self.offsets.get(k.group, {}).pop(tp, None)
                elif producer_id >= 0:
                    record = schema.decode_offset_commit_value(value)
                    group = self.pending.setdefault(producer_id, {}).setdefault(k.group, {})
                    group[tp] = OffsetAndMetadata.from_record(record)
                else:
                    record = schema.decode_offset_commit_value(value)
                    self.offsets.setdefault(k.group, {})[tp] = OffsetAndMetadata.from_record(record)
            elif isinstance(k, schema.GroupMetadataKey):
                self.groups[k.group] = None if value is None else schema.decode_group_metadata_value(value)
        except (errors.CorruptMessageError, UnicodeDecodeError) as exc:
            self.skipped += 1
            log.warning("skipping an unreadable %s record: %s", OFFSETS_TOPIC, exc)


class GroupCoordinator:
    def __init__(self, offsets_topic, timer, config: GroupConfig | None = None, *, wall_clock_ms=None):
        self.topic = offsets_topic
        self.timer = timer
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self.owned: set[int] = set()  # partitions loaded and served
        self.loading: set[int] = set()
        self.active = False
        self.rebalances = 0
        self.join_purgatory = DelayedOperationPurgatory("rebalance", timer)
        self.heartbeat_purgatory = DelayedOperationPurgatory("heartbeat", timer)
        self._wall_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._tasks: set[asyncio.Task] = set()
        self._expiry_task: asyncio.Task | None = None
        self.pending_txn: dict[int, PendingTxnOffsets] = {}  # by __consumer_offsets partition
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}

    @classmethod
    def for_broker(cls, broker) -> GroupCoordinator:
        from odradek.broker.group.offsets_topic import OffsetsTopic

        config = broker.config
        topic = OffsetsTopic(
            broker,
            num_partitions=config.get("offsets.topic.num.partitions"),
            replication_factor=config.get("offsets.topic.replication.factor"),
            segment_bytes=config.get("offsets.topic.segment.bytes"),
        )
        coordinator = cls(topic, broker.timer, GroupConfig.from_broker_config(config))
        broker.controller.on_change(coordinator.on_metadata_change)
        return coordinator

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Load the partitions this broker leads and start the offset expiry task."""
        self.active = True
        self.sync_partitions()
        self._expiry_task = start_task(self._expiry_loop, "group-offset-expiry")

    async def close(self) -> None:
        """Stop serving: unload every group (waiting requests get NOT_COORDINATOR). Idempotent."""
        if not self.active and self._expiry_task is None:
            return
        self.active = False
        tasks = (self._expiry_task, *self._tasks)
        self._expiry_task = None
        self._tasks.clear()
        await cancel_and_wait(*tasks)
        for partition in sorted(self.owned | self.loading):
            self._unload(partition)
        self.join_purgatory.close()
        self.heartbeat_purgatory.close()

    def _now(self) -> int:
        return self._wall_ms()

    # -- partitions ------------------------------------------------------------------------

    def on_metadata_change(self, event: str, topic: str) -> None:
        try:
            if topic == OFFSETS_TOPIC:
                self.sync_partitions()
            elif event == "deleted":
                self._on_topic_deleted(topic)
            elif event == "partitions":
                self._on_partitions_changed(topic)
        except Exception:
            log.exception("group coordinator: handling %s of %s failed", event, topic)

    def sync_partitions(self) -> None:
        """Load newly led ``__consumer_offsets`` partitions; unload the ones led elsewhere now."""
        if not self.active:
            return
        led = set(self.topic.led_partitions()) if self.topic.partition_count() is not None else set()
        for partition in sorted((self.owned | self.loading) - led):
            self._unload(partition)
        budget = self.config.load_buffer_size  # bytes replayed at once; larger partitions load in a task
        for partition in sorted(led - self.owned - self.loading):
            budget -= self._load(partition, budget)

    def partition_of(self, group_id: str) -> int | None:
        return self.topic.partition_for(group_id)

    def _load(self, partition: int, budget: int) -> int:
        """Replay ``partition`` now if it fits in ``budget`` bytes, else in a task; return bytes used."""
        self.loading.add(partition)
        size = self.topic.log_size(partition)
        if size <= budget:
            replay = _Replay()
            try:
                for chunk in self.topic.replay(partition, self.config.load_buffer_size):
                    for entry in chunk:
                        replay.apply(*entry)
            except Exception:
                self.loading.discard(partition)
                log.exception("loading %s-%d failed; its groups are not served", OFFSETS_TOPIC, partition)
                return size
            self._finish_load(partition, replay)
            return size
        task = asyncio.get_running_loop().create_task(
            self._load_in_chunks(partition), name=f"load-offsets-{partition}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return 0

    async def _load_in_chunks(self, partition: int) -> None:
        t0 = time.perf_counter()
        replay = _Replay()
        try:
            for chunk in self.topic.replay(partition, self.config.load_buffer_size):
                for entry in chunk:
                    replay.apply(*entry)
                await asyncio.sleep(0)
                if partition not in self.loading:
                    return  # unloaded meanwhile
        except asyncio.CancelledError:
            raise
        except Exception:
            self.loading.discard(partition)
            log.exception("loading %s-%d failed; its groups are not served", OFFSETS_TOPIC, partition)
            return
        self._finish_load(partition, replay)
        log.info("loaded %s-%d in %.0f ms", OFFSETS_TOPIC, partition, (time.perf_counter() - t0) * 1000)

    def _finish_load(self, partition: int, replay: _Replay) -> None:
        now = self._now()
        loaded = 0
        for group_id in set(replay.offsets) | set(replay.groups):
            value = replay.groups.get(group_id)
            offsets = replay.offsets.get(group_id, {})
            if value is None and not offsets:
                continue
            group = ClassicGroup.from_record(group_id, value, offsets, now)
            old = self.groups.get(group_id)
            if old is not None:
                self._retire(old)
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
            loaded += 1
        if replay.pending:
            self.pending_txn[partition] = replay.pending
        self.loading.discard(partition)
        self.owned.add(partition)
        for producer_id, committed in self._markers_while_loading.pop(partition, ()):
            self.complete_transaction(partition, producer_id, committed)  # written past the replay's end
        if loaded:
            log.info("%s-%d: loaded %d groups", OFFSETS_TOPIC, partition, loaded)

    def _unload(self, partition: int) -> None:
        self.loading.discard(partition)
        self.owned.discard(partition)
        self.pending_txn.pop(partition, None)
        self._markers_while_loading.pop(partition, None)
        count = self.topic.partition_count()
        for group_id, group in list(self.groups.items()):
            if count is None or partition_for(group_id, count) == partition:
                del self.groups[group_id]
                self._retire(group)

    def _retire(self, group: ClassicGroup) -> None:
        """The group leaves this coordinator: stop its timers, send its waiters elsewhere."""
        if group.join_op is not None:
            group.join_op.abandon()
            group.join_op = None
        self._cancel_sync_expiration(group)
        for op in group.pending_heartbeats.values():
            op.abandon()
        group.pending_heartbeats.clear()
        for member in group.members.values():
            self._cancel_heartbeat(member)
            group.complete_join(member, JoinResult.failed(ErrorCode.not_coordinator, member.member_id))
            member.complete_sync(SyncResult.failed(ErrorCode.not_coordinator))
        if group.state is not DEAD:
            group.transition_to(DEAD, self._now())

    def _check_group(self, group_id: str | None, *, allow_empty: bool = False) -> int:
        """The group's partition, if this broker serves it now; else the error to answer."""
        if group_id is None or (group_id == "" and not allow_empty):
            raise errors.InvalidGroupIdError(f"invalid group id {group_id!r}")
        if not self.active:
            raise errors.CoordinatorNotAvailableError("the group coordinator is not running")
        partition = self.partition_of(group_id)
        if partition is None:
            raise errors.NotCoordinatorError(f"{OFFSETS_TOPIC} does not exist yet")
        if partition in self.loading:
            raise errors.CoordinatorLoadInProgressError(f"{OFFSETS_TOPIC}-{partition} is loading")
        if partition not in self.owned:
            raise errors.NotCoordinatorError(f"this broker does not lead {OFFSETS_TOPIC}-{partition}")
        return partition

    # -- FindCoordinator -------------------------------------------------------------------

    def find_coordinator(self, key: str) -> int:
        """The node id of ``key``'s coordinator; creates ``__consumer_offsets`` on first use."""
        count = self.topic.ensure_created()
        leader = self.topic.leader(partition_for(key, count))
        if leader is None:
            raise errors.CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} partition of {key!r} has no leader")
        return leader

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, callback: Callable[[JoinResult], None]) -> None:
        unique: dict[str, bytes] = {}
        for name, metadata in req.protocols:
            unique.setdefault(name, metadata)  # a protocol named twice counts once (its first metadata)
        if len(unique) != len(req.protocols):
            req = req._replace(protocols=list(unique.items()))
        try:
            self._check_group(req.group_id)
        except KafkaError as exc:
            callback(JoinResult.failed(exc.code, req.member_id))
            return
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            callback(JoinResult.failed(ErrorCode.invalid_session_timeout, req.member_id))
            return
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                callback(JoinResult.failed(ErrorCode.unknown_member_id, req.member_id))
                return
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, self._now())
        if not self._accept_joining_member(group, req.member_id):
            if group.has(req.member_id):
                self._remove_member(group, group.get(req.member_id))
            elif group.is_pending(req.member_id):
                self._remove_pending(group, req.member_id)
            callback(JoinResult.failed(ErrorCode.group_max_size_reached))
        elif unknown:
            self._join_new_member(group, req, callback)
        else:
            self._join_existing_member(group, req, callback)
        self._maybe_complete_join(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING_REBALANCE:
            # counting waiting members lets the last of a shrunken limit be dropped
            if group.has(member_id) and group.get(member_id).is_awaiting_join:
                return True
            return group.num_awaiting_join < limit
        return group.has(member_id) or group.size < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, callback) -> None:
        if group.is_(DEAD):
            callback(JoinResult.failed(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            callback(JoinResult.failed(ErrorCode.inconsistent_group_protocol))
            return
        new_id = ClassicGroup.new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                self._replace_static_member(group, req, existing, new_id, callback)
            else:
                self._add_member_and_rebalance(group, req, new_id, callback)
        elif req.require_known_member_id:
            group.pending_members.add(new_id)
            op = DelayedHeartbeat(self, group, new_id, req.session_timeout_ms)
            group.pending_heartbeats[new_id] = op
            self.heartbeat_purgatory.try_complete_else_watch(op, ())
            callback(JoinResult.failed(ErrorCode.member_id_required, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, callback)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest, callback) -> None:
        member_id = req.member_id
        if group.is_(DEAD):
            callback(JoinResult.failed(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            callback(JoinResult.failed(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if group.is_pending(member_id):
            if req.group_instance_id is not None and req.group_instance_id in group.static_members:
                callback(JoinResult.failed(ErrorCode.fenced_instance_id, member_id))
                return
            self._add_member_and_rebalance(group, req, member_id, callback)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as exc:
            callback(JoinResult.failed(exc.code, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, callback, "member rejoins")
        elif state is COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # the member lost our JoinGroup answer: give it again
                callback(self._join_result(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, callback, "member changed its metadata")
        elif state is STABLE:
            if group.is_leader(member_id):
                # the leader asks for a new round (e.g. it saw a partition count change)
                self._update_member_and_rebalance(group, member, req, callback, "the leader rejoins")
            elif not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, callback, "member changed its metadata")
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:
            callback(JoinResult.failed(ErrorCode.unknown_member_id, member_id))

    def _join_result(
        self,
        group: ClassicGroup,
        member_id: str,
        *,
        with_members: bool,
        leader: str | None = None,
        skip=False,
    ) -> JoinResult:
        return JoinResult(
            NONE,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            leader if leader is not None else (group.leader_id or ""),
            group.current_member_metadata() if with_members else (),
            skip,
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, callback
    ) -> None:
        member = ClassicGroupMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        pending = group.pending_heartbeats.pop(member_id, None)
        if pending is not None:
            pending.abandon()
        if group.is_(PREPARING_REBALANCE) and group.previous_state is EMPTY:
            group.new_member_added = True
            group.last_new_member_ms = self.timer.now_ms()
        group.add(member, callback)
        # a new member cannot heartbeat before its JoinGroup is answered: give it longer
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member_id} joins")

    def _update_member_and_rebalance(self, group, member, req: JoinRequest, callback, reason: str) -> None:
        if member.join_callback is not None and member.join_callback is not callback:
            # a retried JoinGroup replaces an older one; answer the older so it cannot hang
            group.complete_join(member, JoinResult.failed(ErrorCode.rebalance_in_progress, member.member_id))
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, callback)
        self._maybe_prepare_rebalance_or_complete_join(group, f"{reason}: {member.member_id}")

    def _replace_static_member(self, group, req: JoinRequest, old_id: str, new_id: str, callback) -> None:
        """A static member came back under a new member id (KIP-345)."""
        old_leader = group.leader_id
        self._cancel_heartbeat(group.get(old_id))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, callback)
        log.info("group %s: static member %s is back as %s", group.group_id, req.group_instance_id, new_id)
        if group.is_(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {new_id} changed protocols"
                )
                return
            # nothing that decides the assignment changed: no rebalance, keep the assignment
            try:
                self._store_group(group, group.assignments())
            except KafkaError as exc:
                group.update_member(member, old_protocols, *old_timeouts, None)
                self._cancel_heartbeat(member)
                back = group.replace_static_member(req.group_instance_id, new_id, old_id)
                self._schedule_heartbeat(group, back)
                callback(JoinResult.failed(_group_append_error(exc.code)))
                return
            if req.supports_skip_assignment:
                is_leader = group.is_leader(new_id)
                result = self._join_result(group, new_id, with_members=is_leader, skip=is_leader)
            else:
                # the old leader id tells a returning leader not to compute an assignment that
                # a Stable group would never hand out
                result = self._join_result(group, new_id, with_members=False, leader=old_leader or "")
            group.complete_join(member, result)
        elif group.is_(COMPLETING_REBALANCE):
            # the leader may be assigning to the old id: start over
            self._prepare_rebalance(group, f"static member {new_id} rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_(PREPARING_REBALANCE) and group.join_op is not None:
            self.join_purgatory.check_and_complete(group.group_id)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._cancel_sync_expiration(group)
        group.pending_sync_members.clear()
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING_REBALANCE, self._now())
        log.info(
            "group %s: preparing to rebalance (generation %d, %d members): %s",
            group.group_id,
            group.generation_id,
            group.size,
            reason,
        )
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            now = self.timer.now_ms()
            group.new_member_added = False
            group.last_new_member_ms = now
            op = InitialDelayedJoin(self, group, delay, now + max(group.rebalance_timeout_ms, delay))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms)
        self._watch_join(group, op)

    def _watch_join(self, group: ClassicGroup, op) -> None:
        if group.join_op is not None and group.join_op is not op:
            group.join_op.abandon()
        group.join_op = op
        self.join_purgatory.try_complete_else_watch(op, (group.group_id,))

    def _on_initial_delay_over(self, op: InitialDelayedJoin) -> None:
        group = op.group
        if group.join_op is not op:
            return
        try:
            now = self.timer.now_ms()
            if group.new_member_added and now < op.deadline_ms:
                wait = (
                    min(group.last_new_member_ms + self.config.initial_rebalance_delay_ms, op.deadline_ms)
                    - now
                )
                if wait >= 1:
                    group.new_member_added = False
                    self._watch_join(group, InitialDelayedJoin(self, group, math.ceil(wait), op.deadline_ms))
                    return
            group.join_op = None
            self._complete_join(group)
        except Exception:
            log.exception("group %s: closing the initial join phase failed", group.group_id)

    def _on_join_phase_over(self, op: DelayedJoin) -> None:
        group = op.group
        if group.join_op is not op:
            return
        group.join_op = None
        try:
            self._complete_join(group)
        except Exception:
            log.exception("group %s: closing the join phase failed", group.group_id)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Close the join phase: drop dynamic members that did not rejoin, start a generation."""
        gone = [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]
        for member in gone:
            self._cancel_heartbeat(member)
            member.complete_sync(SyncResult.failed(ErrorCode.unknown_member_id))
            group.remove(member.member_id)
        if gone:
            log.info(
                "group %s: removed members that did not rejoin: %s",
                group.group_id,
                [m.member_id for m in gone],
            )
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin are left: wait for them (or their sessions)
            self._watch_join(group, DelayedJoin(self, group, group.rebalance_timeout_ms))
            return
        group.init_next_generation(self._now())
        self.rebalances += 1
        if group.is_(EMPTY):
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._store_group_quietly(group, {})
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            group.size,
            group.protocol_name,
            group.leader_id,
        )
        for member in list(group.members.values()):
            result = self._join_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)
            )
            group.complete_join(member, result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: Callable[[SyncResult], None],
    ) -> None:
        try:
            self._check_group(group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_(EMPTY):
                raise errors.UnknownMemberIdError(f"group {group_id} has no members")
            if group.is_(DEAD):
                raise errors.CoordinatorNotAvailableError(f"group {group_id} is gone")
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise errors.IllegalGenerationError(f"generation {generation_id} != {group.generation_id}")
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise errors.InconsistentGroupProtocolError(
                    f"{protocol_type}/{protocol_name} is not the group's"
                )
        except KafkaError as exc:
            callback(SyncResult.failed(exc.code))
            return
        member = group.get(member_id)
        if group.is_(PREPARING_REBALANCE):
            callback(SyncResult.failed(ErrorCode.rebalance_in_progress))
        elif group.is_(STABLE):
            self._remove_pending_sync_member(group, member_id)
            callback(SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member)
        else:  # CompletingRebalance: wait for the leader
            if member.sync_callback is not None:
                member.complete_sync(SyncResult.failed(ErrorCode.rebalance_in_progress))
            member.sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._apply_assignment(group, generation_id, assignments)

    def _apply_assignment(
        self, group: ClassicGroup, generation_id: int, assignments: dict[str, bytes]
    ) -> None:
        full = {mid: assignments.get(mid, b"") for mid in group.members}
        missing = [mid for mid in group.members if mid not in assignments]
        if missing:
            log.warning("group %s: empty assignments for %s", group.group_id, missing)
        try:
            self._store_group(group, full)
        except KafkaError as exc:
            error = _group_append_error(exc.code)
            log.warning("group %s: storing the assignment failed: %s", group.group_id, exc)
            if group.is_(COMPLETING_REBALANCE) and group.generation_id == generation_id:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance_or_complete_join(group, "storing the assignment failed")
            return
        for member in group.members.values():
            member.assignment = full[member.member_id]
        group.transition_to(STABLE, self._now())
        self._propagate_assignment(group, NONE)
        log.info("group %s: generation %d is stable", group.group_id, group.generation_id)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, int(error))

    def _propagate_assignment(self, group: ClassicGroup, error: int) -> None:
        protocol_type, protocol_name = (
            (group.protocol_type, group.protocol_name) if error == NONE else (None, None)
        )
        for member in list(group.members.values()):
            if member.complete_sync(SyncResult(error, protocol_type, protocol_name, member.assignment)):
                self._schedule_heartbeat(group, member)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
            self._cancel_sync_expiration(group)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        self._cancel_sync_expiration(group)
        op = DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms)
        group.sync_op = op
        self.join_purgatory.try_complete_else_watch(op, ())

    @staticmethod
    def _cancel_sync_expiration(group: ClassicGroup) -> None:
        if group.sync_op is not None:
            group.sync_op.abandon()
            group.sync_op = None

    def _on_sync_expired(self, op: DelayedSync) -> None:
        group = op.group
        if group.sync_op is not op:
            return
        group.sync_op = None
        try:
            if op.generation_id != group.generation_id or group.state not in (COMPLETING_REBALANCE, STABLE):
                return
            late = sorted(group.pending_sync_members)
            if not late:
                return
            for member_id in late:
                member = group.members.get(member_id)
                if member is not None:
                    self._cancel_heartbeat(member)
                group.remove(member_id)
            self._prepare_rebalance(group, f"members {late} never sent SyncGroup")
        except Exception:
            log.exception("group %s: sync expiry failed", group.group_id)

    # -- Heartbeat and sessions ------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The error code of a Heartbeat; raises KafkaError for failed checks."""
        self._check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise errors.UnknownMemberIdError(f"no group {group_id}")
        if group.is_(DEAD):
            raise errors.CoordinatorNotAvailableError(f"group {group_id} is gone")
        group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise errors.IllegalGenerationError(f"generation {generation_id} != {group.generation_id}")
        answer = HEARTBEAT_ANSWER[group.state]
        if answer != ErrorCode.unknown_member_id:
            self._schedule_heartbeat(group, group.get(member_id))
        return int(answer)

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None
    ) -> None:
        self._cancel_heartbeat(member)
        op = DelayedHeartbeat(self, group, member.member_id, timeout_ms or member.session_timeout_ms)
        member.heartbeat_op = op
        self.heartbeat_purgatory.try_complete_else_watch(op, ())

    @staticmethod
    def _cancel_heartbeat(member: ClassicGroupMember) -> None:
        if member.heartbeat_op is not None:
            member.heartbeat_op.abandon()
            member.heartbeat_op = None

    def _on_session_expired(self, op: DelayedHeartbeat) -> None:
        group, member_id = op.group, op.member_id
        try:
            if self.groups.get(group.group_id) is not group or group.is_(DEAD):
                return
            if group.pending_heartbeats.get(member_id) is op:
                del group.pending_heartbeats[member_id]
                if group.is_pending(member_id):
                    log.info("group %s: pending member %s never joined; dropped", group.group_id, member_id)
                    group.remove(member_id)
                    self._maybe_complete_join(group)
                return
            member = group.members.get(member_id)
            if member is None or member.heartbeat_op is not op:
                return
            member.heartbeat_op = None
            if member.has_satisfied_heartbeat():
                return
            log.info("group %s: member %s's session expired; removing it", group.group_id, member_id)
            self._remove_member_and_update_group(group, member, "session timeout")
        except Exception:
            log.exception("group %s: session expiry of %s failed", group.group_id, member_id)

    def _remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._cancel_heartbeat(member)
        group.complete_join(member, JoinResult.failed(ErrorCode.unknown_member_id))
        member.complete_sync(SyncResult.failed(ErrorCode.unknown_member_id))
        group.remove(member.member_id)

    @staticmethod
    def _remove_pending(group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        op = group.pending_heartbeats.pop(member_id, None)
        if op is not None:
            op.abandon()

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicGroupMember, reason: str
    ) -> None:
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, f"{member.member_id} removed: {reason}")
        elif group.is_(PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # -- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        """Per leaving ``(member_id, group_instance_id, reason)``, its error code.

        Raises KafkaError for a group-level failure.
        """
        self._check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return [int(ErrorCode.unknown_member_id)] * len(leaving)
        if group.is_(DEAD):
            raise errors.CoordinatorNotAvailableError(f"group {group_id} is gone")
        results = []
        left = []
        for member_id, instance_id, reason in leaving:
            if member_id == "":
                # admin removal by group.instance.id
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    results.append(int(ErrorCode.unknown_member_id))
                    continue
                member_id = current
            elif group.is_pending(member_id):
                self._remove_pending(group, member_id)
                results.append(NONE)
                left.append(member_id)
                continue
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as exc:
                    results.append(int(exc.code))
                    continue
            self._remove_member(group, group.get(member_id))
            log.info("group %s: member %s left (%s)", group.group_id, member_id, reason or "no reason given")
            results.append(NONE)
            left.append(member_id)
        if left:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"members left: {left}")
            elif group.is_(PREPARING_REBALANCE):
                self._maybe_complete_join(group)
        return results

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        retention_ms: int = -1,
    ) -> dict[TopicPartition, int]:
        """Per partition, its error code. Topics were checked by the handler.

        ``retention_ms`` (OffsetCommit v2-v4; -1 for the broker's rule) gives the offsets an
        expire timestamp of their own, as Kafka did before KIP-211.
        """
        try:
            partition = self._check_group(group_id, allow_empty=True)
        except KafkaError as exc:
            return dict.fromkeys(offsets, int(exc.code))
        now = self._now()
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, int(ErrorCode.illegal_generation))
            # a consumer that assigns partitions itself: a group that only stores offsets
            group = self.groups[group_id] = ClassicGroup(group_id, now)
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error != NONE:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self._schedule_heartbeat(group, member)
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata) > limit:
                results[tp] = int(ErrorCode.offset_metadata_too_large)
                continue
            expire = now + retention_ms if retention_ms >= 0 else -1
            accepted[tp] = om._replace(
                metadata=om.metadata or "", commit_timestamp=now, expire_timestamp=expire
            )
        if accepted:
            entries = [
                (
                    schema.encode_offset_commit_key(group_id, t, p),
                    schema.encode_offset_commit_value(om.to_record()),
                )
                for (t, p), om in accepted.items()
            ]
            try:
                self.topic.append(partition, entries, now)
            except KafkaError as exc:
                log.warning("group %s: writing a commit failed: %s", group_id, exc)
                code = _commit_append_error(exc.code)
                for tp in accepted:
                    results[tp] = code
            else:
                group.offsets.update(accepted)
                for tp in accepted:
                    results[tp] = NONE
        return {tp: results[tp] for tp in offsets}

    @staticmethod
    def _validate_offset_commit(
        group: ClassicGroup, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        if group.is_(DEAD):
            return int(ErrorCode.coordinator_not_available)
        if generation_id < 0 and group.is_(EMPTY):
            return NONE  # admin tools and consumers without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            try:
                group.validate_member(member_id, group_instance_id)
            except KafkaError as exc:
                return int(exc.code)
            if generation_id != group.generation_id:
                return int(ErrorCode.illegal_generation)
        elif not group.is_(EMPTY):
            return int(ErrorCode.unknown_member_id)  # only members commit to a group with members
        return int(COMMIT_REFUSAL[group.state])

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when ``partitions`` is None.

        Raises KafkaError for a group-level failure.
        """
        self._check_group(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(DEAD) else {}
        if partitions is None:
            return sorted(offsets.items())
        return [(tp, offsets.get(tp)) for tp in partitions]

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete: per partition, its error code; raises KafkaError for the group."""
        partition = self._check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            raise errors.GroupIdNotFoundError(f"no group {group_id}")
        results: dict[TopicPartition, int] = {}
        if group.state in NON_EMPTY_STATES:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise errors.NonEmptyGroupError(f"group {group_id} has members")
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = int(ErrorCode.group_subscribed_to_topic)
        eligible = [tp for tp in partitions if tp not in results]
        self._remove_offsets(group, partition, [tp for tp in eligible if tp in group.offsets])
        for tp in eligible:
            results[tp] = NONE
        return results

    def _remove_offsets(self, group: ClassicGroup, partition: int, removed: list[TopicPartition]) -> None:
        """Drop offsets (tombstones); a group left Empty without offsets disappears."""
        entries: list[tuple[bytes, bytes | None]] = []
        for tp in removed:
            if group.offsets.pop(tp, None) is not None:
                entries.append((schema.encode_offset_commit_key(group.group_id, tp[0], tp[1]), None))
        if group.is_(EMPTY) and not group.offsets and not group.pending_members:
            group.transition_to(DEAD, self._now())
            if group.generation_id > 0:
                entries.append((schema.encode_group_metadata_key(group.group_id), None))
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            self._retire(group)
            log.info("group %s: no members and no offsets left; removed", group.group_id)
        if entries:
            try:
                self.topic.append(partition, entries, self._now())
            except KafkaError as exc:
                log.warning("group %s: writing tombstones failed: %s", group.group_id, exc)

    # -- transactional offsets (TxnOffsetCommit) -------------------------------------------

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: write the offsets as a transactional batch of the producer; they
        become the group's committed offsets when the transaction commits (``complete_transaction``)
        and vanish if it aborts. Per partition, its error code.

        Kafka's checks: the member and generation when given (v3+), but no rebalance check —
        a transaction may commit while its group rebalances. The log refuses a fenced
        producer epoch (INVALID_PRODUCER_EPOCH).
        """
        try:
            partition = self._check_group(group_id, allow_empty=True)
        except KafkaError as exc:
            return dict.fromkeys(offsets, int(exc.code))
        now = self._now()
        group = self.groups.get(group_id)
        error = NONE
        if group is None:
            if generation_id >= 0:
                error = int(ErrorCode.illegal_generation)
        elif group.is_(DEAD):
            error = int(ErrorCode.coordinator_not_available)
        elif group.is_static_member_fenced(group_instance_id, member_id):
            error = int(ErrorCode.fenced_instance_id)
        elif member_id and not group.has(member_id):
            error = int(ErrorCode.unknown_member_id)
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = int(ErrorCode.illegal_generation)
        if error != NONE:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata) > limit:
                results[tp] = int(ErrorCode.offset_metadata_too_large)
                continue
            accepted[tp] = om._replace(metadata=om.metadata or "", commit_timestamp=now, expire_timestamp=-1)
        if accepted:
            entries = [
                (
                    schema.encode_offset_commit_key(group_id, t, p),
                    schema.encode_offset_commit_value(om.to_record()),
                )
                for (t, p), om in accepted.items()
            ]
            try:
                self.topic.append(partition, entries, now, producer_id, producer_epoch)
            except KafkaError as exc:
                log.info(
                    "group %s: a transactional commit of producer %d failed: %s", group_id, producer_id, exc
                )
                code = _commit_append_error(exc.code)
                for tp in accepted:
                    results[tp] = code
            else:
                pending = self.pending_txn.setdefault(partition, {}).setdefault(producer_id, {})
                pending.setdefault(group_id, {}).update(accepted)
                for tp in accepted:
                    results[tp] = NONE
        return {tp: results[tp] for tp in offsets}

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition``: its pending
        transactional offsets become committed offsets, or are dropped (Kafka's
        ``onTransactionCompleted``)."""
        if partition in self.loading:
            self._markers_while_loading.setdefault(partition, []).append((producer_id, committed))
            return
        pending = self.pending_txn.get(partition)
        if not pending:
            return
        by_group = pending.pop(producer_id, None)
        if not pending:
            del self.pending_txn[partition]
        if not by_group or not committed:
            return
        now = self._now()
        for group_id, offsets in by_group.items():
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                group = self.groups[group_id] = ClassicGroup(group_id, now)
            group.offsets.update(offsets)

    def pending_transactional_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with a transactional commit still undecided (OffsetFetch
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them)."""
        partition = self.partition_of(group_id)
        out: set[TopicPartition] = set()
        for by_group in self.pending_txn.get(partition, {}).values():
            out.update(by_group.get(group_id, ()))
        return out

    # -- groups: list, describe, delete ----------------------------------------------------

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> tuple[int, list[dict]]:
        if not self.active:
            return int(ErrorCode.coordinator_not_available), []
        error = int(ErrorCode.coordinator_load_in_progress) if self.loading else NONE
        wanted_states = {s.lower() for s in states or ()}
        wanted_types = {t.lower() for t in types or ()}
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return error, []
        listed = []
        for group in self.groups.values():
            if group.is_(DEAD) or (wanted_states and str(group.state).lower() not in wanted_states):
                continue
            listed.append(
                {
                    "group_id": group.group_id,
                    "protocol_type": group.protocol_type or "",
                    "group_state": str(group.state),
                    "group_type": CLASSIC_GROUP_TYPE,
                }
            )
        return error, listed

    def describe_group(self, group_id: str) -> dict | None:
        """The group as DescribeGroups shows it, or None if there is no such group."""
        self._check_group(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return None
        stable = group.is_(STABLE)
        return {
            "group_state": str(group.state),
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [m.describe(group.protocol_name, stable) for m in group.members.values()],
        }

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results = {}
        for group_id in group_ids:
            try:
                partition = self._check_group(group_id, allow_empty=True)
            except KafkaError as exc:
                results[group_id] = int(exc.code)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                results[group_id] = int(ErrorCode.group_id_not_found)
            elif group.state in NON_EMPTY_STATES:
                results[group_id] = int(ErrorCode.non_empty_group)
            else:
                entries = [
                    (schema.encode_offset_commit_key(group_id, t, p), None) for (t, p) in group.offsets
                ]
                entries.append((schema.encode_group_metadata_key(group_id), None))
                try:
                    self.topic.append(partition, entries, self._now())
                except KafkaError as exc:
                    results[group_id] = _group_append_error(exc.code)
                    continue
                del self.groups[group_id]
                for op in group.pending_heartbeats.values():
                    op.abandon()
                group.pending_heartbeats.clear()
                self._retire(group)
                results[group_id] = NONE
                log.info("group %s deleted", group_id)
        return results

    # -- persistence -----------------------------------------------------------------------

    def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        partition = self.partition_of(group.group_id)
        if partition is None or partition not in self.owned:
            raise errors.NotCoordinatorError(f"no longer the coordinator of {group.group_id}")
        value = schema.encode_group_metadata_value(group.to_record(assignment))
        self.topic.append(partition, [(schema.encode_group_metadata_key(group.group_id), value)], self._now())

    def _store_group_quietly(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        try:
            self._store_group(group, assignment)
        except KafkaError as exc:
            log.warning("group %s: writing its metadata failed: %s", group.group_id, exc)

    # -- expiry and metadata changes -------------------------------------------------------

    async def _expiry_loop(self) -> None:
        interval = max(self.config.offsets_retention_check_interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (Kafka's rules); return how many."""
        now = self._now() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        total = 0
        for group in list(self.groups.values()):
            partition = self.partition_of(group.group_id)
            if partition not in self.owned:
                continue
            expired = self._expired_offsets(group, now, retention)
            if expired or (group.is_(EMPTY) and not group.offsets):
                self._remove_offsets(group, partition, expired)
                total += len(expired)
        if total:
            log.info("expired %d committed offsets", total)
        return total

    @staticmethod
    def _expired_offsets(group: ClassicGroup, now: int, retention: int) -> list[TopicPartition]:
        skip: set[str] = set()
        if group.protocol_type is not None:
            if group.is_(EMPTY):
                # retention counts from when the group became empty

                def base(om):
                    return group.state_timestamp if group.state_timestamp is not None else om.commit_timestamp

            elif (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_(STABLE)
            ):
                # a live group keeps what it subscribes to; other topics' offsets age from their commit
                skip = group.subscribed_topics

                def base(om):
                    return om.commit_timestamp

            else:
                return []
        else:

            def base(om):
                return om.commit_timestamp

        out = []
        for tp, om in group.offsets.items():
            if tp[0] in skip:
                continue
            if om.expire_timestamp >= 0:
                if now >= om.expire_timestamp:
                    out.append(tp)
            elif now - base(om) >= retention:
                out.append(tp)
        return out

    def _on_topic_deleted(self, topic: str) -> None:
        for group in list(self.groups.values()):
            partition = self.partition_of(group.group_id)
            if partition not in self.owned:
                continue
            gone = [tp for tp in group.offsets if tp[0] == topic]
            if gone:
                self._remove_offsets(group, partition, gone)

    def _on_partitions_changed(self, topic: str) -> None:
        for group in list(self.groups.values()):
            if (
                group.state in (STABLE, COMPLETING_REBALANCE)
                and group.subscribed_topics
                and topic in group.subscribed_topics
            ):
                self._prepare_rebalance(group, f"the partition count of {topic} changed")
