"""DeleteGroups (key 42), v0-v2.

Deletes groups without members, with their committed offsets (tombstones in
``__consumer_offsets``). NON_EMPTY_GROUP while a group has members, GROUP_ID_NOT_FOUND
for unknown groups, NOT_COORDINATOR for groups coordinated elsewhere. In a cluster the
answer waits until the tombstones are in the ISR (else the coordinator error per group).
"""

from odradek.broker.group.group_handler_support import coordinator_of, when_group_replicated
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(42, 0, 2)
def handle_delete_groups(broker, request):
    names = list(dict.fromkeys(request.body.groups_names))
    denied = [n for n in names if not broker.allowed(request, "Delete", "Group", n)]
    allowed = [n for n in names if n not in denied]
    try:
        codes = coordinator_of(broker).delete_groups(allowed) if allowed else {}
    except errors.KafkaError as exc:
        codes = dict.fromkeys(allowed, int(exc.code))
    codes.update(dict.fromkeys(denied, int(ErrorCode.group_authorization_failed)))

    def respond(failed: int):
        results = [{"group_id": name, "error_code": codes[name] or failed} for name in names]
        return messages.build_response(42, request.api_version, {"throttle_time": 0, "results": results})

    return when_group_replicated(broker, [name for name in names if codes[name] == 0], respond)
