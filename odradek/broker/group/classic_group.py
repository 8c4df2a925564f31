"""One classic group's state: members, generation, protocol (its committed offsets are the
offset manager's, ``offset_manager.py``).

Plain data plus the bookkeeping that must stay consistent (who is waiting, which
protocols every member supports, the static-member index). Decisions — when to
rebalance, when a phase ends — are the classic group manager's; this class only answers
questions and applies changes. Called only from the event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group_member import ClassicGroupMember, JoinResult, SyncResult
from odradek.broker.group.classic_group_state import (
    COMMIT_REFUSAL,
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    GroupState,
    can_rebalance,
    check_transition,
)
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = EMPTY):
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}  # in join order: the leader falls back to the first
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # got an id with MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.last_new_member_ms = 0.0
        self.subscribed_topics: set[str] | None = None
        # delayed operations owned by the classic group manager
        self.join_op = None
        self.sync_op = None
        self.pending_heartbeats: dict[str, object] = {}  # pending member id -> its expiry

    # -- questions -------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID unless the member is current."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                raise errors.UnknownMemberIdError(
                    f"no static member {group_instance_id!r} in {self.group_id}"
                )
            if current != member_id:
                raise errors.FencedInstanceIdError(
                    f"instance {group_instance_id!r} of {self.group_id} is now member {current}, not {member_id}"
                )
        if member_id not in self.members:
            raise errors.UnknownMemberIdError(f"{member_id!r} is not a member of {self.group_id}")

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Can a member with these protocols join? Empty groups take any non-empty offer."""
        if self.is_(EMPTY):
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        n = len(self.members)
        return any(self.supported_protocols[name] == n for name in names)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n and n}

    def select_protocol(self) -> str:
        """Every member votes for its preferred candidate; most votes wins (ties: earliest member's)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[member.vote(candidates)] += 1
        best = max(votes.values())
        for member in self.members.values():  # deterministic tie-break
            choice = member.vote(candidates)
            if votes[choice] == best:
                return choice
        raise AssertionError("unreachable")

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the group speaks the consumer protocol."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(schema.subscribed_topics(member.metadata(self.protocol_name)))
        except (errors.CorruptMessageError, UnicodeDecodeError):
            log.warning(
                "group %s: cannot parse the consumer protocol of %s", self.group_id, self.protocol_name
            )
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The error code of an OffsetCommit from this member (NONE: accepted)."""
        if self.is_(DEAD):
            return int(ErrorCode.coordinator_not_available)
        if generation_id < 0 and self.is_(EMPTY):
            return int(ErrorCode.none)  # admin tools and consumers without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            try:
                self.validate_member(member_id, group_instance_id)
            except errors.KafkaError as exc:
                return int(exc.code)
            if generation_id != self.generation_id:
                return int(ErrorCode.illegal_generation)
        elif not self.is_(EMPTY):
            return int(ErrorCode.unknown_member_id)  # only members commit to a group with members
        return int(COMMIT_REFUSAL[self.state])

    def validate_transactional_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The error code of a TxnOffsetCommit from this member (NONE: accepted). Kafka's
        checks: the member and generation when given (v3+), but no rebalance check — a
        transaction may commit while its group rebalances."""
        if self.is_(DEAD):
            return int(ErrorCode.coordinator_not_available)
        if self.is_static_member_fenced(group_instance_id, member_id):
            return int(ErrorCode.fenced_instance_id)
        if member_id and not self.has(member_id):
            return int(ErrorCode.unknown_member_id)
        if generation_id >= 0 and generation_id != self.generation_id:
            return int(ErrorCode.illegal_generation)
        return int(ErrorCode.none)

    def current_member_metadata(self) -> tuple:
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # -- changes ---------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        check_transition(self.state, state)
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    @staticmethod
    def new_member_id(client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: ClassicGroupMember, join_callback=None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id!r} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_callback = join_callback
        if join_callback is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_callback,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_callback is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif join_callback is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.join_callback = join_callback

    def complete_join(self, member: ClassicGroupMember, result: JoinResult) -> bool:
        if member.is_awaiting_join:
            self.num_awaiting_join -= 1
        return member.complete_join(result)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicGroupMember:
        """A static member came back with a new id: fence the old id, keep everything else."""
        old = self.members.pop(old_member_id)
        if old.is_awaiting_join:
            self.num_awaiting_join -= 1
        old.complete_join(JoinResult.failed(errors.ErrorCode.fenced_instance_id, old_member_id))
        old.complete_sync(SyncResult.failed(errors.ErrorCode.fenced_instance_id))
        member = ClassicGroupMember(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                log.info(
                    "group %s: leader %s did not rejoin in time; %s leads now",
                    self.group_id,
                    self.leader_id,
                    member.member_id,
                )
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    # -- persistence -----------------------------------------------------------------------

    def to_record(self, assignment: dict[str, bytes]) -> schema.GroupMetadataValue:
        return schema.GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp if self.state_timestamp is not None else -1,
            members=tuple(
                schema.MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name),
                    assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: schema.GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """Rebuild a group from its last record: Stable with its members, or Empty."""
        group = cls(group_id, now_ms)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        if value.members and value.protocol:
            for rec in value.members:
                member = ClassicGroupMember(
                    rec.member_id,
                    rec.group_instance_id,
                    rec.client_id,
                    rec.client_host,
                    rec.rebalance_timeout,
                    rec.session_timeout,
                    value.protocol_type,
                    [(value.protocol, rec.subscription)],
                    rec.assignment,
                )
                group.add(member)
            group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
            group.state = group.previous_state = GroupState.STABLE
        else:
            group.protocol_name = None
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state}, generation={self.generation_id}, members={len(self.members)})"
