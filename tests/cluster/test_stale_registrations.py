"""Clearing dead brokers' registrations (what ``cluster up`` does before a broker starts), on the
session's real ZooKeeper: registrations are ephemeral znodes of real sessions that stay open, as
a kill -9'd broker's do until they expire."""

from __future__ import annotations

import json
import uuid

import pytest
from kazoo.client import KazooClient

from odradek.cluster.stale_registrations import clear_stale_registrations
from tests.cluster.cluster_support import run


@pytest.fixture
def chroot_connect(zookeeper):
    chroot = f"/stale-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(10)
    root.ensure_path(chroot)
    sessions: list[KazooClient] = [root]
    connect = f"{zookeeper.connect_string}{chroot}"

    def session() -> KazooClient:
        client = KazooClient(hosts=connect)
        client.start(10)
        sessions.append(client)
        return client

    yield connect, session
    for client in sessions:
        client.stop()
        client.close()


def _register(client: KazooClient, broker_id: int) -> None:
    client.create(f"/brokers/ids/{broker_id}", json.dumps({"version": 5}).encode(), ephemeral=True, makepath=True)


def test_the_dead_brokers_registrations_and_their_controller_go_the_live_ones_stay(chroot_connect):
    connect, session = chroot_connect
    dead, live = session(), session()
    _register(dead, 1)
    _register(live, 2)
    dead.create("/controller", b'{"version":1,"brokerid":1}', ephemeral=True)
    cleared = run(clear_stale_registrations(connect, [1]))
    assert cleared.broker_ids == [1] and cleared.controller
    assert cleared.describe() == f"broker 1 and /controller (ZooKeeper session 0x{dead.client_id[0]:x})"
    assert live.get_children("/brokers/ids") == ["2"]
    assert live.exists("/controller") is None
    # the dead session's expiry later removes nothing the new registration made
    _register(live, 1)
    dead.stop()
    assert sorted(live.get_children("/brokers/ids")) == ["1", "2"]


def test_a_registration_held_by_a_live_brokers_session_is_kept(chroot_connect):
    """Broker 3 is named dead, but its znode's session also holds broker 2's registration
    (a live one): that znode is not stale, so nothing goes; nor does a live controller."""
    connect, session = chroot_connect
    shared = session()
    _register(shared, 2)
    _register(shared, 3)
    shared.create("/controller", b'{"version":1,"brokerid":2}', ephemeral=True)
    cleared = run(clear_stale_registrations(connect, [3]))
    assert not cleared
    assert sorted(shared.get_children("/brokers/ids")) == ["2", "3"] and shared.exists("/controller")


def test_none_means_every_registration_is_stale_as_when_no_broker_runs(chroot_connect):
    connect, session = chroot_connect
    first, second = session(), session()
    _register(first, 1)
    _register(second, 2)
    first.create("/controller", b'{"version":1,"brokerid":1}', ephemeral=True)
    cleared = run(clear_stale_registrations(connect, None))
    assert cleared.broker_ids == [1, 2] and cleared.controller
    assert cleared.describe().startswith("brokers 1, 2 and /controller (ZooKeeper sessions 0x")
    assert first.get_children("/brokers/ids") == []
