"""The share coordinator's inter-broker APIs (KIP-932) need ClusterAction on the cluster, as in
Kafka: without it every partition answers CLUSTER_AUTHORIZATION_FAILED, and so does
FindCoordinator for a share-state key; the broker's super user is served."""

from __future__ import annotations

import uuid

from broker_e2e import RawClient
from test_acls import acl_broker_settings
from test_acls_per_api import login

from odradek.protocol.errors import ErrorCode


def test_share_state_apis_need_cluster_action(secured_broker):
    b = secured_broker(acl_broker_settings(**{"group.coordinator.rebalance.protocols": "classic,consumer,share"}))
    topic_id = uuid.uuid4()
    read = {"group_id": "sg", "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
    write = {"group_id": "sg", "topics": [{"topic_id": topic_id, "partitions": [
        {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": []}]}]}  # fmt: skip
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        assert raw.request(84, 0, read).results[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        assert raw.request(85, 1, write).results[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        found = raw.request(10, 6, {"key_type": 2, "coordinator_keys": [f"sg:{topic_id}:0"]}).coordinators[0]
        assert found.error_code == ErrorCode.cluster_authorization_failed
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "admin", "admin-secret")  # a super user, as brokers are
        # past the authorizer: the topic id is unknown here
        assert raw.request(84, 0, read).results[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_share_group_offset_apis_need_rights_on_the_group(secured_broker):
    """DescribeShareGroupOffsets needs Describe, AlterShareGroupOffsets Read and
    DeleteShareGroupOffsets Delete on the group (GROUP_AUTHORIZATION_FAILED otherwise)."""
    b = secured_broker(acl_broker_settings())
    group = f"sg-{uuid.uuid4().hex[:6]}"
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        [described] = raw.request(90, 1, {"groups": [{"group_id": group, "topics": None}]}).groups
        assert described.error_code == ErrorCode.group_authorization_failed
        altered = raw.request(91, 0, {"group_id": group, "topics": []})
        assert altered.error_code == ErrorCode.group_authorization_failed
        deleted = raw.request(92, 0, {"group_id": group, "topics": []})
        assert deleted.error_code == ErrorCode.group_authorization_failed
