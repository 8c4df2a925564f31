"""ShareFetch (key 78), v1: a share-group member acquires records and acknowledges earlier
ones, through its share session with this leader (``broker/share/share_fetch_manager.py``).
Errors: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH (top level);
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID per partition; INVALID_RECORD_STATE as a
partition's acknowledge error for records the member has not acquired. Under an authorizer
every partition of the session, not only those the request names, needs Read on its topic:
the others are TOPIC_AUTHORIZATION_FAILED (an ACL removed mid-session stops them)."""

from odradek.broker.handlers import api
from odradek.broker.share.share_authorization import readable_topic_ids, without_unreadable_topics
from odradek.protocol import messages


@api(78, 1, 1)
async def handle_share_fetch(broker, request):
    manager = broker.share_fetches
    body, denied = without_unreadable_topics(broker, request, manager.fetch_row)
    answer = await manager.share_fetch(body, readable_topic_ids(broker, request))
    if denied and not answer["error_code"]:
        answered = {(r["topic_id"], p["partition_index"]) for r in answer["responses"] for p in r["partitions"]}
        for topic in denied:  # those already in the session are answered by the manager
            parts = [p for p in topic["partitions"] if (topic["topic_id"], p["partition_index"]) not in answered]
            if parts:
                answer["responses"].append({**topic, "partitions": parts})
    return messages.build_response(78, 1, answer)
