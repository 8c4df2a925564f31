"""DescribeTransactions (key 65), v0: the state of transactional ids this broker coordinates.

Per id: its state (Empty, Ongoing, PrepareCommit, ...), timeout, start time (-1 when no
transaction has started), producer id and epoch, and the partitions of the open
transaction. NOT_COORDINATOR for ids coordinated elsewhere (the admin client asks each
coordinator), COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
"""

from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _missing(tid: str, code: int) -> dict:
    return {
        "transactional_id": tid,
        "error_code": code,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


@api(65, 0, 0)
def handle_describe_transactions(broker, request):
    states = []
    for tid in request.body.transactional_ids:
        if not broker.allowed(request, "Describe", "TransactionalId", tid):
            states.append(_missing(tid, int(ErrorCode.transactional_id_authorization_failed)))
            continue
        try:
            state = coordinator_of(broker).describe(tid)
            if broker.authorizer is not None:  # as Kafka: only the topics it may Describe
                state["topics"] = [
                    t for t in state["topics"] if broker.allowed(request, "Describe", "Topic", t["topic"])
                ]
            states.append(state)
        except errors.KafkaError as exc:
            states.append(_missing(tid, int(exc.code)))
    return messages.build_response(
        65, request.api_version, {"throttle_time": 0, "transaction_states": states}
    )
