"""Dynamic broker configs in cluster mode (KIP-226, issue 13 item 7): kept in ZooKeeper's
/config/brokers/<id> and /config/brokers/<default> in Kafka's layout, announced through
/config/changes, and seen by every broker's DescribeConfigs with Kafka's sources."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka.admin import (
    AdminClient,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.cluster.control_support import ZkReader, cluster_on
from tests.support import wait_until


def _alter(cluster, *target: str, config: str) -> None:
    """``odradek configs alter`` (librdkafka cannot name the cluster default)."""
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "configs", "alter", "--entity-type", "brokers", *target,
         "--add-config", config, "--bootstrap-server", cluster.bootstrap_servers],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _entry(cluster, node: int, key: str) -> ConfigEntry:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap_servers})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(node))]).values()
    return future.result(15)[key]


def test_dynamic_broker_configs_live_in_zookeeper_and_reach_every_broker(zookeeper):
    with cluster_on(zookeeper, 2) as cluster:
        _alter(cluster, "--entity-default", config="log.retention.ms=3600000")  # the cluster-wide default
        _alter(cluster, "--entity-name", "2", config="log.cleaner.threads=2")  # one broker

        zk = ZkReader(cluster)
        try:
            assert zk.json("/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "3600000"}}
            assert zk.json("/config/brokers/2") == {"version": 1, "config": {"log.cleaner.threads": "2"}}
            assert zk.children("/config/changes"), "changes are announced in /config/changes"
        finally:
            zk.close()

        for node in (1, 2):
            wait_until(
                lambda node=node: _entry(cluster, node, "log.retention.ms").value == "3600000",
                15,
                f"broker {node} to take the default",
            )
            assert _entry(cluster, node, "log.retention.ms").source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        entry = _entry(cluster, 2, "log.cleaner.threads")
        assert (entry.value, entry.source) == ("2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert _entry(cluster, 1, "log.cleaner.threads").value != "2"
