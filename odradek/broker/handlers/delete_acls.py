"""DeleteAcls (key 31), v1-v3 (KIP-140): delete the ACLs each filter matches and list them.

Without an authorizer: SECURITY_DISABLED. Needs Alter on the cluster. In a cluster the
resources a filter names are read from ZooKeeper first, and the answer waits for the writes.
"""

from odradek.broker.handlers import api
from odradek.cluster.zk_client import ZooKeeperError
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
    if broker.cluster is not None:
        return _delete_in_cluster(broker, request, parsed, valid)
    return _response(request, _delete(broker, parsed, valid))


async def _delete_in_cluster(broker, request, parsed, valid):
    """Another broker may have added an ACL this one has not heard of yet: read the named
    resources from ZooKeeper first; answer once the deletions are written."""
    try:
        await broker.store.refresh_acls(valid)
    except ZooKeeperError as exc:
        failed = _failed(ErrorCode.unknown_server_error, f"cannot read the ACLs from ZooKeeper: {exc}")
        return _response(request, [failed] * len(parsed))
    broker.authorizer.reload()
    results = _delete(broker, parsed, valid)
    if not await broker.store.written():
        failed = _failed(ErrorCode.unknown_server_error, "writing the ACLs to ZooKeeper failed; see the broker's log")
        results = [failed if r["error_code"] == 0 else r for r in results]
    return _response(request, results)


def _delete(broker, parsed, valid) -> list[dict]:
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
    return results


def _failed(code, message) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


def _response(request, results):
    return messages.build_response(31, request.api_version, {"throttle_time": 0, "filter_results": results})
