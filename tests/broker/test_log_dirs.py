"""Several log dirs (JBOD): partitions spread over the dirs, DescribeLogDirs (35) and
AlterReplicaLogDirs (34) through kafka-python's admin client, a partition moved while a
librdkafka producer keeps writing to it, a failed dir taken offline while the others serve,
and a move interrupted by a crash finished or rolled back at the next start."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest
from broker_e2e import (
    RawClient,
    consume,
    create_topic,
    fetch_records,
    produce_and_flush,
    produce_body,
    producer,
    record_batch,
    wait_until,
)
from confluent_kafka import KafkaError
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartitionReplica

from odradek.broker.log_dir_mover import _carry_over, _catch_up
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.records import NewRecord
from odradek.storage.log_dirs import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX
from odradek.storage.log_manager import LogManager


def jbod_broker(own_broker, tmp_path, n: int = 2, **overrides):
    dirs = [tmp_path / f"disk{i}" for i in range(n)]
    settings = {"log.dirs": ",".join(str(d) for d in dirs), "log.segment.delete.delay.ms": "0"}
    settings.update(overrides)
    return own_broker(**settings), dirs


def describe(client) -> dict[str, dict]:
    """{log dir: {"error": code, "partitions": {(topic, partition): (size, lag, is_future)}}}"""
    (only,) = client.describe_log_dirs()
    out = {}
    for d in only["log_dirs"]:
        parts = {
            (t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"], p["is_future_key"])
            for t in d["topics"]
            for p in t["partitions"]
        }
        out[d["log_dir"]] = {"error": d["error_code"], "partitions": parts, "total": d["total_bytes"]}
    return out


@pytest.fixture
def kp_admin_of():
    clients = []

    def make(broker) -> KafkaAdminClient:
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_new_partitions_spread_over_the_log_dirs(own_broker, tmp_path, kp_admin_of, topic_name):
    broker, dirs = jbod_broker(own_broker, tmp_path, 3)
    create_topic(broker, topic_name, 6)
    dirs_info = describe(kp_admin_of(broker))
    assert sorted(dirs_info) == sorted(str(d) for d in dirs)
    counts = {d: sum(1 for (t, _) in info["partitions"] if t == topic_name) for d, info in dirs_info.items()}
    assert sorted(counts.values()) == [2, 2, 2]
    for d, info in dirs_info.items():
        assert info["error"] == 0 and info["total"] > 0
        for t, p in info["partitions"]:
            assert (tmp_path / d / f"{t}-{p}").is_dir()


def test_a_partition_moves_to_another_dir_while_it_is_written(own_broker, tmp_path, kp_admin_of, topic_name):
    broker, (a, b) = jbod_broker(own_broker, tmp_path, 2)
    create_topic(broker, topic_name, 1)
    client = kp_admin_of(broker)
    source = next(d for d, info in describe(client).items() if (topic_name, 0) in info["partitions"])
    dest = str(b) if source == str(a) else str(a)
    prod = producer(broker, linger_ms=2)
    first = [{"value": b"before-%05d" % i + b"x" * 500, "partition": 0} for i in range(4000)]
    produce_and_flush(prod, topic_name, first)

    acked, stop = [], threading.Event()

    def keep_writing():
        i = 0
        while not stop.is_set():
            acked.extend(
                r.value
                for r in produce_and_flush(
                    prod, topic_name, [{"value": b"during-%05d" % i, "partition": 0}]
                ).acked
            )
            i += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        result = client.alter_replica_log_dirs({TopicPartitionReplica(topic_name, 0, 0): dest})
        assert result == {TopicPartitionReplica(topic_name, 0, 0): kerrors.NoError}
        wait_until(
            lambda: (
                (topic_name, 0) in describe(client)[dest]["partitions"]
                and not describe(client)[dest]["partitions"][(topic_name, 0)][2]
            ),
            timeout=30,
            message="the move to finish",
        )
        wait_until(lambda: len(acked) > 20, message="writes after the move")
    finally:
        stop.set()
        writer.join()
    info = describe(client)
    assert (topic_name, 0) not in info[source]["partitions"]
    size, lag, future = info[dest]["partitions"][(topic_name, 0)]
    assert size > 4000 * 500 and lag == 0 and not future
    wait_until(lambda: not (tmp_path / source / f"{topic_name}-0").exists(), message="the old dir to go")

    expected = [item["value"] for item in first] + acked
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == expected
    assert [r.offset for r in got] == list(range(len(expected)))

    broker.restart()
    again = consume(broker, topic_name, [0])[0]
    assert [r.value for r in again] == expected
    assert (tmp_path / dest / f"{topic_name}-0").is_dir()


def test_alter_replica_log_dirs_errors_as_kafka(own_broker, tmp_path, kp_admin_of, topic_name):
    broker, (a, b) = jbod_broker(own_broker, tmp_path, 2)
    create_topic(broker, topic_name, 1)
    client = kp_admin_of(broker)
    nowhere = client.alter_replica_log_dirs(
        {TopicPartitionReplica(topic_name, 0, 0): str(tmp_path / "elsewhere")}
    )
    assert list(nowhere.values()) == [kerrors.LogDirNotFoundError]
    later = topic_name + "-later"
    not_here = client.alter_replica_log_dirs({TopicPartitionReplica(later, 0, 0): str(b)})
    assert list(not_here.values()) == [kerrors.ReplicaNotAvailableError]
    create_topic(broker, later, 1)  # created where it was asked to go
    assert (later, 0) in describe(client)[str(b)]["partitions"]


def test_a_failed_log_dir_goes_offline_and_the_others_keep_serving(
    own_broker, tmp_path, kp_admin_of, topic_name
):
    broker, dirs = jbod_broker(own_broker, tmp_path, 2, **{"log.flush.offset.checkpoint.interval.ms": "100", "log.initial.task.delay.ms": "0"})
    create_topic(broker, topic_name, 2)  # one partition in each dir
    client = kp_admin_of(broker)
    info = describe(client)
    doomed = next(d for d, i in info.items() if (topic_name, 0) in i["partitions"])
    other = next(d for d in info if d != doomed)
    (survivor,) = [p for (t, p) in info[other]["partitions"] if t == topic_name]
    produce_and_flush(
        producer(broker, linger_ms=0), topic_name, [{"value": b"v", "partition": p} for p in (0, 1)]
    )

    # The disk is gone (again while a checkpoint written meanwhile leaves a file behind).
    wait_until(lambda: shutil.rmtree(doomed, ignore_errors=True) or not os.path.exists(doomed), timeout=15)
    wait_until(lambda: describe(client)[doomed]["error"] == 56, timeout=15, message="the dir to go offline")
    assert describe(client)[doomed]["partitions"] == {}
    assert "is offline" in broker.log_text()

    with RawClient(broker) as raw:
        response = raw.request(0, 9, produce_body(topic_name, 0, record_batch([b"lost"])))
        assert response.responses[0].partition_responses[0].error_code == 56  # KAFKA_STORAGE_ERROR
        code, records = fetch_records(raw, topic_name, 0, 0)
    assert (code, [r[2] for r in records]) == (0, [b"v"])  # what was written stays readable
    reports = []
    prod = producer(broker, linger_ms=0, message_timeout_ms=2000)
    prod.produce(topic_name, b"lost", partition=0, on_delivery=lambda err, msg: reports.append(err))
    prod.flush(15)
    # librdkafka retries a storage error (retriable) until the message times out, as against Kafka.
    assert [e.code() for e in reports] == [KafkaError._MSG_TIMED_OUT]
    produce_and_flush(prod, topic_name, [{"value": b"still", "partition": survivor}])
    assert [r.value for r in consume(broker, topic_name, [survivor])[survivor]] == [b"v", b"still"]
    page = client.describe_topic_partitions([topic_name])
    offline = {p["partition_index"]: p["offline_replicas"] for p in page["topics"][0]["partitions"]}
    assert offline[0] == [0] and offline[survivor] == []


# -- a move interrupted by a crash (the LogManager alone, as the broker's start sees it) ----------


def _manager_with_data(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs)
    log = lm.get_or_create_log("t", 0)
    for _ in range(20):
        log.append_as_leader(build_batch([NewRecord(b"k%d" % j, b"v" * 50) for j in range(5)]), 0)
    log.flush()
    source = lm.log_dir_of("t", 0)
    dest = dirs[1] if source == dirs[0] else dirs[0]
    return lm, log, source, dest, dirs


def _records(log) -> int:
    return log.log_end_offset - log.log_start_offset


def test_an_unfinished_move_is_rolled_back_at_start(tmp_path):
    lm, log, source, dest, dirs = _manager_with_data(tmp_path)
    future = lm.create_future_log("t", 0, dest)
    _catch_up(log, future, 2000)  # a crash in the middle of the copy
    future.flush()
    lm.checkpoint_all()
    again = LogManager(dirs)
    assert again.log_dir_of("t", 0) == source and _records(again.get_log("t", 0)) == 100
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.endswith(FUTURE_DIR_SUFFIX)]
    assert not [p for p in (tmp_path / "b").iterdir() if p.name.endswith(FUTURE_DIR_SUFFIX)]


def test_a_committed_move_is_finished_at_start(tmp_path):
    lm, log, source, dest, dirs = _manager_with_data(tmp_path)
    future = lm.create_future_log("t", 0, dest)
    _catch_up(log, future, None)
    _carry_over(log, future)
    future.flush()
    # A crash right after the commit point: the current dir renamed away, the future not yet renamed.
    log.rename_dir(str(tmp_path / source / f"t-0.x{DELETE_DIR_SUFFIX}"))
    again = LogManager(dirs)
    assert again.log_dir_of("t", 0) == dest
    moved = again.get_log("t", 0)
    assert (_records(moved), moved.log_end_offset) == (100, 100)
    assert not (tmp_path / source / f"t-0.x{DELETE_DIR_SUFFIX}").exists()


def test_a_completed_move_keeps_offsets_epochs_and_start(tmp_path):
    lm, log, source, dest, dirs = _manager_with_data(tmp_path)
    log.leader_epoch_cache.assign(3, log.log_end_offset)  # a new epoch without a batch yet
    log.high_watermark = log.log_end_offset
    log.maybe_increment_log_start_offset(7)
    future = lm.create_future_log("t", 0, dest)
    _catch_up(log, future, None)
    _carry_over(log, future)
    new = lm.replace_current_with_future("t", 0)
    assert (new.log_start_offset, new.log_end_offset, new.high_watermark) == (7, 100, 100)
    assert new.leader_epoch_cache.latest_epoch == 3
    assert lm.log_dir_of("t", 0) == dest and new.dir == str(tmp_path / dest / "t-0")
    lm.cleanup(int(time.time() * 1000) + 120_000)  # past file.delete.delay.ms
    assert not [p for p in (tmp_path / source).iterdir() if p.name.startswith("t-0")]
    lm.shutdown()
    again = LogManager(dirs)
    assert (again.get_log("t", 0).log_start_offset, again.get_log("t", 0).log_end_offset) == (7, 100)

