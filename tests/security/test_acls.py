"""ACLs (issue 17, step 3): the authorizer with Kafka's semantics (super users, Deny beats
Allow, literal, prefixed and '*' patterns, implied Describe, allow.everyone.if.no.acl.found),
CreateAcls/DescribeAcls/DeleteAcls from confluent-kafka's admin client and `odradek acls`,
Metadata hiding what a principal may not describe, and each denial's Kafka error code."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from broker_e2e import RawClient
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from security_support import PLAIN_JAAS

from odradek.protocol.errors import ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import run_odradek  # noqa: E402

JAAS = PLAIN_JAAS.replace(";", ' user_bob="bob-secret";')
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def acl_broker_settings(**extra) -> dict:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        **extra,
    }


@pytest.fixture
def acl_broker(secured_broker):
    return start_acl_broker(secured_broker)


def start_acl_broker(secured_broker):
    """A SASL/PLAIN broker with the ACL authorizer (super user admin) and four topics."""
    b = secured_broker(acl_broker_settings())
    admin = AdminClient(conf(b, "admin"))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "payments", "logs.app", "other")]).values():
        f.result(30)
    return b


def conf(b, user: str) -> dict:
    return {
        "bootstrap.servers": b.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def allow(b, principal: str, operation, rtype, name: str, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    admin = AdminClient(conf(b, "admin"))
    binding = AclBinding(rtype, name, pattern, principal, "*", operation, permission)
    for f in admin.create_acls([binding]).values():
        f.result(30)


def produce_error(b, user: str, topic: str):
    """The delivery error of one record (None when it was written)."""
    p = Producer({**conf(b, user), "linger.ms": 0, "message.timeout.ms": 10000})
    outcome = []
    p.produce(topic, b"x", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_without_acls_only_super_users_are_served(acl_broker):
    assert produce_error(acl_broker, "admin", "orders") is None
    err = produce_error(acl_broker, "alice", "orders")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_allow_write_and_read_lets_alice_produce_and_consume(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "alice-group")
    assert produce_error(acl_broker, "alice", "orders") is None
    c = Consumer({**conf(acl_broker, "alice"), "group.id": "alice-group", "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert not m.error(), m.error()
            got = m.value()
    c.commit(asynchronous=False)
    c.close()
    assert got == b"x"
    # Read was not Write on payments; and bob has nothing.
    assert produce_error(acl_broker, "alice", "payments").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(acl_broker, "bob", "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_group_alice_may_not_read_is_refused(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    errors = []
    c = Consumer(
        {**conf(acl_broker, "alice"), "group.id": "not-hers", "auto.offset.reset": "earliest", "error_cb": errors.append}
    )
    c.subscribe(["orders"])
    deadline = time.monotonic() + 20
    seen = None
    while seen is None and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None and m.error():
            seen = m.error()
        elif errors:
            seen = errors[0]
    c.close()
    assert seen is not None and seen.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_deny_beats_allow(acl_broker):
    allow(acl_broker, "User:*", AclOperation.ALL, ResourceType.TOPIC, "*")
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders", permission=AclPermissionType.DENY)
    assert produce_error(acl_broker, "alice", "orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(acl_broker, "alice", "payments") is None
    assert produce_error(acl_broker, "bob", "orders") is None


def test_prefixed_acls(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "logs.", ResourcePatternType.PREFIXED)
    assert produce_error(acl_broker, "alice", "logs.app") is None
    assert produce_error(acl_broker, "alice", "other").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics_alice_may_not_describe(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")  # Read implies Describe
    admin = AdminClient(conf(acl_broker, "alice"))
    assert set(admin.list_topics(timeout=20).topics) == {"orders"}
    everything = AdminClient(conf(acl_broker, "admin")).list_topics(timeout=20).topics
    assert {"orders", "payments", "logs.app", "other"} <= set(everything)
    # Named explicitly, an undescribable topic answers TOPIC_AUTHORIZATION_FAILED (KIP-430 ops too).
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        raw.request(17, 1, {"mechanism": "PLAIN"})
        raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        md = raw.request(
            3,
            10,
            {
                "topics": [{"name": "orders", "topic_id": None}, {"name": "payments", "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": True,
                "include_cluster_authorized_operations": False,
            },
        )
    by_name = {t.name: t for t in md.topics}
    assert by_name["payments"].error_code == ErrorCode.topic_authorization_failed
    assert by_name["orders"].error_code == ErrorCode.none
    assert by_name["orders"].topic_authorized_operations == (1 << 3) | (1 << 8)  # Read, Describe


def _metadata_errors(b, names, allow_auto_create: bool) -> dict:
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        raw.request(17, 1, {"mechanism": "PLAIN"})
        raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        md = raw.request(
            3,
            10,
            {
                "topics": [{"name": n, "topic_id": None} for n in names],
                "allow_auto_topic_creation": allow_auto_create,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False,
            },
        )
    return {t.name: t.error_code for t in md.topics}


def test_metadata_checks_authorization_before_existence(secured_broker):
    """As KafkaApis: without Describe a named topic is TOPIC_AUTHORIZATION_FAILED whether it
    exists or not; with Describe a missing one is UNKNOWN_TOPIC_OR_PARTITION, unless the
    request may auto-create it and the principal lacks Create (TOPIC_AUTHORIZATION_FAILED)."""
    b = start_acl_broker(secured_broker)
    denied = ErrorCode.topic_authorization_failed
    for auto in (False, True):
        assert _metadata_errors(b, ["payments", "ghost"], auto) == {"payments": denied, "ghost": denied}
    allow(b, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "ghost")
    assert _metadata_errors(b, ["ghost"], False) == {"ghost": ErrorCode.unknown_topic_or_partition}
    assert _metadata_errors(b, ["ghost"], True) == {"ghost": denied}  # no Create
    allow(b, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "ghost")
    assert _metadata_errors(b, ["ghost"], True) == {"ghost": ErrorCode.none}  # created
    # Create without Describe creates nothing: the Describe check comes first.
    allow(b, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "ghost2")
    assert _metadata_errors(b, ["ghost2"], True) == {"ghost2": denied}


def test_allow_everyone_if_no_acl_found(secured_broker):
    b = secured_broker(acl_broker_settings(**{"allow.everyone.if.no.acl.found": "true"}))
    assert produce_error(b, "alice", "open-topic") is None  # auto-created: no ACL anywhere
    allow(b, "User:bob", AclOperation.WRITE, ResourceType.TOPIC, "guarded")
    assert produce_error(b, "bob", "guarded") is None
    assert produce_error(b, "alice", "guarded").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_admin_apis_and_their_own_authorization(acl_broker):
    admin = AdminClient(conf(acl_broker, "admin"))
    bindings = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "g", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    described = admin.describe_acls(any_filter).result(30)
    assert sorted((b.restype, b.name, b.resource_pattern_type) for b in described) == sorted(
        (b.restype, b.name, b.resource_pattern_type) for b in bindings
    )
    # A principal without Alter on the cluster cannot add ACLs.
    alice = AdminClient(conf(acl_broker, "alice"))
    with pytest.raises(KafkaException) as info:
        for f in alice.create_acls([bindings[0]]).values():
            f.result(30)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # An invalid binding is refused with INVALID_REQUEST.
    bad = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as info:
        for f in admin.create_acls([bad]).values():
            f.result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    topic_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = list(admin.delete_acls([topic_filter]).values())[0].result(30)
    assert [(b.restype, b.name) for b in deleted] == [(ResourceType.TOPIC, "orders")]
    assert len(admin.describe_acls(any_filter).result(30)) == 1


def test_acls_survive_a_restart(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    acl_broker.embedded.restart()
    assert produce_error(acl_broker, "alice", "orders") is None
    assert produce_error(acl_broker, "alice", "payments").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_an_api_alice_may_not_use_closes_only_her_connection(acl_broker):
    allow(acl_broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        raw.request(17, 1, {"mechanism": "PLAIN"})
        raw.request(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
        # CreateAcls: answered, CLUSTER_AUTHORIZATION_FAILED.
        resp = raw.request(30, 3, {"creations": []})
        assert resp.results == ()
        # DescribeConfigs: Write does not imply DescribeConfigs.
        resp = raw.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": "orders", "configuration_keys": None}], "include_synonyms": False, "include_documentation": False})
        assert resp.results[0].error_code == ErrorCode.topic_authorization_failed
        # CreatePartitions needs Alter on the topic; OffsetForLeaderEpoch Describe (implied by Write).
        resp = raw.request(37, 3, {"topics": [{"name": "orders", "count": 2, "assignments": None}], "timeout": 5000, "validate_only": True})
        assert resp.results[0].error_code == ErrorCode.topic_authorization_failed
        resp = raw.request(23, 3, {"replica_id": -1, "topics": [{"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}, {"topic": "payments", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        codes = {t.topic: t.partitions[0].error_code for t in resp.topics}
        assert codes == {"orders": ErrorCode.none, "payments": ErrorCode.topic_authorization_failed}
        # IncrementalAlterConfigs needs AlterConfigs on the topic: answered, not closed.
        resp = raw.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": "orders", "configs": []}], "validate_only": True})
        assert resp.responses[0].error_code == ErrorCode.topic_authorization_failed
    assert produce_error(acl_broker, "alice", "orders") is None


def test_odradek_acls_cli(acl_broker, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\nsasl.password=admin-secret\n")
    common = ["-b", acl_broker.address("SASL_PLAINTEXT"), "--command-config", props]
    r = run_odradek("acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "logs.", "--resource-pattern-type", "prefixed", *common)
    assert r.code == 0, r
    assert produce_error(acl_broker, "alice", "logs.app") is None
    r = run_odradek("acls", "list", "--topic", "logs.app", "--resource-pattern-type", "match", "-o", "json", *common)
    assert r.code == 0, r
    assert r.json() == [
        {"resource_type": "Topic", "pattern_type": "PREFIXED", "name": "logs.", "principal": "User:alice", "host": "*", "operation": "Write", "permission": "Allow"}
    ]
    r = run_odradek("acls", "remove", "--topic", "logs.", "--resource-pattern-type", "prefixed", *common)
    assert r.code == 0, r
    assert "Removed" in r.err
    assert produce_error(acl_broker, "alice", "logs.app").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
