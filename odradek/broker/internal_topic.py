"""An internal compacted topic that a coordinator keeps its state in.

``__consumer_offsets`` (the group coordinator's) and ``__transaction_state`` (the
transaction coordinator's) are both created on first use, keyed by a hash of a group or
transactional id, led partition by partition, and read back from the log in chunks when
a broker becomes their leader. This module owns that common part; what the records mean
and the topic's configs stay with each subclass.

Writes are Kafka's coordinator writes: ``append_batch`` appends as the partition's leader
with acks=all in a cluster (NOT_ENOUGH_REPLICAS below ``min.insync.replicas``), and
``when_replicated`` holds a coordinator's answer until the partition's ISR has everything
written to it so far (the DelayedProduce of an acks=all produce, in the produce purgatory),
so that what a client was told survives the coordinator's failure. Waiting for the whole log
end rather than one request's own records is what Kafka's coordinator runtime does too: an
answer never shows state that a new coordinator might not load. On a single node (and with
one in-sync replica) nothing waits.

Every method is called from the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from odradek.broker.delayed_produce import DelayedProduce, wait_for_isr
from odradek.broker.group.partitioning import partition_for
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_batches

log = logging.getLogger(__name__)

# Errors of an append to a coordinator's topic, as the coordinator's clients should see them
# (Kafka's mapping, in both coordinators): the partition is not ready here, or not here.
COORDINATOR_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


class InternalTopic:
    name: str  # the topic's name
    replication_factor_config: str  # the broker setting for its replication factor

    def __init__(self, broker, *, num_partitions: int, replication_factor: int, segment_bytes: int):
        self.broker = broker
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        """The configs the topic is created with."""
        raise NotImplementedError

    def partition_count(self) -> int | None:
        """The topic's partition count, or None before it exists."""
        return self.partition_count_of(self.name)

    def partition_count_of(self, topic: str) -> int | None:
        """Any topic's partition count in this broker's metadata, or None."""
        info = self.broker.image.topics.get(topic)
        return len(info.partitions) if info is not None else None

    def partition_for(self, key: str) -> int | None:
        count = self.partition_count()
        return None if count is None else partition_for(key, count)

    def ensure_created(self) -> int:
        """Create the topic if it does not exist yet; return its partition count."""
        count = self.partition_count()
        if count is not None:
            return count
        live = len(self.broker.image.brokers)
        capped = getattr(self.broker.config, "internal_topic_replication_factor", None)
        if capped is not None:  # logs a warning when it has to cap
            rf = capped(self.replication_factor_config, live)
        else:
            rf = max(1, min(self.replication_factor, live))
        t0 = time.perf_counter()
        try:
            self.broker.controller.create_topic(
                self.name, self.num_partitions, rf, None, self.topic_configs(rf), internal=True
            )
        except errors.TopicAlreadyExistsError:
            pass
        log.info(
            "created %s with %d partitions, replication factor %d, in %.0f ms",
            self.name,
            self.num_partitions,
            rf,
            (time.perf_counter() - t0) * 1000,
        )
        return self.partition_count() or self.num_partitions

    def append_batch(self, partition: int, batch: bytes, now_ms: int, origin: str = "client") -> None:
        """Append ``batch`` to ``partition`` as its leader; raises KafkaError. In a cluster
        with acks=all, as Kafka's coordinators write: refused with NOT_ENOUGH_REPLICAS while
        the ISR is smaller than ``min.insync.replicas``."""
        replicas = self.broker.replica_manager
        replicas.append(self.name, partition, batch, -1 if replicas.replicated else 1, now_ms, origin=origin)

    def when_replicated(self, partitions: Iterable[int | None], timeout_ms: int, answer: Callable[[int], Any]):
        """``answer(0)`` once the ISR of each of ``partitions`` (None entries are skipped)
        holds everything written to it so far; ``answer(error)`` with the coordinator's
        error (COORDINATOR_APPEND_ERRORS: COORDINATOR_NOT_AVAILABLE after ``timeout_ms`` or
        when the ISR shrank below ``min.insync.replicas``, NOT_COORDINATOR when leadership
        moved) when it does not. Returns the answer itself when nothing has to wait (always
        on a single node), else a coroutine returning it: a handler returns either."""
        waiting = self._unreplicated(partitions)
        if not waiting:
            return answer(0)
        return self._answer_when_replicated(waiting, timeout_ms, answer)

    def _unreplicated(self, partitions: Iterable[int | None]) -> list[tuple]:
        """``(partition, log end offset)`` of the ones this broker leads whose high watermark
        is below their log end (only ever in a cluster)."""
        replicas = self.broker.replica_manager
        if not replicas.replicated:
            return []
        waiting = []
        for index in set(partitions):
            p = None if index is None else replicas.partitions.get((self.name, index))
            if p is not None and p.is_leader and p.high_watermark < p.log_end_offset:
                waiting.append((p, p.log_end_offset))
        return waiting

    async def _answer_when_replicated(self, waiting: list[tuple], timeout_ms: int, answer: Callable[[int], Any]):
        failed: list[int] = []
        await wait_for_isr(
            self.broker.produce_purgatory, timeout_ms, [(p, required, failed.append) for p, required in waiting]
        )
        return answer(self._coordinator_error(failed))

    def settle_when_replicated(self, partition: int, timeout_ms: int, settle: Callable[[int], None]) -> None:
        """Call ``settle`` exactly once, with what ``when_replicated`` would answer for
        ``partition``: at once when nothing has to wait (always on a single node), else
        from the produce purgatory, whether or not a client still waits. A coordinator keeps
        state it wrote pending until then, so that no one reads what may yet be lost."""
        waiting = self._unreplicated([partition])
        if not waiting:
            settle(0)
            return
        (p, required), = waiting
        op = _SettleWhenReplicated(timeout_ms, p, required, lambda failed: settle(self._coordinator_error(failed)))
        self.broker.produce_purgatory.try_complete_else_watch(op, [(p.topic, p.index)])

    def _coordinator_error(self, failed: list[int]) -> int:
        """0 without a failure, else the coordinator's error for the first one (logged)."""
        if not failed:
            return 0
        code = ErrorCode(int(failed[0]))
        mapped = COORDINATOR_APPEND_ERRORS.get(code, code)
        log.warning("%s: coordinator records did not reach the ISR (%s); answering %s", self.name, code.name, mapped.name)
        return int(mapped)

    def leader(self, partition: int) -> int | None:
        info = self.broker.image.topics.get(self.name)
        if info is None or partition not in info.partitions:
            return None
        leader = info.partitions[partition].leader
        return leader if leader is not None and leader >= 0 else None

    def led_partitions(self) -> dict[int, int]:
        """The partitions whose leader replica is on this broker, with their leader epochs."""
        return {
            index: p.leader_epoch
            for (topic, index), p in self.broker.replica_manager.partitions.items()
            if topic == self.name and p.is_leader
        }

    def read_chunks(self, partition: int, chunk_bytes: int) -> Iterator[tuple[int, list]]:
        """The partition's log from its start to its log end, one chunk at a time, as
        ``(offset, batches)``: the chunk's first offset and the batches that reach it (a
        batch's records before ``offset`` were in the chunk before). Raises KafkaError.

        To the log end, not the high watermark, as Kafka's coordinators load: a new leader's
        high watermark lags until its followers fetch, and the records above it were
        acknowledged by the old leader (a commit missed here would be lost)."""
        p = self.broker.replica_manager.get_partition(self.name, partition)
        offset = p.log_start_offset
        end = p.log_end_offset
        while offset < end:
            result = p.read_up_to(offset, chunk_bytes, end)
            if result.records is None or result.records.size == 0:
                break
            batches = []
            next_offset = offset
            for batch in iter_batches(result.records.read()):
                next_offset = max(next_offset, batch.next_offset)
                if batch.next_offset > offset:
                    batches.append(batch)
            if next_offset <= offset:
                raise errors.CorruptMessageError(f"{self.name}-{partition}: no progress reading at {offset}")
            yield offset, batches
            offset = next_offset


class _SettleWhenReplicated(DelayedProduce):
    """One partition's wait for the ISR that ends in ``settle(failures)`` (an empty list when
    the records made it), expired or not."""

    def __init__(self, timeout_ms: int, partition, required: int, settle: Callable[[list[int]], None]):
        self.failed: list[int] = []
        super().__init__(timeout_ms, [(partition, required, self.failed.append)])
        self.settle = settle

    def on_complete(self) -> None:
        if not self.expired:  # an expired one settles in on_expiration, with its timeout
            self.settle(self.failed)

    def on_expiration(self) -> None:
        super().on_expiration()
        self.settle(self.failed)
