"""ShareAcknowledge (key 79), v1: ACCEPT (1), RELEASE (2), REJECT (3) or GAP (0) for records a
share-group member acquired; INVALID_RECORD_STATE for records it does not hold (never
acquired, already acknowledged, or its lock timed out). Epoch -1 closes the share session."""

from odradek.broker.handlers import api
from odradek.protocol import messages


@api(79, 1, 1)
def handle_share_acknowledge(broker, request):
    return messages.build_response(79, 1, broker.share_fetches.share_acknowledge(request.body))
