"""The share groups of one shard (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe.

A share group's members all read the same partitions: every member is assigned every
partition of the topics the group subscribes to, and the partition leaders hand each record
to one member at a time (``broker/share/``). A member joins with epoch 0, heartbeats with
its epoch every ``group.share.heartbeat.interval.ms`` and leaves with -1; one silent for
``group.share.session.timeout.ms`` is removed and its acquired records are released. One that
leaves keeps its share sessions with the leaders (its last acknowledgements come after the
leave) until it closes them; their locks run out otherwise. A deleted topic's partitions are
forgotten and their share state deleted (``topic_deleted``).

Membership is written to the shard's ``__consumer_offsets`` partition with Kafka's share-group
record types (``modern_group_records.py``): the group epoch (11), each member's subscription
(10), its target assignment (13, with the assignment epoch 12) and its current assignment
(14); leaving writes tombstones. A coordinator that loads the partition gets the members back
with their epochs, so they keep heartbeating across a restart. The records' delivery state
lives with the partition leaders (``broker/share/``) and their share coordinators.

The group also keeps the metadata of the topics it subscribes to (9: id, name, partition
count; written when it changes) and which of their partitions have share state
(15, ShareGroupStatePartitionMetadata): a partition newly subscribed is *initializing* until
its share coordinator confirms it has a state for it (InitializeShareGroupState, through
``context.share_initialize``; a state that exists already counts), then *initialized*. A
coordinator that loads the group knows them, retries the initializing ones at the next
heartbeat, and DeleteGroups deletes the state of every one of them, wherever it lives. Per-group ``share.session.timeout.ms``
and ``share.heartbeat.interval.ms`` override the broker's ``group.share.*`` keys.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from odradek.broker.group import modern_group_records as records
from odradek.broker.group.modern_group_records import CurrentAssignmentValue, ModernKey, ShareMemberValue
from odradek.protocol import errors
from odradek.protocol.errors import KafkaError

log = logging.getLogger(__name__)

SHARE_GROUP_TYPE = "share"
LEFT = "left the group"
_MEMBER_KINDS = (
    records.SHARE_GROUP_MEMBER_METADATA,
    records.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
    records.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
)


@dataclass
class ShareMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    topics: tuple[str, ...] = ()
    epoch: int = 0
    previous_epoch: int = 0
    assigned: dict = field(default_factory=dict)  # topic id -> frozenset of partitions
    timer: object = None


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    subscribed: list = field(default_factory=list)  # TopicMetadata of its topics (record 9)
    initializing: dict = field(default_factory=dict)  # topic id -> (name, partitions) (record 15)
    initialized: dict = field(default_factory=dict)
    init_task: asyncio.Task | None = None

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


class ShareGroupManager:
    def __init__(self, shard):
        self.shard = shard
        self.groups: dict[str, ShareGroup] = {}
        self.on_member_gone = None  # (group id, member id) -> None: releases its records

    @property
    def config(self):
        return self.shard.context.config

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        broker = getattr(self.shard.context.topic, "broker", None)
        image = getattr(broker, "image", None)
        if image is None:
            return {}
        return {n: (t.topic_id, len(t.partitions)) for n, t in image.topics.items() if not t.internal}

    def heartbeat(self, group_id: str, member_id: str, epoch: int, rack_id, topics, client_id: str, client_host: str):
        """(member id, epoch, interval ms, assignment or None); raises KafkaError."""
        if not group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if not member_id:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if self.shard.groups.get(group_id) is not None or group_id in self.shard.consumer.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a share group")
        group = self.groups.get(group_id)
        if epoch == -1:
            if group is None or member_id not in group.members:
                raise errors.UnknownMemberIdError(f"member {member_id} is not in share group {group_id}")
            self._remove(group, member_id, LEFT)
            return member_id, -1, self._heartbeat_ms(group_id), None
        if epoch == 0:
            if topics is None:
                raise errors.InvalidRequestError("SubscribedTopicNames must be set when joining.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(member_id) or ShareMember(member_id)
            group.members[member_id] = member
            group.epoch += 1
            member.previous_epoch, member.epoch = member.epoch, group.epoch
        else:
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                raise errors.UnknownMemberIdError(f"member {member_id} is not in share group {group_id}")
            if epoch != member.epoch:
                raise errors.FencedMemberEpochError(f"member {member_id} sent epoch {epoch}; its epoch is {member.epoch}")
        before = (member.topics, member.rack_id, member.client_id, member.client_host)
        if topics is not None:
            member.topics = tuple(sorted(set(topics)))
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id, member.client_host = client_id, client_host
        names = self._topics()
        assignment = {
            names[t][0]: frozenset(range(names[t][1])) for t in member.topics if t in names
        }
        changed = assignment != member.assigned or epoch == 0
        described = (member.topics, member.rack_id, member.client_id, member.client_host)
        member.assigned = assignment
        if epoch == 0 or changed or described != before:
            self._write(self._member_records(group, member))
        self._track_state_partitions(group, names)
        self._schedule_session(group, member)
        return member.member_id, member.epoch, self._heartbeat_ms(group_id), assignment if changed else None

    def _heartbeat_ms(self, group_id: str) -> int:
        return self.shard.context.group_ms(
            group_id, "share.heartbeat.interval.ms", self.config.share_heartbeat_interval_ms
        )

    def _schedule_session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.timer is not None:
            member.timer.cancel()
        timeout_ms = self.shard.context.group_ms(
            group.group_id, "share.session.timeout.ms", self.config.share_session_timeout_ms
        )
        member.timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, self._expire, group, member.member_id)

    def _expire(self, group: ShareGroup, member_id: str) -> None:
        if self.groups.get(group.group_id) is group and member_id in group.members:
            self._remove(group, member_id, "session timeout")

    def _remove(self, group: ShareGroup, member_id: str, reason: str) -> None:
        member = group.members.pop(member_id)
        if member.timer is not None:
            member.timer.cancel()
        group.epoch += 1
        log.info("share group %s: member %s removed (%s)", group.group_id, member_id, reason)
        entries = [(records.encode_key(ModernKey(kind, group.group_id, member_id)), None) for kind in _MEMBER_KINDS]
        entries.append(self._epoch_record(group))
        try:
            self._write(entries)
        except KafkaError as exc:  # a session timeout has nobody to answer: log it
            log.warning("share group %s: writing the removal of %s failed: %s", group.group_id, member_id, exc)
        if self.on_member_gone is not None and reason != LEFT:
            # a member that left on its own still sends its last acknowledgements (librdkafka
            # leaves, then acknowledges): its share sessions live until it closes them
            self.on_member_gone(group.group_id, member_id)

    # -- share-partition state (records 9 and 15) ----------------------------------------------

    def _track_state_partitions(self, group: ShareGroup, names: dict) -> None:
        """Record the subscribed topics' metadata when it changed, and have the share state of
        newly subscribed partitions initialized."""
        subscribed = sorted(
            records.TopicMetadata(names[t][0], t, names[t][1])
            for t in {t for m in group.members.values() for t in m.topics}
            if t in names
        )
        if subscribed != group.subscribed:
            group.subscribed = subscribed
            key = ModernKey(records.SHARE_GROUP_PARTITION_METADATA, group.group_id)
            self._write([(records.encode_key(key), records.encode_value(key.kind, subscribed))])
        missing: dict[uuid.UUID, tuple[str, frozenset]] = {}
        for t in subscribed:
            done = group.initialized.get(t.topic_id, ("", frozenset()))[1]
            left = frozenset(range(t.partitions)) - done
            if left:
                missing[t.topic_id] = (t.name, left)
        if not missing or self.shard.context.share_initialize is None:
            return
        if group.init_task is not None and not group.init_task.done():
            return
        if missing != group.initializing:
            group.initializing = missing
            self._write([self._state_partitions_record(group)])
        group.init_task = asyncio.get_running_loop().create_task(
            self._initialize(group, missing), name=f"share-state-init {group.group_id}"
        )

    async def _initialize(self, group: ShareGroup, missing: dict) -> None:
        initialize = self.shard.context.share_initialize
        done: dict[uuid.UUID, frozenset] = {}
        for topic_id, (_, partitions) in missing.items():
            try:
                done[topic_id] = frozenset(await initialize(group.group_id, topic_id, partitions))
            except Exception:
                log.exception("share group %s: initializing the share state of %s failed", group.group_id, topic_id)
        if self.groups.get(group.group_id) is not group or not self.shard.active or not any(done.values()):
            return
        for topic_id, partitions in done.items():
            name, before = group.initialized.get(topic_id, (missing[topic_id][0], frozenset()))
            group.initialized[topic_id] = (name, before | partitions)
            if topic_id in group.initializing:
                left = group.initializing[topic_id][1] - partitions
                if left:
                    group.initializing[topic_id] = (name, left)
                else:
                    del group.initializing[topic_id]
        try:
            self._write([self._state_partitions_record(group)])
        except KafkaError as exc:
            log.warning("share group %s: writing its initialized partitions failed: %s", group.group_id, exc)

    @staticmethod
    def _state_partitions_record(group: ShareGroup):
        key = ModernKey(records.SHARE_GROUP_STATE_PARTITION_METADATA, group.group_id)
        value = records.StatePartitionsValue(dict(group.initializing), dict(group.initialized), {})
        return records.encode_key(key), records.encode_value(key.kind, value)

    def topic_deleted(self, topic: str) -> list[tuple[str, dict]]:
        """``topic`` was deleted: every group forgets which of its partitions have share state
        (record 15 rewritten); ``(group id, {topic id: partitions})`` whose state is to go."""
        out = []
        for group in self.groups.values():
            doomed: dict = {}
            for source in (group.initialized, group.initializing):
                for topic_id, (name, partitions) in list(source.items()):
                    if name == topic:
                        doomed[topic_id] = doomed.get(topic_id, frozenset()) | partitions
                        del source[topic_id]
            if not doomed:
                continue
            group.subscribed = [t for t in group.subscribed if t.name != topic]
            try:
                self._write([self._state_partitions_record(group)])
            except KafkaError as exc:
                log.warning("share group %s: writing the deletion of topic %s failed: %s", group.group_id, topic, exc)
            out.append((group.group_id, doomed))
        return out

    def state_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset]:
        """The partitions of the group's topics that have (or are getting) share state."""
        group = self.groups.get(group_id)
        out: dict[uuid.UUID, frozenset] = {}
        if group is not None:
            for source in (group.initialized, group.initializing):
                for topic_id, (_, partitions) in source.items():
                    out[topic_id] = out.get(topic_id, frozenset()) | partitions
        return out

    def forget(self, group_id: str) -> None:
        """The group was deleted (its tombstones are written)."""
        group = self.groups.pop(group_id, None)
        if group is not None and group.init_task is not None:
            group.init_task.cancel()

    # -- records -----------------------------------------------------------------------------

    def _write(self, entries) -> None:
        if not self.shard.active:
            raise errors.NotCoordinatorError("no longer the coordinator of this group")
        self.shard.append(entries, self.shard.now())

    @staticmethod
    def _epoch_record(group: ShareGroup):
        key = ModernKey(records.SHARE_GROUP_METADATA, group.group_id)
        return records.encode_key(key), records.encode_value(key.kind, group.epoch)

    def _member_records(self, group: ShareGroup, m: ShareMember) -> list:
        """A member's subscription, target and current assignment, with the group's epochs."""
        def entry(kind: int, value, member: str | None = m.member_id):
            key = ModernKey(kind, group.group_id, member)
            return records.encode_key(key), records.encode_value(kind, value)

        return [
            entry(records.SHARE_GROUP_MEMBER_METADATA, ShareMemberValue(m.rack_id, m.client_id, m.client_host, m.topics)),
            self._epoch_record(group),
            entry(records.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, m.assigned),
            entry(records.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group.epoch, None),
            entry(
                records.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                CurrentAssignmentValue(m.epoch, m.previous_epoch, 0, m.assigned, {}),
            ),
        ]

    def group_tombstones(self, group_id: str) -> list:
        """The records that delete an empty share group."""
        kinds = (
            records.SHARE_GROUP_PARTITION_METADATA,
            records.SHARE_GROUP_STATE_PARTITION_METADATA,
            records.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
            records.SHARE_GROUP_METADATA,
        )
        return [(records.encode_key(ModernKey(kind, group_id)), None) for kind in kinds]

    def replay(self, key: ModernKey, value: bytes | None) -> None:
        """Apply one share-group record read back from ``__consumer_offsets``."""
        kind = key.kind
        data = records.decode_value(kind, value) if value is not None else None
        group = self.groups.get(key.group)
        if group is None:
            if data is None:
                return
            group = self.groups[key.group] = ShareGroup(key.group)
        if kind == records.SHARE_GROUP_METADATA:
            if data is None:
                del self.groups[key.group]
            else:
                group.epoch = data
        elif kind == records.SHARE_GROUP_PARTITION_METADATA:
            group.subscribed = sorted(data or [])
        elif kind == records.SHARE_GROUP_STATE_PARTITION_METADATA:
            group.initializing = dict(data.initializing) if data is not None else {}
            group.initialized = dict(data.initialized) if data is not None else {}
        elif kind in _MEMBER_KINDS and key.member is not None:
            if data is None:
                group.members.pop(key.member, None)
                return
            member = group.members.setdefault(key.member, ShareMember(key.member))
            if kind == records.SHARE_GROUP_MEMBER_METADATA:
                member.rack_id, member.client_id, member.client_host, member.topics = data
            elif kind == records.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                member.epoch, member.previous_epoch = data.member_epoch, data.previous_member_epoch
                member.assigned = dict(data.assigned)
        # type 12 carries nothing this coordinator needs back

    def on_loaded(self) -> None:
        """Members loaded from the log get a fresh session."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session(group, member)

    def check_share_group(self, group_id: str) -> None:
        """GROUP_ID_NOT_FOUND when ``group_id`` is a classic or consumer group."""
        if self.shard.groups.get(group_id) is not None or group_id in self.shard.consumer.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a share group")

    def offsets_altered(self, group_id: str, topic_id: uuid.UUID, name: str, partitions: frozenset) -> None:
        """AlterShareGroupOffsets gave ``partitions`` share state: the (maybe new, empty) group
        records them as initialized, so DescribeShareGroupOffsets and DeleteGroups find them."""
        group = self.groups.get(group_id)
        entries = []
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
            entries.append(self._epoch_record(group))
        done = group.initialized.get(topic_id, (name, frozenset()))[1]
        if partitions <= done:
            return
        group.initialized[topic_id] = (name, done | partitions)
        entries.append(self._state_partitions_record(group))
        self._write(entries)

    def offsets_deleted(self, group_id: str, topic_ids: set) -> None:
        """DeleteShareGroupOffsets: the group forgets the share state of ``topic_ids``."""
        group = self.groups.get(group_id)
        if group is None:
            return
        changed = False
        for source in (group.initialized, group.initializing):
            for topic_id in topic_ids & set(source):
                del source[topic_id]
                changed = True
        if changed:
            self._write([self._state_partitions_record(group)])

    def check_offsets_alterable(self, group_id: str) -> None:
        """AlterShareGroupOffsets: the group must be a share group (or none yet) without members."""
        if self.shard.groups.get(group_id) is not None or group_id in self.shard.consumer.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a share group")
        group = self.groups.get(group_id)
        if group is not None and group.members:
            raise errors.NonEmptyGroupError(
                f"share group {group_id} has {len(group.members)} member(s); stop them before resetting its offsets"
            )

    def unload(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.timer is not None:
                    member.timer.cancel()
            if group.init_task is not None:
                group.init_task.cancel()
        self.groups.clear()

    def listed(self, wanted_states: set[str]) -> list[dict]:
        return [
            {"group_id": g.group_id, "protocol_type": "share", "group_state": g.state, "group_type": SHARE_GROUP_TYPE}
            for g in self.groups.values()
            if not wanted_states or g.state.lower() in wanted_states
        ]

    def describe(self, group_id: str) -> dict | None:
        group = self.groups.get(group_id)
        if group is None:
            return None
        names = {tid: n for n, (tid, _) in self._topics().items()}
        return {
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.epoch,
            "assignment_epoch": group.epoch,
            "assignor_name": "simple",
            "members": [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.topics),
                    "assignment": {
                        "topic_partitions": [
                            {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                            for t, ps in sorted(m.assigned.items())
                        ]
                    },
                }
                for m in group.members.values()
            ],
        }
