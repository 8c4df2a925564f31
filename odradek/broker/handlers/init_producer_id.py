"""InitProducerId (key 22), v0-v4, for idempotent producers.

A request without a transactional id gets a fresh producer id with epoch 0. A producer
that sends its current id and epoch (KIP-360, v3+) gets the same id with the epoch
bumped, which resets its sequences. Transactional ids belong to the transaction
coordinator; until it exists they are refused with INVALID_REQUEST (and transactions
are not advertised).
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

MAX_EPOCH = 32767


@api(22, 0, 4)
def handle_init_producer_id(broker, request):
    body = request.body
    response = {"throttle_time": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if body.transactional_id is not None:
        response["error_code"] = ErrorCode.invalid_request
    else:
        producer_id = getattr(body, "producer_id", -1)
        epoch = getattr(body, "producer_epoch", -1)
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            response.update(producer_id=producer_id, producer_epoch=epoch + 1)
        else:
            response.update(producer_id=broker.producer_ids.next_id(), producer_epoch=0)
    return messages.build_response(22, request.api_version, response)
