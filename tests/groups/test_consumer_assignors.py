"""The consumer protocol's server-side assignors and member reconciliation, as pure functions."""

from __future__ import annotations

import uuid

from odradek.broker.group import modern_group_records as records
from odradek.broker.group.consumer_group import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroupMember,
    reconcile,
)
from odradek.broker.group.server_assignors import range_, uniform

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def counts(target):
    return {m: sum(len(p) for p in a.values()) for m, a in target.items()}


def test_uniform_balances_and_keeps_partitions_where_they_were():
    members = {m: frozenset({A}) for m in ("m1", "m2")}
    first = uniform(members, {A: 6}, {})
    assert counts(first) == {"m1": 3, "m2": 3}
    members["m3"] = frozenset({A})
    second = uniform(members, {A: 6}, first)
    assert counts(second) == {"m1": 2, "m2": 2, "m3": 2}
    for m in ("m1", "m2"):  # only what m3 needed moved
        assert second[m][A] <= first[m][A]


def test_uniform_with_different_subscriptions_covers_every_partition_once():
    members = {"m1": frozenset({A}), "m2": frozenset({A, B}), "m3": frozenset({B})}
    target = uniform(members, {A: 3, B: 3}, {})
    owned = [(t, p) for a in target.values() for t, ps in a.items() for p in ps]
    assert sorted(owned) == sorted([(A, p) for p in range(3)] + [(B, p) for p in range(3)])
    assert all(t in members[m] for m, a in target.items() for t in a)
    assert max(counts(target).values()) - min(counts(target).values()) <= 1


def test_range_gives_contiguous_ranges_first_members_one_more():
    members = {m: frozenset({A, B}) for m in ("m1", "m2")}
    target = range_(members, {A: 5, B: 5}, {})
    assert target["m1"] == {A: frozenset({0, 1, 2}), B: frozenset({0, 1, 2})}
    assert target["m2"] == {A: frozenset({3, 4}), B: frozenset({3, 4})}


def test_a_member_revokes_before_another_gets_the_partition():
    group = ConsumerGroup("g")
    m1 = ConsumerGroupMember("m1", member_epoch=1, assigned={A: frozenset({0, 1})})
    m2 = ConsumerGroupMember("m2", member_epoch=0)
    group.add(m1)
    group.add(m2)
    group.assignment_epoch = 2
    group.target = {"m1": {A: frozenset({0})}, "m2": {A: frozenset({1})}}
    assert reconcile(group, m2, {})  # partition 1 is still m1's
    assert (m2.member_epoch, m2.state, m2.assigned) == (2, UNRELEASED_PARTITIONS, {})
    assert reconcile(group, m1, {A: frozenset({0, 1})})
    assert (m1.member_epoch, m1.state, m1.pending_revocation) == (1, UNREVOKED_PARTITIONS, {A: frozenset({1})})
    assert not reconcile(group, m1, {A: frozenset({0, 1})})  # not revoked yet: it waits
    assert reconcile(group, m1, {A: frozenset({0})})  # revoked
    assert (m1.member_epoch, m1.state, m1.assigned) == (2, STABLE, {A: frozenset({0})})
    assert reconcile(group, m2, {})
    assert (m2.state, m2.assigned) == (STABLE, {A: frozenset({1})})


def test_consumer_group_records_round_trip():
    key = records.ModernKey(records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m1")
    raw_key = records.encode_key(key)
    assert raw_key[:2] == b"\x00\x08"
    assert records.decode_key(8, raw_key) == key
    value = records.CurrentAssignmentValue(3, 2, 1, {A: frozenset({0, 2})}, {B: frozenset({1})})
    assert records.decode_value(8, records.encode_value(8, value)) == value
    member = records.ConsumerMemberValue("i", None, "c", "/h", ("t",), "t.*", 5000, "range")
    assert records.decode_value(5, records.encode_value(5, member)) == member
