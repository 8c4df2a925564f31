"""AlterClientQuotas (key 49), v0-v1 (KIP-546): set or remove quota keys of user / client-id
entities (a null name is the ``<default>`` entity) and of ip entities (KIP-612). Keys
(``broker/client_quotas.py``): producer_byte_rate, consumer_byte_rate and request_percentage
for users and client ids, connection_creation_rate for ips. Refused with INVALID_REQUEST, as
Kafka refuses them: unknown keys, a key of the other kind of entity, an ip entity combined
with another type or naming no IP address, negative values, an entity naming a type twice.
``validate_only`` checks without changing. Needs AlterConfigs on the cluster.
"""

import ipaddress

from odradek.broker.client_quotas import DEFAULT, ENTITY_TYPES, IP_ENTITY, IP_KEYS, SUPPORTED_KEYS
from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


def _problem(entry) -> str | None:
    types = [e.entity_type for e in entry.entity]
    if not types or len(set(types)) != len(types):
        return "an entity names each of user and client-id at most once, and at least one"
    if IP_ENTITY in types:
        if len(types) > 1:
            return "an ip entity cannot be combined with user or client-id"
        name = entry.entity[0].entity_name
        if name is not None and not _is_ip(name):
            return f"{name!r} is not an IP address"
        keys = IP_KEYS
    else:
        for t in types:
            if t not in ENTITY_TYPES:
                return f"entity type {t!r} is not supported (user, client-id, ip)"
        keys = SUPPORTED_KEYS
    for op in entry.ops:
        if op.key not in keys:
            kind = "ip" if keys is IP_KEYS else "user and client-id"
            return f"quota key {op.key!r} is not supported for {kind} entities ({', '.join(keys)})"
        if not op.remove and op.value < 0:
            return f"{op.key} must not be negative"
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@api(49, 0, 1)
def handle_alter_client_quotas(broker, request):
    body = request.body
    allowed = broker.allowed(request, "AlterConfigs")
    results = []
    altered = False
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
                altered = True
        results.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity],
            }
        )
    if altered and broker.cluster is not None:  # answer once the other brokers can read them
        return _when_written(broker, request, results)
    return _response(request, results)


async def _when_written(broker, request, results):
    if not await broker.store.written():
        for r in results:
            if r["error_code"] == ErrorCode.none:
                r["error_code"] = ErrorCode.unknown_server_error
                r["error_message"] = "writing the quota to ZooKeeper failed; see the broker's log"
    return _response(request, results)


def _response(request, results):
    return messages.build_response(49, request.api_version, {"throttle_time": 0, "entries": results})
