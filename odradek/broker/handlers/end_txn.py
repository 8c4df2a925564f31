"""EndTxn (key 26), v0-v4: commit or abort a producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and answers; the COMMIT/ABORT markers
then go to every partition of the transaction (on one node this happens before the
answer). A retry of a decision already completed gets NONE; the opposite decision gets
INVALID_TXN_STATE; a decision still being written gets CONCURRENT_TRANSACTIONS.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. v5 (transactions v2, KIP-890:
an epoch bump per transaction) is not advertised.
In a cluster a successful answer waits until the id's ``__transaction_state`` partition has
its writes in the ISR (``request.timeout.ms``; COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR
otherwise), as Kafka's coordinator appends with acks=all.
"""

from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of, fenced_for_version, when_txn_replicated
from odradek.protocol import errors, messages


@api(26, 0, 4)
def handle_end_txn(broker, request):
    body = request.body
    try:
        code = coordinator_of(broker).end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed)
        )
    except errors.KafkaError as exc:
        code = int(exc.code)
    return when_txn_replicated(
        broker,
        [body.transactional_id] if code == 0 else [],
        lambda failed: messages.build_response(
            26,
            request.api_version,
            {"throttle_time": 0, "error_code": failed or fenced_for_version(code, request.api_version, 2)},
        ),
    )
