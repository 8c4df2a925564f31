"""Cluster control when things break, with real processes: kill -9 of a leader and of the
controller, SIGTERM (controlled shutdown), ZooKeeper stopped and started again.

Each test has a cluster of its own (on the session's ZooKeeper) with a 4 s ZooKeeper session
timeout, so a killed broker is noticed within about 4 s."""

from __future__ import annotations

import subprocess
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.process import BrokerProcess
from tests.cluster.control_support import ZkReader, cluster_on
from tests.support import wait_until

SESSION_TIMEOUT_S = 4


@pytest.fixture
def cluster(zookeeper):
    with cluster_on(zookeeper, 3, session_timeout_ms=SESSION_TIMEOUT_S * 1000) as c:
        yield c


def _create(cluster, name: str, partitions: int, rf: int, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=rf, config={k.replace("_", "."): str(v) for k, v in configs.items()})
    for future in admin.create_topics([topic], operation_timeout=15).values():
        future.result()
    running = [b for b in cluster.brokers.values() if b.proc is not None and b.proc.poll() is None]
    for b in running:  # the controller answered; every broker has the leaders soon after
        one = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        wait_until(
            lambda one=one: all(p.leader >= 0 for p in getattr(one.list_topics(name, timeout=5).topics.get(name), "partitions", {0: None}).values() if p),
            10,
            f"broker {b.node_id} to know the leaders of {name}",
        )


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> list:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 20000}
    )
    reports = []
    for v in values:
        producer.produce(topic, v, partition=partition, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(25)
    return reports


def _consume(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}"})
    consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
    consumer.close()
    return out


def test_kill_9_of_a_leader_moves_its_leaderships_within_the_session_timeout(cluster):
    _create(cluster, "orders", 3, 3, min_insync_replicas=2)
    before = cluster.metadata(["orders"]).topics["orders"]
    controller = cluster.controller_id()
    victim = next(before[p].leader for p in before if before[p].leader != controller)
    led = [p for p in before if before[p].leader == victim]
    first = [f"before-{i}".encode() for i in range(20)]
    assert _produce(cluster.bootstrap_servers, "orders", first, led[0]) == [None] * 20

    killed_at = time.monotonic()
    cluster.kill(victim)
    # The view is two admin calls (DescribeCluster, then the topics), possibly answered by two
    # brokers a moment apart, so the broker list is waited for too, not read once.
    after = cluster.wait_for(
        lambda md: all(md.topics["orders"][p].leader not in (victim, -1) for p in led) and victim not in md.brokers,
        SESSION_TIMEOUT_S + 5,
        "the killed broker's partitions to get new leaders",
    )
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_S + 3
    for p in led:
        assert after.topics["orders"][p].leader_epoch > before[p].leader_epoch
        assert victim not in after.topics["orders"][p].isr
        assert victim in after.topics["orders"][p].offline_replicas
    assert victim not in after.brokers
    second = [f"after-{i}".encode() for i in range(20)]
    assert _produce(cluster.running_bootstrap_servers(), "orders", second, led[0]) == [None] * 20
    assert _consume(cluster.running_bootstrap_servers(), "orders", led[0], 40) == first + second


def test_a_broker_restarted_right_after_kill_9_waits_for_its_old_registration_to_expire(zookeeper):
    """Issue 25.5: the killed broker's /brokers/ids/1 lives until its session expires; the
    restarted broker says so once, waits, registers, and serves its data."""
    with cluster_on(zookeeper, 1, session_timeout_ms=SESSION_TIMEOUT_S * 1000) as one:
        _create(one, "kept", 1, 1)
        assert _produce(one.bootstrap_servers, "kept", [b"before the crash"], 0) == [None]
        one.kill(1)
        restarted_at = time.monotonic()
        one.start_broker(1)
        one.wait_until_ready(SESSION_TIMEOUT_S + 30)
        waited = time.monotonic() - restarted_at
        log = one.log_text(1)
        waits = [line for line in log.splitlines() if "registered by an earlier session" in line]
        assert len(waits) == 1, log[-3000:]
        assert f"waiting up to {SESSION_TIMEOUT_S + 4} s" in waits[0]
        assert "already registered" not in log
        assert waited < SESSION_TIMEOUT_S + 15
        assert _consume(one.bootstrap_servers, "kept", 0, 1) == [b"before the crash"]


def test_a_start_waiting_for_an_earlier_registration_stops_at_once_on_sigterm(zookeeper, tmp_path):
    with cluster_on(zookeeper, 1, session_timeout_ms=SESSION_TIMEOUT_S * 1000) as one:
        twin = BrokerProcess(
            tmp_path / "twin",
            node_id=1,
            overrides={"zookeeper.connect": one.zookeeper_connect, "zookeeper.session.timeout.ms": 30000},
            log_path=tmp_path / "twin.log",
        )
        twin.data_dir.mkdir()
        with open(twin.log_path, "wb") as log:  # not start(): that waits for a port it opens once registered
            twin.proc = subprocess.Popen(twin.command(), stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: "registered by an earlier session" in twin.log_text(), 30, "the twin to wait")
        asked = time.monotonic()
        assert twin.stop() == 1
        assert time.monotonic() - asked < 5
        assert "stopped while waiting for the earlier registration of broker.id 1 to expire" in twin.log_text()
        assert sorted(one.metadata([]).brokers) == [1]


def test_kill_9_of_the_controller_elects_another_with_a_higher_epoch(cluster):
    with ZkReader(cluster) as zk:
        epoch = int(zk.text("/controller_epoch"))
        controller = zk.json("/controller")["brokerid"]
        cluster.kill(controller)
        view = cluster.wait_for(
            lambda md: md.controller_id not in (-1, controller), SESSION_TIMEOUT_S + 5, "a new controller"
        )
        assert int(zk.text("/controller_epoch")) == epoch + 1
        assert zk.json("/controller")["brokerid"] == view.controller_id
    _create(cluster, "after-failover", 2, 2)  # the new controller does a controller's work
    md = cluster.wait_for(lambda md: "after-failover" in md.topics, 10, "the new topic in the metadata")
    assert all(p.leader in md.brokers for p in md.topics["after-failover"].values())


def test_sigterm_moves_leaderships_before_the_broker_exits(cluster):
    _create(cluster, "handover", 6, 3)
    before = cluster.metadata(["handover"]).topics["handover"]
    victim = before[0].leader
    stopped_at = time.monotonic()
    assert cluster.stop(victim) == 0  # returns once the process exited
    # the leaderships moved before it exited: the others name the new leaders at once (well
    # within a second; no ZooKeeper session has to time out)
    md = cluster.wait_for(
        lambda md: all(p.leader not in (victim, -1) for p in md.topics["handover"].values()), 1, "new leaders"
    )
    assert time.monotonic() - stopped_at < SESSION_TIMEOUT_S
    assert all(victim not in p.isr for p in md.topics["handover"].values())
    log = cluster.log_text(victim)
    assert f"controlled shutdown of broker {victim} done" in log
    assert _produce(cluster.running_bootstrap_servers(), "handover", [b"x"] * 5, 0) == [None] * 5


def test_zookeeper_down_brokers_keep_serving_then_reconnect(cluster, zookeeper):
    _create(cluster, "steady", 3, 1)
    assert _produce(cluster.bootstrap_servers, "steady", [b"before"], 1) == [None]
    assert _consume(cluster.bootstrap_servers, "steady", 1, 1) == [b"before"]  # groups' topic exists now
    zookeeper.stop()
    try:
        assert _produce(cluster.bootstrap_servers, "steady", [b"while-zk-is-down"] * 5, 1) == [None] * 5
        assert _consume(cluster.bootstrap_servers, "steady", 1, 6) == [b"before"] + [b"while-zk-is-down"] * 5
        wait_until(
            lambda: all("lost the connection to ZooKeeper" in cluster.log_text(b) for b in cluster.brokers),
            10,
            "every broker to say it lost ZooKeeper",
        )
    finally:
        zookeeper.start()
    wait_until(lambda: all("reconnected to ZooKeeper" in cluster.log_text(b) for b in cluster.brokers), 20, "reconnection")
    for b in cluster.brokers:
        assert cluster.log_text(b).count("lost the connection to ZooKeeper") == 1  # said once
    # The control plane works again. A broker whose session expired while ZooKeeper was down
    # (a reconnect later than the 4 s timeout, on a loaded machine) registers anew, and the
    # controller counts it live a moment after its "reconnected" line; until then a topic of 3
    # replicas is refused with INVALID_REPLICATION_FACTOR, as Kafka refuses it, and nothing is made.
    def created_on_three_live_brokers() -> bool:
        try:
            _create(cluster, "after-zk", 2, 3)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() != confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            return False
        return True

    wait_until(created_on_three_live_brokers, 30, "the controller to count three live brokers", interval=0.2)
    cluster.wait_for(lambda md: "after-zk" in md.topics and sorted(md.brokers) == [1, 2, 3], 10, "after-zk everywhere")


def test_reassignment_moves_a_partition_with_its_data_to_another_broker(cluster):
    """[1] → [3]: broker 3 copies the log from broker 1, joins the ISR, and the controller
    completes the move: 3 leads, 1's replica is deleted, every record is still there."""
    from odradek.client.blocking import Admin
    from odradek.client.structs import NewTopic as OurNewTopic
    from odradek.client.structs import TopicPartition

    admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        admin.create_topics([OurNewTopic("moving", replica_assignments={0: [1]})])
        cluster.wait_for(lambda md: "moving" in md.topics and md.topics["moving"][0].leader == 1, 10, "moving online")
        values = [f"moving-{i}".encode() for i in range(200)]
        assert _produce(cluster.bootstrap_servers, "moving", values, 0) == [None] * 200
        assert admin.alter_partition_reassignments({TopicPartition("moving", 0): [3]}) == {TopicPartition("moving", 0): None}
        md = cluster.wait_for(
            lambda md: md.topics["moving"][0].replicas == (3,) and md.topics["moving"][0].leader == 3, 30, "the move"
        )
        assert md.topics["moving"][0].isr == (3,)
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    wait_until(lambda: not (cluster.brokers[1].data_dir / "moving-0").exists(), 10, "broker 1's replica deleted")
    assert _consume(cluster.bootstrap_servers, "moving", 0, 200) == values


def test_auto_leader_rebalance_gives_leadership_back_to_the_preferred_replica(zookeeper):
    overrides = {"leader.imbalance.check.interval.seconds": 1, "leader.imbalance.per.broker.percentage": 0}
    with cluster_on(zookeeper, 3, session_timeout_ms=SESSION_TIMEOUT_S * 1000, overrides=overrides) as cluster:
        _create(cluster, "balanced", 3, 3)
        preferred = {p: v.replicas[0] for p, v in cluster.metadata(["balanced"]).topics["balanced"].items()}
        victim = next(b for b in preferred.values() if b != cluster.controller_id())
        cluster.stop(victim)  # its leaderships move away
        cluster.wait_for(lambda md: all(v.leader != victim for v in md.topics["balanced"].values()), 5, "moved away")
        cluster.start_broker(victim)
        # once it is back in the ISRs, the imbalance check moves its leaderships back
        cluster.wait_for(
            lambda md: all(v.leader == preferred[p] for p, v in md.topics["balanced"].items()), 30, "leaders back home"
        )
        assert "auto leader rebalance" in "".join(cluster.log_text(b) for b in cluster.brokers)


def test_an_expired_session_stops_leading_then_registers_again(zk_connect, caplog):
    """A broker whose ZooKeeper session expired may have lost its leaderships already: it stops
    answering as leader at once, registers again with a new broker epoch, and leads again once
    the controller (itself here) says so."""
    from odradek.http.local_view import zookeeper_reason
    from odradek.testing import EmbeddedBroker
    from odradek.testing.zookeeper import expire_session

    overrides = {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_S * 1000}
    with EmbeddedBroker(node_id=1, overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic("alone", 1, 1)], operation_timeout=15).values():
            future.result()
        assert _produce(broker.bootstrap_servers, "alone", [b"one"]) == [None]
        epoch = broker.call(lambda b: b.cluster.broker_epoch)
        leading_after_loss = []
        readiness_after_loss = []
        assert _readyz(broker) == (200, "ready")

        def watch(b):
            stop_leading = b.cluster.on_session_lost

            def on_lost():
                stop_leading()
                leading_after_loss.append([p.is_leader for p in b.replica_manager.partitions.values()])
                readiness_after_loss.append(zookeeper_reason(b))

            b.cluster.on_session_lost = on_lost

        broker.call(watch)
        expire_session(zk_connect, broker.call(lambda b: b.cluster.zk.client_id))
        wait_until(lambda: broker.call(lambda b: b.cluster.broker_epoch) != epoch, 15, "a new registration")
        assert leading_after_loss[0] == [False]  # it stopped leading the moment the session was gone
        assert "not registered in ZooKeeper (/brokers/ids/1)" in readiness_after_loss[0]  # /readyz said 503
        wait_until(lambda: _readyz(broker) == (200, "ready"), 15, "/readyz ready again after re-registering")
        assert any("ZooKeeper session of broker 1 expired" in r.getMessage() for r in caplog.records)
        assert _produce(broker.bootstrap_servers, "alone", [b"two"]) == [None]  # leads again
        assert _consume(broker.bootstrap_servers, "alone", 0, 2) == [b"one", b"two"]


def _readyz(broker) -> tuple[int, str]:
    """The status code and status of the broker's /readyz."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{broker.http_url}/readyz", timeout=5) as answer:
            return answer.status, json.loads(answer.read())["status"]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["status"]
