"""One member of a classic group, and the results handed to its waiting requests.

A member's JoinGroup and SyncGroup may have to wait for the rest of the group; the
coordinator keeps the callback that answers them on the member (``join_callback``,
``sync_callback``) and calls it exactly once. Heartbeat bookkeeping (the session timer)
lives on the member too, as the delayed operation that will expire it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.protocol.errors import ErrorCode


class JoinResult(NamedTuple):
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple = ()  # (member_id, group_instance_id, metadata) for the leader
    skip_assignment: bool = False

    @classmethod
    def failed(cls, error: int, member_id: str = "") -> JoinResult:
        return cls(int(error), member_id)


class SyncResult(NamedTuple):
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""

    @classmethod
    def failed(cls, error: int) -> SyncResult:
        return cls(int(error))


class ClassicGroupMember:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_callback",
        "sync_callback",
        "is_new",
        "heartbeat_op",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # in the member's order of preference
        self.assignment = assignment
        self.join_callback: Callable[[JoinResult], None] | None = None
        self.sync_callback: Callable[[SyncResult], None] | None = None
        self.is_new = False
        self.heartbeat_op = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    def has_satisfied_heartbeat(self) -> bool:
        """A member in the middle of a rebalance needs no heartbeat; a brand-new one does."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def complete_join(self, result: JoinResult) -> bool:
        callback, self.join_callback = self.join_callback, None
        if callback is None:
            return False
        callback(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        callback, self.sync_callback = self.sync_callback, None
        if callback is None:
            return False
        callback(result)
        return True

    def describe(self, protocol: str | None, with_metadata: bool) -> dict:
        return {
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "member_metadata": self.metadata(protocol) if with_metadata else b"",
            "member_assignment": self.assignment if with_metadata else b"",
        }

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"


NO_ERROR = int(ErrorCode.none)
