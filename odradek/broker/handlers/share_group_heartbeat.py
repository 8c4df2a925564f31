"""ShareGroupHeartbeat (key 76), v1: share-group membership (KIP-932).

A member joins (epoch 0, with its topics), stays (its epoch) and leaves (-1); every member is
assigned every partition of its topics. Errors: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
INVALID_REQUEST, GROUP_ID_NOT_FOUND (the id belongs to a classic or consumer group) and the
coordinator errors. Served when ``group.coordinator.rebalance.protocols`` lists ``share``.
In a cluster the answer waits until the group's ``__consumer_offsets`` partition has its
writes in the ISR.
"""

from odradek.broker.group.group_handler_support import (
    client_host,
    coordinator_of,
    heartbeat_answer,
    when_group_replicated,
)
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(76, 1, 1)
def handle_share_group_heartbeat(broker, request):
    body = request.body
    try:
        coordinator = coordinator_of(broker)
        if "share" not in coordinator.config.protocols:
            raise errors.UnsupportedVersionError("share groups are disabled (group.coordinator.rebalance.protocols)")
        member_id, epoch, interval, assignment = coordinator.share_group_heartbeat(
            body.group_id,
            body.member_id,
            body.member_epoch,
            body.rack_id,
            None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
            request.client_id or "",
            client_host(request),
        )
    except errors.KafkaError as exc:
        return messages.build_response(76, 1, heartbeat_answer(exc.code, exc.message))

    def respond(failed: int):
        if failed:
            return messages.build_response(76, 1, heartbeat_answer(failed, "the group's records are not replicated"))
        return messages.build_response(
            76, 1, heartbeat_answer(member_id=member_id, epoch=epoch, interval=interval, assignment=assignment)
        )

    return when_group_replicated(broker, [body.group_id], respond)
