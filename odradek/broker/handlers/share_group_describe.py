"""ShareGroupDescribe (key 77), v1: share groups with their members and assignments; any
other group id is GROUP_ID_NOT_FOUND."""

from odradek.broker.group.group_handler_support import coordinator_of, described_group
from odradek.broker.handlers import api
from odradek.broker.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from odradek.protocol import messages


@api(77, 1, 1)
def handle_share_group_describe(broker, request):
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED
    groups = [
        described_group(group_id, operations, lambda g: coordinator_of(broker).share_group_describe(g))
        for group_id in body.group_ids
    ]
    return messages.build_response(77, 1, {"throttle_time": 0, "groups": groups})
