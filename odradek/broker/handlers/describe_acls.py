"""DescribeAcls (key 29), v1-v3 (KIP-140): the ACLs one filter matches, grouped by resource.

Without an authorizer: SECURITY_DISABLED. Needs Describe on the cluster. Filter codes: ANY
matches everything, pattern type MATCH every ACL that applies to the named resource.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.acl_model import AclFilter, binding_to_wire, filter_from_wire
from odradek.protocol.errors import ErrorCode


@api(29, 1, 3)
def handle_describe_acls(broker, request):
    if broker.authorizer is None:
        return _response(request, ErrorCode.security_disabled, "No Authorizer is configured", [])
    if not broker.allowed(request, "Describe"):
        return _response(request, ErrorCode.cluster_authorization_failed, None, [])
    acl_filter = filter_from_wire(request.body)
    if not isinstance(acl_filter, AclFilter):
        return _response(request, ErrorCode.invalid_request, acl_filter, [])
    grouped: dict[tuple, list] = {}
    for b in broker.authorizer.acls():
        if acl_filter.matches(b):
            wire = binding_to_wire(b)
            key = (wire["resource_type"], wire["resource_name"], wire["pattern_type"])
            grouped.setdefault(key, []).append(
                {k: wire[k] for k in ("principal", "host", "operation", "permission_type")}
            )
    resources = [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in sorted(grouped.items())
    ]
    return _response(request, ErrorCode.none, None, resources)


def _response(request, code, message, resources):
    return messages.build_response(
        29,
        request.api_version,
        {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources},
    )
