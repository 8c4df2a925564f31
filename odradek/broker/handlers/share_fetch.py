"""ShareFetch (key 78), v1: a share-group member acquires records and acknowledges earlier
ones, through its share session with this leader (``broker/share/share_fetch_manager.py``).
Errors: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH (top level);
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID per partition; INVALID_RECORD_STATE as a
partition's acknowledge error for records the member has not acquired."""

from odradek.broker.handlers import api
from odradek.protocol import messages


@api(78, 1, 1)
async def handle_share_fetch(broker, request):
    return messages.build_response(78, 1, await broker.share_fetches.share_fetch(request.body))
