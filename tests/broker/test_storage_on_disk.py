"""The on-disk layout is Kafka's, segments roll and reads work at every segment and index
boundary, and an unclean shutdown with a torn tail or lost indexes recovers.

Files are read here with kafka-python's record-batch reader and plain ``struct``, never with
Odradek's storage code, so the format is checked against an independent reading.
"""

from __future__ import annotations

import os
import re
import struct

import pytest
from broker_e2e import (
    RawClient,
    admin,
    consume,
    consumer,
    create_topic,
    decode_batches,
    fetch_records,
    produce_and_flush,
    producer,
)
from confluent_kafka import TopicPartition
from support import wait_until

SEGMENT_NAME = re.compile(r"^\d{20}$")


def segments(partition_dir) -> list[int]:
    """Base offsets of the partition's segments, from the .log file names."""
    names = sorted(p.stem for p in partition_dir.glob("*.log"))
    assert all(SEGMENT_NAME.match(n) for n in names), names
    return [int(n) for n in names]


def log_batches(path) -> list[tuple[int, object]]:
    """(position, batch) for every batch in a .log file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (batch,) = decode_batches(data[pos : pos + 12 + length])
        out.append((pos, batch))
        pos += 12 + length
    assert pos == len(data), f"{path} has {len(data) - pos} bytes after its last whole batch"
    return out


def index_entries(path, entry_size: int, fmt: str) -> list[tuple]:
    """Entries of an .index/.timeindex; an active segment's file may be preallocated with zeros."""
    data = path.read_bytes()
    assert len(data) % entry_size == 0
    entries = [struct.unpack_from(fmt, data, i) for i in range(0, len(data), entry_size)]
    while len(entries) > 1 and entries[-1] == (0, 0):
        entries.pop()
    if entries == [(0, 0)] and fmt == ">qi":
        entries = []
    return entries


def checkpoint(path) -> dict[tuple[str, int], int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0", f"{path.name}: version {lines[0]}"
    assert int(lines[1]) == len(lines) - 2, f"{path.name}: count {lines[1]} vs {len(lines) - 2} entries"
    out = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


def produce_in_small_batches(broker, topic: str, n: int, size: int = 100, base_ts: int = 1_650_000_000_000):
    prod = producer(broker, linger_ms=0, batch_num_messages=3)
    items = [
        {"value": f"{i:06d}".encode() + b"." * (size - 6), "timestamp": base_ts + i, "partition": 0}
        for i in range(n)
    ]
    return produce_and_flush(prod, topic, items)


def expected_value(i: int, size: int = 100) -> bytes:
    return f"{i:06d}".encode() + b"." * (size - 6)


def assert_every_offset_readable(broker, topic: str, n: int) -> None:
    """A Fetch at each offset returns that record (the batch holding it comes first)."""
    with RawClient(broker) as raw:
        for offset in range(n):
            error, records = fetch_records(raw, topic, 0, offset, max_bytes=600)
            assert error == 0
            wanted = [r for r in records if r[0] >= offset]
            assert records and records[0][0] <= offset, (offset, records[:1])
            assert wanted[0][0] == offset and wanted[0][2] == expected_value(offset), (offset, wanted[:1])


def assert_indexes_point_at_batches(partition_dir) -> None:
    for base in segments(partition_dir):
        stem = partition_dir / f"{base:020d}"
        batches = log_batches(stem.with_suffix(".log"))
        by_position = {pos: b for pos, b in batches}
        offsets = index_entries(stem.with_suffix(".index"), 8, ">ii")
        assert [o for o, _ in offsets] == sorted({o for o, _ in offsets}), "offset index not increasing"
        for relative, position in offsets:
            batch = by_position.get(position)
            assert batch is not None, f"{stem}.index points at byte {position}, not at a batch"
            assert batch.base_offset <= base + relative <= batch.last_offset
        times = index_entries(stem.with_suffix(".timeindex"), 12, ">qi")
        assert [t for t, _ in times] == sorted(t for t, _ in times), "time index not increasing"
        for ts, relative in times:
            assert any(b.base_offset <= base + relative <= b.last_offset for _, b in batches)
            assert ts <= max(b.max_timestamp for _, b in batches)


def test_partition_directories_and_files_have_kafkas_names(broker, topic_name):
    create_topic(broker, topic_name, 3)
    produce_and_flush(producer(broker), topic_name, [{"value": b"x", "partition": p} for p in range(3)])

    props = dict(
        line.split("=", 1)
        for line in (broker.data_dir / "meta.properties").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert props["node.id"] == "0"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", props["cluster.id"]), props
    assert props["version"] in ("0", "1")
    for p in range(3):
        d = broker.data_dir / f"{topic_name}-{p}"
        assert d.is_dir()
        for suffix in (".log", ".index", ".timeindex"):
            assert (d / f"{0:020d}{suffix}").is_file()
        assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_log_files_are_valid_kafka_record_batches(broker, topic_name):
    create_topic(broker, topic_name, 1)
    headers = [("h", b"v")]
    prod = producer(broker, linger_ms=0)
    items = [
        {
            "key": str(i).encode(),
            "value": f"v{i}".encode(),
            "headers": headers,
            "timestamp": 1_000 + i,
            "partition": 0,
        }
        for i in range(100)
    ]
    produce_and_flush(prod, topic_name, items)

    batches = log_batches(broker.data_dir / f"{topic_name}-0" / f"{0:020d}.log")
    next_offset = 0
    records = []
    for _, batch in batches:
        assert batch.magic == 2
        assert batch.validate_crc()
        assert batch.base_offset == next_offset
        assert batch.leader_epoch == 0
        next_offset = batch.last_offset + 1
        records.extend(batch)
    assert next_offset == 100
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in records] == [
        (i, str(i).encode(), f"v{i}".encode(), 1_000 + i, headers) for i in range(100)
    ]


def test_segments_roll_and_every_offset_is_readable_across_boundaries(broker, topic_name):
    n = 400
    create_topic(broker, topic_name, 1, {"segment.bytes": "4096", "index.interval.bytes": "500"})
    produce_in_small_batches(broker, topic_name, n)
    pdir = broker.data_dir / f"{topic_name}-0"

    bases = segments(pdir)
    assert len(bases) >= 8, bases
    # Each file is named after the offset of its first batch; together they cover 0..n-1.
    next_offset = 0
    for base in bases:
        batches = log_batches(pdir / f"{base:020d}.log")
        assert batches[0][1].base_offset == base == next_offset
        next_offset = batches[-1][1].last_offset + 1
        size = (pdir / f"{base:020d}.log").stat().st_size
        assert size <= 4096 or len(batches) == 1, (base, size)
    assert next_offset == n

    assert_indexes_point_at_batches(pdir)
    assert_every_offset_readable(broker, topic_name, n)
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == [expected_value(i) for i in range(n)]


def test_segments_roll_when_the_index_is_full(broker, topic_name):
    n = 120
    create_topic(broker, topic_name, 1, {"segment.index.bytes": "96", "index.interval.bytes": "1"})
    produce_in_small_batches(broker, topic_name, n)
    pdir = broker.data_dir / f"{topic_name}-0"

    bases = segments(pdir)
    assert len(bases) >= 3, bases
    for base in bases[:-1]:
        assert (pdir / f"{base:020d}.index").stat().st_size <= 96
        assert (pdir / f"{base:020d}.timeindex").stat().st_size <= 96
    assert_indexes_point_at_batches(pdir)
    assert_every_offset_readable(broker, topic_name, n)


def test_time_index_lookups_across_segments(broker, topic_name):
    n, base_ts = 300, 1_650_000_000_000
    create_topic(broker, topic_name, 1, {"segment.bytes": "4096", "index.interval.bytes": "300"})
    produce_in_small_batches(broker, topic_name, n, base_ts=base_ts)
    bases = segments(broker.data_dir / f"{topic_name}-0")
    assert len(bases) >= 5
    probes = sorted({0, 1, n - 1, *bases, *(b - 1 for b in bases if b), *(b + 1 for b in bases)})
    cons = consumer(broker)
    try:
        # One query per probe: librdkafka merges duplicates of a partition within one call.
        found = [
            cons.offsets_for_times([TopicPartition(topic_name, 0, base_ts + i)], timeout=10)[0]
            for i in probes
        ]
        assert [tp.offset for tp in found] == probes
        (past,) = cons.offsets_for_times([TopicPartition(topic_name, 0, base_ts + n)], timeout=10)
        assert past.offset == -1
    finally:
        cons.close()


def test_clean_shutdown_writes_checkpoints_marker_and_snapshots(own_broker, topic_name):
    b = own_broker()
    create_topic(b, topic_name, 2)
    idem = producer(b, enable_idempotence=True)
    produce_and_flush(idem, topic_name, [{"value": str(i).encode(), "partition": i % 2} for i in range(30)])
    client = admin(b)
    tp = TopicPartition(topic_name, 1, 10)
    client.delete_records([tp])[tp].result(timeout=15)

    assert b.stop() == 0
    d = b.data_dir
    assert (d / ".kafka_cleanshutdown").exists()
    recovery = checkpoint(d / "recovery-point-offset-checkpoint")
    assert recovery[(topic_name, 0)] == 15 and recovery[(topic_name, 1)] == 15
    replication = checkpoint(d / "replication-offset-checkpoint")
    assert replication[(topic_name, 0)] == 15 and replication[(topic_name, 1)] == 15
    starts = checkpoint(d / "log-start-offset-checkpoint")
    assert starts[(topic_name, 1)] == 10
    assert starts.get((topic_name, 0), 0) == 0
    for p in (0, 1):
        pdir = d / f"{topic_name}-{p}"
        # The idempotent producer's state is snapshotted at the log end.
        assert (pdir / f"{15:020d}.snapshot").is_file(), sorted(os.listdir(pdir))
        # Indexes are trimmed to their entries on close.
        assert (pdir / f"{0:020d}.index").stat().st_size % 8 == 0
        assert (pdir / f"{0:020d}.index").stat().st_size < 1024
    # DeleteRecords moves the first epoch's start offset up to the new log start, as Kafka does.
    assert (d / f"{topic_name}-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (d / f"{topic_name}-1" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 10\n"

    b.start()
    wait_until(
        lambda: not (d / ".kafka_cleanshutdown").exists(), message="the clean-shutdown marker to be removed"
    )
    got = consume(b, topic_name, [0, 1], auto_offset_reset="earliest")
    assert [r.offset for r in got[0]] == list(range(15))
    assert [r.offset for r in got[1]] == list(range(10, 15))


def last_segment_log(partition_dir):
    return partition_dir / f"{segments(partition_dir)[-1]:020d}.log"


@pytest.mark.parametrize("damage", ["cut-mid-header", "cut-mid-records", "garbage-tail"])
def test_recovery_from_a_torn_segment_tail(own_broker, topic_name, damage):
    n = 60
    b = own_broker()
    create_topic(b, topic_name, 1, {"segment.bytes": "3000"})
    produce_in_small_batches(b, topic_name, n)
    b.kill()

    pdir = b.data_dir / f"{topic_name}-0"
    path = last_segment_log(pdir)
    batches = log_batches(path)
    last_pos, last_batch = batches[-1]
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if damage == "cut-mid-header":
            f.truncate(last_pos + 10)
            survivors = last_batch.base_offset
        elif damage == "cut-mid-records":
            f.truncate(size - 3)
            survivors = last_batch.base_offset
        else:
            f.seek(size)
            f.write(os.urandom(200))
            survivors = n

    b.start()
    cons = consumer(b)
    try:
        assert cons.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, survivors)
    finally:
        cons.close()
    got = consume(b, topic_name, [0])[0]
    assert [r.value for r in got] == [expected_value(i) for i in range(survivors)]
    # The torn bytes are gone from the file, and writing continues at the right offset.
    assert path.stat().st_size == (last_pos if survivors < n else size)
    deliveries = produce_and_flush(
        producer(b), topic_name, [{"value": expected_value(survivors), "partition": 0}]
    )
    assert deliveries.acked[0].offset == survivors
    assert_every_offset_readable(b, topic_name, survivors + 1)
    assert_indexes_point_at_batches(pdir)


def test_unclean_restart_rebuilds_lost_indexes(own_broker, topic_name):
    n = 150
    b = own_broker()
    create_topic(b, topic_name, 1, {"segment.bytes": "4096", "index.interval.bytes": "200"})
    produce_in_small_batches(b, topic_name, n)
    b.kill()
    pdir = b.data_dir / f"{topic_name}-0"
    for index in [*pdir.glob("*.index"), *pdir.glob("*.timeindex")]:
        index.unlink()

    b.start()
    assert_every_offset_readable(b, topic_name, n)
    for base in segments(pdir):
        assert (pdir / f"{base:020d}.index").is_file()
        assert (pdir / f"{base:020d}.timeindex").is_file()
    assert_indexes_point_at_batches(pdir)
