"""Value types for a partition as the controller sees it (Kafka's LeaderAndIsr, ReplicaAssignment).

``TopicPartition`` names a partition. ``ReplicaAssignment`` is its replica list, with the
replicas being added and removed while a reassignment runs (KIP-455). ``LeaderAndIsr`` is
what ``/brokers/topics/<t>/partitions/<p>/state`` holds: leader, leader epoch, ISR and
recovery state, plus the znode's version, which conditional writes check (Kafka calls it
the partition epoch). Every ``new_*`` method returns a copy with the leader epoch bumped, as
Kafka does for each leader or ISR change the controller makes.

Immutable and free of I/O: zk_data encodes them, election and the state machines compute
with them, the controller stores them in its context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import NamedTuple

NO_LEADER = -1
NO_EPOCH = -1
# The leader epoch the controller sends for partitions of a topic queued for deletion.
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionAndReplica(NamedTuple):
    """One replica of one partition: the unit the replica state machine tracks."""

    topic_partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[{self.topic_partition},{self.replica}]"


class LeaderRecoveryState(IntEnum):
    """KIP-704: a leader chosen by unclean election is RECOVERING until its ISR grows again."""

    RECOVERED = 0
    RECOVERING = 1


def _without(items: tuple[int, ...], removed: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(i for i in items if i not in removed)


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas in preference order; during a reassignment ``replicas`` holds
    the union of the old and new sets, and ``adding``/``removing`` say which is which."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "replicas", tuple(self.replicas))
        object.__setattr__(self, "adding_replicas", tuple(self.adding_replicas))
        object.__setattr__(self, "removing_replicas", tuple(self.removing_replicas))

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment started."""
        return _without(self.replicas, self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes."""
        return _without(self.replicas, self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: list[int] | tuple[int, ...]) -> ReplicaAssignment:
        """The assignment while moving from the origin replicas to ``target`` (target first)."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, _without(full, origin), _without(full, tuple(target)))

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        drop = (replica,)
        return ReplicaAssignment(
            _without(self.replicas, drop),
            _without(self.adding_replicas, drop),
            _without(self.removing_replicas, drop),
        )


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    # The version of the partition's state znode this was read from or written as.
    zk_version: int = INITIAL_ZK_VERSION

    def __post_init__(self):
        object.__setattr__(self, "isr", tuple(self.isr))
        object.__setattr__(self, "leader_recovery_state", LeaderRecoveryState(self.leader_recovery_state))

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader(self, leader: int) -> LeaderAndIsr:
        """A new leader, same ISR, next epoch (reassignment and preferred election)."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1)

    def new_leader_and_isr(self, leader: int, isr: list[int] | tuple[int, ...]) -> LeaderAndIsr:
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: list[int] | tuple[int, ...]) -> LeaderAndIsr:
        """After an unclean election: the leader may lack acknowledged records (KIP-704)."""
        return replace(
            self,
            leader=leader,
            leader_epoch=self.leader_epoch + 1,
            isr=tuple(isr),
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        )

    def new_epoch(self) -> LeaderAndIsr:
        return replace(self, leader_epoch=self.leader_epoch + 1)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return replace(self, zk_version=zk_version)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition's state znode: leader and ISR, and the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int
