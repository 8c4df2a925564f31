"""Group configs in cluster mode (KIP-848/KIP-932 GROUP resources): kept under Odradek's own
znode /odradek/config/groups/<group>, announced through /config/changes, so that
IncrementalAlterConfigs on one broker is seen by DescribeConfigs on every other, also after a
restart."""

from __future__ import annotations

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.cluster.control_support import ZkReader, cluster_on
from tests.support import wait_until

OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share"}


def _alter(cluster, node: int, group: str, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    admin = AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap_servers})
    resource = ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(name, value or "", incremental_operation=op)]
    )
    admin.incremental_alter_configs([resource])[resource].result(15)


def _entry(cluster, node: int, group: str, name: str) -> ConfigEntry:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap_servers})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return future.result(15)[name]


def _is(cluster, node: int, group: str, name: str, value: str, source: ConfigSource) -> bool:
    entry = _entry(cluster, node, group, name)
    return (entry.value, entry.source) == (value, source.value)


def test_group_configs_live_in_zookeeper_and_reach_every_broker(zookeeper):
    group = "orders-workers"
    with cluster_on(zookeeper, 2, overrides=OVERRIDES) as cluster:
        _alter(cluster, 1, group, "share.auto.offset.reset", "earliest")
        _alter(cluster, 1, group, "share.record.lock.duration.ms", "20000")

        wait_until(
            lambda: _is(cluster, 2, group, "share.auto.offset.reset", "earliest", ConfigSource.GROUP_CONFIG),
            20,
            "broker 2 to see the group config set on broker 1",
        )
        assert _is(cluster, 2, group, "share.record.lock.duration.ms", "20000", ConfigSource.GROUP_CONFIG)
        with ZkReader(cluster) as zk:
            wait_until(
                lambda: zk.json(f"/odradek/config/groups/{group}")
                == {"version": 1, "config": {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}},
                10,
                "the group's znode to hold both configs",
            )

        # a restarted broker reads them back from ZooKeeper
        cluster.stop(2)
        cluster.start_broker(2)
        assert _is(cluster, 2, group, "share.auto.offset.reset", "earliest", ConfigSource.GROUP_CONFIG)

        # changed on broker 2 this time; deleting the last override removes the znode
        _alter(cluster, 2, group, "share.record.lock.duration.ms", None)
        _alter(cluster, 2, group, "share.auto.offset.reset", None)
        wait_until(
            lambda: _is(cluster, 1, group, "share.auto.offset.reset", "latest", ConfigSource.DEFAULT_CONFIG),
            20,
            "broker 1 to see the override deleted on broker 2",
        )
        assert _entry(cluster, 1, group, "share.record.lock.duration.ms").source == ConfigSource.DEFAULT_CONFIG.value
        with ZkReader(cluster) as zk:
            wait_until(lambda: not zk.exists(f"/odradek/config/groups/{group}"), 10, "the group's znode to go")
