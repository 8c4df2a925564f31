"""Partition reassignment (KIP-455): AlterPartitionReassignments, ListPartitionReassignments
and the ZooKeeper-era ``/admin/reassign_partitions`` (Kafka's KafkaController.onPartitionReassignment).

A reassignment writes the target to ``/brokers/topics/<t>`` as Kafka does (the union of old
and new replicas, with ``adding_replicas`` and ``removing_replicas``), tells every replica,
and completes once every target replica is in the ISR: the target becomes the assignment,
the leader moves into it if it is not there, and the removed replicas are stopped and
deleted. New replicas catch up through replication (followers fetching from the leader);
the ISR change notification that follows lets the controller complete the move.

A mixin of ``ZkController``, on the same event task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from odradek.cluster import zk_data
from odradek.cluster.lifecycle_states import ReplicaLifecycle
from odradek.cluster.partitions import (
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.cluster.zk_client import NoNodeError, SetDataOp
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

R = ReplicaLifecycle


class PartitionReassignments:

    async def alter_reassignments(
        self, targets: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start (a list of replicas) or cancel (None) reassignments; ``(error code, message)`` each."""
        self._require_active()
        ctx = self.ctx
        results = {}
        for tp, target in targets.items():
            if tp not in ctx.all_partitions or ctx.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = (ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
                continue
            current = ctx.partition_full_replica_assignment(tp)
            if target is None:
                if not current.is_being_reassigned:
                    results[tp] = (ErrorCode.no_reassignment_in_progress, f"no reassignment of {tp} is in progress")
                    continue
                target = list(current.origin_replicas)
            problem = self._check_target(target)
            if problem:
                results[tp] = (ErrorCode.invalid_replica_assignment, f"{tp}: {problem}")
                continue
            await self._start_reassignment(tp, list(target))
            results[tp] = (ErrorCode.none, None)
        self._send()
        return results

    def _check_target(self, target: list[int]) -> str | None:
        if not target:
            return "the replica list is empty"
        if len(set(target)) != len(target):
            return f"the replica list {target} names a broker twice"
        unknown = sorted(set(target) - self.ctx.live_or_shutting_down_broker_ids)
        if unknown:
            return f"brokers {unknown} are not alive"
        return None

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, ReplicaAssignment]:
        self._require_active()
        ctx = self.ctx
        wanted = ctx.partitions_being_reassigned if partitions is None else set(partitions)
        return {
            tp: ctx.partition_full_replica_assignment(tp)
            for tp in sorted(wanted)
            if ctx.partition_full_replica_assignment(tp).is_being_reassigned
        }

    async def list_reassignments_now(self, partitions=None) -> dict[TopicPartition, ReplicaAssignment]:
        """``list_reassignments`` as an event-task call."""
        return self.list_reassignments(partitions)

    async def _write_assignment(self, topic: str) -> None:
        ctx = self.ctx
        data = zk_data.encode_topic_assignment(ctx.topic_ids.get(topic), ctx.partition_assignments[topic])
        await self.zk.transaction(
            [SetDataOp(zk_data.topic_path(topic), data)], controller_epoch_zk_version=ctx.epoch_zk_version
        )

    async def _start_reassignment(self, tp: TopicPartition, target: list[int]) -> None:
        ctx = self.ctx
        current = ctx.partition_full_replica_assignment(tp)
        if list(current.replicas) == target and not current.is_being_reassigned:
            return
        full = current.reassign_to(target)
        ctx.update_partition_full_replica_assignment(tp, full)
        ctx.partitions_being_reassigned.add(tp)
        await self._write_assignment(tp.topic)
        self.state_log.info(
            f"Reassignment of {tp} from {list(current.origin_replicas)} to {target} started "
            f"(adding {list(full.adding_replicas)}, removing {list(full.removing_replicas)})"
        )
        adding = [PartitionAndReplica(tp, r) for r in full.adding_replicas]
        self.rsm.set_state(adding, R.NEW, f"reassignment of {tp}")
        # every replica, old and new, learns the full replica set (new ones start following)
        lai = ctx.partition_leader_and_isr(tp)
        if lai is not None:
            written = await self._write_leader_and_isr({tp: lai.new_epoch()})
            for tp2, new in written.items():
                ctx.put_partition_leadership(tp2, LeaderIsrAndControllerEpoch(new, ctx.epoch))
            self.batch.add_leader_and_isr(ctx.live_replicas(tp, include_shutting_down=True), tp, is_new=False)
        self.rsm.set_state([r for r in adding if ctx.is_replica_online(r.replica, tp)], R.ONLINE, f"reassignment of {tp}")
        await self._maybe_complete_reassignment(tp)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        """Finish a reassignment once every target replica is in the ISR: the target becomes the
        assignment, the leader moves into it if needed, removed replicas stop and are deleted."""
        ctx = self.ctx
        assignment = ctx.partition_full_replica_assignment(tp)
        lai = ctx.partition_leader_and_isr(tp)
        if not assignment.is_being_reassigned or lai is None:
            ctx.partitions_being_reassigned.discard(tp)
            return
        target = assignment.target_replicas
        if not set(target) <= set(lai.isr):
            return
        reason = f"reassignment of {tp} to {list(target)} completed"
        removing = assignment.removing_replicas
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(target))
        new_isr = tuple(r for r in lai.isr if r in target)
        if lai.leader not in target or not ctx.is_replica_online(lai.leader, tp):
            leader = next((r for r in target if r in new_isr and ctx.is_replica_online(r, tp)), None)
            if leader is None:
                ctx.update_partition_full_replica_assignment(tp, assignment)
                return
            new = lai.new_leader_and_isr(leader, new_isr)
        else:
            new = lai.new_leader_and_isr(lai.leader, new_isr)
        written = await self._write_leader_and_isr({tp: new})
        if tp not in written:
            ctx.update_partition_full_replica_assignment(tp, assignment)
            return
        self.psm.mark_online(tp, LeaderIsrAndControllerEpoch(written[tp], ctx.epoch), reason)
        self.batch.add_leader_and_isr(ctx.live_replicas(tp, include_shutting_down=True), tp)
        stopped = [PartitionAndReplica(tp, r) for r in removing]
        for r in stopped:
            self.batch.add_stop_replica(r.replica, tp, delete=True)
        self.rsm.set_state(stopped, R.OFFLINE, reason)
        self.rsm.set_state(stopped, R.DELETION_STARTED, reason)
        self.rsm.set_state(stopped, R.DELETION_SUCCESSFUL, reason)
        self.rsm.set_state(stopped, R.NON_EXISTENT, reason)
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(target))
        ctx.partitions_being_reassigned.discard(tp)
        await self._write_assignment(tp.topic)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, [tp])
        self.state_log.info(f"Reassignment of {tp} completed: replicas {list(target)}, leader {written[tp].leader}")

    async def on_zk_reassignment(self) -> None:
        """The ZooKeeper-era request: ``/admin/reassign_partitions`` (deleted once started)."""
        if not self.active:
            return
        try:
            data, _ = await self.zk.get(zk_data.REASSIGN_PARTITIONS_PATH, watch=True)
        except NoNodeError:
            await self.zk.exists(zk_data.REASSIGN_PARTITIONS_PATH, watch=True)
            return
        try:
            wanted = zk_data.decode_reassignment(data)
        except zk_data.ZkDataError as exc:
            log.warning("ignoring %s: %s", zk_data.REASSIGN_PARTITIONS_PATH, exc)
            wanted = {}
        results = await self.alter_reassignments({tp: list(r) for tp, r in wanted.items()})
        for tp, (code, message) in sorted(results.items()):
            if code:
                log.warning("reassignment of %s from %s refused: %s", tp, zk_data.REASSIGN_PARTITIONS_PATH, message)
        await self._delete_quietly(zk_data.REASSIGN_PARTITIONS_PATH)
        await self.zk.exists(zk_data.REASSIGN_PARTITIONS_PATH, watch=True)

