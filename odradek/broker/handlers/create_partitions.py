"""CreatePartitions (key 37), v0-v3.

Grows a topic to ``count`` partitions, with optional replica assignments for the new
ones; shrinking, an unchanged count, bad assignments and unknown topics get Kafka's
errors. ``validate_only`` checks without changing anything. Internal topics are refused
(INVALID_REQUEST), so are more new partitions than max.partitions.per.request
(INVALID_PARTITIONS) or than the broker can host (POLICY_VIOLATION). Many new logs are
created in the background, yielding to the event loop; the answer waits for them. In
cluster mode the active controller writes the new assignment to ZooKeeper and answers once its
metadata shows the new partitions' leaders (others answer NOT_CONTROLLER).
"""

from odradek.broker.handlers import api, cluster_admin
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
            if broker.cluster is not None:
                cluster_admin.require_controller(broker)
                await broker.controller.create_partitions_and_wait(
                    t.name, t.count, assignments, validate_only=body.validate_only, timeout_s=cluster_admin.timeout_s(body)
                )
            else:
                broker.controller.create_partitions(t.name, t.count, assignments, validate_only=body.validate_only)
            if not body.validate_only:
                await broker.replica_manager.logs_ready(t.name)
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return messages.build_response(37, request.api_version, {"throttle_time": 0, "results": results})
