"""ListTransactions (key 66), v0-v2: the transactional ids this broker coordinates.

Filters: states (unknown names come back in ``unknown_state_filters`` and match nothing),
producer ids, v1 a minimum running time (KIP-994: only transactions started at least
that long ago), v2 a regular expression the whole id must match (KIP-1152).
COORDINATOR_LOAD_IN_PROGRESS while a partition loads (with what is known so far).
"""

from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of
from odradek.protocol import errors, messages


@api(66, 0, 2)
def handle_list_transactions(broker, request):
    body = request.body
    response = {"throttle_time": 0, "error_code": 0, "unknown_state_filters": [], "transaction_states": []}
    try:
        error, unknown, listed = coordinator_of(broker).list_transactions(
            list(body.state_filters),
            [int(p) for p in body.producer_id_filters],
            int(getattr(body, "duration_filter", -1)),
            getattr(body, "transactional_id_pattern", None),
        )
    except errors.KafkaError as exc:
        response["error_code"] = int(exc.code)
    else:
        if broker.authorizer is not None:  # as Kafka: only the ids it may Describe
            listed = [s for s in listed if broker.allowed(request, "Describe", "TransactionalId", s["transactional_id"])]
        response.update(error_code=error, unknown_state_filters=unknown, transaction_states=listed)
    return messages.build_response(66, request.api_version, response)
