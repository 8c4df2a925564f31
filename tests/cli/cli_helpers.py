"""Helpers for the `odradek` command tests: run it as a user would (a child process); confluent-kafka checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class Result:
    args: list[str]
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def lines(self) -> list[str]:
        return self.out.splitlines()

    def __str__(self) -> str:  # shown when an assertion fails
        return f"odradek {' '.join(self.args)} -> exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run_odradek(
    *args, input: str | bytes | None = None, timeout: float = 60, env: dict | None = None
) -> Result:
    cmd = [sys.executable, "-m", "odradek", *map(str, args)]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("ODRADEK_BOOTSTRAP_SERVER", None)
    if env and "ODRADEK_BOOTSTRAP_SERVER" in env:
        full_env["ODRADEK_BOOTSTRAP_SERVER"] = env["ODRADEK_BOOTSTRAP_SERVER"]
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=full_env)
    return Result(
        list(map(str, args)),
        proc.returncode,
        proc.stdout.decode(errors="replace"),
        proc.stderr.decode(errors="replace"),
    )


def ck_produce(bootstrap: str, topic: str, records, partition: int | None = None) -> None:
    """Produce ``(key, value[, headers])`` tuples with confluent-kafka and wait for them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for rec in records:
        key, value, *rest = rec
        kwargs = {"key": key, "value": value, "on_delivery": lambda e, m: e and errors.append(e)}
        if rest:
            kwargs["headers"] = rest[0]
        if partition is not None:
            kwargs["partition"] = partition
        p.produce(topic, **kwargs)
    assert p.flush(15) == 0
    assert not errors, errors


def ck_consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 20.0):
    """Read ``expected`` records from every partition of ``topic`` (assign, from the start)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-reader", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10)
        parts = md.topics[topic].partitions
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            out.append(m)
        return out
    finally:
        c.close()


def ck_committed(bootstrap: str, group: str, topic: str, partitions) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def ck_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for ``group`` without joining it (a simple consumer's commit)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()
