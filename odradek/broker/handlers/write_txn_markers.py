"""WriteTxnMarkers (key 27), v1-v2: a transaction coordinator's markers for this broker's partitions.

Each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) is written as a
control batch to each partition listed, answered per partition: NOT_LEADER_OR_FOLLOWER
where this broker does not lead, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for
a marker older than the producer's epoch there, TRANSACTION_COORDINATOR_FENCED for a
marker from an older coordinator epoch. A marker on a ``__consumer_offsets`` partition
also applies or drops the transaction's offsets. Our own coordinator writes its markers
through the same code (``odradek/broker/txn/markers.py``). v2's transaction version is
ignored (transactions v2 are not supported). Under an authorizer the sender needs
ClusterAction on the cluster, else every partition is CLUSTER_AUTHORIZATION_FAILED.
"""

from odradek.broker.handlers import api
from odradek.broker.txn.markers import write_markers
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(27, 1, 2)
def handle_write_txn_markers(broker, request):
    answers = []
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
        topics: dict = {}
        for (topic, partition), code in codes.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
        answers.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
            }
        )
    return messages.build_response(27, request.api_version, {"markers": answers})
