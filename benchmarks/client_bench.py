"""Client throughput: Odradek's client vs confluent-kafka, aiokafka and kafka-python.

Each client produces N records of a given size to a fresh topic, then consumes them
back (assigned partitions, from the beginning), against the same broker in one run.
Every (client, workload) runs in its own process. Prints one table.

    python benchmarks/client_bench.py                      # tansu, started here
    python benchmarks/client_bench.py --broker odradek     # Odradek's broker, started here
    python benchmarks/client_bench.py --bootstrap host:9092
    python benchmarks/client_bench.py --scale 0.1 --clients odradek,aiokafka
    python benchmarks/client_bench.py --repeat 3           # best of three (shared, noisy machines)

``odradek-aio-many`` is the asyncio client handing the records to ``send_many`` 2,000 at a time.
All clients get the same settings: acks=1, linger 5 ms, 256 KiB batches, no compression,
unkeyed records, 4 partitions.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from _brokers import tansu_command

from odradek.testing.process import free_port, wait_for_port

CLIENTS = ["odradek", "odradek-aio", "odradek-aio-many", "confluent-kafka", "aiokafka", "kafka-python"]
WORKLOADS = [(100, 1_000_000), (1000, 300_000)]
PARTITIONS = 4
BATCH = 256 * 1024
LINGER_MS = 5


# -- the workers (one process each) --------------------------------------------------------


def create_topic(bootstrap, topic):
    from odradek import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([(topic, PARTITIONS, 1)])


def run_odradek(bootstrap, topic, size, count):
    from odradek import Consumer, Producer, TopicPartition

    value = os.urandom(size)
    with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH) as p:
        p.send(topic, value).result(10)
        send = p.send
        t0 = time.perf_counter()
        for _ in range(count - 1):
            send(topic, value)
        p.flush()
        produce = time.perf_counter() - t0
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=10000) as c:
        c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
        n = 0
        t0 = None
        while n < count:
            recs = c.poll(1.0)
            if t0 is None and recs:
                t0 = time.perf_counter()
            n += len(recs)
        consume = time.perf_counter() - t0
    return produce, consume


def run_odradek_aio(bootstrap, topic, size, count, many=False):
    """``many``: the records go to ``send_many`` 2,000 at a time (one future per batch)."""
    import asyncio

    from odradek import aio

    async def main():
        value = os.urandom(size)
        async with aio.Producer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH
        ) as p:
            await p.send_and_wait(topic, value)
            send = p.send
            t0 = time.perf_counter()
            if many:
                for start in range(0, count - 1, 2000):
                    await p.send_many([(topic, value)] * min(2000, count - 1 - start), per_record=False)
            else:
                for _ in range(count - 1):
                    await send(topic, value)
            await p.flush()
            produce = time.perf_counter() - t0
        async with aio.Consumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=10000
        ) as c:
            c.assign([aio.TopicPartition(topic, i) for i in range(PARTITIONS)])
            n = 0
            t0 = None
            while n < count:
                recs = await c.poll(1.0)
                if t0 is None and recs:
                    t0 = time.perf_counter()
                n += len(recs)
            consume = time.perf_counter() - t0
        return produce, consume

    return asyncio.run(main())


def run_confluent(bootstrap, topic, size, count):
    import confluent_kafka

    value = os.urandom(size)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    p.produce(topic, value)
    p.flush()
    t0 = time.perf_counter()
    produce_ = p.produce
    for _ in range(count - 1):
        while True:
            try:
                produce_(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    p.flush()
    produce = time.perf_counter() - t0
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex, "enable.auto.commit": False}
    )
    c.assign(
        [
            confluent_kafka.TopicPartition(topic, i, confluent_kafka.OFFSET_BEGINNING)
            for i in range(PARTITIONS)
        ]
    )
    n = 0
    t0 = None
    while n < count:
        msgs = c.consume(10000, 1.0)
        if t0 is None and msgs:
            t0 = time.perf_counter()
        n += len(msgs)
    consume = time.perf_counter() - t0
    c.close()
    return produce, consume


def run_aiokafka(bootstrap, topic, size, count):
    import asyncio

    import aiokafka

    async def main():
        value = os.urandom(size)
        p = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, max_batch_size=BATCH
        )
        await p.start()
        await p.send_and_wait(topic, value)
        t0 = time.perf_counter()
        for _ in range(count - 1):
            await p.send(topic, value)
        await p.flush()
        produce = time.perf_counter() - t0
        await p.stop()
        c = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await c.start()
        c.assign([aiokafka.TopicPartition(topic, i) for i in range(PARTITIONS)])
        n = 0
        t0 = None
        while n < count:
            batches = await c.getmany(timeout_ms=1000, max_records=10000)
            got = sum(len(v) for v in batches.values())
            if t0 is None and got:
                t0 = time.perf_counter()
            n += got
        consume = time.perf_counter() - t0
        await c.stop()
        return produce, consume

    return asyncio.run(main())


def run_kafka_python(bootstrap, topic, size, count):
    import kafka

    value = os.urandom(size)
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH)
    p.send(topic, value).get(10)
    t0 = time.perf_counter()
    for _ in range(count - 1):
        p.send(topic, value)
    p.flush()
    produce = time.perf_counter() - t0
    p.close()
    c = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    c.assign([kafka.TopicPartition(topic, i) for i in range(PARTITIONS)])
    c.seek_to_beginning()
    n = 0
    t0 = None
    while n < count:
        got = sum(len(v) for v in c.poll(timeout_ms=1000, max_records=10000).values())
        if t0 is None and got:
            t0 = time.perf_counter()
        n += got
    consume = time.perf_counter() - t0
    c.close()
    return produce, consume


RUNNERS = {
    "odradek": run_odradek,
    "odradek-aio": run_odradek_aio,
    "odradek-aio-many": lambda *args: run_odradek_aio(*args, many=True),
    "confluent-kafka": run_confluent,
    "aiokafka": run_aiokafka,
    "kafka-python": run_kafka_python,
}


def worker(args) -> None:
    topic = f"bench-{args.worker}-{args.size}-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap, topic)
    produce, consume = RUNNERS[args.worker](args.bootstrap, topic, args.size, args.count)
    print(json.dumps({"produce": produce, "consume": consume}))


# -- brokers -------------------------------------------------------------------------------


def start_broker(kind: str, workdir: str):
    port = free_port()
    if kind == "tansu":
        cmd = tansu_command("127.0.0.1", port)
    elif kind == "odradek":
        cmd = [
            sys.executable,
            "-m",
            "odradek",
            "server",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={os.path.join(workdir, 'data')}",
            "--override",
            "http.listeners=",  # no console: this measures clients (and 9644 may be taken)
        ]
    else:
        raise SystemExit(f"unknown broker {kind!r}")
    log = open(os.path.join(workdir, f"{kind}.log"), "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_port("127.0.0.1", port, 30, proc)
    return proc, f"127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default="tansu", choices=["tansu", "odradek"])
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument(
        "--scale", type=float, default=1.0, help="multiply record counts (e.g. 0.1 for a quick run)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per client and workload; the best one counts")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    workdir = tempfile.mkdtemp(prefix="client-bench-")
    atexit.register(shutil.rmtree, workdir, True)  # the logs are gigabytes; also when a run fails
    proc = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap = start_broker(args.broker, workdir)
    rows = []
    try:
        for size, count in WORKLOADS:
            count = max(1000, int(count * args.scale))
            for client in args.clients.split(","):
                best = None
                for _ in range(args.repeat):
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--worker",
                            client,
                            "--bootstrap",
                            bootstrap,
                            "--size",
                            str(size),
                            "--count",
                            str(count),
                        ],
                        capture_output=True,
                        text=True,
                        timeout=1800,
                    )
                    if out.returncode != 0:
                        print(f"{client} {size}B failed:\n{out.stderr[-2000:]}", file=sys.stderr)
                        continue
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    print(
                        f"  {client:16} {size:>5} B x {count:>9,}: produce {count / r['produce']:>10,.0f}/s  "
                        f"consume {count / r['consume']:>10,.0f}/s",
                        file=sys.stderr,
                    )
                    if best is None:
                        best = r
                    else:
                        best = {k: min(best[k], r[k]) for k in best}
                if best is not None:
                    rows.append((client, size, count, best["produce"], best["consume"]))
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    broker = args.bootstrap or args.broker
    print(
        f"\nbroker: {broker}   (acks=1, linger {LINGER_MS} ms, batch {BATCH // 1024} KiB, {PARTITIONS} partitions, no compression)\n"
    )
    header = (
        f"| {'client':16} | {'records':>17} | {'produce rec/s':>13} | {'produce MB/s':>12} | "
        f"{'consume rec/s':>13} | {'consume MB/s':>12} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for client, size, count, prod, cons in rows:
        mb = size * count / 1e6
        print(
            f"| {client:16} | {f'{size} B x {count:,}':>17} | {count / prod:>13,.0f} | {mb / prod:>12.1f} | "
            f"{count / cons:>13,.0f} | {mb / cons:>12.1f} |"
        )


if __name__ == "__main__":
    main()
