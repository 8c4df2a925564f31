"""One partition replica on this broker: its log, its role, its high watermark.

The leader appends, tracks the in-sync replicas and advances the high watermark to the
smallest log end offset among them; on a single node the ISR is this broker alone, so
the high watermark follows the log end offset at once. Followers (cluster mode) append
what they fetch from the leader with ``append_as_follower``. Called only from the event
loop.
"""

from __future__ import annotations

import time

from odradek.broker.metrics import TopicCounters
from odradek.cluster.metadata import PartitionState
from odradek.protocol import errors


class Partition:
    def __init__(self, topic: str, index: int, log, state: PartitionState, node_id: int, log_config):
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.log_config = log_config
        self.state = state
        self.follower_leos: dict[int, int] = {}
        self.counters = TopicCounters()  # the replica manager shares one per topic

    # -- role ----------------------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id

    def become_leader(self, state: PartitionState) -> None:
        self.state = state
        self.log.assign_epoch(state.leader_epoch, self.log.log_end_offset)
        self._maybe_advance_high_watermark()

    # -- offsets -------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest undecided transaction below it."""
        return self.log.last_stable_offset

    def _maybe_advance_high_watermark(self) -> bool:
        isr = self.state.isr
        if len(isr) == 1 and isr[0] == self.node_id:  # a single in-sync replica: this one
            return self.log.raise_high_watermark(self.log.log_end_offset)
        leos = [self.log.log_end_offset]
        leos += [self.follower_leos.get(r, 0) for r in self.state.isr if r != self.node_id]
        return self.log.raise_high_watermark(min(leos))

    # -- data ----------------------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(f"broker {self.node_id} is not the leader of {self}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise errors.FencedLeaderEpochError(f"epoch {current_leader_epoch} < {self.leader_epoch}")
            if current_leader_epoch > self.leader_epoch:
                raise errors.UnknownLeaderEpochError(f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def append_as_leader(
        self, records: bytes, required_acks: int, now_ms: int | None = None, origin: str = "client"
    ):
        state = self.state
        if state.leader != self.node_id:
            self.check_leader()  # raises
        if required_acks == -1 and len(state.isr) < self.log_config.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"{self}: {len(state.isr)} in-sync replicas, "
                f"min.insync.replicas={self.log_config.min_insync_replicas}"
            )
        info = self.log.append_as_leader(
            records,
            state.leader_epoch,
            now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
            origin=origin,
        )
        self._maybe_advance_high_watermark()
        return info

    def read(
        self, fetch_offset: int, max_bytes: int, *, isolation_level: int = 0, min_one_message: bool = True
    ):
        upper = self.last_stable_offset if isolation_level == 1 else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, max_offset=upper, min_one_message=min_one_message)

    def aborted_transactions(self, fetch_offset: int, records, max_offset: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of the aborted transactions a read_committed reader
        of ``records`` (a read from ``fetch_offset`` bounded by ``max_offset``) must drop."""
        if records is None:
            return []
        upper = self.log.fetch_upper_bound(max(records.first_offset, fetch_offset), max_offset)
        return [
            (t.producer_id, t.first_offset)
            for t in self.log.collect_aborted_transactions(fetch_offset, upper)
        ]

    def __str__(self) -> str:
        return f"{self.topic}-{self.index}"
