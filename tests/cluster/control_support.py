"""Helpers for the cluster control tests: a cluster sharing the session's ZooKeeper, raw
requests to one chosen broker, and reading ZooKeeper as Kafka's tools would."""

from __future__ import annotations

import asyncio
import json

from kazoo.client import KazooClient

from odradek.cluster.controller_channel import BrokerLink
from odradek.testing.embedded_cluster import EmbeddedCluster


def cluster_on(zookeeper, brokers: int = 3, **kwargs) -> EmbeddedCluster:
    """A cluster in a chroot of its own on the session's ZooKeeper."""
    if not zookeeper.running:
        zookeeper.start()
    return EmbeddedCluster(brokers, zookeeper_connect=zookeeper.connect_string, **kwargs)


def request(cluster: EmbeddedCluster, broker_id: int, api_key: int, version: int, entity):
    """Send one request to one broker (not to whoever a client would pick) and return the answer."""
    b = cluster.brokers[broker_id]

    async def go():
        link = BrokerLink(b.host, b.port, broker_id, "control-test", 10)
        try:
            return await link.request(api_key, version, entity)
        finally:
            link.close()

    return asyncio.run(go())


class ZkReader:
    """Plain kazoo on the cluster's chroot: what zookeeper-shell would show."""

    def __init__(self, cluster: EmbeddedCluster):
        self.kazoo = KazooClient(hosts=cluster.zookeeper_connect)
        self.kazoo.start(10)

    def json(self, path: str):
        data, _ = self.kazoo.get(path)
        return json.loads(data)

    def text(self, path: str) -> str:
        return self.kazoo.get(path)[0].decode()

    def children(self, path: str) -> list[str]:
        return sorted(self.kazoo.get_children(path))

    def exists(self, path: str) -> bool:
        return self.kazoo.exists(path) is not None

    def close(self) -> None:
        self.kazoo.stop()
        self.kazoo.close()

    def __enter__(self) -> ZkReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
