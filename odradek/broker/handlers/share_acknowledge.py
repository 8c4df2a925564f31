"""ShareAcknowledge (key 79), v1-v2: ACCEPT (1), RELEASE (2), REJECT (3) or GAP (0) for records a
share-group member acquired, and from v2 RENEW (4, with IsRenewAck: the lock starts again,
KIP-1222); INVALID_RECORD_STATE for records it does not hold (never acquired, already
acknowledged, or its lock timed out). Epoch -1 closes the share session. v2 answers the
group's acquisition lock duration too."""

from odradek.broker.handlers import api
from odradek.broker.share.share_authorization import without_unreadable_topics
from odradek.broker.share.share_partition import invalid_acknowledgements
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(79, 1, 2)
async def handle_share_acknowledge(broker, request):
    manager = broker.share_fetches
    problem = invalid_acknowledgements(request)
    if problem is not None:
        return messages.error_response(
            79, request.api_version, {"error_code": ErrorCode.invalid_request, "error_message": problem}
        )
    body, denied = without_unreadable_topics(broker, request, manager.acknowledge_row)
    answer = await manager.share_acknowledge(body)
    if denied and not answer["error_code"]:
        answer["responses"] = [*answer["responses"], *denied]
    return messages.build_response(79, request.api_version, answer)
