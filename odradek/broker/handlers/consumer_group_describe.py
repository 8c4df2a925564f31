"""ConsumerGroupDescribe (key 69), v0-v1: consumer-protocol groups (KIP-848) with their
epochs, assignor and members, each with its current and target assignment. A classic
group or an unknown one is GROUP_ID_NOT_FOUND. ``include_authorized_operations`` gets
every group operation, since there is no authorizer.
"""

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
        entry.update(coordinator_of(broker).consumer_group_describe(group_id))
    except errors.KafkaError as exc:
        entry.update(error_code=exc.code, error_message=exc.message)
    return entry


@api(69, 0, 1)
def handle_consumer_group_describe(broker, request):
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED
    groups = [_describe(broker, group_id, operations) for group_id in body.group_ids]
    return messages.build_response(69, request.api_version, {"throttle_time": 0, "groups": groups})
