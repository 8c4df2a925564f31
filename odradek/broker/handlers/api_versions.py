"""ApiVersions (key 18), v0-v4 (v4 only lets a supported feature's minimum be 0: KAFKA-17011).

Answers with the registry's version ranges, so nothing is advertised that is not
implemented; those ranges are Kafka 4.2's wherever Odradek has the feature (docs/protocol.md
lists the exceptions and the APIs left out), so clients that infer a release from them
(kafka-python: ListOffsets v11) infer 4.2. A request at a version we do not know gets the v0 layout with
UNSUPPORTED_VERSION and the list, so the client can pick a version and retry (KIP-511).

From v3 the answer also carries Kafka's feature levels for the group protocols that are on:
``group.version`` 1 (KIP-848 consumer groups) and ``share.version`` 1 (KIP-932 share groups),
supported and finalized, as a Kafka 4.2 cluster with those features enabled reports them.
"""

from odradek.broker.handlers import REGISTRY, api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

# APIs of a group protocol (``group.coordinator.rebalance.protocols``): advertised only when it
# is enabled, since clients (librdkafka's group.protocol=consumer) use them when advertised.
PROTOCOL_APIS = {"consumer": (68, 69), "share": (76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92)}


def _disabled_apis(broker) -> set[int]:
    config = getattr(broker, "config", None)
    if config is None:
        return set()
    enabled = config.group_protocols()
    return {key for protocol, keys in PROTOCOL_APIS.items() if protocol not in enabled for key in keys}


def _api_keys(broker=None):
    disabled = _disabled_apis(broker)
    return [
        {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
        for s in sorted(REGISTRY.values())
        if s.api_key not in disabled
    ]


# The feature each group protocol finalizes at level 1 when it is enabled.
PROTOCOL_FEATURES = {"consumer": "group.version", "share": "share.version"}


def _features(broker) -> dict:
    config = getattr(broker, "config", None)
    enabled = config.group_protocols() if config is not None else []
    names = [feature for protocol, feature in PROTOCOL_FEATURES.items() if protocol in enabled]
    return {
        "supported_features": [{"name": n, "min_version": 0, "max_version": 1} for n in names],
        "finalized_features_epoch": 1 if names else -1,
        "finalized_features": [{"name": n, "min_version_level": 1, "max_version_level": 1} for n in names],
    }


@api(18, 0, 4)
def handle_api_versions(broker, request):
    data = {"error_code": 0, "api_keys": _api_keys(broker), "throttle_time": 0}
    if request.api_version >= 3:
        data.update(_features(broker))
    return messages.build_response(18, request.api_version, data)


def unsupported_version_response(correlation_id: int, broker=None) -> bytes:
    body = messages.build_response(
        18, 0, {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(broker), "throttle_time": 0}
    )
    return messages.encode_response(18, 0, correlation_id, body)
