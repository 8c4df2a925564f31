"""A failed log dir in a cluster (Kafka's ``/log_dir_event_notification``): the broker reports it,
the controller asks it about its replicas, takes those in the failed dir offline and moves their
leaderships to other in-sync replicas, and deletes the notification; the broker's other log dir
keeps leading. The failure is real: a small tmpfs filled up, as the single-node full-disk tests do."""

from __future__ import annotations

import confluent_kafka

from odradek.client.blocking import Admin
from odradek.client.structs import NewTopic
from tests.broker import conftest as disk_fixtures
from tests.cluster.control_support import ZkReader, cluster_on
from tests.cluster.test_cluster_failures import _consume
from tests.support import wait_until

# the single-node full-disk tests' real tmpfs (mounted and unmounted per test) and its filler
small_disk = disk_fixtures.small_disk
fill_disk = disk_fixtures.fill_disk


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 40000, "retry.backoff.ms": 200}
    )
    reports: list = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(45)
    return reports


def test_a_failed_log_dir_moves_its_leaderships_and_the_notification_is_handled(zookeeper, small_disk, fill_disk):
    disk = small_disk("8m")
    cluster = cluster_on(zookeeper, 3)
    broker1 = cluster.brokers[1]
    sturdy_dir = broker1.data_dir / "sturdy-dir"
    broker1.overrides["log.dirs"] = f"{disk},{sturdy_dir}"  # the first partition goes to the tmpfs
    with cluster, ZkReader(cluster) as zk:
        boot = cluster.bootstrap_servers
        admin = Admin({"bootstrap.servers": boot})
        try:
            admin.create_topics([NewTopic("fragile", replica_assignments={0: [1, 2]})])
            cluster.wait_for(lambda md: "fragile" in md.topics and md.topics["fragile"][0].isr == (1, 2), 30, "fragile in sync")
            admin.create_topics([NewTopic("sturdy", replica_assignments={0: [1, 3]})])
            cluster.wait_for(lambda md: "sturdy" in md.topics and md.topics["sturdy"][0].isr == (1, 3), 30, "sturdy in sync")
        finally:
            admin.close()
        assert (disk / "fragile-0").is_dir() and (sturdy_dir / "sturdy-0").is_dir()
        before = [f"before-{i}".encode() for i in range(20)]
        assert _produce(boot, "fragile", before) == [None] * 20

        fill_disk(disk)
        after = [f"after-{i}".encode() + b"x" * 4000 for i in range(20)]
        # broker 1 fails the write (ENOSPC), its dir goes offline, broker 2 takes over; the
        # producer's retries land there
        assert _produce(boot, "fragile", after) == [None] * 20

        md = cluster.wait_for(
            lambda md: md.topics["fragile"][0].leader == 2 and md.topics["fragile"][0].isr == (2,), 30, "fragile moved to broker 2"
        )
        assert md.topics["fragile"][0].offline_replicas == (1,)
        assert md.topics["sturdy"][0].leader == 1 and md.topics["sturdy"][0].offline_replicas == ()
        assert "reported the failure of log dir" in cluster.log_text(1)
        controller = cluster.controller_id()
        text = cluster.log_text(controller)
        assert "Log dir failure reported by brokers [1]" in text
        assert "Mark replicas fragile-0 on broker 1 as offline" in text
        wait_until(lambda: zk.children("/log_dir_event_notification") == [], 10, "the notification deleted")
        got = _consume(boot, "fragile", 0, 40)
        assert got[:20] == before and sorted(got[20:]) == sorted(after)
