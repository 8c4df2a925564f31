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
        info = broker.image.topics.get(t.name)
        internal = info is not None and info.internal
        partitions = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                if internal:
                    raise errors.InvalidTopicExceptionError(
                        f"records of internal topic '{t.name}' cannot be deleted: they are its coordinator's state"
                    )
                partition = broker.replica_manager.get_partition(t.name, p.partition_index)
                partition.check_leader()
                entry["low_watermark"] = partition.delete_records_on_leader(p.offset)
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    return messages.build_response(21, request.api_version, {"throttle_time": 0, "topics": topics})
