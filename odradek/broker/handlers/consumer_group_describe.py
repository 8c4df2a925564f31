"""ConsumerGroupDescribe (key 69), v0-v1: consumer-protocol groups (KIP-848) with their
epochs, assignor and members, each with its current and target assignment. A classic
group or an unknown one is GROUP_ID_NOT_FOUND. ``include_authorized_operations`` gets
every group operation. Under an authorizer a group the caller may not Describe is
GROUP_AUTHORIZATION_FAILED, and, as Kafka rules, a group whose members' assignments (current
or target) name a topic the caller may not Describe is TOPIC_AUTHORIZATION_FAILED, without
its members: describing a group must not reveal topics the caller cannot see.
"""

from odradek.broker.group.group_handler_support import coordinator_of, describe_if_allowed, described_group
from odradek.broker.handlers import api
from odradek.broker.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(69, 0, 1)
def handle_consumer_group_describe(broker, request):
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else NOT_REQUESTED
    groups = [
        described_group(group_id, operations, describe_if_allowed(broker, request, coordinator_of(broker).consumer_group_describe))
        for group_id in body.group_ids
    ]
    if broker.authorizer is not None:
        groups = [_without_hidden_topics(broker, request, group) for group in groups]
    return messages.build_response(69, request.api_version, {"throttle_time": 0, "groups": groups})


def _without_hidden_topics(broker, request, group: dict) -> dict:
    topics = {
        tp["topic_name"]
        for member in group["members"]
        for field in ("assignment", "target_assignment")
        for tp in member[field]["topic_partitions"]
    }
    if all(broker.allowed(request, "Describe", "Topic", name) for name in topics):
        return group
    return {
        **group,
        "error_code": ErrorCode.topic_authorization_failed,
        "error_message": "The group has assigned topics the client is not authorized to describe.",
        "members": [],
    }
