"""A group member's states, and how the group's error codes move it (the client side).

``UNJOINED`` → JoinGroup, SyncGroup (``REBALANCING``) → ``STABLE``, and back to
``UNJOINED`` whenever the coordinator says the member must join again. The error codes a
group request can answer with fall into the sets below; ``ConsumerCoordinator`` and
``Heartbeat`` react to each set the same way wherever it is answered.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode

UNJOINED, REBALANCING, STABLE = "unjoined", "rebalancing", "stable"

# The coordinator moved or is down: find it again (FindCoordinator), then retry.
COORDINATOR_ERRORS = {int(ErrorCode.not_coordinator), int(ErrorCode.coordinator_not_available)}
# The group forgot the member: rejoin without a member id; its partitions are lost.
RESET_MEMBER = {int(ErrorCode.unknown_member_id)}
# The group moved to a newer generation: rejoin with the same id; its partitions are lost.
RESET_GENERATION = {int(ErrorCode.illegal_generation)}
# The member cannot be in this group at all: the consumer raises the error from poll().
FATAL_JOIN = {
    int(ErrorCode.fenced_instance_id),
    int(ErrorCode.inconsistent_group_protocol),
    int(ErrorCode.invalid_session_timeout),
    int(ErrorCode.group_max_size_reached),
    int(ErrorCode.group_authorization_failed),
    int(ErrorCode.invalid_group_id),
    int(ErrorCode.unsupported_version),
}
