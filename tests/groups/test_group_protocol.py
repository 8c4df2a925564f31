"""Group APIs on the wire, with hand-made requests: versions, batching, and the error code of each bad input."""

from __future__ import annotations

import time
import uuid

import pytest
from group_raw import RawClient

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import known_versions

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE = 10, 11, 12, 13, 14, 15, 16, 42
COMMIT, FETCH, OFFSET_DELETE, CREATE_TOPICS = 8, 9, 47, 19

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"


def gid(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def join_body(
    group: str, member_id: str = "", *, session=6000, ptype="consumer", protocols=None, instance=None
):
    return {
        "group_id": group,
        "session_timeout": session,
        "rebalance_timeout": 5000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": ptype,
        "protocols": protocols if protocols is not None else [{"name": "range", "metadata": SUB}],
    }


def find(raw: RawClient, group: str):
    return raw.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})


def create_topic(raw: RawClient, name: str, partitions: int = 3) -> None:
    resp = raw.request(
        CREATE_TOPICS,
        5,
        {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout": 10000},
    )
    assert resp.topics[0].error_code in (E.none, E.topic_already_exists)


def test_not_coordinator_until_offsets_topic_exists(own_broker):
    broker = own_broker(**{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5})
    with RawClient(broker) as raw:
        assert raw.request(JOIN, 5, join_body("g")).error_code == E.not_coordinator
        assert raw.request(FETCH, 7, {"group_id": "g", "topics": None}).error_code == E.not_coordinator
        found = find(raw, "g")
        assert found.error_code == E.none and found.node_id == 0 and found.port == broker.port
        assert raw.request(JOIN, 3, join_body("g")).error_code == E.none


def test_find_coordinator_every_version_and_batched(group_broker):
    with RawClient(group_broker) as raw:
        for version in range(0, 4):
            resp = raw.request(FIND_COORDINATOR, version, {"key": gid(), "key_type": 0})
            assert resp.error_code == E.none and resp.node_id == 0 and resp.port == group_broker.port
        keys = [gid() for _ in range(3)]
        for version in range(4, max(known_versions(FIND_COORDINATOR)) + 1):
            resp = raw.request(FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": keys})
            assert [c.key for c in resp.coordinators] == keys
            assert all(c.error_code == E.none and c.node_id == 0 for c in resp.coordinators)
        bad = raw.request(FIND_COORDINATOR, 4, {"key_type": 5, "coordinator_keys": ["x"]})
        assert bad.coordinators[0].error_code == E.invalid_request


def test_bad_input_gets_kafka_error_codes(group_broker):
    group = gid()
    with RawClient(group_broker) as raw:
        find(raw, group)
        create_topic(raw, "bad-input-topic", 2)
        assert raw.request(JOIN, 5, join_body("")).error_code == E.invalid_group_id
        assert raw.request(
            HEARTBEAT, 3, {"group_id": "", "generation_id": 1, "member_id": "m"}
        ).error_code == (E.invalid_group_id)
        assert raw.request(JOIN, 5, join_body(group, session=100)).error_code == E.invalid_session_timeout
        assert raw.request(JOIN, 5, join_body(group, session=10**8)).error_code == E.invalid_session_timeout
        assert raw.request(JOIN, 5, join_body(group, "unknown-member")).error_code == E.unknown_member_id
        # a group of 8 (group.max.size) refuses a ninth member
        members = [RawClient(group_broker) for _ in range(8)]
        try:
            for m in members:
                m.send(JOIN, 3, join_body(group))
            time.sleep(0.05)
            full = raw.request(JOIN, 3, join_body(group))
            assert full.error_code == E.group_max_size_reached
            joined = [m.receive(JOIN, 3)[1] for m in members]
        finally:
            for m in members:
                m.close()
        assert all(j.error_code == E.none for j in joined)
        # a member of another protocol type, or with no protocol in common, cannot join
        small = gid()
        find(raw, small)
        one = raw.request(JOIN, 3, join_body(small))
        generation = one.generation_id
        assert (
            raw.request(JOIN, 5, join_body(small, ptype="connect")).error_code
            == E.inconsistent_group_protocol
        )
        other = [{"name": "sticky", "metadata": SUB}]
        assert (
            raw.request(JOIN, 5, join_body(small, protocols=other)).error_code
            == E.inconsistent_group_protocol
        )
        hb = {"group_id": small, "generation_id": generation + 5, "member_id": one.member_id}
        assert raw.request(HEARTBEAT, 3, hb).error_code == E.illegal_generation
        hb.update(generation_id=generation, member_id="ghost")
        assert raw.request(HEARTBEAT, 3, hb).error_code == E.unknown_member_id
        # offsets: unknown topics and partitions, oversized metadata
        commit = {
            "group_id": gid("solo"),
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1}]},
                {
                    "name": "bad-input-topic",
                    "partitions": [
                        {"partition_index": 7, "committed_offset": 1},
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": "x" * 5000},
                        {"partition_index": 1, "committed_offset": 3, "committed_metadata": "ok"},
                    ],
                },
            ],
        }
        find(raw, commit["group_id"])
        resp = raw.request(COMMIT, 8, commit)
        codes = [[p.error_code for p in t.partitions] for t in resp.topics]
        assert codes == [
            [E.unknown_topic_or_partition],
            [E.unknown_topic_or_partition, E.offset_metadata_too_large, E.none],
        ]
        # a group with members refuses commits from outside and cannot be deleted
        outsider = dict(commit, group_id=group, topics=commit["topics"][1:])
        assert raw.request(COMMIT, 8, outsider).topics[0].partitions[2].error_code == E.unknown_member_id
        deleted = raw.request(DELETE, 2, {"groups_names": [group, gid("missing")]})
        assert [r.error_code for r in deleted.results] == [E.non_empty_group, E.group_id_not_found]
        # ... and the coordinator keeps serving other groups
        assert raw.request(JOIN, 3, join_body(gid())).error_code == E.none


def test_member_id_required_and_batched_leave(group_broker):
    group = gid()
    with RawClient(group_broker) as a, RawClient(group_broker) as b:
        find(a, group)
        first = a.request(JOIN, 4, join_body(group))
        assert first.error_code == E.member_id_required and first.member_id
        second = b.request(JOIN, 9, join_body(group))
        assert second.error_code == E.member_id_required
        a.send(JOIN, 4, join_body(group, first.member_id))
        b.send(JOIN, 9, join_body(group, second.member_id))
        ja, jb = a.receive(JOIN, 4)[1], b.receive(JOIN, 9)[1]
        assert ja.error_code == jb.error_code == E.none and ja.generation_id == jb.generation_id == 1
        assert jb.protocol_type == "consumer" and jb.protocol_name == "range"
        leader = a if ja.leader == first.member_id else b
        members = [first.member_id, second.member_id]
        sync = {"group_id": group, "generation_id": 1, "member_id": ja.leader}
        resp = leader.request(
            SYNC, 5, dict(sync, assignments=[{"member_id": m, "assignment": b"x"} for m in members])
        )
        assert resp.error_code == E.none and resp.assignment == b"x"
        described = a.request(DESCRIBE, 5, {"groups": [group]}).groups[0]
        assert described.group_state == "CompletingRebalance" or described.group_state == "Stable"
        leave = a.request(
            LEAVE,
            5,
            {
                "group_id": group,
                "members": [
                    {"member_id": members[0], "reason": "test"},
                    {"member_id": members[1]},
                    {"member_id": "ghost"},
                ],
            },
        )
        assert leave.error_code == E.none
        assert [m.error_code for m in leave.members] == [E.none, E.none, E.unknown_member_id]
        # the follower's SyncGroup (never sent) does not hold the group: it is empty now
        described = a.request(DESCRIBE, 5, {"groups": [group]}).groups[0]
        assert described.group_state == "Empty" and not described.members
        v0 = a.request(LEAVE, 0, {"group_id": group, "member_id": "ghost"})
        assert v0.error_code == E.unknown_member_id


def test_offset_fetch_single_and_multi_group(group_broker):
    groups = [gid("f"), gid("f")]
    topic = "fetch-topic"
    with RawClient(group_broker) as raw:
        for g in groups:
            find(raw, g)
        create_topic(raw, topic, 3)
        for n, g in enumerate(groups):
            resp = raw.request(
                COMMIT,
                2,
                {
                    "group_id": g,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "retention_time": -1,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "committed_offset": 10 * n + p,
                                    "committed_metadata": f"m{p}",
                                }
                                for p in range(3)
                            ],
                        }
                    ],
                },
            )
            assert all(p.error_code == E.none for p in resp.topics[0].partitions)
        want = [{"name": topic, "partition_indexes": [0, 2]}]
        for version in range(1, 8):
            resp = raw.request(FETCH, version, {"group_id": groups[1], "topics": want})
            parts = {p.partition_index: (p.committed_offset, p.metadata) for p in resp.topics[0].partitions}
            assert parts == {0: (10, "m0"), 2: (12, "m2")}
        everything = raw.request(FETCH, 7, {"group_id": groups[0], "topics": None, "require_stable": True})
        assert sorted(p.committed_offset for p in everything.topics[0].partitions) == [0, 1, 2]
        multi = raw.request(
            FETCH,
            8,
            {
                "groups": [
                    {"group_id": groups[0], "topics": want},
                    {"group_id": groups[1], "topics": None},
                    {"group_id": gid("none"), "topics": want},
                ]
            },
        )
        a, b, c = multi.groups
        assert [p.committed_offset for p in a.topics[0].partitions] == [0, 2]
        assert sorted(p.committed_offset for p in b.topics[0].partitions) == [10, 11, 12]
        assert [p.committed_offset for p in c.topics[0].partitions] == [-1, -1]
        # OffsetDelete on an empty group
        deleted = raw.request(
            OFFSET_DELETE,
            0,
            {"group_id": groups[0], "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
        )
        assert deleted.error_code == E.none and deleted.topics[0].partitions[0].error_code == E.none
        after = raw.request(FETCH, 7, {"group_id": groups[0], "topics": None})
        assert sorted(p.partition_index for p in after.topics[0].partitions) == [1, 2]


GROUP_APIS = [
    FIND_COORDINATOR,
    JOIN,
    HEARTBEAT,
    LEAVE,
    SYNC,
    DESCRIBE,
    LIST,
    DELETE,
    COMMIT,
    FETCH,
    OFFSET_DELETE,
    68,  # ConsumerGroupHeartbeat (KIP-848)
    69,  # ConsumerGroupDescribe
]


def test_every_advertised_version_answers(group_broker):
    """A minimal request at every version of every group API decodes (so each encoder is right)."""
    with RawClient(group_broker) as raw:
        versions = raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        group = gid("v")
        find(raw, group)
        for api in GROUP_APIS:
            low, high = advertised[api]
            for version in range(low, high + 1):
                body = {"group_id": group, "groups": [group], "groups_names": [gid("d")], "key": group}
                if api == JOIN:
                    body = join_body(group, session=100)  # answered at once: INVALID_SESSION_TIMEOUT
                if api == FETCH and version >= 8:
                    body = {"groups": [{"group_id": group, "topics": None}]}
                if api == 68:  # answered at once: UNKNOWN_MEMBER_ID
                    body = {"group_id": group, "member_id": "m", "member_epoch": 3, "topic_partitions": None}
                if api == 69:
                    body = {"group_ids": [group], "include_authorized_operations": False}
                resp = raw.request(api, version, body)
                assert resp is not None, (api, version)


@pytest.mark.timeout(120)
def test_coordinator_load_in_progress_after_restart(own_broker):
    """A big __consumer_offsets partition loads in chunks; meanwhile requests get COORDINATOR_LOAD_IN_PROGRESS."""
    broker = own_broker(
        **{
            "offsets.topic.num.partitions": 1,
            "offsets.load.buffer.size": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
    )
    group = "loader"
    with RawClient(broker) as raw:
        find(raw, group)
        create_topic(raw, "load-topic", 1)
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "load-topic", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        }
        count = 6000
        for i in range(count):
            body["topics"][0]["partitions"][0]["committed_offset"] = i
            raw.send(COMMIT, 8, body)
        for _ in range(count):
            raw.receive(COMMIT, 8)
    broker.stop()
    broker.start()
    seen = []
    deadline = time.monotonic() + 60
    with RawClient(broker) as raw:
        while time.monotonic() < deadline:
            resp = raw.request(FETCH, 7, {"group_id": group, "topics": None})
            seen.append(resp.error_code)
            if resp.error_code == E.none:
                break
            time.sleep(0.001)
    assert seen[-1] == E.none
    assert E.coordinator_load_in_progress in seen
    assert resp.topics[0].partitions[0].committed_offset == count - 1


def test_member_that_misses_the_rebalance_timeout_is_removed(group_broker):
    """A member that heartbeats but never rejoins (stuck past max.poll.interval.ms) is dropped."""
    group = gid("stuck")
    body = dict(join_body(group), rebalance_timeout=600)
    with RawClient(group_broker) as a, RawClient(group_broker) as b, RawClient(group_broker) as c:
        find(a, group)
        a.send(JOIN, 3, body)
        b.send(JOIN, 3, body)
        ja, jb = a.receive(JOIN, 3)[1], b.receive(JOIN, 3)[1]
        gen = ja.generation_id
        leader, follower = (a, b) if ja.leader == ja.member_id else (b, a)
        lj, fj = (ja, jb) if leader is a else (jb, ja)
        leader.request(SYNC, 3, {"group_id": group, "generation_id": gen, "member_id": lj.member_id})
        follower.request(SYNC, 3, {"group_id": group, "generation_id": gen, "member_id": fj.member_id})
        c.send(JOIN, 3, body)  # a third member starts a rebalance
        time.sleep(0.05)
        hb = {"group_id": group, "generation_id": gen, "member_id": fj.member_id}
        assert follower.request(HEARTBEAT, 3, hb).error_code == E.rebalance_in_progress
        started = time.monotonic()
        leader.send(JOIN, 3, dict(body, member_id=lj.member_id))  # the leader rejoins, the follower does not
        rejoined = leader.receive(JOIN, 3)[1]
        waited = time.monotonic() - started
        third = c.receive(JOIN, 3)[1]
        assert rejoined.error_code == third.error_code == E.none and rejoined.generation_id == gen + 1
        assert {m.member_id for m in rejoined.members} == {lj.member_id, third.member_id}
        assert 0.4 < waited < 3
        assert follower.request(HEARTBEAT, 3, hb).error_code == E.unknown_member_id


def test_member_that_never_syncs_is_removed_after_rebalance_timeout(group_broker):
    """A member that joined but never sends SyncGroup (its client died between the two, or
    closed without leaving) is dropped one rebalance timeout after the join phase, even while
    something heartbeats for it; the survivor rebalances without it (Kafka's pending sync)."""
    group = gid("nosync")
    body = dict(join_body(group, session=10000), rebalance_timeout=1000)
    with RawClient(group_broker) as a, RawClient(group_broker) as b:
        find(a, group)
        ids = [raw.request(JOIN, 5, body).member_id for raw in (a, b)]
        a.send(JOIN, 5, dict(body, member_id=ids[0]))
        b.send(JOIN, 5, dict(body, member_id=ids[1]))
        ja, jb = a.receive(JOIN, 5)[1], b.receive(JOIN, 5)[1]
        gen = ja.generation_id
        assert ja.error_code == jb.error_code == E.none and jb.generation_id == gen
        (leader, lid), (silent, sid) = (
            ((a, ids[0]), (b, ids[1])) if ja.leader == ids[0] else ((b, ids[1]), (a, ids[0]))
        )
        assignments = [{"member_id": m, "assignment": m.encode()} for m in ids]
        synced = leader.request(
            SYNC, 5, {"group_id": group, "generation_id": gen, "member_id": lid, "assignments": assignments}
        )
        assert synced.error_code == E.none
        hb = {"group_id": group, "generation_id": gen}
        deadline = time.monotonic() + 10
        # the silent member heartbeats (its session never runs out) until it is dropped
        while (code := silent.request(HEARTBEAT, 3, dict(hb, member_id=sid)).error_code) == E.none:
            assert time.monotonic() < deadline, "the member that never synced was never removed"
            time.sleep(0.05)
        assert code == E.unknown_member_id
        assert leader.request(HEARTBEAT, 3, dict(hb, member_id=lid)).error_code == E.rebalance_in_progress
        rejoined = leader.request(JOIN, 5, dict(body, member_id=lid))
        assert rejoined.error_code == E.none and rejoined.generation_id == gen + 1
        assert [m.member_id for m in rejoined.members] == [lid]
