"""Exactly-once consume-transform-produce under crashes: a worker (Odradek's client and its
``run_exactly_once`` loop) is killed with SIGKILL at random points and restarted with the same
transactional id; read_committed readers of the output then see exactly one output per input."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from support import wait_until
from txn_support import READERS, Raw, create_topic, plain_produce, read_ours

WORKER = Path(__file__).with_name("txn_eos_worker.py")
PARTS = 3
INPUTS = 600


def start_worker(broker, source, dest, group, tid) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), broker.bootstrap_servers, source, dest, str(PARTS), group, tid],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def all_committed(broker, group: str, source: str) -> bool:
    with Raw(broker) as raw:
        committed = raw.offset_fetch(group, source, range(PARTS), require_stable=True)
        ends = {p: raw.list_offset(source, p, 0) for p in range(PARTS)}
    return all(committed[p] == (ends[p], 0) for p in range(PARTS))


def test_killed_consume_transform_produce_loop_yields_each_output_once(broker, topic_name):
    source, dest = topic_name + "-in", topic_name + "-out"
    group, tid = f"eos-{topic_name}", f"eos-{topic_name}"
    create_topic(broker, source, PARTS)
    create_topic(broker, dest, PARTS)
    inputs = [b"in-%d" % i for i in range(INPUTS)]
    plain_produce(broker, source, inputs, PARTS)
    rng = random.Random(20240611)
    kills = 0
    for _ in range(5):
        worker = start_worker(broker, source, dest, group, tid)
        time.sleep(rng.uniform(1.0, 2.2))
        worker.kill()
        worker.wait()
        kills += 1
        if all_committed(broker, group, source):
            break
    worker = start_worker(broker, source, dest, group, tid)
    try:
        wait_until(
            lambda: all_committed(broker, group, source),
            timeout=60,
            interval=0.2,
            message="the worker to finish",
        )
    finally:
        worker.kill()
        worker.wait()
    assert kills >= 2
    expected = Counter(b"out:" + v for v in inputs)
    for reader in ("odradek", "confluent-kafka"):
        got = Counter(READERS[reader](broker, dest, PARTS))
        assert got == expected, (
            f"{reader}: duplicates {[v for v, n in got.items() if n > 1][:5]}, missing {len(expected - got)}"
        )
    # the kills did leave aborted output behind: read_uncommitted sees more than read_committed
    uncommitted = len(read_ours(broker, dest, PARTS, "read_uncommitted"))
    print(f"kills={kills} uncommitted={uncommitted}")
    assert uncommitted >= INPUTS


def test_asyncio_loop_with_a_failing_transform_rewinds_and_retries(broker, topic_name):
    import asyncio

    import odradek.aio
    from odradek.client.consume_transform_produce import arun_exactly_once
    from odradek.client.structs import TopicPartition

    source, dest = topic_name + "-in", topic_name + "-out"
    create_topic(broker, source, 1)
    create_topic(broker, dest, 1)
    plain_produce(broker, source, [b"in-%d" % i for i in range(30)])
    failures = {b"in-17"}  # fails once: that transaction aborts and its records are read again
    done: dict = {}

    def transform(record):
        if record.value in failures:
            failures.discard(record.value)
            raise ValueError("transient failure")
        return [(dest, b"out:" + record.value)]

    async def run():
        async with (
            odradek.aio.Consumer(
                bootstrap_servers=broker.bootstrap_servers,
                group_id=f"aeos-{topic_name}",
                isolation_level="read_committed",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            ) as consumer,
            odradek.aio.Producer(
                bootstrap_servers=broker.bootstrap_servers, transactional_id=f"aeos-{topic_name}"
            ) as producer,
        ):
            consumer.assign([TopicPartition(source, 0)])
            await arun_exactly_once(
                consumer,
                producer,
                transform,
                poll_timeout=0.2,
                max_records=10,
                should_stop=lambda: done.get(TopicPartition(source, 0), 0) >= 30,
                on_commit=done.update,
            )

    asyncio.run(asyncio.wait_for(run(), 60))
    got = Counter(read_ours(broker, dest, 1))
    assert got == Counter(b"out:in-%d" % i for i in range(30))
