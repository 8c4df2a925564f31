"""One partition replica on this broker: its log, its role, its high watermark (Kafka's
cluster/Partition.scala).

The owner of the replica's log: handlers and coordinators go through these methods, never
to the log itself. The leader appends (``append_as_leader``), is told how far each
follower's log reaches (``update_follower_fetch_state``) and advances the high watermark
to the smallest log end offset in the ISR; on a single node the ISR is this broker alone,
so the high watermark follows the log end offset at once. Reads for fetches, offset
lookups by timestamp (ListOffsets), by leader epoch (OffsetForLeaderEpoch) and moving the
log start offset (DeleteRecords) are the leader's too. Followers, ISR changes and
truncation come with replication. Called only from the event loop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from odradek.broker.broker_metrics import TopicCounters
from odradek.cluster.metadata_image import PartitionState
from odradek.protocol import errors

# ListOffsets' special timestamps
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP = -2, -1, -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405: without tiered storage, the log start offset

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica): its log end offset as of its
    last fetch (-1 until it fetches), and the times behind ``replica.lag.time.max.ms``."""

    leo: int = -1
    log_start: int = -1
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_caught_up_ms: int = 0


class Partition:
    def __init__(self, topic: str, index: int, log, state: PartitionState, node_id: int, log_config):
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.log_config = log_config
        self.state = state
        self._followers: dict[int, FollowerState] = {}  # as leader: replica id -> what it fetched
        self.controller_epoch = -1  # of the controller that last set the role
        self.leader_epoch_start_offset = 0  # the log end offset when this leader epoch began
        self.isr_change_in_flight = False  # a ZooKeeper write of a new ISR is pending
        self.counters = TopicCounters()  # the replica manager shares one per topic

    # -- role ----------------------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id

    def become_leader(self, state: PartitionState) -> None:
        """Lead with ``state`` from the local metadata image (single node: this broker
        alone in the ISR)."""
        self.state = state
        self.log.assign_epoch(state.leader_epoch, self.log.log_end_offset)
        self._followers = {r: FollowerState() for r in state.replicas if r != self.node_id}
        self._maybe_advance_high_watermark()

    def make_leader(self, state: PartitionState, controller_epoch: int, now_ms: int) -> bool:
        """Lead with ``state`` (LeaderAndIsr). A new leader epoch starts at the log end
        offset; every follower's log end offset is unknown until it fetches, and those in
        the ISR count as caught up now (Kafka's makeLeader). Returns whether this broker
        was not leading this epoch before."""
        is_new = not self.is_leader or state.leader_epoch != self.state.leader_epoch
        self.state = _copy_state(state)
        self.controller_epoch = controller_epoch
        leo = self.log.log_end_offset
        if is_new:
            self.leader_epoch_start_offset = leo
            latest = self.log.latest_epoch
            if latest is None or state.leader_epoch > latest:
                self.log.assign_epoch(state.leader_epoch, leo)
            self._followers = {
                r: FollowerState(last_caught_up_ms=now_ms if r in state.isr else 0)
                for r in state.replicas
                if r != self.node_id
            }
        else:  # same epoch, new replicas or ISR: keep what is known of the followers
            old = self._followers
            self._followers = {
                r: old.get(r) or FollowerState(last_caught_up_ms=now_ms if r in state.isr else 0)
                for r in state.replicas
                if r != self.node_id
            }
        self.isr_change_in_flight = False
        self._maybe_advance_high_watermark()
        return is_new

    def make_follower(self, state: PartitionState, controller_epoch: int) -> bool:
        """Follow ``state.leader`` (LeaderAndIsr). Returns whether the leader or its epoch
        changed, i.e. whether the fetcher must start over (and truncate)."""
        changed = state.leader != self.state.leader or state.leader_epoch != self.state.leader_epoch
        was_leader = self.is_leader
        self.state = _copy_state(state)
        self.controller_epoch = controller_epoch
        self._followers = {}
        self.isr_change_in_flight = False
        return changed or was_leader

    def update_config(self, log_config) -> None:
        self.log_config = log_config
        self.log.update_config(log_config)

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

    @property
    def log_size(self) -> int:
        """Bytes of the local log, every segment."""
        return self.log.size

    def update_follower_fetch_state(
        self, replica_id: int, log_end_offset: int, now_ms: int | None = None, log_start_offset: int = -1
    ) -> bool:
        """A follower fetched from ``log_end_offset``: everything below is in its log. Returns
        whether the high watermark moved. A replica not assigned to this partition is
        answered NOT_LEADER_OR_FOLLOWER (Kafka's followerReplicaOrThrow)."""
        follower = self._followers.get(replica_id)
        if follower is None:
            raise errors.NotLeaderOrFollowerError(
                f"{self}: fetch from broker {replica_id}, which is not a replica ({self.state.replicas})"
            )
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        leader_leo = self.log.log_end_offset
        if log_end_offset >= leader_leo:
            follower.last_caught_up_ms = now_ms
        elif log_end_offset >= follower.last_fetch_leader_leo >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.leo = log_end_offset
        if log_start_offset >= 0:
            follower.log_start = log_start_offset
        follower.last_fetch_ms = now_ms
        follower.last_fetch_leader_leo = leader_leo
        return self._maybe_advance_high_watermark()

    def follower_states(self) -> dict[int, FollowerState]:
        return self._followers

    def _maybe_advance_high_watermark(self) -> bool:
        """The high watermark follows the smallest log end offset in the ISR (a follower not
        heard from yet holds it where it is); it never moves back."""
        isr = self.state.isr
        if len(isr) == 1 and isr[0] == self.node_id:  # a single in-sync replica: this one
            return self.log.raise_high_watermark(self.log.log_end_offset)
        low = self.log.log_end_offset
        followers = self._followers
        for r in isr:
            if r != self.node_id:
                follower = followers.get(r)
                leo = follower.leo if follower is not None else -1
                if leo < low:
                    low = leo
        if low < 0:
            return False
        return self.log.raise_high_watermark(low)

    # -- the ISR (leader) ----------------------------------------------------------------

    def isr_to_shrink(self, now_ms: int, max_lag_ms: int) -> list[int] | None:
        """The ISR without the followers not caught up for ``max_lag_ms`` (Kafka's
        maybeShrinkIsr), or None when nothing changes."""
        if not self.is_leader or self.isr_change_in_flight:
            return None
        out = [
            r
            for r in self.state.isr
            if r != self.node_id
            and now_ms - self._followers.get(r, FollowerState()).last_caught_up_ms > max_lag_ms
        ]
        if not out:
            return None
        return [r for r in self.state.isr if r not in out]

    def isr_to_expand(self, replica_id: int) -> list[int] | None:
        """The ISR with ``replica_id`` added when it has caught up: its log reaches the high
        watermark and the start of this leader epoch (Kafka's maybeExpandIsr); else None."""
        if not self.is_leader or self.isr_change_in_flight or replica_id in self.state.isr:
            return None
        follower = self._followers.get(replica_id)
        if follower is None or replica_id not in self.state.replicas:
            return None
        if follower.leo >= self.high_watermark and follower.leo >= self.leader_epoch_start_offset:
            return [*self.state.isr, replica_id]
        return None

    def apply_isr(self, isr: list[int], zk_version: int) -> bool:
        """Take ``isr`` as written (the state znode now at ``zk_version``); returns whether
        the high watermark moved (a smaller ISR can let it advance)."""
        self.state.isr = list(isr)
        self.state.partition_epoch = zk_version
        return self._maybe_advance_high_watermark()

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset over the leader and the followers in the ISR, as
        their fetches last said (DeleteRecords answers it; -1 while one has not said)."""
        low = self.log.log_start_offset
        for r in self.state.isr:
            if r != self.node_id:
                follower = self._followers.get(r)
                start = follower.log_start if follower is not None else -1
                if start < low:
                    low = start
        return low

    @property
    def under_min_isr(self) -> bool:
        return len(self.state.isr) < self.log_config.min_insync_replicas

    # -- the follower ----------------------------------------------------------------------

    def append_as_follower(self, records) -> int:
        """Write the leader's batches as they are; returns the new log end offset."""
        self.log.append_as_follower(records)
        return self.log.log_end_offset

    def update_follower_high_watermark(self, leader_hw: int, leader_log_start: int) -> None:
        """What the leader's fetch answer said: the high watermark (never past this log's end)
        and the log start offset (records below it were deleted on the leader)."""
        log_ = self.log
        hw = min(leader_hw, log_.log_end_offset)
        if hw > log_.high_watermark:
            log_.high_watermark = hw
        if leader_log_start > log_.log_start_offset and leader_log_start <= log_.high_watermark:
            log_.maybe_increment_log_start_offset(leader_log_start)

    def truncate_to(self, offset: int) -> bool:
        """Drop every record at or past ``offset`` (diverged from the leader)."""
        return self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    # -- data ----------------------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(f"broker {self.node_id} is not the leader of {self}")
        self._check_epoch(current_leader_epoch)

    def _check_epoch(self, current_leader_epoch: int) -> None:
        """The epoch a client or follower knows must be this replica's (-1: not checked)."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise errors.FencedLeaderEpochError(f"epoch {current_leader_epoch} < {self.leader_epoch}")
            if current_leader_epoch > self.leader_epoch:
                raise errors.UnknownLeaderEpochError(f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def check_replica(self, current_leader_epoch: int = -1) -> None:
        """A consumer may read a follower (KIP-392) as long as it knows the same epoch."""
        if self.state.leader < 0:
            raise errors.NotLeaderOrFollowerError(f"broker {self.node_id} does not replicate {self} now")
        self._check_epoch(current_leader_epoch)

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

    def read_up_to(self, fetch_offset: int, max_bytes: int, max_offset: int):
        """Batches from ``fetch_offset`` holding no offset at or past ``max_offset`` (at most
        the log end), at least one whole batch: how a coordinator reads its partition back
        when it loads (up to the log end it saw when it began)."""
        return self.log.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=True)

    # -- offsets by timestamp and by epoch (ListOffsets, OffsetForLeaderEpoch) ----------

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int = 0) -> tuple[int, int]:
        """``(timestamp, offset)`` answering ListOffsets: the log start offset for
        EARLIEST_TIMESTAMP, the high watermark (read_committed: the last stable offset) for
        LATEST_TIMESTAMP, the record with the largest timestamp for MAX_TIMESTAMP (KIP-734),
        else the first offset whose timestamp is at least ``timestamp``; ``(-1, -1)`` when
        there is none below what consumers may read (Kafka never answers past it)."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, self.log_start_offset
        fetchable = self.last_stable_offset if isolation_level == 1 else self.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return -1, fetchable
        if timestamp == MAX_TIMESTAMP:
            found = self.log.max_timestamp_and_offset()
        else:
            found = self.log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= fetchable:
            return -1, -1
        offset, ts = found
        return ts, offset

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch: the start offset of the first
        epoch above ``leader_epoch``, or the log end offset for the current epoch; (-1, -1)
        for an epoch below the oldest known (the leader-epoch cache's rules)."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """A Fetch v12+ names the epoch of the last batch its sender has (KIP-595): when this
        log ends that epoch before ``fetch_offset``, or knows only smaller epochs, the
        sender's log diverged from this one, and the answer is ``(largest epoch <= the
        sender's, its end offset here)`` for the sender to truncate to; None when the logs
        agree. OFFSET_OUT_OF_RANGE when this log knows no epoch at or below it."""
        epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end_offset < 0:
            raise errors.OffsetOutOfRangeError(
                f"{self}: cannot tell where leader epoch {last_fetched_epoch} of the fetch ends"
            )
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    # -- DeleteRecords -------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (-1: the high watermark); records below
        it are no longer readable and whole segments below it go. Returns the new log start
        offset (the low watermark). OFFSET_OUT_OF_RANGE above the high watermark;
        KAFKA_STORAGE_ERROR when the leader-epoch checkpoint cannot be written."""
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            raise errors.OffsetOutOfRangeError(f"offset {offset} is outside [0, {hw}] of {self}")
        try:
            self.log.maybe_increment_log_start_offset(offset)
        except OSError as exc:
            raise self.log.disk_error(exc) from exc
        return self.log_start_offset

    def __str__(self) -> str:
        return f"{self.topic}-{self.index}"


def _copy_state(state: PartitionState) -> PartitionState:
    return PartitionState(
        state.leader, state.leader_epoch, list(state.replicas), list(state.isr), state.partition_epoch
    )
