"""ListOffsets (key 2), v1-v7.

Timestamp -2 gives the log start offset, -1 the high watermark (the last stable offset
for read_committed, v2+), -3 the offset and timestamp of the record with the largest
timestamp (v7, KIP-734); any other timestamp gives the first offset whose timestamp is
at least that, or -1 when there is none. Offsets at or past the high watermark (the last
stable offset for read_committed) are never answered, as in Kafka. The leader epoch (v4+)
is the partition's. The lookup is ``Partition.fetch_offset_for_timestamp``.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(2, 1, 7)
def handle_list_offsets(broker, request):
    body = request.body
    isolation = getattr(body, "isolation_level", 0)
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": 0}
            try:
                partition = broker.replica_manager.get_partition(topic.name, p.partition_index)
                partition.check_leader(getattr(p, "current_leader_epoch", -1))
                ts, offset = partition.fetch_offset_for_timestamp(p.timestamp, isolation)
                entry.update(timestamp=ts, offset=offset, leader_epoch=partition.leader_epoch)
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return messages.build_response(2, request.api_version, {"throttle_time": 0, "topics": topics})
