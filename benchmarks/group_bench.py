"""Consumer-group latency: Odradek vs tansu, with three confluent-kafka (librdkafka) consumers.

Two numbers, each the median (min-max) of several runs:

* **first assignment** - from the moment three consumers of a new group call
  ``subscribe`` together until the last of them has its assignment. Target on Odradek:
  ``group.initial.rebalance.delay.ms`` + 200 ms.
* **rebalance after a leave** - from the moment one of three Stable members starts
  ``close()`` (which sends LeaveGroup) until the two others own all partitions again.
  Target: one ``heartbeat.interval.ms`` + 200 ms (the others learn of the rebalance from
  their next heartbeat).

Both brokers run on 127.0.0.1 (tansu with memory storage). Run::

    python benchmarks/group_bench.py [--runs 5] [--delay-ms 500] [--heartbeat-ms 500]
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
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing.process import BrokerProcess, free_port, wait_for_port  # noqa: E402

PARTITIONS = 6


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

    def __init__(self, bootstrap: str, group: str, heartbeat_ms: int):
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": heartbeat_ms,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        self.assigned: set[int] = set()
        self.assigned_at = 0.0
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, consumer, partitions):
        self.assigned = {p.partition for p in partitions}
        self.assigned_at = time.perf_counter()

    def _on_revoke(self, consumer, partitions):
        self.assigned = set()

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


def create_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    return name


def wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return False


def one_run(bootstrap: str, heartbeat_ms: int) -> tuple[float, float]:
    topic = create_topic(bootstrap)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, heartbeat_ms) for _ in range(3)]
    barrier = threading.Barrier(4)
    for m in members:
        m.subscribe_and_run(topic, barrier)
    barrier.wait()
    t0 = time.perf_counter()
    if not wait(lambda: all(m.assigned for m in members), 60):
        raise RuntimeError("the group never got its first assignment")
    first = max(m.assigned_at for m in members) - t0
    if sorted(p for m in members for p in m.assigned) != list(range(PARTITIONS)):
        raise RuntimeError("overlapping or missing partitions")
    # settle, then leave at a random point of the heartbeat cycle (members learn of the
    # rebalance from their next heartbeat, so the phase decides the wait)
    time.sleep(0.3 + random.uniform(0, heartbeat_ms / 1000))
    leaver, rest = members[0], members[1:]
    t1 = time.perf_counter()
    leaver.stop.set()
    full = set(range(PARTITIONS))
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


def warm_up(bootstrap: str, heartbeat_ms: int) -> None:
    """One throwaway run: __consumer_offsets gets created, connections and caches warm."""
    try:
        one_run(bootstrap, heartbeat_ms)
    except RuntimeError:
        pass


def measure(broker, runs: int, heartbeat_ms: int) -> tuple[list[float], list[float]]:
    warm_up(broker.bootstrap_servers, heartbeat_ms)
    firsts, rebalances = [], []
    for _ in range(runs):
        f, r = one_run(broker.bootstrap_servers, heartbeat_ms)
        firsts.append(f)
        rebalances.append(r)
    return firsts, rebalances


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
    args = parser.parse_args()

    results = {}
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        odradek = BrokerProcess(
            os.path.join(tmp, "data"),
            overrides={"group.initial.rebalance.delay.ms": args.delay_ms},
            log_path=os.path.join(tmp, "broker.log"),
        )
        odradek.start()
        try:
            results["odradek"] = measure(odradek, args.runs, args.heartbeat_ms)
        finally:
            odradek.stop()
    if not args.skip_tansu:
        tansu = Tansu().start()
        try:
            results["tansu"] = measure(tansu, args.runs, args.heartbeat_ms)
        finally:
            tansu.stop()

    print()
    print(
        f"3 confluent-kafka consumers, {PARTITIONS} partitions, session.timeout.ms=6000, "
        f"heartbeat.interval.ms={args.heartbeat_ms}; Odradek group.initial.rebalance.delay.ms={args.delay_ms}; "
        f"median (min-max) of {args.runs} runs"
    )
    print(f"{'broker':<10} {'subscribe -> first assignment':<32} {'rebalance after one member leaves':<32}")
    for name, (firsts, rebalances) in results.items():
        print(f"{name:<10} {fmt(firsts):<32} {fmt(rebalances):<32}")
    print(
        f"{'target':<10} {'<= ' + str(args.delay_ms + 200) + ' ms':<32} {'<= ' + str(args.heartbeat_ms + 200) + ' ms':<32}"
    )


if __name__ == "__main__":
    main()
