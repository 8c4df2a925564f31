"""DeleteShareGroupOffsets (key 92), v0 (Kafka 4.1; ``kafka-share-groups --delete-offsets``):
an empty share group forgets where it is in topics: the share state of every partition of
each topic goes, and the next member starts it where ``share.auto.offset.reset`` says.
Errors: GROUP_ID_NOT_FOUND for a classic or consumer group, NON_EMPTY_GROUP while members
read, the coordinator errors (top level); UNKNOWN_TOPIC_OR_PARTITION per topic."""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(92, 0, 0)
async def handle_delete_share_group_offsets(broker, request):
    body = request.body
    answer = {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": []}
    try:
        if not body.group_id:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        coordinator = coordinator_of(broker)
        coordinator.check_share_offsets_alterable(body.group_id)
    except errors.KafkaError as exc:
        answer.update(error_code=exc.code, error_message=exc.message)
        return messages.build_response(92, 0, answer)
    deleted = set()
    for t in body.topics:
        info = broker.image.topics.get(t.topic_name)
        row = {"topic_name": t.topic_name, "topic_id": None, "error_code": 0, "error_message": None}
        if info is None:
            row.update(error_code=ErrorCode.unknown_topic_or_partition, error_message=f"no topic {t.topic_name}")
        else:
            row["topic_id"] = info.topic_id
            row["error_code"] = await broker.share_fetches.delete_offsets(
                body.group_id, info.topic_id, t.topic_name, len(info.partitions)
            )
            if not row["error_code"]:
                deleted.add(info.topic_id)
        answer["responses"].append(row)
    try:
        coordinator.share_offsets_deleted(body.group_id, deleted)
    except errors.KafkaError as exc:
        answer.update(error_code=exc.code, error_message=exc.message)
    return messages.build_response(92, 0, answer)
