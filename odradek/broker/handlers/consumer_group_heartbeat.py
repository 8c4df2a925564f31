"""ConsumerGroupHeartbeat (key 68), v0-v1: the consumer rebalance protocol (KIP-848).

A member joins (epoch 0), stays (its epoch) and leaves (-1; -2 for a static member coming
back) through this one request; the answer carries its epoch, the heartbeat interval and,
when it changed, its assignment. v1 adds ``subscribed_topic_regex`` and has the client
choose the member id. Errors: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID,
FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, INVALID_REQUEST,
GROUP_ID_NOT_FOUND (a classic group with members) and the coordinator errors. Served only
when ``group.coordinator.rebalance.protocols`` lists ``consumer``. In a cluster the answer
waits until the group's ``__consumer_offsets`` partition has its writes in the ISR.
"""

from odradek.broker.group.consumer_group_manager import HeartbeatRequest, Requester
from odradek.broker.group.group_handler_support import (
    client_host,
    coordinator_of,
    heartbeat_answer,
    ms,
    when_group_replicated,
)
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(68, 0, 1)
def handle_consumer_group_heartbeat(broker, request):
    body = request.body
    version = request.api_version
    try:
        coordinator = coordinator_of(broker)
        if "consumer" not in coordinator.config.protocols:
            raise errors.UnsupportedVersionError("the consumer group protocol is disabled (group.coordinator.rebalance.protocols)")
        owned = None
        if body.topic_partitions is not None:
            owned = {}
            for t in body.topic_partitions:
                if t.partitions:
                    owned[t.topic_id] = owned.get(t.topic_id, frozenset()) | frozenset(t.partitions)
        answer = coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                member_epoch=body.member_epoch,
                instance_id=body.instance_id,
                rack_id=body.rack_id,
                rebalance_timeout_ms=ms(body.rebalance_timeout),
                subscribed_topic_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
                subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
                server_assignor=body.server_assignor,
                topic_partitions=owned,
                client_id=request.client_id or "",
                client_host=client_host(request),
                api_version=version,
                requester=Requester(request.principal, request.peer),
            )
        )
    except errors.KafkaError as exc:
        return messages.build_response(68, version, heartbeat_answer(exc.code, exc.message))

    def respond(failed: int):
        if failed:
            return messages.build_response(68, version, heartbeat_answer(failed, "the group's records are not replicated"))
        return messages.build_response(68, version, heartbeat_answer(
            member_id=answer.member_id,
            epoch=answer.member_epoch,
            interval=answer.heartbeat_interval_ms,
            assignment=answer.assignment,
        ))

    return when_group_replicated(broker, [body.group_id], respond)
