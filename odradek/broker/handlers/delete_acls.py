"""DeleteAcls (key 31), v1-v3 (KIP-140): delete the ACLs each filter matches and list them.

Without an authorizer: SECURITY_DISABLED. Needs Alter on the cluster.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.acl_model import AclFilter, binding_to_wire, filter_from_wire
from odradek.protocol.errors import ErrorCode


@api(31, 1, 3)
def handle_delete_acls(broker, request):
    filters = request.body.filters
    if broker.authorizer is None:
        return _response(request, [_failed(ErrorCode.security_disabled, "No Authorizer is configured")] * len(filters))
    if not broker.allowed(request, "Alter"):
        return _response(request, [_failed(ErrorCode.cluster_authorization_failed, None)] * len(filters))
    parsed = [filter_from_wire(f) for f in filters]
    valid = [f for f in parsed if isinstance(f, AclFilter)]
    deleted = iter(broker.authorizer.remove(valid))
    results = []
    for f in parsed:
        if not isinstance(f, AclFilter):
            results.append(_failed(ErrorCode.invalid_request, f))
            continue
        matching = [
            {"error_code": 0, "error_message": None, **binding_to_wire(b)} for b in next(deleted)
        ]
        results.append({"error_code": 0, "error_message": None, "matching_acls": matching})
    if broker.cluster is not None and valid:  # answer once the other brokers can read it
        return _when_written(broker, request, results)
    return _response(request, results)


async def _when_written(broker, request, results):
    if not await broker.store.written():
        failed = _failed(ErrorCode.unknown_server_error, "writing the ACLs to ZooKeeper failed; see the broker's log")
        results = [failed if r["error_code"] == 0 else r for r in results]
    return _response(request, results)


def _failed(code, message) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


def _response(request, results):
    return messages.build_response(31, request.api_version, {"throttle_time": 0, "filter_results": results})
