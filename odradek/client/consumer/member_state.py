"""A group member's states, and how the group's error codes move it (the client side).

``UNJOINED`` → JoinGroup, SyncGroup (``REBALANCING``) → ``STABLE``, and back to
``UNJOINED`` whenever the coordinator says the member must join again. The error codes a
group request can answer with fall into the sets below; ``ConsumerCoordinator`` and
``Heartbeat`` react to each set the same way wherever it is answered.

``GroupMember`` is the member as its heartbeat task and its offset commits see it: the
``ConsumerCoordinator`` that owns them is one, and they know it only through this interface
(declared here, below all three, so that neither imports the coordinator back).
"""

from __future__ import annotations

from typing import Any, Protocol

from odradek.client.consumer.subscription import SubscriptionState
from odradek.client.netclient import NetClient
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


class GroupMember(Protocol):
    client: NetClient
    subs: SubscriptionState
    interceptors: list
    group_id: str | None
    instance_id: str | None
    generation: int
    member_id: str
    state: str  # UNJOINED, REBALANCING or STABLE
    coordinator_id: int | None  # connection id of the coordinator, None while unknown
    closing: bool
    last_poll: float  # time.monotonic() of the last poll()
    heartbeat_interval: float  # seconds, as are the next three
    max_poll_interval: float
    request_timeout: float
    retry_backoff: float
    session_timeout_ms: int

    @property
    def rejoin_needed(self) -> bool: ...

    async def call(self, api_key: int, values: dict, timeout: float | None = None) -> Any:
        """One request to the group coordinator (found first if need be)."""

    def coordinator_dead(self) -> None:
        """Look the coordinator up again before the next request."""

    def wakeup(self) -> None:
        """Wake the member's own task (to rejoin, or to find the coordinator)."""

    def request_rejoin(self) -> None: ...

    def reset_generation(self, member: bool, lost: bool) -> None:
        """Out of the generation (``member``: forget the member id too); ``lost``: the partitions are lost."""

    def handle_group_error(self, code: int, what: str) -> None:
        """React to a group error code answered to request ``what``."""

    async def leave_inactive(self) -> None:
        """Leave the group because poll() was not called in time; the partitions are lost."""
