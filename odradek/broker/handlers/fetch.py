"""Fetch (key 1), v4-v12, for consumers.

Reads each partition from the fetch offset, bounded by the high watermark (or, for
read_committed, the last stable offset, with the aborted transactions overlapping the
data listed so that clients drop their records), ``partition_max_bytes`` and the response's
``max_bytes``; the first partition with data may exceed the limits by one batch so
that a consumer can always make progress (KIP-74). With fewer than ``min_bytes``
available and ``max_wait_ms`` > 0, the request parks in the fetch purgatory until an
append brings enough bytes or the wait expires; ``max_wait_ms`` = 0 answers at once. The
reading is ``ReplicaManager.read``; the waiting a ``DelayedFetch`` in the fetch purgatory.
Fetch sessions (KIP-227) are not kept: every answer carries session id 0, which tells
the client to send full requests. Follower fetches (replica_id >= 0) belong to
replication. The response is packed by hand around the record bytes.
"""

from odradek.broker.delayed_fetch import DelayedFetch
from odradek.broker.handlers import RawResponse, api
from odradek.protocol.errors import ErrorCode
from odradek.protocol.hot_responses import fetch_response


def _plan(broker, body):
    """The partitions of the request as (topic, index, fetch offset, max bytes, epoch); the
    epoch is -1 (unchecked) before v9, which does not carry it."""
    return [
        (t.topic, p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
        for t in body.topics
        for p in t.partitions
    ]


@api(1, 4, 12)
def handle_fetch(broker, request):
    """Answers at once when it can (the usual case under load, and no task to schedule);
    otherwise returns a coroutine that waits in the fetch purgatory."""
    body = request.body
    if body.replica_id >= 0:
        return RawResponse(fetch_response(request.api_version, [], error_code=ErrorCode.unknown_server_error))
    if request.api_version >= 7 and body.session_id != 0:
        return RawResponse(
            fetch_response(request.api_version, [], error_code=ErrorCode.fetch_session_id_not_found)
        )
    plan = _plan(broker, body)
    isolation = body.isolation_level
    max_bytes = body.max_bytes
    topics, total, had_error = broker.replica_manager.read(
        plan, max_bytes, isolation, file_slices=broker.zero_copy
    )
    max_wait_ms = int(body.max_wait.total_seconds() * 1000)
    if total < body.min_bytes and max_wait_ms > 0 and not had_error and plan:
        return _wait_and_read(broker, request, plan, max_bytes, isolation, body.min_bytes, max_wait_ms)
    return RawResponse(fetch_response(request.api_version, topics), has_files=broker.zero_copy)


async def _wait_and_read(
    broker, request, plan, max_bytes: int, isolation: int, min_bytes: int, max_wait_ms: int
):
    replicas = broker.replica_manager
    op = DelayedFetch(replicas, plan, max_bytes, isolation, min_bytes, max_wait_ms)
    if not broker.fetch_purgatory.try_complete_else_watch(op, [(t, i) for t, i, *_ in plan]):
        await op
    topics, _, _ = replicas.read(plan, max_bytes, isolation, file_slices=broker.zero_copy)
    return RawResponse(fetch_response(request.api_version, topics), has_files=broker.zero_copy)
