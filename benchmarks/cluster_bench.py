"""Cluster control timings with real processes: a ZooKeeper and 3 brokers (EmbeddedCluster).

Rows (issue 15's targets in the last column):
  controller failover      kill -9 of the controller until a new one is named in Metadata
  leader failover, kill -9 kill -9 of a partition leader until an acks=all producer succeeds again
  leader failover, SIGTERM the same with a controlled shutdown
  create 1,000 partitions  CreateTopics of one topic, 1,000 partitions, RF 3, until it answers
  ... until in sync        until every partition has its 3 replicas in the ISR (every broker made its logs)
  ... ApiVersions p99/max  ApiVersions sent to every broker meanwhile, one after another: how long a
                           broker's loop stalls while a LeaderAndIsr creates 1,000 logs
  broker start             process start until the broker is registered and in every broker's metadata
  metadata latency         Metadata for every topic with 10,000 partitions in the cluster (p50 / p99)

    python benchmarks/cluster_bench.py                      # session timeout 6 s, all rows
    python benchmarks/cluster_bench.py --session-timeout-ms 18000 --repeat 3
    python benchmarks/cluster_bench.py --quick              # smaller numbers, for a smoke run
    python benchmarks/cluster_bench.py --only create        # only the partition creation rows
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing.embedded_cluster import EmbeddedCluster  # noqa: E402


def _wait(predicate, timeout: float, what: str, step: float = 0.01) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if predicate():
                return time.monotonic()
        except Exception:
            pass
        time.sleep(step)
    raise TimeoutError(f"timed out waiting for {what}")


def _create(cluster: EmbeddedCluster, name: str, partitions: int, rf: int, timeout: float = 120) -> float:
    admin = AdminClient({"bootstrap.servers": cluster.running_bootstrap_servers()})
    t0 = time.monotonic()
    for f in admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=timeout, request_timeout=timeout).values():
        f.result()
    return time.monotonic() - t0


def controller_failover(cluster: EmbeddedCluster) -> float:
    old = cluster.controller_id()
    t0 = time.monotonic()
    cluster.kill(old)
    end = _wait(lambda: cluster.metadata([]).controller_id not in (-1, old), 120, "a new controller", 0.02)
    cluster.start_broker(old)
    cluster.wait_until_ready()
    return end - t0


def leader_failover(cluster: EmbeddedCluster, topic: str, how: str) -> float:
    """kill -9 or SIGTERM the leader of a fresh RF-3 partition (not the controller) and time
    until an acks=all send to it succeeds again."""
    from odradek.client.blocking import Admin
    from odradek.client.structs import NewTopic as OurNewTopic

    md = cluster.wait_until_ready()
    controller = md.controller_id
    leader = next(b for b in sorted(md.brokers) if b != controller)
    replicas = [leader] + [b for b in sorted(md.brokers) if b != leader]
    admin = Admin({"bootstrap.servers": cluster.running_bootstrap_servers()})
    _wait(lambda: admin.create_topics([OurNewTopic(topic, replica_assignments={0: replicas})]) is None, 30, f"{topic} created")
    admin.close()
    cluster.wait_for(lambda md: topic in md.topics and md.topics[topic][0].isr == tuple(replicas), 30, f"{topic} in sync")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.running_bootstrap_servers(), "acks": "all", "linger.ms": 0,
         "message.timeout.ms": 120000, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
         "topic.metadata.refresh.interval.ms": 100}
    )  # fmt: skip
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    t0 = time.monotonic()
    (cluster.kill if how == "kill" else cluster.stop)(leader)
    done: list[float] = []
    while not done:
        producer.produce(topic, b"probe", partition=0, on_delivery=lambda err, _m: err is None and done.append(time.monotonic()))
        producer.flush(0.05)
        if time.monotonic() - t0 > 120:
            raise TimeoutError("no acks=all send succeeded")
    producer.flush(30)
    cluster.start_broker(leader)
    cluster.wait_until_ready()
    return done[0] - t0


def create_while_probing(cluster: EmbeddedCluster, name: str, partitions: int, rf: int) -> tuple[float, float, float, float]:
    """Create ``name`` while a thread sends ApiVersions to every broker in turn. Returns (until
    CreateTopics answered, until every partition is fully in sync, ApiVersions p99, max)."""
    from odradek.net.connection import Connection

    stop = threading.Event()
    latencies: list[float] = []

    async def probe() -> None:
        conns = []
        for b in cluster.brokers.values():
            conn = Connection(b.host, b.port, 0, "cluster-bench-probe", 60000)
            await conn.connect(10)
            conns.append(conn)
        while not stop.is_set():
            for conn in conns:
                t0 = time.perf_counter()
                await conn.send(18, {"client_software_name": "bench", "client_software_version": "1"}, version=3)
                latencies.append(time.perf_counter() - t0)
            await asyncio.sleep(0.005)
        for conn in conns:
            conn.close()

    thread = threading.Thread(target=lambda: asyncio.run(probe()), daemon=True)
    thread.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    answered = _create(cluster, name, partitions, rf)

    def in_sync() -> bool:
        parts = cluster.metadata([name]).topics[name]
        return len(parts) == partitions and all(len(p.isr) == rf for p in parts.values())

    synced = _wait(in_sync, 300, f"{name} in sync", 0.2) - t0
    stop.set()
    thread.join(30)
    latencies.sort()
    return answered, synced, latencies[int(len(latencies) * 0.99)], latencies[-1]


def broker_start(cluster: EmbeddedCluster) -> float:
    victim = max(cluster.brokers)
    cluster.stop(victim)
    cluster.wait_for(lambda md: victim not in md.brokers, 30)
    t0 = time.monotonic()
    cluster.start_broker(victim)
    cluster.wait_until_ready()
    return time.monotonic() - t0


def metadata_latency(cluster: EmbeddedCluster, total_partitions: int, samples: int) -> tuple[float, float]:
    per_topic = 1000
    for i in range(max(1, total_partitions // per_topic)):
        _create(cluster, f"many-{i}", min(per_topic, total_partitions), 1)
    b = next(iter(cluster.brokers.values()))

    async def measure() -> list[float]:
        from odradek.net.connection import Connection

        conn = Connection(b.host, b.port, 0, "cluster-bench", 60000)
        await conn.connect(10)
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            await conn.send(3, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False}, version=12)  # fmt: skip
            times.append(time.perf_counter() - t0)
        conn.close()
        return times

    times = sorted(asyncio.run(measure()))
    return statistics.median(times), times[int(len(times) * 0.99) - 1 if len(times) > 1 else 0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each failover row (median shown)")
    ap.add_argument("--quick", action="store_true", help="100 partitions and 1,000 for metadata")
    ap.add_argument("--only", choices=["create"], help="run only these rows")
    args = ap.parse_args()
    session = args.session_timeout_ms / 1000
    create_n = 100 if args.quick else 1000
    meta_n = 1000 if args.quick else 10000
    rows = []
    overrides = {"leader.imbalance.check.interval.seconds": 3600}
    with EmbeddedCluster(3, session_timeout_ms=args.session_timeout_ms, overrides=overrides) as cluster:
        print(f"cluster up: 3 brokers, ZooKeeper session timeout {args.session_timeout_ms} ms", file=sys.stderr)
        _create(cluster, "bench", 3, 3)
        if args.only == "create":
            answered, synced, p99, worst = create_while_probing(cluster, "wide", create_n, 3)
            rows.append((f"create {create_n:,} partitions (RF 3)", answered, "<= 10 s"))
            rows.append((f"create {create_n:,} partitions (RF 3), until in sync", synced, ""))
            rows.append(("  meanwhile ApiVersions to each broker: p99", p99, ""))
            rows.append(("  meanwhile ApiVersions to each broker: max", worst, ""))
            _print(rows)
            return
        runs = [controller_failover(cluster) for _ in range(args.repeat)]
        rows.append(("controller failover (kill -9)", statistics.median(runs), f"<= {session + 1:.0f} s"))
        runs = [leader_failover(cluster, f"kill-{i}", "kill") for i in range(args.repeat)]
        rows.append(("leader failover, kill -9, until acks=all succeeds", statistics.median(runs), f"<= {session + 1:.0f} s"))
        runs = [leader_failover(cluster, f"term-{i}", "term") for i in range(args.repeat)]
        rows.append(("leader failover, SIGTERM, until acks=all succeeds", statistics.median(runs), "<= 1 s"))
        rows.append((f"create {create_n:,} partitions (RF 3)", _create(cluster, "wide", create_n, 3), "<= 10 s"))
        runs = [broker_start(cluster) for _ in range(args.repeat)]
        rows.append(("broker start, cluster mode (until in the metadata)", statistics.median(runs), ""))
        p50, p99 = metadata_latency(cluster, meta_n, 50)
        rows.append((f"Metadata, all topics, {meta_n + create_n + 3:,} partitions: p50", p50, ""))
        rows.append((f"Metadata, all topics, {meta_n + create_n + 3:,} partitions: p99", p99, ""))
    _print(rows)


def _print(rows) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'seconds':>9}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>9.3f}  {target}")


if __name__ == "__main__":
    main()
