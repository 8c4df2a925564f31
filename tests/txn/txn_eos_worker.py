"""A consume-transform-produce worker for test_txn_eos: runs until it is killed.

python txn_eos_worker.py BOOTSTRAP SOURCE DEST PARTITIONS GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys
import time

import odradek
from odradek.client.consume_transform_produce import run_exactly_once
from odradek.client.structs import TopicPartition


def main() -> None:
    bootstrap, source, dest, partitions, group, tid = sys.argv[1:7]
    consumer = odradek.Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.assign([TopicPartition(source, p) for p in range(int(partitions))])
    producer = odradek.Producer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=2)

    def transform(record):
        time.sleep(0.01)  # slow enough that a kill usually lands inside a transaction
        return [(dest, b"out:" + record.value, record.key)]

    print("worker ready", flush=True)
    run_exactly_once(consumer, producer, transform, poll_timeout=0.2, max_records=20)


if __name__ == "__main__":
    main()
