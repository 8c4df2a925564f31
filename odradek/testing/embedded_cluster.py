"""A real Odradek cluster for tests and development: its own ZooKeeper and N broker processes.

``EmbeddedCluster(brokers=3)`` starts a ZooKeeper (Debian's package, ``testing.zookeeper``)
and three ``odradek server`` processes in cluster mode (``zookeeper.connect`` with a chroot of
their own), each on a free loopback port with its own data directory, and returns once every
broker is registered and knows every other one, with a controller elected. Brokers can be
killed (SIGKILL, a crash), stopped (SIGTERM, a controlled shutdown) and started again;
``metadata()`` reads what the cluster says (brokers, controller, each partition's leader,
replicas and ISR) with the Python client's admin.

    from odradek.testing import EmbeddedCluster

    with EmbeddedCluster(brokers=3) as cluster:
        cluster.bootstrap_servers          # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        cluster.create_topic("orders", partitions=6, replication_factor=3)
        cluster.kill(cluster.leader("orders", 0))
        cluster.wait_for(lambda md: md.controller_id != -1)

``zookeeper_connect=`` uses a running ZooKeeper instead (a chroot per cluster keeps clusters
apart), which is how the test suite shares one ZooKeeper between tests. The pytest plugin gives
the ``odradek_cluster`` fixture.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from odradek.testing.process import BrokerProcess
from odradek.testing.zookeeper import ZooKeeperServer

# Quick failure detection for tests: ZooKeeper (tick 500 ms) allows 1 s to 10 s.
DEFAULT_SESSION_TIMEOUT_MS = 4000


def stop_all(brokers: list[BrokerProcess], timeout: float = 30.0) -> list[int]:
    """SIGTERM every broker at once (each shutdown is short and none waits for the others), then
    wait for each exit (SIGKILL after ``timeout``); the exit codes, in order. Each gets exactly one
    SIGTERM: a second one could land after its handler is gone and kill it mid-shutdown."""
    for broker in brokers:
        broker.proc.send_signal(signal.SIGTERM)
    codes = []
    for broker in brokers:
        try:
            codes.append(broker.proc.wait(timeout))
        except subprocess.TimeoutExpired:
            broker.proc.kill()
            codes.append(broker.proc.wait())
    return codes


class EmbeddedClusterError(RuntimeError):
    """The cluster did not come up (or did not reach the state waited for) in time."""


@dataclass
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass
class ClusterView:
    """What a Metadata request answered: ``brokers`` {id: (host, port, rack)}, the controller,
    and per topic {partition: PartitionView}."""

    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]
    topics: dict[str, dict[int, PartitionView]] = field(default_factory=dict)


class EmbeddedCluster:
    def __init__(
        self,
        brokers: int = 3,
        *,
        racks: list[str] | None = None,
        overrides: dict[str, object] | None = None,
        data_dir: str | Path | None = None,
        zookeeper_connect: str | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        first_id: int = 1,
        start_timeout: float = 60.0,
        client_settings: dict[str, str] | None = None,
    ):
        if racks is not None and len(racks) != brokers:
            raise ValueError(f"{len(racks)} racks given for {brokers} brokers")
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="odradek-cluster-")
            data_dir = self._tmp
        self.data_dir = Path(data_dir)
        self.zookeeper: ZooKeeperServer | None = None
        self._external_zk = zookeeper_connect
        self.chroot = f"/odradek-{uuid.uuid4().hex[:12]}" if zookeeper_connect else "/odradek"
        self.start_timeout = start_timeout
        self.overrides = {
            "zookeeper.session.timeout.ms": session_timeout_ms,
            "zookeeper.connection.timeout.ms": 10000,
            "controlled.shutdown.retry.backoff.ms": 200,
            **(overrides or {}),
        }
        # How this helper's own admin client (and client_config) connects: security.protocol,
        # sasl.* for a cluster whose listeners want them.
        self.client_settings = dict(client_settings or {})
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(brokers):
            node_id = first_id + i
            extra = {"broker.rack": racks[i]} if racks else {}
            self.brokers[node_id] = BrokerProcess(
                self.data_dir / f"broker-{node_id}",
                node_id=node_id,
                overrides={**self.overrides, **extra},
                log_path=self.data_dir / f"broker-{node_id}.log",
            )
        self._admin = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        hosts = self._external_zk or (self.zookeeper.connect_string if self.zookeeper else "")
        return f"{hosts.rstrip('/')}{self.chroot}"

    def start(self) -> EmbeddedCluster:
        if self._external_zk is None and self.zookeeper is None:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper")
        if self.zookeeper is not None and not self.zookeeper.running:
            self.zookeeper.start()
        try:
            for broker in self.brokers.values():
                broker.overrides["zookeeper.connect"] = self.zookeeper_connect
            with ThreadPoolExecutor(len(self.brokers)) as pool:  # the processes start side by side
                for done in [pool.submit(b.start, self.start_timeout) for b in self.brokers.values()]:
                    done.result()
            self.wait_until_ready()
        except BaseException:
            self.close()
            raise
        return self

    def wait_until_ready(self, timeout: float | None = None) -> ClusterView:
        """Until every running broker is in the metadata and a controller is elected."""
        running = {b for b, p in self.brokers.items() if p.proc is not None and p.proc.poll() is None}
        return self.wait_for(
            lambda md: set(md.brokers) == running and md.controller_id in running,
            timeout or self.start_timeout,
            "every broker registered and a controller elected",
        )

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:
                pass
            self._admin = None
        running = [b for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None]
        stop_all(running)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- brokers -------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    def running_bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None)

    def client_config(self, **extra) -> dict:
        return {"bootstrap.servers": self.bootstrap_servers, **self.client_settings, **extra}

    def kill(self, broker_id: int) -> None:
        """SIGKILL: the broker dies mid-flight; its ZooKeeper session times out later."""
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int) -> int:
        """SIGTERM: a controlled shutdown (leaderships move first); returns the exit code."""
        return self.brokers[broker_id].stop()

    def start_broker(self, broker_id: int) -> None:
        self.brokers[broker_id].start(self.start_timeout)

    def log_text(self, broker_id: int) -> str:
        return self.brokers[broker_id].log_text()

    # -- what the cluster says --------------------------------------------------------------

    def _admin_client(self):
        if self._admin is None:
            from odradek.client.blocking import Admin as BlockingAdmin

            self._admin = BlockingAdmin(
                {"bootstrap.servers": self.bootstrap_servers, "request.timeout.ms": 3000, **self.client_settings}
            )
        return self._admin

    def metadata(self, topics: list[str] | None = None) -> ClusterView:
        admin = self._admin_client()
        desc = admin.describe_cluster()
        view = ClusterView(desc.controller_id, {b.node_id: (b.host, b.port, b.rack) for b in desc.brokers})
        for name, topic in admin.describe_topics(topics).items():
            view.topics[name] = {
                p.partition: PartitionView(p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr), tuple(p.offline_replicas))
                for p in topic.partitions
            }
        return view

    def controller_id(self) -> int:
        return self.metadata([]).controller_id

    def leader(self, topic: str, partition: int) -> int:
        return self.metadata([topic]).topics[topic][partition].leader

    def wait_for(self, predicate: Callable[[ClusterView], bool], timeout: float = 30.0, what: str = "the cluster state") -> ClusterView:
        """Poll the metadata until ``predicate(view)`` holds; EmbeddedClusterError naming ``what``
        (and the last view) after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last: ClusterView | Exception | None = None
        while time.monotonic() < deadline:
            try:
                last = self.metadata()
                if predicate(last):
                    return last
            except Exception as exc:  # a broker just died: ask again
                last = exc
                if self._admin is not None:
                    try:
                        self._admin.close()
                    except Exception:
                        pass
                    self._admin = None
            time.sleep(0.05)
        raise EmbeddedClusterError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last}")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1, configs: dict | None = None) -> None:
        from odradek.client.structs import NewTopic
        from odradek.protocol.errors import NotControllerError

        topic = NewTopic(name, partitions, replication_factor, {k: str(v) for k, v in (configs or {}).items()})
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                self._admin_client().create_topics([topic])
                break
            except NotControllerError:  # the admin client read the metadata before a controller change
                if time.monotonic() > deadline:
                    raise
                self._admin.close()
                self._admin = None  # a new one reads who the controller is now
                time.sleep(0.1)
        self.wait_for(
            lambda md: name in md.topics and len(md.topics[name]) == partitions and all(p.leader >= 0 for p in md.topics[name].values()),
            what=f"leaders of topic {name}",
        )

    def __repr__(self) -> str:
        return f"<EmbeddedCluster {len(self.brokers)} brokers, zookeeper {self.zookeeper_connect}>"
