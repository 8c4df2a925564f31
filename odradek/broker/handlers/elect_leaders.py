"""ElectLeaders (key 43), v0-v2 (KIP-460): move leadership to the preferred replica
(election type 0), or elect a leader for partitions that have none from any live replica,
losing data (1, unclean). A null partition list means every partition.

Per partition: NONE (a leader was elected), ELECTION_NOT_NEEDED (the preferred replica
already leads / the partition has a leader), PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. In cluster mode only the active
controller elects (others answer NOT_CONTROLLER); a single node is every partition's only
replica, so no election is ever needed.
"""

from collections import defaultdict

from odradek.broker.handlers import api
from odradek.cluster.partitions import TopicPartition
from odradek.cluster.zk_controller import NotActiveController
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(43, 0, 2)
async def handle_elect_leaders(broker, request):
    body = request.body
    election_type = getattr(body, "election_type", 0)
    if body.topic_partitions is None:
        wanted = [TopicPartition(t, p) for t, info in broker.image.topics.items() for p in info.partitions]
    else:
        wanted = [TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    if broker.cluster is None:
        results = {
            tp: (ErrorCode.election_not_needed, "a single broker is every partition's only replica")
            if tp.topic in broker.image.topics and tp.partition in broker.image.topics[tp.topic].partitions
            else (ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            for tp in wanted
        }
    else:
        try:
            results = await broker.cluster.on_controller(
                "elect_leaders", wanted, election_type, f"ElectLeaders from {request.client_id or request.peer}"
            )
        except NotActiveController:
            return _response(request, ErrorCode.not_controller, {})
    return _response(request, ErrorCode.none, results)


def _response(request, error_code: int, results: dict):
    by_topic = defaultdict(list)
    for tp, (code, message) in sorted(results.items()):
        by_topic[tp.topic].append({"partition_id": tp.partition, "error_code": code, "error_message": message})
    return messages.build_response(
        43,
        request.api_version,
        {
            "throttle_time": 0,
            "error_code": error_code,
            "replica_election_results": [
                {"topic": topic, "partition_result": parts} for topic, parts in sorted(by_topic.items())
            ],
        },
    )
