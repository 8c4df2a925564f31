"""ListOffsets (key 2), v1-v9.

Timestamp -2 gives the log start offset, -1 the high watermark (the last stable offset
for read_committed, v2+), -3 the offset and timestamp of the record with the largest
timestamp (v7, KIP-734); any other timestamp gives the first offset whose timestamp is
at least that, or -1 when there is none. Without tiered storage, as in Kafka: -4, the
earliest local offset (v8, KIP-405), is the log start offset, and -5, the latest tiered
offset (v9, KIP-1005), is -1 with leader epoch -1. Offsets at or past the high watermark
(the last stable offset for read_committed) are never answered, as in Kafka. The leader
epoch (v4+) is the partition's. The lookup is ``Partition.fetch_offset_for_timestamp``.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages

LATEST_TIERED = -5


@api(2, 1, 9)
def handle_list_offsets(broker, request):
    body = request.body
    isolation = getattr(body, "isolation_level", 0)
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": 0}
            try:
                if not broker.allowed(request, "Describe", "Topic", topic.name):
                    raise errors.TopicAuthorizationFailedError(f"not authorized to describe {topic.name}")
                partition = broker.replica_manager.get_partition(topic.name, p.partition_index)
                partition.check_leader(getattr(p, "current_leader_epoch", -1))
                if p.timestamp == LATEST_TIERED:  # nothing is tiered
                    entry.update(timestamp=-1, offset=-1, leader_epoch=-1)
                else:
                    ts, offset = partition.fetch_offset_for_timestamp(p.timestamp, isolation)
                    entry.update(timestamp=ts, offset=offset, leader_epoch=partition.leader_epoch)
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return messages.build_response(2, request.api_version, {"throttle_time": 0, "topics": topics})
