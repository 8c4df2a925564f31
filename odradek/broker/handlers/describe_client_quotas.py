"""DescribeClientQuotas (key 48), v0-v1 (KIP-546): the quotas of the entities the filter
matches (user / client-id entities and ip entities). Components: EXACT (0) a name, or null for the default entity; DEFAULT (1) the
default entity; SPECIFIED (2) any named entity. ``strict`` leaves out entities with
components the filter does not name. Needs DescribeConfigs on the cluster.
"""

from odradek.broker.client_quotas import DEFAULT, ENTITY_TYPES, IP_ENTITY
from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2


def _matches(entity: dict, components, strict: bool) -> bool:
    named = {c.entity_type for c in components}
    if strict and {t for t, v in entity.items() if v is not None} != named:
        return False
    for c in components:
        value = entity.get(c.entity_type)
        if value is None:
            return False
        if c.match_type == EXACT and value != (DEFAULT if c.match is None else c.match):
            return False
        if c.match_type == DEFAULT_MATCH and value != DEFAULT:
            return False
        if c.match_type == SPECIFIED and value == DEFAULT:
            return False
    return True


@api(48, 0, 1)
def handle_describe_client_quotas(broker, request):
    body = request.body
    if not broker.allowed(request, "DescribeConfigs"):
        return _response(request, ErrorCode.cluster_authorization_failed, "Not authorized to describe quotas", None)
    for c in body.components:
        if c.entity_type not in (*ENTITY_TYPES, IP_ENTITY) or c.match_type not in (EXACT, DEFAULT_MATCH, SPECIFIED):
            return _response(request, ErrorCode.invalid_request, f"unsupported filter component {c.entity_type}/{c.match_type}", None)
    entries = []
    for entity, quotas in broker.client_quotas.entries():
        if not _matches(entity, body.components, body.strict):
            continue
        entries.append(
            {
                "entity": [
                    {"entity_type": t, "entity_name": None if v == DEFAULT else v}
                    for t, v in entity.items()
                    if v is not None
                ],
                "values": [{"key": k, "value": v} for k, v in sorted(quotas.items())],
            }
        )
    return _response(request, ErrorCode.none, None, entries)


def _response(request, code, message, entries):
    return messages.build_response(
        48, request.api_version, {"throttle_time": 0, "error_code": code, "error_message": message, "entries": entries}
    )
