"""Group configs in cluster mode (KIP-848/KIP-932 GROUP resources): kept under Odradek's own
znode /odradek/config/groups/<group>, announced through /config/changes, so that
IncrementalAlterConfigs on one broker is seen by DescribeConfigs on every other, also after a
restart."""

from __future__ import annotations

from confluent_kafka.admin import ConfigSource

from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode
from tests.cluster.control_support import ZkReader, cluster_on, request
from tests.support import wait_until

OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share"}
GROUP_RESOURCE, SET, DELETE = 32, 0, 1


def _alter(cluster, node: int, group: str, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs sent to broker ``node`` itself (an admin client picks any broker)."""
    op = DELETE if value is None else SET
    body = {"resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group,
                           "configs": [{"name": name, "config_operation": op, "value": value}]}],
            "validate_only": False}  # fmt: skip
    answer = request(cluster, node, 44, 1, messages.build_request(44, 1, body))
    assert answer.responses[0].error_code == ErrorCode.none, answer


def _is(cluster, node: int, group: str, name: str, value: str, source: ConfigSource) -> bool:
    """What DescribeConfigs on broker ``node`` itself says of the group's ``name``."""
    body = {"resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}  # fmt: skip
    answer = request(cluster, node, 32, 4, messages.build_request(32, 4, body))
    entry = next(c for c in answer.results[0].configs if c.name == name)
    return (entry.value, entry.config_source) == (value, source.value)


def _znode(zk, group: str):
    path = f"/odradek/config/groups/{group}"
    return zk.json(path) if zk.exists(path) else None


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
                lambda: _znode(zk, group)
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
        assert _is(cluster, 1, group, "share.record.lock.duration.ms", "30000", ConfigSource.DEFAULT_CONFIG)
        with ZkReader(cluster) as zk:
            wait_until(lambda: _znode(zk, group) is None, 10, "the group's znode to go")
