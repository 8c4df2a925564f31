"""LeaderAndIsr (key 4), v7: the controller tells this broker which partitions it leads and
which it follows (cluster mode only).

Minimal control-side version (issue 15): the partitions' states are recorded, their logs
created, and each replica leads or stops leading; the follower side (fetchers, truncation) is
ReplicaManager.become_leader_or_follower of the replication work (issue 16), which replaces
the body of this handler. Requests from an older controller get STALE_CONTROLLER_EPOCH;
a partition whose leader epoch is older than the one this broker has is skipped with
STALE_CONTROLLER_EPOCH (Kafka's rule).
"""

import logging

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker.leader_and_isr_schema import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)

log = logging.getLogger(__name__)


@api(4, 7, 7)
async def handle_leader_and_isr(broker, request):
    body = request.body
    if broker.cluster is None:
        log.warning("LeaderAndIsr from %s refused: this broker is not in a cluster (no zookeeper.connect)", request.peer)
        return LeaderAndIsrResponse(error_code=ErrorCode.invalid_request, topics=())
    stale = cluster_admin.stale_control_request(broker, body)
    if stale is not None:
        log.warning(
            "refused LeaderAndIsr from controller %d with epoch %d: %s", body.controller_id, body.controller_epoch, ErrorCode(stale).name
        )
        return LeaderAndIsrResponse(error_code=stale, topics=())
    replicas = broker.replica_manager
    topics = []
    for t in body.topic_states:
        current = {
            ps.partition_index: p.leader_epoch
            for ps in t.partition_states
            if (p := replicas.partitions.get((t.topic_name, ps.partition_index))) is not None
        }
        fresh = [ps for ps in t.partition_states if ps.leader_epoch >= current.get(ps.partition_index, -1)]
        topic, _ = await broker.store.apply_leader_and_isr(t.topic_name, t.topic_id, fresh)
        replicas.sync_topic(t.topic_name)
        await replicas.logs_ready(t.topic_name)
        errors = []
        for ps in t.partition_states:
            code = ErrorCode.none
            partition = replicas.partitions.get((t.topic_name, ps.partition_index))
            if ps not in fresh:
                code = ErrorCode.stale_controller_epoch
            elif partition is None:
                code = ErrorCode.kafka_storage_error
            else:
                state = topic.partitions[ps.partition_index]
                if state.leader == broker.node_id:
                    partition.become_leader(state)
                else:
                    partition.state = state
            errors.append(LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=code))
        topics.append(LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=tuple(errors)))
        broker.controller.notify("partitions", t.topic_name)
    return LeaderAndIsrResponse(error_code=ErrorCode.none, topics=tuple(topics))
