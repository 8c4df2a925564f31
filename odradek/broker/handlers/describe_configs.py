"""DescribeConfigs (key 32), v1-v4.

Topic resources (type 2) list every topic-level config with its value and source
(dynamic topic override, dynamic broker or cluster-default config, static broker config, or
default) and, when asked, synonyms (v1+) and documentation (v3+). Broker resources (type 4)
named with this broker's id list every broker config with its source and ``read_only``
(false for the dynamically updatable keys, KIP-226); an empty name lists the cluster-wide
dynamic defaults only, as Kafka does. Group resources (type 32) list the group configs
(``broker/group/group_configs.py``): GROUP_CONFIG when set on the group, else the default. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION; another
broker's id and other resource types INVALID_REQUEST.
"""

from odradek.broker.config_entries import default_broker_config_entries
from odradek.broker.handlers import api
from odradek.protocol import errors, messages

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


def _entry(c, synonyms: bool, documentation: bool) -> dict:
    return {
        "name": c.name,
        "value": c.value,
        "read_only": c.read_only,
        "config_source": c.source,
        "is_sensitive": c.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in c.synonyms]
        if synonyms
        else [],
        "config_type": c.type,
        "documentation": c.documentation if documentation else None,
    }


def _broker_entries(broker, name: str):
    if not name:
        return default_broker_config_entries(broker.config)
    try:
        node = int(name)
    except ValueError:
        raise errors.InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise errors.InvalidRequestError(
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}"
        )
    return broker.broker_config_entries()


@api(32, 1, 4)
def handle_describe_configs(broker, request):
    body = request.body
    synonyms = body.include_synonyms
    documentation = getattr(body, "include_documentation", False)
    results = []
    for r in body.resources:
        entry = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [],
        }
        try:
            if r.resource_type == TOPIC and not broker.allowed(request, "DescribeConfigs", "Topic", r.resource_name):
                raise errors.TopicAuthorizationFailedError(f"not authorized to describe the configs of {r.resource_name}")
            if r.resource_type == BROKER and not broker.allowed(request, "DescribeConfigs"):
                raise errors.ClusterAuthorizationFailedError("not authorized to describe broker configs")
            if r.resource_type == TOPIC:
                topic = broker.image.topics.get(r.resource_name)
                if topic is None:
                    raise errors.UnknownTopicOrPartitionError(f"topic '{r.resource_name}' does not exist")
                configs = broker.topic_config_entries(topic.configs)
            elif r.resource_type == BROKER:
                configs = _broker_entries(broker, r.resource_name)
            elif r.resource_type == GROUP:
                if not r.resource_name:
                    raise errors.InvalidRequestError("A group resource needs a group id.")
                configs = broker.group_configs.entries(r.resource_name)
            else:
                raise errors.InvalidRequestError(f"resource type {r.resource_type} is not supported")
            keys = set(r.configuration_keys) if r.configuration_keys else None
            entry["configs"] = [
                _entry(c, synonyms, documentation) for c in configs if keys is None or c.name in keys
            ]
        except errors.KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return messages.build_response(32, request.api_version, {"throttle_time": 0, "results": results})
