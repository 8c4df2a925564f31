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
* AddPartitionsToTxn v4+ (broker to broker): ClusterAction on the cluster;
* the controller's LeaderAndIsr, StopReplica and UpdateMetadata, and ControlledShutdown (a
  broker to the controller): ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED), so
  only the brokers (``inter.broker.listener.name``'s principal) steer replicas;
* DescribeLogDirs: Describe on the cluster; ListConfigResources: DescribeConfigs on it;
* OffsetDelete: Delete on the group;
* ConsumerGroupHeartbeat, ShareGroupHeartbeat: Read on the group (GROUP_AUTHORIZATION_FAILED),
  Describe on each subscribed topic name (TOPIC_AUTHORIZATION_FAILED);
* ShareFetch, ShareAcknowledge: Read on the group (Read on each topic: their handlers);
* AlterShareGroupOffsets: Read on the group; DeleteShareGroupOffsets: Delete on the group
  (DescribeShareGroupOffsets checks Describe per group in its handler).

Everything else narrows its items in its handler through ``Broker.allowed`` (Produce, Fetch,
Metadata, the topic, config, transaction and describe APIs), answering each denied item with
Kafka's code, as ``KafkaApis`` does.
"""

from __future__ import annotations

from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

GROUP_DENIED = ErrorCode.group_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed
CLUSTER = ("Cluster", "kafka-cluster")


def _group(body, version):
    return [("Read", "Group", body.group_id, GROUP_DENIED)]


def _group_heartbeat(body, version):
    """KIP-848/KIP-932 heartbeats: Read on the group, Describe on each subscribed topic name."""
    names = body.subscribed_topic_names or ()
    return [*_group(body, version), *(("Describe", "Topic", n, TOPIC_DENIED) for n in names)]


def _init_producer_id(body, version):
    txn = body.transactional_id
    if txn is not None:
        return [("Write", "TransactionalId", txn, TXN_DENIED)]
    return [("IdempotentWrite", *CLUSTER, CLUSTER_DENIED)]


def _add_partitions_to_txn(body, version):
    # v4+ is broker-to-broker (KIP-890): ClusterAction; v0-v3 are checked in the handler.
    return [("ClusterAction", *CLUSTER, CLUSTER_DENIED)] if version >= 4 else []


def _cluster_action(body, version):
    return [("ClusterAction", *CLUSTER, CLUSTER_DENIED)]


GATES = {
    4: _cluster_action,  # LeaderAndIsr
    5: _cluster_action,  # StopReplica
    6: _cluster_action,  # UpdateMetadata
    7: _cluster_action,  # ControlledShutdown
    11: _group,
    12: _group,
    13: _group,
    14: _group,
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: lambda body, v: [("Write", "TransactionalId", body.transactional_id, TXN_DENIED), *_group(body, v)],
    26: lambda body, v: [("Write", "TransactionalId", body.transactional_id, TXN_DENIED)],
    35: lambda body, v: [("Describe", *CLUSTER, CLUSTER_DENIED)],
    47: lambda body, v: [("Delete", "Group", body.group_id, GROUP_DENIED)],
    68: _group_heartbeat,
    74: lambda body, v: [("DescribeConfigs", *CLUSTER, CLUSTER_DENIED)],
    76: _group_heartbeat,
    78: _group,
    79: _group,
    91: _group,  # AlterShareGroupOffsets
    92: lambda body, v: [("Delete", "Group", body.group_id, GROUP_DENIED)],  # DeleteShareGroupOffsets
}


class RequestGates:
    def __init__(self, authorizer):
        self.authorizer = authorizer

    def check(self, request):
        """None to let the request through, a response entity to answer it with, or a
        string: the reason to close the connection."""
        key = request.api_key
        authorizer = self.authorizer
        gate = GATES.get(key)
        if gate is None:
            return None
        for operation, resource_type, name, code in gate(request.body, request.api_version):
            if authorizer.authorize(request, operation, resource_type, name):
                continue
            if key == 22 and resource_type == "Cluster" and authorizer.may_write_some_topic(request):
                continue
            return messages.error_response(key, request.api_version, {"error_code": code, "throttle_time": 0})
        return None
