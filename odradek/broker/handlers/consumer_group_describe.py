"""ConsumerGroupDescribe (key 69), v0-v1: consumer-protocol groups (KIP-848) with their
epochs, assignor and members, each with its current and target assignment. A classic
group or an unknown one is GROUP_ID_NOT_FOUND. ``include_authorized_operations`` gets
every group operation, since there is no authorizer.
"""

from odradek.broker.group.group_handler_support import coordinator_of, described_group
from odradek.broker.handlers import api
from odradek.broker.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from odradek.protocol import messages


@api(69, 0, 1)
def handle_consumer_group_describe(broker, request):
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED
    groups = [
        described_group(group_id, operations, lambda g: coordinator_of(broker).consumer_group_describe(g))
        for group_id in body.group_ids
    ]
    return messages.build_response(69, request.api_version, {"throttle_time": 0, "groups": groups})
