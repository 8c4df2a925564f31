"""A Jepsen-style chaos run against a real cluster, and the checker of its history (STYLE 20).

``run_chaos`` starts a real ZooKeeper and broker processes (``odradek server`` with
``zookeeper.connect``, through ``odradek.testing.EmbeddedCluster``), creates RF=3 topics with ``min.insync.replicas=2``, and while
idempotent acks=all producers write numbered records and a consumer group reads and commits,
a fault loop kill -9s partition leaders, pauses them (SIGSTOP, then SIGCONT) and kills the
controller, restarting what it killed. Every operation goes into a ``History``. At the end,
once every broker is back in every ISR, the brokers are stopped cleanly and ``check``
decides, from the history, the final logs read by a consumer and the replicas' files:

* every acknowledged record is present, exactly once, at the offset it was acknowledged at;
* records of one producer appear in one partition in the order they were sent;
* all replicas of a partition hold identical bytes (they are fully in sync at the end);
* committed group offsets, as the coordinator answered them over time, never go backwards;
* every broker is back in every ISR.

The result is a list of rows ``(check, ok, detail)``; ``format_table`` prints them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.cluster import zk_data
from odradek.cluster.partitions import TopicPartition
from odradek.testing.embedded_cluster import EmbeddedCluster

TOPIC = "chaos"
GROUP = "chaos-readers"

BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.lag.time.max.ms": 4000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
}


def _until(predicate, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return None


@dataclass
class History:
    """Every operation, in the order it happened (thread safe)."""

    events: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, **data) -> None:
        with self.lock:
            self.events.append({"t": round(time.monotonic(), 3), "kind": kind, **data})

    def of(self, kind: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["kind"] == kind]

    def dump(self, path: Path) -> None:
        with self.lock:
            path.write_text("\n".join(json.dumps(e) for e in self.events))


class ChaosCluster(EmbeddedCluster):
    """C1's ``EmbeddedCluster`` (a ZooKeeper and broker processes 1..N under ``base``, kept
    after close) with what the fault loop needs: SIGSTOP/SIGCONT, a restart that waits out
    the killed broker's ZooKeeper session, and "is every replica in sync"."""

    def __init__(self, base: Path, brokers: int = 3, overrides: dict | None = None):
        settings = {**BROKER_SETTINGS, **(overrides or {})}
        session_ms = int(settings.pop("zookeeper.session.timeout.ms"))
        super().__init__(brokers, overrides=settings, data_dir=base, session_timeout_ms=session_ms)
        self.paused: set[int] = set()
        self._zk_reader: KazooClient | None = None

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def view(self):
        """The cluster's metadata, or None while no broker answers."""
        try:
            return self.metadata()
        except Exception:  # a broker just died or stopped: a fresh admin client next time
            admin, self._admin = self._admin, None
            if admin is not None:
                try:
                    admin.close()
                except Exception:
                    pass
            return None

    def leaders(self, topic: str) -> dict[int, int]:
        view = self.view()
        partitions = view.topics.get(topic, {}) if view is not None else {}
        return {p: state.leader for p, state in partitions.items()}

    def controller(self) -> int:
        view = self.view()
        return view.controller_id if view is not None else -1

    def in_sync(self, topics) -> bool:
        """Every partition of ``topics`` has a leader and all its replicas in the ISR, and every
        broker is registered: in the brokers' Metadata (so clients can use it) and in
        ZooKeeper. Leaders write their ISR to the partition state znodes with conditional
        updates, so ZooKeeper holds the truth where one broker's Metadata answer can be stale
        (a broker just resumed from SIGSTOP still answers with the ISR it knew before)."""
        view = self.view()
        if view is None or len(view.brokers) < len(self.brokers):
            return False
        for name in topics:
            partitions = view.topics.get(name)
            if not partitions:
                return False
            for p in partitions.values():
                if p.leader < 0 or sorted(p.isr) != sorted(p.replicas):
                    return False
        return self._in_sync_in_zookeeper(topics)

    def _in_sync_in_zookeeper(self, topics) -> bool:
        zk = self._zookeeper_reader()
        try:
            if len(zk.get_children(zk_data.BROKER_IDS_PATH)) < len(self.brokers):
                return False
            for name in topics:
                assignment = zk_data.decode_topic_assignment(name, zk.get(zk_data.topic_path(name))[0])
                for index, replicas in assignment.partitions.items():
                    tp = TopicPartition(name, index)
                    data, stat = zk.get(zk_data.partition_state_path(tp))
                    state = zk_data.decode_partition_state(tp, data, stat.version).leader_and_isr
                    if state.leader < 0 or sorted(state.isr) != sorted(replicas.replicas):
                        return False
        except NoNodeError:
            return False
        return True

    def _zookeeper_reader(self) -> KazooClient:
        if self._zk_reader is None:
            self._zk_reader = KazooClient(hosts=self.zookeeper_connect, timeout=30)
            self._zk_reader.start(timeout=30)
        return self._zk_reader

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """Start broker ``i`` again. After a kill -9 its old ZooKeeper session holds
        ``/brokers/ids/<i>`` until the session times out, and a start before that is refused
        (as Kafka's is): try again until it registers."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.start_broker(i)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def pause(self, i: int) -> None:
        proc = self.brokers[i].proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGSTOP)
            self.paused.add(i)

    def resume(self, i: int) -> None:
        proc = self.brokers[i].proc
        if i in self.paused and proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        self.paused.discard(i)

    def close(self) -> None:
        for i in list(self.paused):
            self.resume(i)
        if self._zk_reader is not None:
            self._zk_reader.stop()
            self._zk_reader.close()
            self._zk_reader = None
        super().close()


class Writer(threading.Thread):
    """An idempotent acks=all producer writing ``w<id>-<seq>`` to each partition in turn."""

    def __init__(self, wid: int, bootstrap: str, partitions: int, history: History, stop: threading.Event):
        super().__init__(name=f"writer-{wid}", daemon=True)
        self.wid, self.partitions, self.history, self.stop_event = wid, partitions, history, stop
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "logger": _quiet_logger(),
            }
        )

    def run(self) -> None:
        seq = 0
        while not self.stop_event.is_set():
            p = seq % self.partitions
            value = f"w{self.wid}-{seq}"
            self.history.add("send", value=value, partition=p)
            self.producer.produce(TOPIC, value.encode(), partition=p, on_delivery=self._done)
            self.producer.poll(0)
            seq += 1
            time.sleep(0.002)
        self.producer.flush(90)

    def _done(self, err, msg) -> None:
        if err is None:
            self.history.add("ack", value=msg.value().decode(), partition=msg.partition(), offset=msg.offset())
        else:
            self.history.add("fail", value=msg.value().decode(), partition=msg.partition(), error=str(err))


class GroupReader(threading.Thread):
    """A group member reading and committing synchronously; records each committed offset the
    coordinator then reports (OffsetFetch), which must never go backwards."""

    def __init__(self, bootstrap: str, history: History, stop: threading.Event):
        super().__init__(name="group-reader", daemon=True)
        self.history, self.stop_event = history, stop
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "logger": _quiet_logger(),
            }
        )

    def run(self) -> None:
        self.consumer.subscribe([TOPIC])
        since_commit = 0
        while not self.stop_event.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                since_commit += 1
            if since_commit >= 50:
                since_commit = 0
                try:
                    self.consumer.commit(asynchronous=False)
                    assigned = self.consumer.assignment()
                    for tp in self.consumer.committed(assigned, timeout=10):
                        if tp.offset >= 0:
                            self.history.add("committed", partition=tp.partition, offset=tp.offset)
                except confluent_kafka.KafkaException as exc:
                    self.history.add("commit-failed", error=str(exc))
        self.consumer.close()


def _quiet_logger():
    import logging

    quiet = logging.getLogger("chaos.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet


FAULTS = ("kill-leader", "pause-leader", "kill-controller")


def inject(cluster: ChaosCluster, kind: str, rng: random.Random, history: History) -> None:
    """One fault, held for 1-3 s, then healed (restart or SIGCONT)."""
    if kind == "kill-controller":
        victim = cluster.controller()
    else:
        leaders = [b for b in cluster.leaders(TOPIC).values() if b > 0]
        victim = rng.choice(leaders) if leaders else -1
    if victim not in cluster.brokers:
        victim = rng.choice(sorted(cluster.brokers))
    history.add("fault", fault=kind, broker=victim)
    if kind == "pause-leader":
        cluster.pause(victim)
        time.sleep(rng.uniform(1, 3))
        cluster.resume(victim)
    else:
        cluster.kill(victim)
        time.sleep(rng.uniform(1, 3))
        cluster.restart(victim)
    history.add("healed", fault=kind, broker=victim)


@dataclass
class ChaosResult:
    rows: list
    history: History
    stats: dict

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.rows)


def run_chaos(
    base: Path,
    faults: int,
    *,
    partitions: int = 3,
    writers: int = 2,
    seed: int | None = None,
    settle_timeout: float = 60.0,
    overrides: dict | None = None,
    log=print,
) -> ChaosResult:
    rng = random.Random(seed)
    history = History()
    cluster = ChaosCluster(base, overrides=overrides).start()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    stats: dict = {"faults": {}, "rejoin_s": []}
    try:
        admin = cluster.admin()  # kept until the futures resolve
        futures = admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})])
        for f in futures.values():
            f.result(30)
        if not _until(lambda: cluster.in_sync([TOPIC]), 30):
            raise RuntimeError("the topic never became fully in sync")
        threads = [Writer(w, cluster.bootstrap, partitions, history, stop) for w in range(writers)]
        threads.append(GroupReader(cluster.bootstrap, history, stop))
        for t in threads:
            t.start()
        time.sleep(2)
        for n in range(faults):
            kind = rng.choice(FAULTS)
            inject(cluster, kind, rng, history)
            stats["faults"][kind] = stats["faults"].get(kind, 0) + 1
            t0 = time.monotonic()
            synced = _until(lambda: cluster.in_sync([TOPIC]), settle_timeout, step=0.2)
            stats["rejoin_s"].append(time.monotonic() - t0 if synced else None)
            took = time.monotonic() - t0
            log(
                f"fault {n + 1}/{faults}: {kind}, every replica back in sync {took:.1f} s after the heal"
                if synced
                else f"fault {n + 1}/{faults}: {kind}, NOT back in sync {settle_timeout:.0f} s after the heal"
            )
            time.sleep(rng.uniform(0.5, 1.5))
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join(120)
        final_sync = _until(lambda: cluster.in_sync([TOPIC, "__consumer_offsets"]), settle_timeout, step=0.2)
        logs = read_partitions(cluster.bootstrap, partitions)
        final_committed = committed_offsets(cluster.bootstrap, partitions)
        cluster.close()  # cleanly, every broker; the data stays in ``base``
        replicas = replica_files(cluster, partitions)
        rows = check(history, logs, replicas, final_committed, bool(final_sync))
        return ChaosResult(rows, history, stats)
    finally:
        stop.set()
        cluster.close()


def read_partitions(bootstrap: str, partitions: int) -> dict[int, list[tuple[int, str]]]:
    """Every record of each partition, as (offset, value), up to its high watermark."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-final-reader", "enable.auto.commit": False}
    )
    out: dict[int, list] = {}
    try:
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=30)
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0)])
            got: list = []
            deadline = time.monotonic() + 60
            while (not got or got[-1][0] < high - 1) and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 0.5):
                    if msg.error() is None:
                        got.append((msg.offset(), msg.value().decode()))
            out[p] = got
    finally:
        consumer.close()
    return out


def committed_offsets(bootstrap: str, partitions: int) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = [confluent_kafka.TopicPartition(TOPIC, p) for p in range(partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


def replica_files(cluster: ChaosCluster, partitions: int) -> dict[int, dict[int, bytes]]:
    """Each replica's log bytes, read from the stopped brokers' data directories."""
    from odradek.storage import Log, LogConfig

    out: dict[int, dict[int, bytes]] = {}
    for p in range(partitions):
        per_broker = {}
        for i, b in cluster.brokers.items():
            d = b.data_dir / f"{TOPIC}-{p}"
            if not d.is_dir():
                continue
            log_ = Log(str(d), LogConfig())
            try:
                data = bytearray()
                offset = log_.log_start_offset
                while offset < log_.log_end_offset:
                    read = log_.read(offset, 1 << 20)
                    if read.records is None:
                        break
                    chunk = read.records.read()
                    data += chunk
                    offset = _next_offset(chunk, offset)
                per_broker[i] = bytes(data)
            finally:
                log_.close()
        out[p] = per_broker
    return out


def _next_offset(chunk: bytes, offset: int) -> int:
    from odradek.protocol.batch import iter_headers

    for _, h in iter_headers(chunk):
        if h is not None:
            offset = h.base_offset + h.last_offset_delta + 1
    return offset


def check(history: History, logs, replicas, final_committed, final_sync: bool) -> list:
    rows = []
    acks = history.of("ack")
    position = {}  # value -> [(partition, offset)]
    for p, records in logs.items():
        for offset, value in records:
            position.setdefault(value, []).append((p, offset))
    lost = [a for a in acks if a["value"] not in position]
    moved = [a for a in acks if a["value"] in position and (a["partition"], a["offset"]) not in position[a["value"]]]
    dupes = {v: where for v, where in position.items() if len(where) > 1}
    rows.append(("acked records present", not lost, f"{len(acks) - len(lost)}/{len(acks)} found, {len(lost)} lost"))
    rows.append(("... at their acked offset", not moved, f"{len(moved)} elsewhere"))
    rows.append(("no duplicates", not dupes, f"{len(dupes)} values twice"))
    out_of_order = 0
    for records in logs.values():
        last: dict[str, int] = {}
        for _, value in records:
            writer, seq = value.rsplit("-", 1)
            if int(seq) <= last.get(writer, -1):
                out_of_order += 1
            last[writer] = int(seq)
    rows.append(("per-partition order", out_of_order == 0, f"{out_of_order} records out of order"))
    differing = [p for p, per in replicas.items() if len(per) < 3 or len(set(per.values())) != 1]
    sizes = ", ".join(f"p{p}: {sorted(len(b) for b in per.values())}" for p, per in replicas.items())
    rows.append(("replicas identical", not differing, f"differ: {differing or 'none'} ({sizes} bytes)"))
    backwards = 0
    seen: dict[int, int] = {}
    for e in history.of("committed"):
        if e["offset"] < seen.get(e["partition"], -1):
            backwards += 1
        seen[e["partition"]] = max(seen.get(e["partition"], -1), e["offset"])
    for p, offset in final_committed.items():
        if offset >= 0 and offset < seen.get(p, -1):
            backwards += 1
    commits = len(history.of("committed"))
    rows.append(("committed offsets never go back", backwards == 0, f"{backwards} regressions in {commits} reads"))
    rows.append(("every broker back in every ISR", final_sync, "yes" if final_sync else "no"))
    fails = len(history.of("fail"))
    rows.append(("(unacknowledged sends)", True, f"{fails} failed deliveries (allowed: fate unknown)"))
    return rows


def format_table(rows, stats: dict | None = None) -> str:
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'check'.ljust(width)}  result  detail", f"{'-' * width}  ------  ------"]
    for name, ok, detail in rows:
        lines.append(f"{name.ljust(width)}  {'PASS' if ok else 'FAIL':6}  {detail}")
    if stats:
        rejoin = [s for s in stats.get("rejoin_s", []) if s is not None]
        faults = ", ".join(f"{k} x{v}" for k, v in sorted(stats.get("faults", {}).items()))
        lines.append(f"faults: {faults or 'none'}")
        if rejoin:
            rejoin.sort()
            lines.append(
                f"ISR full again after each heal (restart / SIGCONT): median {rejoin[len(rejoin) // 2]:.1f} s, "
                f"max {rejoin[-1]:.1f} s"
            )
    return "\n".join(lines)
