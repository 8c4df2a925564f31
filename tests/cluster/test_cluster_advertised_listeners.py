"""advertised.listeners changed at run time in a ZooKeeper-mode cluster: the broker rewrites its
registration, the controller (watching it, Kafka's BrokerModifications) tells every broker, and
every broker then gives clients the new address."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.cluster.control_support import ZkReader, cluster_on
from tests.support import wait_until


def _hosts_seen_by(cluster, broker_id: int) -> dict[int, str]:
    md = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap_servers}).list_topics(timeout=10)
    return {b.id: b.host for b in md.brokers.values()}


def test_every_broker_learns_a_brokers_new_advertised_address(zookeeper):
    with cluster_on(zookeeper, 2) as cluster:
        moving = max(cluster.brokers)
        port = cluster.brokers[moving].port
        wait_until(lambda: len(_hosts_seen_by(cluster, min(cluster.brokers))) == 2, timeout=30)
        entry = ConfigEntry(
            "advertised.listeners", f"PLAINTEXT://localhost:{port}", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.BROKER, str(moving), incremental_configs=[entry])
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(timeout=15)

        for broker_id in cluster.brokers:
            wait_until(lambda b=broker_id: _hosts_seen_by(cluster, b).get(moving) == "localhost", timeout=30)
        others = {b: h for b, h in _hosts_seen_by(cluster, moving).items() if b != moving}
        assert set(others.values()) == {"127.0.0.1"}
        with ZkReader(cluster) as zk:
            assert f"localhost:{port}" in zk.text(f"/brokers/ids/{moving}")
