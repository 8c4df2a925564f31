"""AddOffsetsToTxn (key 25), v0-v4: a group's offsets join a producer's transaction.

The group's ``__consumer_offsets`` partition is added to the transaction like any other
partition (created first if the topic does not exist yet), so the transaction's marker
reaches it; the offsets themselves come with TxnOffsetCommit, sent to the group
coordinator. Errors as for AddPartitionsToTxn; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
before v2. An empty group id is INVALID_GROUP_ID.
In a cluster a successful answer waits until the id's ``__transaction_state`` partition has
its writes in the ISR (``request.timeout.ms``; COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR
otherwise), as Kafka's coordinator appends with acks=all.
"""

from odradek.broker.group.group_handler_support import coordinator_of as group_coordinator_of
from odradek.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of, fenced_for_version, when_txn_replicated
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(25, 0, 4)
def handle_add_offsets_to_txn(broker, request):
    body = request.body
    version = request.api_version
    if not body.group_id:
        code = int(ErrorCode.invalid_group_id)
    else:
        try:
            count = group_coordinator_of(broker).topic.ensure_created()
            tp = (OFFSETS_TOPIC, partition_for(body.group_id, count))
            code = coordinator_of(broker).add_partitions(
                body.transactional_id, body.producer_id, body.producer_epoch, [tp]
            )
        except errors.KafkaError as exc:
            code = int(exc.code)
    return when_txn_replicated(
        broker,
        [body.transactional_id] if code == 0 else [],
        lambda failed: messages.build_response(
            25, version, {"throttle_time": 0, "error_code": failed or fenced_for_version(code, version, 2)}
        ),
    )
