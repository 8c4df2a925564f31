"""Transactional produce throughput vs non-transactional, on one Odradek broker.

Each row sends ``--records`` 1 KB records to a 3-partition topic and reports records/s and
MB/s (median, min-max over ``--runs``), timed from after a first record was acknowledged
(connections, metadata and the producer id are set up by then):

* **idempotent** - enable.idempotence, acks=all, no transactions (the baseline);
* **transactional** - the same producer settings plus a transactional id: begin, 1,000
  records, commit, repeated. Each commit costs an EndTxn round trip, the coordinator's
  PrepareCommit/CompleteCommit records and one marker per partition, and the producer
  drains its batches before every commit (no pipelining across transactions).

Clients: confluent-kafka (librdkafka; measures the broker) and Odradek's own (blocking).
The broker runs with its data on disk in a temporary directory; a small warm-up run of each
mode comes first, then the modes alternate so that background load affects both. Run::

    python benchmarks/txn_bench.py [--records 50000] [--runs 3] [--client confluent|odradek|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from confluent_kafka import Producer as CKProducer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing.process import BrokerProcess  # noqa: E402

PARTITIONS = 3
RECORD = 1024
PER_TXN = 1000


def run_confluent(bootstrap: str, topic: str, records: int, transactional: bool) -> float:
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 262144,
        "queue.buffering.max.kbytes": 262144,
    }
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = CKProducer(conf)
    value = os.urandom(RECORD)
    # connections, producer id and metadata before the clock starts
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    p.produce(topic, value, partition=0)
    if transactional:
        p.commit_transaction(30)
    assert p.flush(30) == 0
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(PER_TXN, records - sent)
        if transactional:
            p.begin_transaction()
        for i in range(n):
            while True:
                try:
                    p.produce(topic, value, partition=(sent + i) % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
        if transactional:
            p.commit_transaction(60)
        else:
            p.poll(0)
        sent += n
    assert p.flush(60) == 0
    return time.perf_counter() - t0


def run_odradek(bootstrap: str, topic: str, records: int, transactional: bool) -> float:
    import odradek

    options = {"bootstrap_servers": bootstrap, "linger_ms": 5, "batch_size": 262144, "acks": "all"}
    if transactional:
        options["transactional_id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = odradek.Producer(**options)
    value = os.urandom(RECORD)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    p.send(topic, value, partition=0)
    if transactional:
        p.commit_transaction(30)
    p.flush(30)
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(PER_TXN, records - sent)
        if transactional:
            p.begin_transaction()
        for i in range(n):
            p.send(topic, value, partition=(sent + i) % PARTITIONS)
        if transactional:
            p.commit_transaction(60)
        sent += n
    p.flush(60)
    elapsed = time.perf_counter() - t0
    p.close()
    return elapsed


CLIENTS = {"confluent": run_confluent, "odradek": run_odradek}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--client", choices=["confluent", "odradek", "both"], default="both")
    args = ap.parse_args()
    clients = list(CLIENTS) if args.client == "both" else [args.client]
    with tempfile.TemporaryDirectory(prefix="odradek-txn-bench-") as tmp:
        broker = BrokerProcess(
            os.path.join(tmp, "data"), overrides={"transaction.state.log.num.partitions": 3}
        )
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            rows = []
            for client in clients:
                run_one = CLIENTS[client]
                times: dict[bool, list[float]] = {False: [], True: []}
                for run in range(args.runs + 1):  # run 0 warms up connections, topics and the coordinator
                    for transactional in (False, True):  # interleaved, so load drift hits both alike
                        topic = f"bench-{client}-{int(transactional)}-{run}"
                        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                        n = args.records if run else min(args.records, 5000)
                        elapsed = run_one(broker.bootstrap_servers, topic, n, transactional)
                        if run:
                            times[transactional].append(elapsed)
                for transactional in (False, True):
                    rates = sorted(args.records / t for t in times[transactional])
                    rows.append((client, "transactional" if transactional else "idempotent", rates))
        finally:
            broker.stop()
    print(
        f"\nproduce throughput, {args.records} x {RECORD} B records, {PARTITIONS} partitions, "
        f"{PER_TXN} records per transaction, median (min-max) of {args.runs} runs"
    )
    print(f"{'client':<10} {'mode':<14} {'records/s':>26} {'MB/s':>8}")
    base = {}
    for client, mode, rates in rows:
        med = statistics.median(rates)
        if mode == "idempotent":
            base[client] = med
        ratio = (
            f"  ({med / base[client]:.0%} of idempotent)"
            if mode == "transactional" and client in base
            else ""
        )
        print(
            f"{client:<10} {mode:<14} {med:>10,.0f} ({rates[0]:,.0f}-{rates[-1]:,.0f}) "
            f"{med * RECORD / 1e6:>8.1f}{ratio}"
        )


if __name__ == "__main__":
    main()
