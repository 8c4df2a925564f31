"""Metadata (key 3), v0-v13 (v13's top-level error code, KIP-1102's REBOOTSTRAP_REQUIRED, is
always NONE: Odradek never asks a client to rebootstrap).

Brokers (as advertised on the listener the request came in on), cluster id, controller,
and for each topic asked (all topics when the list is null, or empty at v0) its
partitions with leader, leader epoch, replicas and ISR. Unknown topics are created when
``auto.create.topics.enable`` is on and the request allows it (v4+ flag); invalid names
get INVALID_TOPIC_EXCEPTION. Topic ids may be asked for instead of names from v12 (v10
and v11 carry the field, but their response cannot name a topic found by id: a null name
there is an invalid request, as in Kafka, and closes the connection).
With an authorizer, topics the principal may not Describe are left out of an all-topics
answer and answer TOPIC_AUTHORIZATION_FAILED when named, whether they exist or not (the
Describe check comes first, as in Kafka, so existence stays hidden); auto-creation needs
Create on the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED). The authorized-operations fields
(KIP-430) are filled when asked for and an authorizer is configured, else answered with
Kafka's "not requested" default. A partition without a live leader (cluster mode) is
LEADER_NOT_AVAILABLE, and so is a topic just auto-created in cluster mode, until the
controller has elected its leaders.

One request creates at most ``auto.create.topics.max.per.request`` topics (Odradek's own
key); the others get THROTTLING_QUOTA_EXCEEDED, retriable, so a client asking again gets
the next ones, and the broker logs it. A request naming more than ``CHUNK`` topics, or
creating any, is answered by a coroutine that lets the event loop serve other clients
every ``CHUNK`` topics and after each creation, encoding each topic as it goes: a
Metadata request naming a million topics takes seconds but stalls no one.
"""

import asyncio
import dataclasses
import logging
import struct
import typing
from functools import cache

from odradek.broker.handlers import api
from odradek.broker.security.authorizer import NOT_REQUESTED, cluster_authorized_operations
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode
from odradek.protocol.varint import encode_unsigned_varint

log = logging.getLogger(__name__)

CHUNK = 1000
_INT32 = struct.Struct(">i")


TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)  # Read .. AlterConfigs (Kafka's topic operations)


def _topic_entry(broker, topic, request=None) -> dict:
    ops = None
    if request is not None:
        ops = broker.authorizer.authorized_operations(request, "Topic", topic.name, TOPIC_OPERATIONS)
    return {
        "topic_authorized_operations": -(1 << 31) if ops is None else ops,
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.leader_not_available if state.leader < 0 else 0,
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [r for r in state.replicas if r not in broker.image.brokers or r in state.offline],
            }
            for index, state in sorted(topic.partitions.items())
        ],
    }


def _error_entry(name, code, topic_id=None) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


def _wanted_names(body, api_version: int):
    """The topics asked for, or None for all of them."""
    if body.topics is None or (api_version == 0 and not body.topics):
        return None
    return body.topics


@api(3, 0, 13)
def handle_metadata(broker, request):
    body = request.body
    wanted = _wanted_names(body, request.api_version)
    allow_create = bool(
        getattr(body, "allow_auto_topic_creation", True) and broker.config.get("auto.create.topics.enable")
    )
    image = broker.image
    count = len(image.topics) if wanted is None else len(wanted)
    if count > CHUNK or (allow_create and _any_unknown(image, wanted)):
        return _answer_in_steps(broker, request, wanted, allow_create)
    topics = [entry for entry, _ in _entries(broker, request, wanted, allow_create)]
    return messages.build_response(3, request.api_version, _response(broker, topics, request.listener, _cluster_operations(broker, request)))


async def _answer_in_steps(broker, request, wanted, allow_create: bool):
    """The answer as a whole frame, each topic encoded as soon as it is known (so a million
    of them never live as objects at once), with the loop served in between."""
    topic_class = _topic_class(request.api_version)
    chunks: list[bytes] = []
    chunk: list[bytes] = []
    count = 0
    for entry, created in _entries(broker, request, wanted, allow_create):
        chunk.append(messages.encode_body(messages.build(topic_class, entry)))
        count += 1
        if created or len(chunk) == CHUNK:
            chunks.append(b"".join(chunk))
            chunk.clear()
            await asyncio.sleep(0)
    chunks.append(b"".join(chunk))
    return _frame_with_topics(broker, request, count, chunks)


def _frame_with_topics(broker, request, count: int, topics: list[bytes]) -> bytes:
    """The response frame: the answer encoded with no topics, and ``count`` topics' encodings
    spliced in where its empty topics array was (only trailing fixed fields follow it)."""
    version = request.api_version
    cls = messages.response_class(3, version)
    empty = messages.encode_body(messages.build(cls, _response(broker, [], request.listener, _cluster_operations(broker, request))))
    flexible = messages.is_flexible(3, version)
    names = {f.name for f in dataclasses.fields(cls)}
    trailing = (4 if "cluster_authorized_operations" in names else 0) + (2 if "error_code" in names else 0)
    cut = len(empty) - trailing - (1 if flexible else 0)
    if flexible:
        no_topics, array_length = b"\x01", encode_unsigned_varint(count + 1)
    else:
        no_topics, array_length = _INT32.pack(0), _INT32.pack(count)
    start = cut - len(no_topics)
    if empty[start:cut] != no_topics:
        raise RuntimeError(f"Metadata v{version}: the topics array is not where expected")
    parts = [messages.response_header(3, version, request.correlation_id), empty[:start], array_length]
    parts += topics
    parts.append(empty[cut:])
    parts.insert(0, messages.size_prefix(sum(len(p) for p in parts)))
    return b"".join(parts)


def _entries(broker, request, wanted, allow_create: bool):
    """(topic entry, whether it was just created) for each topic of the answer, in order."""
    authorizer = broker.authorizer
    with_ops = (
        request if authorizer is not None and getattr(request.body, "include_topic_authorized_operations", False) else None
    )

    def may(operation: str, name: str) -> bool:
        return authorizer is None or authorizer.authorize(request, operation, "Topic", name)

    if wanted is None:
        for topic in list(broker.image.topics.values()):
            if may("Describe", topic.name):
                yield _topic_entry(broker, topic, with_ops), False
        return
    cap = broker.config.get("auto.create.topics.max.per.request")
    created = refused = 0
    for item in wanted:
        name = getattr(item, "name", item)
        topic_id = getattr(item, "topic_id", None)
        image = broker.image
        if name is None and request.api_version < 12:
            raise errors.InvalidRequestError(f"topic name can not be null for version {request.api_version}")
        if name is None:
            topic = image.topic_by_id(topic_id) if topic_id is not None else None
            if topic is None or not may("Describe", topic.name):
                yield _error_entry(None, ErrorCode.unknown_topic_id, topic_id), False
            else:
                yield _topic_entry(broker, topic, with_ops), False
            continue
        topic = image.topics.get(name)
        # Authorisation first, as KafkaApis: a topic the principal may not Describe is
        # TOPIC_AUTHORIZATION_FAILED whether it exists or not (its existence stays hidden).
        if not may("Describe", name):
            yield _error_entry(name, ErrorCode.topic_authorization_failed), False
        elif topic is not None:
            yield _topic_entry(broker, topic, with_ops), False
        elif not allow_create:
            yield _error_entry(name, ErrorCode.unknown_topic_or_partition), False
        elif authorizer is not None and not (broker.allowed(request, "Create") or may("Create", name)):
            yield _error_entry(name, ErrorCode.topic_authorization_failed), False
        elif created >= cap:
            refused += 1
            yield _error_entry(name, ErrorCode.throttling_quota_exceeded), False
        else:
            try:
                topic = broker.auto_create_topic(name)
            except errors.KafkaError as exc:
                yield _error_entry(name, exc.code), False
                continue
            created += 1
            if topic is None:  # cluster mode: being created through the controller; ask again
                yield _error_entry(name, ErrorCode.leader_not_available), True
            else:
                yield _topic_entry(broker, topic, with_ops), True
    if refused:
        log.warning(
            "Metadata from %s (client id %r) would auto-create %d topics: created %d "
            "(auto.create.topics.max.per.request), answered the other %d with THROTTLING_QUOTA_EXCEEDED",
            request.peer,
            request.client_id,
            created + refused,
            created,
            refused,
        )


def _any_unknown(image, wanted) -> bool:
    if wanted is None:
        return False
    topics = image.topics
    for item in wanted:
        name = getattr(item, "name", item)
        if name is not None and name not in topics:
            return True
    return False


def _cluster_operations(broker, request) -> int:
    requested = bool(getattr(request.body, "include_cluster_authorized_operations", False))
    return cluster_authorized_operations(broker.authorizer, request, requested)


def _response(broker, topics: list, listener: str, cluster_operations: int = NOT_REQUESTED) -> dict:
    image = broker.image
    return {
        "cluster_authorized_operations": cluster_operations,
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
            for b in image.brokers.values()
            for host, port in (b.address(listener),)
        ],
        "cluster_id": broker.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics,
        "error_code": 0,
    }


@cache
def _topic_class(api_version: int) -> type:
    hints = typing.get_type_hints(messages.response_class(3, api_version))
    return typing.get_args(hints["topics"])[0]
