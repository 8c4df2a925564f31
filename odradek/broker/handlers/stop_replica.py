"""StopReplica (key 5), v4: the controller tells this broker to stop replicas — and with
``delete_partition`` to delete their logs (topic deletion, a reassignment moved them away) —
(cluster mode only).

Minimal control-side version (issue 15): a stopped replica stops leading; a deleted one's
log goes. The follower side (stopping fetchers) belongs to the replication work (issue 16),
which replaces the body of this handler.
"""

import logging
from dataclasses import replace

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker.stop_replica_schema import StopReplicaPartitionError, StopReplicaResponse

log = logging.getLogger(__name__)


@api(5, 4, 4)
def handle_stop_replica(broker, request):
    body = request.body
    if broker.cluster is None:
        log.warning("StopReplica from %s refused: this broker is not in a cluster (no zookeeper.connect)", request.peer)
        return StopReplicaResponse(error_code=ErrorCode.invalid_request, partition_errors=())
    stale = cluster_admin.stale_control_request(broker, body)
    if stale is not None:
        return StopReplicaResponse(error_code=stale, partition_errors=())
    replicas = broker.replica_manager
    results = []
    for t in body.topic_states:
        for ps in t.partition_states:
            key = (t.topic_name, ps.partition_index)
            partition = replicas.partitions.get(key)
            if partition is not None and ps.delete_partition:
                replicas.partitions.pop(key)
                replicas.log_manager.delete_log(*key)
            elif partition is not None and partition.is_leader:
                partition.state = replace(partition.state, leader=-1)
            results.append(
                StopReplicaPartitionError(topic_name=t.topic_name, partition_index=ps.partition_index, error_code=ErrorCode.none)
            )
        if not any(topic == t.topic_name for topic, _ in replicas.partitions):
            replicas.remove_topic(t.topic_name)
        broker.controller.notify("partitions", t.topic_name)
    return StopReplicaResponse(error_code=ErrorCode.none, partition_errors=tuple(results))
