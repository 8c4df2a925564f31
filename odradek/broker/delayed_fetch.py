"""A fetch parked until enough bytes arrive or its wait expires (Kafka's DelayedFetch).

Watched in the broker's fetch purgatory under its partitions; each append to one of them
asks it again (``ReplicaManager.read`` with ``sizes_only``) whether ``min_bytes`` are there
or a partition failed."""

from __future__ import annotations

from odradek.broker.purgatory import DelayedOperation


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        replicas,
        plan,
        max_bytes: int,
        isolation_level: int,
        min_bytes: int,
        max_wait_ms: int,
        replica_id: int = -1,
        follower_reads: bool = False,
    ):
        super().__init__(max_wait_ms)
        self.replicas = replicas  # the ReplicaManager
        self.plan = plan
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level
        self.min_bytes = min_bytes
        self.replica_id = replica_id  # a follower reads up to the log end
        self.follower_reads = follower_reads  # a consumer may read a follower (v11+)

    def try_complete(self) -> bool:
        _, total, had_error = self.replicas.read(
            self.plan,
            self.max_bytes,
            self.isolation_level,
            sizes_only=True,
            replica_id=self.replica_id,
            follower_reads=self.follower_reads,
        )
        if total >= self.min_bytes or had_error:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass
