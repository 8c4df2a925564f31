"""Distributed mode with real worker processes on one broker: connectors created through one
worker's REST API spread over the group, a kill -9'd worker's tasks move within
scheduled.rebalance.max.delay.ms with no sink line lost, a follower forwards writes to the
leader, a restart of every worker resumes from the internal topics, and those topics hold
Kafka Connect's record formats."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from connect_support import (
    WorkerProcess,
    committed_records,
    create,
    distributed_worker,
    read_topic,
    running_tasks,
    sink_lines,
    write,
)
from support import wait_until


@pytest.fixture
def cluster(broker, tmp_path):
    group = f"connect-{uuid.uuid4().hex[:8]}"
    workers: list[WorkerProcess] = []

    def add() -> WorkerProcess:
        directory = tmp_path / f"w{len(workers)}"
        directory.mkdir()
        worker = WorkerProcess(directory, distributed_worker(broker.bootstrap_servers, group,
                                                             **{"exactly.once.source.support": "enabled"}))
        workers.append(worker)
        return worker.start()

    yield group, add, workers
    for worker in workers:
        worker.kill()
    for worker in workers:
        assert "Traceback" not in worker.log_text(), worker.log_text()[-4000:]


def test_sink_tasks_spread_move_after_kill_9_and_everything_resumes_after_a_restart(broker, cluster, tmp_path,
                                                                                    topic_name):
    group, add, workers = cluster
    first, second = add(), add()
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i:05d}" for i in range(3000)]
    source_file.write_text("".join(f"{line}\n" for line in lines[:1000]))
    create(second, "file-source", {"connector.class": "FileStreamSource", "tasks.max": "1",
                                   "file": str(source_file), "topic": topic_name})
    create(first, "file-sink", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                "tasks.max": "1", "file": str(sink_file), "topics": topic_name})
    wait_until(lambda: running_tasks(first, "file-sink") and running_tasks(first, "file-source"), 60,
               "both tasks running")
    wait_until(lambda: len(set(sink_lines(sink_file))) >= 1000, 60, "1000 lines in the sink file")

    # Work spreads over both workers, and both answer the same status (from the status topic).
    owners = {t["worker_id"] for name in ("file-source", "file-sink")
              for t in first.get(f"/connectors/{name}/status").json()["tasks"]}
    assert owners == {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
    assert first.get("/connectors/file-sink/status").json() == second.get("/connectors/file-sink/status").json()

    # kill -9 one worker: after the delay its work runs on the other, and no line is lost.
    second.kill()
    with open(source_file, "a") as out:
        out.write("".join(f"{line}\n" for line in lines[1000:2000]))
    survivor = f"127.0.0.1:{first.port}"
    wait_until(lambda: {t["worker_id"] for n in ("file-source", "file-sink")
                        for t in running_tasks(first, n)} == {survivor}
               and running_tasks(first, "file-sink") and running_tasks(first, "file-source"),
               60, "every task running on the surviving worker")
    wait_until(lambda: set(sink_lines(sink_file)) >= set(lines[:2000]), 60, "2000 lines in the sink file")

    # Restart every worker: connectors, configs, offsets and statuses come back from the topics.
    config_before = first.get("/connectors/file-sink/config").json()
    # The source's offsets commit with its transaction at the next flush (offset.flush.interval.ms);
    # the sink may have written lines it read before that commit.
    offsets_before = wait_until(lambda: (got := first.get("/connectors/file-source/offsets").json())["offsets"]
                                and got, 30, "the source's offsets committed")
    assert offsets_before["offsets"] and offsets_before["offsets"][0]["partition"] == {"filename": str(source_file)}
    assert first.stop() == 0
    # A clean stop reports what the worker ran as UNASSIGNED (a kill -9 cannot).
    stopped = dict(read_topic(broker.bootstrap_servers, f"{group}-status"))
    for key in ("status-connector-file-sink", "status-connector-file-source", "status-task-file-sink-0",
                "status-task-file-source-0"):
        assert stopped[key]["state"] == "UNASSIGNED" and stopped[key]["worker_id"] == survivor, (key, stopped[key])
    with open(source_file, "a") as out:
        out.write("".join(f"{line}\n" for line in lines[2000:]))
    third = add()
    wait_until(lambda: sorted(third.get("/connectors").json()) == ["file-sink", "file-source"], 30,
               "the connectors read back from the config topic")
    assert third.get("/connectors/file-sink/config").json() == config_before
    wait_until(lambda: running_tasks(third, "file-sink") and running_tasks(third, "file-source"),
               60, "the connectors running again")
    wait_until(lambda: set(sink_lines(sink_file)) >= set(lines), 60, "every line in the sink file")
    # exactly.once.source.support=enabled: the source's records and offsets were written in one
    # transaction, so through the kill -9 and the restarts each line was committed once.
    records, end = committed_records(broker.bootstrap_servers, topic_name, len(lines))
    assert sorted(json.loads(v)["payload"] for _, v in records) == lines
    assert end > len(records)  # the transactions' commit markers take offsets too

    # The internal topics read as Kafka Connect's.
    configs = dict(read_topic(broker.bootstrap_servers, f"{group}-configs"))
    assert configs["connector-file-sink"]["properties"]["tasks.max"] == "1"
    assert configs["commit-file-sink"] == {"tasks": 1}
    assert configs["task-file-sink-0"]["properties"]["topics"] == topic_name
    assert configs["target-state-file-sink"]["state"] == "STARTED"
    offsets = read_topic(broker.bootstrap_servers, f"{group}-offsets")
    key, value = offsets[-1]
    assert json.loads(key) == ["file-source", {"filename": str(source_file)}] and "position" in value
    statuses = dict(read_topic(broker.bootstrap_servers, f"{group}-status"))
    task_status = statuses["status-task-file-sink-0"]
    assert set(task_status) == {"state", "trace", "worker_id", "generation"}
    assert task_status["state"] == "RUNNING" and task_status["worker_id"] == f"127.0.0.1:{third.port}"


def test_a_follower_forwards_writes_to_the_leader_and_the_group_is_listed(broker, cluster, tmp_path, topic_name):
    group, add, workers = cluster
    first, second, third = add(), add(), add()
    sink = {"connector.class": "FileStreamSink", "tasks.max": "1", "file": str(tmp_path / "s.txt"),
            "topics": topic_name}
    # Whichever of the two is the follower forwards; both creates answer as the leader does.
    create(first, "sink-a", sink)
    create(second, "sink-b", sink)
    for worker in workers:
        wait_until(lambda w=worker: sorted(w.get("/connectors").json()) == ["sink-a", "sink-b"], 30, "both")
    answer = write(second, "PUT", "/connectors/sink-a/pause")
    assert answer.status_code == 202
    wait_until(lambda: first.get("/connectors/sink-a/status").json()["connector"]["state"] == "PAUSED", 30,
               "sink-a paused")

    # A request already forwarded (?forward=false) is answered by the leader only; the two
    # followers answer Kafka's 409.
    def answers():
        got = [w.request("PUT", "/connectors/sink-a/pause", params={"forward": "false"}) for w in workers]
        return got if any(a.status_code == 202 for a in got) else None

    got = wait_until(answers, 60, "the leader to answer")
    assert sorted(a.status_code for a in got) == [202, 409, 409]
    assert next(a for a in got if a.status_code == 409).json() == {"error_code": 409, "message": (
        "Cannot complete request momentarily due to stale configuration (typically caused by a concurrent "
        "config change)")}
    assert write(third, "DELETE", "/connectors/sink-b").status_code == 204
    wait_until(lambda: second.get("/connectors").json() == ["sink-a"], 30, "sink-b gone on the other worker")
    duplicate = write(second, "POST", "/connectors", json={"name": "sink-a", "config": sink})
    assert duplicate.status_code == 409 and duplicate.json()["message"] == "Connector sink-a already exists"

    listed = subprocess.run([sys.executable, "-m", "odradek", "groups", "list", "-o", "json",
                             "-b", broker.bootstrap_servers], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout and "connect" in listed.stdout, listed.stdout
