"""OffsetCommit (key 8), v2-v10.

Commits offsets for a group: by members of its current generation (generation and member
id checked; FENCED_INSTANCE_ID for a replaced static member, v7+), or by anyone while
the group has no members (generation -1: admin tools, consumers that assign partitions
themselves). Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist
(UNKNOWN_TOPIC_ID by id, v10), OFFSET_METADATA_TOO_LARGE past
``offset.metadata.max.bytes``. v2-v4 may give a retention time (kept as the offset's own
expire timestamp); v6+ the leader epoch; v10 names topics by id. The client's commit
timestamp is ignored: the broker's clock is used, as in Kafka. In a cluster the answer
waits until the commit is replicated to the ISR of the group's ``__consumer_offsets``
partition (``offsets.commit.timeout.ms``; COORDINATOR_NOT_AVAILABLE when it is not, or
NOT_COORDINATOR when leadership moved meanwhile), so that a committed offset survives the
coordinator's failure. Until then the offsets are pending: OffsetFetch still answers the
previous ones, and keeps them when the write fails (``OffsetManager``).
"""

from odradek.broker.group.group_handler_support import answer_later, coordinator_of, ms
from odradek.broker.group.offset_and_metadata import OffsetAndMetadata
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(8, 2, 10)
def handle_offset_commit(broker, request):
    body = request.body
    version = request.api_version
    image = broker.image
    by_id = version >= 10
    retention_ms = ms(body.retention_time) if version <= 4 else -1
    # (topic key as the client named it, name or None, partition) in request order
    items = []
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    codes: dict[tuple, int] = {}
    group_denied = not broker.allowed(request, "Read", "Group", body.group_id)
    for t in body.topics:
        if by_id:
            info = image.topic_by_id(t.topic_id) if t.topic_id is not None else None
            key = t.topic_id
            missing = ErrorCode.unknown_topic_id
        else:
            info = image.topics.get(t.name)
            key = t.name
            missing = ErrorCode.unknown_topic_or_partition
        for p in t.partitions:
            item = (key, p.partition_index)
            items.append(item)
            if group_denied:
                codes[item] = int(ErrorCode.group_authorization_failed)
                continue
            if info is not None and not broker.allowed(request, "Read", "Topic", info.name):
                codes[item] = int(ErrorCode.topic_authorization_failed)
                continue
            if info is None or p.partition_index not in info.partitions:
                codes[item] = int(missing)
                continue
            offsets[(info.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
            )
            codes[item] = (info.name, p.partition_index)
    if offsets:
        results: dict = {}

        def commit(settled) -> None:
            try:
                results.update(
                    coordinator_of(broker).commit_offsets(
                        body.group_id,
                        body.member_id or "",
                        getattr(body, "group_instance_id", None),
                        body.generation_id_or_member_epoch,
                        offsets,
                        retention_ms,
                        settled,
                    )
                )
            except errors.KafkaError as exc:
                results.update(dict.fromkeys(offsets, int(exc.code)))
                settled(0)

        def respond(failed: int):
            for item, value in codes.items():
                if isinstance(value, tuple):
                    codes[item] = results[value]
            return _response(version, by_id, items, _failed(codes, failed))

        return answer_later(commit, respond)
    return _response(version, by_id, items, codes)


def _failed(codes: dict, failed: int) -> dict:
    """``codes`` with the successes turned into ``failed`` (when it is an error)."""
    if not failed:
        return codes
    return {item: (failed if value == 0 else value) for item, value in codes.items()}


def _response(version: int, by_id: bool, items, codes):
    topics: dict = {}
    for key, partition in items:
        topics.setdefault(key, []).append(
            {"partition_index": partition, "error_code": codes[(key, partition)]}
        )
    field = "topic_id" if by_id else "name"
    return messages.build_response(
        8,
        version,
        {"throttle_time": 0, "topics": [{field: key, "partitions": parts} for key, parts in topics.items()]},
    )
