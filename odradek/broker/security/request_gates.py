"""Whole-request authorization, checked by the network layer before a handler runs (only
when an authorizer is configured).

Most APIs narrow their items through ``Broker.allowed`` inside their handler (Produce,
Fetch, Metadata, ListOffsets, the group and topic APIs, the ACL and SCRAM APIs). The APIs
below decide for the whole request on one resource, as Kafka does for them; a denied request
is answered with the API's own error code in an otherwise empty response:

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group (GROUP_AUTHORIZATION_FAILED);
* InitProducerId: Write on the transactional id, or for an idempotent producer
  IdempotentWrite on the cluster or Write on some topic (KIP-679);
* AddOffsetsToTxn: Write on the transactional id, Read on the group; EndTxn: Write on the
  transactional id;
* DescribeLogDirs: Describe on the cluster.

DeleteRecords (Delete on the topic), OffsetForLeaderEpoch (Describe on the topic, or
ClusterAction for a follower), DescribeConfigs (DescribeConfigs on the topic or cluster) and
CreatePartitions (Alter on the topic) narrow their items in their handlers.

``SUPER_USERS_ONLY`` lists the APIs whose per-item checks are not written yet: with an
authorizer they serve super users only, and anyone else's request closes the connection
with a log line naming the API, so nothing is ever served with less protection than
configured.
"""

from __future__ import annotations

from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

GROUP_DENIED = ErrorCode.group_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed

SUPER_USERS_ONLY = {
    24: "AddPartitionsToTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    74: "ListConfigResources",
    75: "DescribeTopicPartitions",
}


def _group(body):
    return [("Read", "Group", body.group_id, GROUP_DENIED)]


def _init_producer_id(body):
    txn = body.transactional_id
    if txn is not None:
        return [("Write", "TransactionalId", txn, TXN_DENIED)]
    return [("IdempotentWrite", "Cluster", "kafka-cluster", CLUSTER_DENIED)]


GATES = {
    11: _group,
    12: _group,
    13: _group,
    14: _group,
    22: _init_producer_id,
    25: lambda body: [("Write", "TransactionalId", body.transactional_id, TXN_DENIED), *_group(body)],
    26: lambda body: [("Write", "TransactionalId", body.transactional_id, TXN_DENIED)],
    35: lambda body: [("Describe", "Cluster", "kafka-cluster", CLUSTER_DENIED)],
}


class RequestGates:
    def __init__(self, authorizer):
        self.authorizer = authorizer

    def check(self, request):
        """None to let the request through, a response entity to answer it with, or a
        string: the reason to close the connection."""
        key = request.api_key
        authorizer = self.authorizer
        if key in SUPER_USERS_ONLY:
            if request.principal in authorizer.super_users:
                return None
            return (
                f"{SUPER_USERS_ONLY[key]} from {request.principal} refused: with an authorizer Odradek "
                "serves it to super.users only (its per-resource checks are not implemented yet)"
            )
        gate = GATES.get(key)
        if gate is None:
            return None
        for operation, resource_type, name, code in gate(request.body):
            if authorizer.authorize(request, operation, resource_type, name):
                continue
            if key == 22 and resource_type == "Cluster" and authorizer.may_write_some_topic(request):
                continue
            return messages.error_response(key, request.api_version, {"error_code": code, "throttle_time": 0})
        return None
