"""The cost of replication on a real 3-broker cluster (issue 16), one run, one table.

A real ZooKeeper and three ``odradek server`` processes on this machine; 1 KB records from a
confluent-kafka producer (``_loadgen.py``, linger.ms=5, acks=all):

* **throughput**: acks=all to an RF=3 topic with ``min.insync.replicas=2`` versus an RF=1
  topic, records/s and MB/s, and the ratio (target >= 0.5); the three brokers' CPU seconds
  per MB produced (all replicas counted), against tansu's CPU per MB on the same load
  unreplicated (one tansu process with its in-memory engine; issue 16: Odradek's broker CPU
  per replicated MB should stay below it). Each run sits beside the machine's **floor** for
  the same bytes (``_replication_floor.py``: receive, append to a new file, sendfile to the
  followers, which append; no Kafka), ``--rounds`` times in turn, and the table gives
  medians: on a virtual machine the page cache a new file takes costs from 0.2 to over 2 ms
  of kernel CPU per MB from one run to the next, and RF=3 on one machine pays it three
  times. The **by role** rows lead every partition from broker 1: what a leader and a
  follower each cost per MB, beside the floor's leader and follower;
* **end-to-end latency** of acks=all RF=3 at a steady ``--rate`` with librdkafka's default
  linger.ms=5: send to consume, p50/p99, and send to acknowledgement;
* **replication lag under load**: while an acks=1 producer writes as fast as it can, the
  leader's log end offset minus each follower's (read from every broker's /metrics,
  ``kafka_log_log_logendoffset``) every 100 ms: median and max, in records;
* **rejoin**: broker 3 stopped (SIGTERM), ``--rejoin-mb`` written without it (acks=all), then
  started: seconds until it is back in every ISR.
* **catch-up, throttled vs unthrottled**: the same with ``--catch-up-mb``, once freely and once
  with both replication throttles at ``--throttle`` bytes/s on every broker for every replica
  (``leader/follower.replication.throttled.rate`` and ``*.replication.throttled.replicas=*``):
  the catch-up rate in MB/s. ``--only-catch-up`` measures just these two rows. Kafka's quota
  judges a young measurement over ``replication.quota.window.num - 1`` windows (10 s by
  default), so the first 10 s worth of the rate pass at once: keep ``--catch-up-mb`` well
  above 10 x ``--throttle``.

* **many partitions** (``--many-partitions``, default 1000, RF=3): what the followers' fetch
  loops cost when most partitions are idle (the case fetch sessions, KIP-227, are for): the
  three brokers' CPU over ``--idle-seconds`` with no writes, then acks=all 1 KB records
  spread over every partition (``--many-count``): records/s and brokers' CPU per MB.

Run::

    python benchmarks/replication_bench.py [--count 200000] [--rate 2000] [--rejoin-mb 1024] [--catch-up-mb 64]
    python benchmarks/replication_bench.py --only-many [--many-partitions 1000]
    python benchmarks/replication_bench.py --only throughput   # the throughput and CPU rows
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import confluent_kafka  # noqa: E402
from _brokers import TansuBroker, cpu_seconds  # noqa: E402
from _replication_floor import floor, warm_page_cache  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from tests.cluster.chaos_support import ChaosCluster, _until  # noqa: E402

LOADGEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_loadgen.py")
SIZE = 1024
PARTITIONS = 3


def loadgen(job: dict, timeout: float = 900) -> dict:
    out = subprocess.run(
        [sys.executable, LOADGEN, json.dumps(job)], capture_output=True, text=True, timeout=timeout, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def broker_cpu(cluster: ChaosCluster) -> float:
    return sum(cpu_seconds(b.proc.pid) for b in cluster.brokers.values() if b.proc and b.proc.poll() is None)


def throughput(cluster: ChaosCluster, topic: str, count: int, warm: tuple[int, str] | None = None) -> dict:
    """acks=all 1 KB records to ``topic``: the generator's result with each broker's CPU over
    the timed section (``per_broker_ms``: broker id -> ms per MB) and their sum. ``warm``:
    (replicas, directory) to warm the page cache the run will take first (see
    ``_replication_floor.warm_page_cache``)."""
    if warm is not None:
        warm_page_cache(warm[0] * (count * SIZE >> 20), warm[1])
    pids = {b.proc.pid: i for i, b in cluster.brokers.items() if b.proc and b.proc.poll() is None}
    job = {"job": "produce", "bootstrap": cluster.bootstrap, "topic": topic, "count": count, "size": SIZE, "acks": "all"}
    r = loadgen({**job, "broker_pids": list(pids)})
    if r.get("failed") or r.get("undelivered"):
        raise RuntimeError(f"{topic}: {r['failed']} failed, {r['undelivered']} undelivered: {r['failures']}")
    mb = count * SIZE / 1e6
    r["per_broker_ms"] = {
        pids[int(pid)]: (user + r["brokers_system_s"][pid]) / mb * 1000 for pid, user in r["brokers_user_s"].items()
    }
    r["cluster_ms_per_mb"] = sum(r["per_broker_ms"].values())
    r["cluster_cpu_s"] = r["cluster_ms_per_mb"] * mb / 1000
    return r


def throughput_rows(
    cluster: ChaosCluster, count: int, rounds: int, floor_dir: str
) -> tuple[list[tuple[str, str]], dict]:
    """RF=1 and RF=3 side by side with the machine's floor for the same bytes
    (``_replication_floor``: the system calls of a replicated append with no Kafka in them),
    ``rounds`` times, medians: the page cache's cost on this virtual machine moves from run to
    run. The floor and Odradek take turns going first, and the floor keeps its files
    (``floor_dir``), so neither gets the other's freed page cache."""
    megabytes = max(64, count * SIZE >> 20)
    runs: dict[str, list] = {"floor1": [], "one": [], "floor3": [], "three": []}
    for i in range(rounds):  # each goes first in every other round
        for first in (0, 1) if i % 2 == 0 else (1, 0):
            if first == 0:
                runs["floor1"].append(floor(megabytes, 0, floor_dir))
                runs["floor3"].append(floor(megabytes, 2, floor_dir))
            else:
                runs["one"].append(throughput(cluster, "rf1", count, (1, floor_dir)))
                runs["three"].append(throughput(cluster, "rf3", count, (3, floor_dir)))
    med = statistics.median

    def floor_ms(r: dict) -> float:
        return sum(u + s for u, s in r["replicas_ms_per_mb"])

    one_rate = med(r["mb_per_s"] for r in runs["one"])
    three_rate = med(r["mb_per_s"] for r in runs["three"])
    one_ms = med(r["cluster_ms_per_mb"] for r in runs["one"])
    three_ms = med(r["cluster_ms_per_mb"] for r in runs["three"])
    floor1_ms = med(floor_ms(r) for r in runs["floor1"])
    floor3_ms = med(floor_ms(r) for r in runs["floor3"])
    brokers = sorted(runs["three"][0]["per_broker_ms"])
    per_broker = {i: med(r["per_broker_ms"][i] for r in runs["three"]) for i in brokers}
    rows = [
        ("produce 1 KB acks=all, RF=1", f"{one_rate:,.1f} MB/s, brokers {one_ms:.2f} ms CPU/MB"),
        (
            "produce 1 KB acks=all, RF=3 min.insync=2",
            f"{three_rate:,.1f} MB/s, brokers {three_ms:.2f} ms CPU/MB ("
            + ", ".join(f"{per_broker[i]:.2f}" for i in brokers)
            + " per broker)",
        ),
        (
            "RF=3 / RF=1 throughput",
            f"{med(t['mb_per_s'] / o['mb_per_s'] for o, t in zip(runs['one'], runs['three'], strict=True)):.2f}x (target >= 0.5x)",
        ),
        (
            "floor (no Kafka, warm page cache), RF=1: receive, append",
            f"{med(r['mb_per_s'] for r in runs['floor1']):,.0f} MB/s, {floor1_ms:.2f} ms CPU/MB",
        ),
        (
            "floor, RF=3: + sendfile to 2 replicas that append",
            f"{med(r['mb_per_s'] for r in runs['floor3']):,.0f} MB/s, {floor3_ms:.2f} ms CPU/MB (3 processes)",
        ),
        (
            "floor RF=3 / RF=1 throughput (what this machine allows)",
            f"{med(t['mb_per_s'] / o['mb_per_s'] for o, t in zip(runs['floor1'], runs['floor3'], strict=True)):.2f}x",
        ),
        (
            "Odradek above the floor (at most its own overhead), RF=1 / RF=3 (3 brokers)",
            f"{one_ms - floor1_ms:.2f} / {three_ms - floor3_ms:.2f} ms CPU/MB",
        ),
    ]
    summary = {
        "three_ms": three_ms,
        "floor3_ms": floor3_ms,
        "busiest_ms": max(per_broker.values()),
    }
    return rows, summary


def roles(cluster: ChaosCluster, count: int, rounds: int, floor_dir: str) -> list[tuple[str, str]]:
    """What one broker spends per MB in each role, which is the part Odradek controls when the
    machine has fewer cores than the three brokers and the client need: every partition of
    ``roles1`` (RF=1) and ``roles3`` (RF=3, min.insync=2) led by broker 1, so broker 1's CPU is
    the leader's and brokers 2 and 3's the followers', each beside the floor's process in the
    same role, the two taking turns going first. A broker is one event loop, so one
    core per broker caps RF=3 at 1 / (the busiest broker's CPU per MB); the RF=1 rate it is set
    against is the one measured here, where the producer shares the cores."""
    admin = cluster.admin()
    topics = [
        NewTopic("roles1", PARTITIONS, replica_assignment=[[1]] * PARTITIONS),
        NewTopic("roles3", PARTITIONS, replica_assignment=[[1, 2, 3]] * PARTITIONS, config={"min.insync.replicas": "2"}),
    ]
    for f in admin.create_topics(topics).values():
        f.result(30)
    _until(lambda: cluster.in_sync(["roles1", "roles3"]), 60)
    runs: dict[str, list[dict]] = {"roles1": [], "floor3": [], "roles3": []}
    for i in range(rounds):
        runs["roles1"].append(throughput(cluster, "roles1", count, (1, floor_dir)))
        for first in ("floor3", "roles3") if i % 2 == 0 else ("roles3", "floor3"):
            if first == "floor3":
                runs["floor3"].append(floor(max(64, count * SIZE >> 20), 2, floor_dir))
            else:
                runs["roles3"].append(throughput(cluster, "roles3", count, (3, floor_dir)))
    med = statistics.median
    floor3 = {
        "leader": med(sum(r["replicas_ms_per_mb"][0]) for r in runs["floor3"]),
        "follower": med(sum(r["replicas_ms_per_mb"][k]) for r in runs["floor3"] for k in (1, 2)),
    }
    rate1 = med(r["mb_per_s"] for r in runs["roles1"])
    one = {i: med(r["per_broker_ms"][i] for r in runs["roles1"]) for i in (1, 2, 3)}
    three = {i: med(r["per_broker_ms"][i] for r in runs["roles3"]) for i in (1, 2, 3)}
    followers = [three[2], three[3]]
    busiest = max(three.values())
    return [
        ("RF=1 leader (broker 1): CPU per MB", f"{one[1]:.2f} ms"),
        (
            "RF=3 leader (broker 1): CPU per MB",
            f"{three[1]:.2f} ms ({three[1] / one[1]:.2f}x the RF=1 leader; the floor's leader {floor3['leader']:.2f} ms)",
        ),
        (
            "RF=3 followers (brokers 2, 3): CPU per MB",
            ", ".join(f"{c:.2f} ms" for c in followers) + f" (the floor's followers {floor3['follower']:.2f} ms)",
        ),
        (
            "RF=3 rate one core per broker allows (1 / busiest broker's CPU per MB)",
            f"{1000 / busiest:,.0f} MB/s = {1000 / busiest / rate1:.2f}x the RF=1 rate measured here ({rate1:,.0f} MB/s)",
        ),
    ]


def tansu_throughput(count: int, warm_dir: str | None = None) -> dict:
    """The same load against one tansu process (memory engine, RF 1): its CPU per MB, with
    the memory it takes warmed first as for the Odradek runs (``warm_dir``)."""
    from confluent_kafka.admin import AdminClient

    with tempfile.TemporaryDirectory(prefix="odradek-replication-bench-tansu-") as workdir:
        tansu = TansuBroker(Path(workdir))
        tansu.start()
        try:
            admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
            for f in admin.create_topics([NewTopic("rf1", PARTITIONS, 1)]).values():
                f.result(30)
            if warm_dir is not None:
                warm_page_cache(count * SIZE >> 20, warm_dir)
            r = loadgen(
                {"job": "produce", "bootstrap": tansu.bootstrap, "topic": "rf1", "count": count, "size": SIZE,
                 "acks": "all", "broker_pid": tansu.pid}
            )  # fmt: skip
        finally:
            tansu.stop()
    if r.get("failed") or r.get("undelivered"):
        raise RuntimeError(f"tansu: {r['failed']} failed, {r['undelivered']} undelivered: {r['failures']}")
    return r


def latency(cluster: ChaosCluster, topic: str, rate: int, seconds: float, linger_ms: int = 5) -> dict:
    """Send-to-consume and send-to-ack latencies of acks=all at a steady rate."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "latency", "enable.auto.commit": False}
    )
    tps = []
    for p in range(PARTITIONS):
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
        tps.append(confluent_kafka.TopicPartition(topic, p, high))
    consumer.assign(tps)
    e2e: list[float] = []
    acks: list[float] = []
    done = threading.Event()

    def read():
        while not done.is_set():
            msg = consumer.poll(0.1)  # one at a time: consume(n, t) would wait t to fill n
            if msg is not None and msg.error() is None:
                e2e.append((time.perf_counter_ns() - int(msg.value()[:20])) / 1e6)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1)  # the consumer's fetches are in flight
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": linger_ms})
    pad = b"x" * (SIZE - 20)
    interval = 1 / rate
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        sent = time.perf_counter_ns()
        producer.produce(
            topic, b"%020d" % sent + pad, on_delivery=lambda err, msg, sent=sent: acks.append((time.perf_counter_ns() - sent) / 1e6)
        )
        producer.poll(0)
        n += 1
        pause = start + n * interval - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    producer.flush(30)
    _until(lambda: len(e2e) >= n, 10)
    done.set()
    reader.join(5)
    consumer.close()
    return {"sent": n, "e2e": sorted(e2e), "ack": sorted(acks)}


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def log_end_offsets(cluster: ChaosCluster, topic: str) -> dict[int, dict[int, float]]:
    """{partition: {broker: log end offset}} from each broker's /metrics."""
    out: dict[int, dict[int, float]] = {}
    prefix = "kafka_log_log_logendoffset{"
    for i, b in cluster.brokers.items():
        try:
            text = urllib.request.urlopen(b.http_url + "/metrics", timeout=2).read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(prefix) and f'topic="{topic}"' in line:
                labels, value = line.rsplit(" ", 1)
                partition = int(labels.split('partition="')[1].split('"')[0])
                out.setdefault(partition, {})[i] = float(value)
    return out


def replication_lag(cluster: ChaosCluster, topic: str, count: int) -> dict:
    samples: list[float] = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            for leos in log_end_offsets(cluster, topic).values():
                if len(leos) == 3:
                    samples.append(max(leos.values()) - min(leos.values()))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    r = loadgen({"job": "produce", "bootstrap": cluster.bootstrap, "topic": topic, "count": count, "size": SIZE, "acks": "1"})
    done.set()
    sampler.join(5)
    samples.sort()
    return {"samples": samples, "msgs_per_s": r["msgs_per_s"]}


def rejoin(cluster: ChaosCluster, topic: str, megabytes: int) -> dict:
    cluster.stop(3)
    _until(lambda: all(3 not in p_isr for p_isr in _isrs(cluster, topic).values()), 30)
    r = loadgen(
        {"job": "produce", "bootstrap": cluster.bootstrap, "topic": topic, "count": megabytes * 1024, "size": SIZE, "acks": "all"},
        timeout=3600,
    )
    t0 = time.monotonic()
    cluster.restart(3)
    started = time.monotonic() - t0
    back = _until(lambda: cluster.in_sync([topic]), 1800, step=0.2)
    return {"written_mb": megabytes, "write_mb_s": r["mb_per_s"], "start_s": started, "rejoin_s": time.monotonic() - t0 if back else None}


def _set_throttle(cluster: ChaosCluster, topic: str, rate: int | None) -> None:
    """Both replication rates as the cluster-wide default (so a stopped broker has them when it
    starts) and every replica of ``topic`` throttled, or all of it removed (None)."""
    from odradek.client.blocking import Admin
    from odradek.client.structs import ConfigResource

    admin = Admin({"bootstrap.servers": cluster.bootstrap})
    try:
        rates = dict.fromkeys(("leader.replication.throttled.rate", "follower.replication.throttled.rate"), rate)
        admin.incremental_alter_configs({ConfigResource("broker", ""): rates})
        replicas = None if rate is None else "*"
        admin.incremental_alter_configs(
            {
                ConfigResource("topic", topic): dict.fromkeys(
                    ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"), replicas
                )
            }
        )
    finally:
        admin.close()


def catch_up(cluster: ChaosCluster, topic: str, megabytes: int, rate: int | None) -> dict:
    """Broker 3 stopped, ``megabytes`` written without it, restarted: its catch-up rate in MB/s,
    with the replication throttle at ``rate`` bytes/s (None: unthrottled)."""
    cluster.stop(3)
    _until(lambda: all(3 not in p_isr for p_isr in _isrs(cluster, topic).values()), 30)
    loadgen({"job": "produce", "bootstrap": cluster.bootstrap, "topic": topic, "count": megabytes * 1024, "size": SIZE, "acks": "all"})
    if rate is not None:
        _set_throttle(cluster, topic, rate)
    t0 = time.monotonic()
    cluster.restart(3)
    back = _until(lambda: cluster.in_sync([topic]), 600, step=0.1)
    elapsed = time.monotonic() - t0
    if rate is not None:
        _set_throttle(cluster, topic, None)
    return {"mb": megabytes, "s": elapsed if back else None, "mb_s": megabytes * 1.048576 / elapsed if back else None}


def many_partitions(cluster: ChaosCluster, partitions: int, idle_seconds: float, count: int) -> list[tuple[str, str]]:
    """Idle and loaded replication of one topic with ``partitions`` partitions (RF=3)."""
    t0 = time.monotonic()
    admin = cluster.admin()
    for f in admin.create_topics([NewTopic("many", partitions, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(120)
    if not _until(lambda: cluster.in_sync(["many"]), 600, step=1):
        raise RuntimeError("the many-partition topic never became fully in sync")
    created = time.monotonic() - t0
    time.sleep(2)  # the creation's own work is over
    cpu0, w0 = broker_cpu(cluster), time.monotonic()
    time.sleep(idle_seconds)
    idle = (broker_cpu(cluster) - cpu0) / (time.monotonic() - w0)
    r = throughput(cluster, "many", count)
    mb = count * SIZE / 1e6
    return [
        (f"{partitions} partitions RF=3: created and in sync", f"{created:.1f} s"),
        (f"{partitions} partitions RF=3 idle: brokers' CPU", f"{idle * 100:.1f}% of one core (3 brokers, {idle_seconds:.0f} s)"),
        (
            f"{partitions} partitions RF=3: produce 1 KB acks=all",
            f"{r['msgs_per_s']:,.0f} rec/s, {r['mb_per_s']:.1f} MB/s, brokers {r['cluster_cpu_s'] / mb * 1000:.1f} ms CPU/MB",
        ),
    ]


def _isrs(cluster: ChaosCluster, topic: str) -> dict[int, list[int]]:
    view = cluster.view()
    partitions = view.topics.get(topic, {}) if view is not None else {}
    return {p: list(state.isr) for p, state in partitions.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300_000, help="1 KB records per throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (floor and Odradek, RF=1 and RF=3, in turn); medians")
    parser.add_argument("--rate", type=int, default=2000, help="records/s of the latency run")
    parser.add_argument("--seconds", type=float, default=10, help="length of the latency run")
    parser.add_argument("--lag-count", type=int, default=1_000_000, help="records of the lag run")
    parser.add_argument("--rejoin-mb", type=int, default=1024, help="MB written while broker 3 is down")
    parser.add_argument("--catch-up-mb", type=int, default=128, help="MB behind for the throttled/unthrottled catch-up rows")
    parser.add_argument("--throttle", type=int, default=4 << 20, help="bytes/s of the throttled catch-up row")
    parser.add_argument("--only-catch-up", action="store_true", help="measure only the catch-up rows")
    parser.add_argument("--many-partitions", type=int, default=1000, help="partitions of the many-partition run (0: skip it)")
    parser.add_argument("--idle-seconds", type=float, default=20, help="length of the idle many-partition measure")
    parser.add_argument("--many-count", type=int, default=100_000, help="1 KB records of the many-partition run")
    parser.add_argument("--only-many", action="store_true", help="run only the many-partition measures")
    parser.add_argument("--only", choices=["throughput"], help="run only these rows")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="odradek-replication-bench-"))
    atexit.register(shutil.rmtree, base, True)  # the logs are gigabytes; also when a run fails
    cluster = ChaosCluster(base, overrides={"replica.lag.time.max.ms": 10000, "log.segment.bytes": 256 << 20}).start()
    rows = []
    try:
        if args.only_many:
            rows += many_partitions(cluster, args.many_partitions, args.idle_seconds, args.many_count)
            return _print(rows, base)
        admin = cluster.admin()
        futures = admin.create_topics(
            [
                NewTopic("rf1", PARTITIONS, 1),
                NewTopic("rf3", PARTITIONS, 3, config={"min.insync.replicas": "2"}),
                NewTopic("lag", PARTITIONS, 3, config={"min.insync.replicas": "2"}),
                NewTopic("rejoin", PARTITIONS, 3, config={"min.insync.replicas": "2"}),
                NewTopic("catchup", PARTITIONS, 3, config={"min.insync.replicas": "2"}),
            ]
        )
        for f in futures.values():
            f.result(30)
        _until(lambda: cluster.in_sync(["rf1", "rf3", "lag", "rejoin", "catchup"]), 30)
        for rate in () if args.only == "throughput" else (None, args.throttle):
            c = catch_up(cluster, "catchup", args.catch_up_mb, rate)
            what = "unthrottled" if rate is None else f"throttled at {rate / 1048576:.1f} MB/s"
            rows.append(
                (
                    f"catch-up of {c['mb']} MB behind, {what}",
                    f"{c['mb_s']:.1f} MB/s ({c['s']:.1f} s to rejoin the ISR)" if c["s"] is not None else "did NOT rejoin",
                )
            )
        if args.only_catch_up:
            return _print(rows, base)
        floor_dir = str(base / "floor")
        os.makedirs(floor_dir)
        tp_rows, tp = throughput_rows(cluster, args.count, args.rounds, floor_dir)
        rows += tp_rows
        mb = args.count * SIZE / 1e6
        tansu = tansu_throughput(args.count, floor_dir)
        tansu_ms = tansu["broker_cpu_s"] / mb * 1000
        rows += [
            ("tansu, same load, RF=1 (memory engine)", f"{tansu['msgs_per_s']:,.0f} rec/s, {tansu['mb_per_s']:.1f} MB/s, broker {tansu_ms:.2f} ms CPU/MB"),
            ("broker CPU per MB: Odradek RF=3 (3 brokers) / tansu RF=1", f"{tp['three_ms']:.2f} / {tansu_ms:.2f} ms = {tp['three_ms'] / tansu_ms:.2f}x (target < 1)"),
            ("the floor alone, RF=3 (3 processes) / tansu RF=1", f"{tp['floor3_ms']:.2f} / {tansu_ms:.2f} ms = {tp['floor3_ms'] / tansu_ms:.2f}x"),
            ("busiest broker's CPU per replicated MB / tansu's per unreplicated MB", f"{tp['busiest_ms']:.2f} / {tansu_ms:.2f} ms = {tp['busiest_ms'] / tansu_ms:.2f}x"),
        ]  # fmt: skip
        rows += roles(cluster, args.count, args.rounds, floor_dir)
        if args.only == "throughput":
            return _print(rows, base)
        lat = latency(cluster, "rf3", args.rate, args.seconds)
        rows += [
            (f"end to end, acks=all RF=3, {args.rate}/s, linger.ms=5", f"p50 {_pct(lat['e2e'], 0.5):.1f} ms, p99 {_pct(lat['e2e'], 0.99):.1f} ms ({len(lat['e2e'])}/{lat['sent']} read)"),
            ("send to ack, acks=all RF=3", f"p50 {_pct(lat['ack'], 0.5):.1f} ms, p99 {_pct(lat['ack'], 0.99):.1f} ms"),
        ]
        lag = replication_lag(cluster, "lag", args.lag_count)
        samples = lag["samples"]
        rows.append(
            (
                f"replication lag, acks=1 at {lag['msgs_per_s']:,.0f} rec/s",
                f"median {statistics.median(samples) if samples else float('nan'):.0f} records, max {max(samples) if samples else float('nan'):.0f} ({len(samples)} samples)",
            )
        )
        back = rejoin(cluster, "rejoin", args.rejoin_mb)
        rows.append(
            (
                f"rejoin ISR after {back['written_mb']} MB without it",
                f"{back['rejoin_s']:.1f} s after restart (process start {back['start_s']:.1f} s; written at {back['write_mb_s']:.1f} MB/s)"
                if back["rejoin_s"] is not None
                else "did NOT rejoin within 30 min",
            )
        )
        if args.many_partitions:
            rows += many_partitions(cluster, args.many_partitions, args.idle_seconds, args.many_count)
    finally:
        cluster.close()
    return _print(rows, base)


def _print(rows: list[tuple[str, str]], base: Path) -> int:
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)}  result\n{'-' * width}  ------")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    print(f"(3 broker processes and ZooKeeper on this machine, {os.cpu_count()} CPUs, data in {base}, removed at exit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
