"""LeaveGroup (key 13), v0-v5.

Members leave at once and the group rebalances without them. v0-v2 name one member;
v3+ a batch of members, each by member id or (admin removal, KIP-345) by
``group_instance_id`` with an empty member id, each answered on its own; v5 adds a
reason per member (logged). Before v3 the member's error is the top-level error. In a
cluster the answer waits until what the leave wrote is in the ISR of the group's
``__consumer_offsets`` partition (else the coordinator error, top-level and per member).
"""

from odradek.broker.group.group_handler_support import coordinator_of, when_group_replicated
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(13, 0, 5)
def handle_leave_group(broker, request):
    body = request.body
    version = request.api_version
    if version >= 3:
        leaving = [(m.member_id or "", m.group_instance_id, getattr(m, "reason", None)) for m in body.members]
    else:
        leaving = [(body.member_id or "", None, None)]
    top = 0
    try:
        codes = coordinator_of(broker).leave_group(body.group_id, leaving)
    except errors.KafkaError as exc:
        top, codes = exc.code, []
    if version < 3 and not top and codes:
        top = codes[0]

    def respond(failed: int):
        members = [
            {"member_id": mid, "group_instance_id": instance, "error_code": code or failed}
            for (mid, instance, _), code in zip(leaving, codes, strict=False)
        ]
        return messages.build_response(
            13, version, {"throttle_time": 0, "error_code": top or failed, "members": members}
        )

    if top or not any(code == 0 for code in codes):
        return respond(0)
    return when_group_replicated(broker, [body.group_id], respond)
