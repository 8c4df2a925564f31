"""Members of a consumer group (KIP-848) that speak the classic protocol: JoinGroup,
SyncGroup, Heartbeat and LeaveGroup answered from the consumer group's state, as Kafka 4
does after an online upgrade (``group_migration.py``) or when a classic consumer joins a
consumer group.

A JoinGroup is the classic member's heartbeat with a subscription: the topics, rack and
owned partitions come from the consumer-protocol metadata of its first protocol; the member
is created or updated, the group epoch bumped if its subscription changed, the target
assignment recomputed, and the member moved one step toward its target with what it says
it owns. The answer names no leader (nobody assigns on the client side) and carries the
member's epoch as the generation. SyncGroup hands the member its current assignment in
consumer-protocol bytes. Heartbeat answers REBALANCE_IN_PROGRESS when the member must
rejoin: the group epoch moved, it has partitions to revoke (it gives them up by rejoining
without them), or partitions it waited for were released. A member that does not send
SyncGroup after its JoinGroup, or does not rejoin after being told to, within its
rebalance timeout, is fenced; its session is its JoinGroup session timeout.

Threading: the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group import group_migration as migration
from odradek.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE
from odradek.broker.group.classic_group_member import JoinResult, SyncResult
from odradek.broker.group.consumer_group import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
)
from odradek.broker.group.modern_group_records import ClassicMemberMetadata
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)


class ClassicMembers:
    def __init__(self, manager):
        self.manager = manager

    @property
    def config(self):
        return self.manager.config

    # -- JoinGroup -------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, req, callback) -> None:
        """``req`` is the classic manager's JoinRequest; the answer goes to ``callback``."""
        try:
            result = self._join(group, req)
        except KafkaError as exc:
            result = JoinResult.failed(exc.code, req.member_id)
        callback(result)

    def _join(self, group: ConsumerGroup, req) -> JoinResult:
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise errors.InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside"
                f" [{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]"
            )
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            raise errors.InconsistentGroupProtocolError(
                f"group {group.group_id} is a consumer group: join with protocol type 'consumer'"
            )
        unknown = req.member_id == ""
        member_id = req.member_id or uuid.uuid4().hex
        if unknown and req.group_instance_id is None and req.require_known_member_id:
            return JoinResult.failed(ErrorCode.member_id_required, member_id)
        try:
            subscription = schema.decode_subscription(req.protocols[0][1])
        except (errors.CorruptMessageError, UnicodeDecodeError) as exc:
            raise errors.InconsistentGroupProtocolError(f"unreadable consumer protocol metadata: {exc}") from None
        entries: list = []
        member, bump, replaced_consumer_member = self._member_for(group, req, member_id, unknown, entries)
        classic = ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols))
        before = (member.subscribed_topics, member.rack_id, member.rebalance_timeout_ms, member.classic)
        member.subscribed_topics = tuple(sorted(set(subscription.topics)))
        member.rack_id = subscription.rack_id
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = classic
        if bump or before != (member.subscribed_topics, member.rack_id, member.rebalance_timeout_ms, member.classic):
            entries.append(self.manager._member_record(group, member))
        bump = bump or before[0] != member.subscribed_topics
        ids = self.manager.topic_names()
        owned: Assignment = {
            ids[name][0]: partitions for name, partitions in subscription.owned.items() if name in ids and partitions
        }
        self.manager.update_assignment(group, member, bump, owned, entries, joining=bump or unknown)
        if replaced_consumer_member and migration.may_downgrade_after_replacement(group, self.config):
            # the last member speaking the consumer protocol came back speaking the classic one
            classic_group = self.manager.shard.downgrade_online(group, "", entries, rebalance=False)
            self.manager._write(entries)
            return JoinResult(
                NONE, member.member_id, classic_group.generation_id, CONSUMER_PROTOCOL_TYPE,
                classic_group.protocol_name, "",
            )
        self.manager._write(entries)
        self._cancel(member, "join_timer")
        self.manager.schedule_session(group, member)
        self._schedule(group, member, "sync_timer", "did not send SyncGroup within its rebalance timeout")
        return JoinResult(
            NONE, member.member_id, member.member_epoch, CONSUMER_PROTOCOL_TYPE, req.protocols[0][0], ""
        )

    def _member_for(self, group: ConsumerGroup, req, member_id: str, unknown: bool, entries):
        """(the member, whether it is new, whether it replaced a static member that spoke the
        consumer protocol)."""
        instance_id = req.group_instance_id
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is not None:
                if current == member_id:
                    return self._classic_member(group, current), False, False
                if not unknown:
                    raise errors.FencedInstanceIdError(f"static member {instance_id} is now {current}")
                # the instance restarted (perhaps with the other protocol): the newcomer takes its place
                old = group.members[current]
                replaced = self.manager._replace_static(group, old, member_id, entries)
                return replaced, False, not old.uses_classic_protocol
        if member_id in group.members:
            return self._classic_member(group, member_id), False, False
        # a new member, or one with the id MEMBER_ID_REQUIRED gave it (Kafka keeps no pending members
        # in a consumer group), or one fenced meanwhile: it joins afresh
        if len(group.members) >= self.config.consumer_max_size:
            raise errors.GroupMaxSizeReachedError(f"group {group.group_id} is full")
        member = ConsumerGroupMember(member_id, instance_id=instance_id)
        group.add(member)
        log.info("group %s: classic member %s joins", group.group_id, member_id)
        return member, True, False

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"member {member_id} is not in group {group.group_id}")
        if not member.uses_classic_protocol:
            raise errors.UnknownMemberIdError(f"member {member_id} speaks the consumer protocol")
        return member

    def _validate(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                raise errors.UnknownMemberIdError(f"no static member {instance_id} in group {group.group_id}")
            if current != member_id:
                raise errors.FencedInstanceIdError(f"static member {instance_id} is now {current}")
        return self._classic_member(group, member_id)

    # -- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------

    def sync(self, group: ConsumerGroup, *, member_id, group_instance_id, generation_id, protocol_type,
             protocol_name) -> SyncResult:
        try:
            member = self._validate(group, member_id, group_instance_id)
            if generation_id != member.member_epoch:
                raise errors.IllegalGenerationError(f"generation {generation_id} != {member.member_epoch}")
            first = member.classic.protocols[0][0]
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != first
            ):
                raise errors.InconsistentGroupProtocolError(f"{protocol_type}/{protocol_name} is not {first}")
            if group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
                self._schedule_if_absent(group, member, "join_timer", "did not rejoin within its rebalance timeout")
                raise errors.RebalanceInProgressError(f"group {group.group_id} moved to epoch {group.group_epoch}")
        except KafkaError as exc:
            return SyncResult.failed(exc.code)
        self._cancel(member, "sync_timer")
        self.manager.schedule_session(group, member)
        return SyncResult(NONE, CONSUMER_PROTOCOL_TYPE, first, self._assignment_bytes(member))

    def _assignment_bytes(self, member: ConsumerGroupMember) -> bytes:
        by_name = {}
        for topic_id, partitions in member.assigned.items():
            name = self.manager.topic_name(topic_id)
            if name:
                by_name[name] = partitions
        version = int.from_bytes(member.classic.protocols[0][1][:2], "big", signed=True)
        return schema.encode_assignment(by_name, version)

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """The error code of a Heartbeat; raises KafkaError for failed checks."""
        member = self._validate(group, member_id, instance_id)
        if generation_id != member.member_epoch:
            raise errors.IllegalGenerationError(f"generation {generation_id} != {member.member_epoch}")
        self.manager.schedule_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state == UNREVOKED_PARTITIONS
            or (member.state == UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))
        ):
            self._schedule_if_absent(group, member, "join_timer", "did not rejoin within its rebalance timeout")
            return int(ErrorCode.rebalance_in_progress)
        return NONE

    def leave(self, group: ConsumerGroup, leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        results = []
        entries: list = []
        for member_id, instance_id, reason in leaving:
            try:
                if instance_id is not None:
                    current = group.static_members.get(instance_id)
                    if current is None:
                        raise errors.UnknownMemberIdError(f"no static member {instance_id}")
                    if member_id and member_id != current:
                        raise errors.FencedInstanceIdError(f"static member {instance_id} is now {current}")
                    member_id = current
                member = self._classic_member(group, member_id)
            except KafkaError as exc:
                results.append(int(exc.code))
                continue
            self.manager._remove_member(group, member, entries, f"left: {reason or 'no reason given'}")
            results.append(NONE)
        if entries:
            self.manager._bump(group, entries)
            self.manager._write(entries)
        return results

    # -- timers ------------------------------------------------------------------------------

    def _schedule(self, group: ConsumerGroup, member: ConsumerGroupMember, slot: str, reason: str) -> None:
        self._cancel(member, slot)
        timer = asyncio.get_running_loop().call_later(
            member.rebalance_timeout_ms / 1000, self.manager._fence, group, member.member_id, reason
        )
        setattr(member, slot, timer)

    def _schedule_if_absent(self, group: ConsumerGroup, member: ConsumerGroupMember, slot: str, reason: str) -> None:
        if getattr(member, slot) is None:
            self._schedule(group, member, slot, reason)

    @staticmethod
    def _cancel(member: ConsumerGroupMember, slot: str) -> None:
        timer = getattr(member, slot)
        if timer is not None:
            timer.cancel()
            setattr(member, slot, None)
