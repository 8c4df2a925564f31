"""ZkClient against a real ZooKeeper: conditional writes, fenced transactions, watches as events,
ephemeral znodes across session close and expiry, reconnection after a ZooKeeper restart."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from cluster_support import next_event, run

from odradek.cluster import zk_data
from odradek.cluster.zk_client import (
    BadVersionError,
    CheckOp,
    ClientClosedError,
    ControllerMovedError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionEvent,
    SessionState,
    SetDataOp,
    WatchEvent,
    WatchKind,
    ZkClient,
    ZooKeeperUnreachableError,
    split_connect_string,
)
from odradek.testing.process import free_port
from odradek.testing.zookeeper import expire_session

SESSION_MS = 4000
RESTART_SESSION_MS = 20000  # for the restart test: see there


def client(connect: str, **kwargs) -> ZkClient:
    kwargs.setdefault("session_timeout_ms", SESSION_MS)
    return ZkClient(connect, **kwargs)


def is_state(state: SessionState):
    return lambda e: isinstance(e, SessionEvent) and e.state is state


def is_watch(kind: WatchKind, path: str):
    return lambda e: e == WatchEvent(kind, path)


def test_chroot_is_created_and_everything_lives_below_it(zookeeper, zk_connect):
    async def body():
        hosts, chroot = split_connect_string(zk_connect)
        async with client(zk_connect) as zk, client(hosts) as root:
            assert await root.exists(chroot) is not None
            await zk.create("/brokers/ids/1", b"x", makepath=True)
            data, _ = await root.get(f"{chroot}/brokers/ids/1")
            assert data == b"x"
            assert await root.exists("/brokers/ids/1") is None
            assert await zk.get_children("/") == ["brokers"]

    run(body())


def test_reads_writes_and_conditional_versions(zk_connect):
    async def body():
        async with client(zk_connect) as zk:
            assert await zk.create("/a", b"one") == "/a"
            data, stat = await zk.get("/a")
            assert (data, stat.version) == (b"one", 0)
            stat = await zk.set("/a", b"two", version=0)
            assert stat.version == 1
            with pytest.raises(BadVersionError) as info:
                await zk.set("/a", b"stale", version=0)
            assert info.value.path == "/a"
            assert (await zk.get("/a"))[0] == b"two"
            with pytest.raises(BadVersionError):
                await zk.delete("/a", version=0)
            with pytest.raises(NodeExistsError):
                await zk.create("/a")
            with pytest.raises(NoNodeError):
                await zk.create("/missing/child")
            await zk.create("/a/c2")
            await zk.create("/a/c1")
            assert await zk.get_children("/a") == ["c1", "c2"]
            with pytest.raises(NotEmptyError):
                await zk.delete("/a")
            sequential = await zk.create("/a/seq_", b"", sequential=True)
            assert sequential.startswith("/a/seq_") and len(zk_data.sequence_number(sequential, "seq_")) == 10
            await zk.ensure_path("/x/y/z")
            await zk.ensure_path("/x/y/z")
            await zk.delete("/a", recursive=True)
            await zk.delete("/x", recursive=True)
            await zk.delete("/never-existed", recursive=True)
            assert await zk.exists("/a") is None and await zk.exists("/x") is None
            with pytest.raises(NoNodeError):
                await zk.get("/a")

    run(body())


def test_kafka_layout_written_and_read_back(zk_connect):
    """zk_data and zk_client together: a topic, its partition state, and a conditional leader change."""

    async def body():
        async with client(zk_connect) as zk:
            for path in zk_data.PERSISTENT_PATHS:
                await zk.ensure_path(path)
            tp = zk_data.TopicPartition("orders", 0)
            assignment = {0: zk_data.ReplicaAssignment((1, 2, 3))}
            await zk.create(zk_data.topic_path("orders"), zk_data.encode_topic_assignment(None, assignment))
            state = zk_data.LeaderIsrAndControllerEpoch(zk_data.LeaderAndIsr(1, 0, (1, 2, 3)), 1)
            await zk.create(
                zk_data.partition_state_path(tp), zk_data.encode_partition_state(state), makepath=True
            )
            data, stat = await zk.get(zk_data.partition_state_path(tp))
            read = zk_data.decode_partition_state(tp, data, stat.version)
            assert read == state
            moved = read.leader_and_isr.new_leader_and_isr(2, (2, 3))
            new_state = zk_data.LeaderIsrAndControllerEpoch(moved, 1)
            stat = await zk.set(
                zk_data.partition_state_path(tp),
                zk_data.encode_partition_state(new_state),
                version=stat.version,
            )
            # A writer that read the old version (a stale leader shrinking the ISR) is refused.
            with pytest.raises(BadVersionError):
                await zk.set(
                    zk_data.partition_state_path(tp), zk_data.encode_partition_state(state), version=0
                )
            data, stat = await zk.get(zk_data.partition_state_path(tp))
            assert zk_data.decode_partition_state(
                tp, data, stat.version
            ).leader_and_isr == moved.with_zk_version(1)
            assert await zk.get_children(zk_data.TOPICS_PATH) == ["orders"]

    run(body())


def test_stale_controller_epoch_fails_the_whole_transaction(zk_connect):
    async def body():
        async with client(zk_connect) as zk:
            await zk.create(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(1))
            await zk.create("/state", b"v0")
            results = await zk.transaction(
                [SetDataOp("/state", b"v1", 0), CreateOp("/created-by-1")], controller_epoch_zk_version=0
            )
            assert results[0].version == 1 and results[1] == "/created-by-1"
            # A new controller is elected and bumps the epoch (and its znode version).
            await zk.set(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(2), version=0)
            with pytest.raises(ControllerMovedError):
                await zk.transaction(
                    [SetDataOp("/state", b"stale write"), CreateOp("/created-by-stale")],
                    controller_epoch_zk_version=0,
                )
            assert (await zk.get("/state"))[0] == b"v1"
            assert await zk.exists("/created-by-stale") is None
            results = await zk.transaction([DeleteOp("/created-by-1")], controller_epoch_zk_version=1)
            assert results == [None]

    run(body())


def test_failed_transaction_changes_nothing_and_names_the_failing_op(zk_connect):
    async def body():
        async with client(zk_connect) as zk:
            await zk.create("/exists", b"")
            with pytest.raises(NoNodeError) as info:
                await zk.transaction([CreateOp("/new"), SetDataOp("/missing", b""), CheckOp("/exists", 0)])
            assert (info.value.op_index, info.value.path) == (1, "/missing")
            assert await zk.exists("/new") is None
            with pytest.raises(BadVersionError) as info:
                await zk.transaction([CheckOp("/exists", 3)])
            assert info.value.op_index == 0

    run(body())


def test_registering_as_controller_the_kafka_way(zk_connect):
    """Create the ephemeral /controller and bump /controller_epoch in one transaction: exactly one
    contender wins, and the loser's attempt changes nothing."""

    async def body():
        async with client(zk_connect) as one, client(zk_connect) as two:
            await one.create(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(0))

            async def elect(zk: ZkClient, broker_id: int):
                data, stat = await zk.get(zk_data.CONTROLLER_EPOCH_PATH)
                epoch = zk_data.decode_controller_epoch(data) + 1
                results = await zk.transaction(
                    [
                        CreateOp(
                            zk_data.CONTROLLER_PATH, zk_data.encode_controller(broker_id, 1), ephemeral=True
                        ),
                        SetDataOp(
                            zk_data.CONTROLLER_EPOCH_PATH,
                            zk_data.encode_controller_epoch(epoch),
                            stat.version,
                        ),
                    ]
                )
                return epoch, results[1].version

            epoch, epoch_zk_version = await elect(one, 1)
            assert (epoch, epoch_zk_version) == (1, 1)
            with pytest.raises(NodeExistsError):
                await elect(two, 2)
            data, _ = await two.get(zk_data.CONTROLLER_PATH)
            assert zk_data.decode_controller(data).broker_id == 1
            assert zk_data.decode_controller_epoch((await two.get(zk_data.CONTROLLER_EPOCH_PATH))[0]) == 1

    run(body())


def test_watches_arrive_as_events_once_each(zk_connect):
    async def body():
        events = asyncio.Queue()
        async with client(zk_connect, events=events) as zk, client(zk_connect) as other:
            await next_event(events, is_state(SessionState.CONNECTED), what="CONNECTED")
            assert await zk.exists("/node", watch=True) is None
            await other.create("/node", b"a")
            await next_event(events, is_watch(WatchKind.CREATED, "/node"), what="CREATED")

            await zk.get("/node", watch=True)
            await zk.get("/node", watch=True)  # watching twice still fires once
            await other.set("/node", b"b")
            assert await next_event(events, lambda e: True, what="CHANGED") == WatchEvent(
                WatchKind.CHANGED, "/node"
            )
            await other.set("/node", b"c")  # not watched any more: no event

            await zk.get_children("/node", watch=True)
            await other.create("/node/child")
            # Events arrive in order: had the unwatched change fired, it would come first.
            assert await next_event(events, lambda e: True, what="CHILDREN") == WatchEvent(
                WatchKind.CHILDREN, "/node"
            )

            await zk.get("/node/child", watch=True)
            await other.delete("/node/child")
            assert await next_event(events, lambda e: True) == WatchEvent(WatchKind.DELETED, "/node/child")

    run(body())


def test_ephemeral_znode_goes_when_its_session_closes(zk_connect):
    async def body():
        events = asyncio.Queue()
        async with client(zk_connect, events=events) as watcher:
            owner = await client(zk_connect).start()
            await owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
            stat = await watcher.exists("/brokers/ids/1", watch=True)
            assert stat.ephemeral_owner == owner.session_id
            await owner.close()
            await owner.close()  # closing twice is fine
            await next_event(events, is_watch(WatchKind.DELETED, "/brokers/ids/1"), what="DELETED")
            assert await watcher.exists("/brokers/ids/1") is None
            with pytest.raises(ClientClosedError):
                await owner.get("/")

    run(body())


def test_ephemeral_znode_goes_when_its_session_expires_and_a_new_session_follows(zookeeper, zk_connect):
    async def body():
        owner_events, watcher_events = asyncio.Queue(), asyncio.Queue()
        async with (
            client(zk_connect, events=owner_events) as owner,
            client(zk_connect, events=watcher_events) as watcher,
        ):
            first = await next_event(owner_events, is_state(SessionState.CONNECTED))
            await owner.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
            first_czxid = (await owner.exists("/brokers/ids/1")).czxid
            await watcher.exists("/brokers/ids/1", watch=True)

            await asyncio.get_running_loop().run_in_executor(
                None, expire_session, zookeeper.connect_string, owner.client_id
            )

            await next_event(watcher_events, is_watch(WatchKind.DELETED, "/brokers/ids/1"), what="DELETED")
            await next_event(owner_events, is_state(SessionState.LOST), what="LOST")
            second = await next_event(owner_events, is_state(SessionState.CONNECTED), what="new session")
            assert second.session_id not in (None, first.session_id)
            # The owner re-registers in its new session; the new czxid is its new broker epoch.
            await owner.create("/brokers/ids/1", b"{}", ephemeral=True)
            assert (await watcher.exists("/brokers/ids/1")).czxid > first_czxid

    run(body())


def test_reconnects_after_zookeeper_restart_with_session_and_data_intact(zookeeper, zk_connect):
    async def body():
        loop = asyncio.get_running_loop()
        events = asyncio.Queue()
        # ZooKeeper restores the session on restart and expires it unless the client is back
        # within the timeout of the server's start; a JVM starting on a busy machine takes seconds.
        async with client(zk_connect, events=events, session_timeout_ms=RESTART_SESSION_MS) as zk:
            first = await next_event(events, is_state(SessionState.CONNECTED))
            await zk.create("/persistent", b"p")
            await zk.create("/ephemeral", b"e", ephemeral=True)
            await zk.get("/persistent", watch=True)

            await loop.run_in_executor(None, zookeeper.kill)
            await next_event(events, is_state(SessionState.SUSPENDED), what="SUSPENDED")
            # kazoo forgets pending watches when the connection drops: reported once as DROPPED.
            await next_event(events, is_watch(WatchKind.DROPPED, "/persistent"), what="DROPPED")

            # A read issued while ZooKeeper is down waits for the connection and then succeeds.
            pending_read = asyncio.ensure_future(zk.get("/persistent"))
            await asyncio.sleep(0.2)
            assert not pending_read.done()
            await loop.run_in_executor(None, zookeeper.start)
            again = await next_event(events, is_state(SessionState.CONNECTED), what="reconnect")
            assert again.session_id == first.session_id  # back within the session timeout
            assert (await pending_read)[0] == b"p"
            assert (await zk.get("/ephemeral"))[0] == b"e"
            await zk.set("/persistent", b"after restart")
            assert (await zk.get("/persistent"))[0] == b"after restart"

    try:
        run(body())
    finally:
        if not zookeeper.running:
            zookeeper.start()


@pytest.mark.parametrize("chroot", ["/odradek", ""])
def test_unreachable_zookeeper_is_one_clear_error(chroot):
    port = free_port()  # nothing listens here
    connect = f"127.0.0.1:{port}{chroot}"

    async def body():
        zk = ZkClient.from_config({"zookeeper.connect": connect, "zookeeper.connection.timeout.ms": "700"})
        began = time.monotonic()
        with pytest.raises(ZooKeeperUnreachableError) as info:
            await zk.start()
        return time.monotonic() - began, str(info.value)

    elapsed, message = run(body())
    assert "\n" not in message
    assert (
        f"127.0.0.1:{port}" in message
        and "700 ms" in message
        and "zookeeper.connection.timeout.ms" in message
    )
    assert elapsed < 10


def test_config_keys_and_connect_string_validation():
    zk = ZkClient.from_config(
        {"zookeeper.connect": "h1:2181,h2:2181/kafka/prod", "zookeeper.session.timeout.ms": "6000"}
    )
    assert (zk.hosts, zk.chroot, zk.session_timeout_ms, zk.connection_timeout_ms) == (
        "h1:2181,h2:2181",
        "/kafka/prod",
        6000,
        6000,  # Kafka: the connection timeout defaults to the session timeout
    )
    default = ZkClient.from_config({"zookeeper.connect": "h:2181/"})
    assert (default.chroot, default.session_timeout_ms) == (None, 18000)
    with pytest.raises(ValueError, match="zookeeper.connect is not set"):
        ZkClient.from_config({})
    with pytest.raises(ValueError, match="zookeeper.session.timeout.ms"):
        ZkClient.from_config({"zookeeper.connect": "h:1", "zookeeper.session.timeout.ms": "soon"})
    with pytest.raises(ValueError, match="zookeeper.connection.timeout.ms"):
        ZkClient.from_config({"zookeeper.connect": "h:1", "zookeeper.connection.timeout.ms": "-5"})
    with pytest.raises(ValueError, match="chroot"):
        split_connect_string("h:1/a/")


def test_zookeeper_server_reports_start_time_and_answers_four_letter_words(zookeeper):
    from odradek.testing.zookeeper import four_letter_word

    assert zookeeper.last_start_seconds is not None and zookeeper.pid is not None
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zookeeper.host, zookeeper.port, "srvr")
    with socket.create_connection((zookeeper.host, zookeeper.port), timeout=1):
        pass
