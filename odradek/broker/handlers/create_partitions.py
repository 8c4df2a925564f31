"""CreatePartitions (key 37), v0-v3.

Grows a topic to ``count`` partitions, with optional replica assignments for the new
ones; shrinking, an unchanged count, bad assignments and unknown topics get Kafka's
errors. ``validate_only`` checks without changing anything. Internal topics are refused
(INVALID_REQUEST), so are more new partitions than max.partitions.per.request
(INVALID_PARTITIONS) or than the broker can host (POLICY_VIOLATION). Many new logs are
created in the background, yielding to the event loop; the answer waits for them.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(37, 0, 3)
async def handle_create_partitions(broker, request):
    body = request.body
    results = []
    for t in body.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if not broker.allowed(request, "Alter", "Topic", t.name):
                raise errors.TopicAuthorizationFailedError(f"not authorized to alter {t.name}")
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            broker.controller.create_partitions(
                t.name, t.count, assignments, validate_only=body.validate_only
            )
            if not body.validate_only:
                await broker.replica_manager.logs_ready(t.name)
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return messages.build_response(37, request.api_version, {"throttle_time": 0, "results": results})
