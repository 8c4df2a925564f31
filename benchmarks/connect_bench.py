"""Kafka Connect: FileStreamSource → topic → FileStreamSink through the worker, beside the plain
Odradek client moving the same lines (a producer reading the file, a consumer writing the other
file) — the worker's overhead over the raw client is the figure (target: ≥ 70 %). The raw client runs
twice: a `send` per line (the plain API), and `send_many` per 2,000 lines (as the worker hands its
polls to the producer).

Starts one broker and one standalone worker (``odradek connect standalone``), writes a file of
``--records`` lines of ``--size`` bytes, and times each path from the first line read to the
last line written. Prints one table: wall seconds, records/s and MB/s of each path, and the CPU
seconds each spent (the client's process or the worker's, and the broker's), which say what the
worker costs per record whatever else the machine is doing.

    python benchmarks/connect_bench.py                     # 200,000 lines of 100 bytes
    python benchmarks/connect_bench.py --records 1000000 --converter json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "connect"))
from _brokers import cpu_seconds, py_spy_record, user_system_seconds  # noqa: E402
from connect_support import WorkerProcess, quickstart_worker  # noqa: E402
from support import wait_until  # noqa: E402

from odradek.client.consumer.consumer import Consumer  # noqa: E402
from odradek.client.producer.producer import Producer  # noqa: E402
from odradek.client.structs import TopicPartition  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

CONVERTERS = {
    "string": "org.apache.kafka.connect.storage.StringConverter",
    "json": "org.apache.kafka.connect.json.JsonConverter",
}


def line_count(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


async def raw_client(bootstrap: str, source: Path, sink: Path, topic: str, records: int, batched: bool) -> float:
    """The same job with the client alone: read lines → produce (acks=all) → consume → append;
    ``batched``: the lines go to ``send_many`` 2,000 at a time (as the worker hands a poll over)
    instead of a ``send`` each."""
    started = time.perf_counter()
    producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    await producer.start()
    await consumer.start()
    consumer.assign([TopicPartition(topic, 0)])

    async def produce() -> None:
        with open(source, "rb") as f:
            if batched:
                while lines := list(islice(f, 2000)):
                    await producer.send_many([(topic, line.rstrip(b"\n"), None, None, 0) for line in lines],
                                             per_record=False)
            else:
                for line in f:
                    await producer.send(topic, line.rstrip(b"\n"), partition=0)
        await producer.flush()

    async def consume() -> None:
        written = 0
        with open(sink, "w", encoding="utf-8") as out:
            while written < records:
                batch = await consumer.poll(timeout=1.0, max_records=2000)
                out.write("".join(r.value.decode() + "\n" for r in batch))
                written += len(batch)

    await asyncio.gather(produce(), consume())
    elapsed = time.perf_counter() - started
    await producer.close()
    await consumer.close()
    return elapsed


def connect_path(worker: WorkerProcess, source: Path, sink: Path, topic: str, records: int,
                 profile: str | None = None) -> float:
    """The sink connector joins its group first (a warm-up line goes through it), so the time is
    the copying's, not the group's join delay."""

    def create(name: str, config: dict[str, str]) -> None:
        resp = requests.post(f"{worker.url}/connectors", json={"name": name, "config": config}, timeout=30)
        assert resp.status_code == 201, resp.text

    create("bench-sink", {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic})
    warm_up = source.with_name("warm-up.txt")
    warm_up.write_text("warm-up\n")
    create("bench-warm-up", {"connector.class": "FileStreamSource", "file": str(warm_up), "topic": topic})
    wait_until(lambda: line_count(sink) >= 1, 120, "the warm-up line", interval=0.05)
    assert worker.proc is not None
    with py_spy_record(worker.proc.pid, profile):
        started = time.perf_counter()
        create("bench-source", {"connector.class": "FileStreamSource", "file": str(source), "topic": topic})
        wait_until(lambda: line_count(sink) >= records + 1, 1800, "the sink file", interval=0.05)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line (newline included)")
    parser.add_argument("--converter", choices=sorted(CONVERTERS), default="string")
    parser.add_argument("--profile", metavar="FILE",
                        help="py-spy record the worker during the copy into FILE (benchmarks/profile_summary.py)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="connect-bench-") as tmp:
        directory = Path(tmp)
        source = directory / "source.txt"
        body = "x" * (args.size - 12)
        with open(source, "w") as out:
            out.writelines(f"{i:010d} {body}\n" for i in range(args.records))
        megabytes = source.stat().st_size / 1e6
        broker = BrokerProcess(directory / "broker").start()
        worker = None
        try:
            assert broker.proc is not None
            raw: dict[bool, tuple[float, tuple[float, float, float]]] = {}
            for batched in (False, True):
                before = (*user_system_seconds(os.getpid()), cpu_seconds(broker.proc.pid))
                seconds = asyncio.run(raw_client(broker.bootstrap_servers, source, directory / f"raw-{batched}.txt",
                                                 f"raw-{batched}", args.records, batched))
                raw[batched] = seconds, cpu_since(before, os.getpid(), broker.proc.pid)
            config = quickstart_worker(broker.bootstrap_servers, directory, **{
                "key.converter": CONVERTERS[args.converter], "value.converter": CONVERTERS[args.converter],
                "offset.flush.interval.ms": "10000",
            })
            worker = WorkerProcess(directory, config).start()
            wait_until(lambda: requests.get(worker.url + "/", timeout=5).ok, 30, "the worker's REST API")
            assert worker.proc is not None
            before = (*user_system_seconds(worker.proc.pid), cpu_seconds(broker.proc.pid))
            connect_s = connect_path(worker, source, directory / "connect.txt", "connect", args.records, args.profile)
            connect_cpu = cpu_since(before, worker.proc.pid, broker.proc.pid)
            copied = (directory / "connect.txt").read_bytes()
            assert copied == b"warm-up\n" + source.read_bytes(), "the sink file differs"
        finally:
            if worker is not None:
                worker.kill()
            broker.stop()

    print(f"{args.records:,} lines of {args.size} bytes ({megabytes:.1f} MB), converter {args.converter}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'path':<36}{'seconds':>9}{'records/s':>11}{'MB/s':>7}{'client CPU s':>14}{'µs/record':>11}"
          f"{'user µs/rec':>13}{'broker CPU s':>14}")
    (raw_s, raw_cpu), (many_s, many_cpu) = raw[False], raw[True]
    for label, seconds, (cpu, user, broker_s) in (("raw Odradek client (send)", raw_s, raw_cpu),
                                                  ("raw Odradek client (send_many)", many_s, many_cpu),
                                                  ("FileStreamSource → FileStreamSink", connect_s, connect_cpu)):
        print(f"{label:<36}{seconds:>9.2f}{args.records / seconds:>11,.0f}{megabytes / seconds:>7.1f}"
              f"{cpu:>14.2f}{cpu / args.records * 1e6:>11.1f}{user / args.records * 1e6:>13.1f}{broker_s:>14.2f}")
    print(f"worker throughput / raw client (send): {raw_s / connect_s:.0%} (target ≥ 70%), "
          f"/ raw client (send_many): {many_s / connect_s:.0%}")
    print(f"worker user CPU per record / raw client's (send): {connect_cpu[1] / raw_cpu[1]:.0%}, "
          f"(send_many): {connect_cpu[1] / many_cpu[1]:.0%}; the reciprocal is the throughput ratio a "
          "CPU-bound run would show")
    print("(client CPU: the raw client's process, or the worker's, from the first line read to the last written; "
          "user CPU leaves out the kernel's, whose loopback work a loaded machine charges to whichever process runs)")


def cpu_since(before: tuple[float, float, float], client: int, broker: int) -> tuple[float, float, float]:
    """(client CPU s, its user part, broker CPU s) since ``before`` = (user, system, broker)."""
    user, system = user_system_seconds(client)
    return user + system - before[0] - before[1], user - before[0], cpu_seconds(broker) - before[2]

if __name__ == "__main__":
    main()
