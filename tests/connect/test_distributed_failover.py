"""Distributed mode when workers die, with three real worker processes (one cluster for the module):
a follower kill -9'd and restarted within scheduled.rebalance.max.delay.ms gets its own
connectors and tasks back; the leader kill -9'd: a survivor is elected, the survivors' /metrics
name the new leader, writes through the other survivor are forwarded to it, and the dead leader's
work is held for the delay (the new leader learns who ran it from the status topic), then runs
on the survivors with no sink line lost and no duplicate from the exactly-once source."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from connect_support import (
    WorkerProcess,
    committed_records,
    create,
    distributed_worker,
    sink_lines,
    write,
)
from support import wait_until

DELAY_S = 12  # longer than the session timeout (6 s), so a move without the delay shows
LINES = [f"line {i:05d}" for i in range(2000)]


def worker_id(worker: WorkerProcess) -> str:
    return f"127.0.0.1:{worker.port}"


def placement(worker: WorkerProcess) -> dict[str, str]:
    """Each running connector ("name") and task ("name-N") -> the worker id running it, per the status API."""
    try:
        answer = worker.get("/connectors", params={"expand": "status"})
    except OSError:
        return {}
    out = {}
    for name, entry in answer.json().items():
        status = entry["status"]
        if status["connector"]["state"] == "RUNNING":
            out[name] = status["connector"]["worker_id"]
        for task in status["tasks"]:
            if task["state"] == "RUNNING":
                out[f"{name}-{task['id']}"] = task["worker_id"]
    return out


def group_metrics(worker: WorkerProcess) -> tuple[str, int]:
    """(the leader's URL, the epoch) as the worker's /metrics give them."""
    text = worker.get("/metrics").text
    leader = re.search(r'rebalance_metrics_leader_name\{leader_name="([^"]*)"\} 1', text)
    epoch = re.search(r"rebalance_metrics_epoch (-?\d+)", text)
    assert leader and epoch, text
    return leader.group(1), int(epoch.group(1))


def runs_locally(worker: WorkerProcess) -> tuple[int, int]:
    """(connectors, tasks) the worker process itself runs, per its /metrics."""
    text = worker.get("/metrics").text
    counts = [re.search(rf"worker_metrics_{kind}_count (\d+)", text) for kind in ("connector", "task")]
    assert all(counts), text
    return int(counts[0].group(1)), int(counts[1].group(1))


def leader_of(workers: list[WorkerProcess]) -> WorkerProcess:
    url = group_metrics(workers[0])[0]
    return next(w for w in workers if url == f"{w.url}/")


class Cluster:
    def __init__(self, workers: list[WorkerProcess], source_file, sink_files, topic: str):
        self.workers, self.source_file, self.sink_files, self.topic = workers, source_file, sink_files, topic

    def append(self, lines: list[str]) -> None:
        with open(self.source_file, "a") as out:
            out.write("".join(f"{line}\n" for line in lines))


@pytest.fixture(scope="module")
def cluster(broker, tmp_path_factory):
    directory = tmp_path_factory.mktemp("failover")
    group = f"connect-{uuid.uuid4().hex[:8]}"
    workers = []
    for i in range(3):
        (directory / f"w{i}").mkdir()
        workers.append(WorkerProcess(directory / f"w{i}", distributed_worker(
            broker.bootstrap_servers, group, **{
                "exactly.once.source.support": "enabled", "scheduled.rebalance.max.delay.ms": str(DELAY_S * 1000)})))
    try:
        for worker in workers:
            worker.spawn()
        for worker in workers:
            worker.wait_ready()
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        cluster = Cluster(workers, directory / "in.txt", [directory / "out-a.txt", directory / "out-b.txt"], topic)
        cluster.append(LINES[:1000])
        # Three connectors of one task each: every worker runs one connector and one task.
        create(workers[0], "source", {"connector.class": "FileStreamSource", "tasks.max": "1",
                                      "file": str(cluster.source_file), "topic": topic})
        for name, path in zip(("sink-a", "sink-b"), cluster.sink_files, strict=True):
            create(workers[0], name, {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                      "tasks.max": "1", "file": str(path), "topics": topic})
        ids = sorted(map(worker_id, workers))
        wait_until(lambda: len(got := placement(workers[0])) == 6 and sorted(got.values()) == sorted(ids * 2), 90,
                   "three connectors and three tasks running, two on each worker")
        yield cluster
    finally:
        for worker in workers:
            worker.kill()
    for worker in workers:
        assert "Traceback" not in worker.log_text(), worker.log_text()[-4000:]


def test_a_follower_killed_and_restarted_within_the_delay_gets_its_work_back(cluster):
    workers = cluster.workers
    leader = leader_of(workers)
    follower = next(w for w in workers if w is not leader)
    before = placement(leader)
    its_work = {item for item, owner in before.items() if owner == worker_id(follower)}
    assert len(its_work) == 2
    follower.kill()
    # Restarted at once (the same host:port: the same worker id), it joins while the group
    # notices the death (session.timeout.ms) and holds the dead worker's work for the delay.
    follower.spawn()

    def back_home():
        now = placement(leader)
        assert not any(now.get(item) not in (None, worker_id(follower)) for item in its_work), now  # never moved
        # (the status topic names the follower from before the kill too: the new process must run them)
        try:
            running = runs_locally(follower)
        except OSError:
            return None
        return running == (1, 1) and all(now.get(item) == worker_id(follower) for item in its_work) and now

    follower.wait_ready()
    # (given back in the round it joins: test_distributed_protocol.py shows it without a clock)
    after = wait_until(back_home, 60, "the restarted follower running its connector and task again")
    assert after == before


def test_the_leader_killed_its_work_waits_for_the_delay_then_runs_on_the_survivors_losing_nothing(cluster):
    workers = cluster.workers
    wait_until(lambda: all(sink_lines(p) and set(sink_lines(p)) >= set(LINES[:1000]) for p in cluster.sink_files),
               60, "the first 1000 lines in both sink files")
    leader = leader_of(workers)
    survivors = [w for w in workers if w is not leader]
    survivor_ids = set(map(worker_id, survivors))
    its_work = {item for item, owner in placement(survivors[0]).items() if owner == worker_id(leader)}
    assert len(its_work) == 2, (worker_id(leader), placement(survivors[0]), [group_metrics(w) for w in workers])
    cluster.append(LINES[1000:])
    leader.kill()
    killed_at = time.monotonic()

    # A survivor is elected; both name it.
    def new_leader():
        named = {group_metrics(w)[0] for w in survivors}
        return len(named) == 1 and named <= {f"{w.url}/" for w in survivors} and named.pop()

    leader_url = wait_until(new_leader, 60, "the survivors naming one of them as the leader")
    new = next(w for w in survivors if f"{w.url}/" == leader_url)
    follower = next(w for w in survivors if w is not new)

    # The dead leader's connector and task run on the survivors, after the delay.
    everything = wait_until(lambda: len(got := placement(new)) == 6 and set(got.values()) <= survivor_ids and got,
                            DELAY_S + 60, "every connector and task running on the survivors")
    assert time.monotonic() - killed_at >= DELAY_S, "the dead leader's work moved before the delay"
    assert set(everything) >= its_work

    # Writes through the follower are forwarded to the new leader.
    assert write(follower, "PUT", "/connectors/sink-b/pause").status_code == 202
    wait_until(lambda: new.get("/connectors/sink-b/status").json()["connector"]["state"] == "PAUSED", 30,
               "sink-b paused")
    assert write(follower, "PUT", "/connectors/sink-b/resume").status_code == 202

    # No sink line lost (at least once); the exactly-once source wrote each line once.
    for path in cluster.sink_files:
        wait_until(lambda p=path: set(sink_lines(p)) >= set(LINES), 60, f"every line in {path.name}")
    records, _ = committed_records(workers[0].worker["bootstrap.servers"], cluster.topic, len(LINES))
    assert sorted(json.loads(value)["payload"] for _, value in records) == LINES
