"""Replica fetchers in incremental fetch sessions (KIP-227), between real brokers: after one
full fetch, a follower's requests and the leader's answers carry only partitions that
changed; a leader that lost the session (evicted, restarted) gets a new one and nothing is
lost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.cluster.replication_support import ReplicaSet, partition_state, wait_for
from tests.cluster.test_replication import _produce

PARTITIONS = 10


@pytest.fixture
def three():
    with ReplicaSet(3) as rs:
        yield rs


def _lead_all(rs, topic):
    rs.create_topic(topic, {i: [1, 2, 3] for i in range(PARTITIONS)})
    rs.leader_and_isr([partition_state(topic, i, 1, 1, [1, 2, 3], [1, 2, 3]) for i in range(PARTITIONS)])


def _sessions(rs):
    """The leader's fetch sessions: (follower's?, partitions, next epoch)."""
    return rs.brokers[1].call(
        lambda b: sorted((s.privileged, len(s.partitions), s.epoch) for s in b.fetch_sessions.sessions.values())
    )


def _fetch_responses(rs, topic):
    """How many fetch responses of the leader named ``topic`` (TotalFetchRequestsPerSec)."""
    return rs.brokers[1].call(lambda b: b.replica_manager.topic_metrics.for_topic(topic).fetch_requests)


def test_followers_fetch_in_sessions_and_idle_partitions_drop_out_of_the_answers(three):
    rs = three
    _lead_all(rs, "busy")
    _lead_all(rs, "idle")
    wait_for(
        lambda: [(p, n) for p, n, e in _sessions(rs) if e >= 3] == [(True, 2 * PARTITIONS)] * 2,
        what="both followers in incremental sessions of all 20 partitions",
    )
    idle_before, busy_before = _fetch_responses(rs, "idle"), _fetch_responses(rs, "busy")
    assert not [e for e, _ in _produce(rs.bootstrap(1), "busy", [b"x"] * 50) if e]
    wait_for(lambda: all(rs.partition(i, "busy").hw == 50 for i in (2, 3)), what="followers caught up")
    assert _fetch_responses(rs, "busy") > busy_before
    assert _fetch_responses(rs, "idle") == idle_before  # no answer named the idle topic
    assert rs.batches(2, "busy") == rs.batches(3, "busy") == rs.batches(1, "busy")


def test_a_follower_starts_a_new_session_when_the_leader_lost_its_own(three):
    rs = three
    _lead_all(rs, "t")
    wait_for(lambda: len([s for s in _sessions(rs) if s[2] >= 3]) == 2, what="sessions")
    rs.brokers[1].call(lambda b: b.fetch_sessions.sessions.clear())  # as after an eviction or a restart
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"y"] * 30) if e]
    wait_for(lambda: all(rs.partition(i, "t").hw == 30 for i in (2, 3)), what="followers caught up")
    assert rs.batches(2, "t") == rs.batches(1, "t") == rs.batches(3, "t")
    wait_for(lambda: len([s for s in _sessions(rs) if s[2] >= 2]) == 2, what="new sessions")


def _stop_replicas(rs, node_id: int, topic: str) -> None:
    """StopReplica of every partition of ``topic`` on ``node_id``, deleting them (a reassignment
    that moved them away), as the controller sends it."""
    request = SimpleNamespace(
        controller_epoch=rs.controller_epoch,
        topic_states=[
            SimpleNamespace(
                topic_name=topic,
                partition_states=[
                    SimpleNamespace(partition_index=i, leader_epoch=-1, delete_partition=True) for i in range(PARTITIONS)
                ],
            )
        ],
    )
    assert rs.brokers[node_id].call(lambda b: b.replica_manager.stop_replicas(request))[0] == 0


def test_a_retired_fetcher_closes_its_session_and_the_leader_frees_the_slot_at_once(three):
    """KIP-227's close (session id, epoch -1): without it the leader keeps a retired fetcher's
    session until a new session needs the slot and this one has been idle 120 s."""
    rs = three
    _lead_all(rs, "t")
    wait_for(lambda: len([s for s in _sessions(rs) if s[2] >= 3]) == 2, what="both followers in sessions")
    # every partition moves away from broker 2: its fetcher retires and closes its session
    _stop_replicas(rs, 2, "t")
    wait_for(lambda: [n for _, n, _ in _sessions(rs)] == [PARTITIONS], timeout=10, what="broker 2's session gone")
    # a leader change: broker 3's fetcher from broker 1 retires, broker 1 keeps no session
    rs.leader_and_isr([partition_state("t", i, 3, 2, [1, 3], [1, 3]) for i in range(PARTITIONS)], to=[1, 3])
    wait_for(lambda: _sessions(rs) == [], timeout=10, what="no session left on the old leader")
    wait_for(
        lambda: rs.brokers[3].call(lambda b: [len(s.partitions) for s in b.fetch_sessions.sessions.values()])
        == [PARTITIONS],
        what="broker 1 fetching from broker 3 in a session",
    )
    assert not [e for e, _ in _produce(rs.bootstrap(3), "t", [b"z"] * 20) if e]
    wait_for(lambda: rs.partition(1, "t").hw == 20, what="broker 1 caught up with the new leader")


def test_a_follower_stopped_with_sigterm_closes_its_session_on_the_leader(zookeeper):
    """Broker processes: the leader's NumIncrementalFetchSessions (/metrics) drops as soon as
    its follower shuts down cleanly, not when the session would go stale. The follower stops
    right after it starts: its first, full, fetch may still be parked on the leader, which
    opens the session with it; the closing fetcher waits for that answer to learn the id."""
    from odradek.client.blocking import Admin
    from odradek.client.structs import NewTopic
    from tests.cluster.control_support import cluster_on
    from tests.cluster.test_replication_metrics import _scrape

    gauge = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
    overrides = {"replica.fetch.wait.max.ms": 200, "auto.create.topics.enable": "false"}
    with cluster_on(zookeeper, 2, overrides=overrides) as cluster:
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        try:
            admin.create_topics([NewTopic("s", replica_assignments={i: [1, 2] for i in range(4)})])
        finally:
            admin.close()
        url = cluster.brokers[1].http_url
        wait_for(lambda: _scrape(url).get(gauge) == 1, timeout=30, what="broker 2's fetch session on broker 1")
        assert cluster.stop(2) == 0
        wait_for(lambda: _scrape(url).get(gauge) == 0, timeout=20, what="the session closed")
