"""ListOffsets (key 2), v1-v11.

Timestamp -2 gives the log start offset, -1 the high watermark (the last stable offset
for read_committed, v2+), -3 the offset and timestamp of the record with the largest
timestamp (v7, KIP-734); any other timestamp gives the first offset whose timestamp is
at least that, or -1 when there is none. Without tiered storage, as in Kafka: -4, the
earliest local offset (v8, KIP-405), is the log start offset, and -5, the latest tiered
offset (v9, KIP-1005), and -6, the earliest offset still pending upload to remote storage
(v11, KIP-1023), are -1 with timestamp -1 and leader epoch -1. v10's ``timeout_ms`` bounds
reads from remote storage (KIP-1075): with nothing remote it has nothing to bound. A special
(negative) timestamp asked below the version that introduced it, or one Kafka does not define,
is UNSUPPORTED_VERSION for that partition. Offsets at or past the high watermark
(the last stable offset for read_committed) are never answered, as in Kafka. The leader
epoch (v4+) is the partition's. The lookup is ``Partition.fetch_offset_for_timestamp``.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages

LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
NOTHING_TIERED = (LATEST_TIERED, EARLIEST_PENDING_UPLOAD)  # answers -1: no remote storage
# The first version that may ask for each special timestamp; any other negative timestamp,
# or one asked below its version, is UNSUPPORTED_VERSION for that partition, as in Kafka.
SENTINEL_SINCE = {-1: 1, -2: 1, -3: 7, -4: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}


@api(2, 1, 11)
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
                if p.timestamp < 0 and request.api_version < SENTINEL_SINCE.get(p.timestamp, 1 << 15):
                    raise errors.UnsupportedVersionError(
                        f"timestamp {p.timestamp} is not a special timestamp of ListOffsets v{request.api_version}"
                    )
                if p.timestamp in NOTHING_TIERED:
                    entry.update(timestamp=-1, offset=-1, leader_epoch=-1)
                else:
                    ts, offset = partition.fetch_offset_for_timestamp(p.timestamp, isolation)
                    entry.update(timestamp=ts, offset=offset, leader_epoch=partition.leader_epoch)
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return messages.build_response(2, request.api_version, {"throttle_time": 0, "topics": topics})
