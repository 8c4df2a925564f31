"""OffsetFetch (key 9), v1-v10.

Committed offsets of a group: for the partitions asked, or all of the group's when the
topic list is null (v2+). In a cluster only offsets in the ISR of the group's
``__consumer_offsets`` partition count: a commit still waiting for it is not shown. A
partition without a commit reads offset -1 and empty metadata. Group-level errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
INVALID_GROUP_ID, ...) go into each partition at v1 and into the top-level error code
from v2. v5+ carry the committed leader epoch; v7+ ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT (retriable) for partitions with a transactional commit not yet
decided or a commit not yet in the ISR (read_committed consumers ask this way); v8+ ask for several groups
at once, each answered on its own; v9 member id and epoch are for the KIP-848 protocol
and are ignored for classic groups; v10 names topics by id.
"""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _row(partition: int, om, error: int = 0) -> dict:
    return {
        "partition_index": partition,
        "committed_offset": om.offset if om is not None else -1,
        "committed_leader_epoch": om.leader_epoch if om is not None else -1,
        "metadata": om.metadata if om is not None else "",
        "error_code": error,
    }


def _fetch_group(
    broker, version: int, group_id: str, topics, require_stable: bool, request, member_id=None, member_epoch: int = -1
) -> dict:
    """One group's answer: ``{"group_id", "error_code", "topics"}``. With an authorizer: the
    group needs Describe (else GROUP_AUTHORIZATION_FAILED), each topic Describe (named:
    TOPIC_AUTHORIZATION_FAILED; all topics: left out)."""
    image = broker.image
    if not broker.allowed(request, "Describe", "Group", group_id):
        code = int(ErrorCode.group_authorization_failed)
        if version >= 2:
            return {"group_id": group_id, "error_code": code, "topics": []}
        return {
            "group_id": group_id,
            "error_code": code,
            "topics": [{"name": t.name, "partitions": [_row(p, None, code) for p in t.partition_indexes]} for t in topics or ()],
        }
    checked = broker.authorizer is not None
    by_id = version >= 10
    field = "topic_id" if by_id else "name"
    wanted = None
    unknown: dict = {}  # topic key -> partitions, for ids we cannot resolve
    names: dict = {}  # topic name -> the key the client used
    if topics is not None:
        wanted = []
        for t in topics:
            if by_id:
                info = image.topic_by_id(t.topic_id) if t.topic_id is not None else None
                if info is None:
                    unknown[t.topic_id] = list(t.partition_indexes)
                    continue
                name, key = info.name, t.topic_id
            else:
                name = key = t.name
            names[name] = key
            wanted += [(name, p) for p in t.partition_indexes]
    try:
        rows = coordinator_of(broker).fetch_offsets(group_id, wanted, member_id, member_epoch)
    except errors.KafkaError as exc:
        if version >= 2:
            return {"group_id": group_id, "error_code": exc.code, "topics": []}
        rows, error = [(tp, None) for tp in wanted or ()], int(exc.code)
    else:
        error = 0
    unstable = coordinator_of(broker).unstable_offsets(group_id) if require_stable else ()
    out: dict = {}
    for (name, partition), om in rows:
        if checked and not broker.allowed(request, "Describe", "Topic", name):
            if wanted is not None:
                out.setdefault(names.get(name, name), []).append(
                    _row(partition, None, int(ErrorCode.topic_authorization_failed))
                )
            continue
        if by_id:
            key = names.get(name)
            if key is None:
                info = image.topics.get(name)
                if info is None:
                    continue
                key = info.topic_id
        else:
            key = name
        if (name, partition) in unstable:
            out.setdefault(key, []).append(_row(partition, None, int(ErrorCode.unstable_offset_commit)))
            continue
        out.setdefault(key, []).append(_row(partition, om, error))
    for key, partitions in unknown.items():
        out[key] = [_row(p, None, int(ErrorCode.unknown_topic_id)) for p in partitions]
    return {
        "group_id": group_id,
        "error_code": 0,
        "topics": [{field: key, "partitions": parts} for key, parts in out.items()],
    }


@api(9, 1, 10)
def handle_offset_fetch(broker, request):
    body = request.body
    version = request.api_version
    if version >= 8:
        stable = body.require_stable
        groups = [
            _fetch_group(
                broker, version, g.group_id, g.topics, stable, request,
                getattr(g, "member_id", None), getattr(g, "member_epoch", -1),
            )
            for g in body.groups
        ]
        return messages.build_response(9, version, {"throttle_time": 0, "groups": groups})
    answer = _fetch_group(
        broker, version, body.group_id, body.topics, getattr(body, "require_stable", False), request
    )
    return messages.build_response(
        9, version, {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]}
    )
