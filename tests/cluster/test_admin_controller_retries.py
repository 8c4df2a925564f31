"""Odradek's admin client follows the controller: a controller-bound call answered NOT_CONTROLLER
(the controller moved, or is being elected) is retried with fresh metadata until the new
controller takes it, and fails with a clear error when none does in time. Against a real
cluster: the controller killed under a CreateTopics, and ``/controller`` held by a broker id that
does not exist (as an operator's zookeeper-shell could leave it), so every broker answers
NOT_CONTROLLER until it goes."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from kazoo.client import KazooClient

from odradek.client.blocking import Admin
from odradek.client.client_errors import KafkaTimeoutError
from odradek.client.structs import NewTopic, TopicPartition
from odradek.protocol.errors import ElectionNotNeededError
from tests.cluster.control_support import cluster_on


@pytest.fixture(scope="module")
def cluster(zookeeper):
    with cluster_on(zookeeper, 3) as c:
        yield c


def test_create_topics_racing_a_controller_kill_reaches_the_new_controller(zookeeper):
    with cluster_on(zookeeper, 3) as cluster:
        old = cluster.controller_id()
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        try:
            cluster.kill(old)
            admin.create_topics([NewTopic("raced", 2, 2)], timeout=40)
        finally:
            admin.close()
        md = cluster.wait_for(lambda md: "raced" in md.topics, 20, "raced in the metadata")
        assert md.controller_id not in (old, -1)
        assert all(p.leader in md.brokers and len(p.replicas) == 2 for p in md.topics["raced"].values())


def _hold_controller_znode(cluster) -> KazooClient:
    """Replace /controller, in one ZooKeeper transaction, with an ephemeral one naming broker 99
    (which does not exist): the active controller resigns and nobody is elected while it stays."""
    kazoo = KazooClient(hosts=cluster.zookeeper_connect)
    kazoo.start(10)
    fake = json.dumps({"version": 1, "brokerid": 99, "timestamp": str(int(time.time() * 1000))}).encode()
    tx = kazoo.transaction()
    tx.delete("/controller")
    tx.create("/controller", fake, ephemeral=True)
    results = tx.commit()
    assert not any(isinstance(r, Exception) for r in results), results
    return kazoo


def _release(kazoo: KazooClient) -> None:
    kazoo.delete("/controller")
    kazoo.stop()
    kazoo.close()


def test_not_controller_is_retried_until_a_controller_is_elected(cluster, caplog):
    held = _hold_controller_znode(cluster)
    cluster.wait_for(lambda md: md.controller_id == 99, 10, "every broker naming the absent controller 99")
    releaser = threading.Timer(2.0, _release, [held])
    admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
    started = time.monotonic()
    try:
        with caplog.at_level(logging.INFO, logger="odradek.client.admin"):
            releaser.start()
            admin.create_topics([NewTopic("retried", 1, 2)], timeout=30)
            elapsed = time.monotonic() - started
            # another controller-bound call (ElectLeaders) reaches the new controller too
            elected = admin.elect_leaders([TopicPartition("retried", 0)])
            assert isinstance(elected[TopicPartition("retried", 0)], ElectionNotNeededError)
    finally:
        releaser.join()
        admin.close()
    retries = [r.getMessage() for r in caplog.records if "answered NOT_CONTROLLER" in r.getMessage()]
    assert retries and all(m.startswith("create_topics: a broker (the metadata names no live controller: 99)") for m in retries), retries
    assert elapsed >= 1.5  # it waited for the release, retrying
    md = cluster.wait_for(lambda md: "retried" in md.topics and md.controller_id in md.brokers, 20, "retried created")
    assert md.topics["retried"][0].leader in md.brokers


def test_a_controller_bound_call_fails_clearly_when_no_controller_answers_in_time(cluster):
    held = _hold_controller_znode(cluster)
    try:
        cluster.wait_for(lambda md: md.controller_id == 99, 10, "every broker naming the absent controller 99")
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        try:
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError) as raised:
                admin.delete_topics(["anything"], timeout=2)
            assert time.monotonic() - started < 10
        finally:
            admin.close()
        message = str(raised.value)
        assert "delete_topics did not complete within 2" in message and "NOT_CONTROLLER" in message, message
    finally:
        _release(held)
    cluster.wait_for(lambda md: md.controller_id in md.brokers, 20, "a controller again")
