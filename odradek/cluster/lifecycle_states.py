"""The lifecycle states of a partition and of a replica, as the controller tracks them.

Plain enums at the bottom of the controller: the ``ControllerContext`` stores one per
partition and replica, and ``state_machines`` (which reads and updates that context) lists
the legal moves between them.
"""

from __future__ import annotations

from enum import Enum


class PartitionLifecycle(Enum):
    """Kafka's PartitionState (named apart from the metadata image's PartitionState)."""

    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    def __str__(self) -> str:
        return self.value


class ReplicaLifecycle(Enum):
    """Kafka's ReplicaState."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value
