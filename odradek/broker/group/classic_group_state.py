"""Group states, their transitions, and what each request gets in each state.

Theory of operation (the classic group protocol, Kafka's ``GroupCoordinator``)
------------------------------------------------------------------------------
A group lives in one ``__consumer_offsets`` partition; the broker leading that partition
is its coordinator. Members find it (FindCoordinator), then run rounds of a two-phase
barrier, each round a *generation*:

1. **Join.** Every member sends JoinGroup with the protocols it supports (for consumers:
   assignors and their subscription bytes). A member without an id gets one; from
   JoinGroup v4 a dynamic member is told MEMBER_ID_REQUIRED and must come back with it
   (it is *pending* until then), so a client that times out cannot leave ghosts behind.
   The first member to join a group without a leader becomes the leader. The join
   phase ends when every known member has rejoined, or when the rebalance timeout (the
   largest ``max.poll.interval.ms`` among members) runs out, whichever comes first;
   dynamic members that did not rejoin are dropped. A group that was Empty waits
   ``group.initial.rebalance.delay.ms`` after the last new member before it closes
   the join phase, so that a fleet starting together lands in one generation.
   Then the generation id goes up, the protocol is chosen by vote (each member votes for
   its most preferred protocol that every member supports; most votes wins), and every
   waiting JoinGroup is answered: the leader's answer carries all members' metadata.
2. **Sync.** The leader computes the assignment and sends it in SyncGroup; the others
   send SyncGroup empty-handed and wait. The coordinator writes the group (generation,
   protocol, leader, members with their subscriptions and assignments) to its partition
   and hands each member its share. The group is Stable.

Between rounds members heartbeat. A member whose session times out (no heartbeat within
``session.timeout.ms``) is removed; a member can leave (LeaveGroup); a member can change
its subscription (a JoinGroup with other metadata); the leader can ask for a new round
(its JoinGroup in Stable: that is how partition-count changes reach the group). Any of
these starts a new round: the group goes to PreparingRebalance, and heartbeats answer
REBALANCE_IN_PROGRESS so that members come back with JoinGroup.

Static members (``group.instance.id``, KIP-345) are known by their instance id: one that
restarts and rejoins with an unknown member id takes over its old identity and, when the
group is Stable and its protocols still fit, gets its old assignment back without a
rebalance. A request with the instance id but an older member id is fenced
(FENCED_INSTANCE_ID).

Offsets are committed per partition by members of the current generation, or by anyone
while the group is Empty (admin tools, consumers that assign partitions themselves).

States
------
``Empty``: no members (a new group, a group whose members all left, or a group that only
stores offsets). ``PreparingRebalance``: the join phase. ``CompletingRebalance``: waiting
for the leader's assignment. ``Stable``: assignment handed out. ``Dead``: the group is
gone (deleted, expired, or its partition moved away); requests that still hold it are
answered with an error that sends the client back to FindCoordinator.
"""

from __future__ import annotations

import enum

from odradek.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# The transition table: a state may be entered only from the states listed.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # a member joins, leaves, dies or changes its metadata; or the leader rejoins
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    # the join phase closed with at least one member
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    # the leader's assignment was written and handed out
    STABLE: frozenset({COMPLETING_REBALANCE}),
    # the join phase closed with no members left
    EMPTY: frozenset({PREPARING_REBALANCE}),
    # deleted, expired, unloaded: from anywhere
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(f"group cannot go from {current} to {target}")


def can_rebalance(state: GroupState) -> bool:
    return state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]


# What a heartbeat from a valid member of the current generation gets, by state. Every
# answer but Empty's also restarts the member's session timer.
HEARTBEAT_ANSWER: dict[GroupState, ErrorCode] = {
    EMPTY: ErrorCode.unknown_member_id,
    PREPARING_REBALANCE: ErrorCode.rebalance_in_progress,
    COMPLETING_REBALANCE: ErrorCode.none,  # members may heartbeat between JoinGroup and SyncGroup
    STABLE: ErrorCode.none,
}

# What a valid SyncGroup does, by state ("wait" = park until the leader's assignment,
# "answer" = the member's current assignment at once).
SYNC_ACTION: dict[GroupState, str | ErrorCode] = {
    EMPTY: ErrorCode.unknown_member_id,
    PREPARING_REBALANCE: ErrorCode.rebalance_in_progress,
    COMPLETING_REBALANCE: "wait",
    STABLE: "answer",
}

# A valid member's OffsetCommit, by state: accepted, or refused with this code.
COMMIT_REFUSAL: dict[GroupState, ErrorCode] = {
    EMPTY: ErrorCode.none,
    PREPARING_REBALANCE: ErrorCode.none,  # still accepted; the heartbeat tells the member to rejoin
    COMPLETING_REBALANCE: ErrorCode.rebalance_in_progress,
    STABLE: ErrorCode.none,
}

# DeleteGroups and OffsetDelete: only groups without members may lose their state.
NON_EMPTY_STATES = frozenset({PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE})
