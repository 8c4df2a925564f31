"""CreateTopics (key 19), v2-v7.

Per topic: name rules, partitions and replication factor (-1 = broker defaults), or an
explicit replica assignment, and validated topic configs; ``validate_only`` checks
without creating. v5+ answers with the topic's partitions, replication factor and full
config list; v7 with its topic id. A name given twice fails both entries with
INVALID_REQUEST.
"""

from collections import Counter

from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


@api(19, 2, 7)
def handle_create_topics(broker, request):
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for t in body.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None, "topic_id": None, "configs": []}
        try:
            if counts[t.name] > 1:
                raise errors.InvalidRequestError(f"topic '{t.name}' appears more than once in the request")
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            configs = {c.name: c.value for c in t.configs}
            created = broker.controller.create_topic(
                t.name,
                t.num_partitions,
                t.replication_factor,
                assignments or None,
                configs,
                validate_only=body.validate_only,
            )
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
