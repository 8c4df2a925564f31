"""Authorisation edges of the KIP-848 and KIP-932 APIs (issue 17): ConsumerGroupDescribe fails a
group whose assignments name a topic the caller may not Describe; a regex subscription resolves
only to topics the member's principal may Describe; an ACL removed mid-session stops a share
session's partitions at the next ShareFetch."""

from __future__ import annotations

import time

import pytest
from broker_e2e import RawClient
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from test_acls import allow, conf, start_acl_broker
from test_acls_per_api import login

from odradek.protocol.errors import ErrorCode


@pytest.fixture
def acl_broker(secured_broker):
    return start_acl_broker(secured_broker)


def deny_again(b, principal: str, operation, rtype, name: str) -> None:
    """Delete the Allow ACL ``allow`` added."""
    admin = AdminClient(conf(b, "admin"))
    acl_filter = AclBindingFilter(rtype, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW)
    for f in admin.delete_acls([acl_filter]).values():
        assert len(f.result(30)) == 1


def topic_ids(b) -> dict:
    with RawClient(b.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "admin", "admin-secret")
        body = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        return {t.name: t.topic_id for t in raw.request(3, 12, body).topics}


def heartbeat_until_assigned(raw, hb: dict, want: set, version: int = 0):
    """Heartbeat (joining first) until the member's assignment covers the topic ids ``want``;
    returns the last answer and the assigned topic ids."""
    deadline = time.monotonic() + 30
    assigned: set = set()
    member_id, epoch = hb["member_id"], hb["member_epoch"]
    while time.monotonic() < deadline:
        resp = raw.request(68, version, {**hb, "member_id": member_id, "member_epoch": epoch})
        if resp.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress):
            # As a client does: FindCoordinator (creating __consumer_offsets), then again.
            raw.request(10, 3, {"key": hb["group_id"], "key_type": 0})
            time.sleep(0.1)
            continue
        assert resp.error_code == ErrorCode.none, resp
        member_id, epoch = resp.member_id, resp.member_epoch
        if resp.assignment is not None:
            assigned = {t.topic_id for t in resp.assignment.topic_partitions}
        if assigned == want:
            return resp, assigned
        time.sleep(0.05)
    raise AssertionError(f"assignment {assigned} never became {want}")


HB = {
    "group_id": "cg",
    "member_id": "",
    "member_epoch": 0,
    "instance_id": None,
    "rack_id": None,
    "rebalance_timeout": 30000,
    "subscribed_topic_names": ["orders", "payments"],
    "server_assignor": None,
    "topic_partitions": [],
}


def test_consumer_group_describe_fails_a_group_assigned_topics_the_caller_may_not_describe(acl_broker):
    ids = topic_ids(acl_broker)
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "admin", "admin-secret")
        heartbeat_until_assigned(raw, HB, {ids["orders"], ids["payments"]})
    allow(acl_broker, "User:alice", AclOperation.DESCRIBE, ResourceType.GROUP, "cg")
    allow(acl_broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")
    describe = {"group_ids": ["cg"], "include_authorized_operations": False}
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        (group,) = raw.request(69, 0, describe).groups
        assert group.error_code == ErrorCode.topic_authorization_failed, group
        assert group.members == ()
        allow(acl_broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "payments")
        (group,) = raw.request(69, 0, describe).groups
        assert group.error_code == ErrorCode.none, group
        (member,) = group.members
        assert {t.topic_name for t in member.assignment.topic_partitions} == {"orders", "payments"}


def test_regex_subscription_resolves_only_to_topics_the_member_may_describe(acl_broker):
    ids = topic_ids(acl_broker)
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "rg")
    allow(acl_broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")
    hb = {**HB, "group_id": "rg", "member_id": "m-alice", "subscribed_topic_names": None, "subscribed_topic_regex": "orders|payments"}
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        resp, _ = heartbeat_until_assigned(raw, hb, {ids["orders"]}, version=1)
        # Allowed to see payments too: the next heartbeat resolves the regex again.
        allow(acl_broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "payments")
        heartbeat_until_assigned(raw, {**hb, "member_epoch": resp.member_epoch}, {ids["orders"], ids["payments"]}, version=1)
    # The admin (a super user) describes the group: alice's regex resolved to both.
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "admin", "admin-secret")
        (group,) = raw.request(69, 1, {"group_ids": ["rg"], "include_authorized_operations": False}).groups
        assert [m.subscribed_topic_regex for m in group.members] == ["orders|payments"]


def share_fetch(raw, ids, epoch: int, topics=("orders",)):
    body = {
        "group_id": "sg", "member_id": "m-alice", "share_session_epoch": epoch, "max_wait": 0, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "forgotten_topics_data": [],
        "topics": [{"topic_id": ids[t], "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]} for t in topics],
    }
    resp = raw.request(78, 1, body)
    assert resp.error_code == ErrorCode.none, resp
    return {(r.topic_id, p.partition_index): p for r in resp.responses for p in r.partitions}


def test_an_acl_removed_mid_session_stops_share_fetch_of_that_topic(acl_broker):
    ids = topic_ids(acl_broker)
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "sg")
    allow(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
    with RawClient(acl_broker.endpoint("SASL_PLAINTEXT")) as raw:
        login(raw, "alice", "alice-secret")
        first = share_fetch(raw, ids, 0)  # opens the session with orders-0
        assert first[(ids["orders"], 0)].error_code == ErrorCode.none
        p = Producer({**conf(acl_broker, "admin"), "linger.ms": 0})
        p.produce("orders", b"one")
        assert p.flush(30) == 0
        epoch, got = 1, b""
        deadline = time.monotonic() + 30
        while b"one" not in got and time.monotonic() < deadline:
            row = share_fetch(raw, ids, epoch, topics=())[(ids["orders"], 0)]
            assert row.error_code == ErrorCode.none, row
            got += row.records or b""
            epoch += 1
        assert b"one" in got, "the share session never delivered the record"
        deny_again(acl_broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "orders")
        p.produce("orders", b"two")
        assert p.flush(30) == 0
        # The request names no topic: orders-0 is in the session, and is refused now.
        row = share_fetch(raw, ids, epoch, topics=())[(ids["orders"], 0)]
        assert row.error_code == ErrorCode.topic_authorization_failed, row
        assert not row.records
        # Named again in the request: one answer for it, refused as well.
        rows = share_fetch(raw, ids, epoch + 1)
        assert list(rows) == [(ids["orders"], 0)] and rows[(ids["orders"], 0)].error_code == ErrorCode.topic_authorization_failed
