"""ShareFetch (key 78), v1-v2: a share-group member acquires records and acknowledges earlier
ones, through its share session with this leader (``broker/share/share_fetch_manager.py``).
v2 (Kafka 4.2; franz-go needs it): ShareAcquireMode 1 (record-limit) acquires exactly
MaxRecords records, not whole batches (KIP-1206); IsRenewAck with RENEW (4) acknowledgements
restarts the locks of records held and acquires nothing (KIP-1222; INVALID_RECORD_STATE when
the group's share.renew.acknowledge.enable is false). An unknown acquire mode, or RENEW
without IsRenewAck or before v2, is INVALID_REQUEST.
Errors: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH (top level);
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID per partition; INVALID_RECORD_STATE as a
partition's acknowledge error for records the member has not acquired. Under an authorizer
every partition of the session, not only those the request names, needs Read on its topic:
the others are TOPIC_AUTHORIZATION_FAILED (an ACL removed mid-session stops them)."""

from odradek.broker.handlers import api
from odradek.broker.share.share_authorization import readable_topic_ids, without_unreadable_topics
from odradek.broker.share.share_partition import invalid_acknowledgements
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(78, 1, 2)
async def handle_share_fetch(broker, request):
    manager = broker.share_fetches
    version = request.api_version
    problem = invalid_acknowledgements(request)
    if problem is None and getattr(request.body, "share_acquire_mode", 0) not in (0, 1):
        problem = f"unknown ShareAcquireMode {request.body.share_acquire_mode} (0: batch-optimized, 1: record-limit)"
    if problem is not None:
        return messages.error_response(78, version, {"error_code": ErrorCode.invalid_request, "error_message": problem})
    body, denied = without_unreadable_topics(broker, request, manager.fetch_row)
    answer = await manager.share_fetch(body, readable_topic_ids(broker, request))
    if denied and not answer["error_code"]:
        answered = {(r["topic_id"], p["partition_index"]) for r in answer["responses"] for p in r["partitions"]}
        for topic in denied:  # those already in the session are answered by the manager
            parts = [p for p in topic["partitions"] if (topic["topic_id"], p["partition_index"]) not in answered]
            if parts:
                answer["responses"].append({**topic, "partitions": parts})
    return messages.build_response(78, version, answer)
