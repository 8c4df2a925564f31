"""One ``__consumer_offsets`` partition's groups: Kafka's GroupCoordinatorShard.

A broker coordinates the groups of the partitions it leads, one shard per partition: the
coordinator (``group_coordinator.py``) creates a shard when this broker becomes the
partition's leader, replays the partition into it (``offsets_loader.py``), serves it once
loaded, and drops it when the leadership moves (every waiting request is answered
NOT_COORDINATOR and goes to the new leader).

The shard holds the groups and hands each request to the manager of its kind: membership
and rebalances of classic groups to ``ClassicGroupManager``, consumer-protocol groups
(KIP-848) to ``ConsumerGroupManager``, committed offsets to ``OffsetManager`` (share groups,
KIP-932, to ``ShareGroupManager``). What touches both lives here: converting a group from one protocol to the other
(``group_migration.py``), deleting a group with its offsets,
expiring offsets (a group left with neither members nor offsets disappears), replaying a
record into the manager that owns its type. Everything it writes goes to its partition as
a coordinator write (acks=all in a cluster); the handlers answer once the partition's ISR
has it (``InternalTopic.when_replicated``).

Threading: everything runs on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group import group_migration as migration
from odradek.broker.group import modern_group_records as modern
from odradek.broker.group.classic_group import ClassicGroup
from odradek.broker.group.classic_group_manager import ClassicGroupManager
from odradek.broker.group.classic_group_member import JoinResult, SyncResult
from odradek.broker.group.classic_group_state import DEAD, EMPTY, NON_EMPTY_STATES
from odradek.broker.group.consumer_group import ConsumerGroup
from odradek.broker.group.consumer_group_manager import ConsumerGroupManager
from odradek.broker.group.offset_manager import OffsetManager
from odradek.broker.group.offsets_topic import group_append_error
from odradek.broker.group.share_group_manager import ShareGroupManager
from odradek.broker.purgatory import DelayedOperationPurgatory
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)

LOADING, ACTIVE, CLOSED = "loading", "active", "closed"


class ShardContext:
    """What the shards of one coordinator share: the topic they write to, the settings,
    the clocks, the timers, and the coordinator's counters."""

    def __init__(self, topic, config, timer, wall_ms: Callable[[], int]):
        self.topic = topic
        self.config = config
        self.timer = timer
        self.wall_ms = wall_ms
        self.join_purgatory = DelayedOperationPurgatory("rebalance", timer)
        self.heartbeat_purgatory = DelayedOperationPurgatory("heartbeat", timer)
        self.rebalances = 0
        self.metadata_version = 0  # bumped on every topic change (consumer groups' subscriptions)
        self.share_member_gone: Callable[[str, str], None] = lambda group, member: None
        # (group id, {topic id: partitions with share state}) when an empty share group is deleted
        self.share_group_deleted: Callable[[str, dict], None] = lambda group, partitions: None
        # (group id, {topic id: partitions}) whose share state goes: their topic was deleted
        self.share_topic_deleted: Callable[[str, dict], None] = lambda group, partitions: None
        # async (group id, topic id, partitions) -> the partitions whose share state exists now
        self.share_initialize: Callable | None = None
        self.group_configs = None  # GroupConfigs: per-group overrides; None uses the broker's settings

    def group_ms(self, group_id: str, name: str, fallback: int) -> int:
        """Group config ``name`` (a number of ms) of ``group_id``, or ``fallback`` without them."""
        return fallback if self.group_configs is None else self.group_configs.int_value(group_id, name)

    def close(self) -> None:
        self.join_purgatory.close()
        self.heartbeat_purgatory.close()


class GroupCoordinatorShard:
    def __init__(self, partition: int, context: ShardContext):
        self.partition = partition
        self.context = context
        self.state = LOADING
        self.groups: dict[str, ClassicGroup] = {}
        self.classic = ClassicGroupManager(self)
        self.offsets = OffsetManager(self)
        self.consumer = ConsumerGroupManager(self)
        self.share = ShareGroupManager(self)
        self.share.on_member_gone = lambda group, member: context.share_member_gone(group, member)
        self.deferred_markers: list[tuple[int, bool]] = []  # written while loading, past the replay's end

    @property
    def active(self) -> bool:
        return self.state is ACTIVE

    def now(self) -> int:
        return self.context.wall_ms()

    def append(
        self,
        entries: list[tuple[bytes, bytes | None]],
        now_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """Write ``(key, value)`` records to this partition as one batch; raises KafkaError."""
        self.context.topic.append(self.partition, entries, now_ms, producer_id, producer_epoch)

    def when_written_replicated(self, timeout_ms: int, settle: Callable[[int], None]) -> None:
        """``settle(0)`` once this partition's ISR has everything written to it so far, else
        ``settle(coordinator error)`` (``InternalTopic.settle_when_replicated``)."""
        self.context.topic.settle_when_replicated(self.partition, timeout_ms, settle)

    # -- loading and unloading -------------------------------------------------------------

    def replay(self, key: bytes | None, value: bytes | None, producer_id: int = -1) -> None:
        """Apply one record read back from the partition; raises CorruptMessageError (or
        UnicodeDecodeError) for a record that cannot be read."""
        k = schema.decode_key(key)
        if isinstance(k, schema.OffsetCommitKey):
            self.offsets.replay(k.group, (k.topic, k.partition), value, producer_id)
        elif isinstance(k, schema.GroupMetadataKey):
            self.classic.replay(k.group, value)
        else:
            modern_key = modern.decode_key(int.from_bytes(key[:2], "big", signed=True), key)
            if modern_key is not None and modern_key.kind in modern.CONSUMER_TYPES:
                self.consumer.replay(modern_key, value)
            elif modern_key is not None:
                self.share.replay(modern_key, value)

    def replay_transaction_marker(self, producer_id: int, committed: bool) -> None:
        self.offsets.complete_transaction(producer_id, committed)

    def on_loaded(self) -> int:
        """The partition is replayed: serve it. Returns how many groups it holds."""
        now = self.now()
        for group_id in self.offsets.group_ids():
            if group_id not in self.groups and group_id not in self.consumer.groups:
                self.groups[group_id] = ClassicGroup(group_id, now)  # a group that only stores offsets
        self.classic.on_loaded()
        self.consumer.on_loaded()
        self.share.on_loaded()
        self.state = ACTIVE
        for producer_id, committed in self.deferred_markers:
            self.complete_transaction(producer_id, committed)
        self.deferred_markers.clear()
        return len(self.groups) + len(self.consumer.groups) + len(self.share.groups)

    def unload(self) -> None:
        """Stop serving: every group leaves, its waiting requests answered NOT_COORDINATOR."""
        self.state = CLOSED
        groups = list(self.groups.values())
        self.groups.clear()
        for group in groups:
            self.classic.retire(group)
        self.consumer.unload()
        self.share.unload()

    def convert_classic_to_consumer(self, group_id: str) -> None:
        """An empty classic group becomes a consumer group (KIP-848's upgrade); offsets stay."""
        group = self.groups.pop(group_id)
        if group.generation_id > 0:
            self.append([(schema.encode_group_metadata_key(group_id), None)], self.now())
        self.classic.retire(group)
        log.info("group %s: the empty classic group becomes a consumer group", group_id)

    def upgrade_online(self, classic: ClassicGroup, entries: list) -> ConsumerGroup:
        """A classic group with members becomes a consumer group (``group_migration.py``);
        its records go into ``entries``, written with the joining member's."""
        topic_ids = {name: tid for name, (tid, _) in self.consumer.topic_names().items()}
        group = migration.consumer_group_from_classic(classic, topic_ids)
        for member in classic.members.values():  # they rejoin the new group
            classic.complete_join(member, JoinResult.failed(ErrorCode.rebalance_in_progress, member.member_id))
            member.complete_sync(SyncResult.failed(ErrorCode.rebalance_in_progress))
        del self.groups[classic.group_id]
        self.classic.retire(classic)
        entries.append((schema.encode_group_metadata_key(classic.group_id), None))
        entries.extend(self.consumer.creation_records(group))
        self.consumer.groups[group.group_id] = group
        for member in group.members.values():
            self.consumer.schedule_session(group, member)
        log.info(
            "group %s: the classic group with %d members becomes a consumer group at epoch %d",
            group.group_id, len(group.members), group.group_epoch,
        )
        return group

    def downgrade_online(
        self, group: ConsumerGroup, leaving_member_id: str, entries: list, *, rebalance: bool = True
    ) -> ClassicGroup:
        """The last consumer-protocol member leaves: the group becomes a classic group of the
        classic members left, which rebalances at once unless ``rebalance`` is False (a static
        member replaced) (``group_migration.py``)."""
        classic, assignments = migration.classic_group_from_consumer(
            group, leaving_member_id, self.consumer.topic_name, self.now()
        )
        self.consumer.retire(group)
        entries.extend(self.consumer.full_tombstones(group))
        entries.append(
            (
                schema.encode_group_metadata_key(group.group_id),
                schema.encode_group_metadata_value(classic.to_record(assignments)),
            )
        )
        self.groups[classic.group_id] = classic
        for member in classic.members.values():
            self.classic.schedule_heartbeat(classic, member)
        log.info(
            "group %s: only classic members are left; it becomes a classic group at generation %d",
            group.group_id, classic.generation_id,
        )
        if rebalance:
            self.classic.prepare_rebalance(classic, "the group went back to the classic protocol")
        return classic

    def convert_consumer_to_classic(self, group_id: str) -> None:
        """An empty consumer group becomes a classic group when a classic member joins."""
        group = self.consumer.groups[group_id]
        self.append(self.consumer.group_tombstones(group), self.now())
        del self.consumer.groups[group_id]
        log.info("group %s: the empty consumer group becomes a classic group", group_id)

    # -- across groups and offsets ---------------------------------------------------------

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """A transaction marker was written to this partition (see ``OffsetManager``); it
        takes effect once it is in the ISR. A marker is never taken back once written, so
        a wait that fails (a timeout) waits again, until the shard is unloaded."""
        if self.state is LOADING:
            self.deferred_markers.append((producer_id, committed))
            return
        undecided = self.offsets.undecided(producer_id)

        def settled(error: int) -> None:
            if self.state is not ACTIVE or self.offsets.undecided(producer_id) is not undecided:
                return  # unloaded, or a marker settled first (a coordinator's retry)
            if error == NONE:
                self._apply_marker(producer_id, committed)
            elif error != ErrorCode.not_coordinator:
                self.when_written_replicated(self.context.config.offsets_commit_timeout_ms, settled)

        if undecided is not None:
            self.when_written_replicated(self.context.config.offsets_commit_timeout_ms, settled)

    def _apply_marker(self, producer_id: int, committed: bool) -> None:
        now = self.now()
        for group_id in self.offsets.complete_transaction(producer_id, committed):
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                self.groups[group_id] = ClassicGroup(group_id, now)

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: its error code."""
        if group_id in self.consumer.groups:
            return self._delete_consumer_group(group_id)
        if group_id in self.share.groups:
            if self.share.groups[group_id].members:
                return int(ErrorCode.non_empty_group)
            try:
                self.append(self.share.group_tombstones(group_id), self.now())
            except KafkaError as exc:
                return group_append_error(exc.code)
            partitions = self.share.state_partitions(group_id)
            self.share.forget(group_id)
            self.context.share_group_deleted(group_id, partitions)
            log.info("share group %s deleted", group_id)
            return NONE
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return int(ErrorCode.group_id_not_found)
        if group.state in NON_EMPTY_STATES:
            return int(ErrorCode.non_empty_group)
        entries: list[tuple[bytes, bytes | None]] = [
            (schema.encode_offset_commit_key(group_id, t, p), None)
            for (t, p) in self.offsets.partitions_of(group_id)
        ]
        entries.append((schema.encode_group_metadata_key(group_id), None))
        try:
            self.append(entries, self.now())
        except KafkaError as exc:
            return group_append_error(exc.code)
        del self.groups[group_id]
        self.offsets.forget(group_id)
        for op in group.pending_heartbeats.values():
            op.abandon()
        group.pending_heartbeats.clear()
        self.classic.retire(group)
        log.info("group %s deleted", group_id)
        return NONE

    def _delete_consumer_group(self, group_id: str) -> int:
        group = self.consumer.groups[group_id]
        if group.members:
            return int(ErrorCode.non_empty_group)
        entries: list[tuple[bytes, bytes | None]] = [
            (schema.encode_offset_commit_key(group_id, t, p), None)
            for (t, p) in self.offsets.partitions_of(group_id)
        ]
        entries += self.consumer.group_tombstones(group)
        try:
            self.append(entries, self.now())
        except KafkaError as exc:
            return group_append_error(exc.code)
        del self.consumer.groups[group_id]
        self.offsets.forget(group_id)
        log.info("consumer group %s deleted", group_id)
        return NONE

    def remove_offsets(self, group: ClassicGroup, removed: list[tuple[str, int]]) -> None:
        """Drop offsets (tombstones); a group left Empty without offsets disappears."""
        entries = self.offsets.remove(group.group_id, removed)
        if group.is_(EMPTY) and not self.offsets.has_offsets(group.group_id) and not group.pending_members:
            group.transition_to(DEAD, self.now())
            if group.generation_id > 0:
                entries.append((schema.encode_group_metadata_key(group.group_id), None))
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            self.classic.retire(group)
            log.info("group %s: no members and no offsets left; removed", group.group_id)
        if entries:
            try:
                self.append(entries, self.now())
            except KafkaError as exc:
                log.warning("group %s: writing tombstones failed: %s", group.group_id, exc)

    def expire_offsets(self, now: int) -> int:
        """Drop offsets past their retention; return how many."""
        retention = self.context.config.offsets_retention_ms
        total = 0
        for group in list(self.groups.values()):
            expired = self.offsets.expired(group, now, retention)
            if expired or (group.is_(EMPTY) and not self.offsets.has_offsets(group.group_id)):
                self.remove_offsets(group, expired)
                total += len(expired)
        for consumer_group in list(self.consumer.groups.values()):
            total += self._expire_consumer_group_offsets(consumer_group, now, retention)
        return total

    def _expire_consumer_group_offsets(self, group, now: int, retention: int) -> int:
        """Expire a consumer group's offsets; an empty group left without offsets is deleted."""
        group_id = group.group_id
        expired = self.offsets.expired_consumer_group_offsets(group_id, group.subscribed_topic_names(), now, retention)
        entries = self.offsets.remove(group_id, expired)
        gone = not group.members and not self.offsets.has_offsets(group_id)
        if gone:
            entries += self.consumer.group_tombstones(group)
            del self.consumer.groups[group_id]
            log.info("consumer group %s: no members and no offsets left; removed", group_id)
        if entries:
            try:
                self.append(entries, self.now())
            except KafkaError as exc:
                log.warning("group %s: writing tombstones failed: %s", group_id, exc)
        return len(expired)

    def drop_offsets_of_topic(self, topic: str) -> None:
        """``topic`` was deleted: its offsets go (Kafka keeps them until they expire)."""
        for group in list(self.groups.values()):
            gone = self.offsets.partitions_of(group.group_id, topic)
            if gone:
                self.remove_offsets(group, gone)
