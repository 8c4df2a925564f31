"""DescribeShareGroupOffsets (key 90), v0-v1 (Kafka 4.1/4.2; ``kafka-share-groups --describe``):
each share partition's start offset (SPSO, -1 without share state), the leader epoch of its
state and, from v1, its lag. Topics null: every partition the group has share state for.
Per group: NOT_COORDINATOR and the coordinator errors, GROUP_ID_NOT_FOUND for a classic or
consumer group, GROUP_AUTHORIZATION_FAILED without Describe on it; per partition
UNKNOWN_TOPIC_OR_PARTITION. The lag is -1 where this broker
does not lead the partition (Kafka asks the leader; the CLI falls back to the log end)."""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(90, 0, 1)
async def handle_describe_share_group_offsets(broker, request):
    groups = []
    for g in request.body.groups:
        answer = {"group_id": g.group_id, "topics": [], "error_code": 0, "error_message": None}
        if broker.authorizer is not None and not broker.allowed(request, "Describe", "Group", g.group_id):
            groups.append({**answer, "error_code": ErrorCode.group_authorization_failed})
            continue
        try:
            known = coordinator_of(broker).share_offset_partitions(g.group_id)
        except errors.KafkaError as exc:
            groups.append({**answer, "error_code": exc.code, "error_message": exc.message})
            continue
        if g.topics is None:
            wanted = []
            for topic_id, partitions in sorted(known.items(), key=str):
                info = broker.image.topic_by_id(topic_id)
                if info is not None:
                    wanted.append((info.name, sorted(partitions)))
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        for name, indexes in wanted:
            info = broker.image.topics.get(name)
            rows = []
            for index in indexes:
                if info is None or index not in info.partitions:
                    rows.append({"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                                 "error_code": ErrorCode.unknown_topic_or_partition,
                                 "error_message": f"no partition {index} of topic {name}"})
                else:
                    rows.append(await broker.share_fetches.describe_offset(g.group_id, info.topic_id, index))
            answer["topics"].append(
                {"topic_name": name, "topic_id": info.topic_id if info is not None else None, "partitions": rows}
            )
        groups.append(answer)
    return messages.build_response(90, request.api_version, {"throttle_time": 0, "groups": groups})
