"""Heartbeat (key 12), v0-v4.

Keeps a member's session alive. Answers REBALANCE_IN_PROGRESS while the group prepares
a rebalance (the member should rejoin), UNKNOWN_MEMBER_ID for members the group does not
know (they were removed: rejoin from scratch), ILLEGAL_GENERATION for an old generation,
FENCED_INSTANCE_ID for a replaced static member (v3+ ``group_instance_id``).
"""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(12, 0, 4)
def handle_heartbeat(broker, request):
    body = request.body
    try:
        code = coordinator_of(broker).heartbeat(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None), body.generation_id
        )
    except errors.KafkaError as exc:
        code = exc.code
    return messages.build_response(12, request.api_version, {"throttle_time": 0, "error_code": code})
