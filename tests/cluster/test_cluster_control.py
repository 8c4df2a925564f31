"""Cluster control with real processes: a real ZooKeeper, three real brokers, real clients.

Registration and controller election in Kafka's znode layout, topics created, grown and
deleted through the controller (rack-aware, INVALID_REPLICATION_FACTOR, NOT_CONTROLLER),
metadata served by every broker, NOT_LEADER_OR_FOLLOWER from a non-leader, fencing of a stale
controller, a duplicate broker.id refused, reassignment and preferred election. The tests that
kill brokers or ZooKeeper are in test_cluster_failures.py."""

from __future__ import annotations

import subprocess
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic
from kafka.structs import TopicPartition as KafkaTopicPartition
from kio.schema.errors import ErrorCode

from odradek.cluster.cluster_node import STALE_SESSION_MARGIN_S
from odradek.protocol.inter_broker.leader_and_isr_schema import LeaderAndIsrRequest
from odradek.protocol.inter_broker.update_metadata_schema import UpdateMetadataRequest
from odradek.protocol.messages import build_request
from odradek.testing.process import BrokerProcess
from tests.broker.broker_e2e import record_batch
from tests.cluster.control_support import ZkReader, cluster_on, request
from tests.support import wait_until

RACKS = ["rack-a", "rack-a", "rack-b"]


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with cluster_on(zookeeper, 3, racks=RACKS) as c:
        yield c


@pytest.fixture
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _create(admin, topic: NewTopic):
    for future in admin.create_topics([topic], operation_timeout=15).values():
        future.result()


def _metadata_of_each_broker(cluster, topic: str) -> dict[int, dict]:
    """Each broker's own answer: {broker: {partition: (leader, replicas, isr)}}."""
    out = {}
    for broker_id, b in cluster.brokers.items():
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(topic, timeout=10)
        out[broker_id] = {
            p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in md.topics[topic].partitions.values()
        }
    return out


def test_brokers_register_in_kafkas_znodes_and_one_controller_is_elected(cluster, admin):
    # The cluster is ready once one broker lists all three; the one that answers here may
    # still be waiting for the controller's UpdateMetadata on a busy machine.
    def all_three():
        md = admin.list_topics(timeout=10)
        return md if sorted(md.brokers) == [1, 2, 3] else None

    md = wait_until(all_three, 30, "every broker in the metadata")
    with ZkReader(cluster) as zk:
        assert zk.children("/brokers/ids") == ["1", "2", "3"]
        registration = zk.json("/brokers/ids/2")
        b2 = cluster.brokers[2]
        assert registration["endpoints"] == [f"PLAINTEXT://{b2.host}:{b2.port}"]
        assert registration["rack"] == "rack-a" and registration["version"] == 5 and registration["jmx_port"] == -1
        assert zk.json("/controller")["brokerid"] == md.controller_id
        assert int(zk.text("/controller_epoch")) >= 1
        cluster_id = zk.json("/cluster/id")["id"]
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = kadmin.describe_cluster()
    finally:
        kadmin.close()
    assert described["cluster_id"] == cluster_id
    assert described["controller_id"] == md.controller_id
    brokers = {b.get("broker_id", b.get("node_id")): b["rack"] for b in described["brokers"]}
    assert brokers == {1: "rack-a", 2: "rack-a", 3: "rack-b"}


def test_created_topic_is_rack_aware_and_every_broker_serves_the_same_leaders(cluster, admin):
    _create(admin, NewTopic("racked", num_partitions=6, replication_factor=2))
    seen = _metadata_of_each_broker(cluster, "racked")
    assert seen[1] == seen[2] == seen[3]
    rack = dict(zip([1, 2, 3], RACKS, strict=True))
    for leader, replicas, isr in seen[1].values():
        assert {rack[r] for r in replicas} == {"rack-a", "rack-b"}  # one replica on each rack
        assert leader == replicas[0] and set(isr) == set(replicas)
    with ZkReader(cluster) as zk:
        znode = zk.json("/brokers/topics/racked")
        assert {int(p): tuple(r) for p, r in znode["partitions"].items()} == {p: v[1] for p, v in seen[1].items()}
        state = zk.json("/brokers/topics/racked/partitions/0/state")
        assert state["leader"] == seen[1][0][0] and state["leader_epoch"] == 0


def test_replication_factor_above_the_live_brokers_is_invalid_replication_factor(admin):
    future = admin.create_topics([NewTopic("too-wide", num_partitions=1, replication_factor=4)])["too-wide"]
    with pytest.raises(confluent_kafka.KafkaException) as info:
        future.result()
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR


def test_only_the_controller_creates_topics(cluster):
    controller = cluster.controller_id()
    other = next(b for b in cluster.brokers if b != controller)
    body = build_request(19, 7, {
            "topics": [{"name": "not-here", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 5000,
        })
    answer = request(cluster, other, 19, 7, body)
    assert answer.topics[0].error_code == ErrorCode.not_controller


def test_partitions_grow_and_a_deleted_topic_leaves_every_broker_and_zookeeper(cluster, admin):
    _create(admin, NewTopic("short-lived", num_partitions=2, replication_factor=3))
    for future in admin.create_partitions([NewPartitions("short-lived", 4)], operation_timeout=15).values():
        future.result()
    seen = _metadata_of_each_broker(cluster, "short-lived")
    assert sorted(seen[3]) == [0, 1, 2, 3] and all(leader >= 0 for leader, _, _ in seen[3].values())
    log_dirs = [cluster.brokers[b].data_dir / "short-lived-0" for b in cluster.brokers]
    assert all(d.exists() for d in log_dirs)
    for future in admin.delete_topics(["short-lived"], operation_timeout=15).values():
        future.result()
    for b in cluster.brokers.values():  # answered once the metadata has no such topic, as Kafka does
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
        assert "short-lived" not in md.topics
    with ZkReader(cluster) as zk:  # the replicas deleted their logs, then the controller the znodes
        paths = ["/brokers/topics/short-lived", "/admin/delete_topics/short-lived", "/config/topics/short-lived"]
        wait_until(lambda: not any(zk.exists(p) for p in paths), 10, "the topic's znodes to go")
    assert not any(d.exists() for d in log_dirs)


def test_records_go_to_each_partitions_leader_and_a_follower_refuses_them(cluster, admin):
    _create(admin, NewTopic("spread", num_partitions=3, replication_factor=1))
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    sent = [f"record-{i}".encode() for i in range(60)]
    for i, value in enumerate(sent):
        producer.produce("spread", value, partition=i % 3)
    assert producer.flush(20) == 0
    leaders = {p: v[0] for p, v in _metadata_of_each_broker(cluster, "spread")[1].items()}
    assert sorted(leaders.values()) == [1, 2, 3]  # three partitions, one leader each
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "spread-reader"})
    consumer.assign([confluent_kafka.TopicPartition("spread", p, 0) for p in range(3)])
    got = []
    for _ in range(200):
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
        if len(got) == len(sent):
            break
    consumer.close()
    assert sorted(got) == sorted(sent)
    not_leader = next(b for b in cluster.brokers if b != leaders[0])
    batch = record_batch([b"misdirected"])
    produce = build_request(
        0, 9, {"acks": 1, "timeout": 5000, "topic_data": [{"name": "spread", "partition_data": [{"index": 0, "records": batch}]}]}
    )
    answer = request(cluster, not_leader, 0, 9, produce)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower


def test_a_stale_controller_is_refused(cluster):
    """Brokers remember the newest controller epoch: requests carrying an older one are fenced."""
    old = 0
    update = UpdateMetadataRequest(controller_id=9, controller_epoch=old, topic_states=(), live_brokers=())
    assert request(cluster, 1, 6, 8, update).error_code == ErrorCode.stale_controller_epoch
    lai = LeaderAndIsrRequest(controller_id=9, controller_epoch=old, topic_states=(), live_leaders=())
    assert request(cluster, 2, 4, 7, lai).error_code == ErrorCode.stale_controller_epoch
    assert sorted(cluster.metadata([]).brokers) == [1, 2, 3]  # the fenced request changed nothing


def test_a_second_broker_with_a_registered_id_refuses_to_start(cluster, tmp_path):
    """The id's registration could be a killed broker's that has not expired yet, so the twin
    waits one session timeout (plus a margin) first; broker 2's session lives on, so it refuses."""
    twin = BrokerProcess(
        tmp_path / "twin",
        node_id=2,
        overrides={"zookeeper.connect": cluster.zookeeper_connect, "zookeeper.session.timeout.ms": 2000},
    )
    twin.data_dir.mkdir()
    began = time.monotonic()
    proc = subprocess.run(twin.command(), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert time.monotonic() - began > 2 + STALE_SESSION_MARGIN_S
    waits = [line for line in proc.stderr.splitlines() if "registered by an earlier session" in line]
    assert len(waits) == 1 and "waiting up to 6 s" in waits[0]
    errors = [line for line in proc.stderr.splitlines() if "already registered" in line]
    assert len(errors) == 1 and "broker.id 2" in errors[0] and "give this broker another broker.id" in errors[0]
    assert sorted(cluster.metadata([]).brokers) == [1, 2, 3]


def test_reassignment_and_preferred_leader_election(cluster):
    """[1, 2] → [2, 1]: the replicas stay, so the move completes at once; the leader stays 1
    (it is still a target replica) until a preferred election makes 2 lead."""
    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    request_all = kadmin  # closed at the end
    kadmin.create_topics([KafkaNewTopic("moved", replica_assignments={0: [1, 2]})])
    cluster.wait_for(lambda md: "moved" in md.topics and md.topics["moved"][0].isr == (1, 2), what="moved online")
    kadmin.alter_partition_reassignments({KafkaTopicPartition("moved", 0): [2, 1]})
    view = cluster.wait_for(lambda md: md.topics["moved"][0].replicas == (2, 1), what="the new replica order")
    assert view.topics["moved"][0].leader == 1
    assert not kadmin.list_partition_reassignments()
    epoch = view.topics["moved"][0].leader_epoch
    kadmin.elect_leaders(election_type=0, topic_partitions={"moved": [0]})
    view = cluster.wait_for(lambda md: md.topics["moved"][0].leader == 2, what="the preferred leader")
    assert view.topics["moved"][0].leader_epoch > epoch
    with ZkReader(cluster) as zk:
        assert zk.json("/brokers/topics/moved")["partitions"] == {"0": [2, 1]}
        assert zk.json("/brokers/topics/moved/partitions/0/state")["leader"] == 2
    request_all.close()


def test_a_controller_fenced_by_a_newer_epoch_resigns_and_a_new_election_follows(cluster, admin):
    """Another controller epoch appears in /controller_epoch (as when a new controller was
    elected while this one was cut off): the old controller's next write is refused by the
    fencing check, it resigns, and a fresh election (epoch + 1) finishes the work."""
    with ZkReader(cluster) as zk:
        epoch = int(zk.text("/controller_epoch"))
        zk.kazoo.set("/controller_epoch", str(epoch + 1).encode())
        _create(admin, NewTopic("after-fencing", num_partitions=2, replication_factor=2))
        wait_until(lambda: int(zk.text("/controller_epoch")) == epoch + 2, 10, "a new election")
        assert zk.json("/brokers/topics/after-fencing/partitions/1/state")["controller_epoch"] == epoch + 2
    assert any("resigns as controller" in cluster.log_text(b) for b in cluster.brokers)
    md = cluster.wait_for(lambda md: "after-fencing" in md.topics, 10, "the topic")
    assert all(p.leader >= 0 for p in md.topics["after-fencing"].values())
