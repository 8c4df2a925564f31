"""Writing transaction markers: one COMMIT or ABORT control batch per partition.

Used by the transaction coordinator for the partitions of a transaction it decided, and
by the WriteTxnMarkers handler for markers another coordinator sends (Kafka's
``ReplicaManager.appendRecords`` with ``AppendOrigin.Coordinator`` plus the group
coordinator's ``onTransactionCompleted``). A marker is a leader append of origin
"coordinator": the log checks the producer epoch (INVALID_PRODUCER_EPOCH) and the
coordinator epoch (TRANSACTION_COORDINATOR_FENCED), closes the producer's transaction in
that partition, and indexes it when aborted. A marker written to a ``__consumer_offsets``
partition also makes the group coordinator apply or drop the transaction's offsets. In a
cluster a marker is written with acks=all (NOT_ENOUGH_REPLICAS below ``min.insync.replicas``)
and its writer waits for the partition's ISR before counting it done
(``unreplicated``): a transaction is completed only once its markers survive their leaders.

Called from the event loop only.
"""

from __future__ import annotations

import logging
import time

from odradek.broker.group.partitioning import OFFSETS_TOPIC
from odradek.protocol import control_records, errors
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)

# Errors after which the coordinator tries the partition again later; anything else
# (the topic was deleted, the producer is fenced there already) ends its attempts.
RETRIABLE = frozenset(
    int(c)
    for c in (
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_server_error,
        ErrorCode.corrupt_message,
    )
)


def write_markers(
    broker,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    partitions,
) -> dict[tuple[str, int], int]:
    """Write the marker to each ``(topic, partition)``; return each one's error code."""
    control = control_records.COMMIT if committed else control_records.ABORT
    now = int(time.time() * 1000)
    batch = control_records.build_control_batch(
        control,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=now,
    )
    replicas = broker.replica_manager
    acks = -1 if replicas.replicated else 1
    results: dict[tuple[str, int], int] = {}
    for topic, index in partitions:
        try:
            replicas.append(topic, index, batch, acks, now, origin="coordinator")
        except errors.KafkaError as exc:
            results[(topic, index)] = int(exc.code)
            log.info(
                "%s marker of producer %d (epoch %d) to %s-%d failed: %s",
                "COMMIT" if committed else "ABORT",
                producer_id,
                producer_epoch,
                topic,
                index,
                exc,
            )
            continue
        except Exception:  # a storage failure must not lose the whole marker round
            log.exception("writing a transaction marker to %s-%d failed", topic, index)
            results[(topic, index)] = int(ErrorCode.unknown_server_error)
            continue
        results[(topic, index)] = NONE
        if topic == OFFSETS_TOPIC:
            groups = getattr(broker, "group_coordinator", None)
            if groups is not None:
                groups.complete_transaction(index, producer_id, committed)
    return results


def unreplicated(broker, partitions) -> list[tuple]:
    """``((topic, partition), Partition, log end offset)`` of those of ``partitions`` led here
    whose ISR does not have everything written to them yet (never on a single node)."""
    replicas = broker.replica_manager
    if not replicas.replicated:
        return []
    out = []
    for tp in partitions:
        p = replicas.partitions.get(tp)
        if p is not None and p.is_leader and p.high_watermark < p.log_end_offset:
            out.append((tp, p, p.log_end_offset))
    return out
