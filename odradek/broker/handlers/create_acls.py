"""CreateAcls (key 30), v1-v3 (KIP-140, prefixed patterns KIP-290): one result per creation.

In a cluster the answer waits for the ZooKeeper writes (``/kafka-acl...``); every broker's
authorizer takes them from the change notification. Without an authorizer: SECURITY_DISABLED. Needs Alter on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for every creation). A creation Kafka would refuse (an
operation the resource type does not have, a prefixed '*', a Cluster not named
kafka-cluster, a malformed principal, unknown codes) gets INVALID_REQUEST with the reason.
"""

from odradek.broker.handlers import api
from odradek.protocol import messages
from odradek.protocol.acl_model import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    AclBinding,
    binding_problem,
)
from odradek.protocol.errors import ErrorCode


@api(30, 1, 3)
def handle_create_acls(broker, request):
    creations = request.body.creations
    authorizer = broker.authorizer
    if authorizer is None:
        return _response(request, [(ErrorCode.security_disabled, "No Authorizer is configured")] * len(creations))
    if not broker.allowed(request, "Alter"):
        return _response(request, [(ErrorCode.cluster_authorization_failed, None)] * len(creations))
    results, valid = [], []
    for c in creations:
        binding = AclBinding(
            RESOURCE_TYPES.get(c.resource_type, f"code {c.resource_type}"),
            PATTERN_TYPES.get(c.resource_pattern_type, f"code {c.resource_pattern_type}"),
            c.resource_name,
            c.principal,
            c.host,
            OPERATIONS.get(c.operation, f"code {c.operation}"),
            PERMISSIONS.get(c.permission_type, f"code {c.permission_type}"),
        )
        problem = binding_problem(binding)
        results.append((ErrorCode.invalid_request, problem) if problem else (ErrorCode.none, None))
        if not problem:
            valid.append(binding)
    if valid:
        authorizer.add(valid)
        if broker.cluster is not None:  # answer once the other brokers can read them
            return _when_written(broker, request, results)
    return _response(request, results)


async def _when_written(broker, request, results):
    if not await broker.store.written():
        failed = (ErrorCode.unknown_server_error, "writing the ACLs to ZooKeeper failed; see the broker's log")
        results = [failed if code == ErrorCode.none else (code, m) for code, m in results]
    return _response(request, results)


def _response(request, results):
    return messages.build_response(
        30,
        request.api_version,
        {"throttle_time": 0, "results": [{"error_code": c, "error_message": m} for c, m in results]},
    )
