"""The exactly-once sink: replays of a batch id never duplicate records.

In-process tests drive the write task directly with a chosen Spark identity (query,
run, batch, partition, attempt) and a failure half-way; the end-to-end test SIGKILLs a
Spark driver mid-batch and runs the query again from its checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pipeline_kafka import create_topic, produce, read_topic, user_headers

from odradek.pipeline import sink, worker_python
from odradek.pipeline.blocking_client import Cluster
from odradek.pipeline.exactly_once import SINK_HEADER, CommitLog, TaskIdentity, record_commit
from odradek.pipeline.options import DEFAULT_COMMIT_TOPIC, write_options

pytestmark = pytest.mark.timeout(600)


def _batches(rows: list[tuple], size: int = 7, fail_after: int | None = None):
    for i in range(0, len(rows), size):
        if fail_after is not None and i >= fail_after:
            raise RuntimeError("task killed")
        chunk = rows[i : i + size]
        yield pa.record_batch(
            [pa.array([k for k, _ in chunk], pa.binary()), pa.array([v for _, v in chunk], pa.binary())],
            names=["key", "value"],
        )


def _write(monkeypatch, broker, topic, ident, rows, **kw):
    monkeypatch.setattr(sink.TaskIdentity, "current", classmethod(lambda cls, sink_id="": ident))
    opts = write_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic, "kafka.batch.size": "300"},
        streaming=True,
    )
    return sink.write_rows(opts, _batches(rows, **kw), exactly_once=True)


def _ident(query, run, batch, partition=0, attempt=0):
    return TaskIdentity(query, run, batch, partition, attempt)


def test_retried_task_writes_only_what_is_missing(monkeypatch, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 3)
    query, run = str(uuid.uuid4()), str(uuid.uuid4())
    rows = [(b"k%d" % (i % 40), b"v%d" % i) for i in range(300)] + [(None, b"same")] * 3
    with pytest.raises(RuntimeError, match="killed"):
        _write(monkeypatch, broker, topic_name, _ident(query, run, 0), rows, fail_after=150)
    partial = read_topic(broker.bootstrap_servers, topic_name)
    assert 0 < len(partial) <= 154

    # The retry sees the rows in another order (a shuffle): still one copy of each.
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    msg = _write(monkeypatch, broker, topic_name, _ident(query, run, 0, attempt=1), shuffled)
    assert msg.skipped == len(partial) and msg.rows == len(rows) - len(partial)
    out = read_topic(broker.bootstrap_servers, topic_name)
    assert sorted(((r.key, r.value) for r in out), key=repr) == sorted(rows, key=repr)
    tag = _ident(query, run, 0).tag
    assert all(r.headers == ((SINK_HEADER, tag),) for r in out)

    # The driver commits; a replay of batch 0 (a restart after the commit) writes nothing.
    with Cluster(broker.bootstrap_servers) as cluster:
        record_commit(cluster, DEFAULT_COMMIT_TOPIC, [msg], 0, [topic_name])
        commit = CommitLog(cluster, DEFAULT_COMMIT_TOPIC).state(query).commit
    assert commit["batch"] == 0 and set(commit["offsets"][topic_name]) == {"0", "1", "2"}
    replay = _write(monkeypatch, broker, topic_name, _ident(query, str(uuid.uuid4()), 0), rows)
    assert replay.rows == 0
    assert len(read_topic(broker.bootstrap_servers, topic_name)) == len(rows)


def test_next_batch_after_a_commit_needs_no_scan(monkeypatch, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    query, run = str(uuid.uuid4()), str(uuid.uuid4())
    first = _write(monkeypatch, broker, topic_name, _ident(query, run, 0), [(b"a", b"1")])
    with Cluster(broker.bootstrap_servers) as cluster:
        record_commit(cluster, DEFAULT_COMMIT_TOPIC, [first], 0, [topic_name])
        from odradek.pipeline.exactly_once import ReplayGuard

        guard = ReplayGuard(
            cluster, CommitLog(cluster, DEFAULT_COMMIT_TOPIC), _ident(query, run, 1), [topic_name]
        )
        assert guard.fresh and not guard.skip
        assert guard.landed((topic_name, 0)) is None
    # Identical rows in the next batch are new records, not duplicates of batch 0's.
    second = _write(monkeypatch, broker, topic_name, _ident(query, run, 1), [(b"a", b"1")])
    assert second.rows == 1 and second.skipped == 0
    assert len(read_topic(broker.bootstrap_servers, topic_name)) == 2


def test_partial_first_batch_of_a_new_query_is_not_repeated(monkeypatch, broker, topic_name):
    """No commit exists yet: the marker written before the first record bounds the scan."""
    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, [{"value": b"old"}] * 20)  # history the scan must not count
    query = str(uuid.uuid4())
    rows = [(None, b"old")] * 5 + [(b"k%d" % i, b"v") for i in range(50)]
    with pytest.raises(RuntimeError):
        _write(monkeypatch, broker, topic_name, _ident(query, "run-1", 0), rows, size=5, fail_after=30)
    msg = _write(monkeypatch, broker, topic_name, _ident(query, "run-2", 0), rows)
    assert msg.skipped > 0
    out = read_topic(broker.bootstrap_servers, topic_name)
    mine = [(r.key, r.value) for r in out if r.headers]
    assert sorted(mine, key=repr) == sorted(rows, key=repr)
    assert sum(1 for r in out if not r.headers) == 20


# -- a real query, killed mid-batch ---------------------------------------------------------

_JOB = textwrap.dedent(
    """
    import os, sys, time
    from odradek.pipeline import spark_session
    from pyspark.sql import functions as F

    bootstrap, source, target, checkpoint, stuck_marker = sys.argv[1:6]
    spark = spark_session("local[2]", config={
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "20",
    })
    spark.sparkContext.setLogLevel("ERROR")

    @F.udf("string")
    def stuck_on_the_last_record(value, partition, offset):
        # Partition 0's last record is in the second micro-batch (each batch takes 300 of each
        # partition's 500): the task that reaches it stops there for good, the rest is written.
        if partition == 0 and offset == 499:
            open(stuck_marker, "w").close()
            time.sleep(3600)
        return value

    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "600").load()
          .select("key", stuck_on_the_last_record(F.col("value").cast("string"), "partition", "offset")
                  .alias("value")))
    q = (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", target).option("kafka.batch.size", "400")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    print("DONE", flush=True)
    """
)


def _end_offsets(bootstrap: str, topic: str) -> int:
    with Cluster(bootstrap) as cluster:
        tps = [(topic, p) for p in cluster.topic_partitions([topic], refresh=True)[topic]]
        return sum(cluster.offsets(tps, -1).values())


def _run_and_kill_mid_batch(args, env, bootstrap, target, stuck_marker: Path) -> int:
    """Run the job; SIGKILL it once its second micro-batch is stuck and part-written."""
    proc = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            if stuck_marker.exists() and _end_offsets(bootstrap, target) > 600:  # batch 0 and part of batch 1
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-3000:]
        assert stuck_marker.exists(), "the job did not reach its second micro-batch in 180 s"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return _end_offsets(bootstrap, target)


def test_query_killed_mid_batch_resumes_without_duplicates(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 2)
    create_topic(broker.bootstrap_servers, target, 2)
    total = 1000
    records = [{"key": b"k%04d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(total)]
    produce(broker.bootstrap_servers, source, records)  # 500 in each partition, offsets 0-499
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    env = {**os.environ, "PYSPARK_PYTHON": worker_python()}
    checkpoint = tmp_path / "ckpt"
    args = [sys.executable, str(script), broker.bootstrap_servers, source, target, str(checkpoint)]
    stuck = tmp_path / "stuck"
    partial = _run_and_kill_mid_batch([*args, str(stuck)], env, broker.bootstrap_servers, target, stuck)
    assert 600 < partial < total, f"the kill was not mid-batch ({partial} of {total} written)"

    # Run the query again from its checkpoint, here, without the stuck step.
    from pyspark.sql import functions as F

    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "600")
        .load()
        .select("key", F.col("value").cast("string").alias("value"))
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None

    out = read_topic(broker.bootstrap_servers, target)
    assert len(out) == total, f"{len(out) - total} duplicates"
    assert sorted((r.key, r.value) for r in out) == [
        (b"k%04d" % i, b"v%d" % i) for i in sorted(range(total), key=lambda i: b"k%04d" % i)
    ]
    assert all(user_headers(r) == () for r in out)

    query_id = json.loads(Path(checkpoint, "metadata").read_text())["id"]
    with Cluster(broker.bootstrap_servers) as cluster:
        commit = CommitLog(cluster, DEFAULT_COMMIT_TOPIC).state(query_id).commit
    assert commit["batch"] >= 1 and commit["skipped"] > 0


@pytest.mark.parametrize("lost", ["answer", "request"])
def test_a_produce_without_answer_is_resent_only_if_missing(monkeypatch, broker, topic_name, lost):
    """The connection drops after (or before) the broker got the request: count, then decide."""
    from odradek.pipeline.blocking_client import WireError

    create_topic(broker.bootstrap_servers, topic_name, 1)
    real = Cluster.produce
    calls = {"n": 0}

    def flaky(self, node, batches, **kw):
        calls["n"] += 1
        if calls["n"] == 2:  # the task's second data request
            if lost == "answer":
                real(self, node, batches, **kw)
            raise WireError("connection reset")
        return real(self, node, batches, **kw)

    monkeypatch.setattr(Cluster, "produce", flaky)
    rows = [(b"k%d" % i, b"v%d" % i) for i in range(60)]
    # the marker is the first produce; data goes out in requests of ~300 bytes
    msg = _write(monkeypatch, broker, topic_name, _ident(str(uuid.uuid4()), "run", 0), rows)
    assert msg.rows == 60 and calls["n"] > 3
    out = read_topic(broker.bootstrap_servers, topic_name)
    assert [(r.key, r.value) for r in out] == rows
