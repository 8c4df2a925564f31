"""DeleteRecords (key 21), v0-v2.

Moves each partition's log start offset up to the given offset (-1 means the high
watermark); records below it are no longer readable and whole segments below it are
removed by retention. An offset above the high watermark is OFFSET_OUT_OF_RANGE. Internal
topics (coordinator state) are refused with INVALID_TOPIC_EXCEPTION, as in Kafka. The
move is ``Partition.delete_records_on_leader``.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(21, 0, 2)
def handle_delete_records(broker, request):
    topics = []
    for t in request.body.topics:
        partitions = []
        allowed = broker.allowed(request, "Delete", "Topic", t.name)
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                if not allowed:
                    raise errors.TopicAuthorizationFailedError(f"not authorized to delete records of {t.name}")
                entry["low_watermark"] = broker.replica_manager.delete_records(
                    t.name, p.partition_index, p.offset
                )
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return messages.build_response(21, request.api_version, {"throttle_time": 0, "topics": topics})
