"""LeaderAndIsr (key 4), v7 (``protocol.inter_broker``): the controller says what this
broker leads and follows (cluster mode only).

The configs of topics new to this broker are read from ZooKeeper first (their logs are made
with them; the metadata image itself changes only with UpdateMetadata), then the logs of
new partitions are created, then the states applied, in slices that yield to the loop
(``ReplicaManager.apply_leader_and_isr``, Kafka's becomeLeaderOrFollower): leaders lead from
the new epoch, followers fetch from their leader after truncating by leader epoch. A
controller epoch older than one already heard from answers STALE_CONTROLLER_EPOCH for the
whole request and changes nothing; a broker epoch older than this broker's registration
STALE_BROKER_EPOCH; per partition, a leader epoch older than the local one
STALE_CONTROLLER_EPOCH (Kafka's choice), a partition this broker is no replica of
UNKNOWN_TOPIC_OR_PARTITION. A single-node broker answers INVALID_REQUEST. The response
names topics by the id the request gave. Without ClusterAction on the cluster the request
is refused before it gets here (CLUSTER_AUTHORIZATION_FAILED, ``security/request_gates``).
"""

import logging

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import leader_and_isr_schema as schema

log = logging.getLogger(__name__)


@api(schema.API_KEY, schema.VERSION, schema.VERSION)
async def handle_leader_and_isr(broker, request):
    body = request.body
    replicas = broker.replica_manager
    code = controller_request_refusal(broker, body, "LeaderAndIsr", request.peer)
    if code:
        return _response(code, body, {})
    if broker.cluster is not None:  # a new topic's logs are made with its configs (from ZooKeeper)
        for ts in body.topic_states:
            await broker.store.topic_configs(ts.topic_name)
    code, results = await replicas.apply_leader_and_isr(body)
    for t in body.topic_states:
        broker.controller.notify("partitions", t.topic_name)
    return _response(code, body, {(t, p): c for t, p, c in results})


def controller_request_refusal(broker, body, what: str, peer: str) -> int:
    """The whole-request error of a LeaderAndIsr or StopReplica, or 0."""
    if not broker.replica_manager.replicated:
        log.warning("%s from %s refused: this broker runs alone (zookeeper.connect is not set)", what, peer)
        return ErrorCode.invalid_request
    if broker.cluster is not None:
        stale = cluster_admin.stale_control_request(broker, body)
        if stale is not None:
            log.warning(
                "%s from controller %d with epoch %d refused: %s",
                what,
                body.controller_id,
                body.controller_epoch,
                ErrorCode(stale).name,
            )
            return stale
    return 0


def _response(code: int, body, results: dict) -> schema.LeaderAndIsrResponse:
    topics = []
    for ts in body.topic_states:
        errors_ = tuple(
            schema.LeaderAndIsrPartitionError(
                partition_index=ps.partition_index,
                error_code=ErrorCode(code or results.get((ts.topic_name, ps.partition_index), 0)),
            )
            for ps in ts.partition_states
        )
        topics.append(schema.LeaderAndIsrTopicError(topic_id=ts.topic_id, partition_errors=errors_))
    return schema.LeaderAndIsrResponse(error_code=ErrorCode(code), topics=tuple(topics))
