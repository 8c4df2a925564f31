"""Metadata (key 3), v0-v12.

Brokers (as advertised on the listener the request came in on), cluster id, controller,
and for each topic asked (all topics when the list is null, or empty at v0) its
partitions with leader, leader epoch, replicas and ISR. Unknown topics are created when
``auto.create.topics.enable`` is on and the request allows it (v4+ flag); invalid names
get INVALID_TOPIC_EXCEPTION. Topic ids may be asked for instead of names from v12 (v10
and v11 carry the field, but their response cannot name a topic found by id: a null name
there is an invalid request, as in Kafka, and closes the connection).
Authorized-operations fields are answered with Kafka's "not requested" default.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _topic_entry(broker, topic) -> dict:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [r for r in state.replicas if r not in broker.image.brokers],
            }
            for index, state in sorted(topic.partitions.items())
        ],
    }


def _error_entry(name, code, topic_id=None) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


@api(3, 0, 12)
def handle_metadata(broker, request):
    body = request.body
    image = broker.image
    if body.topics is None or (request.api_version == 0 and not body.topics):
        wanted = None
    else:
        wanted = body.topics
    allow_create = getattr(body, "allow_auto_topic_creation", True) and broker.config.get(
        "auto.create.topics.enable"
    )
    topics = []
    if wanted is None:
        topics = [_topic_entry(broker, t) for t in image.topics.values()]
    else:
        for item in wanted:
            name = getattr(item, "name", item)
            topic_id = getattr(item, "topic_id", None)
            if name is None and request.api_version < 12:
                raise errors.InvalidRequestError(f"topic name can not be null for version {request.api_version}")
            if name is None:
                topic = image.topic_by_id(topic_id) if topic_id is not None else None
                topics.append(
                    _topic_entry(broker, topic)
                    if topic
                    else _error_entry(None, ErrorCode.unknown_topic_id, topic_id)
                )
                continue
            topic = image.topics.get(name)
            if topic is None and allow_create:
                try:
                    topic = broker.auto_create_topic(name)
                except errors.KafkaError as exc:
                    topics.append(_error_entry(name, exc.code))
                    continue
            if topic is None:
                topics.append(_error_entry(name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(_topic_entry(broker, topic))
    return messages.build_response(
        3,
        request.api_version,
        {
            "throttle_time": 0,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in image.brokers.values()
            ],
            "cluster_id": broker.cluster_id,
            "controller_id": image.controller_id,
            "topics": topics,
        },
    )
