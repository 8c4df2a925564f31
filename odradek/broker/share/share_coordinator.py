"""The share coordinator (KIP-932): owner of the share-group state in ``__share_group_state``.

The state of one share partition (group, topic id, partition) belongs to the leader of the
``__share_group_state`` partition that its key ``group:topicId:partition`` hashes to
(FindCoordinator key type 2). Share-partition leaders read and write it through this broker's
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState
and ReadShareGroupStateSummary (``share_persister.py`` is their side). Every change is a
ShareSnapshot record appended to the state partition; a change is answered once that
partition's ISR has it (``share.coordinator.write.timeout.ms``), as offset commits are, so it
survives the coordinator's failure.

The latest state of every key of a led state partition is kept in memory, read from the log
the first time the partition is used at its current leader epoch (a new leader reads what
the old one wrote). Fencing as Kafka's ShareCoordinatorShard: a write or read carrying a
leader epoch below the one recorded is FENCED_LEADER_EPOCH, a write whose state epoch is
below the recorded one FENCED_STATE_EPOCH (an InitializeShareGroupState with a newer state
epoch replaced the state: AlterShareGroupOffsets).

Threading: the event loop.
"""

from __future__ import annotations

import time
import uuid

from odradek.broker.delayed_produce import wait_for_isr
from odradek.broker.group.partitioning import partition_for
from odradek.broker.internal_topic import COORDINATOR_APPEND_ERRORS
from odradek.broker.share.share_state_topic import STATE_TOPIC, ShareState, ShareStateTopic, merge_batches
from odradek.protocol import errors

Key = tuple[str, uuid.UUID, int]  # group, topic id, partition


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The share coordinator key of a share partition (FindCoordinator key type 2)."""
    return f"{group_id}:{topic_id}:{partition}"


def parse_state_key(key: str) -> Key:
    """``group:topicId:partition`` (the group id may hold colons); InvalidRequestError if not."""
    group_id, sep, rest = key.rpartition(":")
    group_id, sep2, topic = group_id.rpartition(":")
    try:
        if not (sep and sep2 and group_id):
            raise ValueError
        topic_id = uuid.UUID(topic)
        partition = int(rest)
    except ValueError:
        raise errors.InvalidRequestError(
            f"share coordinator key {key!r} is not group:topicId:partition"
        ) from None
    if partition < 0:
        raise errors.InvalidRequestError(f"share coordinator key {key!r} has a negative partition")
    return group_id, topic_id, partition


class ShareCoordinator:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.topic = ShareStateTopic(
            broker,
            num_partitions=config.get("share.coordinator.state.topic.num.partitions"),
            replication_factor=config.get("share.coordinator.state.topic.replication.factor"),
            segment_bytes=config.get("offsets.topic.segment.bytes"),
        )
        self.topic.min_isr = config.get("share.coordinator.state.topic.min.isr")
        self.write_timeout_ms = config.get("share.coordinator.write.timeout.ms")
        self._states: dict[int, dict[Key, ShareState]] = {}  # state partition -> its keys' states
        self._loaded_at: dict[int, int] = {}  # state partition -> leader epoch its states were read at

    # -- where a key lives -----------------------------------------------------------------

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        count = self.topic.partition_count()
        return None if count is None else partition_for(state_key(group_id, topic_id, partition), count)

    def find_coordinator(self, key: str) -> int:
        """FindCoordinator (key type 2): the leader of the key's state partition, creating the
        topic on first use."""
        parse_state_key(key)
        count = self.topic.ensure_created()
        leader = self.topic.leader(partition_for(key, count))
        if leader is None:
            raise errors.CoordinatorNotAvailableError(f"{STATE_TOPIC} has no leader for {key} yet")
        return leader

    def _owned(self, key: Key) -> tuple[int, dict[Key, ShareState]]:
        """The state partition of ``key`` (led here) and its states; raises NOT_COORDINATOR or
        COORDINATOR_NOT_AVAILABLE."""
        index = self.partition_of(*key)
        if index is None:
            raise errors.CoordinatorNotAvailableError(f"{STATE_TOPIC} does not exist yet")
        p = self.broker.replica_manager.partitions.get((STATE_TOPIC, index))
        if p is None or not p.is_leader:
            self._states.pop(index, None)
            self._loaded_at.pop(index, None)
            raise errors.NotCoordinatorError(f"this broker does not lead {STATE_TOPIC}-{index}")
        if self._loaded_at.get(index) != p.leader_epoch:
            self._states[index] = self.topic.load(index)
            self._loaded_at[index] = p.leader_epoch
        return index, self._states[index]

    # -- the APIs ---------------------------------------------------------------------------

    def read(self, key: Key, leader_epoch: int, *, summary: bool = False) -> ShareState:
        """ReadShareGroupState (and its summary): an uninitialized share partition reads as
        start offset -1, state epoch 0. A read records the reader's leader epoch (fencing
        older leaders' writes), the summary does not."""
        _, states = self._owned(key)
        state = states.get(key)
        if state is None:
            return ShareState()
        if leader_epoch < state.leader_epoch and not summary:
            raise errors.FencedLeaderEpochError(
                f"leader epoch {leader_epoch} is older than {state.leader_epoch}, the last one that used this state"
            )
        if not summary and leader_epoch > state.leader_epoch:
            state.leader_epoch = leader_epoch
        return state

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int, batches) -> None:
        """WriteShareGroupState: merge the batches into the state (start offset -1: unchanged)."""
        index, states = self._owned(key)
        old = states.get(key)
        if old is not None:
            if leader_epoch != -1 and leader_epoch < old.leader_epoch:
                raise errors.FencedLeaderEpochError(f"leader epoch {leader_epoch} is older than {old.leader_epoch}")
            if state_epoch != -1 and state_epoch < old.state_epoch:
                raise errors.FencedStateEpochError(f"state epoch {state_epoch} is older than {old.state_epoch}")
        else:
            old = ShareState()
        start = old.start_offset if start_offset == -1 else start_offset
        new = ShareState(
            old.state_epoch if state_epoch == -1 else state_epoch,
            old.leader_epoch if leader_epoch == -1 else leader_epoch,
            start,
            merge_batches(old.batches, [tuple(b) for b in batches], start),
            (old.snapshot_epoch + 1) & 0xFFFF,
        )
        await self._append(index, states, key, new)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState: a fresh state (no batches) at a newer state epoch."""
        index, states = self._owned(key)
        old = states.get(key)
        if old is not None and state_epoch <= old.state_epoch:
            raise errors.FencedStateEpochError(f"state epoch {state_epoch} is not newer than {old.state_epoch}")
        snapshot = (old.snapshot_epoch + 1) & 0xFFFF if old is not None else 0
        await self._append(index, states, key, ShareState(state_epoch, -1, start_offset, [], snapshot))

    async def delete(self, key: Key) -> None:
        """DeleteShareGroupState: a tombstone (the group was deleted)."""
        index, states = self._owned(key)
        if key in states:
            await self._append(index, states, key, None)

    async def _append(self, index: int, states: dict, key: Key, state: ShareState | None) -> None:
        try:
            partition = self.topic.append(index, key, state, int(time.time() * 1000))
        except errors.KafkaError as exc:
            raise _coordinator_error(exc) from None
        if state is None:
            states.pop(key, None)
        else:
            states[key] = state
        if not self.broker.replica_manager.replicated or partition.high_watermark >= partition.log_end_offset:
            return
        failed: list[int] = []
        await wait_for_isr(
            self.broker.produce_purgatory,
            self.write_timeout_ms,
            [(partition, partition.log_end_offset, failed.append)],
        )
        if failed:
            code = COORDINATOR_APPEND_ERRORS.get(failed[0], failed[0])
            raise errors.error_for(code)(f"the share state write did not reach the ISR of {STATE_TOPIC}-{index}")


def _coordinator_error(exc: errors.KafkaError) -> errors.KafkaError:
    code = COORDINATOR_APPEND_ERRORS.get(exc.code)
    return exc if code is None else errors.error_for(code)(exc.message)
