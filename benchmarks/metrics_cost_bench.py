#!/usr/bin/env python
"""What the broker's metrics cost per request on the produce and fetch paths.

    python benchmarks/metrics_cost_bench.py            # about 20 seconds
    python benchmarks/metrics_cost_bench.py --rounds 9

A real broker runs in this process (its own event loop in a thread, a temporary log dir)
with its HTTP side off. Timed on that broker, median of ``--rounds``:

- the whole one-record Produce fast lane (``produce_one_partition``: parse, append to the
  log, answer), the request the metrics must not slow down;
- the counting each Produce request now does: two ``perf_counter_ns`` reads and the
  request histogram (network layer), the per-topic counters of the append (replica
  manager), and the same for a Fetch (the per-topic bytes-out walk of the response);
- the ``/metrics`` rendering itself, which runs only when scraped (not per request).

The counting rows are timed by running exactly the added statements in a loop over the
broker's own objects, so the numbers are the added work, not a difference of two noisy
totals. Compare the share column with the run-to-run spread of benchmarks/broker_bench.py.
"""

from __future__ import annotations

import argparse
import statistics
import time

from odradek.protocol.batch_builder import build_batch
from odradek.protocol.hot_requests import produce_request
from odradek.testing import EmbeddedBroker

TOPIC = "metrics-cost"


def per_call_ns(fn, n: int, rounds: int) -> float:
    results = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        results.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per row (median shown)")
    ap.add_argument("--requests", type=int, default=20_000, help="calls per round")
    args = ap.parse_args()

    with EmbeddedBroker(overrides={"http.listeners": ""}) as embedded:
        embedded.create_topic(TOPIC)
        batch = build_batch([(b"key", b"v" * 100, (), None)])
        frame = b"".join(produce_request(9, 1, "bench", 1, 30000, [(TOPIC, [(0, [batch])])]))[4:]
        rows = embedded.call(lambda broker: measure(broker, frame, args.requests, args.rounds))

    lane = rows[0][1]
    print(f"\nMetrics cost per request ({args.rounds} rounds x {args.requests:,} calls, median)\n")
    print(f"{'operation':<58}{'ns/request':>12}{'share of produce':>18}")
    for name, ns, per_request in rows:
        share = f"{ns / lane:.1%}" if per_request and name != rows[0][0] else ""
        print(f"{name:<58}{ns:>12,.0f}{share:>18}")
    print(
        "\nProduce counting = network timing + request histogram + append counters; "
        "Fetch counting = network timing + request histogram + bytes-out walk."
    )


def measure(broker, frame: bytes, n: int, rounds: int) -> list[tuple[str, float, bool]]:
    from odradek.broker.handlers import fetch as fetch_handler
    from odradek.broker.handlers.produce import produce_one_partition
    from odradek.http.broker_http import BrokerHttp
    from odradek.http.exporter import broker_families, exporter_families, render

    network = broker.network
    observe = network.request_metrics.observe
    now = time.perf_counter_ns
    counters = broker.replica_manager.partitions[(TOPIC, 0)].counters
    record_bytes = b"x" * 150

    def lane(k):
        for _ in range(k):
            produce_one_partition(broker, frame)

    def request_timing(k):
        for _ in range(k):
            started = now()
            observe(0, now() - started)

    def append_counters(k):
        c = counters
        for _ in range(k):
            c.produce_requests += 1
            c.messages_in += 1
            c.bytes_in += len(record_bytes)

    topics = [(TOPIC, [(0, 0, 10, 10, 0, None, record_bytes)])]

    def fetch_count(k):
        count = fetch_handler._count
        for _ in range(k):
            count(broker, topics)

    rows = [
        ("Produce fast lane, one record (whole request)", per_call_ns(lane, n, rounds), True),
        ("  + network: 2 clock reads + request histogram", per_call_ns(request_timing, n, rounds), True),
        ("  + replica manager: per-topic append counters", per_call_ns(append_counters, n, rounds), True),
        ("  + fetch handler: per-topic bytes-out walk (1 partition)", per_call_ns(fetch_count, n, rounds), True),
    ]
    http = BrokerHttp(broker, [])

    def scrape(k):
        for _ in range(k):
            snapshot = finished(http.view.exporter_snapshot())
            render(broker_families(broker, http.server) + exporter_families(snapshot))

    rows.append(("/metrics render (per scrape, not per request)", per_call_ns(scrape, 50, rounds), False))
    return rows


def finished(coroutine):
    """The result of a coroutine that never waits (the local view's reads), run in place."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine waited")


if __name__ == "__main__":
    main()
