#!/usr/bin/env python
"""The broker's CPU per request on the network hot paths, for two source trees side by side.

    python benchmarks/network_bench.py                          # this tree only
    python benchmarks/network_bench.py --base /path/to/other/tree --repeat 5

Broker CPU (the on-CPU time of its threads, /proc/PID/task/*/schedstat) divided by the work done,
so that other processes on a shared machine move the numbers less than wall-clock rates
would. Each run starts a fresh broker per tree, trees alternate run by run, and the table
shows each tree's median. Raw sockets drive the broker, one request at a time unless said:

- api_versions x100 pipelined: 100 ApiVersions requests sent at once, then their 100
  answers read; many frames per receive (the per-frame path of the connection).
- produce 1 record: one-record Produce requests (acks=1), each awaited: the fast lane.
- produce 1 MiB: Produce requests of one 1 MiB batch (acks=1): large frames.
- fetch 1 MiB: the produced data read back with 1 MiB Fetch requests: answers streamed by
  reading a chunk and writing it (the default, and what TLS does).
- fetch 32 MiB: the same with 32 MiB Fetch requests.
- the two fetch rows again from a broker with ``ODRADEK_ZERO_COPY=1`` (sendfile on plaintext
  sockets): compare the rows (the default is reading and writing; see the README).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import sched_ns  # noqa: E402
from resource_limits import (  # noqa: E402
    api_versions_request,
    fetch_request,
    metadata_v4_request,
    read_frame,
    request_bytes,
)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

PRODUCE = 0
MiB = 1 << 20

ROWS = {
    "api_versions x100 pipelined": "µs CPU / request",
    "produce 1 record": "µs CPU / request",
    "produce 1 MiB": "ms CPU / MiB",
    "fetch 1 MiB": "ms CPU / MiB",
    "fetch 32 MiB": "ms CPU / MiB",
    "fetch 1 MiB, sendfile": "ms CPU / MiB",
    "fetch 32 MiB, sendfile": "ms CPU / MiB",
}


def record_batch(value: bytes) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, correlation: int, batch: bytes) -> bytes:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    return request_bytes(PRODUCE, 9, correlation, body)


def start_broker(tree: str, workdir: Path, zero_copy: bool = False) -> tuple[subprocess.Popen, int]:
    """``odradek server`` from ``tree`` (its own PYTHONPATH) on a free port."""
    from odradek.testing.process import BrokerProcess, wait_for_port

    spec = BrokerProcess(workdir)
    env = dict(os.environ, PYTHONPATH=tree, ODRADEK_ZERO_COPY="1" if zero_copy else "0")
    proc = subprocess.Popen(
        spec.command(), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree
    )
    wait_for_port(spec.host, spec.port, 30, proc)
    return proc, spec.port


def measure(pid: int, work) -> float:
    """Seconds of broker CPU that ``work`` cost (all threads, nanosecond schedstat)."""
    before = sched_ns(pid)
    work()
    time.sleep(0.05)
    return (sched_ns(pid) - before) / 1e9


def run_once(tree: str, workdir: Path) -> dict[str, float]:
    proc, port = start_broker(tree, workdir)
    out: dict[str, float] = {}
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            topic = "bench"
            create_topic(s, topic)

            batch = b"".join(api_versions_request(c) for c in range(100))

            def pipelined():
                for _ in range(200):
                    s.sendall(batch)
                    for _ in range(100):
                        read_frame(s)

            out["api_versions x100 pipelined"] = measure(proc.pid, pipelined) / 20_000 * 1e6

            small = [produce_request(topic, c, record_batch(b"v" * 100)) for c in range(5000)]

            def one_record():
                for frame in small:
                    s.sendall(frame)
                    read_frame(s)

            out["produce 1 record"] = measure(proc.pid, one_record) / 5000 * 1e6

            big = record_batch(os.urandom(MiB - 100))
            frames = [produce_request(topic, c, big) for c in range(400)]

            def one_mib():
                for frame in frames:
                    s.sendall(frame)
                    check_produced(read_frame(s))

            out["produce 1 MiB"] = measure(proc.pid, one_mib) / 400 * 1e3

            out.update(fetch_rows(s, proc.pid, topic, ""))
    finally:
        proc.terminate()
        proc.wait(30)
    proc, port = start_broker(tree, workdir.with_name(workdir.name + "-sendfile"), zero_copy=True)
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            create_topic(s, "bench")
            for c in range(40):
                s.sendall(produce_request("bench", c, big))
                check_produced(read_frame(s))
            out.update(fetch_rows(s, proc.pid, "bench", ", sendfile"))
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def create_topic(s: socket.socket, topic: str) -> None:
    """Auto-create ``topic`` with a Metadata request (Produce creates nothing, as in Kafka),
    then wait until a Produce to it succeeds."""
    s.sendall(metadata_v4_request([topic], allow_auto_create=True))
    read_frame(s)
    deadline = time.monotonic() + 30
    while True:
        s.sendall(produce_request(topic, 0, record_batch(b"x")))
        try:
            check_produced(read_frame(s))
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def check_produced(frame: bytes) -> None:
    from odradek.protocol.messages import decode_response

    _, response = decode_response(PRODUCE, 9, frame)
    code = response.responses[0].partition_responses[0].error_code
    assert code == 0, f"Produce answered error {code}"


def check_fetched(frame: bytes, size: int) -> None:
    assert len(frame) >= size * 0.9, f"a Fetch for {size} bytes answered {len(frame)}"


def fetch_rows(s: socket.socket, pid: int, topic: str, suffix: str) -> dict[str, float]:
    """Broker CPU per MiB of 1 MiB and of 32 MiB Fetch answers (offset 0 each time: the
    same slice, page cache warm), read by a client as fast as it can."""
    out = {}
    for size, count in ((MiB, 1000), (32 * MiB, 40)):

        def fetch_all(size=size, count=count):
            for c in range(count):
                s.sendall(fetch_request(topic, c, max_bytes=size))
                check_fetched(read_frame(s), size)

        out[f"fetch {size // MiB} MiB{suffix}"] = measure(pid, fetch_all) / (count * size / MiB) * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", help="another source tree to compare with (its root directory)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree (default 3)")
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"this tree": here}
    if args.base:
        trees = {"base": str(Path(args.base).resolve()), **trees}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="odradek-netbench-") as tmp:
        for run in range(args.repeat):
            for name, tree in trees.items():
                results[name].append(run_once(tree, Path(tmp) / f"{name}-{run}".replace(" ", "-")))
    table = Table(title=f"Broker CPU on the network hot paths (median of {args.repeat})")
    table.add_column("row")
    table.add_column("unit")
    for name in trees:
        table.add_column(name, justify="right")
    for row, unit in ROWS.items():
        cells = []
        for name in trees:
            values = [r[row] for r in results[name]]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})")
        table.add_row(row, unit, *cells)
    Console(width=150).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
