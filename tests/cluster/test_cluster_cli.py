"""The cluster commands as a user runs them: ``odradek cluster up`` (its table, a broker killed
and restarted, the restart policy, a second run after kill -9 of everything, Ctrl-C stops it all),
``odradek cluster``, ``odradek reassign`` and ``odradek leader-election`` against a real
cluster, and the ``odradek_cluster`` pytest fixture."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_up_support import ClusterUp
from tests.cluster.control_support import cluster_on
from tests.support import wait_until


def odradek(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


SESSION_TIMEOUT = "zookeeper.session.timeout.ms=4000"  # a killed broker's leaderships move in ~4 s


def test_cluster_up_starts_three_brokers_prints_their_addresses_and_ctrl_c_stops_them_all(tmp_path):
    cluster = ClusterUp(tmp_path / "c", 3, "--racks", "a,b,c")
    try:
        cluster.start()
        assert sorted(cluster.brokers) == [1, 2, 3]
        third = cluster.brokers[3]
        assert third["KAFKA"] == f"127.0.0.1:{cluster.base_port + 2}" and third["RACK"] == "c"
        assert third["CONSOLE"] == f"http://127.0.0.1:{cluster.console_port + 2}"
        assert third["LOG"] == str(tmp_path / "c" / "broker-3.log")
        with urllib.request.urlopen(f"{third['CONSOLE']}/healthz", timeout=10) as answer:
            assert answer.status == 200
        shown = odradek("cluster", "-b", cluster.bootstrap(1), "-o", "json")
        assert shown.returncode == 0, shown.stderr
        info = json.loads(shown.stdout)
        assert sorted((b["id"], b["rack"]) for b in info["brokers"]) == [(1, "a"), (2, "b"), (3, "c")]
        assert info["controller_id"] in (1, 2, 3)
        again = odradek("cluster", "up", "--data-dir", tmp_path / "c")
        assert again.returncode == 1 and "already runs with --data-dir" in again.stderr, again.stderr
    finally:
        code = cluster.stop()
    assert code == 0
    stopped = [line for line in cluster.output().splitlines() if "stopped" in line]
    assert stopped == [f"broker {i} stopped (exit code 0)" for i in (1, 2, 3)] + ["zookeeper stopped"]


def test_kill_9_of_a_broker_the_others_keep_serving_and_restart_broker_brings_it_back(tmp_path):
    cluster = ClusterUp(tmp_path / "c", 3, "--override", SESSION_TIMEOUT)
    try:
        cluster.start()
        _create_replicated(cluster.bootstrap(), "orders", partitions=3)
        first = _produce(cluster.bootstrap(), "orders", "before", 30)

        cluster.kill_broker(2)
        line = cluster.wait_for_line("broker 2 exited", 10)
        assert "killed by SIGKILL" in line and "the others keep running" in line
        assert str(tmp_path / "c" / "broker-2.log") in line and "odradek cluster restart-broker 2" in line
        survivors = cluster.bootstrap(1, 3)
        second = _produce(survivors, "orders", "after", 30)  # acks=all, min.insync.replicas=2
        assert _consume(survivors, "orders", 60) == sorted(first + second)
        assert cluster.proc.poll() is None

        restarted = odradek("cluster", "restart-broker", "2", "--data-dir", tmp_path / "c", timeout=150)
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.startswith("broker 2: started again (pid ")
        _wait_for_full_isr(cluster.bootstrap(), "orders", 3)
        assert _consume(cluster.bootstrap(2), "orders", 60) == sorted(first + second)
        unknown = odradek("cluster", "restart-broker", "7", "--data-dir", tmp_path / "c")
        assert unknown.returncode == 1 and "no broker 7 in this cluster" in unknown.stderr
        running = odradek("cluster", "restart-broker", "1", "--data-dir", tmp_path / "c", timeout=150)
        assert running.returncode == 0, running.stderr
        assert running.stdout.startswith("broker 1: stopped it (exit code 0), started again (pid ")
        _wait_for_full_isr(cluster.bootstrap(), "orders", 3)
    finally:
        code = cluster.stop()
    assert code == 0
    assert "broker 2 stopped (exit code 0)" in cluster.output()


def test_restart_policy_and_cluster_up_again_after_kill_9_of_everything(tmp_path):
    cluster = ClusterUp(tmp_path / "c", 3, "--override", SESSION_TIMEOUT, "--restart", "on-failure", "--restart-delay", "1s")
    again = None
    try:
        cluster.start()
        _create_replicated(cluster.bootstrap(), "kept", partitions=2)
        records = _produce(cluster.bootstrap(), "kept", "kept", 20)
        cluster.kill_broker(3)
        exited = cluster.wait_for_line("broker 3 exited", 10)
        assert "killed by SIGKILL" in exited and "restarting it in 1 s (--restart on-failure)" in exited
        # restarted before its ZooKeeper session (4 s) expired: cluster up clears its registration
        cluster.wait_for_line("cleared the stale ZooKeeper registration of broker 3 (ZooKeeper session 0x", 30)
        cluster.wait_for_line("broker 3: started again", 60)
        _wait_for_full_isr(cluster.bootstrap(), "kept", 3)

        cluster.kill_tree()  # cluster up, its ZooKeeper and its brokers: kill -9, all at once
        again = ClusterUp(tmp_path / "c", 3, "--override", SESSION_TIMEOUT, ports=cluster.ports).start()
        cleared = again.wait_for_line("cleared the stale ZooKeeper registration of brokers 1, 2, 3", 1)
        assert "left by an earlier run" in cleared
        assert _consume(again.bootstrap(), "kept", 20) == sorted(records)
    finally:
        cluster.kill_tree()
        code = again.stop() if again is not None else 0
    assert code == 0


def _create_replicated(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
    admin.create_topics([new], operation_timeout=30)[topic].result(60)
    _wait_for_full_isr(bootstrap, topic, 3)


def _wait_for_full_isr(bootstrap: str, topic: str, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def full() -> bool:
        try:
            parts = admin.list_topics(topic, timeout=5).topics[topic].partitions.values()
        except Exception:
            return False
        return bool(parts) and all(len(p.isrs) == replicas and p.leader >= 0 for p in parts)

    wait_until(full, 90, f"every replica of {topic} in sync")


def _produce(bootstrap: str, topic: str, prefix: str, count: int) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    failures = []
    values = [f"{prefix}-{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(90) == 0 and not failures, failures
    return values


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return sorted(got)


def test_reassign_generate_execute_verify_and_leader_election(zookeeper, tmp_path):
    with cluster_on(zookeeper, 3) as cluster:
        boot = cluster.bootstrap_servers
        cluster.create_topic("plans", partitions=2, replication_factor=2)
        generated = odradek("reassign", "generate", "--topics", "plans", "--brokers", "1,2", "-b", boot)
        assert generated.returncode == 0, generated.stderr
        plan = json.loads(generated.stdout)
        assert {p["partition"] for p in plan["partitions"]} == {0, 1}
        assert all(sorted(p["replicas"]) == [1, 2] for p in plan["partitions"])
        # a plan that only reorders replicas completes at once (no data has to move)
        md = cluster.metadata(["plans"]).topics["plans"]
        reorder = {"version": 1, "partitions": [{"topic": "plans", "partition": p, "replicas": list(reversed(v.replicas))} for p, v in md.items()]}
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(reorder))
        executed = odradek("reassign", "execute", path, "-b", boot)
        assert executed.returncode == 0, executed.stderr
        assert "Current partition replica assignment" in executed.stdout
        verified = odradek("reassign", "verify", path, "-b", boot, "-o", "json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert {row["status"] for row in json.loads(verified.stdout)} == {"completed"}
        elected = odradek("leader-election", "--election-type", "preferred", "--topic", "plans", "-b", boot, "-o", "json")
        assert elected.returncode == 0, elected.stderr
        assert {row["result"] for row in json.loads(elected.stdout)} == {"elected"}
        after = cluster.metadata(["plans"]).topics["plans"]
        assert all(v.leader == v.replicas[0] for v in after.values())
        again = odradek("leader-election", "--election-type", "preferred", "--all-topic-partitions", "-b", boot, "-o", "json")
        assert {row["result"] for row in json.loads(again.stdout) if row["partition"].startswith("plans-")} == {"not needed"}


def test_the_odradek_cluster_fixture_gives_a_running_cluster(odradek_cluster):
    md = odradek_cluster.metadata([])
    assert sorted(md.brokers) == [1, 2, 3] and md.controller_id in md.brokers
