"""AlterShareGroupOffsets (key 91), v0 (Kafka 4.1): move an empty share group's start offset
on partitions (``kafka-share-groups --reset-offsets``). The group must be a share group (or
not exist yet) without members: GROUP_ID_NOT_FOUND for a group of another type,
NON_EMPTY_GROUP while members read. Per partition: UNKNOWN_TOPIC_OR_PARTITION, and
OFFSET_OUT_OF_RANGE for an offset outside the log."""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(91, 0, 0)
async def handle_alter_share_group_offsets(broker, request):
    body = request.body
    answer = {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": []}
    try:
        if not body.group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        coordinator_of(broker).check_share_offsets_alterable(body.group_id)
    except errors.KafkaError as exc:
        answer.update(error_code=exc.code, error_message=exc.message)
        return messages.build_response(91, 0, answer)
    for t in body.topics:
        info = broker.image.topics.get(t.topic_name)
        rows = [
            {
                "partition_index": p.partition_index,
                "error_code": await broker.share_fetches.alter_start_offset(
                    body.group_id, t.topic_name, p.partition_index, p.start_offset
                ),
                "error_message": None,
            }
            for p in t.partitions
        ]
        answer["responses"].append(
            {"topic_name": t.topic_name, "topic_id": info.topic_id if info is not None else None, "partitions": rows}
        )
        altered = frozenset(r["partition_index"] for r in rows if not r["error_code"])
        if info is not None and altered:
            try:  # the group (made if new) knows these partitions have share state now
                coordinator_of(broker).share_offsets_altered(body.group_id, info.topic_id, t.topic_name, altered)
            except errors.KafkaError as exc:
                answer.update(error_code=exc.code, error_message=exc.message)
    return messages.build_response(91, 0, answer)
