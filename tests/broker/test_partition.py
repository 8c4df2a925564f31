"""Partition, the owner of a replica's log, on a real log in a temporary directory (no broker):
the high watermark over the ISR, and the leader's offset lookups and DeleteRecords."""

from __future__ import annotations

import pytest

from odradek.broker.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Partition
from odradek.cluster.metadata_image import PartitionState
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.storage import Log, LogConfig


def make_partition(tmp_path, isr=(0,), epoch=0) -> Partition:
    config = LogConfig()
    log = Log(str(tmp_path / "t-0"), config)
    state = PartitionState(leader=0, leader_epoch=epoch, replicas=list(isr), isr=list(isr))
    partition = Partition("t", 0, log, state, 0, config)
    partition.become_leader(state)
    return partition


def append(partition: Partition, *timestamps: int) -> None:
    for ts in timestamps:
        batch = build_batch([(b"k", b"v", (), ts)], base_timestamp=ts)
        partition.append_as_leader(batch, 1, now_ms=ts)


def test_high_watermark_is_the_smallest_log_end_offset_in_the_isr(tmp_path):
    p = make_partition(tmp_path, isr=(0, 1, 2))
    append(p, 1, 2, 3)
    assert p.log_end_offset == 3 and p.high_watermark == 0  # no follower has fetched yet
    assert not p.update_follower_fetch_state(1, 2)
    assert p.high_watermark == 0  # replica 2 still holds it
    assert p.update_follower_fetch_state(2, 3)
    assert p.high_watermark == 2
    p.update_follower_fetch_state(1, 3)
    assert p.high_watermark == 3
    with pytest.raises(errors.NotLeaderOrFollowerError):
        p.update_follower_fetch_state(9, 0)  # not a replica: refused, as Kafka does
    assert p.high_watermark == 3


def test_single_replica_high_watermark_follows_the_log_end(tmp_path):
    p = make_partition(tmp_path)
    append(p, 1, 2)
    assert p.high_watermark == p.log_end_offset == 2


def test_offsets_for_timestamps_stop_at_the_high_watermark(tmp_path):
    p = make_partition(tmp_path, isr=(0, 1))
    append(p, 100, 300, 200)
    p.update_follower_fetch_state(1, 3)
    assert p.fetch_offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 0)
    assert p.fetch_offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 3)
    assert p.fetch_offset_for_timestamp(MAX_TIMESTAMP) == (300, 1)
    assert p.fetch_offset_for_timestamp(150) == (300, 1)
    assert p.fetch_offset_for_timestamp(301) == (-1, -1)
    append(p, 500)  # written, not yet replicated: consumers cannot read it, so it is not answered
    assert p.fetch_offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 3)
    assert p.fetch_offset_for_timestamp(400) == (-1, -1)


def test_last_offset_for_leader_epoch(tmp_path):
    p = make_partition(tmp_path, epoch=0)
    append(p, 1, 2)
    p.become_leader(PartitionState(leader=0, leader_epoch=3, replicas=[0], isr=[0]))
    append(p, 3)
    assert p.last_offset_for_leader_epoch(3) == (3, 3)  # the current epoch: the log end offset
    assert p.last_offset_for_leader_epoch(0) == (0, 2)  # where the next epoch began
    assert p.last_offset_for_leader_epoch(1) == (0, 2)  # unknown: the largest epoch below it
    assert p.last_offset_for_leader_epoch(-1) == (-1, -1)


def test_delete_records_on_leader(tmp_path):
    p = make_partition(tmp_path)
    append(p, 1, 2, 3, 4, 5)
    assert p.delete_records_on_leader(3) == 3 == p.log_start_offset
    assert p.delete_records_on_leader(1) == 3  # never moves back
    with pytest.raises(errors.OffsetOutOfRangeError):
        p.delete_records_on_leader(6)
    with pytest.raises(errors.OffsetOutOfRangeError):
        p.delete_records_on_leader(-2)
    assert p.delete_records_on_leader(-1) == 5  # -1: up to the high watermark
    with pytest.raises(errors.OffsetOutOfRangeError):
        p.read(4, 1024)
