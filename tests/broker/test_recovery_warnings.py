"""Recovery after a crash says what it cut: the file, the byte, the offsets and the bytes removed.

Guards issue 12's item 9: a torn or corrupt tail was cut without a log line, once 20
acknowledged records below the old high watermark (with fsync off that is Kafka's behaviour
too, but it must be said). Every case kills a real broker with SIGKILL, damages the active
segment's real file, restarts and reads back with confluent-kafka.
"""

from __future__ import annotations

import re
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.storage.verify import batch_positions

SEGMENT = "00000000000000000000.log"


def create_topic(proc, name: str) -> None:
    client = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
    client.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def produce_batches(proc, topic: str, batches: int, per_batch: int) -> list[bytes]:
    """``batches`` record batches of ``per_batch`` records each, all acknowledged (acks=all)."""
    p = Producer({"bootstrap.servers": proc.bootstrap_servers, "acks": "all", "linger.ms": 50})
    values = []
    failed = []
    for b in range(batches):
        for r in range(per_batch):
            value = f"b{b}-r{r}".encode()
            values.append(value)
            p.produce(topic, value, partition=0, on_delivery=lambda err, msg: err and failed.append(err))
        assert p.flush(30) == 0  # one batch per flush
    assert not failed, failed
    return values


def consume(proc, topic: str, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": proc.bootstrap_servers, "group.id": "recovery", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= expected:
                time.sleep(0.3)  # nothing more may come
                got += [m.value() for m in c.consume(1000, 0.3) if m.error() is None]
                break
    finally:
        c.close()
    return got


def recovery_lines(proc) -> list[str]:
    return [line for line in proc.log_text().splitlines() if "WARNING" in line and "Recovery of" in line]


def test_a_torn_tail_is_cut_with_a_warning_and_acknowledged_records_stay(own_broker):
    proc = own_broker()
    create_topic(proc, "torn")
    values = produce_batches(proc, "torn", batches=5, per_batch=10)
    proc.kill()
    segment = proc.data_dir / "torn-0" / SEGMENT
    size = segment.stat().st_size
    with open(segment, "ab") as f:  # half a batch: a write the crash interrupted
        f.write(struct.pack(">qi", 50, 500) + b"\x07" * 40)
    proc.start()
    (line,) = recovery_lines(proc)
    assert f"cut {SEGMENT} at byte {size}" in line and "removed 52 bytes holding offsets from 50 on" in line, line
    assert "torn write" in line
    assert consume(proc, "torn", 50) == values


def test_a_corrupt_batch_after_a_crash_is_cut_and_lost_acknowledged_records_are_counted(own_broker):
    proc = own_broker(**{"log.flush.offset.checkpoint.interval.ms": 50, "log.initial.task.delay.ms": 0})
    create_topic(proc, "flip")
    values = produce_batches(proc, "flip", batches=6, per_batch=10)
    checkpoint = proc.data_dir / "replication-offset-checkpoint"
    deadline = time.monotonic() + 30
    while "flip 0 60" not in (checkpoint.read_text() if checkpoint.exists() else ""):
        assert time.monotonic() < deadline, "the high watermark was never checkpointed"
        time.sleep(0.05)
    proc.kill()
    segment = proc.data_dir / "flip-0" / SEGMENT
    position, base, size = batch_positions(segment)[3]  # offsets 30..39
    data = bytearray(segment.read_bytes())
    data[position + size - 3] ^= 0xFF  # inside the records: only the CRC can tell
    segment.write_bytes(bytes(data))
    proc.start()
    lines = recovery_lines(proc)
    cut = [line for line in lines if "cut " in line]
    assert len(cut) == 1 and f"at byte {position}: CRC mismatch" in cut[0], lines
    assert f"removed {len(data) - position} bytes holding offsets from {base} on" in cut[0]
    lost = [line for line in proc.log_text().splitlines() if "acknowledged records were lost" in line]
    assert len(lost) == 1 and "ended the log at offset 30" in lost[0] and "high watermark 60" in lost[0], lost
    assert re.search(r"\b30 acknowledged records were lost", lost[0])
    assert consume(proc, "flip", 30) == values[:30]
