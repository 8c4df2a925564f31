"""InitProducerId (key 22), v0-v5: producer ids for idempotent and transactional producers.

Without a transactional id: a fresh producer id with epoch 0, or — when the producer
sends its current id and epoch (KIP-360, v3+) — the same id with the epoch bumped, which
resets its sequences. With a transactional id the transaction coordinator answers (see
``odradek/broker/txn/transaction_state.py``): the id's producer id with a bumped epoch, fencing older
producers of the same id; an open transaction of theirs is aborted first.
INVALID_TRANSACTION_TIMEOUT past ``transaction.max.timeout.ms``; NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS make the client retry;
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4. An empty transactional id is
INVALID_REQUEST. v5 only allows TRANSACTION_ABORTABLE (KIP-890), which is never answered here.
In a cluster a successful answer waits until the id's ``__transaction_state`` partition has
its writes in the ISR (``request.timeout.ms``; COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR
otherwise), as Kafka's coordinator appends with acks=all.
"""

from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of, fenced_for_version, when_txn_replicated
from odradek.protocol import errors, messages

MAX_EPOCH = 32767


def _answer(version: int, response: dict, failed: int):
    """The answer; ``failed`` (the new epoch did not reach the ISR) replaces its success."""
    if failed:
        response = {**response, "error_code": failed, "producer_id": -1, "producer_epoch": -1}
    return messages.build_response(22, version, response)


def _ms(value) -> int:
    seconds = getattr(value, "total_seconds", None)
    return round(seconds() * 1000) if seconds is not None else int(value)


@api(22, 0, 5)
def handle_init_producer_id(broker, request):
    body = request.body
    version = request.api_version
    response = {"throttle_time": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    producer_id = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if body.transactional_id is not None:
        try:
            result = coordinator_of(broker).init_producer_id(
                body.transactional_id, _ms(body.transaction_timeout), producer_id, epoch
            )
        except errors.KafkaError as exc:
            response["error_code"] = int(exc.code)
        else:
            response.update(
                error_code=fenced_for_version(result.error, version, 4),
                producer_id=result.producer_id,
                producer_epoch=result.producer_epoch,
            )
            if result.error == 0:
                return when_txn_replicated(broker, [body.transactional_id], lambda failed: _answer(version, response, failed))
    elif producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        response.update(producer_id=producer_id, producer_epoch=epoch + 1)
    else:
        response.update(producer_id=broker.producer_ids.next_id(), producer_epoch=0)
    return messages.build_response(22, version, response)
