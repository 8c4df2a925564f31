"""OffsetDelete (key 47), v0 (KIP-496).

Deletes a group's committed offsets for the partitions given. Allowed while the group
has no members; in a group with members only for topics it does not subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC for the others; NON_EMPTY_GROUP when the group's protocol is
not the consumer protocol, so its subscriptions are unknown). GROUP_ID_NOT_FOUND for an
unknown group; UNKNOWN_TOPIC_OR_PARTITION per partition of a topic that does not exist.
In a cluster the answer waits until the tombstones are in the ISR (else the coordinator
error, top-level).
"""

from odradek.broker.group.group_handler_support import coordinator_of, when_group_replicated
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(47, 0, 0)
def handle_offset_delete(broker, request):
    body = request.body
    image = broker.image
    items = []
    known = []
    refused = set()
    for t in body.topics:
        info = image.topics.get(t.name)
        if broker.authorizer is not None and not broker.allowed(request, "Read", "Topic", t.name):
            refused.add(t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            items.append(tp)
            if t.name not in refused and info is not None and p.partition_index in info.partitions:
                known.append(tp)
    try:
        results = coordinator_of(broker).delete_offsets(body.group_id, known)
    except errors.KafkaError as exc:
        return messages.build_response(47, 0, {"error_code": exc.code, "throttle_time": 0, "topics": []})
    topics: dict = {}
    for tp in items:
        code = results.get(tp, int(ErrorCode.unknown_topic_or_partition))
        if tp[0] in refused:
            code = int(ErrorCode.topic_authorization_failed)
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code})

    def respond(failed: int):
        if failed:
            return messages.build_response(47, 0, {"error_code": failed, "throttle_time": 0, "topics": []})
        return messages.build_response(
            47,
            0,
            {
                "error_code": 0,
                "throttle_time": 0,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            },
        )

    if not any(code == 0 for code in results.values()):
        return respond(0)
    return when_group_replicated(broker, [body.group_id], respond)
