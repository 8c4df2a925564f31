"""DescribeGroups (key 15), v0-v6.

State, protocol type, chosen protocol and members of each group asked. Members carry
their subscription and assignment only when the group is Stable (as in Kafka); v4+ show
``group_instance_id``. An unknown group reads as Dead with no error, except from v6,
which answers GROUP_ID_NOT_FOUND with a message. ``include_authorized_operations``
(v3+, KIP-430) gets the group operations the principal may do (every one without an
authorizer); a group it may not Describe answers GROUP_AUTHORIZATION_FAILED.
"""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode

NOT_REQUESTED = -(2**31)
# AclOperation codes: READ 3, DELETE 6, DESCRIBE 8
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def _denied(group_id: str) -> dict:
    return {
        "error_code": ErrorCode.group_authorization_failed,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": NOT_REQUESTED,
    }


def _describe(broker, version: int, group_id: str, operations: int) -> dict:
    entry = {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": "Dead",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": operations,
    }
    try:
        found = coordinator_of(broker).describe_group(group_id)
    except errors.KafkaError as exc:
        entry.update(error_code=exc.code, error_message=exc.message, group_state="")
        return entry
    if found is None:
        if version >= 6:
            entry.update(error_code=ErrorCode.group_id_not_found, error_message=f"group {group_id} not found")
        return entry
    entry.update(found)
    return entry


@api(15, 0, 6)
def handle_describe_groups(broker, request):
    body = request.body
    version = request.api_version
    operations = GROUP_OPERATIONS if getattr(body, "include_authorized_operations", False) else NOT_REQUESTED
    authorizer = broker.authorizer
    groups = []
    for group_id in body.groups:
        if authorizer is None:
            groups.append(_describe(broker, version, group_id, operations))
        elif not authorizer.authorize(request, "Describe", "Group", group_id):
            groups.append(_denied(group_id))
        else:
            ops = operations
            if ops != NOT_REQUESTED:
                ops = authorizer.authorized_operations(request, "Group", group_id, (3, 6, 8))
            groups.append(_describe(broker, version, group_id, ops))
    return messages.build_response(15, version, {"throttle_time": 0, "groups": groups})
