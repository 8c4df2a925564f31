"""Replica fetchers in incremental fetch sessions (KIP-227), between real brokers: after one
full fetch, a follower's requests and the leader's answers carry only partitions that
changed; a leader that lost the session (evicted, restarted) gets a new one and nothing is
lost."""

from __future__ import annotations

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
