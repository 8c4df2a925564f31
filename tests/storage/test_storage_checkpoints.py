from __future__ import annotations

import os
import re

import pytest

from odradek.storage.checkpoint import (
    CheckpointError,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from odradek.storage.leader_epoch_cache import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig

# ---- offset checkpoints ------------------------------------------------------------------


def test_offset_checkpoint_round_trip_and_kafka_text(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    assert read_offset_checkpoint(path) == {}
    offsets = {("orders", 0): 12, ("orders", 1): 0, ("my-topic.v2", 10): 1 << 40}
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[:2] == ["0", "3"]
    assert "orders 0 12" in lines and "my-topic.v2 10 1099511627776" in lines
    assert not os.path.exists(path + ".tmp")


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt zero 1\n", "0\n1\nt 0\n"],
)
def test_malformed_offset_checkpoint(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(str(path))


def test_meta_properties_round_trip(tmp_path):
    assert read_meta_properties(str(tmp_path)) is None
    write_meta_properties(str(tmp_path), 3, "MkU3OEVBNTcwNTJENDM2Qk")
    props = read_meta_properties(str(tmp_path))
    assert props == {"version": "1", "node.id": "3", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"}
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#") and "node.id=3\n" in text


def test_malformed_meta_properties_is_a_checkpoint_error(tmp_path):
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=\\uzz12\n")
    with pytest.raises(CheckpointError, match=r"meta.properties:2: malformed"):
        read_meta_properties(str(tmp_path))


# ---- leader epoch cache ---------------------------------------------------------------------


def test_leader_epoch_cache_assign_and_file_format(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.latest_epoch is None
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing to do
    assert cache.assign(2, 10)
    assert cache.assign(4, 20)
    assert cache.entries() == [(0, 0), (2, 10), (4, 20)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n4 20\n"
    reopened = LeaderEpochFileCache(str(tmp_path))
    assert reopened.entries() == [(0, 0), (2, 10), (4, 20)]
    # A lower epoch or lower start offset truncates the non-monotonic tail (Kafka).
    reopened.assign(3, 15)
    assert reopened.entries() == [(0, 0), (2, 10), (3, 15)]
    reopened.assign(5, 12)
    assert reopened.entries() == [(0, 0), (2, 10), (5, 12)]
    assert reopened.epoch_for_offset(11) == 2 and reopened.epoch_for_offset(100) == 5


def test_end_offset_for_epoch_semantics(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.end_offset_for(0, 100) == (-1, -1)  # empty cache
    for epoch, offset in ((1, 0), (3, 10), (6, 25)):
        cache.assign(epoch, offset)
    leo = 40
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # undefined epoch
    assert cache.end_offset_for(6, leo) == (6, 40)  # latest epoch → LEO
    assert cache.end_offset_for(3, leo) == (3, 25)  # end = start of the next epoch
    assert cache.end_offset_for(4, leo) == (3, 25)  # unknown epoch → largest below it
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(0, leo) == (0, 0)  # below every epoch → first start offset
    assert cache.end_offset_for(9, leo) == (-1, -1)  # above the latest


def test_leader_epoch_truncation(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, offset in ((1, 0), (3, 10), (6, 25)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(30)
    assert cache.entries() == [(1, 0), (3, 10), (6, 25)]
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.assign(6, 25)
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12), (6, 25)]
    cache.truncate_from_start(25)
    assert cache.entries() == [(6, 25)]
    assert LeaderEpochFileCache(str(tmp_path)).entries() == [(6, 25)]
    cache.clear()
    assert LeaderEpochFileCache(str(tmp_path)).entries() == []


def test_corrupt_leader_epoch_file_is_treated_as_empty(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("garbage")
    assert LeaderEpochFileCache(str(tmp_path)).entries() == []


# ---- log config ---------------------------------------------------------------------------------


def test_log_config_defaults_match_kafka():
    cfg = LogConfig()
    assert cfg.segment_bytes == 1 << 30
    assert cfg.segment_ms == 604800000
    assert cfg.segment_index_bytes == 10485760
    assert cfg.index_interval_bytes == 4096
    assert cfg.max_message_bytes == 1048588
    assert cfg.flush_messages == cfg.flush_ms == (1 << 63) - 1
    assert cfg.cleanup_policy == ("delete",)
    assert cfg.compression_type == "producer" and cfg.compression_codec is None
    assert cfg.file_delete_delay_ms == 60000
    assert cfg.to_dict()["unclean.leader.election.enable"] == "false"


def test_log_config_from_dict_parses_and_validates():
    cfg = LogConfig.from_dict(
        {
            "segment.bytes": "1024",
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
            "retention.ms": -1,
        }
    )
    assert cfg.segment_bytes == 1024 and cfg.compact and cfg.delete and cfg.preallocate
    assert cfg.timestamp_type == 1 and cfg.compression_codec == 4 and cfg.retention_ms == -1
    assert LogConfig.from_dict({"retention.ms": "5"}, base=cfg).segment_bytes == 1024
    for key, value, words in (
        ("segment.bytes", "ten", "segment.bytes: expected an integer >= 14, got 'ten'"),
        ("segment.bytes", "10", "segment.bytes: expected an integer >= 14, got '10'"),
        ("segment.bytes", str(1 << 40), "segment.bytes: expected an integer between"),
        ("cleanup.policy", "shred", "cleanup.policy: expected a comma-separated list of compact, delete"),
        ("compression.type", "brotli", "compression.type: expected one of uncompressed, zstd"),
        ("min.cleanable.dirty.ratio", "2", "min.cleanable.dirty.ratio: expected a number between 0 and 1"),
        ("preallocate", "yes", "preallocate: expected true or false, got 'yes'"),
        ("no.such.key", "1", "no.such.key: unknown log config"),
        ("message.format.version", "3.0", "message.format.version: unknown log config"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            LogConfig.from_dict({key: value})
