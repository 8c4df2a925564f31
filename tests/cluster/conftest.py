"""Fixtures for cluster tests: one real ZooKeeper per test session, a fresh chroot per test."""

from __future__ import annotations

import uuid

import pytest

from odradek.testing.zookeeper import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper (Debian's package) on a free loopback port, for the whole session.
    Tests that restart it leave it serving again."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper):
    """A ``zookeeper.connect`` string with a chroot of this test's own (``127.0.0.1:PORT/test-<uuid>``),
    so tests never see each other's znodes. The chroot is created by whoever connects first."""
    if not zookeeper.running:  # a previous test killed it and failed before restarting it
        zookeeper.start()
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex}"
