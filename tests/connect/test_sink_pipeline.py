"""A sink task's loop fetches and converts the next batch while the task's put of the one before
runs, yet keeps Kafka's rules: puts in consumer order, one at a time; offsets committed only for
batches whose put returned; a RetriableException puts the same batch again before the next; a
failed put fails the task with nothing after it committed; pause and rewind requests made in a
put hold for the batch fetched ahead. A real broker; the worker's own WorkerSinkTask."""

from __future__ import annotations

import threading
import time

import pytest
from connect_support import SinkTaskOnALoop
from support import wait_until

from odradek.client import Admin, NewTopic, Producer, TopicPartition
from odradek.connect.api import SinkTask
from odradek.connect.errors import ConnectException, RetriableException
from odradek.connect.worker_tasks import FAILED

STRING = "org.apache.kafka.connect.storage.StringConverter"


class RecordingTask(SinkTask):
    """Keeps every put as ``[(partition, offset, key, value), …]``; ``on_put`` (if any) runs after."""

    def __init__(self, on_put=None):
        super().__init__()
        self.puts: list[list[tuple]] = []
        self.on_put = on_put

    def version(self) -> str:
        return "1"

    def start(self, props) -> None:
        pass

    def put(self, records) -> None:
        self.puts.append([(r.kafka_partition, r.kafka_offset, r.key, r.value) for r in records])
        if self.on_put is not None:
            self.on_put(self, records)

    def stop(self) -> None:
        pass

    def offsets(self, partition: int = 0) -> list[int]:
        return [offset for put in self.puts for p, offset, _, _ in put if p == partition]

    def delivered(self) -> int:
        return sum(len(put) for put in self.puts)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"}) as producer:
        for i in range(count):
            producer.send(topic, key=f"k{i % 7}".encode(), value=str(i).encode(), partition=i % partitions)
        producer.flush()


def run(tmp_path, broker, topic, task, **kw) -> SinkTaskOnALoop:
    return SinkTaskOnALoop(tmp_path, broker.bootstrap_servers, task, {"topics": topic}, STRING, name=topic, **kw)


def test_the_next_batch_is_converted_during_a_put_and_puts_keep_the_order(tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 600)
    converted = []
    overlapped = []

    def first_put_waits_for_the_next_batch(task, records):
        if len(task.puts) == 1:  # the loop converts the next batch while this put has not returned
            deadline = time.monotonic() + 20
            while len(converted) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            overlapped.append(len(converted) >= 2)

    task = RecordingTask(first_put_waits_for_the_next_batch)
    with run(tmp_path, broker, topic_name, task) as harness:
        convert = harness.plumbing.sink_convert_all
        harness.plumbing.sink_convert_all = lambda records: converted.append(len(records)) or convert(records)
        wait_until(lambda: task.delivered() >= 600, 30, "600 records put")
    assert harness.runner.committed[TopicPartition(topic_name, 0)].offset == 600  # committed as it stopped
    assert overlapped == [True]
    assert task.offsets() == list(range(600))  # each record once, in order, across overlapping batches
    assert all(len(put) <= 50 for put in task.puts)
    latest = {}
    for put in task.puts:
        for _, _, key, value in put:
            latest[key] = value
    assert latest == {f"k{k}": str(max(i for i in range(600) if i % 7 == k)) for k in range(7)}


def test_a_failed_put_commits_nothing_past_the_last_good_batch_and_a_restart_redelivers(
        tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 400)

    def fail_at_200(task, records):
        offsets = {r.kafka_offset for r in records}
        if 100 in offsets:
            task.context.request_commit()  # a commit while the next put runs
        if 200 in offsets:
            raise ConnectException("the database refused offset 200")

    failing = RecordingTask(fail_at_200)
    with run(tmp_path, broker, topic_name, failing) as harness:
        wait_until(lambda: harness.runner.state == FAILED, 30, "the task FAILED")
        assert "the database refused offset 200" in (harness.runner.trace or "")
        committed = harness.runner.committed[TopicPartition(topic_name, 0)].offset
    failed_batch = failing.puts[-1]
    assert 200 in [offset for _, offset, _, _ in failed_batch]  # no put after the failed one
    assert 100 < committed <= failed_batch[0][1]

    again = RecordingTask()
    with run(tmp_path, broker, topic_name, again):
        wait_until(lambda: again.offsets()[-1:] == [399], 30, "the rest put again")
    assert again.offsets() == list(range(committed, 400))


def test_a_retriable_put_is_made_again_with_the_same_batch_before_the_next(tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 300)
    refused = []

    def refuse_120_once(task, records):
        if not refused and any(r.kafka_offset == 120 for r in records):
            refused.append(True)
            task.context.timeout(10)
            raise RetriableException("deadlock detected, try again")

    task = RecordingTask(refuse_120_once)
    with run(tmp_path, broker, topic_name, task):
        wait_until(lambda: task.offsets()[-1:] == [299], 30, "all records put")
    retried = next(i for i, put in enumerate(task.puts) if any(offset == 120 for _, offset, _, _ in put))
    assert task.puts[retried] == task.puts[retried + 1]
    del task.puts[retried]
    assert task.offsets() == list(range(300))


def test_a_rewind_asked_in_a_put_holds_for_the_batch_fetched_ahead(tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 300)
    tp = TopicPartition(topic_name, 0)

    def rewind_once_at_150(task, records):
        if not getattr(task, "rewound", False) and any(r.kafka_offset == 150 for r in records):
            task.rewound = True
            task.context.offset(tp, 100)

    task = RecordingTask(rewind_once_at_150)
    with run(tmp_path, broker, topic_name, task):
        wait_until(lambda: task.offsets()[-1:] == [299], 30, "all records put")
    rewound_at = next(i for i, put in enumerate(task.puts) if any(offset == 150 for _, offset, _, _ in put))
    assert task.puts[rewound_at + 1][0][1] == 100
    assert task.offsets() == list(range(task.puts[rewound_at][-1][1] + 1)) + list(range(100, 300))


def test_a_partition_paused_in_a_put_delivers_nothing_until_resumed(tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 400, partitions=2)
    p0 = TopicPartition(topic_name, 0)
    paused_after: list[int] = []  # the index of the put that paused partition 0
    resumed = threading.Event()

    def pause_partition_0(task, records):
        if not paused_after:  # the batch fetched during this put may hold records of partition 0
            paused_after.append(len(task.puts) - 1)
            task.context.pause(p0)
        elif paused_after and not resumed.is_set() and len(task.puts) - 1 >= paused_after[0] + 2:
            resumed.set()
            task.context.resume(p0)

    task = RecordingTask(pause_partition_0)
    with run(tmp_path, broker, topic_name, task):
        wait_until(lambda: task.delivered() >= 400, 30, "400 records put")
    assert resumed.is_set()
    while_paused = task.puts[paused_after[0] + 1 : paused_after[0] + 3]
    assert while_paused and all(p == 1 for put in while_paused for p, _, _, _ in put)
    assert task.offsets(0) == list(range(200))
    assert task.offsets(1) == list(range(200))


class OwningTask(RecordingTask):
    """Notes every put of a record whose partition the task does not hold (not opened, or closed)."""

    def __init__(self, slow_while=lambda: False):
        super().__init__(on_put=self._check_owned)
        self.slow_while = slow_while
        self.owned: set[tuple[str, int]] = set()
        self.strays: list[tuple[str, int]] = []
        self.closed: list[tuple[str, int]] = []

    def open(self, partitions) -> None:
        self.owned.update((tp.topic, tp.partition) for tp in partitions)

    def close(self, partitions) -> None:
        for tp in partitions:
            self.owned.discard((tp.topic, tp.partition))
            self.closed.append((tp.topic, tp.partition))

    def _check_owned(self, task, records) -> None:
        self.strays += [(r.topic, r.kafka_partition) for r in records
                        if (r.topic, r.kafka_partition) not in self.owned]
        if self.slow_while():  # puts that take a while: the rebalance comes during one
            time.sleep(0.1)


def test_no_put_of_a_revoked_partition_when_a_second_task_joins_the_group(tmp_path, broker, topic_name):
    produce(broker.bootstrap_servers, topic_name, 3000, partitions=2)
    second = OwningTask()
    first = OwningTask(slow_while=lambda: not second.owned)  # leaves records for the second
    with run(tmp_path, broker, topic_name, first):
        wait_until(lambda: first.delivered() >= 200, 30, "the first task under way")
        with run(tmp_path, broker, topic_name, second):
            wait_until(lambda: first.closed, 30, "a partition revoked from the first task")

            def all_delivered():
                return all(set(first.offsets(p)) | set(second.offsets(p)) >= set(range(1500)) for p in (0, 1))
            wait_until(all_delivered, 60, "every record put by one task or the other")
    assert second.delivered() > 0
    assert first.strays == [] and second.strays == []


@pytest.fixture(autouse=True)
def _no_leftover_threads():
    before = {t.name for t in threading.enumerate()}
    yield
    wait_until(lambda: "sink-task-loop" not in {t.name for t in threading.enumerate()} - before, 10,
               "the task's loop thread to end")
