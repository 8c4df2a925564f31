"""What the controller tells brokers after one decision, collected and sent together
(Kafka's ControllerBrokerRequestBatch).

While the controller handles one event it adds partitions to the batch — LeaderAndIsr for
the replicas of partitions whose leader or ISR changed, UpdateMetadata for every live broker,
StopReplica for replicas to stop or delete — and ``send`` then builds one request of each kind
per broker from the controller context, so a broker failure that moves a thousand leaders
costs each broker one LeaderAndIsr and one UpdateMetadata.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from odradek.cluster.controller_channel import ControllerChannelManager
from odradek.cluster.controller_context import ControllerContext
from odradek.cluster.partitions import TopicPartition
from odradek.cluster.zk_data import SECURITY_PROTOCOLS
from odradek.protocol.inter_broker import leader_and_isr_schema as lai_schema
from odradek.protocol.inter_broker import stop_replica_schema as sr_schema
from odradek.protocol.inter_broker import update_metadata_schema as um_schema

LEADER_DURING_DELETE = -2  # the leader UpdateMetadata names for a partition being deleted


class RequestBatch:
    def __init__(self, controller_id: int, context: ControllerContext, listener_name: str | None = None):
        self.controller_id = controller_id
        self.ctx = context
        self.listener_name = listener_name  # inter.broker.listener.name: the leaders' address for followers
        self.leader_and_isr: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)  # broker → tp → is_new
        self.metadata_brokers: set[int] = set()
        self.metadata_partitions: set[TopicPartition] = set()
        self.metadata_everything = False
        self.stop_replica: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)  # broker → tp → delete
        self.stop_replica_callbacks: dict[int, Callable] = {}

    # -- adding ---------------------------------------------------------------------------

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, *, is_new: bool = False) -> None:
        """Tell ``brokers`` (live ones only) the partition's current leader and ISR; every live
        broker also gets UpdateMetadata for it, as Kafka does. A broker in controlled shutdown is
        left out: it gets StopReplica instead, so it never follows again (and so is never taken
        back into an ISR) before it exits."""
        live = self.ctx.live_broker_ids
        for broker in brokers:
            if broker in live:
                self.leader_and_isr[broker][tp] = is_new or self.leader_and_isr[broker].get(tp, False)
        self.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids, [tp])

    def add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.metadata_brokers.update(brokers)
        self.metadata_partitions.update(partitions)

    def add_full_update_metadata(self, brokers: Iterable[int]) -> None:
        """Every partition to ``brokers`` (a new broker, or a new controller's first words)."""
        self.metadata_brokers.update(brokers)
        self.metadata_everything = True

    def add_stop_replica(self, broker: int, tp: TopicPartition, *, delete: bool, on_response=None) -> None:
        if broker not in self.ctx.live_or_shutting_down_broker_ids:
            return
        self.stop_replica[broker][tp] = delete or self.stop_replica[broker].get(tp, False)
        if on_response is not None:
            self.stop_replica_callbacks[broker] = on_response

    @property
    def empty(self) -> bool:
        return not (self.leader_and_isr or self.metadata_brokers or self.stop_replica)

    # -- sending --------------------------------------------------------------------------

    def send(self, channel: ControllerChannelManager, on_leader_and_isr_response=None) -> None:
        """Build and queue every request; the batch is empty afterwards."""
        ctx = self.ctx
        for broker, partitions in self.leader_and_isr.items():
            request = self._leader_and_isr_request(broker, partitions)
            if request is not None:
                callback = (lambda r, b=broker: on_leader_and_isr_response(b, r)) if on_leader_and_isr_response else None
                channel.send(broker, lai_schema.API_KEY, lai_schema.VERSION, request, callback)
        if self.metadata_brokers:
            partitions = ctx.all_partitions if self.metadata_everything else self.metadata_partitions
            for broker in sorted(self.metadata_brokers & ctx.live_or_shutting_down_broker_ids):
                channel.send(
                    broker, um_schema.API_KEY, um_schema.VERSION, self._update_metadata_request(broker, partitions)
                )
        for broker, partitions in self.stop_replica.items():
            channel.send(
                broker,
                sr_schema.API_KEY,
                sr_schema.VERSION,
                self._stop_replica_request(broker, partitions),
                self.stop_replica_callbacks.get(broker),
            )
        self.__init__(self.controller_id, ctx, self.listener_name)

    def _leader_and_isr_request(self, broker: int, partitions: dict[TopicPartition, bool]):
        ctx = self.ctx
        by_topic: dict[str, list] = defaultdict(list)
        leaders = set()
        for tp, is_new in sorted(partitions.items()):
            leadership = ctx.partition_leadership.get(tp)
            if leadership is None:
                continue
            lai = leadership.leader_and_isr
            assignment = ctx.partition_full_replica_assignment(tp)
            leaders.add(lai.leader)
            by_topic[tp.topic].append(
                lai_schema.LeaderAndIsrPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=leadership.controller_epoch,
                    leader=lai.leader,
                    leader_epoch=ctx.leader_epoch(tp),
                    isr=lai.isr,
                    partition_epoch=lai.zk_version,
                    replicas=assignment.replicas,
                    adding_replicas=assignment.adding_replicas,
                    removing_replicas=assignment.removing_replicas,
                    is_new=is_new,
                    leader_recovery_state=int(lai.leader_recovery_state),
                )
            )
        if not by_topic:
            return None
        live_leaders = []
        for leader in sorted(leaders):
            registration = ctx.live_brokers.get(leader)
            endpoint = registration.inter_broker_endpoint(self.listener_name) if registration else None
            if endpoint is not None:
                live_leaders.append(
                    lai_schema.LeaderAndIsrLiveLeader(broker_id=leader, host_name=endpoint.host or "", port=endpoint.port)
                )
        return lai_schema.LeaderAndIsrRequest(
            controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.live_broker_epochs.get(broker, -1),
            topic_states=tuple(
                lai_schema.LeaderAndIsrTopicState(
                    topic_name=topic, topic_id=ctx.topic_ids.get(topic), partition_states=tuple(states)
                )
                for topic, states in sorted(by_topic.items())
            ),
            live_leaders=tuple(live_leaders),
        )

    def _update_metadata_request(self, broker: int, partitions: Iterable[TopicPartition]):
        ctx = self.ctx
        by_topic: dict[str, list] = defaultdict(list)
        for tp in sorted(partitions):
            leadership = ctx.partition_leadership.get(tp)
            if leadership is None:
                continue
            lai = leadership.leader_and_isr
            replicas = ctx.partition_replica_assignment(tp)
            deleting = ctx.is_topic_queued_up_for_deletion(tp.topic)
            by_topic[tp.topic].append(
                um_schema.UpdateMetadataPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=leadership.controller_epoch,
                    leader=LEADER_DURING_DELETE if deleting else lai.leader,
                    leader_epoch=lai.leader_epoch,
                    isr=lai.isr,
                    zk_version=lai.zk_version,
                    replicas=replicas,
                    offline_replicas=tuple(
                        r for r in replicas if not ctx.is_replica_online(r, tp, include_shutting_down=True)
                    ),
                )
            )
        brokers = []
        for broker_id, registration in sorted(ctx.live_brokers.items()):
            brokers.append(
                um_schema.UpdateMetadataBroker(
                    id=broker_id,
                    endpoints=tuple(
                        um_schema.UpdateMetadataEndpoint(
                            port=e.port,
                            host=e.host or "",
                            listener=e.listener_name,
                            security_protocol=SECURITY_PROTOCOLS.index(e.security_protocol),
                        )
                        for e in registration.endpoints
                    ),
                    rack=registration.rack,
                )
            )
        return um_schema.UpdateMetadataRequest(
            controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.live_broker_epochs.get(broker, -1),
            topic_states=tuple(
                um_schema.UpdateMetadataTopicState(
                    topic_name=topic, topic_id=ctx.topic_ids.get(topic), partition_states=tuple(states)
                )
                for topic, states in sorted(by_topic.items())
            ),
            live_brokers=tuple(brokers),
        )

    def _stop_replica_request(self, broker: int, partitions: dict[TopicPartition, bool]):
        ctx = self.ctx
        by_topic: dict[str, list] = defaultdict(list)
        for tp, delete in sorted(partitions.items()):
            by_topic[tp.topic].append(
                sr_schema.StopReplicaPartitionState(
                    partition_index=tp.partition, leader_epoch=ctx.leader_epoch(tp), delete_partition=delete
                )
            )
        return sr_schema.StopReplicaRequest(
            controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.live_broker_epochs.get(broker, -1),
            topic_states=tuple(
                sr_schema.StopReplicaTopicState(topic_name=topic, partition_states=tuple(states))
                for topic, states in sorted(by_topic.items())
            ),
        )
