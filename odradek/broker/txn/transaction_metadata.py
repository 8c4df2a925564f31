"""One transactional id's state, as the coordinator keeps it and as it is stored.

``TxnMetadata`` is immutable: a change is a new value (``transit``), written to
``__transaction_state`` first and installed in the coordinator's cache only once the
write succeeded, so a failed write leaves the cached state as it was (Kafka's
``prepareTransitionTo`` / ``completeTransitionTo`` without the pending slot: appends here
finish before the coordinator does anything else).
"""

from __future__ import annotations

import dataclasses

from odradek.broker.txn import transaction_state_schema as schema
from odradek.broker.txn.transaction_state import BY_ID, EMPTY, TxnState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE

TopicPartition = tuple[str, int]


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: a producer at 32766 needs a new producer id."""
    return epoch >= MAX_EPOCH - 1


@dataclasses.dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID  # the id before the last rotation (KIP-360 retries)
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (memory only)

    def transit(self, state: TxnState, now_ms: int, **changes) -> TxnMetadata:
        """The metadata after moving to ``state``; raises IllegalTxnTransition if not allowed."""
        check_transition(self.state, state)
        return dataclasses.replace(self, state=state, update_ms=now_ms, **changes)

    def to_value(self) -> schema.TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            by_topic.setdefault(topic, []).append(partition)
        return schema.TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state.id,
            tuple((topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items())),
            self.update_ms,
            self.start_ms,
            self.previous_producer_id,
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: schema.TxnLogValue) -> TxnMetadata:
        state = BY_ID.get(value.status)
        if state is None:
            from odradek.protocol import errors

            raise errors.CorruptMessageError(
                f"unknown transaction status {value.status} for {transactional_id!r}"
            )
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            state,
            frozenset((topic, p) for topic, ids in value.partitions for p in ids),
            value.start_ms,
            value.last_update_ms,
            value.previous_producer_id,
        )

    def topics(self) -> list[dict]:
        """The partitions grouped by topic, as Describe/AddPartitions answers list them."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
