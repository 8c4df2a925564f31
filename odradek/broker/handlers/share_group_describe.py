"""ShareGroupDescribe (key 77), v1: share groups with their members and assignments; any
other group id is GROUP_ID_NOT_FOUND."""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.broker.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from odradek.protocol import errors, messages


def _describe(broker, group_id: str, operations: int) -> dict:
    entry = {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": operations,
    }
    try:
        entry.update(coordinator_of(broker).share_group_describe(group_id))
    except errors.KafkaError as exc:
        entry.update(error_code=exc.code, error_message=exc.message)
    return entry


@api(77, 1, 1)
def handle_share_group_describe(broker, request):
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED
    groups = [_describe(broker, group_id, operations) for group_id in body.group_ids]
    return messages.build_response(77, 1, {"throttle_time": 0, "groups": groups})
