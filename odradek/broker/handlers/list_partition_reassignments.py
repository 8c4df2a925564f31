"""ListPartitionReassignments (key 46), v0 (KIP-455): the reassignments in progress, with
each partition's full replica list and the replicas being added and removed. Answered by the
active controller (others: NOT_CONTROLLER); a single node never has any.
"""

from odradek.broker.handlers import api
from odradek.cluster.partitions import TopicPartition
from odradek.cluster.zk_controller import NotActiveController
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(46, 0, 0)
async def handle_list_partition_reassignments(broker, request):
    topics = request.body.topics
    wanted = None if topics is None else [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    ongoing = {}
    if broker.cluster is not None:
        try:
            ongoing = await broker.cluster.on_controller("list_reassignments_now", wanted)
        except NotActiveController:
            return _response(request, ErrorCode.not_controller, "this broker is not the controller", {})
    return _response(request, ErrorCode.none, None, ongoing)


def _response(request, error_code, message, ongoing: dict):
    by_topic: dict[str, list] = {}
    for tp, a in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "replicas": list(a.replicas),
                "adding_replicas": list(a.adding_replicas),
                "removing_replicas": list(a.removing_replicas),
            }
        )
    return messages.build_response(
        46,
        request.api_version,
        {
            "throttle_time": 0,
            "error_code": error_code,
            "error_message": message,
            "topics": [{"name": t, "partitions": parts} for t, parts in sorted(by_topic.items())],
        },
    )
