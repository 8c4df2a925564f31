"""ShareAcknowledge (key 79), v1: ACCEPT (1), RELEASE (2), REJECT (3) or GAP (0) for records a
share-group member acquired; INVALID_RECORD_STATE for records it does not hold (never
acquired, already acknowledged, or its lock timed out). Epoch -1 closes the share session."""

from odradek.broker.handlers import api
from odradek.broker.share.share_authorization import without_unreadable_topics
from odradek.protocol import messages


@api(79, 1, 1)
async def handle_share_acknowledge(broker, request):
    manager = broker.share_fetches
    body, denied = without_unreadable_topics(broker, request, manager.acknowledge_row)
    answer = await manager.share_acknowledge(body)
    if denied and not answer["error_code"]:
        answer["responses"] = [*answer["responses"], *denied]
    return messages.build_response(79, 1, answer)
