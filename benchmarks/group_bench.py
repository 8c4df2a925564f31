"""Consumer-group latency: Odradek (classic and KIP-848 consumer protocol) vs tansu, with
confluent-kafka (librdkafka) consumers: groups of 3 and of 10 members, 2 partitions each.

Two numbers, each the median (min-max) of several runs:

* **first assignment** - from the moment the consumers of a new group call ``subscribe``
  together until the last of them has its assignment. Target on Odradek (classic):
  ``group.initial.rebalance.delay.ms`` + 200 ms; the consumer protocol has no join phase.
* **rebalance after a leave** - from the moment one Stable member starts ``close()``
  (LeaveGroup, or a heartbeat with epoch -1) until the others own all partitions again.
  Target: one heartbeat interval + 200 ms (the others learn of it from their next heartbeat).

Share groups (KIP-932): records per second that 1, 4 and 8 confluent-kafka ShareConsumers
of one group read together from one partition (implicit acknowledgement), ``--share-records``
records of 100 bytes.

The consumer protocol (``group.protocol=consumer``) gets the same heartbeat interval from the
broker (``group.consumer.heartbeat.interval.ms``). Both brokers run on 127.0.0.1 (tansu with
memory storage). Run::

    python benchmarks/group_bench.py [--runs 5] [--delay-ms 500] [--heartbeat-ms 500] [--skip-tansu]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _brokers import tansu_command  # noqa: E402
from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.testing.process import BrokerProcess, free_port, wait_for_port  # noqa: E402

PARTITIONS_PER_MEMBER = 2


class Tansu:
    name = "tansu"

    def __init__(self):
        self.port = free_port()
        self.proc = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        cmd = tansu_command("127.0.0.1", self.port)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port("127.0.0.1", self.port, 30, self.proc)
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Member:
    """A consumer polled by its own thread; records when it last got an assignment."""

    def __init__(self, bootstrap: str, group: str, heartbeat_ms: int, protocol: str):
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
        if protocol == "consumer":  # session and heartbeat are the broker's settings
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": heartbeat_ms})
        self.consumer = Consumer(conf)
        self.assigned: set[int] = set()
        self.assigned_at = 0.0
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, consumer, partitions):  # all of them (eager) or the added ones (incremental)
        self.assigned = self.assigned | {p.partition for p in partitions}
        self.assigned_at = time.perf_counter()

    def _on_revoke(self, consumer, partitions):
        self.assigned = self.assigned - {p.partition for p in partitions}

    def subscribe_and_run(self, topic: str, barrier: threading.Barrier) -> None:
        self.topic = topic
        self.barrier = barrier
        self.thread.start()

    def _run(self):
        self.barrier.wait()
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.stop.is_set():
            self.consumer.poll(0.01)
        self.consumer.close()
        self.closed.set()


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return False


def one_run(bootstrap: str, heartbeat_ms: int, protocol: str, size: int) -> tuple[float, float]:
    partitions = PARTITIONS_PER_MEMBER * size
    topic = create_topic(bootstrap, partitions)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, heartbeat_ms, protocol) for _ in range(size)]
    barrier = threading.Barrier(size + 1)
    for m in members:
        m.subscribe_and_run(topic, barrier)
    barrier.wait()
    t0 = time.perf_counter()
    if not wait(lambda: all(m.assigned for m in members), 60):
        raise RuntimeError("the group never got its first assignment")
    first = max(m.assigned_at for m in members) - t0
    if not wait(lambda: sorted(p for m in members for p in m.assigned) == list(range(partitions)), 30):
        raise RuntimeError("overlapping or missing partitions")
    # settle, then leave at a random point of the heartbeat cycle (members learn of the
    # rebalance from their next heartbeat, so the phase decides the wait)
    time.sleep(0.3 + random.uniform(0, heartbeat_ms / 1000))
    leaver, rest = members[0], members[1:]
    t1 = time.perf_counter()
    leaver.stop.set()
    full = set(range(partitions))
    if not wait(
        lambda: set().union(*(m.assigned for m in rest)) == full and all(m.assigned for m in rest), 60
    ):
        raise RuntimeError("the group never rebalanced after a member left")
    rebalance = max(m.assigned_at for m in rest) - t1
    for m in rest:
        m.stop.set()
    for m in members:
        m.closed.wait(15)
    return first * 1000, rebalance * 1000


def warm_up(bootstrap: str, heartbeat_ms: int, protocol: str) -> None:
    """One throwaway run: __consumer_offsets gets created, connections and caches warm."""
    try:
        one_run(bootstrap, heartbeat_ms, protocol, 3)
    except RuntimeError:
        pass


def measure(broker, runs: int, heartbeat_ms: int, protocol: str, size: int) -> tuple[list[float], list[float]]:
    warm_up(broker.bootstrap_servers, heartbeat_ms, protocol)
    firsts, rebalances = [], []
    for _ in range(runs):
        f, r = one_run(broker.bootstrap_servers, heartbeat_ms, protocol, size)
        firsts.append(f)
        rebalances.append(r)
    return firsts, rebalances


def share_throughput(bootstrap: str, consumers: int, records: int) -> float:
    """Records per second ``consumers`` ShareConsumers of one group read from one partition."""
    topic = create_topic(bootstrap, 1)
    group = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    payload = b"x" * 100
    for _ in range(records):
        producer.produce(topic, value=payload)
        producer.poll(0)
    producer.flush(60)
    counts = [0] * consumers
    done = threading.Event()

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
        c.subscribe([topic])
        while not done.is_set():
            counts[i] += sum(1 for m in c.poll(0.1) or [] if m.error() is None)
            if sum(counts) >= records:
                done.set()
        c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(consumers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    if not done.wait(120):
        raise RuntimeError(f"share consumers read {sum(counts)} of {records} records")
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(15)
    return records / elapsed


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ms ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--delay-ms", type=int, default=500, help="Odradek's group.initial.rebalance.delay.ms"
    )
    parser.add_argument("--heartbeat-ms", type=int, default=500, help="the consumers' heartbeat.interval.ms")
    parser.add_argument("--skip-tansu", action="store_true")
    parser.add_argument("--sizes", default="3,10", help="group sizes to measure (comma-separated)")
    parser.add_argument("--share-records", type=int, default=20000, help="records per share-group run")
    args = parser.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        odradek = BrokerProcess(
            os.path.join(tmp, "data"),
            overrides={
                "group.initial.rebalance.delay.ms": args.delay_ms,
                "group.consumer.heartbeat.interval.ms": args.heartbeat_ms,
                "group.coordinator.rebalance.protocols": "classic,consumer,share",
            },
            log_path=os.path.join(tmp, "broker.log"),
        )
        odradek.start()
        try:
            for size in sizes:
                for protocol in ("classic", "consumer"):
                    results[(f"odradek {protocol}", size)] = measure(odradek, args.runs, args.heartbeat_ms, protocol, size)
            share = {n: share_throughput(odradek.bootstrap_servers, n, args.share_records) for n in (1, 4, 8)}
        finally:
            odradek.stop()
    if not args.skip_tansu:
        tansu = Tansu().start()
        try:
            for size in sizes:
                results[("tansu classic", size)] = measure(tansu, args.runs, args.heartbeat_ms, "classic", size)
        finally:
            tansu.stop()

    print()
    print(
        f"confluent-kafka consumers, {PARTITIONS_PER_MEMBER} partitions per member, session.timeout.ms=6000, "
        f"heartbeat interval {args.heartbeat_ms} ms; Odradek group.initial.rebalance.delay.ms={args.delay_ms}; "
        f"median (min-max) of {args.runs} runs"
    )
    print(f"{'broker / protocol':<20} {'members':>7}  {'subscribe -> first assignment':<32} {'rebalance after one member leaves':<32}")
    for (name, size), (firsts, rebalances) in results.items():
        print(f"{name:<20} {size:>7}  {fmt(firsts):<32} {fmt(rebalances):<32}")
    print(
        f"{'target (classic)':<20} {'':>7}  {'<= ' + str(args.delay_ms + 200) + ' ms':<32} {'<= ' + str(args.heartbeat_ms + 200) + ' ms':<32}"
    )

    print()
    print(f"share group, one partition, {args.share_records} records of 100 bytes, implicit acknowledgement")
    print(f"{'share consumers':<20} {'records/s':>10}")
    for n, rate in share.items():
        print(f"{n:<20} {rate:>10.0f}")


if __name__ == "__main__":
    main()
