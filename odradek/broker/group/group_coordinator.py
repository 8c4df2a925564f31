"""The group coordinator: consumer groups and their committed offsets, as a service that
the group handlers call (Kafka's GroupCoordinatorService and its runtime).

A group lives in one ``__consumer_offsets`` partition (``partitioning.py``); the broker
leading that partition coordinates it. The coordinator keeps one shard per partition this
broker leads (``group_coordinator_shard.py``): when the broker becomes a partition's leader
a shard is created and the partition replayed into it (``offsets_loader.py``; small
partitions at once, large ones chunk by chunk in a task), and when the leadership moves
the shard is dropped. Each API method routes the group to its shard after the checks every
group request shares — INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE while stopped,
NOT_COORDINATOR when another broker leads the partition, COORDINATOR_LOAD_IN_PROGRESS
while it loads — and the shard's managers do the rest: ``ClassicGroupManager`` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, DescribeGroups; its state machine in
``classic_group_state.py``), ``ConsumerGroupManager`` (KIP-848: ConsumerGroupHeartbeat,
ConsumerGroupDescribe) and ``OffsetManager`` (OffsetCommit, OffsetFetch,
OffsetDelete, TxnOffsetCommit, expiry). JoinGroup and SyncGroup answer through a callback,
at once or when the rest of the group is there.

It also runs the offset expiry task (every ``offsets.retention.check.interval.ms``), and
follows metadata changes: a deleted topic's offsets are dropped (Kafka keeps them until
they expire), and a partition-count change of a subscribed topic starts a rebalance.

Threading: everything runs on the event loop; nothing here blocks for long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from odradek._tasks import cancel_and_wait, start_task
from odradek.broker.group.classic_group import ClassicGroup
from odradek.broker.group.classic_group_manager import CLASSIC_GROUP_TYPE, JoinRequest
from odradek.broker.group.classic_group_member import JoinResult, SyncResult
from odradek.broker.group.classic_group_state import DEAD
from odradek.broker.group.consumer_group import CONSUMER_GROUP_TYPE
from odradek.broker.group.consumer_group_manager import HeartbeatAnswer, HeartbeatRequest
from odradek.broker.group.group_coordinator_shard import LOADING, GroupCoordinatorShard, ShardContext
from odradek.broker.group.offset_and_metadata import OffsetAndMetadata
from odradek.broker.group.offsets_loader import OffsetsLoader
from odradek.broker.group.offsets_topic import OffsetsTopic
from odradek.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)

TopicPartition = tuple[str, int]


class GroupConfig(NamedTuple):
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5000
    load_buffer_size: int = 5 * 1024 * 1024
    new_member_join_timeout_ms: int = 300000
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"
    protocols: tuple[str, ...] = ("classic", "consumer", "share")
    share_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000

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
            offsets_commit_timeout_ms=config.get("offsets.commit.timeout.ms"),
            load_buffer_size=config.get("offsets.load.buffer.size"),
            consumer_session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
            consumer_max_size=config.get("group.consumer.max.size"),
            consumer_assignors=tuple(config.get("group.consumer.assignors")),
            migration_policy=config.get("group.consumer.migration.policy").lower(),
            protocols=tuple(config.group_protocols()),
            share_heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
            share_session_timeout_ms=config.get("group.share.session.timeout.ms"),
        )


class GroupCoordinator:
    def __init__(self, offsets_topic, timer, config: GroupConfig | None = None, *, wall_clock_ms=None):
        self.topic = offsets_topic
        self.config = config or GroupConfig()
        self.context = ShardContext(
            offsets_topic, self.config, timer, wall_clock_ms or (lambda: int(time.time() * 1000))
        )
        self.shards: dict[int, GroupCoordinatorShard] = {}  # by partition: loading or serving
        self.loader = OffsetsLoader(
            offsets_topic,
            self.config.load_buffer_size,
            on_loaded=self._loaded,
            on_failed=self._load_failed,
            still_loading=self._is_current,
        )
        self.active = False
        self._expiry_task: asyncio.Task | None = None
        self._partition_counts: dict[str, int] = {}  # per topic, as last seen in the metadata

    @property
    def purgatories(self) -> tuple:
        """The rebalance (join) and heartbeat purgatories every shard shares."""
        return self.context.join_purgatory, self.context.heartbeat_purgatory

    def counts(self) -> tuple[int, int]:
        """(groups, committed offsets) held by the shards this broker serves."""
        shards = self._serving()
        groups = sum(len(shard.groups) + len(shard.consumer.groups) for shard in shards)
        offsets = sum(len(o) for shard in shards for o in shard.offsets.offsets.values())
        return groups, offsets

    @property
    def loading(self) -> set[int]:
        """The ``__consumer_offsets`` partitions being loaded (health checks report them)."""
        return {p for p, shard in self.shards.items() if shard.state is LOADING}

    @classmethod
    def for_broker(cls, broker) -> GroupCoordinator:
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

    @property
    def rebalances(self) -> int:
        """Generations started since the coordinator started, over every group."""
        return self.context.rebalances

    def group(self, group_id: str) -> ClassicGroup | None:
        """The group if a shard of this broker holds it (for tests and the console)."""
        shard = self.shards.get(self.partition_of(group_id))
        return shard.groups.get(group_id) if shard is not None else None

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
        task, self._expiry_task = self._expiry_task, None
        await cancel_and_wait(task)
        await self.loader.close()
        for partition in sorted(self.shards):
            self._unload(partition)
        self.context.close()

    # -- partitions ------------------------------------------------------------------------

    def on_metadata_change(self, event: str, topic: str) -> None:
        self.context.metadata_version += 1  # consumer groups re-resolve subscriptions on their next heartbeat
        try:
            if topic == OFFSETS_TOPIC:
                self.sync_partitions()
            elif event == "deleted":
                for shard in self._serving():
                    shard.drop_offsets_of_topic(topic)
                    for group_id, partitions in shard.share.topic_deleted(topic):
                        self.context.share_topic_deleted(group_id, partitions)
            elif event == "partitions" and self._partition_count_changed(topic):
                for shard in self._serving():
                    shard.classic.on_partitions_changed(topic)
            else:
                self._partition_count_changed(topic)
        except Exception:
            log.exception("group coordinator: handling %s of %s failed", event, topic)

    def _partition_count_changed(self, topic: str) -> bool:
        """Whether ``topic``'s partition count differs from the last one seen (unknown counts
        as changed). A "partitions" event also comes with every leader change in a cluster
        (LeaderAndIsr): a group must not rebalance for those."""
        count = self.topic.partition_count_of(topic)
        old = self._partition_counts.get(topic)
        if count is None:
            self._partition_counts.pop(topic, None)
        else:
            self._partition_counts[topic] = count
        return old is None or old != count

    def sync_partitions(self) -> None:
        """Load newly led ``__consumer_offsets`` partitions; unload the ones led elsewhere now."""
        if not self.active:
            return
        led = set(self.topic.led_partitions()) if self.topic.partition_count() is not None else set()
        for partition in sorted(set(self.shards) - led):
            self._unload(partition)
        budget = self.config.load_buffer_size  # bytes replayed at once; larger partitions load in a task
        for partition in sorted(led - set(self.shards)):
            shard = self.shards[partition] = GroupCoordinatorShard(partition, self.context)
            budget -= self.loader.load(shard, budget)

    def partition_of(self, group_id: str) -> int | None:
        return self.topic.partition_for(group_id)

    def _is_current(self, shard: GroupCoordinatorShard) -> bool:
        return self.shards.get(shard.partition) is shard

    def _loaded(self, shard: GroupCoordinatorShard) -> None:
        if not self._is_current(shard):
            return
        groups = shard.on_loaded()
        if groups:
            log.info("%s-%d: loaded %d groups", OFFSETS_TOPIC, shard.partition, groups)

    def _load_failed(self, shard: GroupCoordinatorShard) -> None:
        if self._is_current(shard):
            del self.shards[shard.partition]  # not served; the next leadership change retries

    def _unload(self, partition: int) -> None:
        shard = self.shards.pop(partition, None)
        if shard is not None:
            shard.unload()

    def _serving(self) -> list[GroupCoordinatorShard]:
        return [shard for shard in self.shards.values() if shard.active]

    def _shard_of(self, group_id: str | None, *, allow_empty: bool = False) -> GroupCoordinatorShard:
        """The shard of the group, if this broker serves it now; else the error to answer."""
        if group_id is None or (group_id == "" and not allow_empty):
            raise errors.InvalidGroupIdError(f"invalid group id {group_id!r}")
        if not self.active:
            raise errors.CoordinatorNotAvailableError("the group coordinator is not running")
        partition = self.partition_of(group_id)
        if partition is None:
            raise errors.NotCoordinatorError(f"{OFFSETS_TOPIC} does not exist yet")
        shard = self.shards.get(partition)
        if shard is None:
            raise errors.NotCoordinatorError(f"this broker does not lead {OFFSETS_TOPIC}-{partition}")
        if shard.state is LOADING:
            raise errors.CoordinatorLoadInProgressError(f"{OFFSETS_TOPIC}-{partition} is loading")
        return shard

    # -- FindCoordinator -------------------------------------------------------------------

    def find_coordinator(self, key: str) -> int:
        """The node id of ``key``'s coordinator; creates ``__consumer_offsets`` on first use."""
        count = self.topic.ensure_created()
        leader = self.topic.leader(partition_for(key, count))
        if leader is None:
            raise errors.CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} partition of {key!r} has no leader")
        return leader

    # -- classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup -----------------------

    def join_group(self, req: JoinRequest, callback: Callable[[JoinResult], None]) -> None:
        try:
            shard = self._shard_of(req.group_id)
            consumer_group = shard.consumer.groups.get(req.group_id)
            if consumer_group is not None and not shard.consumer.is_empty(req.group_id):
                # a classic member of a consumer group (KIP-848's migration)
                shard.consumer.classic_members.join(consumer_group, req, callback)
                return
            if consumer_group is not None:
                shard.convert_consumer_to_classic(req.group_id)
        except KafkaError as exc:
            callback(JoinResult.failed(exc.code, req.member_id))
            return
        shard.classic.join_group(req, callback)

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
            shard = self._shard_of(group_id)
        except KafkaError as exc:
            callback(SyncResult.failed(exc.code))
            return
        consumer_group = shard.consumer.groups.get(group_id)
        if consumer_group is not None:
            callback(
                shard.consumer.classic_members.sync(
                    consumer_group,
                    member_id=member_id,
                    group_instance_id=group_instance_id,
                    generation_id=generation_id,
                    protocol_type=protocol_type,
                    protocol_name=protocol_name,
                )
            )
            return
        shard.classic.sync_group(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            callback=callback,
        )

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The error code of a Heartbeat; raises KafkaError for failed checks."""
        shard = self._shard_of(group_id)
        consumer_group = shard.consumer.groups.get(group_id)
        if consumer_group is not None:
            return shard.consumer.classic_members.heartbeat(consumer_group, member_id, group_instance_id, generation_id)
        return shard.classic.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        """Per leaving ``(member_id, group_instance_id, reason)``, its error code.

        Raises KafkaError for a group-level failure.
        """
        shard = self._shard_of(group_id)
        consumer_group = shard.consumer.groups.get(group_id)
        if consumer_group is not None:
            return shard.consumer.classic_members.leave(consumer_group, leaving)
        return shard.classic.leave_group(group_id, leaving)

    # -- consumer groups (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe ----------

    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> HeartbeatAnswer:
        """Raises KafkaError with the code to answer."""
        return self._shard_of(req.group_id).consumer.heartbeat(req)

    def consumer_group_describe(self, group_id: str) -> dict:
        """The group as ConsumerGroupDescribe shows it; raises KafkaError (GROUP_ID_NOT_FOUND)."""
        shard = self._shard_of(group_id)
        found = shard.consumer.describe(group_id)
        if found is None:
            if group_id in shard.groups and not shard.groups[group_id].is_(DEAD):
                raise errors.GroupIdNotFoundError(f"group {group_id} is not a consumer group")
            raise errors.GroupIdNotFoundError(f"group {group_id} not found")
        return found

    # -- share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe ----------------------

    def share_group_heartbeat(self, group_id, member_id, epoch, rack_id, topics, client_id, client_host):
        """(member id, epoch, interval ms, assignment or None); raises KafkaError."""
        return self._shard_of(group_id).share.heartbeat(group_id, member_id, epoch, rack_id, topics, client_id, client_host)

    def share_group_describe(self, group_id: str) -> dict:
        found = self._shard_of(group_id).share.describe(group_id)
        if found is None:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a share group")
        return found

    def check_share_offsets_alterable(self, group_id: str) -> None:
        """Raises KafkaError unless ``group_id`` may have its share offsets reset (no members)."""
        self._shard_of(group_id).share.check_offsets_alterable(group_id)

    def share_offset_partitions(self, group_id: str) -> dict:
        """``{topic id: partitions with share state}`` of share group ``group_id`` (empty when
        there is no such group); raises KafkaError (not the coordinator, another group type)."""
        shard = self._shard_of(group_id)
        shard.share.check_share_group(group_id)
        return shard.share.state_partitions(group_id)

    def share_offsets_altered(self, group_id: str, topic_id, name: str, partitions: frozenset) -> None:
        self._shard_of(group_id).share.offsets_altered(group_id, topic_id, name, partitions)

    def share_offsets_deleted(self, group_id: str, topic_ids: set) -> None:
        self._shard_of(group_id).share.offsets_deleted(group_id, topic_ids)

    def on_share_member_gone(self, callback) -> None:
        """``callback(group id, member id)`` when a share-group member leaves or times out."""
        self.context.share_member_gone = callback

    def on_share_group_deleted(self, callback) -> None:
        """``callback(group id, {topic id: partitions with share state})`` when an empty share
        group is deleted (DeleteGroups)."""
        self.context.share_group_deleted = callback

    def consumer_group(self, group_id: str):
        """The consumer group if a shard of this broker holds it (for tests and the console)."""
        shard = self.shards.get(self.partition_of(group_id))
        return shard.consumer.groups.get(group_id) if shard is not None else None

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        retention_ms: int = -1,
        settled: Callable[[int], None] | None = None,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit: per partition, its error code; ``settled(error)`` once the accepted
        offsets are committed (0) or dropped (see ``OffsetManager.commit``)."""
        try:
            shard = self._shard_of(group_id, allow_empty=True)
        except KafkaError as exc:
            if settled is not None:
                settled(0)
            return dict.fromkeys(offsets, int(exc.code))
        return shard.offsets.commit(
            group_id, member_id, group_instance_id, generation_id, offsets, retention_ms, settled
        )

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when ``partitions`` is None.
        A consumer-group member (OffsetFetch v9+) is checked against its epoch.

        Raises KafkaError for a group-level failure.
        """
        shard = self._shard_of(group_id, allow_empty=True)
        consumer_group = shard.consumer.groups.get(group_id)
        if consumer_group is not None and member_epoch >= 0:
            shard.consumer.validate_offset_commit(consumer_group, member_id or "", member_epoch)
        return shard.offsets.fetch(group_id, partitions)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete: per partition, its error code; raises KafkaError for the group."""
        return self._shard_of(group_id).offsets.delete(group_id, partitions)

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        settled: Callable[[int], None] | None = None,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: per partition, its error code; ``settled(error)`` once the write
        reached the ISR (0) or did not (see ``OffsetManager.commit_transactional``)."""
        try:
            shard = self._shard_of(group_id, allow_empty=True)
        except KafkaError as exc:
            if settled is not None:
                settled(0)
            return dict.fromkeys(offsets, int(exc.code))
        return shard.offsets.commit_transactional(
            group_id, producer_id, producer_epoch, member_id, group_instance_id, generation_id, offsets, settled
        )

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was written to ``partition``: its pending
        transactional offsets become committed offsets, or are dropped."""
        shard = self.shards.get(partition)
        if shard is not None:
            shard.complete_transaction(producer_id, committed)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with a commit not in the ISR yet or a transactional commit
        still undecided (OffsetFetch ``require_stable`` answers UNSTABLE_OFFSET_COMMIT)."""
        shard = self.shards.get(self.partition_of(group_id))
        return shard.offsets.pending_partitions(group_id) if shard is not None and shard.active else set()

    # -- groups: list, describe, delete ----------------------------------------------------

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> tuple[int, list[dict]]:
        if not self.active:
            return int(ErrorCode.coordinator_not_available), []
        loading = any(shard.state is LOADING for shard in self.shards.values())
        error = int(ErrorCode.coordinator_load_in_progress) if loading else NONE
        wanted_states = {s.lower() for s in states or ()}
        wanted_types = {t.lower() for t in types or ()}
        listed = []
        for shard in self._serving():
            if not wanted_types or CLASSIC_GROUP_TYPE in wanted_types:
                listed += shard.classic.listed(wanted_states)
            if not wanted_types or CONSUMER_GROUP_TYPE in wanted_types:
                listed += shard.consumer.listed(wanted_states)
            if not wanted_types or "share" in wanted_types:
                listed += shard.share.listed(wanted_states)
        return error, listed

    def describe_group(self, group_id: str) -> dict | None:
        """The group as DescribeGroups shows it, or None if there is no such group; a
        consumer-protocol group is GROUP_ID_NOT_FOUND here, as in Kafka (ConsumerGroupDescribe
        describes it)."""
        shard = self._shard_of(group_id, allow_empty=True)
        if group_id in shard.consumer.groups:
            raise errors.GroupIdNotFoundError(f"group {group_id} is not a classic group")
        return shard.classic.describe_group(group_id)

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results = {}
        for group_id in group_ids:
            try:
                results[group_id] = self._shard_of(group_id, allow_empty=True).delete_group(group_id)
            except KafkaError as exc:
                results[group_id] = int(exc.code)
        return results

    # -- expiry ----------------------------------------------------------------------------

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
        now = self.context.wall_ms() if now_ms is None else now_ms
        total = sum(shard.expire_offsets(now) for shard in self._serving())
        if total:
            log.info("expired %d committed offsets", total)
        return total
