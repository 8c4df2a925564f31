"""The consumer groups of one shard (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe,
member sessions, target assignments, and their records in ``__consumer_offsets``.

Everything happens in the heartbeat. A member joins with epoch 0 and its subscription
(topic names and/or a regular expression), then heartbeats with its epoch every
``group.consumer.heartbeat.interval.ms``; it leaves with epoch -1 (-2: a static member
that will come back under the same ``group.instance.id``). When what the assignment depends
on changes, the group epoch is bumped and the next heartbeat computes a new target
assignment with the server-side assignor (``server_assignors.py``); each member then reconciles
toward it on its own heartbeats (``consumer_group.reconcile``). A member silent for
``group.consumer.session.timeout.ms`` is fenced (removed and its partitions freed); so is a
member that does not revoke partitions within its rebalance timeout.

Members speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat, after an online
upgrade or joining a consumer group) are served by ``classic_members.py`` from the same
state; when the last member speaking the consumer protocol leaves, the group goes back to
being classic (``group_migration.py``).

Every change is written as Kafka's consumer-group records (``modern_group_records.py``) and
replayed from them on load, so members, epochs and target assignments survive a restart or
a coordinator move; sessions restart on load.

Threading: the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import NamedTuple

from odradek.broker.group import group_migration as migration
from odradek.broker.group import modern_group_records as records
from odradek.broker.group.classic_group_state import DEAD as CLASSIC_DEAD
from odradek.broker.group.classic_group_state import EMPTY as CLASSIC_EMPTY
from odradek.broker.group.classic_members import ClassicMembers
from odradek.broker.group.consumer_group import (
    CONSUMER_GROUP_TYPE,
    DEAD,
    EMPTY,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    reconcile,
    subtract,
)
from odradek.broker.group.modern_group_records import ModernKey
from odradek.broker.group.server_assignors import ASSIGNORS
from odradek.protocol import errors
from odradek.protocol.errors import KafkaError

log = logging.getLogger(__name__)


class HeartbeatRequest(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Assignment | None
    client_id: str
    client_host: str
    api_version: int
    requester: Requester | None = None


class Requester(NamedTuple):
    """Who sent a heartbeat, as the authorizer asks: the principal and its address."""

    principal: str
    peer: str


class HeartbeatAnswer(NamedTuple):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None


class ConsumerGroupManager:
    def __init__(self, shard):
        self.shard = shard
        self.groups: dict[str, ConsumerGroup] = {}
        self.classic_members = ClassicMembers(self)

    @property
    def config(self):
        return self.shard.context.config

    def _image(self):
        broker = getattr(self.shard.context.topic, "broker", None)
        return getattr(broker, "image", None)

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatAnswer:
        """One heartbeat; raises KafkaError with the code to answer."""
        self._validate(req)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        entries: list[tuple[bytes, bytes | None]] = []
        group = self._group_for(req.group_id, create=req.member_epoch == 0, entries=entries)
        member, bump = self._member_for(group, req, entries)
        if self._update_member(member, req) or bump:
            entries.append(self._member_record(group, member))
            bump = True
        was = (member.member_epoch, member.assigned)
        self.update_assignment(group, member, bump, req.topic_partitions, entries, joining=req.member_epoch == 0)
        self._watch_rebalance_timeout(group, member)
        self._write(entries)
        self.schedule_session(group, member)
        send_assignment = req.topic_partitions is not None or was != (member.member_epoch, member.assigned)
        return HeartbeatAnswer(
            member.member_id,
            member.member_epoch,
            self._heartbeat_ms(group.group_id),
            member.assigned if send_assignment else None,
        )

    def update_assignment(
        self, group: ConsumerGroup, member: ConsumerGroupMember, bump: bool, owned: Assignment | None, entries,
        *, joining: bool,
    ) -> None:
        """After a member's request: bump the group epoch if ``bump`` or the subscribed topics
        changed, compute the new target assignment if the epoch moved, and move the member one
        step toward its target (``owned``: what it says it owns; None: not said)."""
        if (bump or group.resolved_at != self._resolution_stamp()) and self._refresh_subscriptions(
            group, entries, member
        ):
            bump = True
        if bump:
            group.group_epoch += 1
            entries.append(self._epoch_record(group))
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, entries)
        if reconcile(group, member, owned) or joining:
            entries.append(self._current_record(group, member))

    def _validate(self, req: HeartbeatRequest) -> None:
        if not req.group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if req.instance_id == "":
            raise errors.InvalidRequestError("InstanceId can't be empty.")
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            raise errors.InvalidRequestError(f"MemberEpoch {req.member_epoch} is invalid.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise errors.InvalidRequestError("InstanceId can't be null when leaving with epoch -2.")
        if req.api_version >= 1 and not req.member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise errors.InvalidRequestError("RebalanceTimeoutMs must be provided when joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise errors.InvalidRequestError("SubscribedTopicNames or SubscribedTopicRegex must be set when joining.")
            if req.topic_partitions is None or req.topic_partitions:
                raise errors.InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        elif req.member_epoch > 0 and not req.member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise errors.UnsupportedAssignorError(
                f"assignor {req.server_assignor!r} is not one of group.consumer.assignors {self.config.consumer_assignors}"
            )
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                raise errors.InvalidRegularExpressionError(
                    f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is invalid: {exc}"
                ) from None

    def _group_for(self, group_id: str, *, create: bool, entries) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.share.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is a share group")
        classic = self.shard.groups.get(group_id)
        if classic is not None and not classic.is_(CLASSIC_DEAD):
            if not classic.is_(CLASSIC_EMPTY) or classic.pending_members:
                if create and migration.may_upgrade(classic, self.config):
                    return self.shard.upgrade_online(classic, entries)
                raise errors.GroupIdNotFoundError(
                    f"group {group_id} is a classic group with members"
                    f" (group.consumer.migration.policy={self.config.migration_policy})"
                )
            if not create:
                raise errors.UnknownMemberIdError(f"group {group_id} is a classic group")
            self.shard.convert_classic_to_consumer(group_id)  # the upgrade of an empty classic group
        elif not create:
            raise errors.UnknownMemberIdError(f"group {group_id} has no member with that id")
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest, entries) -> tuple[ConsumerGroupMember, bool]:
        """(the member, whether the group epoch must move: a new member); fences stale epochs.
        A static member coming back takes its predecessor's place without a rebalance."""
        if req.member_epoch == 0:
            member_id = req.member_id or uuid.uuid4().hex
            if req.instance_id is not None:
                current = group.static_members.get(req.instance_id)
                if current is not None:
                    old = group.members[current]
                    if old.member_epoch != STATIC_LEAVE_EPOCH and current != member_id and not old.uses_classic_protocol:
                        raise errors.UnreleasedInstanceIdError(
                            f"static member {req.instance_id} is still in group {group.group_id} as {current}"
                        )
                    return self._replace_static(group, old, member_id, entries), False
            existing = group.members.get(member_id)
            if existing is not None:  # rejoining from scratch: start over
                self._remove_member(group, existing, entries, "rejoined with epoch 0")
            if len(group.members) >= self.config.consumer_max_size:
                raise errors.GroupMaxSizeReachedError(
                    f"group {group.group_id} has group.consumer.max.size={self.config.consumer_max_size} members"
                )
            member = ConsumerGroupMember(member_id, instance_id=req.instance_id)
            group.add(member)
            log.info("group %s: member %s joins", group.group_id, member_id)
            return member, True
        member = group.members.get(req.member_id)
        if member is None or member.uses_classic_protocol:
            raise errors.UnknownMemberIdError(f"member {req.member_id} is not in group {group.group_id}")
        if req.instance_id is not None and group.static_members.get(req.instance_id) != member.member_id:
            raise errors.FencedInstanceIdError(f"static member {req.instance_id} was replaced")
        self._check_epoch(member, req)
        return member, False

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        if req.member_epoch == member.member_epoch:
            return
        if (
            req.member_epoch < member.member_epoch
            and req.member_epoch == member.previous_member_epoch
            and req.topic_partitions is not None
            and not subtract(req.topic_partitions, member.assigned)
        ):
            return  # the member missed our last answer; it may catch up
        raise errors.FencedMemberEpochError(
            f"member {member.member_id} sent epoch {req.member_epoch}; its epoch is {member.member_epoch}"
        )

    def _replace_static(self, group, old: ConsumerGroupMember, member_id: str, entries) -> ConsumerGroupMember:
        """A static member back under a new member id takes over its predecessor's place."""
        self._cancel_timers(old)
        entries.extend(self._member_tombstones(group, old.member_id))
        target = group.target.get(old.member_id, {})
        group.remove(old.member_id)
        member = ConsumerGroupMember(
            member_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            client_id=old.client_id,
            client_host=old.client_host,
            subscribed_topics=old.subscribed_topics,
            subscribed_regex=old.subscribed_regex,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            server_assignor=old.server_assignor,
            member_epoch=old.previous_member_epoch if old.member_epoch == STATIC_LEAVE_EPOCH else old.member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=old.state,
            assigned=old.assigned,
            pending_revocation=old.pending_revocation,
        )
        group.add(member)
        group.target[member_id] = target
        entries.append(self._member_record(group, member))
        entries.append(self._target_member_record(group, member_id))
        log.info("group %s: static member %s returns as %s", group.group_id, old.instance_id, member_id)
        return member

    @staticmethod
    def _update_member(member: ConsumerGroupMember, req: HeartbeatRequest) -> bool:
        """Apply the fields the heartbeat carries; True when the subscription changed."""
        before = (member.subscribed_topics, member.subscribed_regex, member.server_assignor)
        if req.subscribed_topic_names is not None:
            member.subscribed_topics = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            member.subscribed_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        if req.requester is not None:
            member.requester = req.requester
        return before != (member.subscribed_topics, member.subscribed_regex, member.server_assignor)

    # -- subscriptions and the target assignment ---------------------------------------------

    def topic_names(self) -> dict[str, tuple[uuid.UUID, int]]:
        image = self._image()
        if image is None:
            return {}
        return {
            name: (info.topic_id, len(info.partitions))
            for name, info in image.topics.items()
            if not info.internal and not name.startswith("__")
        }

    def _authorizer(self):
        broker = getattr(self.shard.context.topic, "broker", None)
        return getattr(broker, "authorizer", None)

    def _resolution_stamp(self) -> tuple:
        """What regexes are resolved against: the topics, and the ACLs (an ACL change may show
        or hide topics)."""
        authorizer = self._authorizer()
        return (self.shard.context.metadata_version, authorizer.generation if authorizer is not None else 0)

    def _refresh_subscriptions(self, group: ConsumerGroup, entries, member: ConsumerGroupMember | None = None) -> bool:
        """Re-resolve regexes and the subscribed topics' metadata (only when a subscription,
        the topics or the ACLs changed, so a heartbeat does not scan every topic); True on a
        change. ``member``: the one heartbeating, whose principal resolves its regex."""
        group.resolved_at = self._resolution_stamp()
        regexes = self._refresh_regexes(group, entries, member)
        return self._refresh_subscription_metadata(group, entries) or regexes

    @staticmethod
    def _regex_requester(group: ConsumerGroup, regex: str, member: ConsumerGroupMember | None):
        """Whose principal resolves ``regex``: the heartbeating member's if it subscribes
        with it, else another subscriber's (None until one has heartbeated to this broker)."""
        if member is not None and member.subscribed_regex == regex and member.requester is not None:
            return member.requester
        return next(
            (m.requester for m in group.members.values() if m.subscribed_regex == regex and m.requester is not None),
            None,
        )

    def _refresh_regexes(self, group: ConsumerGroup, entries, member: ConsumerGroupMember | None = None) -> bool:
        """Resolve the group's regular expressions against today's topics; True on a change.
        Under an authorizer a regex resolves only to the topics its subscriber's principal
        may Describe, as Kafka resolves it with the heartbeat's context."""
        authorizer = self._authorizer()
        wanted = {m.subscribed_regex for m in group.members.values() if m.subscribed_regex}
        changed = False
        for regex in list(group.resolved_regexes):
            if regex not in wanted:
                del group.resolved_regexes[regex]
                entries.append((records.encode_key(ModernKey(records.CONSUMER_GROUP_REGULAR_EXPRESSION, group.group_id, regex)), None))
                changed = True
        names = self.topic_names()
        for regex in wanted:
            pattern = re.compile(regex)
            matched = frozenset(n for n in names if pattern.fullmatch(n))
            if authorizer is not None:
                who = self._regex_requester(group, regex, member)
                if who is None:  # loaded from the log: kept until a subscriber heartbeats
                    continue
                matched = frozenset(n for n in matched if authorizer.authorize(who, "Describe", "Topic", n))
            if group.resolved_regexes.get(regex) != matched:
                group.resolved_regexes[regex] = matched
                value = records.RegexValue(matched, group.group_epoch + 1, self.shard.now())
                key = ModernKey(records.CONSUMER_GROUP_REGULAR_EXPRESSION, group.group_id, regex)
                entries.append((records.encode_key(key), records.encode_value(key.kind, value)))
                changed = True
        return changed

    def _refresh_subscription_metadata(self, group: ConsumerGroup, entries) -> bool:
        names = self.topic_names()
        metadata = {}
        for name in group.subscribed_topic_names():
            if name in names:
                topic_id, partitions = names[name]
                metadata[topic_id] = (name, partitions)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        value = [records.TopicMetadata(tid, name, n) for tid, (name, n) in sorted(metadata.items())]
        key = ModernKey(records.CONSUMER_GROUP_PARTITION_METADATA, group.group_id)
        entries.append((records.encode_key(key), records.encode_value(key.kind, value)))
        return True

    def assignor_of(self, group: ConsumerGroup) -> str:
        return group.preferred_assignor(self.config.consumer_assignors[0])

    def _compute_target(self, group: ConsumerGroup, entries) -> None:
        ids = {name: tid for tid, (name, _) in group.subscription_metadata.items()}
        subscriptions = {
            m.member_id: frozenset(ids[n] for n in group.member_topic_names(m) if n in ids)
            for m in group.members.values()
        }
        topics = {tid: n for tid, (_, n) in group.subscription_metadata.items()}
        target = ASSIGNORS[self.assignor_of(group)](subscriptions, topics, group.target)
        for member_id, assignment in target.items():
            if group.target.get(member_id) != assignment:
                group.target[member_id] = assignment
                entries.append(self._target_member_record(group, member_id))
        group.assignment_epoch = group.group_epoch
        key = ModernKey(records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id)
        entries.append((records.encode_key(key), records.encode_value(key.kind, group.assignment_epoch)))

    # -- leaving and fencing -----------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> HeartbeatAnswer:
        group = self.groups.get(req.group_id)
        if group is None:
            raise errors.UnknownMemberIdError(f"group {req.group_id} has no member {req.member_id}")
        member = group.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            member = group.members.get(group.static_members.get(req.instance_id, ""))
        if member is None or member.uses_classic_protocol:
            raise errors.UnknownMemberIdError(f"member {req.member_id} is not in group {group.group_id}")
        if req.instance_id is not None and group.static_members.get(req.instance_id) != member.member_id:
            raise errors.FencedInstanceIdError(f"static member {req.instance_id} was replaced")
        entries: list = []
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # keeps its partitions until it comes back or its session ends
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            entries.append(self._current_record(group, member))
            log.info("group %s: static member %s leaves for now", group.group_id, member.instance_id)
        else:
            self.remove_and_rebalance(group, member, entries, "left the group")
        self._write(entries)
        return HeartbeatAnswer(req.member_id, req.member_epoch, self._heartbeat_ms(group.group_id), None)

    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember, entries, reason: str) -> None:
        self._cancel_timers(member)
        entries.extend(self._member_tombstones(group, member.member_id))
        group.remove(member.member_id)
        log.info("group %s: member %s removed (%s)", group.group_id, member.member_id, reason)

    def remove_and_rebalance(self, group: ConsumerGroup, member: ConsumerGroupMember, entries, reason: str) -> None:
        """Remove a member and bump the group epoch; when only members speaking the classic
        protocol are left, the group goes back to being a classic group (online downgrade)."""
        if migration.may_downgrade(group, member.member_id, self.config):
            self._cancel_timers(member)
            log.info("group %s: member %s removed (%s)", group.group_id, member.member_id, reason)
            self.shard.downgrade_online(group, member.member_id, entries)
            return
        self._remove_member(group, member, entries, reason)
        self._bump(group, entries)

    def _bump(self, group: ConsumerGroup, entries) -> None:
        self._refresh_subscriptions(group, entries)
        group.group_epoch += 1
        entries.append(self._epoch_record(group))

    def _fence(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        if self.groups.get(group.group_id) is not group or not self.shard.active:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        entries: list = []
        self.remove_and_rebalance(group, member, entries, reason)
        try:
            self._write(entries)
        except KafkaError as exc:
            log.warning("group %s: writing the removal of %s failed: %s", group.group_id, member_id, exc)

    # -- timers ------------------------------------------------------------------------------

    def _heartbeat_ms(self, group_id: str) -> int:
        return self.shard.context.group_ms(
            group_id, "consumer.heartbeat.interval.ms", self.config.consumer_heartbeat_interval_ms
        )

    def schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        if member.classic is not None:
            delay = member.classic.session_timeout_ms / 1000
        else:
            delay = self.shard.context.group_ms(
                group.group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms
            ) / 1000
        member.session_timer = asyncio.get_running_loop().call_later(
            delay, self._fence, group, member.member_id, "session timeout"
        )

    def _watch_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.state != UNREVOKED_PARTITIONS:
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            return
        if member.rebalance_timer is None:
            member.rebalance_timer = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000,
                self._fence,
                group,
                member.member_id,
                "did not revoke its partitions within its rebalance timeout",
            )

    @staticmethod
    def _cancel_timers(member: ConsumerGroupMember) -> None:
        for timer in (member.session_timer, member.rebalance_timer, member.join_timer, member.sync_timer):
            if timer is not None:
                timer.cancel()
        member.session_timer = member.rebalance_timer = member.join_timer = member.sync_timer = None

    # -- records -----------------------------------------------------------------------------

    def _write(self, entries) -> None:
        if not entries:
            return
        if not self.shard.active:
            raise errors.NotCoordinatorError("no longer the coordinator of this group")
        self.shard.append(entries, self.shard.now())

    @staticmethod
    def _epoch_record(group: ConsumerGroup):
        key = ModernKey(records.CONSUMER_GROUP_METADATA, group.group_id)
        return records.encode_key(key), records.encode_value(key.kind, group.group_epoch)

    @staticmethod
    def _member_record(group: ConsumerGroup, m: ConsumerGroupMember):
        key = ModernKey(records.CONSUMER_GROUP_MEMBER_METADATA, group.group_id, m.member_id)
        value = records.ConsumerMemberValue(
            m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topics,
            m.subscribed_regex, m.rebalance_timeout_ms, m.server_assignor, m.classic,
        )
        return records.encode_key(key), records.encode_value(key.kind, value)

    @staticmethod
    def _target_member_record(group: ConsumerGroup, member_id: str):
        key = ModernKey(records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id)
        return records.encode_key(key), records.encode_value(key.kind, group.target.get(member_id, {}))

    @staticmethod
    def _current_record(group: ConsumerGroup, m: ConsumerGroupMember):
        key = ModernKey(records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, m.member_id)
        value = records.CurrentAssignmentValue(
            m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation
        )
        return records.encode_key(key), records.encode_value(key.kind, value)

    @staticmethod
    def _member_tombstones(group: ConsumerGroup, member_id: str) -> list:
        return [
            (records.encode_key(ModernKey(kind, group.group_id, member_id)), None)
            for kind in (
                records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                records.CONSUMER_GROUP_MEMBER_METADATA,
            )
        ]

    def creation_records(self, group: ConsumerGroup) -> list:
        """The records of a whole group made elsewhere (an upgraded classic group)."""
        out = [self._member_record(group, m) for m in group.members.values()]
        out.append(self._epoch_record(group))
        out += [self._target_member_record(group, member_id) for member_id in group.members]
        key = ModernKey(records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id)
        out.append((records.encode_key(key), records.encode_value(key.kind, group.assignment_epoch)))
        out += [self._current_record(group, m) for m in group.members.values()]
        return out

    def full_tombstones(self, group: ConsumerGroup) -> list:
        """The records that delete the group with its members (its offsets stay)."""
        out = []
        for member_id in group.members:
            out += self._member_tombstones(group, member_id)
        return out + self.group_tombstones(group)

    def retire(self, group: ConsumerGroup) -> None:
        """The group stops being a consumer group here (downgraded): stop its timers."""
        for member in group.members.values():
            self._cancel_timers(member)
        group.dead = True
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        image = self._image()
        info = image.topic_by_id(topic_id) if image is not None else None
        return info.name if info is not None else None

    def group_tombstones(self, group: ConsumerGroup) -> list:
        """The records that delete an empty group (its offsets are the caller's)."""
        out = [
            (records.encode_key(ModernKey(records.CONSUMER_GROUP_REGULAR_EXPRESSION, group.group_id, regex)), None)
            for regex in group.resolved_regexes
        ]
        for kind in (
            records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
            records.CONSUMER_GROUP_PARTITION_METADATA,
            records.CONSUMER_GROUP_METADATA,
        ):
            out.append((records.encode_key(ModernKey(kind, group.group_id)), None))
        return out

    # -- replay ------------------------------------------------------------------------------

    def replay(self, key: ModernKey, value: bytes | None) -> None:
        kind = key.kind
        data = records.decode_value(kind, value) if value is not None else None
        group = self.groups.get(key.group)
        if group is None:
            if data is None:
                return
            group = self.groups[key.group] = ConsumerGroup(key.group)
        if kind == records.CONSUMER_GROUP_METADATA:
            if data is None:
                del self.groups[key.group]
            else:
                group.group_epoch = data
        elif kind == records.CONSUMER_GROUP_PARTITION_METADATA:
            group.subscription_metadata = {t.topic_id: (t.name, t.partitions) for t in data or ()}
        elif kind == records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = data or 0
        elif kind == records.CONSUMER_GROUP_REGULAR_EXPRESSION:
            if data is None:
                group.resolved_regexes.pop(key.member, None)
            else:
                group.resolved_regexes[key.member] = data.topics
        elif kind == records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if data is None:
                group.target.pop(key.member, None)
            else:
                group.target[key.member] = data
        elif kind == records.CONSUMER_GROUP_MEMBER_METADATA:
            if data is None:
                group.remove(key.member)
                return
            member = group.members.get(key.member) or ConsumerGroupMember(key.member)
            member.instance_id, member.rack_id = data.instance_id, data.rack_id
            member.client_id, member.client_host = data.client_id, data.client_host
            member.subscribed_topics, member.subscribed_regex = tuple(data.topics), data.regex
            member.rebalance_timeout_ms, member.server_assignor = data.rebalance_timeout_ms, data.server_assignor
            member.classic = data.classic
            group.add(member)
        elif kind == records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            member = group.members.get(key.member)
            if member is None:
                if data is None:
                    return
                member = ConsumerGroupMember(key.member)
                group.add(member)
            if data is None:
                member.member_epoch = member.previous_member_epoch = 0
                member.assigned, member.pending_revocation = {}, {}
            else:
                member.member_epoch, member.previous_member_epoch = data.member_epoch, data.previous_member_epoch
                member.state = data.state
                member.assigned, member.pending_revocation = data.assigned, data.pending_revocation

    def on_loaded(self) -> None:
        """Members loaded from the log get a fresh session."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session(group, member)

    def unload(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self._cancel_timers(member)
            group.dead = True
        self.groups.clear()

    # -- offsets, list, describe -------------------------------------------------------------

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int) -> None:
        """Raises the error an OffsetCommit (or an OffsetFetch with a member epoch) gets."""
        if member_epoch < 0 and not member_id:
            if group.members:
                raise errors.UnknownMemberIdError(f"group {group.group_id} has members; commit as one of them")
            return
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberIdError(f"member {member_id} is not in group {group.group_id}")
        if member_epoch != member.member_epoch and member.uses_classic_protocol:
            raise errors.IllegalGenerationError(
                f"member {member_id} committed with generation {member_epoch}; its generation is {member.member_epoch}"
            )
        if member_epoch != member.member_epoch:
            raise errors.StaleMemberEpochError(
                f"member {member_id} committed with epoch {member_epoch}; its epoch is {member.member_epoch}"
            )

    def listed(self, wanted_states: set[str]) -> list[dict]:
        out = []
        for group in self.groups.values():
            state = group.state
            if state == DEAD or (wanted_states and state.lower() not in wanted_states):
                continue
            out.append({"group_id": group.group_id, "protocol_type": "consumer", "group_state": state, "group_type": CONSUMER_GROUP_TYPE})
        return out

    def describe(self, group_id: str) -> dict | None:
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return None
        names = {tid: name for tid, (name, _) in group.subscription_metadata.items()}
        image = self._image()

        def name_of(tid):
            if tid in names:
                return names[tid]
            info = image.topic_by_id(tid) if image is not None else None
            return info.name if info is not None else ""

        def assignment(a: Assignment) -> dict:
            return {"topic_partitions": [
                {"topic_id": tid, "topic_name": name_of(tid), "partitions": sorted(ps)} for tid, ps in sorted(a.items())
            ]}

        return {
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": self.assignor_of(group),
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topics),
                    "subscribed_topic_regex": m.subscribed_regex,
                    "assignment": assignment(m.assigned),
                    "target_assignment": assignment(group.target.get(m.member_id, {})),
                    "member_type": 0 if m.uses_classic_protocol else 1,
                }
                for m in group.members.values()
            ],
        }

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or group.state == EMPTY
