"""ListConfigResources (key 74), v0-v1 (KIP-1000, KIP-1142): the resources that have configs.

v1 lists, for the resource types asked (all it supports when none is given), each resource's
name: every topic (2) and every broker (4, by id); client-metrics subscriptions (16) are
listed too, and there are none, since Odradek takes no client telemetry (KIP-714). v0 (then
named ListClientMetricsResources) lists client-metrics subscriptions only. A type that is not
supported — broker loggers (8) and groups (32), whose configs Odradek does not keep — fails the
whole request with UNSUPPORTED_VERSION, as Kafka answers for types it does not support.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

TOPIC, BROKER, CLIENT_METRICS = 2, 4, 16
SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, CLIENT_METRICS)}


def _resources(broker, resource_type: int) -> list[dict]:
    if resource_type == TOPIC:
        names = sorted(broker.image.topics)
    elif resource_type == BROKER:
        names = [str(node) for node in sorted(broker.image.brokers)]
    else:
        names = []  # no client-metrics subscriptions exist
    return [{"resource_name": name, "resource_type": resource_type} for name in names]


@api(74, 0, 1)
def handle_list_config_resources(broker, request):
    supported = SUPPORTED[request.api_version]
    asked = [int(t) for t in getattr(request.body, "resource_types", ())] or list(supported)
    response = {"throttle_time": 0, "error_code": 0, "config_resources": []}
    if any(t not in supported for t in asked):
        response["error_code"] = ErrorCode.unsupported_version
    else:
        for resource_type in dict.fromkeys(asked):
            response["config_resources"].extend(_resources(broker, resource_type))
    return messages.build_response(74, request.api_version, response)
