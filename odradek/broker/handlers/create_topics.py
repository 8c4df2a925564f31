"""CreateTopics (key 19), v2-v7.

Per topic: name rules, partitions and replication factor (-1 = broker defaults), or an
explicit replica assignment, and validated topic configs; ``validate_only`` checks
without creating. v5+ answers with the topic's partitions, replication factor and full
config list; v7 with its topic id. A name given twice fails both entries with
INVALID_REQUEST.

Limits (see cluster.controller): a topic asking for more than max.partitions.per.request
partitions is INVALID_PARTITIONS; topics that each fit but together ask for more are all
POLICY_VIOLATION, as in Kafka; more than the broker can host is POLICY_VIOLATION. Logs of
a large topic are created in the background, yielding to the event loop; the answer waits
for them.

In cluster mode only the active controller creates topics (others answer NOT_CONTROLLER, and
clients ask the controller Metadata names): it writes them to ZooKeeper and answers once its
metadata shows their leaders, or REQUEST_TIMED_OUT after the request's timeout.
"""

from collections import Counter

from odradek.broker.handlers import api, cluster_admin
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _requested(broker, t) -> int:
    if t.assignments:
        return len(t.assignments)
    return broker.default_partitions if t.num_partitions == -1 else max(t.num_partitions, 0)


@api(19, 2, 7)
async def handle_create_topics(broker, request):
    body = request.body
    counts = Counter(t.name for t in body.topics)
    limit = broker.controller.max_partitions_per_request
    fitting = [_requested(broker, t) for t in body.topics]
    total = sum(n for n in fitting if n <= limit)
    results = []
    for t in body.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None, "topic_id": None, "configs": []}
        try:
            if counts[t.name] > 1:
                raise errors.InvalidRequestError(f"topic '{t.name}' appears more than once in the request")
            if total > limit and _requested(broker, t) <= limit:
                raise errors.PolicyViolationError(
                    f"Excessively large number of partitions per request: {total} asked for, "
                    f"max.partitions.per.request is {limit}; create the topics in several requests"
                )
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            configs = {c.name: c.value for c in t.configs}
            args = (t.name, t.num_partitions, t.replication_factor, assignments or None, configs)
            if broker.cluster is not None:
                cluster_admin.require_controller(broker)
                created = await broker.controller.create_topic_and_wait(
                    *args, validate_only=body.validate_only, timeout_s=cluster_admin.timeout_s(body)
                )
            else:
                created = broker.controller.create_topic(*args, validate_only=body.validate_only)
            if created is not None:
                await broker.replica_manager.logs_ready(t.name)
            info = created or broker.image.topics.get(t.name)
            if created is not None:
                entry["topic_id"] = created.topic_id
                entry["num_partitions"] = len(created.partitions)
                entry["replication_factor"] = len(created.partitions[0].replicas)
            else:
                entry["num_partitions"] = (
                    t.num_partitions if t.num_partitions > 0 else broker.default_partitions
                )
                entry["replication_factor"] = (
                    t.replication_factor if t.replication_factor > 0 else broker.default_replication_factor
                )
            entry["configs"] = [
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": c.source,
                    "is_sensitive": c.is_sensitive,
                }
                for c in broker.topic_config_entries(info.configs if info else configs)
            ]
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
            if exc.code == ErrorCode.unknown_server_error:
                entry["error_message"] = str(exc)
        results.append(entry)
    return messages.build_response(19, request.api_version, {"throttle_time": 0, "topics": results})
