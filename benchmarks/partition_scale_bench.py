#!/usr/bin/env python
"""How the broker copes with many partitions: creation, descriptors, startup, stalls.

    python benchmarks/partition_scale_bench.py                    # 1000 and 4000 partitions
    python benchmarks/partition_scale_bench.py --partitions 2000 --topics 4

For each row a fresh broker (``python -m odradek server`` on a temporary log dir) gets
``--topics`` topics of N/topics partitions each, created by one CreateTopics request per topic
(confluent-kafka's AdminClient) while a probe thread sends ApiVersions on its own connection
back to back; the row shows:

- create: wall time of the CreateTopics requests;
- stall: the longest ApiVersions round trip seen meanwhile (how long the event loop was busy
  with something else);
- fds after create: entries in /proc/PID/fd;
- clean start / unclean start: spawn → first Metadata answer, after SIGTERM (clean-shutdown
  marker) and after SIGKILL (recovery), and the descriptors open right after each start;
- fds after touch: descriptors after one record was produced to every partition.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import probe_metadata  # noqa: E402

from odradek.testing.process import BrokerProcess  # noqa: E402

HOST = "127.0.0.1"


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class StallProbe(threading.Thread):
    """ApiVersions v0 round trips back to back on one connection; keeps the slowest."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.worst = 0.0
        self.count = 0
        self._done = threading.Event()

    def run(self) -> None:
        header = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
        request = struct.pack(">i", len(header)) + header
        with socket.create_connection((HOST, self.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._done.is_set():
                t0 = time.perf_counter()
                s.sendall(request)
                size = struct.unpack(">i", _recv(s, 4))[0]
                _recv(s, size)
                self.worst = max(self.worst, time.perf_counter() - t0)
                self.count += 1
                time.sleep(0.002)

    def stop(self) -> None:
        self._done.set()
        self.join(5)


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        more = s.recv(n - len(buf))
        if not more:
            raise ConnectionError("closed")
        buf += more
    return buf


def timed_start(proc: BrokerProcess) -> float:
    t0 = time.perf_counter()
    proc.start(timeout=600)
    probe_metadata(HOST, proc.port, 600, proc.proc)
    return time.perf_counter() - t0


def run_row(total: int, topics: int, workdir: Path) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    per_topic = total // topics
    proc = BrokerProcess(workdir / f"data-{total}")
    proc.start(timeout=60)
    admin = None
    row: dict = {"partitions": per_topic * topics}
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
        probe = StallProbe(proc.port)
        probe.start()
        t0 = time.perf_counter()
        errors = []
        for i in range(topics):
            futures = admin.create_topics([NewTopic(f"scale-{i}", per_topic, 1)], request_timeout=600)
            for f in futures.values():
                try:
                    f.result(600)
                except Exception as exc:  # noqa: BLE001 - shown in the table
                    errors.append(str(exc))
        row["create_s"] = time.perf_counter() - t0
        probe.stop()
        row["stall_ms"] = probe.worst * 1000
        row["errors"] = errors[:1]
        row["fds_after_create"] = fd_count(proc.proc.pid)
        proc.stop(timeout=600)
        row["clean_start_s"] = timed_start(proc)
        row["fds_after_clean_start"] = fd_count(proc.proc.pid)
        producer = Producer({"bootstrap.servers": proc.bootstrap_servers, "linger.ms": 50})
        for i in range(topics):
            for p in range(per_topic):
                producer.produce(f"scale-{i}", b"x", partition=p)
        producer.flush(600)
        del producer
        row["fds_after_touch"] = fd_count(proc.proc.pid)
        proc.kill()
        row["unclean_start_s"] = timed_start(proc)
        row["fds_after_unclean_start"] = fd_count(proc.proc.pid)
    finally:
        del admin
        proc.stop(timeout=600)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--topics", type=int, default=1, help="spread each row's partitions over this many topics")
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"RLIMIT_NOFILE of this shell: soft {soft}, hard {hard}; {os.cpu_count()} cores")
    columns = [
        ("partitions", "{:>10}"),
        ("create_s", "{:>9.2f}"),
        ("stall_ms", "{:>9.0f}"),
        ("fds_after_create", "{:>7}"),
        ("clean_start_s", "{:>8.2f}"),
        ("fds_after_clean_start", "{:>7}"),
        ("fds_after_touch", "{:>7}"),
        ("unclean_start_s", "{:>8.2f}"),
        ("fds_after_unclean_start", "{:>7}"),
    ]
    print(" | ".join(["partitions", "create s", "stall ms", "fds", "clean s", "fds", "touched", "unclean s", "fds"]))
    with tempfile.TemporaryDirectory(prefix="odradek-scale-") as tmp:
        for total in args.partitions:
            row = run_row(total, args.topics, Path(tmp))
            cells = []
            for key, fmt in columns:
                value = row.get(key)
                cells.append(fmt.format(value) if value is not None else "-")
            print(" | ".join(cells) + (f"   errors: {row['errors']}" if row.get("errors") else ""))


if __name__ == "__main__":
    main()
