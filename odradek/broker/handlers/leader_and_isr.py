"""LeaderAndIsr (key 4), v6 (``protocol.inter_broker``): the controller says what this
broker leads and follows.

Applied by ``ReplicaManager.become_leader_or_follower``: a controller epoch older than the
latest seen answers STALE_CONTROLLER_EPOCH for the whole request and changes nothing; a
broker epoch older than this broker's registration answers STALE_BROKER_EPOCH (a request
meant for this broker before it restarted); per partition, a leader epoch older than the
local one answers STALE_CONTROLLER_EPOCH (Kafka's choice), a partition this broker is no
replica of UNKNOWN_TOPIC_OR_PARTITION. The configs of topics new to this broker are read from
ZooKeeper first, so their logs are made with them. A single-node broker (no ``zookeeper.connect``)
answers INVALID_REQUEST: it has no controller. The response names topics by the id the
request gave.
"""

import logging

from odradek.broker.handlers import api
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import leader_and_isr as schema

log = logging.getLogger(__name__)


@api(schema.API_KEY, schema.VERSION, schema.VERSION)
async def handle_leader_and_isr(broker, request):
    body = request.body
    replicas = broker.replica_manager
    code = controller_request_refusal(replicas, body, "LeaderAndIsr", request.peer)
    if code:
        return _response(code, body, {})
    if broker.cluster is not None:  # a new topic's logs are made with its configs (from ZooKeeper)
        for ts in body.topic_states:
            await broker.store.topic_configs(ts.topic_name)
    code, results = replicas.become_leader_or_follower(body)
    return _response(code, body, {(t, p): c for t, p, c in results})


def controller_request_refusal(replicas, body, what: str, peer: str) -> int:
    if not replicas.replicated:
        log.warning("%s from %s refused: this broker runs alone (zookeeper.connect is not set)", what, peer)
        return ErrorCode.invalid_request
    if 0 <= body.broker_epoch < replicas.broker_epoch:
        log.warning(
            "%s from controller %d refused: broker epoch %d is older than this broker's %d",
            what,
            body.controller_id,
            body.broker_epoch,
            replicas.broker_epoch,
        )
        return ErrorCode.stale_broker_epoch
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
