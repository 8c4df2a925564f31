"""AlterReplicaLogDirs (key 34), v1-v2 (KIP-113): move partition replicas between log dirs.

Each partition named under a destination dir starts moving there while it keeps serving
(``broker/log_dir_mover.py``); the answer comes at once, and DescribeLogDirs shows the move
(a future log with its lag) until it completes. Kafka's per-partition errors: a destination
that is not one of ``log.dirs`` → LOG_DIR_NOT_FOUND; an offline destination, or a partition in
an offline dir → KAFKA_STORAGE_ERROR; a partition this broker does not host →
REPLICA_NOT_AVAILABLE (the destination is remembered and used when the replica is created).
A partition already in its destination is left alone; a move under way to another dir is
replaced by the new one.
"""

from odradek.broker.handlers import api
from odradek.broker.log_dir_mover import LogDirMover
from odradek.protocol import errors, messages


@api(34, 1, 2)
def handle_alter_replica_log_dirs(broker, request):
    mover = LogDirMover.of(broker)
    results: dict[str, list] = {}
    allowed = broker.allowed(request, "Alter")
    for d in request.body.dirs:
        for topic in d.topics:
            for index in topic.partitions:
                code = 0
                try:
                    if not allowed:
                        raise errors.ClusterAuthorizationFailedError("moving replicas needs Alter on the cluster")
                    mover.move(topic.name, index, d.path)
                except errors.KafkaError as exc:
                    code = exc.code
                results.setdefault(topic.name, []).append({"partition_index": index, "error_code": code})
    return messages.build_response(
        34,
        request.api_version,
        {
            "throttle_time": 0,
            "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()],
        },
    )
