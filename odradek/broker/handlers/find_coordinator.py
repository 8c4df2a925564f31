"""FindCoordinator (key 10), v0-v6.

Answers which broker coordinates a key: for groups (key type 0) the leader of the group's
``__consumer_offsets`` partition, creating that topic on first use; for transactional ids
(key type 1) whatever ``broker.transaction_coordinator`` says (COORDINATOR_NOT_AVAILABLE
while there is none). v0-v3 ask for one key, v4+ for a batch (KIP-699), each answered on
its own. Share-state keys (type 2, v6+, ``group:topicId:partition``, KIP-932) name the leader of
the key's ``__share_group_state`` partition (ClusterAction on the cluster needed, as Kafka
asks of the share-partition leaders that send them); INVALID_REQUEST before v6, when share
groups are off, for a malformed key, and for unknown types.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _coordinator_for(broker, key_type: int):
    if key_type == GROUP:
        return getattr(broker, "group_coordinator", None)
    if key_type == TRANSACTION:
        return getattr(broker, "transaction_coordinator", None)
    if key_type == SHARE:
        if "share" not in broker.config.group_protocols():
            raise errors.InvalidRequestError("share groups are not enabled (group.coordinator.rebalance.protocols)")
        return getattr(broker, "share_coordinator", None)
    raise errors.InvalidRequestError(f"unsupported coordinator key type {key_type}")


def _find(broker, request, key_type: int, key: str) -> dict:
    entry = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": 0, "error_message": None}
    listener = request.listener
    try:
        if key_type == GROUP and not broker.allowed(request, "Describe", "Group", key):
            raise errors.GroupAuthorizationFailedError(f"not authorized to describe group {key}")
        if key_type == TRANSACTION and not broker.allowed(request, "Describe", "TransactionalId", key):
            raise errors.TransactionalIdAuthorizationFailedError(f"not authorized to describe {key}")
        if key_type == SHARE:
            if request.api_version < 6:
                raise errors.InvalidRequestError("share coordinator keys need FindCoordinator v6")
            if not broker.allowed(request, "ClusterAction", "Cluster", "kafka-cluster"):
                raise errors.ClusterAuthorizationFailedError("ClusterAction on the cluster is needed")
        coordinator = _coordinator_for(broker, key_type)
        if coordinator is None:
            raise errors.CoordinatorNotAvailableError("no coordinator of that type is running")
        node_id = coordinator.find_coordinator(key)
        node = broker.image.brokers.get(node_id)
        if node is None:
            raise errors.CoordinatorNotAvailableError(f"coordinator broker {node_id} is not alive")
        host, port = node.address(listener)
        entry.update(node_id=node_id, host=host, port=port)
    except errors.KafkaError as exc:
        entry.update(error_code=exc.code, error_message=exc.message)
    return entry


@api(10, 0, 6)
def handle_find_coordinator(broker, request):
    body = request.body
    version = request.api_version
    key_type = getattr(body, "key_type", GROUP)
    if version >= 4:
        found = [_find(broker, request, key_type, key) for key in body.coordinator_keys]
        return messages.build_response(10, version, {"throttle_time": 0, "coordinators": found})
    found = _find(broker, request, key_type, body.key)
    if found["error_code"] == ErrorCode.none:
        found["error_message"] = None
    return messages.build_response(10, version, {"throttle_time": 0, **found})
