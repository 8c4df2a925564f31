"""Truncation through the fetch (KIP-595's ``last_fetched_epoch`` / ``diverging_epoch``,
Fetch v12+, as Kafka 2.7+ replica fetchers use it).

A fetch naming the epoch of the fetcher's last batch gets, where the fetcher's log diverged
from the leader's, no records but the leader's largest epoch at or below it and where that
ends; the follower cuts its log there (KIP-101/279) and copies the leader from that point,
without asking OffsetForLeaderEpoch."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from tests.cluster.replication_support import ReplicaSet, fetch_one, partition_state, wait_for
from tests.cluster.test_replication import _consume, _produce

OFFSET_FOR_LEADER_EPOCH = 23


@pytest.fixture
def three():
    with ReplicaSet(3) as rs:
        yield rs


def _fetch_v12(bootstrap, *, replica_id, leader_epoch, fetch_offset, last_fetched_epoch):
    p = fetch_one(bootstrap, 12, replica_id, leader_epoch, fetch_offset, last_fetched_epoch=last_fetched_epoch)
    return p.error_code, (p.diverging_epoch.epoch, p.diverging_epoch.end_offset), len(p.records or b"")


def test_a_fetch_with_a_stale_last_fetched_epoch_gets_the_diverging_epoch(three):
    """Broker 1 leads epoch 1 (offsets 0-4), then epoch 2 (5-7). Broker 2, a replica that
    does not fetch, is played by the test: a fetch past the end of the epoch it names gets
    that epoch's end on the leader, and does not move the leader's high watermark."""
    rs = three
    rs.create_topic("t", {0: [1, 2]})
    rs.leader_and_isr([partition_state("t", 0, -1, 1, [1, 2], [1, 2])], to=[2], metadata=False)
    rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2], [1, 2])], to=[1])
    assert [o for _, o in _produce(rs.bootstrap(1), "t", [b"a"] * 5, acks="1")] == list(range(5))
    rs.leader_and_isr([partition_state("t", 0, 1, 2, [1, 2], [1, 2])], to=[1])
    assert [o for _, o in _produce(rs.bootstrap(1), "t", [b"b"] * 3, acks="1")] == [5, 6, 7]
    leader = rs.bootstrap(1)

    # a consumer that read up to offset 7 believing all of it was epoch 1
    assert _fetch_v12(leader, replica_id=-1, leader_epoch=2, fetch_offset=7, last_fetched_epoch=1) == (0, (1, 5), 0)
    # an epoch older than any the leader knows ends where the leader's log begins
    assert _fetch_v12(leader, replica_id=-1, leader_epoch=2, fetch_offset=3, last_fetched_epoch=0) == (0, (0, 0), 0)
    # no divergence: records, and no diverging epoch
    code, diverging, size = _fetch_v12(leader, replica_id=-1, leader_epoch=2, fetch_offset=5, last_fetched_epoch=1)
    assert (code, diverging) == (0, (-1, -1))
    assert rs.partition(1, "t").hw == 0  # broker 2 has not fetched: nothing to read yet
    # a follower's fetch past the divergence says nothing of its log: the HW stays
    assert _fetch_v12(leader, replica_id=2, leader_epoch=2, fetch_offset=8, last_fetched_epoch=1) == (0, (1, 5), 0)
    assert rs.partition(1, "t").hw == 0
    # at the divergence point it is a normal follower fetch: records, and the HW moves
    code, diverging, size = _fetch_v12(leader, replica_id=2, leader_epoch=2, fetch_offset=5, last_fetched_epoch=1)
    assert (code, diverging) == (0, (-1, -1)) and size > 0
    assert rs.partition(1, "t").hw == 5
    # the leader epoch is still checked first
    assert _fetch_v12(leader, replica_id=2, leader_epoch=1, fetch_offset=8, last_fetched_epoch=1)[0] == (
        ErrorCode.fenced_leader_epoch
    )


@pytest.mark.parametrize("protocol", [None, "2.6"])
def test_a_follower_cuts_a_diverged_tail_of_two_epochs(protocol):
    """KIP-279's case. Both replicas have epoch 1 (0-4). Broker 2 then leads epoch 2 alone
    (5-7), broker 1 leads epoch 4 alone (5-6); broker 2 becomes leader at epoch 5. Broker 1
    names epoch 4, the leader answers (2, 8); broker 1 has no epoch 2, so it cuts at the end
    of its epoch 1 (5) and asks again, naming epoch 1: no divergence, and it copies broker 2
    from offset 5. Through the Fetch v12 itself, no OffsetForLeaderEpoch is asked; with
    ``inter.broker.protocol.version`` 2.6 (before KIP-595) the same cut comes from
    OffsetForLeaderEpoch answers."""
    overrides = {"inter.broker.protocol.version": protocol} if protocol else {}
    with ReplicaSet(3, overrides) as rs:
        _two_epoch_divergence(rs, asks_expected=protocol is not None)


def _two_epoch_divergence(rs, asks_expected: bool) -> None:
    rs.create_topic("t", {0: [1, 2]})
    rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2], [1, 2])])
    assert not [e for e, _ in _produce(rs.bootstrap(1), "t", [b"one"] * 5) if e]
    wait_for(lambda: rs.partition(2, "t").leo == 5, what="broker 2 has epoch 1")
    rs.leader_and_isr([partition_state("t", 0, 2, 2, [2], [1, 2])], to=[2])
    assert [o for _, o in _produce(rs.bootstrap(2), "t", [b"two"] * 3, acks="1")] == [5, 6, 7]
    rs.leader_and_isr([partition_state("t", 0, 1, 4, [1], [1, 2])], to=[1])
    assert [o for _, o in _produce(rs.bootstrap(1), "t", [b"four"] * 2, acks="1")] == [5, 6]
    assert rs.partition(1, "t").leo == 7

    rs.leader_and_isr([partition_state("t", 0, 2, 5, [2], [1, 2])])
    wait_for(lambda: rs.partition(2, "t").isr == [2, 1], what="broker 1 back in the ISR")
    assert not [e for e, _ in _produce(rs.bootstrap(2), "t", [b"five"] * 2) if e]
    wait_for(lambda: rs.partition(1, "t").hw == 10, what="broker 1 caught up")
    assert rs.batches(1, "t") == rs.batches(2, "t")
    assert _consume(rs.bootstrap(2), "t", 10) == [b"one"] * 5 + [b"two"] * 3 + [b"five"] * 2
    asked = rs.brokers[2].call(lambda b: b.network.request_metrics.by_api.get(OFFSET_FOR_LEADER_EPOCH))
    assert (asked is not None and asked.count > 0) if asks_expected else (asked is None or asked.count == 0)
    epochs = rs.brokers[1].call(lambda b: b.replica_manager.partitions[("t", 0)].log.leader_epoch_cache.entries())
    assert epochs == [(1, 0), (2, 5), (5, 8)]


def test_an_isolated_leaders_unreplicated_suffix_is_cut_when_it_comes_back(tmp_path):
    """Real ZooKeeper and broker processes. Both followers die (kill -9: their connections
    close, so nothing the leader appends from then on can reach them), the leader appends
    acks=1 records only it has and is paused (SIGSTOP) before any ZooKeeper session
    expires, so the ISR still names all three. The followers restart; the controller elects
    one of them (epoch + 1), which takes acks=all writes. The old leader resumes (SIGCONT),
    becomes a follower, learns from its Fetch v12 where its log diverged, cuts exactly the
    unreplicated suffix and ends byte-identical to the others."""
    from confluent_kafka.admin import NewTopic

    from tests.cluster.chaos_support import TOPIC, ChaosCluster, _until, replica_files

    settings = {"zookeeper.session.timeout.ms": 4000, "replica.lag.time.max.ms": 30000}
    cluster = ChaosCluster(tmp_path, overrides=settings).start()
    try:
        admin = cluster.admin()  # kept until the futures resolve
        futures = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
        for f in futures.values():
            f.result(30)
        assert _until(lambda: cluster.in_sync([TOPIC]), 60), "the topic never became fully in sync"
        assert [o for _, o in _produce(cluster.bootstrap, TOPIC, [b"kept"] * 10)] == list(range(10))
        old = cluster.view().topics[TOPIC][0]
        leader = old.leader
        followers = [b for b in old.replicas if b != leader]

        for f in followers:
            cluster.kill(f)
        lone = _produce(cluster.brokers[leader].bootstrap_servers, TOPIC, [b"lost"] * 5, acks="1")
        assert [o for _, o in lone] == list(range(10, 15))
        cluster.pause(leader)
        for f in followers:
            cluster.restart(f)  # once its old ZooKeeper session has expired

        def new_leader():
            view = cluster.view()
            state = view.topics.get(TOPIC, {}).get(0) if view is not None else None
            return state if state is not None and state.leader in followers else None

        elected = _until(new_leader, 60)
        assert elected and elected.leader_epoch > old.leader_epoch, elected
        survivors = ",".join(cluster.brokers[f].bootstrap_servers for f in followers)
        assert [o for _, o in _produce(survivors, TOPIC, [b"new"] * 5)] == list(range(10, 15))

        cluster.resume(leader)

        def rejoined():  # as the new leader says (the old one's own metadata is stale for a while)
            state = new_leader()
            return state is not None and sorted(state.isr) == [1, 2, 3]

        assert _until(rejoined, 90), "the old leader never rejoined the ISR"
        assert "the fetch diverged" in cluster.log_text(leader)
        values = _consume(cluster.bootstrap, TOPIC, 15)
        assert values == [b"kept"] * 10 + [b"new"] * 5
        cluster.close()  # cleanly; the logs stay in tmp_path
        replicas = replica_files(cluster, 1)[0]
        assert sorted(replicas) == [1, 2, 3]
        assert replicas[leader] == replicas[followers[0]] == replicas[followers[1]]
        assert b"lost" not in replicas[leader]
    finally:
        cluster.close()
