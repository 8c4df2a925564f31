"""The client connection's own cost per request and per response, without a network or a broker.

Sends N Metadata requests through ``odradek.net.connection.Connection`` (an asyncio
protocol whose transport drops the bytes), then feeds it the N answers as one byte stream,
and prints the best of several runs in microseconds. kio's encoding and decoding are most of
it; the rest is framing, correlation ids, futures and timers. Run it under two trees to
compare them (a tree from before ``odradek/net`` uses ``odradek.client.conn``)::

    PYTHONPATH=/path/to/tree python benchmarks/connection_bench.py [--requests 50000] [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import time

try:
    from odradek.net.connection import Connection
except ImportError:  # a tree from before odradek/net
    from odradek.client.conn import Connection

from odradek.protocol import messages

METADATA, VERSION = 3, 9


class _NullTransport:
    def write(self, data) -> None:
        pass

    def writelines(self, parts) -> None:
        pass

    def close(self) -> None:
        pass

    def get_extra_info(self, name):
        return None


def _connection() -> Connection:
    conn = Connection("127.0.0.1", 9, 0, "bench", 30000)
    conn.connection_made(_NullTransport())
    core = getattr(conn, "_core", None)
    (core.versions if core is not None else conn.versions)[METADATA] = VERSION
    return conn


async def measure(requests: int, runs: int) -> tuple[float, float]:
    answer = messages.build_response(
        METADATA,
        VERSION,
        {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []},
    )
    stream = b"".join(messages.encode_response(METADATA, VERSION, cid, answer) for cid in range(1, requests + 1))
    best_send = best_receive = float("inf")
    for _ in range(runs):
        conn = _connection()
        start = time.perf_counter()
        futures = [conn.send(METADATA, {"topics": None}) for _ in range(requests)]
        best_send = min(best_send, time.perf_counter() - start)
        start = time.perf_counter()
        pos = 0
        while pos < len(stream):
            room = conn.get_buffer(0)
            n = min(len(room), len(stream) - pos)
            room[:n] = stream[pos : pos + n]
            pos += n
            conn.buffer_updated(n)
        best_receive = min(best_receive, time.perf_counter() - start)
        assert all(f.done() and f.exception() is None for f in futures)
    return best_send / requests * 1e6, best_receive / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    send, receive = asyncio.run(measure(args.requests, args.runs))
    print(f"connection: {Connection.__module__}   ({args.requests:,} Metadata v{VERSION} round trips, best of {args.runs})")
    print("| step | us per request |")
    print("|---|---|")
    print(f"| send (build, frame, correlate, time) | {send:.2f} |")
    print(f"| receive (cut, decode, match, resolve) | {receive:.2f} |")


if __name__ == "__main__":
    main()
