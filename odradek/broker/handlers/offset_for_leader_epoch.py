"""OffsetForLeaderEpoch (key 23), v2-v4.

For each partition, the end offset of the requested leader epoch: the start offset of
the first larger epoch in the leader-epoch cache, or the log end offset when the epoch
is the current one; an epoch below the oldest known answers UNDEFINED (-1, -1). Used by
clients to detect log truncation and by followers after a leader change.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(23, 2, 4)
def handle_offset_for_leader_epoch(broker, request):
    topics = []
    replica = getattr(request.body, "replica_id", -1) >= 0
    cluster_action = replica and broker.allowed(request, "ClusterAction")
    for t in request.body.topics:
        partitions = []
        # A follower needs ClusterAction on the cluster, a consumer Describe on the topic.
        allowed = cluster_action if replica else broker.allowed(request, "Describe", "Topic", t.topic)
        for p in t.partitions:
            entry = {"partition": p.partition, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
            try:
                if not allowed:
                    raise errors.TopicAuthorizationFailedError(f"not authorized to describe {t.topic}")
                partition = broker.replica_manager.get_partition(t.topic, p.partition)
                partition.check_leader(p.current_leader_epoch)
                epoch, end_offset = partition.last_offset_for_leader_epoch(p.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end_offset)
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": t.topic, "partitions": partitions})
    return messages.build_response(23, request.api_version, {"throttle_time": 0, "topics": topics})
