"""JoinGroup (key 11), v0-v9.

The join phase of the classic group protocol (see ``odradek/broker/group/classic_group_state.py``):
the request waits until the group's join phase closes, then answers with the generation,
the chosen protocol, the leader, and (for the leader) every member's metadata.
v0 has no rebalance timeout (the session timeout stands in); v4+ new dynamic members
get MEMBER_ID_REQUIRED with their id first (KIP-394); v5+ static membership
(``group_instance_id``, KIP-345); v7+ protocol type in the answer; v8+ a reason
(logged); v9 ``skip_assignment`` for a static leader that rejoins a Stable group
(KIP-814). An empty group id gets INVALID_GROUP_ID. In a cluster a successful answer waits
until the group's ``__consumer_offsets`` partition has its writes in the ISR
(``offsets.commit.timeout.ms``; COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR otherwise).
"""

from odradek.broker.group.classic_group_manager import JoinRequest
from odradek.broker.group.classic_group_member import JoinResult
from odradek.broker.group.group_handler_support import (
    answer_later,
    client_host,
    coordinator_of,
    ms,
    when_group_replicated,
)
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(11, 0, 9)
def handle_join_group(broker, request):
    body = request.body
    version = request.api_version
    session_ms = ms(body.session_timeout)
    join = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id or "",
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.client_id or "",
        client_host=client_host(request),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(body.rebalance_timeout) if version >= 1 else session_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=getattr(body, "reason", None),
    )

    def build(result: JoinResult):
        if result.error:
            return respond(result)
        return when_group_replicated(
            broker, [join.group_id], lambda code: respond(JoinResult.failed(code, result.member_id) if code else result)
        )

    def respond(result: JoinResult):
        old = version < 7  # protocol_name is not nullable before v7
        return messages.build_response(
            11,
            version,
            {
                "throttle_time": 0,
                "error_code": result.error,
                "generation_id": result.generation_id,
                "protocol_type": result.protocol_type,
                "protocol_name": (result.protocol_name or "") if old else result.protocol_name,
                "leader": result.leader or "",
                "skip_assignment": result.skip_assignment,
                "member_id": result.member_id or "",
                "members": [
                    {"member_id": mid, "group_instance_id": instance, "metadata": metadata}
                    for mid, instance, metadata in result.members
                ],
            },
        )

    try:
        coordinator = coordinator_of(broker)
    except errors.KafkaError as exc:
        return respond(JoinResult.failed(exc.code, join.member_id))
    return answer_later(lambda callback: coordinator.join_group(join, callback), build)
