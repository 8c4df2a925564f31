"""KIP-618's per-connector exactly-once keys on a distributed worker with
exactly.once.source.support=enabled (one worker process for the module): the validate endpoint
lists each bad value, ``exactly.once.support=required`` refuses a connector that cannot give
exactly-once delivery, and a source connector's new task configs first fence the transactional
producers of its earlier tasks, so a zombie task can commit nothing more."""

from __future__ import annotations

import itertools
import textwrap
import uuid

import pytest
from connect_support import WorkerProcess, create, distributed_worker, read_topic, running_tasks, write
from support import wait_until

import odradek
from odradek import Consumer, TopicPartition
from odradek.connect.connector_config import ConfigValue
from odradek.connect.source_eos import NO_PREFLIGHT, SOURCE_EOS_CONFIG, check_source_eos

TICKER = textwrap.dedent(
    """
    import time

    from odradek.connect.api import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector, SourceTask
    from odradek.connect.data import Schema
    from odradek.connect.records import SourceRecord


    class TickerTask(SourceTask):
        def start(self, props):
            self.topic, self.task = props["topic"], props["ticker.task"]
            stored = self.context.offset_storage_reader.offset({"ticker": self.task})
            self.next = stored["next"] if stored else 0

        def poll(self):
            time.sleep(0.02)
            n, self.next = self.next, self.next + 1
            return [SourceRecord(self.topic, value_schema=Schema.STRING_SCHEMA, value=f"{self.task}:{n}",
                                 source_partition={"ticker": self.task}, source_offset={"next": n + 1})]


    class TickerConnector(SourceConnector):
        def start(self, props):
            self.props = props

        def task_class(self):
            return TickerTask

        def task_configs(self, max_tasks):
            return [dict(self.props, **{"ticker.task": str(i)}) for i in range(max_tasks)]

        def exactly_once_support(self, configs):
            ok = configs.get("ticker.exactly.once", "yes") == "yes"
            return ExactlyOnceSupport.SUPPORTED if ok else ExactlyOnceSupport.UNSUPPORTED


    class TenTask(TickerTask):
        # Three ticks a poll; in each ten, aborts the transaction ending at tick 4 and commits the one at 9.

        def poll(self):
            time.sleep(0.02)
            records = []
            for _ in range(3):
                n, self.next = self.next, self.next + 1
                record = SourceRecord(self.topic, value_schema=Schema.STRING_SCHEMA, value=str(n),
                                      source_partition={"ticker": self.task}, source_offset={"next": n + 1})
                if n % 10 == 4:
                    self.context.transaction_context.abort_transaction(record)
                elif n % 10 == 9:
                    self.context.transaction_context.commit_transaction(record)
                records.append(record)
            return records


    class TenConnector(TickerConnector):
        def task_class(self):
            return TenTask

        def can_define_transaction_boundaries(self, configs):
            return ConnectorTransactionBoundaries.SUPPORTED
    """
)
NO_EOS = "The connector does not support exactly-once semantics with the provided configuration."


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    directory = tmp_path_factory.mktemp("connect-eos")
    (directory / "plugins").mkdir()
    (directory / "plugins" / "ticker.py").write_text(TICKER)
    group = f"connect-{uuid.uuid4().hex[:8]}"
    config = distributed_worker(broker.bootstrap_servers, group, **{
        "exactly.once.source.support": "enabled", "plugin.path": str(directory / "plugins"),
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"})
    proc = WorkerProcess(directory, config).start()
    yield proc
    proc.kill()


def validation_errors(worker: WorkerProcess, config: dict[str, str]) -> dict[str, list[str]]:
    answer = worker.request("PUT", f"/connector-plugins/{config['connector.class']}/config/validate", json=config)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
    assert body["error_count"] == sum(map(len, errors.values()))
    return errors


def test_the_exactly_once_keys_are_validated_and_required_refuses_a_connector_without_it(worker):
    ticker = {"name": "strict", "connector.class": "TickerConnector", "tasks.max": "1", "topic": "ticks"}
    bad = validation_errors(worker, {**ticker, "exactly.once.support": "sometimes", "transaction.boundary": "never",
                                     "transaction.boundary.interval.ms": "-5"})
    assert set(bad) == {"exactly.once.support", "transaction.boundary", "transaction.boundary.interval.ms"}
    assert "requested, required" in bad["exactly.once.support"][0]
    assert "poll, interval, connector" in bad["transaction.boundary"][0]
    assert validation_errors(worker, {**ticker, "exactly.once.support": "required"}) == {}
    assert validation_errors(worker, {**ticker, "exactly.once.support": "required", "ticker.exactly.once": "no"}) == {
        "exactly.once.support": [NO_EOS]}
    assert validation_errors(worker, {**ticker, "transaction.boundary": "connector"})["transaction.boundary"] == [
        "The connector does not support connector-defined transaction boundaries with the given configuration. "
        "Please reconfigure it to use a different transaction boundary definition."]
    # FileStreamSource gives exactly-once for a file (re-read from its position), not for stdin (Kafka's rule).
    file_source = {"name": "f", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                   "file": "/tmp/x", "topic": "ticks", "exactly.once.support": "required"}
    assert validation_errors(worker, file_source) == {}
    assert validation_errors(worker, {**file_source, "file": ""}) == {"exactly.once.support": [NO_EOS]}
    # A connector that says nothing about exactly-once support cannot be required to give it.
    mirror = {"name": "m", "connector.class": "MirrorSourceConnector", "source.cluster.alias": "a",
              "source.cluster.bootstrap.servers": "127.0.0.1:9", "target.cluster.bootstrap.servers": "127.0.0.1:9",
              "exactly.once.support": "required"}
    assert validation_errors(worker, mirror) == {"exactly.once.support": [NO_PREFLIGHT]}

    refused = write(worker, "POST", "/connectors", json={"name": "strict", "config": {
        **ticker, "exactly.once.support": "required", "ticker.exactly.once": "no"}})
    assert refused.status_code == 400 and f"exactly.once.support: {NO_EOS}" in refused.json()["message"]
    assert worker.get("/connectors/strict").status_code == 404
    create(worker, "strict", {**ticker, "exactly.once.support": "required"})
    write(worker, "DELETE", "/connectors/strict")


def test_required_needs_a_worker_with_exactly_once_source_support():
    values = {v.name: v for v in SOURCE_EOS_CONFIG.validate({"exactly.once.support": "required"})}

    class Supported:
        def exactly_once_support(self, configs):
            from odradek.connect.api import ExactlyOnceSupport

            return ExactlyOnceSupport.SUPPORTED

    check_source_eos(Supported(), {}, values, worker_eos=False)
    assert values["exactly.once.support"].errors == ["This worker does not have exactly-once source support enabled."]
    assert isinstance(values["transaction.boundary"], ConfigValue) and values["transaction.boundary"].value == "poll"


def committed_records_of(bootstrap: str, topic: str) -> list:
    """Every committed record of partition 0, read up to the last stable offset."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  isolation_level="read_committed") as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        records: list = []
        wait_until(lambda: consumer.position(tp) >= end, 30, f"{topic} read to its last stable offset",
                   step=lambda: records.extend(consumer.poll(0.5)))
    return records


def test_fewer_tasks_fence_the_producers_of_the_earlier_ones_so_a_zombie_commits_nothing(worker):
    bootstrap, group = worker.worker["bootstrap.servers"], worker.worker["group.id"]
    topic = f"ticks-{uuid.uuid4().hex[:8]}"
    ticker = {"connector.class": "TickerConnector", "tasks.max": "2", "topic": topic}
    create(worker, "ticker", ticker)
    wait_until(lambda: len(running_tasks(worker, "ticker")) == 2, 60, "both ticker tasks running")

    # Task 1 as a worker the group lost sight of would still run it: a producer with its
    # transactional id, in the middle of a transaction.
    zombie = odradek.Producer(bootstrap_servers=bootstrap, transactional_id=f"{group}-ticker-1")
    try:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0)
        zombie.flush(30)
        answer = write(worker, "PUT", "/connectors/ticker/config", json={**ticker, "tasks.max": "1"})
        assert answer.status_code == 200, answer.text
        # The connector's worker fences the earlier tasks' producers, then records the new count.
        wait_until(lambda: dict(read_topic(bootstrap, f"{group}-configs")).get("task-count-record-ticker")
                   == {"task-count": 1}, 30, "the task-count record of one task")
        with pytest.raises(Exception) as fenced:
            zombie.commit_transaction(30)
        assert "fenced" in type(fenced.value).__name__.lower() or "epoch" in str(fenced.value).lower(), fenced.value
    finally:
        zombie.close()
    wait_until(lambda: [t["id"] for t in running_tasks(worker, "ticker")] == [0], 60, "task 0 running alone")
    write(worker, "PUT", "/connectors/ticker/stop")  # its last transaction ends
    values = wait_until(lambda: [r.value for r in committed_records_of(bootstrap, topic)], 30, "committed ticks")
    assert b"zombie" not in values
    zeros = [v for v in values if v.startswith(b"0:")]
    assert zeros == [f"0:{n}".encode() for n in range(len(zeros))]  # task 0: each tick once, in order


@pytest.mark.parametrize("boundary, per_transaction", [
    ({"transaction.boundary": "poll"}, lambda n: n == 1),
    ({"transaction.boundary": "interval", "transaction.boundary.interval.ms": "500"}, lambda n: n >= 2),
])
def test_transaction_boundary_poll_commits_each_poll_and_interval_batches_them(worker, boundary, per_transaction):
    # The ticker returns one record a poll, every 20 ms: "poll" gives a transaction per record,
    # "interval" (500 ms) many records a transaction. A commit marker takes an offset after each.
    bootstrap = worker.worker["bootstrap.servers"]
    topic = f"ticks-{uuid.uuid4().hex[:8]}"
    name = f"ticker-{boundary['transaction.boundary']}"
    create(worker, name, {"connector.class": "TickerConnector", "tasks.max": "1", "topic": topic, **boundary})
    wait_until(lambda: len(committed_records_of(bootstrap, topic)) >= 60, 60, "60 committed ticks")
    write(worker, "PUT", f"/connectors/{name}/stop")
    offsets = [r.offset for r in committed_records_of(bootstrap, topic)]
    runs, run = [], 1  # records per transaction: consecutive offsets belong to one
    for before, after in itertools.pairwise(offsets):
        if after == before + 1:
            run += 1
        else:
            runs.append(run)
            run = 1
    assert runs and all(per_transaction(n) for n in runs[:-1]), runs


def test_transaction_boundary_connector_commits_and_aborts_where_the_task_says(worker):
    # TenTask: per ten ticks, 0-4 end in an aborted transaction and 5-9 in a committed one, the
    # boundaries falling inside its three-record polls. An abort still commits the offsets, so
    # after a stop (its open transaction aborted) and a resume no tick comes twice or goes missing.
    bootstrap = worker.worker["bootstrap.servers"]
    topic = f"tens-{uuid.uuid4().hex[:8]}"
    create(worker, "tens", {"connector.class": "TenConnector", "tasks.max": "1", "topic": topic,
                            "transaction.boundary": "connector"})

    def committed() -> list[int]:
        return [int(r.value) for r in committed_records_of(bootstrap, topic)]

    def follows_the_boundaries(ticks: list[int]) -> bool:
        last = ticks[-1]
        return ticks == [n for n in range(last + 1) if n % 10 >= 5]

    wait_until(lambda: len(committed()) >= 20, 60, "four committed transactions")
    write(worker, "PUT", "/connectors/tens/stop")
    wait_until(lambda: worker.get("/connectors/tens/status").json()["connector"]["state"] == "STOPPED", 30, "stopped")
    before = committed()
    assert follows_the_boundaries(before), before
    write(worker, "PUT", "/connectors/tens/resume")
    wait_until(lambda: len(committed()) >= len(before) + 10, 60, "two more committed transactions")
    write(worker, "PUT", "/connectors/tens/stop")
    after = committed()
    assert follows_the_boundaries(after), after
