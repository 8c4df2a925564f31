"""DescribeTopicPartitions (key 75), v0 (KIP-966): topics' partitions, a page at a time.

The topics asked for (all topics when the list is empty), sorted by name, from the request's
cursor (its topic first, from its partition) until ``response_partition_limit`` partitions
(at least 1, at most 2000: Kafka's ``max.request.partition.size.limit``) have been listed;
``next_cursor`` then names the first partition not listed, or is null when everything was.
Kafka's rules: topics named before the cursor's topic are skipped, a topic list must
include the cursor's topic and a cursor partition must not be negative (INVALID_REQUEST on
every topic asked); unknown topics get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
for illegal names) unless all topics were asked for. Each partition has its leader, epoch,
replicas, ISR and offline replicas (brokers gone, or this broker when the partition's log
dir failed); eligible leader replicas (KIP-966's ELR) are not kept, so they are null.
Authorized operations carry Kafka's "not requested" default.
"""

from odradek.broker.handlers import api
from odradek.cluster.store import validate_topic_name
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default


def _partition(broker, topic, index: int) -> dict:
    state = topic.partitions[index]
    offline = [r for r in state.replicas if r not in broker.image.brokers or r in state.offline]
    if broker.node_id in state.replicas and broker.log_manager.is_offline(topic.name, index):
        offline.append(broker.node_id)
    return {
        "error_code": 0,
        "partition_index": index,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": state.replicas,
        "isr_nodes": state.isr,
        "eligible_leader_replicas": None,
        "last_known_elr": None,
        "offline_replicas": sorted(set(offline)),
    }


def _missing(name: str, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": None, "is_internal": False, "partitions": []}


def _describe(broker, request) -> dict:
    body = request.body
    cursor = body.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    every = not body.topics
    names = list(broker.image.topics) if every else [t.name for t in body.topics]
    names = sorted({n for n in names if n >= start_topic})
    if cursor is not None and not every and cursor.topic_name not in names:
        raise errors.InvalidRequestError(
            f"DescribeTopicPartitions: the topic list must include the cursor's topic {cursor.topic_name}"
        )
    if cursor is not None and cursor.partition_index < 0:
        raise errors.InvalidRequestError(
            f"DescribeTopicPartitions: the cursor's partition must not be negative ({cursor.partition_index})"
        )
    remaining = max(min(MAX_PARTITIONS, body.response_partition_limit), 1)
    topics, next_cursor = [], None
    for name in names:
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = broker.image.topics.get(name)
        if broker.authorizer is not None and not broker.allowed(request, "Describe", "Topic", name):
            if not every:  # as Kafka: named topics answer the error, the others are left out
                topics.append(_missing(name, ErrorCode.topic_authorization_failed))
            continue
        if topic is None:
            if not every:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.unknown_topic_or_partition
                except errors.InvalidTopicExceptionError:
                    code = ErrorCode.invalid_topic_exception
                topics.append(_missing(name, code))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        count = len(topic.partitions)
        upper = min(count, first + remaining)
        topics.append(
            {
                "error_code": 0,
                "name": name,
                "topic_id": topic.topic_id,
                "is_internal": topic.internal,
                "partitions": [_partition(broker, topic, i) for i in range(first, upper)],
            }
        )
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= max(upper - first, 0)
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


@api(75, 0, 0)
def handle_describe_topic_partitions(broker, request):
    body = request.body
    try:
        response = _describe(broker, request)
    except errors.KafkaError as exc:
        response = {
            "throttle_time": 0,
            "topics": [_missing(t.name, exc.code) for t in body.topics],
            "next_cursor": None,
        }
    return messages.build_response(75, request.api_version, response)
