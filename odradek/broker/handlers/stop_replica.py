"""StopReplica (key 5), v4 (``protocol.inter_broker``): the controller tells this broker to
stop fetching or leading replicas, and with ``delete_partition`` to delete them (topic
deletion, a reassignment moving the replica away) (cluster mode only).

Applied by ``ReplicaManager.stop_replicas``: an older controller epoch answers
STALE_CONTROLLER_EPOCH for the whole request; per partition a leader epoch older than the
local one FENCED_LEADER_EPOCH (-1 and -2, "no epoch" and "deleting", always match). The
same refusals as LeaderAndIsr for a single node and a stale broker epoch. A topic with no
replica left here leaves the replica manager.
"""

from odradek.broker.handlers import api
from odradek.broker.handlers.leader_and_isr import controller_request_refusal
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import stop_replica_schema as schema


@api(schema.API_KEY, schema.VERSION, schema.VERSION)
def handle_stop_replica(broker, request):
    body = request.body
    replicas = broker.replica_manager
    code = controller_request_refusal(broker, body, "StopReplica", request.peer)
    results = []
    if not code:
        code, results = replicas.stop_replicas(body)
    if code:
        results = [(ts.topic_name, ps.partition_index, code) for ts in body.topic_states for ps in ts.partition_states]
    else:
        for t in body.topic_states:
            if not any(topic == t.topic_name for topic, _ in replicas.partitions):
                replicas.remove_topic(t.topic_name)
            broker.controller.notify("partitions", t.topic_name)
    return schema.StopReplicaResponse(
        error_code=ErrorCode(code),
        partition_errors=tuple(
            schema.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=ErrorCode(c))
            for t, p, c in results
        ),
    )
