"""Online migration between classic and consumer groups (KIP-848's upgrade and downgrade,
``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or disabled).

Upgrade: a member speaking the consumer protocol (ConsumerGroupHeartbeat) joins a classic
group that has members. The group becomes a consumer group at the classic generation: each
classic member becomes a member at that epoch, stable, owning (and targeted with) the
partitions of its last classic assignment, and keeps speaking the classic protocol
(``classic_members.py``). The newcomer then bumps the epoch like any joining member, and the
classic members are asked to rejoin to reconcile.

Downgrade: the last member speaking the consumer protocol leaves (or is fenced) while
classic members remain. The group becomes a Stable classic group at the group epoch, each
member handed its target assignment, and a rebalance starts at once so the classic members
rejoin and their leader assigns again. Also when a static member speaking the consumer
protocol comes back speaking the classic one (same ``group.instance.id``) and takes the last
such member's place; then without a rebalance: it keeps the assignment of the member it
replaced.

Both write the old group's tombstones and the new group's records in one batch, so a
restart or a coordinator move replays the converted group. Pure functions over groups;
the shard (``group_coordinator_shard.py``) swaps the groups and runs the timers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from odradek.broker.group.classic_group_member import ClassicGroupMember
from odradek.broker.group.classic_group_state import STABLE
from odradek.broker.group.consumer_group import STABLE as MEMBER_STABLE
from odradek.broker.group.consumer_group import Assignment, ConsumerGroup, ConsumerGroupMember
from odradek.broker.group.modern_group_records import ClassicMemberMetadata
from odradek.protocol import errors

log = logging.getLogger(__name__)

BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED = "bidirectional", "upgrade", "downgrade", "disabled"
POLICIES = (BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED)


def may_upgrade(classic: ClassicGroup, config) -> bool:
    """Whether a classic group with members may become a consumer group now."""
    why = None
    if config.migration_policy not in (BIDIRECTIONAL, UPGRADE):
        why = f"group.consumer.migration.policy is {config.migration_policy}"
    elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        why = f"its members speak protocol type {classic.protocol_type!r}, not the consumer protocol"
    elif classic.size >= config.consumer_max_size:  # the joining member needs room too
        why = f"its {classic.size} members leave no room under group.consumer.max.size"
    if why is not None:
        log.info("group %s: cannot become a consumer group: %s", classic.group_id, why)
    return why is None


def may_downgrade(group: ConsumerGroup, leaving_member_id: str, config) -> bool:
    """Whether the group becomes classic when ``leaving_member_id`` leaves."""
    if not group.all_classic_except(leaving_member_id) or len(group.members) <= 1:
        return False
    why = None
    if config.migration_policy not in (BIDIRECTIONAL, DOWNGRADE):
        why = f"group.consumer.migration.policy is {config.migration_policy}"
    elif len(group.members) - 1 > config.max_size:
        why = "its members are more than group.max.size"
    if why is not None:
        log.info("group %s: only classic members are left but it stays a consumer group: %s", group.group_id, why)
    return why is None


def may_downgrade_after_replacement(group: ConsumerGroup, config) -> bool:
    """Whether the group becomes classic now that a classic static member replaced the last
    member speaking the consumer protocol."""
    if not group.all_classic_except(""):
        return False
    if config.migration_policy not in (BIDIRECTIONAL, DOWNGRADE) or len(group.members) > config.max_size:
        log.info("group %s: only classic members are left but it stays a consumer group", group.group_id)
        return False
    return True


def _member_subscription(classic: ClassicGroup, member: ClassicGroupMember) -> schema.Subscription:
    protocol = classic.protocol_name if classic.protocol_name in member.protocol_names() else None
    metadata = member.metadata(protocol) if protocol else member.protocols[0][1]
    return schema.decode_subscription(metadata)


def consumer_group_from_classic(classic: ClassicGroup, topic_ids: dict[str, uuid.UUID]) -> ConsumerGroup:
    """The consumer group a classic group becomes; raises GroupIdNotFoundError (Kafka's code)
    when a member's consumer-protocol bytes cannot be read."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    try:
        for m in classic.members.values():
            subscription = _member_subscription(classic, m)
            assigned: Assignment = {}
            for topic, partitions in schema.decode_assignment(m.assignment).items():
                if topic in topic_ids and partitions:
                    assigned[topic_ids[topic]] = partitions
            member = ConsumerGroupMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topics=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=classic.generation_id,
                previous_member_epoch=classic.generation_id,
                state=MEMBER_STABLE,
                assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            )
            group.add(member)
            group.target[member.member_id] = assigned
    except (errors.CorruptMessageError, UnicodeDecodeError, IndexError) as exc:
        raise errors.GroupIdNotFoundError(
            f"cannot upgrade classic group {classic.group_id}: a member's consumer protocol is malformed ({exc})"
        ) from None
    return group


def classic_group_from_consumer(
    group: ConsumerGroup, leaving_member_id: str, topic_name: Callable[[uuid.UUID], str | None], now_ms: int
) -> tuple[ClassicGroup, dict[str, bytes]]:
    """The Stable classic group a consumer group becomes without ``leaving_member_id``, and each
    member's assignment in consumer-protocol bytes (its target assignment)."""
    classic = ClassicGroup(group.group_id, now_ms, STABLE)
    classic.previous_state = STABLE
    classic.generation_id = group.group_epoch
    for m in group.members.values():
        if m.member_id == leaving_member_id or m.classic is None:
            continue
        classic.add(
            ClassicGroupMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                list(m.classic.protocols),
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    assignments = {}
    for member in classic.members.values():
        by_name: dict[str, frozenset[int]] = {}
        for topic_id, partitions in group.target.get(member.member_id, {}).items():
            name = topic_name(topic_id)
            if name:
                by_name[name] = partitions
        version = int.from_bytes(member.metadata(classic.protocol_name)[:2] or b"\0\0", "big", signed=True)
        member.assignment = assignments[member.member_id] = schema.encode_assignment(by_name, version)
    return classic, assignments
