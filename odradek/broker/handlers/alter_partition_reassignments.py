"""AlterPartitionReassignments (key 45), v0-v1 (KIP-455): move partitions to new replica lists,
or cancel a move (null replicas). The active controller records the target in
``/brokers/topics/<t>`` (adding/removing replicas) and completes the move once every new
replica is in the ISR; other brokers answer NOT_CONTROLLER. Per partition: NONE,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, a broker twice, a broker not
alive), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing). A single node can only "move" a
partition to itself. v1 (KIP-860): with ``allow_replication_factor_change`` false, a target
whose replica count differs from the partition's is INVALID_REPLICATION_FACTOR and not started.
"""

from odradek.broker.handlers import api
from odradek.cluster.partitions import TopicPartition
from odradek.cluster.zk_controller import NotActiveController
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(45, 0, 1)
async def handle_alter_partition_reassignments(broker, request):
    targets = {
        TopicPartition(t.name, p.partition_index): (list(p.replicas) if p.replicas is not None else None)
        for t in request.body.topics
        for p in t.partitions
    }
    refused = {}
    if not getattr(request.body, "allow_replication_factor_change", True):
        refused = {tp: _factor_changed(broker, tp, target) for tp, target in targets.items()}
        refused = {tp: result for tp, result in refused.items() if result is not None}
        targets = {tp: target for tp, target in targets.items() if tp not in refused}
    if broker.cluster is None:
        results = {tp: _single_node(broker, tp, target) for tp, target in targets.items()}
    else:
        try:
            results = await broker.cluster.on_controller("alter_reassignments", targets) if targets else {}
        except NotActiveController:
            return _response(request, ErrorCode.not_controller, "this broker is not the controller", {})
    return _response(request, ErrorCode.none, None, {**results, **refused})


def _factor_changed(broker, tp: TopicPartition, target):
    """INVALID_REPLICATION_FACTOR when ``target`` would change the partition's replica count."""
    topic = broker.image.topics.get(tp.topic)
    state = topic.partitions.get(tp.partition) if topic is not None else None
    if target is None or state is None or len(target) == len(state.replicas):
        return None
    return (
        ErrorCode.invalid_replication_factor,
        f"{tp} has {len(state.replicas)} replicas, the target {len(target)}, "
        "and allow_replication_factor_change is false",
    )


def _single_node(broker, tp: TopicPartition, target):
    topic = broker.image.topics.get(tp.topic)
    if topic is None or tp.partition not in topic.partitions:
        return ErrorCode.unknown_topic_or_partition, f"{tp} does not exist"
    if target is None:
        return ErrorCode.no_reassignment_in_progress, f"no reassignment of {tp} is in progress"
    if target != [broker.node_id]:
        return ErrorCode.invalid_replica_assignment, f"a single broker ({broker.node_id}) can only host {tp} itself"
    return ErrorCode.none, None


def _response(request, error_code, message, results: dict):
    by_topic: dict[str, list] = {}
    for tp, (code, msg) in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code, "error_message": msg})
    return messages.build_response(
        45,
        request.api_version,
        {
            "throttle_time": 0,
            "error_code": error_code,
            "error_message": message,
            "allow_replication_factor_change": getattr(request.body, "allow_replication_factor_change", True),
            "responses": [{"name": t, "partitions": parts} for t, parts in sorted(by_topic.items())],
        },
    )
