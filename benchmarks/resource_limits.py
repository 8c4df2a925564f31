#!/usr/bin/env python
"""What hostile connection patterns cost the broker: memory (RSS) and other clients' latency.

    python benchmarks/resource_limits.py                    # every scenario (about a minute)
    python benchmarks/resource_limits.py --only idle,big_frames
    PYTHONPATH=/path/to/other/tree python benchmarks/resource_limits.py   # measure another tree

Each scenario starts a broker of its own (``odradek server`` on 127.0.0.1, a temporary log
dir), reads its ``VmRSS`` from /proc/PID/status before, during and after the attack, and
prints one table row:

- idle: 2,000 connections that each finish an ApiVersions exchange and go quiet; RSS
  growth per connection.
- big_frames: 20 sockets each announce a 100 MiB request and send one byte of it.
- pipelined_fetch: 5 sockets each send 200 Fetch requests for 10 MiB (answerable at once)
  and never read; RSS peak over 10 s, then 5 s after they disconnect.
- delayed_fetch: the same with ``min_bytes`` out of reach and ``max_wait`` 300 ms, so
  every request parks in the purgatory and is answered when it expires.
- unread_fetch: 20 sockets each pipeline 5 Fetch requests for 50 MiB of a 60 MiB partition
  and do not read for 8 s (peak RSS meanwhile); then each reads its 5 answers (bytes
  received, checked complete).
- slow_big_frames: 50 sockets each announce a 99 MiB request and send 20 MiB of it as fast
  as the broker reads; meanwhile another client's ApiVersions, Metadata and a 1 KiB Produce
  are timed (the slowest of each). Bytes the broker took are what the senders got out.
  With the default ``queued.max.request.bytes`` (1/256 of the memory, at least 100 MiB) only
  two of them are read; ``slow_big_frames_no_pool`` lifts the pool (-1) to show what partial
  frames cost: about the bytes received.
- metadata_1m: one Metadata request naming 1,000,000 topics (auto-creation off), while
  another client produces one record at a time: how long the big request took, and the
  slowest produce round trip of the other client meanwhile.
- auto_create: one Metadata request naming 3,000 unknown topics with auto-creation on:
  how many topics the broker created.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import _recv_exact, proc_status  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from odradek.protocol.messages import build_request, decode_response, encode_request  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

FETCH, METADATA, API_VERSIONS = 1, 3, 18
MiB = 1 << 20


def rss_kib(pid: int) -> int:
    return proc_status(pid)["VmRSS"]


def peak_rss_kib(pid: int, seconds: float, interval: float = 0.05) -> int:
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_kib(pid))
        time.sleep(interval)
    return peak


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def request_bytes(api_key: int, version: int, correlation: int, body: dict) -> bytes:
    return encode_request(
        api_key, version, correlation, "resource-bench", build_request(api_key, version, body)
    )


def api_versions_request(correlation: int = 1) -> bytes:
    return request_bytes(
        API_VERSIONS, 3, correlation, {"client_software_name": "bench", "client_software_version": "1"}
    )


def metadata_v4_request(names: list[str], allow_auto_create: bool, correlation: int = 1) -> bytes:
    """Metadata v4 packed by hand: building a million kio entities takes longer than the test."""
    client_id = b"resource-bench"
    parts = [struct.pack(">hhih", METADATA, 4, correlation, len(client_id)), client_id]
    parts.append(struct.pack(">i", len(names)))
    for name in names:
        raw = name.encode()
        parts.append(struct.pack(">h", len(raw)))
        parts.append(raw)
    parts.append(b"\x01" if allow_auto_create else b"\x00")
    payload = b"".join(parts)
    return struct.pack(">i", len(payload)) + payload


def fetch_request(topic: str, correlation: int, *, max_bytes: int, min_bytes: int = 1, max_wait_ms: int = 0):
    body = {
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}],
            }
        ],
        "forgotten_topics_data": [],
    }
    return request_bytes(FETCH, 12, correlation, body)


def fill_topic(broker: BrokerProcess, topic: str, megabytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    value = b"r" * 100_000
    for _ in range(megabytes * 10):
        producer.produce(topic, value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0, "records left unsent"


def close_all(socks) -> None:
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


# -- scenarios -------------------------------------------------------------------------------


def scenario_idle(broker: BrokerProcess, n: int = 2000) -> dict:
    warm = [socket.create_connection((broker.host, broker.port)) for _ in range(50)]
    for s in warm:
        s.sendall(api_versions_request())
    for s in warm:
        read_frame(s)
    close_all(warm)
    time.sleep(1)
    before = rss_kib(broker.proc.pid)
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection((broker.host, broker.port)))
        for s in socks:
            s.sendall(api_versions_request())
        for s in socks:
            read_frame(s)
        time.sleep(1)
        after = rss_kib(broker.proc.pid)
    finally:
        close_all(socks)
    return {
        "during": f"+{(after - before) / 1024:.0f} MiB for {n}",
        "after": "",
        "other": f"{(after - before) / n:.1f} KiB per idle connection",
    }


def scenario_big_frames(broker: BrokerProcess, n: int = 20, announced: int = 100 * MiB) -> dict:
    before = rss_kib(broker.proc.pid)
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection((broker.host, broker.port))
            s.sendall(struct.pack(">i", announced) + b"\x00")
            socks.append(s)
        peak = peak_rss_kib(broker.proc.pid, 2.0)
    finally:
        close_all(socks)
    after = peak_rss_kib(broker.proc.pid, 2.0)
    return {
        "during": f"+{(peak - before) / 1024:.0f} MiB",
        "after": f"+{(after - before) / 1024:.0f} MiB",
        "other": f"{n} x {announced // MiB} MiB announced, 1 byte sent",
    }


def _fetch_flood(broker: BrokerProcess, *, delayed: bool, sockets: int = 5, requests: int = 200) -> dict:
    topic = "flood"
    fill_topic(broker, topic, 12)
    time.sleep(1)
    before = rss_kib(broker.proc.pid)
    socks = []
    try:
        for _ in range(sockets):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((broker.host, broker.port))
            batch = b"".join(
                fetch_request(
                    topic,
                    c,
                    max_bytes=10 * MiB,
                    min_bytes=1 << 30 if delayed else 1,
                    max_wait_ms=300 if delayed else 0,
                )
                for c in range(1, requests + 1)
            )
            s.sendall(batch)
            socks.append(s)
        peak = peak_rss_kib(broker.proc.pid, 10.0)
    finally:
        close_all(socks)
    after = peak_rss_kib(broker.proc.pid, 5.0)
    final = rss_kib(broker.proc.pid)
    return {
        "during": f"+{(peak - before) / 1024:.0f} MiB peak",
        "after": f"+{(after - before) / 1024:.0f} MiB peak, +{(final - before) / 1024:.0f} MiB at the end",
        "other": f"{sockets} x {requests} x 10 MiB Fetch, never read",
    }


def scenario_pipelined_fetch(broker: BrokerProcess) -> dict:
    return _fetch_flood(broker, delayed=False)


def scenario_delayed_fetch(broker: BrokerProcess) -> dict:
    return _fetch_flood(broker, delayed=True)


def scenario_unread_fetch(broker: BrokerProcess, sockets: int = 20, requests: int = 5) -> dict:
    topic = "unread"
    fill_topic(broker, topic, 60)
    time.sleep(1)
    before = rss_kib(broker.proc.pid)
    socks = []
    try:
        for _ in range(sockets):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((broker.host, broker.port))
            s.sendall(b"".join(fetch_request(topic, c, max_bytes=50 * MiB) for c in range(1, requests + 1)))
            socks.append(s)
        peak = peak_rss_kib(broker.proc.pid, 8.0)
        received = 0
        for s in socks:  # now read every answer, whole
            s.settimeout(120)
            for c in range(1, requests + 1):
                frame = read_frame(s)
                (correlation,) = struct.unpack_from(">i", frame)
                assert correlation == c, f"answer {correlation} where {c} was due"
                received += 4 + len(frame)
        peak = max(peak, rss_kib(broker.proc.pid))
    finally:
        close_all(socks)
    after = peak_rss_kib(broker.proc.pid, 3.0)
    return {
        "during": f"{peak / 1024:.0f} MiB peak (+{(peak - before) / 1024:.0f})",
        "after": f"+{(after - before) / 1024:.0f} MiB",
        "other": f"{sockets} x {requests} x 50 MiB Fetch unread for 8 s, then read: "
        f"{received / MiB:,.0f} MiB received, complete",
    }


def _timed_probes(broker: BrokerProcess, stop: threading.Event, out: dict[str, float]) -> None:
    """ApiVersions, Metadata and a 1 KiB Produce from another client, over and over until
    ``stop``: the slowest round trip of each, in seconds (a failure counts as infinite)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce("probe", b"warm-up")
    producer.flush(30)
    with socket.create_connection((broker.host, broker.port), timeout=30) as s:
        while not stop.is_set():
            for name, request in (
                ("ApiVersions", api_versions_request()),
                ("Metadata", metadata_v4_request(["probe"], allow_auto_create=False)),
            ):
                t0 = time.perf_counter()
                try:
                    s.sendall(request)
                    read_frame(s)
                    took = time.perf_counter() - t0
                except OSError:
                    took = float("inf")
                out[name] = max(out.get(name, 0.0), took)
            t0 = time.perf_counter()
            producer.produce("probe", b"p" * 1024)
            left = producer.flush(30)
            out["Produce 1 KiB"] = max(out.get("Produce 1 KiB", 0.0), time.perf_counter() - t0 if not left else float("inf"))
            time.sleep(0.05)


def scenario_slow_big_frames(broker: BrokerProcess, n: int = 50, announced: int = 99 * MiB, send: int = 20 * MiB) -> dict:
    import select

    before = rss_kib(broker.proc.pid)
    latencies: dict[str, float] = {}
    stop = threading.Event()
    prober = threading.Thread(target=_timed_probes, args=(broker, stop, latencies))
    socks = []
    sent: dict[socket.socket, int] = {}
    peak = before
    try:
        for _ in range(n):
            s = socket.create_connection((broker.host, broker.port))
            s.setblocking(False)
            s.send(struct.pack(">i", announced))
            sent[s] = 0
            socks.append(s)
        prober.start()
        chunk = b"\x00" * (256 * 1024)
        deadline = time.monotonic() + 20
        next_sample = 0.0
        while time.monotonic() < deadline:
            busy = [s for s in socks if sent[s] < send]
            if not busy:
                break
            _, writable, _ = select.select([], busy, [], 0.05)
            for s in writable:
                try:
                    sent[s] += s.send(chunk[: send - sent[s]])
                except BlockingIOError:
                    pass
            if time.monotonic() >= next_sample:
                peak = max(peak, rss_kib(broker.proc.pid))
                next_sample = time.monotonic() + 0.05
        peak = max(peak, peak_rss_kib(broker.proc.pid, 2.0))
    finally:
        stop.set()
        if prober.is_alive():
            prober.join()
        close_all(socks)
    after = peak_rss_kib(broker.proc.pid, 2.0)
    final = rss_kib(broker.proc.pid)
    slowest = ", ".join(f"{name} {took * 1000:.0f} ms" for name, took in latencies.items())
    return {
        "during": f"{peak / 1024:.0f} MiB peak (+{(peak - before) / 1024:.0f})",
        "after": f"+{(after - before) / 1024:.0f} MiB peak, +{(final - before) / 1024:.0f} MiB at the end",
        "other": f"{n} x {announced // MiB} MiB announced, {sum(sent.values()) / MiB:,.0f} MiB "
        f"taken of {n * send / MiB:,.0f}; slowest other-client round trip: {slowest}",
    }


def scenario_metadata_1m(broker: BrokerProcess, n: int = 1_000_000) -> dict:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce("probe", b"warm-up")
    assert producer.flush(30) == 0
    request = metadata_v4_request([f"no-such-topic-{i:07d}" for i in range(n)], allow_auto_create=False)
    latencies: list[float] = []
    done = threading.Event()

    def probe():
        while not done.is_set():
            t0 = time.perf_counter()
            producer.produce("probe", b"x")
            producer.flush(30)
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        time.sleep(0.3)
        with socket.create_connection((broker.host, broker.port), timeout=120) as s:
            t0 = time.perf_counter()
            s.sendall(request)
            response = read_frame(s)
            took = time.perf_counter() - t0
        time.sleep(0.3)
    finally:
        done.set()
        prober.join()
    return {
        "during": f"answered in {took:.1f} s ({len(response) / MiB:.0f} MiB)",
        "after": "",
        "other": f"other client's produce: slowest {max(latencies) * 1000:.0f} ms of {len(latencies)}",
    }


def scenario_auto_create(broker: BrokerProcess, n: int = 3000) -> dict:
    names = [f"auto-{i:05d}" for i in range(n)]
    with socket.create_connection((broker.host, broker.port), timeout=120) as s:
        t0 = time.perf_counter()
        s.sendall(metadata_v4_request(names, allow_auto_create=True))
        _, response = decode_response(METADATA, 4, read_frame(s))
        took = time.perf_counter() - t0
    created = sum(1 for t in response.topics if t.error_code == 0)
    refused = {t.error_code for t in response.topics if t.error_code != 0}
    return {
        "during": f"{created} of {n} created in {took:.1f} s",
        "after": "",
        "other": f"error codes for the rest: {sorted(refused) or '-'}",
    }


OVERRIDES = {"slow_big_frames_no_pool": {"queued.max.request.bytes": -1}}  # broker settings per scenario

SCENARIOS = {
    "idle": scenario_idle,
    "big_frames": scenario_big_frames,
    "pipelined_fetch": scenario_pipelined_fetch,
    "delayed_fetch": scenario_delayed_fetch,
    "unread_fetch": scenario_unread_fetch,
    "slow_big_frames": scenario_slow_big_frames,
    "slow_big_frames_no_pool": scenario_slow_big_frames,
    "metadata_1m": scenario_metadata_1m,
    "auto_create": scenario_auto_create,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="comma-separated scenarios: " + ", ".join(SCENARIOS))
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(SCENARIOS)
    table = Table(title="Broker RSS and latency under hostile connection patterns")
    for column in ("scenario", "RSS at start", "during", "after they leave", "notes"):
        table.add_column(column)
    with tempfile.TemporaryDirectory(prefix="odradek-limits-") as tmp:
        for name in names:
            overrides = {"log.segment.delete.delay.ms": 0, **OVERRIDES.get(name, {})}
            broker = BrokerProcess(Path(tmp) / name / "data", overrides=overrides)
            broker.start()
            try:
                start = rss_kib(broker.proc.pid)
                row = SCENARIOS[name](broker)
                alive = broker.proc.poll() is None
                table.add_row(
                    name,
                    f"{start / 1024:.0f} MiB",
                    row["during"],
                    row["after"] if alive else "[red]broker died[/red]",
                    row["other"],
                )
            except Exception as exc:  # a scenario that breaks the broker is a result too
                table.add_row(name, "", f"[red]{type(exc).__name__}: {exc}[/red]", "", "")
            finally:
                broker.stop()
    Console(width=150).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
