"""A Connect worker process for the tests (``python -m odradek connect standalone|distributed …`` on
free ports), and the REST and topic reads the Connect tests share."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import requests
from support import wait_until

from odradek import Consumer, TopicPartition
from odradek.connect.offset_store import OffsetStore
from odradek.connect.task_plumbing import TaskPlumbing
from odradek.connect.worker_config import WorkerConfig
from odradek.connect.worker_tasks import WorkerSinkTask
from odradek.testing.process import free_port, wait_for_port


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def quickstart_worker(bootstrap: str, directory: Path, **extra: str) -> dict[str, str]:
    """Kafka's config/connect-standalone.properties, with the test's brokers, port and file."""
    return {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "offset.storage.file.filename": str(directory / "connect.offsets"),
        "offset.flush.interval.ms": "500",
        "listeners": f"http://127.0.0.1:{free_port()}",
        **extra,
    }


def distributed_worker(bootstrap: str, group: str, **extra: str) -> dict[str, str]:
    """Kafka's config/connect-distributed.properties for one broker, with short group timings."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.storage.topic": f"{group}-offsets",
        "config.storage.topic": f"{group}-configs",
        "status.storage.topic": f"{group}-status",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.flush.interval.ms": "500",
        "heartbeat.interval.ms": "500",
        "session.timeout.ms": "6000",
        "rebalance.timeout.ms": "10000",
        "scheduled.rebalance.max.delay.ms": "3000",
        # a sink task moved off a killed worker joins its group when the dead consumer's session ends
        "consumer.session.timeout.ms": "6000",
        "consumer.heartbeat.interval.ms": "1000",
        "listeners": f"http://127.0.0.1:{free_port()}",
        **extra,
    }


class WorkerProcess:
    def __init__(self, directory: Path, worker: dict[str, str], connectors: list[dict[str, str]] = ()):
        self.directory = directory
        self.worker = worker
        self.port = int(worker["listeners"].rsplit(":", 1)[1])
        scheme = worker["listeners"].split(":", 1)[0]
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.log_path = directory / f"worker-{self.port}.log"
        files = [write_properties(directory / f"connector-{i}.properties", c) for i, c in enumerate(connectors)]
        mode = "distributed" if "group.id" in worker else "standalone"
        self.command = [sys.executable, "-m", "odradek", "connect", mode,
                        str(write_properties(directory / f"worker-{self.port}.properties", worker)), *map(str, files)]
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        return self.spawn().wait_ready()

    def spawn(self) -> WorkerProcess:
        """Start the process without waiting (to start several at once)."""
        self.proc = subprocess.Popen(self.command, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT)
        return self

    def wait_ready(self) -> WorkerProcess:
        """Wait until the REST listener answers."""
        wait_for_port("127.0.0.1", self.port, 60, self.proc)
        return self

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str, **kw):
        return requests.get(self.url + path, timeout=30, **kw)

    def request(self, method: str, path: str, **kw):
        return requests.request(method, self.url + path, timeout=30, **kw)


def task_plumbing(directory: Path, connector_config: dict[str, str], converter: str,
                  bootstrap: str | None = None) -> TaskPlumbing:
    """A task's converters, transforms and error handler as a standalone worker builds them
    (``converter``: the key and value converter's class name). Without ``bootstrap`` no broker is
    behind them (the dead letter queue's records stay in ``plumbing.dlq``); with it the task's
    clients reach that broker."""
    worker = WorkerConfig.from_properties({
        "bootstrap.servers": bootstrap or "127.0.0.1:9", "key.converter": converter, "value.converter": converter,
        "offset.storage.file.filename": str(directory / "connect.offsets"),
    }, distributed=False)
    options = worker.client_options if bootstrap else (lambda kind: {})
    return TaskPlumbing("bench", 0, connector_config, worker, OffsetStore(), options, lambda ok: None)


class SinkTaskOnALoop:
    """One ``WorkerSinkTask`` running ``task`` on an event loop of its own thread, as a worker
    runs it (consume as group ``connect-<name>``, convert, put, commit), with puts of at most
    ``batch`` records; offsets are committed every ``flush_interval_s``, when the task asks, and
    as it stops."""

    def __init__(self, directory: Path, bootstrap: str, task, config: dict[str, str], converter: str,
                 name: str = "pipeline", batch: int = 50, flush_interval_s: float = 60.0):
        self.plumbing = task_plumbing(directory, config, converter, bootstrap)
        self.plumbing.sink_batch = batch
        self.plumbing.flush_interval_s = flush_interval_s
        self.runner = WorkerSinkTask(name, 0, task, config, self.plumbing, lambda r: None)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sink-task-loop", daemon=True)
        self.thread.start()
        self._on_loop(self._start())

    async def _start(self) -> None:
        self.runner.start(paused=False)

    def _on_loop(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        try:
            self._on_loop(self.runner.stop(10))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    def __enter__(self) -> SinkTaskOnALoop:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def sink_lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def running_tasks(worker: WorkerProcess, name: str) -> list[dict]:
    try:
        answer = worker.get(f"/connectors/{name}/status")
    except OSError:
        return []
    if answer.status_code != 200:
        return []
    return [t for t in answer.json()["tasks"] if t["state"] == "RUNNING"]


def write(worker: WorkerProcess, method: str, path: str, **kw):
    """A REST write, retried while the group rebalances (409 stale configuration), as a client would."""
    last = []

    def attempt():
        answer = worker.request(method, path, **kw)
        last[:] = [answer.text]
        stale = answer.status_code == 409 and "stale configuration" in answer.text
        return None if stale else [answer]  # (a Response of 4xx is falsy)

    try:
        return wait_until(attempt, 60, f"{method} {path} outside a rebalance")[0]
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer: {last}") from None


def create(worker: WorkerProcess, name: str, config: dict) -> None:
    answer = write(worker, "POST", "/connectors", json={"name": name, "config": config})
    assert answer.status_code == 201, answer.text


def committed_records(bootstrap: str, topic: str, expected: int) -> tuple[list[tuple[bytes | None, bytes]], int]:
    """The committed records of ``topic`` once ``expected`` of them are readable, and its end offset.

    The source task's last transaction may still be open when the sink has written its lines
    (the sink reads uncommitted records, as Kafka's does), so wait for the commit."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  isolation_level="read_committed") as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        records = []
        wait_until(lambda: len(records) >= expected, 60, f"{expected} committed records in {topic}",
                   step=lambda: records.extend(consumer.poll(0.5)))
        end = consumer.end_offsets([tp])[tp]
    return [(r.key, r.value) for r in records], end


def read_topic(bootstrap: str, topic: str) -> list[tuple[str, object]]:
    """Every record of a topic (all partitions) as (key text, decoded JSON value or None)."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        partitions = consumer.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends = consumer.end_offsets(tps)
        consumer.assign(tps)
        records = []
        wait_until(lambda: all(consumer.position(tp) >= ends[tp] for tp in tps), 30, f"all of {topic}",
                   step=lambda: records.extend(consumer.poll(0.5)))
    return [(r.key.decode(), None if r.value is None else json.loads(r.value)) for r in records]
