"""AlterConfigs (key 33), v0-v2, and IncrementalAlterConfigs (key 44), v0-v1.

Topic resources (2): AlterConfigs replaces a topic's whole set of overrides;
IncrementalAlterConfigs applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to single
keys (APPEND/SUBTRACT only on list-typed keys such as cleanup.policy, starting from the value
in force; SUBTRACT may leave a list empty, which Kafka 4 accepts: an empty cleanup.policy keeps
everything). Values are validated like CreateTopics' (INVALID_CONFIG naming the key);
``message.format.version`` is accepted as a no-op, as in Kafka 3.x.

Broker resources (4, KIP-226): the name is this broker's id (its own dynamic configs) or empty
(the cluster-wide defaults); only dynamically updatable keys may be set, and a problem with
the resulting configuration answers INVALID_REQUEST, as Kafka's brokers do (KAFKA-13609).
AlterConfigs replaces that level's whole set. Changes take effect at once and persist
(``broker/dynamic_config.py``).

As Kafka: a resource named twice, a key named twice in one resource, or a null value (other
than for DELETE) is refused with INVALID_REQUEST; other resource types (BROKER_LOGGER, ...)
likewise. ``validate_only`` checks without applying.
"""

from collections import Counter

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.handlers import api
from odradek.broker.topic_configs import effective_topic_config
from odradek.config_def import ConfigType
from odradek.protocol import errors, messages
from odradek.storage.log_config import TOPIC_CONFIGS

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _alter(broker, request, incremental: bool):
    body = request.body
    named = Counter((r.resource_type, r.resource_name) for r in body.resources)
    responses = []
    for r in body.resources:
        entry = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        try:
            if named[(r.resource_type, r.resource_name)] > 1:
                raise errors.InvalidRequestError("Each resource must appear at most once.")
            _authorize(broker, request, r.resource_type, r.resource_name)
            ops = _operations(r.configs, incremental)
            if r.resource_type == TOPIC:
                _alter_topic(broker, r.resource_name, ops, incremental, body.validate_only)
            elif r.resource_type == BROKER:
                _alter_broker(broker, r.resource_name, ops, incremental, body.validate_only)
            elif r.resource_type == GROUP and incremental:  # broker/group/group_configs.py
                broker.group_configs.alter(r.resource_name, ops, body.validate_only)
            else:
                raise errors.InvalidRequestError(
                    f"Unknown resource type {r.resource_type}: only topics (2), brokers (4) and, with "
                    "IncrementalAlterConfigs, groups (32) can be altered"
                )
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


def _authorize(broker, request, resource_type: int, name: str) -> None:
    """AlterConfigs on the topic, the cluster (broker resources) or the group, as Kafka."""
    if resource_type == TOPIC and not broker.allowed(request, "AlterConfigs", "Topic", name):
        raise errors.TopicAuthorizationFailedError(f"not authorized to alter the configs of topic {name}")
    if resource_type == BROKER and not broker.allowed(request, "AlterConfigs"):
        raise errors.ClusterAuthorizationFailedError("not authorized to alter broker configs")
    if resource_type == GROUP and not broker.allowed(request, "AlterConfigs", "Group", name):
        raise errors.GroupAuthorizationFailedError(f"not authorized to alter the configs of group {name}")


def _operations(configs, incremental: bool) -> list[tuple[str, int, str | None]]:
    """The request's (name, operation, value) triples, after Kafka's request-level checks."""
    ops = [(c.name, c.config_operation if incremental else SET, c.value) for c in configs]
    names = Counter(name for name, _, _ in ops)
    if any(n > 1 for n in names.values()):
        raise errors.InvalidRequestError("Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if value is None and op != DELETE]
    if nulls:
        raise errors.InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
    unknown = [op for _, op, _ in ops if op not in (SET, DELETE, APPEND, SUBTRACT)]
    if unknown:
        raise errors.InvalidRequestError(f"Unknown operations type {unknown[0]}")
    return ops


def _apply(current: dict, ops, definitions, in_force) -> dict:
    """``current`` with ``ops`` applied. APPEND/SUBTRACT work on list keys only, starting from
    the value in force (``in_force(name)``) when ``current`` has none, as in Kafka."""
    for name, op, value in ops:
        if op == SET:
            current[name] = value
        elif op == DELETE:
            current.pop(name, None)
        else:
            d = definitions.get(name)
            if d is None:
                raise errors.InvalidConfigError(f"Unknown config name: {name}")
            if d.type is not ConfigType.LIST:
                verb = "append" if op == APPEND else "subtract"
                raise errors.InvalidConfigError(
                    f"Config value {verb} is not allowed for config key: {name} (it is not a list)"
                )
            base = current.get(name)
            if base is None:
                base = in_force(name) or ""
            items = [v.strip() for v in base.split(",") if v.strip()]
            given = [v.strip() for v in value.split(",") if v.strip()]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            current[name] = ",".join(items)
    return current


def _alter_topic(broker, name: str, ops, incremental: bool, validate_only: bool) -> None:
    if not name:
        raise errors.InvalidRequestError("Default topic resources are not allowed.")
    topic = broker.image.topics.get(name)
    if topic is None:
        raise errors.UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
    current = dict(topic.configs) if incremental else {}
    new = _apply(current, ops, TOPIC_CONFIGS, lambda key: effective_topic_config({}, broker.config).get(key))
    broker.controller.alter_topic_configs(name, new, validate_only=validate_only)


def _alter_broker(broker, name: str, ops, incremental: bool, validate_only: bool) -> None:
    dynamic = broker.dynamic_config
    entity = dynamic.entity(name)
    current = dynamic.configs_of(entity) if incremental else {}

    def in_force(key: str) -> str:
        value = broker.config.get(key)
        return ",".join(value) if isinstance(value, list) else ("" if value is None else str(value))

    new = _apply(current, ops, BROKER_CONFIGS, in_force)
    dynamic.alter(entity, new, validate_only=validate_only)


@api(33, 0, 2)
def handle_alter_configs(broker, request):
    return messages.build_response(33, request.api_version, _alter(broker, request, incremental=False))


@api(44, 0, 1)
def handle_incremental_alter_configs(broker, request):
    return messages.build_response(44, request.api_version, _alter(broker, request, incremental=True))
