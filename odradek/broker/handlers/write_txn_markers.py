"""WriteTxnMarkers (key 27), v1-v2: a transaction coordinator's markers for this broker's partitions.

Each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) is written as a
control batch to each partition listed, answered per partition: NOT_LEADER_OR_FOLLOWER
where this broker does not lead, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for
a marker older than the producer's epoch there, TRANSACTION_COORDINATOR_FENCED for a
marker from an older coordinator epoch. A marker on a ``__consumer_offsets`` partition
also applies or drops the transaction's offsets. Our own coordinator writes its markers
through the same code (``odradek/broker/txn/markers.py``). v2's transaction version is
ignored (transactions v2 are not supported). Under an authorizer the sender needs
ClusterAction on the cluster, else every partition is CLUSTER_AUTHORIZATION_FAILED. In a
cluster the answer waits until the markers are in their partitions' ISRs
(``request.timeout.ms``; else NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or
NOT_LEADER_OR_FOLLOWER for that partition, which the coordinator retries), as Kafka's does.
"""

from odradek.broker.delayed_produce import wait_for_isr
from odradek.broker.handlers import api
from odradek.broker.txn.markers import unreplicated, write_markers
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(27, 1, 2)
def handle_write_txn_markers(broker, request):
    written = []  # (marker, {(topic, partition): code})
    cluster_action = broker.allowed(request, "ClusterAction")
    for marker in request.body.markers:
        wanted = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        if not cluster_action:
            codes = dict.fromkeys(wanted, int(ErrorCode.cluster_authorization_failed))
        else:
            codes = write_markers(
                broker,
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                bool(marker.transaction_result),
                wanted,
            )
        written.append((marker, codes))
    waits = unreplicated(broker, {tp for _, codes in written for tp, code in codes.items() if code == 0})
    if not waits:
        return _response(request.api_version, written, {})
    return _when_replicated(broker, request.api_version, written, waits)


async def _when_replicated(broker, version: int, written, waits):
    failed: dict = {}
    await wait_for_isr(
        broker.produce_purgatory,
        broker.config.get("request.timeout.ms"),
        [(p, required, lambda code, tp=tp: failed.__setitem__(tp, int(code))) for tp, p, required in waits],
    )
    return _response(version, written, failed)


def _response(version: int, written, failed: dict):
    """The answer; ``failed`` holds the partitions whose marker did not reach the ISR."""
    answers = []
    for marker, codes in written:
        topics: dict = {}
        for tp, code in codes.items():
            topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": code or failed.get(tp, 0)})
        answers.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
            }
        )
    return messages.build_response(27, version, {"markers": answers})
