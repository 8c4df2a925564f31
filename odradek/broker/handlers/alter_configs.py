"""AlterConfigs (key 33), v0-v2, and IncrementalAlterConfigs (key 44), v0-v1.

Topic resources only: AlterConfigs replaces a topic's whole set of overrides;
IncrementalAlterConfigs applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to
single keys (append/subtract only on list-typed keys such as cleanup.policy). Values are
validated like CreateTopics' (INVALID_CONFIG naming the key). ``validate_only`` checks
without applying. Broker resources are refused with INVALID_REQUEST: broker configs are
static, read from server.properties at start.
"""

from odradek.broker.config import effective_topic_config
from odradek.broker.handlers import api
from odradek.protocol import errors, messages

TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_KEYS = {
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


def _alter(broker, request, compute):
    body = request.body
    responses = []
    for r in body.resources:
        entry = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        try:
            if r.resource_type != TOPIC:
                raise errors.InvalidRequestError(
                    "only topic configs can be altered; broker configs come from server.properties"
                )
            topic = broker.image.topics.get(r.resource_name)
            if topic is None:
                raise errors.UnknownTopicOrPartitionError(f"topic '{r.resource_name}' does not exist")
            new = compute(broker, dict(topic.configs), r.configs)
            broker.controller.alter_topic_configs(r.resource_name, new, validate_only=body.validate_only)
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


def _replace(broker, current: dict, configs) -> dict:
    return {c.name: c.value for c in configs if c.value is not None}


def _incremental(broker, current: dict, configs) -> dict:
    for c in configs:
        op = c.config_operation
        if op == SET:
            current[c.name] = c.value
        elif op == DELETE:
            current.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if c.name not in LIST_KEYS:
                raise errors.InvalidConfigError(
                    f"{c.name} is not a list config; APPEND/SUBTRACT do not apply"
                )
            # Like Kafka, a list without an override starts from the value in force.
            in_force = current.get(c.name)
            if in_force is None:
                in_force = effective_topic_config({}, broker.config).get(c.name, "")
            items = [v for v in in_force.split(",") if v]
            given = [v for v in (c.value or "").split(",") if v]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            current[c.name] = ",".join(items)
        else:
            raise errors.InvalidRequestError(f"unknown config operation {op}")
    return current


@api(33, 0, 2)
def handle_alter_configs(broker, request):
    return messages.build_response(33, request.api_version, _alter(broker, request, _replace))


@api(44, 0, 1)
def handle_incremental_alter_configs(broker, request):
    return messages.build_response(44, request.api_version, _alter(broker, request, _incremental))
