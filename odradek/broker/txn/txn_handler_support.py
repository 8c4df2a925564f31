"""Small helpers shared by the transaction handlers (``odradek/broker/handlers/*txn*``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode

_FENCED = int(ErrorCode.producer_fenced)


def coordinator_of(broker):
    """The broker's TransactionCoordinator; COORDINATOR_NOT_AVAILABLE while there is none."""
    coordinator = getattr(broker, "transaction_coordinator", None)
    if coordinator is None:
        raise errors.CoordinatorNotAvailableError("the transaction coordinator is not running")
    return coordinator


def fenced_for_version(code: int, version: int, knows_fenced_from: int) -> int:
    """PRODUCER_FENCED is answered only to versions that know it; older ones get
    INVALID_PRODUCER_EPOCH, which they treat the same way (Kafka's handlers do this)."""
    if code == _FENCED and version < knows_fenced_from:
        return int(ErrorCode.invalid_producer_epoch)
    return code


def when_txn_replicated(broker, transactional_ids: Iterable[str | None], answer: Callable[[int], Any]):
    """``answer(0)`` once the ``__transaction_state`` partitions of ``transactional_ids``
    have in their ISR everything written to them, else ``answer(coordinator error)`` (Kafka
    waits ``request.timeout.ms`` for them): ``InternalTopic.when_replicated``."""
    coordinator = getattr(broker, "transaction_coordinator", None)
    if coordinator is None or not broker.replica_manager.replicated:
        return answer(0)  # a single node: nothing to wait for
    return coordinator.topic.when_replicated(
        [coordinator.partition_of(t) for t in transactional_ids if t],
        broker.config.get("request.timeout.ms"),
        answer,
    )
