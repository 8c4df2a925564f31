"""Membership and rebalancing of classic groups (the JoinGroup/SyncGroup protocol) in one
``__consumer_offsets`` partition: Kafka's GroupMetadataManager, for the classic protocol.

One manager per coordinator shard (``group_coordinator_shard.py``); the shard has already
checked that it serves the group. The state machine and its theory of operation are in
``classic_group_state.py``; the data in ``classic_group.py`` and ``classic_group_member.py``.
JoinGroup and SyncGroup may wait for the rest of the group: they are answered through a
callback, at once or later. A SyncGroup from the leader writes the group
(GroupMetadataValue) before anyone gets an assignment; an emptied group is written too.

Timers (session expiry, the join and sync phases, the initial rebalance delay) are
delayed operations on the broker's timing wheel (``delayed.py``); they call back here.

Differences from Kafka: the initial rebalance delay restarts with each new member
rather than adding whole delays (so a fleet that starts together is assigned
``group.initial.rebalance.delay.ms`` after its last member joined, never later than the
rebalance timeout); a partition-count change of a subscribed topic starts a rebalance
here too, not only when the leader notices it.

Threading: everything runs on the event loop; nothing here blocks for long.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import NamedTuple

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group import ClassicGroup
from odradek.broker.group.classic_group_member import ClassicGroupMember, JoinResult, SyncResult
from odradek.broker.group.classic_group_state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    HEARTBEAT_ANSWER,
    PREPARING_REBALANCE,
    STABLE,
)
from odradek.broker.group.delayed import DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin
from odradek.broker.group.offsets_topic import group_append_error
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)
CLASSIC_GROUP_TYPE = "classic"


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


class ClassicGroupManager:
    def __init__(self, shard):
        self.shard = shard
        self.context = shard.context
        self.groups: dict[str, ClassicGroup] = shard.groups  # the shard's, shared with its offsets
        self.config = shard.context.config
        self.timer = shard.context.timer
        self.join_purgatory = shard.context.join_purgatory
        self.heartbeat_purgatory = shard.context.heartbeat_purgatory

    # -- loading ---------------------------------------------------------------------------

    def replay(self, group_id: str, value: bytes | None) -> None:
        """A GroupMetadata record read back from the partition: the group as it was written
        (Stable with its members, or Empty), or gone (a tombstone)."""
        if value is None:
            self.groups.pop(group_id, None)
        else:
            record = schema.decode_group_metadata_value(value)
            self.groups[group_id] = ClassicGroup.from_record(group_id, record, self.shard.now())

    def on_loaded(self) -> None:
        """The partition is loaded: loaded members' sessions start now."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_heartbeat(group, member)

    def retire(self, group: ClassicGroup) -> None:
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
            group.transition_to(DEAD, self.shard.now())

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, callback: Callable[[JoinResult], None]) -> None:
        unique: dict[str, bytes] = {}
        for name, metadata in req.protocols:
            unique.setdefault(name, metadata)  # a protocol named twice counts once (its first metadata)
        if len(unique) != len(req.protocols):
            req = req._replace(protocols=list(unique.items()))
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
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, self.shard.now())
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
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
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
        self.schedule_heartbeat(group, member)
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
                self.schedule_heartbeat(group, back)
                callback(JoinResult.failed(group_append_error(exc.code)))
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
            self.prepare_rebalance(group, f"static member {new_id} rejoined during CompletingRebalance")
        else:
            self._maybe_complete_join(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_(PREPARING_REBALANCE) and group.join_op is not None:
            self.join_purgatory.check_and_complete(group.group_id)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._cancel_sync_expiration(group)
        group.pending_sync_members.clear()
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING_REBALANCE, self.shard.now())
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
        group.init_next_generation(self.shard.now())
        self.context.rebalances += 1
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
            self.schedule_heartbeat(group, member)
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
            self.schedule_heartbeat(group, member)
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
            self._assignment_stored(group, generation_id, full, group_append_error(exc.code))
            return
        self.shard.when_written_replicated(
            self.context.config.offsets_commit_timeout_ms,
            lambda error: self._assignment_stored(group, generation_id, full, error),
        )

    def _assignment_stored(self, group: ClassicGroup, generation_id: int, full: dict[str, bytes], error: int) -> None:
        """The leader's assignment is in the ISR (``error`` 0): the group becomes Stable and
        every member gets its part; or it will not be: every member gets ``error`` and the
        group rebalances. Only then, as Kafka does, so that neither the members nor
        DescribeGroups see an assignment a new coordinator might not have. Nothing when the
        group moved on meanwhile (a new rebalance answered the waiting members)."""
        if not (group.is_(COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error != NONE:
            log.warning("group %s: storing the assignment of generation %d failed: %s", group.group_id, generation_id, ErrorCode(error).name)
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance_or_complete_join(group, "storing the assignment failed")
            return
        for member in group.members.values():
            member.assignment = full.get(member.member_id, b"")
        group.transition_to(STABLE, self.shard.now())
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
                self.schedule_heartbeat(group, member)

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
            self.prepare_rebalance(group, f"members {late} never sent SyncGroup")
        except Exception:
            log.exception("group %s: sync expiry failed", group.group_id)

    # -- Heartbeat and sessions ------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The error code of a Heartbeat; raises KafkaError for failed checks."""
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
            self.schedule_heartbeat(group, group.get(member_id))
        return int(answer)

    def schedule_heartbeat(
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

    # -- list, describe --------------------------------------------------------------------

    def listed(self, wanted_states: set[str]) -> list[dict]:
        """ListGroups entries of this shard's groups, in the states wanted (all when empty)."""
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
        return listed

    def describe_group(self, group_id: str) -> dict | None:
        """The group as DescribeGroups shows it, or None if there is no such group."""
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

    # -- persistence -----------------------------------------------------------------------

    def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        if not self.shard.active:
            raise errors.NotCoordinatorError(f"no longer the coordinator of {group.group_id}")
        value = schema.encode_group_metadata_value(group.to_record(assignment))
        self.shard.append([(schema.encode_group_metadata_key(group.group_id), value)], self.shard.now())

    def _store_group_quietly(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        try:
            self._store_group(group, assignment)
        except KafkaError as exc:
            log.warning("group %s: writing its metadata failed: %s", group.group_id, exc)

    # -- metadata changes ------------------------------------------------------------------

    def on_partitions_changed(self, topic: str) -> None:
        """A topic's partition count changed: groups subscribed to it rebalance."""
        for group in list(self.groups.values()):
            if (
                group.state in (STABLE, COMPLETING_REBALANCE)
                and group.subscribed_topics
                and topic in group.subscribed_topics
            ):
                self.prepare_rebalance(group, f"the partition count of {topic} changed")
