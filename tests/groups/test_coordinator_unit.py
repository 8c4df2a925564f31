"""The group coordinator's state machine, driven directly on a manual clock (no sockets)."""

from __future__ import annotations

import asyncio

import pytest
from group_harness import Harness, subscription

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group_state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    check_transition,
)
from odradek.broker.group.group_coordinator_shard import LOADING
from odradek.broker.group.offset_and_metadata import OffsetAndMetadata
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode as E


def test_transition_table():
    check_transition(EMPTY, PREPARING_REBALANCE)
    check_transition(PREPARING_REBALANCE, COMPLETING_REBALANCE)
    check_transition(COMPLETING_REBALANCE, STABLE)
    for state in (EMPTY, STABLE, COMPLETING_REBALANCE, PREPARING_REBALANCE, DEAD):
        check_transition(state, DEAD)
    with pytest.raises(IllegalStateTransition):
        check_transition(EMPTY, STABLE)
    with pytest.raises(IllegalStateTransition):
        check_transition(STABLE, COMPLETING_REBALANCE)
    assert set(VALID_PREVIOUS_STATES) == {EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD}


def stable_group(h: Harness, group: str = "g", n: int = 2, **kw):
    """n dynamic members, joined together and synced; returns (member ids, leader, generation)."""
    joins = [h.join_member(group, **kw) for _ in range(n)]
    h.advance(150)
    results = [r[0] for _, r in joins]
    assert all(r.error == 0 for r in results), results
    leader = results[0].leader
    generation = results[0].generation_id
    ids = [m for m, _ in joins]
    syncs = {m: h.sync(group, generation, m) for m in ids if m != leader}
    lead = h.sync(group, generation, leader, {m: m.encode() for m in ids})
    assert lead[0].error == 0 and lead[0].assignment == leader.encode()
    for m, s in syncs.items():
        assert s[0].assignment == m.encode()
    assert h.coordinator.group(group).state is STABLE
    return ids, leader, generation


def test_member_id_required_then_join_leader_and_vote():
    h = Harness()
    first = h.join("g")
    assert first[0].error == E.member_id_required and first[0].member_id.startswith("c-")
    assert h.coordinator.group("g").is_pending(first[0].member_id)
    a = h.join("g", first[0].member_id, protocols=[("roundrobin", b"A"), ("range", b"a")])
    b_id, b = h.join_member("g", protocols=[("range", b"b"), ("roundrobin", b"B")])
    c_id, c = h.join_member("g", protocols=[("roundrobin", b"C")])
    assert not a and not b and not c  # parked for the initial delay
    h.advance(99)
    assert not a
    h.advance(2)
    ra, rb, rc = a[0], b[0], c[0]
    assert ra.error == rb.error == rc.error == 0
    assert ra.generation_id == 1 and ra.protocol_name == "roundrobin"  # range is not supported by c
    assert ra.leader == first[0].member_id
    assert {m[0] for m in ra.members} == {first[0].member_id, b_id, c_id}
    assert dict((m[0], m[2]) for m in ra.members)[b_id] == b"B"
    assert rb.members == () and rc.members == ()


def test_initial_delay_restarts_with_each_new_member_but_not_past_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=100)
    _, a = h.join_member("g", rebalance_ms=250)
    for _ in range(3):
        h.advance(60)
        h.join_member("g", rebalance_ms=250)
    h.advance(60)  # 240 ms in: the last member joined 60 ms ago
    assert not a
    h.advance(20)  # the rebalance timeout (250 ms) caps the wait
    assert a and a[0].error == 0 and len(a[0].members) == 4


def test_invalid_input_errors():
    h = Harness(min_session_timeout_ms=500, max_session_timeout_ms=5000, max_size=2)
    assert h.join("")[0].error == E.invalid_group_id
    assert h.join("g", session_ms=100)[0].error == E.invalid_session_timeout
    assert h.join("g", session_ms=6000)[0].error == E.invalid_session_timeout
    assert h.join("g", "not-a-member")[0].error == E.unknown_member_id
    h.join_member("full")
    h.join_member("full")
    assert h.join("full")[0].error == E.group_max_size_reached
    h.join_member("g")
    assert h.join("g", protocol_type="connect")[0].error == E.inconsistent_group_protocol
    assert h.join("g", protocols=[("sticky", b"")])[0].error == E.inconsistent_group_protocol
    assert h.join("h", protocols=[])[0].error == E.inconsistent_group_protocol


def test_not_coordinator_and_loading():
    h = Harness()
    h.topic.led.clear()
    h.coordinator.sync_partitions()
    assert h.join("g")[0].error == E.not_coordinator
    h.topic.led.add(h.topic.partition_for("g"))
    h.coordinator.sync_partitions()
    h.coordinator.shards[h.topic.partition_for("g")].state = LOADING  # as while a large partition loads
    assert h.join("g")[0].error == E.coordinator_load_in_progress
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.coordinator.fetch_offsets("g", None)


def test_sync_waits_for_leader_and_checks_generation_and_protocol():
    h = Harness()
    (a, a_join), (b, _) = h.join_member("g"), h.join_member("g")
    h.advance(150)
    gen = a_join[0].generation_id
    leader = a_join[0].leader
    follower = b if leader == a else a
    assert h.sync("g", gen + 1, follower)[0].error == E.illegal_generation
    assert h.sync("g", gen, "nobody")[0].error == E.unknown_member_id
    assert h.sync("g", gen, follower, ptype="connect")[0].error == E.inconsistent_group_protocol
    assert h.sync("g", gen, follower, pname="sticky")[0].error == E.inconsistent_group_protocol
    waiting = h.sync("g", gen, follower, ptype="consumer", pname="range")
    assert not waiting
    assert h.coordinator.heartbeat("g", follower, None, gen) == 0  # heartbeats work between join and sync
    h.sync("g", gen, leader, {follower: b"F"})  # the leader forgot itself: it gets an empty assignment
    assert waiting[0] == (0, "consumer", "range", b"F")
    assert h.sync("g", gen, leader)[0].assignment == b""
    # the assignment was written before it was handed out
    (key, value) = h.topic.logs[h.topic.partition_for("g")][-1]
    record = schema.decode_group_metadata_value(value)
    assert record.generation == gen and record.protocol == "range"
    assert dict((m.member_id, m.assignment) for m in record.members)[follower] == b"F"


def test_heartbeat_answers_by_state():
    h = Harness()
    ids, leader, gen = stable_group(h)
    c = h.coordinator
    assert c.heartbeat("g", ids[1], None, gen) == 0
    with pytest.raises(errors.IllegalGenerationError):
        c.heartbeat("g", ids[1], None, gen - 1)
    with pytest.raises(errors.UnknownMemberIdError):
        c.heartbeat("g", "ghost", None, gen)
    with pytest.raises(errors.UnknownMemberIdError):
        c.heartbeat("nogroup", "ghost", None, 0)
    with pytest.raises(errors.InvalidGroupIdError):
        c.heartbeat("", "x", None, 0)
    # a new member starts a rebalance: the others hear about it in their heartbeat
    h.join_member("g")
    assert c.heartbeat("g", ids[1], None, gen) == E.rebalance_in_progress


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    ids, leader, gen = stable_group(h, session_ms=1000, rebalance_ms=500)
    survivor = ids[0]
    for _ in range(3):
        h.advance(300)
        assert h.coordinator.heartbeat("g", survivor, None, gen) == 0
    h.advance(150)  # 1050 ms without a heartbeat from ids[1]
    group = h.coordinator.group("g")
    assert group.state is PREPARING_REBALANCE and ids[1] not in group.members
    assert h.coordinator.heartbeat("g", survivor, None, gen) == E.rebalance_in_progress
    rejoin = h.join("g", survivor)
    assert rejoin[0].error == 0 and rejoin[0].generation_id == gen + 1 and rejoin[0].leader == survivor


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout():
    h = Harness()
    ids, leader, gen = stable_group(h, rebalance_ms=500, session_ms=10000)
    assert h.coordinator.leave_group("g", [(ids[0], None, "bye")]) == [0]
    group = h.coordinator.group("g")
    assert group.state is PREPARING_REBALANCE
    # ids[1] keeps heartbeating but never rejoins (it is stuck past max.poll.interval.ms)
    h.advance(300)
    assert h.coordinator.heartbeat("g", ids[1], None, gen) == E.rebalance_in_progress
    h.advance(250)
    assert group.state is EMPTY and not group.members and group.generation_id == gen + 1
    with pytest.raises(errors.UnknownMemberIdError):
        h.coordinator.heartbeat("g", ids[1], None, gen)


def test_leave_group_batch_and_by_instance_id():
    h = Harness()
    ids, leader, gen = stable_group(h, n=3)
    codes = h.coordinator.leave_group("g", [(ids[0], None, None), ("ghost", None, None), ("", "nope", None)])
    assert codes == [0, E.unknown_member_id, E.unknown_member_id]
    assert h.coordinator.group("g").state is PREPARING_REBALANCE
    assert h.coordinator.leave_group("nogroup", [("x", None, None)]) == [E.unknown_member_id]


def test_pending_member_that_never_rejoins_expires():
    h = Harness()
    first = h.join("g", session_ms=500)
    pending = first[0].member_id
    group = h.coordinator.group("g")
    assert group.is_pending(pending)
    h.advance(600)
    assert not group.is_pending(pending)
    assert h.join("g", pending)[0].error == E.unknown_member_id


def test_pending_member_holds_a_rebalance_only_until_its_session_expires():
    """A client closed between MEMBER_ID_REQUIRED and its real JoinGroup leaves a pending
    member behind; a rebalance waits for it (it may still come) until its session expires."""
    h = Harness()
    ids, leader, gen = stable_group(h, n=1, session_ms=10000, rebalance_ms=60000)
    pending = h.join("g", session_ms=800)[0].member_id
    rejoin = h.join("g", leader, session_ms=10000, rebalance_ms=60000)  # the leader asks for a round
    group = h.coordinator.group("g")
    assert not rejoin and group.state is PREPARING_REBALANCE and group.is_pending(pending)
    h.advance(700)
    assert not rejoin
    h.advance(200)
    assert rejoin and rejoin[0].error == 0 and rejoin[0].generation_id == gen + 1
    assert [m[0] for m in rejoin[0].members] == [leader] and not group.is_pending(pending)


def test_member_that_never_syncs_is_removed_after_rebalance_timeout():
    """A member that got its JoinGroup answer but never sends SyncGroup is dropped one
    rebalance timeout after the join phase ended, even while it heartbeats; the rest
    rebalance without it."""
    h = Harness()
    (a, a_join), (b, _) = (
        h.join_member("g", session_ms=10000, rebalance_ms=1000),
        h.join_member("g", session_ms=10000, rebalance_ms=1000),
    )
    h.advance(150)
    gen, leader = a_join[0].generation_id, a_join[0].leader
    silent = b if leader == a else a
    assert h.sync("g", gen, leader, {leader: b"L", silent: b"S"})[0].assignment == b"L"
    group = h.coordinator.group("g")
    assert group.state is STABLE and group.pending_sync_members == {silent}
    h.advance(900)
    assert h.coordinator.heartbeat("g", silent, None, gen) == 0  # alive, just never syncs
    assert silent in group.members
    h.advance(150)
    assert silent not in group.members and group.state is PREPARING_REBALANCE
    assert h.coordinator.heartbeat("g", leader, None, gen) == E.rebalance_in_progress
    rejoin = h.join("g", leader, session_ms=10000, rebalance_ms=1000)
    assert rejoin[0].error == 0 and rejoin[0].generation_id == gen + 1
    assert [m[0] for m in rejoin[0].members] == [leader]


def test_lone_member_that_never_syncs_leaves_the_group_empty():
    h = Harness()
    member, joined = h.join_member("g", session_ms=30000, rebalance_ms=1000)
    h.advance(150)
    group = h.coordinator.group("g")
    assert joined[0].leader == member and group.state is COMPLETING_REBALANCE
    h.advance(1000)
    assert group.state is EMPTY and not group.members
    # a consumer arriving now starts a fresh group at once, no session timeout to wait for
    newcomer, answer = h.join_member("g", session_ms=30000, rebalance_ms=1000)
    h.advance(150)
    assert answer[0].error == 0 and [m[0] for m in answer[0].members] == [newcomer]


def test_static_member_rejoins_without_rebalance():
    h = Harness()
    a = h.join("g", instance="i-a")  # static members never get MEMBER_ID_REQUIRED
    b = h.join("g", instance="i-b")
    h.advance(150)
    gen = a[0].generation_id
    a_id, b_id = a[0].member_id, b[0].member_id
    assert a_id.startswith("i-a-")
    leader = a[0].leader
    h.sync("g", gen, b_id if leader == a_id else a_id)
    h.sync("g", gen, leader, {a_id: b"A", b_id: b"B"})
    rebalances = h.coordinator.rebalances
    # b restarts: same instance id, no member id
    again = h.join("g", instance="i-b")
    assert again[0].error == 0 and again[0].generation_id == gen
    new_b = again[0].member_id
    assert new_b != b_id
    assert h.coordinator.rebalances == rebalances
    assert h.coordinator.group("g").state is STABLE
    assert h.sync("g", gen, new_b, instance="i-b")[0].assignment == b"B"
    # the old identity is fenced
    with pytest.raises(errors.FencedInstanceIdError):
        h.coordinator.heartbeat("g", b_id, "i-b", gen)
    assert h.coordinator.heartbeat("g", new_b, "i-b", gen) == 0
    # a static leader that rejoins (v9) is told to skip the assignment
    again_a = h.join("g", instance="i-a", skip=True)
    if leader == a_id:
        assert again_a[0].skip_assignment and again_a[0].leader == again_a[0].member_id and again_a[0].members
    # admin removal by instance id
    assert h.coordinator.leave_group("g", [("", "i-b", "admin")]) == [0]
    assert h.coordinator.group("g").state is PREPARING_REBALANCE


def test_commit_rules():
    h = Harness(offset_metadata_max_bytes=10)
    c = h.coordinator
    om = OffsetAndMetadata(5, -1, "meta")
    # standalone commits (no group management) create a group that only stores offsets
    assert c.commit_offsets("solo", "", None, -1, {("t", 0): om}) == {("t", 0): 0}
    assert c.group("solo").state is EMPTY
    assert c.commit_offsets("nogroup", "m", None, 3, {("t", 0): om}) == {("t", 0): E.illegal_generation}
    assert c.commit_offsets("solo", "", None, -1, {("t", 1): OffsetAndMetadata(1, -1, "x" * 11)}) == {
        ("t", 1): E.offset_metadata_too_large
    }
    ids, leader, gen = stable_group(h, "g")
    assert c.commit_offsets("g", "", None, -1, {("t", 0): om}) == {("t", 0): E.unknown_member_id}
    assert c.commit_offsets("g", ids[1], None, gen + 1, {("t", 0): om}) == {("t", 0): E.illegal_generation}
    assert c.commit_offsets("g", "ghost", None, gen, {("t", 0): om}) == {("t", 0): E.unknown_member_id}
    assert c.commit_offsets("g", ids[1], None, gen, {("t", 0): om}) == {("t", 0): 0}
    got = dict(c.fetch_offsets("g", [("t", 0), ("t", 9)]))
    assert got[("t", 0)].offset == 5 and got[("t", 0)].metadata == "meta" and got[("t", 9)] is None
    assert [tp for tp, _ in c.fetch_offsets("g", None)] == [("t", 0)]
    # while the group completes a rebalance, commits wait for the new generation
    h.join_member("g")
    h.join("g", ids[0])
    h.join("g", ids[1])
    h.advance(10)
    assert c.group("g").state is COMPLETING_REBALANCE
    gen2 = c.group("g").generation_id
    assert c.commit_offsets("g", ids[1], None, gen2, {("t", 0): om}) == {("t", 0): E.rebalance_in_progress}
    # a failed append is reported per partition, mapped as Kafka does
    h.topic.fail = errors.NotLeaderOrFollowerError("moved")
    assert c.commit_offsets("solo", "", None, -1, {("t", 0): om}) == {("t", 0): E.not_coordinator}


def test_a_commit_is_not_fetched_until_it_reaches_the_isr_and_a_failed_one_keeps_the_old_offset():
    h = Harness()
    c = h.coordinator
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(5)})
    h.topic.hold_replication = True
    settled: list[int] = []
    assert c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(9)}, settled=settled.append) == {
        ("t", 0): 0
    }
    assert settled == [] and dict(c.fetch_offsets("solo", None))[("t", 0)].offset == 5  # pending
    assert c.unstable_offsets("solo") == {("t", 0)}  # what require_stable is told
    h.topic.settle_held(E.coordinator_not_available)
    assert settled == [E.coordinator_not_available]
    assert dict(c.fetch_offsets("solo", None))[("t", 0)].offset == 5  # dropped; the old one stays
    assert c.unstable_offsets("solo") == set()
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(10), ("t", 1): OffsetAndMetadata(3)})
    assert {tp: om.offset for tp, om in c.fetch_offsets("solo", None)} == {("t", 0): 5}
    h.topic.settle_held(0)
    assert {tp: om.offset for tp, om in c.fetch_offsets("solo", None)} == {("t", 0): 10, ("t", 1): 3}


def test_offsets_deleted_while_their_commit_is_pending_stay_deleted():
    h = Harness()
    c = h.coordinator
    h.topic.hold_replication = True
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)})
    assert c.fetch_offsets("solo", None) == []
    assert c.delete_offsets("solo", [("t", 0)]) == {("t", 0): 0}
    tombstones = [k for k, v, *_ in h.topic.logs[h.topic.partition_for("solo")] if v is None]
    assert tombstones == [schema.encode_offset_commit_key("solo", "t", 0)]  # the written record is deleted too
    assert c.delete_groups(["solo"]) == {"solo": 0}
    h.topic.settle_held(0)
    assert c.fetch_offsets("solo", None) == []
    assert c.group("solo") is None


def test_offset_delete_and_group_delete():
    h = Harness()
    c = h.coordinator
    ids, leader, gen = stable_group(h, "g", protocols=[("range", subscription("t"))])
    c.commit_offsets("g", ids[0], None, gen, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)})
    res = c.delete_offsets("g", [("t", 0), ("u", 0)])
    assert res == {("t", 0): E.group_subscribed_to_topic, ("u", 0): 0}
    assert c.delete_groups(["g", "missing"]) == {"g": E.non_empty_group, "missing": E.group_id_not_found}
    with pytest.raises(errors.GroupIdNotFoundError):
        c.delete_offsets("missing", [("t", 0)])
    c.leave_group("g", [(m, None, None) for m in ids])
    assert c.group("g").state is EMPTY
    assert c.delete_groups(["g"]) == {"g": 0}
    assert c.group("g") is None
    tombstones = [k for k, v in h.topic.logs[h.topic.partition_for("g")] if v is None]
    assert schema.encode_group_metadata_key("g") in tombstones
    assert schema.encode_offset_commit_key("g", "t", 0) in tombstones


def test_describe_and_list():
    h = Harness()
    c = h.coordinator
    ids, leader, gen = stable_group(h, "g")
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
    d = c.describe_group("g")
    assert d["group_state"] == "Stable" and d["protocol_type"] == "consumer" and d["protocol_data"] == "range"
    assert {m["member_id"] for m in d["members"]} == set(ids)
    assert all(m["member_assignment"] == m["member_id"].encode() for m in d["members"])
    assert c.describe_group("missing") is None
    err, groups = c.list_groups()
    assert err == 0 and {(g["group_id"], g["group_state"]) for g in groups} == {
        ("g", "Stable"),
        ("solo", "Empty"),
    }
    assert [g["group_id"] for g in c.list_groups(["stable"])[1]] == ["g"]
    assert c.list_groups(None, ["consumer"])[1] == []


def test_offset_expiry_follows_kafka_rules():
    h = Harness(offsets_retention_ms=60_000)
    c = h.coordinator
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
    ids, leader, gen = stable_group(h, "g", protocols=[("range", subscription("t"))])
    c.commit_offsets("g", ids[0], None, gen, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)})
    h.now += 61_000
    assert c.expire_offsets() == 2  # solo's offset, and g's offset of a topic it does not subscribe to
    assert c.group("solo") is None
    assert [tp for tp, _ in c.fetch_offsets("g", None)] == [("t", 0)]
    c.leave_group("g", [(m, None, None) for m in ids])
    assert c.group("g").state is EMPTY
    h.now += 30_000
    assert c.expire_offsets() == 0  # an empty group's offsets age from when it became empty
    h.now += 31_000
    assert c.expire_offsets() == 1
    assert c.group("g") is None


def test_state_survives_replay():
    h = Harness()
    c = h.coordinator
    ids, leader, gen = stable_group(h, "g")
    c.commit_offsets("g", ids[0], None, gen, {("t", 0): OffsetAndMetadata(7, 3, "m")})
    c.commit_offsets("solo", "", None, -1, {("t", 1): OffsetAndMetadata(9)})
    c.commit_offsets("gone", "", None, -1, {("t", 1): OffsetAndMetadata(9)})
    c.delete_groups(["gone"])
    # a new coordinator over the same log
    h2 = Harness(topic=h.topic)
    c2 = h2.coordinator
    g = c2.group("g")
    assert (
        g.state is STABLE and g.generation_id == gen and set(g.members) == set(ids) and g.leader_id == leader
    )
    assert g.get(ids[1]).assignment == ids[1].encode()
    assert dict(c2.fetch_offsets("g", None))[("t", 0)] == OffsetAndMetadata(7, 3, "m", h.now)
    assert c2.group("gone") is None and c2.group("solo") is not None
    # loaded members keep their generation: heartbeats go on without a rebalance
    assert c2.heartbeat("g", ids[0], None, gen) == 0
    # ... and a member that does not come back times out
    for _ in range(3):
        h2.advance(400)
        c2.heartbeat("g", ids[0], None, gen)
    assert g.state is PREPARING_REBALANCE and ids[1] not in g.members


def test_partition_count_change_starts_a_rebalance():
    h = Harness()
    ids, leader, gen = stable_group(h, "g", protocols=[("range", subscription("t"))])
    h.coordinator.on_metadata_change("partitions", "other")
    assert h.coordinator.group("g").state is STABLE
    h.coordinator.on_metadata_change("partitions", "t")
    assert h.coordinator.group("g").state is PREPARING_REBALANCE


def test_a_leader_change_does_not_start_a_rebalance():
    """In a cluster every LeaderAndIsr announces "partitions" for its topics: only a new
    partition count rebalances the groups subscribed to the topic."""
    h = Harness()
    h.topic.topic_counts["t"] = 2
    h.coordinator.on_metadata_change("created", "t")
    ids, leader, gen = stable_group(h, "g", protocols=[("range", subscription("t"))])
    h.coordinator.on_metadata_change("partitions", "t")
    assert h.coordinator.group("g").state is STABLE
    h.topic.topic_counts["t"] = 3
    h.coordinator.on_metadata_change("partitions", "t")
    assert h.coordinator.group("g").state is PREPARING_REBALANCE


def test_deleted_topic_offsets_are_dropped():
    h = Harness()
    c = h.coordinator
    c.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(1)})
    c.on_metadata_change("deleted", "t")
    assert [tp for tp, _ in c.fetch_offsets("solo", None)] == [("u", 0)]


def test_unload_answers_waiters_with_not_coordinator():
    h = Harness()
    _, a = h.join_member("g")
    p = h.topic.partition_for("g")
    h.topic.led.discard(p)
    h.coordinator.sync_partitions()
    assert a[0].error == E.not_coordinator
    assert h.coordinator.group("g") is None


def test_protocol_named_twice_counts_once():
    h = Harness()
    _, a = h.join_member("g", protocols=[("range", b"1"), ("range", b"2")])
    h.advance(150)
    assert a[0].error == 0 and a[0].protocol_name == "range" and a[0].members[0][2] == b"1"


async def _until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0)


def test_large_partition_loads_chunk_by_chunk_answering_load_in_progress_meanwhile():
    """A partition over the load budget is replayed in a task: its groups answer
    COORDINATOR_LOAD_IN_PROGRESS until the last chunk is in, then are served as written."""
    h = Harness()
    c = h.coordinator
    ids, leader, gen = stable_group(h, "g")
    for i in range(50):
        c.commit_offsets("g", ids[0], None, gen, {("t", i): OffsetAndMetadata(i)})
    h.topic.size = 10 * h.coordinator.config.load_buffer_size
    h.topic.chunk_records = 7

    async def main():
        h2 = Harness(topic=h.topic)
        c2 = h2.coordinator
        try:
            with pytest.raises(errors.CoordinatorLoadInProgressError):
                c2.fetch_offsets("g", None)
            assert c2.list_groups()[0] == E.coordinator_load_in_progress
            await _until(lambda: c2.group("g") is not None and c2.shards[h.topic.partition_for("g")].active)
            assert dict(c2.fetch_offsets("g", None)) == dict(c.fetch_offsets("g", None))
            assert c2.group("g").state is STABLE and c2.list_groups()[0] == 0
        finally:
            await c2.close()

    asyncio.run(main())


def test_transaction_marker_written_while_loading_completes_after_the_load():
    """A COMMIT marker that lands past the end of the replay still commits the offsets the
    replay found pending."""
    h = Harness()
    p = h.topic.partition_for("g")
    om = OffsetAndMetadata(42, -1, "")
    assert h.coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): om}) == {
        ("t", 0): 0
    }
    assert h.coordinator.fetch_offsets("g", [("t", 0)]) == [(("t", 0), None)]
    assert h.coordinator.unstable_offsets("g") == {("t", 0)}
    h.topic.size = 10 * h.coordinator.config.load_buffer_size

    async def main():
        started = h.topic.replays_started[p]
        h2 = Harness(topic=h.topic)
        c2 = h2.coordinator
        try:
            assert not c2.shards[p].active
            await _until(lambda: h.topic.replays_started[p] > started)  # the new coordinator's replay began
            h.topic.write_marker(p, 7, True)
            c2.complete_transaction(p, 7, True)  # what the transaction coordinator does after writing it
            await _until(lambda: c2.shards[p].active)
            assert dict(c2.fetch_offsets("g", [("t", 0)]))[("t", 0)].offset == 42
            assert c2.unstable_offsets("g") == set()
        finally:
            await c2.close()

    asyncio.run(main())
    h.topic.size = 0
    reloaded = Harness(topic=h.topic).coordinator  # and the marker replays the same way
    assert dict(reloaded.fetch_offsets("g", [("t", 0)]))[("t", 0)].offset == 42


def test_partition_that_fails_to_load_is_not_served_until_loaded_again():
    h = Harness()
    h.coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(5)})
    p = h.topic.partition_for("g")
    h.topic.unreadable.add(p)
    h2 = Harness(topic=h.topic)
    with pytest.raises(errors.NotCoordinatorError):
        h2.coordinator.fetch_offsets("g", None)
    other = next(g for g in (f"g{i}" for i in range(100)) if h.topic.partition_for(g) != p)
    assert h2.coordinator.fetch_offsets(other, None) == []  # the other partitions are served
    h.topic.unreadable.clear()
    h2.coordinator.sync_partitions()  # the next leadership change loads it
    assert dict(h2.coordinator.fetch_offsets("g", None))[("t", 0)].offset == 5


def test_consumer_group_offsets_expire_by_kafkas_rule():
    """Offsets of topics a consumer-protocol group does not subscribe to age from their commit;
    an empty group left without offsets is removed."""
    from odradek.broker.group.consumer_group_manager import HeartbeatRequest

    h = Harness(offsets_retention_ms=60_000)
    c = h.coordinator

    def beat(epoch: int):
        return c.consumer_group_heartbeat(
            HeartbeatRequest("cg", "m1", epoch, None, None, 30_000, ("t",), None, None, {} if epoch == 0 else None,
                             "c", "/h", 1)
        )

    async def scenario():
        joined = beat(0)
        assert c.commit_offsets(
            "cg", "m1", None, joined.member_epoch, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)}
        ) == {("t", 0): 0, ("u", 0): 0}
        h.now += 61_000
        assert c.expire_offsets() == 1  # u: not subscribed
        assert [tp for tp, _ in c.fetch_offsets("cg", None)] == [("t", 0)]
        beat(-1)
        assert c.expire_offsets() == 1  # nobody subscribes to t any more
        assert c.consumer_group("cg") is None

    asyncio.run(scenario())


def test_transactional_offsets_count_once_their_marker_is_in_the_isr_and_vanish_if_their_write_is_not():
    h = Harness()
    c = h.coordinator
    p = h.topic.partition_for("g")
    h.topic.hold_replication = True
    settled: list[int] = []
    assert c.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): OffsetAndMetadata(3)}, settled.append) == {
        ("t", 0): 0
    }
    assert c.unstable_offsets("g") == {("t", 0)} and settled == []
    h.topic.settle_held(E.coordinator_not_available)  # the batch did not reach the ISR: no longer pending
    assert settled == [E.coordinator_not_available] and c.unstable_offsets("g") == set()
    c.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): OffsetAndMetadata(4)})
    h.topic.settle_held(0)
    h.topic.write_marker(p, 7, True)
    c.complete_transaction(p, 7, True)
    assert c.fetch_offsets("g", [("t", 0)]) == [(("t", 0), None)]  # the marker is not in the ISR yet
    assert c.unstable_offsets("g") == {("t", 0)}
    h.topic.settle_held(E.coordinator_not_available)  # a marker stays written: its wait starts again
    assert c.fetch_offsets("g", [("t", 0)]) == [(("t", 0), None)] and len(h.topic.unsettled) == 1
    h.topic.settle_held(0)
    assert dict(c.fetch_offsets("g", [("t", 0)]))[("t", 0)].offset == 4
    assert c.unstable_offsets("g") == set()


def test_a_generation_is_stable_and_assigned_only_once_its_assignment_is_in_the_isr():
    h = Harness()
    c = h.coordinator
    joins = [h.join_member("g") for _ in range(2)]
    h.advance(150)
    leader, generation = joins[0][1][0].leader, joins[0][1][0].generation_id
    ids = [m for m, _ in joins]
    h.topic.hold_replication = True
    follower = h.sync("g", generation, ids[1] if ids[0] == leader else ids[0])
    lead = h.sync("g", generation, leader, {m: m.encode() for m in ids})
    assert lead == [] and follower == []  # nobody is told before the assignment is in the ISR
    assert c.describe_group("g")["group_state"] == "CompletingRebalance"
    assert all(m["member_assignment"] == b"" for m in c.describe_group("g")["members"])
    h.topic.settle_held(E.coordinator_not_available)
    assert lead[0].error == follower[0].error == E.coordinator_not_available
    assert c.group("g").state is PREPARING_REBALANCE  # the members rejoin
    joins = [h.join("g", m) for m in ids]
    h.advance(10)
    generation = joins[0][0].generation_id
    leader = joins[0][0].leader
    lead = h.sync("g", generation, leader, {m: m.encode() for m in ids})
    assert lead == []
    h.topic.settle_held(0)
    assert lead[0].error == 0 and lead[0].assignment == leader.encode()
    d = c.describe_group("g")
    assert d["group_state"] == "Stable" and {m["member_assignment"] for m in d["members"]} == {m.encode() for m in ids}
