"""A fetch parked until enough bytes arrive or its wait expires (Kafka's DelayedFetch).

Watched in the broker's fetch purgatory under its partitions; each append to one of them
asks it again (``ReplicaManager.read`` with ``sizes_only``) whether ``min_bytes`` are there
or a partition failed. With ``min_bytes`` of 1, the default of consumers and followers, the
offsets alone tell when nothing is there yet, and the log is not read."""

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
        if self.min_bytes <= 1 and self._nothing_new():
            return False
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

    def _nothing_new(self) -> bool:
        """Whether every partition is led here at the epoch the fetch knows and its fetch
        offset is exactly where its reads end (the log end for a follower, else the high
        watermark or, read_committed, the last stable offset): then the read would find no
        byte and no error. Anything else is left to the read, which decides exactly."""
        partitions = self.replicas.partitions
        follower = self.replica_id >= 0
        committed = self.isolation_level == 1
        for topic, index, offset, _, epoch in self.plan:
            p = partitions.get((topic, index))
            if p is None or not p.is_leader or (epoch >= 0 and epoch != p.leader_epoch):
                return False
            end = p.log_end_offset if follower else p.last_stable_offset if committed else p.high_watermark
            if offset != end or offset < p.log_start_offset:
                return False
        return True

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass
