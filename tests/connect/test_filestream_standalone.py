"""Kafka's Connect quickstart, unchanged: connect-standalone.properties with connect-file-source and
connect-file-sink.properties copy a file through a topic into another file, and a restarted
worker resumes at the stored offset (no line twice, none lost)."""

from __future__ import annotations

import json

import pytest
from connect_support import WorkerProcess, quickstart_worker
from support import wait_until

from odradek import Consumer, TopicPartition
from odradek.client import Admin, NewTopic, Producer


@pytest.fixture
def quickstart(broker, tmp_path, topic_name):
    source_file, sink_file = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    source = {"name": "local-file-source", "connector.class": "FileStreamSource", "tasks.max": "1",
              "file": str(source_file), "topic": topic_name}
    sink = {"name": "local-file-sink", "connector.class": "FileStreamSink", "tasks.max": "1",
            "file": str(sink_file), "topics": topic_name}
    # A killed worker's sink consumer leaves the group when its session expires: 6 s, not 45.
    config = quickstart_worker(broker.bootstrap_servers, tmp_path, **{
        "consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "1000"})
    worker = WorkerProcess(tmp_path, config, [source, sink])
    yield worker, source_file, sink_file, topic_name
    worker.kill()
    assert "Traceback" not in worker.log_text(), worker.log_text()[-4000:]


def sink_lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_quickstart_files_copy_a_file_through_a_topic_and_resume_after_a_restart(broker, quickstart):
    worker, source_file, sink_file, topic = quickstart
    first = [f"line {i}" for i in range(1000)]
    source_file.write_text("".join(f"{line}\n" for line in first))
    worker.start()
    wait_until(lambda: len(sink_lines(sink_file)) >= 1000, 60, "the sink file to have 1000 lines")
    assert sink_lines(sink_file) == first

    status = worker.get("/connectors/local-file-source/status").json()
    assert status["connector"]["state"] == "RUNNING" and status["type"] == "source"
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
    wait_until(lambda: (worker.directory / "connect.offsets").exists(), 10, "the offsets file")

    # The records in the topic carry JsonConverter's envelope, as Kafka's quickstart shows them.
    with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = []
        wait_until(lambda: len(records) >= 1, 30, "a record", step=lambda: records.extend(consumer.poll(1.0)))
    assert json.loads(records[0].value) == {"schema": {"type": "string", "optional": False}, "payload": "line 0"}

    assert worker.stop() == 0
    more = [f"more {i}" for i in range(10)]
    with open(source_file, "a") as out:
        out.write("".join(f"{line}\n" for line in more))
    worker.start()
    wait_until(lambda: len(sink_lines(sink_file)) >= 1010, 60, "the sink file to have 1010 lines")
    assert sink_lines(sink_file) == first + more


def test_kill_9_mid_copy_loses_no_line(broker, quickstart):
    """At least once: after kill -9 the source resumes at its last stored offset and the sink at its
    group's last commit, so lines may come twice but none is missing, and they stay in order."""
    worker, source_file, sink_file, _ = quickstart
    lines = [f"record {i:06d}" for i in range(10000)]
    source_file.write_text("".join(f"{line}\n" for line in lines))
    worker.start()
    wait_until(lambda: len(sink_lines(sink_file)) >= 3000, 60, "3000 lines in the sink file")
    worker.kill()
    worker.start()
    wait_until(lambda: set(sink_lines(sink_file)) >= set(lines), 120, "every line in the sink file")
    first_seen = list(dict.fromkeys(sink_lines(sink_file)))
    assert first_seen == lines  # each line's first copy in the order of the file


def test_a_line_the_producer_refuses_fails_the_source_task_with_no_offset_stored_past_it(broker, tmp_path, topic_name):
    """The task hands each poll to the producer in one send_many; a line over max.request.size
    fails the task (its trace names the limit), the lines of the polls before it are in the topic,
    and no stored offset reaches past the polls before it."""
    source_file = tmp_path / "big.txt"
    before = [f"line {i}" for i in range(30)]
    source_file.write_text("".join(f"{line}\n" for line in [*before, "x" * 5000, "after"]))
    source = {"name": "big-source", "connector.class": "FileStreamSource", "file": str(source_file),
              "topic": topic_name, "batch.size": "10", "producer.override.max.request.size": "4096"}
    worker = WorkerProcess(tmp_path, quickstart_worker(broker.bootstrap_servers, tmp_path), [source]).start()
    try:
        def failed_task():
            tasks = worker.get("/connectors/big-source/status").json().get("tasks", [])
            return tasks[0] if tasks and tasks[0]["state"] == "FAILED" else None

        task = wait_until(failed_task, 60, "the source task to fail")
        assert "max_request_size (4096)" in task["trace"], task["trace"]
        with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic_name, 0)])
            records: list = []
            wait_until(lambda: len(records) >= 30, 30, "the lines before the refused one",
                       step=lambda: records.extend(consumer.poll(0.5)))
        payloads = [json.loads(r.value)["payload"] for r in records]
        assert payloads[:30] == before and "x" * 5000 not in payloads
        offsets = worker.get("/connectors/big-source/offsets").json()["offsets"]
        positions = [o["offset"]["position"] for o in offsets]
        assert all(p <= sum(len(line) + 1 for line in before) for p in positions), positions
    finally:
        worker.kill()


class _Stored:
    def __init__(self, offset):
        self.offset_storage_reader = self
        self.stored = offset

    def offset(self, partition):
        return self.stored


def test_source_task_polls_batches_of_whole_lines_with_their_byte_positions(tmp_path):
    """No broker: the task itself, as the worker calls it (poll returns at once at the end of the file)."""
    from odradek.connect.file_stream import FileStreamSinkTask, FileStreamSourceTask

    path = tmp_path / "in.txt"
    path.write_bytes(b"one\r\ntwo\n\xffthree\nfou")
    task = FileStreamSourceTask()
    task.initialize(_Stored({"position": 5}))  # resumes after the first line
    task.start({"file": str(path), "topic": "t", "batch.size": "1"})
    task.stopped.set()
    first, second = task.poll(), task.poll()
    assert [(r.value, r.source_offset) for r in first + second] == [("two", {"position": 9}),
                                                                   ("\ufffdthree", {"position": 16})]
    assert task.poll() is None  # "fou" is still being written
    with open(path, "ab") as f:
        f.write(b"r\nfive\n")
    task.batch_size = 10
    polled = task.poll()
    assert [(r.topic, r.value, r.source_partition, r.source_offset) for r in polled] == [
        ("t", "four", {"filename": str(path)}, {"position": 21}), ("t", "five", {"filename": str(path)}, {"position": 26})]
    task.stop()

    sink = FileStreamSinkTask()
    sink.start({"file": str(tmp_path / "out.txt")})
    sink.put(polled)
    sink.put([type(r)("t", value=v) for r, v in zip(polled, (7, None), strict=True)])  # not strings: as Java prints them
    sink.stop()
    assert (tmp_path / "out.txt").read_text() == "four\nfive\n7\nnull\n"


def test_sink_with_two_tasks_shares_the_partitions_and_writes_whole_lines(broker, tmp_path, topic_name):
    # As Kafka's FileStreamSink: tasks.max tasks, each appending to the one file.
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    lines = [f"p{i % 2} line {i:05d} " + "x" * (i % 300) for i in range(4000)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i, line in enumerate(lines):
            producer.send(topic_name, value=json.dumps({"schema": {"type": "string", "optional": False},
                                                        "payload": line}).encode(), partition=i % 2)
        producer.flush()
    sink_file = tmp_path / "two.sink.txt"
    sink = {"name": "two-task-sink", "connector.class": "FileStreamSink", "tasks.max": "2",
            "file": str(sink_file), "topics": topic_name}
    worker = WorkerProcess(tmp_path, quickstart_worker(broker.bootstrap_servers, tmp_path), [sink]).start()
    try:
        wait_until(lambda: len(sink_lines(sink_file)) >= len(lines), 60, "every line in the sink file")
        tasks = worker.get("/connectors/two-task-sink/status").json()["tasks"]
        assert [(t["id"], t["state"]) for t in tasks] == [(0, "RUNNING"), (1, "RUNNING")]
        got = sink_lines(sink_file)
        assert sorted(got) == sorted(lines)  # each line whole, once
        for parity in ("p0", "p1"):  # a partition's lines in its order
            assert [x for x in got if x.startswith(parity)] == [x for x in lines if x.startswith(parity)]
    finally:
        worker.kill()
    assert "Traceback" not in worker.log_text(), worker.log_text()[-4000:]
