"""ACL checks of the transaction, config, replica-dir, producer/transaction describe and
KIP-848/KIP-932 group APIs (issue 17): each refuses what Kafka's KafkaApis refuses, with its
error code, and serves what the ACLs allow — no longer super users only."""

from __future__ import annotations

import pytest
from broker_e2e import RawClient
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType
from test_acls import allow, conf, start_acl_broker

from odradek.protocol.errors import ErrorCode


@pytest.fixture
def acl_broker(secured_broker):
    return start_acl_broker(secured_broker)


def txn_producer(b, user: str, txn_id: str) -> Producer:
    return Producer({**conf(b, user), "transactional.id": txn_id, "linger.ms": 0, "transaction.timeout.ms": 10000})


def committed_values(b, topic: str) -> list[bytes]:
    c = Consumer({**conf(b, "admin"), "group.id": "check-" + topic, "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if got and m is None:
                break
    finally:
        c.close()
    return got


def test_transactional_producer_with_its_acls_commits(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-alice")
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "alice-group")
    p = txn_producer(acl_broker, "alice", "tx-alice")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("orders", b"in-txn")
    # AddOffsetsToTxn + TxnOffsetCommit: Write on the id, Read on the group; Read on the topic missing.
    from confluent_kafka import TopicPartition

    metadata = Consumer({**conf(acl_broker, "alice"), "group.id": "alice-group"})
    try:
        p.send_offsets_to_transaction([TopicPartition("orders", 0, 1)], metadata.consumer_group_metadata(), 30)
        pytest.fail("TxnOffsetCommit without Read on the topic was accepted")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, exc
    finally:
        metadata.close()
    p.abort_transaction(30)
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    p.begin_transaction()
    p.produce("orders", b"committed")
    metadata = Consumer({**conf(acl_broker, "alice"), "group.id": "alice-group"})
    p.send_offsets_to_transaction([TopicPartition("orders", 0, 1)], metadata.consumer_group_metadata(), 30)
    metadata.close()
    p.commit_transaction(30)
    assert committed_values(acl_broker, "orders") == [b"committed"]


def test_transactional_producer_without_the_transactional_id_acl_is_refused(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    p = txn_producer(acl_broker, "alice", "tx-not-hers")
    with pytest.raises(KafkaException) as caught:
        p.init_transactions(30)
    assert caught.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactional_producer_to_a_topic_it_may_not_write_is_refused(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-alice")
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    p = txn_producer(acl_broker, "alice", "tx-alice")
    p.init_transactions(30)
    p.begin_transaction()
    reports = []
    p.produce("payments", b"nope", on_delivery=lambda err, msg: reports.append(err))
    with pytest.raises(KafkaException) as caught:
        p.commit_transaction(30)
    assert caught.value.args[0].txn_requires_abort()
    p.abort_transaction(30)
    p.flush(10)
    assert reports and reports[0] is not None
    assert committed_values(acl_broker, "payments") == []


def login(raw, user: str, password: str) -> None:
    raw.request(17, 1, {"mechanism": "PLAIN"})
    raw.request(36, 2, {"auth_bytes": f"\x00{user}\x00{password}".encode()})


def test_admin_and_group_apis_answer_kafkas_authorization_errors(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        topic_cfg = {"resource_type": 2, "resource_name": "orders", "configs": []}
        broker_cfg = {"resource_type": 4, "resource_name": "", "configs": []}
        resp = raw.request(44, 1, {"resources": [topic_cfg, broker_cfg], "validate_only": True})
        assert [r.error_code for r in resp.responses] == [ErrorCode.topic_authorization_failed, ErrorCode.cluster_authorization_failed]
        resp = raw.request(33, 2, {"resources": [topic_cfg], "validate_only": True})
        assert resp.responses[0].error_code == ErrorCode.topic_authorization_failed
        marker = {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "topics": [{"name": "orders", "partition_indexes": [0]}], "coordinator_epoch": 0}
        resp = raw.request(27, 1, {"markers": [marker]})
        assert resp.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        resp = raw.request(34, 2, {"dirs": [{"path": "/nowhere", "topics": [{"name": "orders", "partitions": [0]}]}]})
        assert resp.results[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        # Write does not imply Read: DescribeProducers needs Read.
        resp = raw.request(61, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]})
        assert resp.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        # DescribeTransactions: read the code from the bytes (kio's decoder refuses the -1
        # start time Kafka also answers for a transaction it does not describe).
        raw.send(65, 0, {"transactional_ids": ["tx-other"]})
        frame = raw.read_frame()
        # correlation id, tagged fields, throttle, compact array length, then the first error code
        assert int.from_bytes(frame[10:12], "big") == ErrorCode.transactional_id_authorization_failed
        resp = raw.request(75, 0, {"topics": [{"name": "orders"}, {"name": "payments"}], "response_partition_limit": 100, "cursor": None})
        codes = {t.name: t.error_code for t in resp.topics}
        assert codes == {"orders": ErrorCode.none, "payments": ErrorCode.topic_authorization_failed}
        resp = raw.request(74, 0, {})
        assert resp.error_code == ErrorCode.cluster_authorization_failed
        resp = raw.request(47, 0, {"group_id": "g", "topics": [{"name": "orders", "partitions": [{"partition_index": 0}]}]})
        assert resp.error_code == ErrorCode.group_authorization_failed
        hb = {"group_id": "g", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["orders"], "server_assignor": None, "topic_partitions": []}
        resp = raw.request(68, 0, hb)
        assert resp.error_code == ErrorCode.group_authorization_failed
        resp = raw.request(69, 0, {"group_ids": ["g"], "include_authorized_operations": False})
        assert resp.groups[0].error_code == ErrorCode.group_authorization_failed
        # With Read on the group, a subscription to a topic alice may not Describe is refused.
        allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "g")
        resp = raw.request(68, 0, {**hb, "subscribed_topic_names": ["payments"]})
        assert resp.error_code == ErrorCode.topic_authorization_failed
        # Allowed: AlterConfigs on the topic and Read on it.
        allow(acl_broker, "User:alice", AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, "orders")
        allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
        resp = raw.request(44, 1, {"resources": [topic_cfg], "validate_only": True})
        assert resp.responses[0].error_code == ErrorCode.none
        resp = raw.request(61, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]})
        assert resp.topics[0].partitions[0].error_code == ErrorCode.none
        # Past the checks it reaches the coordinator (which may still be loading: NOT_COORDINATOR).
        resp = raw.request(68, 0, hb)
        assert resp.error_code in (ErrorCode.none, ErrorCode.not_coordinator, ErrorCode.coordinator_not_available)


def test_share_fetch_answers_topic_authorization_failed_for_a_topic_it_may_not_read(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "sg")
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "admin", "admin-secret")
        ids = {t.name: t.topic_id for t in raw.request(3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}).topics}
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        fetch = {
            "group_id": "sg", "member_id": "m-alice", "share_session_epoch": 0, "max_wait": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "forgotten_topics_data": [],
            "topics": [{"topic_id": ids["orders"], "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
        }
        resp = raw.request(78, 1, fetch)
        assert resp.error_code == ErrorCode.none, resp
        assert [(r.topic_id, r.partitions[0].error_code) for r in resp.responses] == [(ids["orders"], ErrorCode.topic_authorization_failed)]
        resp = raw.request(78, 1, {**fetch, "group_id": "not-hers"})
        assert resp.error_code == ErrorCode.group_authorization_failed


def test_cluster_authorized_operations_in_describe_cluster_and_metadata(acl_broker):
    Op = AclOperation
    allow(acl_broker, "User:alice", Op.DESCRIBE, ResourceType.BROKER, "kafka-cluster")
    allow(acl_broker, "User:alice", Op.IDEMPOTENT_WRITE, ResourceType.BROKER, "kafka-cluster")
    alice, admin = AdminClient(conf(acl_broker, "alice")), AdminClient(conf(acl_broker, "admin"))
    described = alice.describe_cluster(include_authorized_operations=True).result(30)
    assert set(described.authorized_operations) == {Op.DESCRIBE, Op.IDEMPOTENT_WRITE}
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(described.authorized_operations) == {
        Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
    }
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        body = {"topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True, "include_topic_authorized_operations": False}
        resp = raw.request(3, 8, body)
        assert resp.cluster_authorized_operations == (1 << 8) | (1 << 12)  # Describe, IdempotentWrite
        resp = raw.request(3, 8, {**body, "include_cluster_authorized_operations": False})
        assert resp.cluster_authorized_operations == -(2**31)


def test_fast_lane_write_decision_is_dropped_when_the_acls_change(acl_broker):
    """One producer connection: allowed (the fast lane caches the decision), then the ACL is
    removed and the same connection's next record is refused."""
    from confluent_kafka.admin import AclBindingFilter, AclPermissionType, ResourcePatternType

    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    p = Producer({**conf(acl_broker, "alice"), "linger.ms": 0, "message.timeout.ms": 10000, "retries": 0})
    outcome: list = []
    p.produce("orders", b"first", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(20)
    assert outcome == [None]
    admin = AdminClient(conf(acl_broker, "admin"))
    acl_filter = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.delete_acls([acl_filter]).values():
        assert len(f.result(30)) == 1
    p.produce("orders", b"second", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(20)
    assert len(outcome) == 2 and outcome[1] is not None
    assert outcome[1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
