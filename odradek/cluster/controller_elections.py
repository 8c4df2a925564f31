"""The controller's leadership moves on request: controlled shutdown, ElectLeaders (preferred
and unclean), the ZooKeeper-era ``/admin/preferred_replica_election``, and the automatic
leader rebalance (Kafka's KafkaController.doControlledShutdown, onReplicaElection and
checkAndTriggerAutoLeaderRebalance).

A mixin of ``ZkController``: it uses the controller's context, state machines, writes and
request batch, and runs on the same event task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from odradek.cluster import zk_data
from odradek.cluster.lifecycle_states import ReplicaLifecycle
from odradek.cluster.partitions import PartitionAndReplica, TopicPartition
from odradek.cluster.state_machines import ElectionStrategy
from odradek.cluster.zk_client import NoNodeError
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

R = ReplicaLifecycle

# ElectLeaders' election types
PREFERRED, UNCLEAN = 0, 1


class LeadershipMoves:

    async def controlled_shutdown(self, broker: int, broker_epoch: int) -> set[TopicPartition]:
        """Move ``broker``'s leaderships away and take it out of the ISRs; returns the partitions
        it still leads (none when done)."""
        self._require_active()
        ctx = self.ctx
        if broker not in ctx.live_or_shutting_down_broker_ids:
            raise errors.BrokerNotAvailableError(f"broker {broker} is not registered")
        if broker_epoch != -1 and broker_epoch < ctx.live_broker_epochs[broker]:
            raise errors.StaleBrokerEpochError(
                f"broker {broker} asked with epoch {broker_epoch}; its registration has {ctx.live_broker_epochs[broker]}"
            )
        ctx.shutting_down_broker_ids.add(broker)
        reason = f"controlled shutdown of broker {broker}"
        self.state_log.info(f"Broker {broker} asked for a controlled shutdown")
        led = sorted(ctx.partition_leaders_on_broker(broker))
        await self._bring_online(led, ElectionStrategy.CONTROLLED_SHUTDOWN, reason)
        followers = [
            PartitionAndReplica(tp, broker)
            for tp in sorted(ctx.partitions_on_broker(broker))
            if len(ctx.partition_replica_assignment(tp)) > 1
            and (lai := ctx.partition_leader_and_isr(tp)) is not None
            and lai.leader != broker
        ]
        for r in followers:
            self.batch.add_stop_replica(broker, r.topic_partition, delete=False)
        self.rsm.set_state(followers, R.OFFLINE, reason)
        await self._remove_replicas_from_isr(followers, reason)
        self._send()
        return self._replicated_leaderships(broker)

    def _replicated_leaderships(self, broker: int) -> set[TopicPartition]:
        """The partitions with more than one replica that ``broker`` still leads (Kafka's
        answer): e.g. one whose other replicas are out of the ISR or down. The broker asks
        again (``controlled.shutdown.max.retries``) and then shuts down anyway; a partition with
        a single replica has nowhere to go and is not listed."""
        ctx = self.ctx
        return {tp for tp in ctx.partition_leaders_on_broker(broker) if len(ctx.partition_replica_assignment(tp)) > 1}

    # ---------------------------------------------------------------- leader elections

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition], election_type: int, reason: str
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """ElectLeaders: ``(error code, message)`` per partition (NONE when a new leader was elected)."""
        self._require_active()
        ctx = self.ctx
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        eligible = []
        for tp in partitions:
            lai = ctx.partition_leader_and_isr(tp)
            if tp not in ctx.all_partitions or lai is None or ctx.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = (ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            elif election_type == PREFERRED and lai.leader == ctx.partition_replica_assignment(tp)[0]:
                results[tp] = (ErrorCode.election_not_needed, f"{tp}: its preferred replica already leads")
            elif election_type == UNCLEAN and ctx.is_replica_online(lai.leader, tp):
                results[tp] = (ErrorCode.election_not_needed, f"{tp} has a live leader")
            else:
                eligible.append(tp)
        if eligible:
            strategy = ElectionStrategy.PREFERRED_REPLICA if election_type == PREFERRED else ElectionStrategy.OFFLINE
            failed = await self._bring_online(eligible, strategy, reason, unclean=election_type == UNCLEAN)
            for tp in eligible:
                if tp in failed:
                    code = ErrorCode.preferred_leader_not_available if election_type == PREFERRED else ErrorCode.eligible_leaders_not_available
                    results[tp] = (code, failed[tp])
                else:
                    results[tp] = (ErrorCode.none, None)
            self._send()
        return results

    async def on_zk_preferred_election(self) -> None:
        if not self.active:
            return
        try:
            data, _ = await self.zk.get(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True)
        except NoNodeError:
            await self.zk.exists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True)
            return
        try:
            partitions = zk_data.decode_preferred_replica_election(data)
        except zk_data.ZkDataError as exc:
            log.warning("ignoring %s: %s", zk_data.PREFERRED_REPLICA_ELECTION_PATH, exc)
            partitions = set()
        await self.elect_leaders(partitions, PREFERRED, f"preferred replica election asked in {zk_data.PREFERRED_REPLICA_ELECTION_PATH}")
        await self._delete_quietly(zk_data.PREFERRED_REPLICA_ELECTION_PATH)
        await self.zk.exists(zk_data.PREFERRED_REPLICA_ELECTION_PATH, watch=True)

    def imbalanced_partitions(self) -> list[TopicPartition]:
        """Kafka's auto-rebalance check: per preferred broker, the share of its partitions it does
        not lead; above ``leader.imbalance.per.broker.percentage``, those partitions (whose
        preferred replica is live and in the ISR) are to move back."""
        ctx = self.ctx
        limit = self.config.get("leader.imbalance.per.broker.percentage") / 100
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions:
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and tp in ctx.partition_leadership and not ctx.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred.setdefault(replicas[0], []).append(tp)
        moves = []
        for broker, tps in sorted(by_preferred.items()):
            if broker not in ctx.live_broker_ids:
                continue
            off = [tp for tp in tps if ctx.partition_leader_and_isr(tp).leader != broker]
            if off and len(off) / len(tps) > limit:
                moves += [
                    tp
                    for tp in off
                    if broker in ctx.partition_leader_and_isr(tp).isr and tp not in ctx.partitions_being_reassigned
                ]
        return sorted(moves)

    async def auto_rebalance(self) -> None:
        if not self.active:
            return
        moves = self.imbalanced_partitions()
        if moves:
            await self.elect_leaders(moves, PREFERRED, "auto leader rebalance (leader.imbalance.per.broker.percentage)")

    async def _rebalance_timer(self) -> None:
        interval = self.config.get("leader.imbalance.check.interval.seconds")
        while True:
            await asyncio.sleep(interval)
            if self._post is not None:
                self._post(self.auto_rebalance)

