"""Consumer-group chaos: members that go away mid-join, and cooperative members that leave under load.

Two scenarios against one Odradek broker, each repeated ``--runs`` times; prints a table.

* **close-mid-join** - ``odradek consume --group G`` is stopped (SIGINT or SIGTERM, in turn)
  at a random moment of its first join. Then two Odradek consumers join G one after the
  other and the script times how long until they split its partitions. A member the
  stopped consumer left behind (joined but never synced, or pending after
  MEMBER_ID_REQUIRED) holds that rebalance until its session expires (``--session-ms``);
  a clean group splits in about one initial rebalance delay plus one heartbeat.
* **cooperative-leave** - two cooperative-sticky consumers under a steady produce load,
  committing after every poll; the second joins, then leaves. The script times the
  two-step split and the survivor's takeover, and counts records never consumed within
  ``--deadline`` seconds of the producer stopping.

Run::

    python benchmarks/group_chaos.py [--runs 10] [--session-ms 20000] [--deadline 30]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from odradek import Admin, Consumer, Producer, TopicPartition  # noqa: E402
from odradek.client.client_errors import CommitFailedError  # noqa: E402
from odradek.protocol.errors import RebalanceInProgressError  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

PARTITIONS = 6


def until(predicate, timeout: float) -> float | None:
    """Seconds until ``predicate()`` holds, or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.05)
    return None


class Member:
    """A consumer polling on its own thread; with ``commit``, it commits after every poll."""

    def __init__(self, bootstrap: str, topic: str, group: str, commit: bool = False, **options):
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id=group, **options)
        self.consumer.subscribe([topic])
        self.commit = commit
        self.assigned: set[TopicPartition] = set()
        self.values: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.values.update(r.value for r in self.consumer.poll(0.05))
            self.assigned = self.consumer.assignment()
            if self.commit:
                try:
                    self.consumer.commit()
                except (RebalanceInProgressError, CommitFailedError):
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def close_mid_join(broker: BrokerProcess, topic: str, args, i: int) -> tuple[str, float | None]:
    group = f"chaos-{uuid.uuid4().hex[:8]}"
    sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
    cmd = [sys.executable, "-m", "odradek", "consume", topic, "--group", group]
    cmd += ["-b", broker.bootstrap_servers, "--consumer-property", f"session.timeout.ms={args.session_ms}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(random.uniform(0.3, 2.5))
    proc.send_signal(sig)
    proc.wait(60)
    options = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300}
    wait = args.session_ms / 1000 + 15
    start = time.monotonic()
    a = Member(broker.bootstrap_servers, topic, group, **options)
    b = None
    try:
        if until(lambda: len(a.assigned) == PARTITIONS, wait) is None:
            return sig.name, None
        b = Member(broker.bootstrap_servers, topic, group, **options)
        if until(lambda: len(a.assigned) == len(b.assigned) == PARTITIONS // 2, wait) is None:
            return sig.name, None
        return sig.name, time.monotonic() - start
    finally:
        for m in (a, b):
            if m is not None:
                m.close()


def cooperative_leave(broker: BrokerProcess, admin, args) -> tuple[float | None, float | None, int, int]:
    topic, group = f"coop-{uuid.uuid4().hex[:8]}", f"coop-{uuid.uuid4().hex[:8]}"
    admin.create_topics([(topic, PARTITIONS, 1)])
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    produced: list[bytes] = []
    stop = threading.Event()

    def produce():
        with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
            while not stop.is_set():
                value = b"%d" % len(produced)
                p.send(topic, value)
                produced.append(value)
                if len(produced) % 100 == 0:
                    time.sleep(0.01)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    options = {
        "session_timeout_ms": args.session_ms,
        "max_poll_interval_ms": args.session_ms,
        "heartbeat_interval_ms": 500,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "partition_assignment_strategy": ["cooperative-sticky"],
    }
    a = Member(broker.bootstrap_servers, topic, group, commit=True, **options)
    until(lambda: a.assigned == everything, 30)
    b = Member(broker.bootstrap_servers, topic, group, commit=True, **options)
    split = until(lambda: len(a.assigned) == len(b.assigned) == PARTITIONS // 2, args.deadline)
    time.sleep(random.uniform(0, 1.5))
    b.close()
    takeover = until(lambda: a.assigned == everything, args.deadline)
    stop.set()
    producer.join()
    want = set(produced)
    until(lambda: want <= a.values | b.values, args.deadline)
    missing = len(want - a.values - b.values)
    a.close()
    return split, takeover, missing, len(want)


def summary(values: list[float | None]) -> str:
    done = [v for v in values if v is not None]
    if not done:
        return "all timed out"
    out = f"median {statistics.median(done):.2f}s, max {max(done):.2f}s"
    stuck = len(values) - len(done)
    return out + (f", {stuck} timed out" if stuck else "")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--session-ms", type=int, default=20000)
    parser.add_argument("--deadline", type=float, default=30.0)
    args = parser.parse_args()
    overrides = {"group.initial.rebalance.delay.ms": 500, "group.min.session.timeout.ms": 500}
    with (
        BrokerProcess(overrides=overrides) as broker,
        Admin(bootstrap_servers=broker.bootstrap_servers) as admin,
    ):
        topic = f"chaos-{uuid.uuid4().hex[:8]}"
        admin.create_topics([(topic, PARTITIONS, 1)])
        print(f"close-mid-join: {args.runs} runs, stopped consumers' session {args.session_ms} ms")
        print(f"{'run':>4} {'signal':>8} {'next two consumers split after':>32}")
        splits = []
        for i in range(args.runs):
            sig, took = close_mid_join(broker, topic, args, i)
            splits.append(took)
            print(f"{i:>4} {sig:>8} {'timed out' if took is None else f'{took:.2f}s':>32}", flush=True)
        print(f"  -> {summary(splits)}\n")
        print(f"cooperative-leave: {args.runs} runs under load, deadline {args.deadline:.0f}s")
        print(f"{'run':>4} {'split':>8} {'takeover':>9} {'records':>9} {'missing':>8}")
        takeovers = []
        for i in range(args.runs):
            split, takeover, missing, total = cooperative_leave(broker, admin, args)
            takeovers.append(takeover)
            row = [f"{v:.2f}s" if v is not None else "stuck" for v in (split, takeover)]
            print(f"{i:>4} {row[0]:>8} {row[1]:>9} {total:>9} {missing:>8}", flush=True)
        print(f"  -> takeover {summary(takeovers)}")


if __name__ == "__main__":
    main()
