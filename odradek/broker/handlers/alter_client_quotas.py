"""AlterClientQuotas (key 49), v0-v1 (KIP-546): set or remove quota keys of user / client-id
entities (a null name is the ``<default>`` entity). Keys: producer_byte_rate and
consumer_byte_rate (``broker/client_quotas.py``); request_percentage, ip entities and unknown
keys are refused with INVALID_REQUEST, and so are negative rates and an entity naming a type
twice. ``validate_only`` checks without changing. Needs AlterConfigs on the cluster.
"""

from odradek.broker.client_quotas import DEFAULT, ENTITY_TYPES, SUPPORTED_KEYS
from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


def _problem(entry) -> str | None:
    types = [e.entity_type for e in entry.entity]
    if not types or len(set(types)) != len(types):
        return "an entity names each of user and client-id at most once, and at least one"
    for t in types:
        if t not in ENTITY_TYPES:
            return f"entity type {t!r} is not supported (user, client-id)"
    for op in entry.ops:
        if op.key not in SUPPORTED_KEYS:
            return f"quota key {op.key!r} is not supported ({', '.join(SUPPORTED_KEYS)})"
        if not op.remove and op.value < 0:
            return f"{op.key} must not be negative"
    return None


@api(49, 0, 1)
def handle_alter_client_quotas(broker, request):
    body = request.body
    allowed = broker.allowed(request, "AlterConfigs")
    results = []
    for entry in body.entries:
        code, message = ErrorCode.none, None
        if not allowed:
            code = ErrorCode.cluster_authorization_failed
        else:
            message = _problem(entry)
            if message:
                code = ErrorCode.invalid_request
            elif not body.validate_only:
                entity = {e.entity_type: (DEFAULT if e.entity_name is None else e.entity_name) for e in entry.entity}
                broker.client_quotas.alter(entity, {op.key: None if op.remove else op.value for op in entry.ops})
        results.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity],
            }
        )
    return messages.build_response(49, request.api_version, {"throttle_time": 0, "entries": results})
