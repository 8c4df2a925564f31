"""A full disk: clients get KAFKA_STORAGE_ERROR, the broker says so once, stops cleanly,
starts again on the full disk, and nothing acknowledged is lost.

Guards issue 12's item 10: the broker logged nothing, SIGTERM on a full disk crashed in the
producer-state snapshot (an unclean shutdown), and a start on a full disk failed. The disk
is a real 8 MiB tmpfs, filled for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.process import BrokerProcess

TOPIC = "filling"


def produce_until_full(proc) -> tuple[list[bytes], list]:
    """Produce 4 KB records until the broker refuses them; returns (acknowledged, errors)."""
    p = Producer(
        {
            "bootstrap.servers": proc.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "message.send.max.retries": 0,
            "enable.idempotence": False,
        }
    )
    acked, failed = [], []

    def on_delivery(err, msg):
        (failed if err else acked).append(err or msg.value())

    i = 0
    while not failed and i < 10_000:
        for _ in range(100):
            p.produce(TOPIC, f"{i:06d}".encode() + b"x" * 4000, partition=0, on_delivery=on_delivery)
            i += 1
        p.flush(30)
    return acked, failed


def read_all(proc, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": proc.bootstrap_servers, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    return got


def produce_one(proc) -> KafkaError | None:
    p = Producer({"bootstrap.servers": proc.bootstrap_servers, "message.send.max.retries": 0})
    result = []
    p.produce(TOPIC, b"after", partition=0, on_delivery=lambda err, msg: result.append(err))
    p.flush(30)
    assert result, "no delivery report"
    return result[0]


def offline_lines(proc) -> list[str]:
    return [line for line in proc.log_text().splitlines() if " ERROR " in line and "is offline" in line]


def test_a_full_disk_is_reported_once_survives_sigterm_and_a_start_on_the_full_disk(small_disk, fill_disk, tmp_path):
    disk = small_disk("8m")
    proc = BrokerProcess(disk / "data", log_path=tmp_path / "broker.log")
    proc.start()
    try:
        client = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
        client.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        acked, failed = produce_until_full(proc)
        assert acked and failed and {e.code() for e in failed} == {KafkaError.KAFKA_STORAGE_ERROR}, failed[:3]
        (line,) = offline_lines(proc)  # once, however many writes failed
        assert str(disk / "data") in line and "ENOSPC" in line and "free space" in line, line
        assert read_all(proc, len(acked)) == acked
        assert produce_one(proc).code() == KafkaError.KAFKA_STORAGE_ERROR  # refused at once now

        assert proc.stop() == 0  # SIGTERM on the full disk: a clean exit, nothing raised
        text = proc.log_text()
        assert "Traceback" not in text and "offline log dirs were not marked clean" in text

        filler = fill_disk(disk)  # not one byte left
        proc.start()
        assert read_all(proc, len(acked)) == acked
        assert produce_one(proc).code() == KafkaError.KAFKA_STORAGE_ERROR
        assert proc.stop() == 0

        filler.unlink()  # space again: the next start takes writes
        proc.start()
        assert produce_one(proc) is None
        assert read_all(proc, len(acked) + 1) == acked + [b"after"]
        assert "Traceback" not in proc.log_text()
    finally:
        proc.kill()


INDEX_PAGE_SCRIPT = r"""
import ctypes, json, os, sys, time
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.storage import Log, LogConfig

disk = sys.argv[1]
log = Log(os.path.join(disk, "t-0"), LogConfig.from_dict({"index.interval.bytes": "0"}))
now = int(time.time() * 1000)
for i in range(10):  # the indexes' first pages get written
    log.append_as_leader(build_batch([(None, b"v%d" % i, [], now + i)]), 0)
# Reserve room for the .log without growing it, so its appends need no new space ...
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(log.active_segment.log.path, os.O_RDWR)
assert libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(1 << 20)) == 0  # FALLOC_FL_KEEP_SIZE
os.close(fd)
# ... then take every byte left: the next index page has nowhere to go.
with open(os.path.join(disk, "filler"), "wb", buffering=0) as f:
    for size in (1 << 16, 4096, 1):
        try:
            while True:
                f.write(bytes(size))
        except OSError:
            pass
ok, error = 10, None
for i in range(10, 5000):
    try:
        log.append_as_leader(build_batch([(None, b"v%d" % i, [], now + i)]), 0)
        ok += 1
    except errors.KafkaStorageErrorError as e:
        error = str(e)
        break
size = os.path.getsize(log.active_segment.log.path)
read = log.read(0, 1 << 20, min_one_message=True).records.read()
print(json.dumps({"ok": ok, "error": error, "leo": log.log_end_offset, "size": size, "read": len(read)}))
"""


def test_an_index_page_on_a_full_disk_is_a_storage_error_not_sigbus(small_disk):
    disk = small_disk("4m")
    r = subprocess.run([sys.executable, "-c", INDEX_PAGE_SCRIPT, str(disk)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])  # -7 would be SIGBUS
    out = json.loads(r.stdout)
    assert out["error"] is not None and "No space left on device" in out["error"], out
    assert out["leo"] == out["ok"] > 300  # every append before the failure, none after
    assert out["size"] == out["read"]  # the failed append was taken back from the .log
    os.unlink(disk / "filler")
    reloaded = subprocess.run(
        [sys.executable, "-c", "import sys; from odradek.storage import Log; print(Log(sys.argv[1], had_clean_shutdown=False).log_end_offset)", str(disk / "t-0")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reloaded.stdout.strip() == str(out["leo"]), reloaded


def test_create_topics_on_a_full_disk_is_a_storage_error_and_creates_nothing(small_disk, fill_disk, tmp_path):
    disk = small_disk("2m")
    proc = BrokerProcess(disk / "data", log_path=tmp_path / "broker.log")
    proc.start()
    try:
        client = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
        filler = fill_disk(disk)
        future = client.create_topics([NewTopic("nowhere", 3, 1)])["nowhere"]
        with pytest.raises(KafkaException) as info:
            future.result(30)
        err = info.value.args[0]
        assert err.code() == KafkaError.KAFKA_STORAGE_ERROR and "cluster metadata" in err.str(), err
        assert "nowhere" not in client.list_topics(timeout=10).topics
        filler.unlink()
        client.create_topics([NewTopic("somewhere", 3, 1)])["somewhere"].result(30)
        assert proc.stop() == 0
        proc.start()
        topics = AdminClient({"bootstrap.servers": proc.bootstrap_servers}).list_topics(timeout=10).topics
        assert "somewhere" in topics and "nowhere" not in topics
    finally:
        proc.kill()
