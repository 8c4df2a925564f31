"""A consumer group of the consumer rebalance protocol (KIP-848): its members, epochs and
assignments, and how a member moves toward its target assignment.

The group has a *group epoch*, bumped whenever what the assignment depends on changes (a
member joins, leaves or changes its subscription; a subscribed topic gains partitions),
and a *target assignment* computed by the assignor for that epoch (its *assignment
epoch*). Each member reconciles on its own, heartbeat by heartbeat, without stopping the
others: it first gives up (revokes) partitions it owns but is no longer assigned, keeping
its epoch (state UNREVOKED_PARTITIONS); once it has confirmed that, it gets the target's
epoch and the new partitions no other member still holds; the ones still held elsewhere
come when they are released (UNRELEASED_PARTITIONS). So a partition is never owned by
two members at once, which is Kafka's CurrentAssignmentBuilder.

State, as ConsumerGroupDescribe and ListGroups show it: Empty (no members), Assigning
(group epoch ahead of the assignment epoch), Reconciling (a member not at the assignment
epoch or not stable), Stable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.broker.group.modern_group_records import ClassicMemberMetadata

Assignment = dict[uuid.UUID, frozenset[int]]

# member states, as stored in ConsumerGroupCurrentMemberAssignment (Kafka's MemberState)
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 1, 2, 3
MEMBER_STATE_NAMES = {STABLE: "stable", UNREVOKED_PARTITIONS: "unrevoked_partitions", UNRELEASED_PARTITIONS: "unreleased_partitions"}

CONSUMER_GROUP_TYPE = "consumer"
EMPTY, ASSIGNING, RECONCILING, STABLE_GROUP, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


def subtract(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        rest = ps - b.get(t, frozenset())
        if rest:
            out[t] = rest
    return out


def intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        both = ps & b.get(t, frozenset())
        if both:
            out[t] = both
    return out


def union(a: Assignment, b: Assignment) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return {t: ps for t, ps in out.items() if ps}


def size(a: Assignment) -> int:
    return sum(len(ps) for ps in a.values())


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # set for a member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in the group
    classic: ClassicMemberMetadata | None = None
    # timers (not persisted); a classic member has join and sync timers instead of a rebalance one
    session_timer: object = None
    rebalance_timer: object = None
    join_timer: object = None
    sync_timer: object = None
    requester: object = None  # who heartbeats (principal and peer, for the authorizer)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def owned(self) -> Assignment:
        """Everything the member may still be fetching: assigned and pending revocation."""
        return union(self.assigned, self.pending_revocation)


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> its target partitions
        self.subscription_metadata: dict[uuid.UUID, tuple[str, int]] = {}  # topic id -> (name, partitions)
        self.resolved_regexes: dict[str, frozenset[str]] = {}  # regex -> topic names
        self.resolved_at: tuple | None = None  # (metadata version, ACL generation) they were resolved at
        self.dead = False

    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return RECONCILING
        return STABLE_GROUP

    def add(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            if self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        return member

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member but ``member_id`` speaks the classic protocol."""
        return all(m.uses_classic_protocol for m in self.members.values() if m.member_id != member_id)

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        for topic_id, partitions in subtract(self.target.get(member.member_id, {}), member.assigned).items():
            for p in partitions:
                if self.owner_of(topic_id, p, member.member_id) is not None:
                    return True
        return False

    def owner_of(self, topic_id: uuid.UUID, partition: int, besides: str) -> str | None:
        """The member other than ``besides`` still holding the partition, if any."""
        for m in self.members.values():
            if m.member_id != besides and partition in m.owned.get(topic_id, ()):
                return m.member_id
        return None

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topics)
            if m.subscribed_regex is not None:
                names.update(self.resolved_regexes.get(m.subscribed_regex, ()))
        return names

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topics)
        if member.subscribed_regex is not None:
            names.update(self.resolved_regexes.get(member.subscribed_regex, ()))
        return names

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (ties by name), else the broker's default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda name: (-votes[name], name))


def reconcile(group: ConsumerGroup, member: ConsumerGroupMember, owned_by_client: Assignment | None) -> bool:
    """Move ``member`` one step toward its target assignment; True when it changed.

    ``owned_by_client`` is what the member's heartbeat said it owns (None: not said).
    """
    before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
    target_epoch = group.assignment_epoch
    target = group.target.get(member.member_id, {})
    if member.state == UNREVOKED_PARTITIONS:
        still_owned = owned_by_client is None or intersect(owned_by_client, member.pending_revocation)
        if still_owned:
            return False
        _compute_next(group, member, member.assigned, target, target_epoch)
    elif member.state == UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        _compute_next(group, member, member.assigned, target, target_epoch)
    return before != (member.member_epoch, member.state, member.assigned, member.pending_revocation)


def _compute_next(group, member, assigned: Assignment, target: Assignment, target_epoch: int) -> None:
    keep = intersect(assigned, target)
    revoke = subtract(assigned, target)
    if revoke:
        member.previous_member_epoch = member.member_epoch
        member.state = UNREVOKED_PARTITIONS
        member.assigned = keep
        member.pending_revocation = revoke
        return
    new: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id, partitions in subtract(target, assigned).items():
        for p in partitions:
            if group.owner_of(topic_id, p, member.member_id) is None:
                new.setdefault(topic_id, set()).add(p)
            else:
                unreleased = True
    if member.member_epoch != target_epoch:
        member.previous_member_epoch = member.member_epoch
    member.member_epoch = target_epoch
    member.assigned = union(keep, {t: frozenset(ps) for t, ps in new.items()})
    member.pending_revocation = {}
    member.state = UNRELEASED_PARTITIONS if unreleased else STABLE
