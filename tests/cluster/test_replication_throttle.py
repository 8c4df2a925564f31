"""Replication throttles (Kafka's ReplicationQuotaManager): the rate measurement and the rule of
which replicas are held back, and ``odradek reassign execute --throttle`` / ``verify`` moving
a few MB between real brokers no faster than the throttle allows, with every byte intact and the
throttle configs gone afterwards."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import confluent_kafka

from odradek.cluster.metadata_image import PartitionState
from odradek.cluster.replication_quota import FollowerThrottle, LeaderThrottle, ReplicationQuota
from tests.cluster.control_support import ZkReader, cluster_on
from tests.cluster.test_cluster_cli import odradek
from tests.cluster.test_cluster_failures import _consume
from tests.support import wait_until


def test_the_rate_is_judged_over_at_least_num_minus_one_windows():
    quota = ReplicationQuota(1, window_num=11, window_seconds=1.0)
    quota.set_rate(1000)
    quota.record(9000, now=100.0)
    assert not quota.exceeded(now=100.0)  # 9000 B over the 10 s a young measurement spans
    quota.record(2000, now=100.5)
    assert quota.exceeded(now=100.5)  # 11000 B / 10 s
    assert not quota.exceeded(now=112.0)  # both samples are older than the 11 windows kept
    quota.set_rate(2**63 - 1)
    quota.record(10**9, now=112.0)
    assert not quota.exceeded(now=112.0)  # unlimited


def test_throttled_replicas_name_partition_broker_pairs_or_every_replica():
    quota = ReplicationQuota(2)
    assert quota.throttled(("0:1", "0:2", "3:2"), 0) and quota.throttled(("0:1", "0:2", "3:2"), 3)
    assert not quota.throttled(("0:1", "0:2", "3:2"), 1)
    assert not quota.throttled(("1:1",), 1)  # another broker's replica
    assert quota.throttled(("*",), 7)
    assert not quota.throttled((), 0)


def _partition(topic, index, isr, leader_list=(), follower_list=(), leo=0):
    config = SimpleNamespace(
        leader_replication_throttled_replicas=leader_list, follower_replication_throttled_replicas=follower_list
    )
    state = PartitionState(leader=1, leader_epoch=0, isr=list(isr), replicas=[1, 2, 3])
    return SimpleNamespace(topic=topic, index=index, log_config=config, state=state, log_end_offset=leo)


def test_the_leader_withholds_throttled_records_only_from_followers_out_of_the_isr():
    leader = LeaderThrottle(1, window_num=2, window_seconds=1.0)
    leader.set_rate(100)
    partitions = {
        ("t", 0): _partition("t", 0, isr=[1, 2], leader_list=("0:1",)),  # throttled, follower 3 out of the ISR
        ("t", 1): _partition("t", 1, isr=[1, 2]),  # not throttled
    }

    def entry(i):
        return (i, 0, 10, 10, 0, None, b"x" * 150)

    topics = [("t", [entry(0), entry(1)])]
    sent, withheld, held = leader.apply(partitions, 3, topics)
    assert (withheld, held) == (0, set()) and len(sent[0][1][0][6]) == 150  # under the quota yet
    sent, withheld, held = leader.apply(partitions, 3, topics)  # 150 B recorded: over 100 B/s
    assert (withheld, held) == (150, {("t", 0)})
    assert sent[0][1][0][6] == b"" and sent[0][1][0][2] == 10  # no records, the high watermark still told
    assert len(sent[0][1][1][6]) == 150  # the partition without throttle is untouched
    sent, withheld, _ = leader.apply(partitions, 2, topics)  # follower 2 is in the ISR: never held
    assert withheld == 0 and len(sent[0][1][0][6]) == 150


def test_the_follower_holds_back_throttled_partitions_until_it_has_caught_up():
    follower = FollowerThrottle(2, window_num=2, window_seconds=1.0)
    behind = _partition("t", 0, isr=[1], follower_list=("0:2",), leo=5)
    other = _partition("t", 1, isr=[1], leo=5)
    assert not follower.holds_back(behind)  # unlimited
    follower.set_rate(100)
    follower.fetched(behind, 500, leader_high_watermark=50)
    assert follower.holds_back(behind) and not follower.holds_back(other)
    behind.log_end_offset = 50
    follower.fetched(behind, 0, leader_high_watermark=50)  # caught up: in sync, never held
    assert not follower.holds_back(behind)


# -- a real reassignment ---------------------------------------------------------------------

RATE = 512 * 1024  # bytes/s
RECORDS = 3072
VALUE_SIZE = 1024


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failures


def test_reassign_with_a_throttle_moves_data_no_faster_than_the_throttle_and_verify_clears_it(zookeeper, tmp_path):
    from odradek.client.blocking import Admin
    from odradek.client.structs import NewTopic

    overrides = {"replication.quota.window.num": 2, "replication.quota.window.size.seconds": 1}
    with cluster_on(zookeeper, 3, overrides=overrides) as cluster, ZkReader(cluster) as zk:
        boot = cluster.bootstrap_servers
        admin = Admin({"bootstrap.servers": boot})
        try:
            admin.create_topics([NewTopic("slow", replica_assignments={0: [1]})])
        finally:
            admin.close()
        cluster.wait_for(lambda md: "slow" in md.topics and md.topics["slow"][0].leader == 1, 20, "slow online")
        values = [i.to_bytes(4, "big") + os.urandom(VALUE_SIZE - 4) for i in range(RECORDS)]
        _produce(boot, "slow", values)
        size = sum(f.stat().st_size for f in (cluster.brokers[1].data_dir / "slow-0").glob("*.log"))
        assert size >= RECORDS * VALUE_SIZE

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [2]}]}))
        started = time.monotonic()
        executed = odradek("reassign", "execute", plan, "--throttle", RATE, "-b", boot)
        assert executed.returncode == 0, executed.stderr
        assert "throttle limit was set to 524288 B/s on brokers 1,2" in executed.stderr
        # Kafka's layout: the rates per broker, the replicas that may lead (1) and the one copying (2)
        assert zk.json("/config/topics/slow")["config"] == {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "0:2",
        }
        for b in (1, 2):
            rates = zk.json(f"/config/brokers/{b}")["config"]
            assert rates == {"leader.replication.throttled.rate": str(RATE), "follower.replication.throttled.rate": str(RATE)}

        cluster.wait_for(lambda md: md.topics["slow"][0].replicas == (2,) and md.topics["slow"][0].leader == 2, 120, "the move")
        elapsed = time.monotonic() - started
        assert elapsed >= 0.5 * size / RATE, f"{size} B moved in {elapsed:.1f}s, faster than {RATE} B/s allows"

        verified = odradek("reassign", "verify", plan, "-b", boot, "-o", "json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert json.loads(verified.stdout) == [{"partition": "slow-0", "replicas": "2", "status": "completed"}]
        assert "Cleared the replication throttles" in verified.stderr
        assert zk.json("/config/topics/slow")["config"] == {}
        for b in (1, 2, 3):
            if zk.exists(f"/config/brokers/{b}"):
                assert zk.json(f"/config/brokers/{b}")["config"] == {}
        wait_until(lambda: not (cluster.brokers[1].data_dir / "slow-0").exists(), 20, "broker 1's replica deleted")
        assert _consume(boot, "slow", 0, RECORDS) == values
