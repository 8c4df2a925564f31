"""DeleteRecords (key 21), v0-v2.

Moves each partition's log start offset up to the given offset (-1 means the high
watermark); records below it are no longer readable and whole segments below it are
removed by retention. An offset above the high watermark is OFFSET_OUT_OF_RANGE. Internal
topics (coordinator state) are refused with INVALID_TOPIC_EXCEPTION, as in Kafka. The
move is ``Partition.delete_records_on_leader``. With followers in the ISR the answer waits
(``DelayedDeleteRecords``) until each has moved its log start offset as far, up to the
request's ``timeout_ms``; the low watermark answered is the smallest over the ISR.
"""

from odradek.broker.delayed_delete_records import DelayedDeleteRecords
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(21, 0, 2)
def handle_delete_records(broker, request):
    topics = []
    waiting = []
    replicas = broker.replica_manager
    for t in request.body.topics:
        partitions = []
        allowed = broker.allowed(request, "Delete", "Topic", t.name)
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                if not allowed:
                    raise errors.TopicAuthorizationFailedError(f"not authorized to delete records of {t.name}")
                entry["low_watermark"] = start = replicas.delete_records(t.name, p.partition_index, p.offset)
                partition = replicas.partitions[(t.name, p.partition_index)]
                if len(partition.state.isr) > 1 and partition.low_watermark < start:
                    waiting.append([partition, start, entry])
            except errors.KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": t.name, "partitions": partitions})
    if waiting:
        timeout_ms = int(request.body.timeout.total_seconds() * 1000)
        return _wait_for_followers(broker, request.api_version, topics, waiting, timeout_ms)
    return _response(request.api_version, topics)


async def _wait_for_followers(broker, version: int, topics, waiting, timeout_ms: int):
    op = DelayedDeleteRecords(timeout_ms, waiting)
    keys = [(p.topic, p.index) for p, *_ in waiting]
    if not broker.delete_records_purgatory.try_complete_else_watch(op, keys):
        await op
    return _response(version, topics)


def _response(version: int, topics):
    return messages.build_response(21, version, {"throttle_time": 0, "topics": topics})
