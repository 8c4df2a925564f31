from __future__ import annotations

import os
import time

from storage_batches import kbatch

from odradek.storage import LogConfig, LogManager
from odradek.storage.checkpoint import read_offset_checkpoint


def _cfg(**kv) -> LogConfig:
    return LogConfig.from_dict({"segment.bytes": "2000", **kv})


def test_clean_shutdown_and_restart(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d, _cfg())
    for p in range(3):
        log = m.get_or_create_log("orders", p)
        for _ in range(10 + p):
            log.append_as_leader(kbatch(2), 1)
        log.high_watermark = log.log_end_offset - 2
    m.shutdown()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) == {
        ("orders", 0): 20,
        ("orders", 1): 22,
        ("orders", 2): 24,
    }
    assert read_offset_checkpoint(os.path.join(d, "replication-offset-checkpoint"))[("orders", 1)] == 20
    assert read_offset_checkpoint(os.path.join(d, "log-start-offset-checkpoint"))[("orders", 2)] == 0
    # Indexes were trimmed on close.
    part = os.path.join(d, "orders-0")
    for name in os.listdir(part):
        if name.endswith(".index"):
            assert os.path.getsize(os.path.join(part, name)) < 1024

    m2 = LogManager(d, _cfg())
    assert m2.had_clean_shutdown[os.path.abspath(d)]
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))  # removed once loaded
    assert sorted(m2.partitions()) == [("orders", 0), ("orders", 1), ("orders", 2)]
    log = m2.get_log("orders", 1)
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (22, 20, 22)
    assert log.append_as_leader(kbatch(1), 1).first_offset == 22
    m2.shutdown()


def test_unclean_restart_recovers_from_the_recovery_point(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d, _cfg())
    log = m.get_or_create_log("events", 0)
    for _ in range(30):
        log.append_as_leader(kbatch(2), 0)
    log.flush()
    m.checkpoint_all()
    for _ in range(5):
        log.append_as_leader(kbatch(2), 0)
    seg_path = log.active_segment.log.path
    # Crash: no shutdown; the tail of the active segment is torn.
    with open(seg_path, "r+b") as f:
        f.truncate(os.path.getsize(seg_path) - 7)
    m2 = LogManager(d, _cfg())
    assert m2.had_clean_shutdown[os.path.abspath(d)] is False
    log2 = m2.get_log("events", 0)
    assert log2.log_end_offset == 68
    assert log2.recovery_point == 60
    m2.shutdown()


def test_delete_log_renames_then_removes(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d, _cfg(**{"file.delete.delay.ms": "1000"}))
    log = m.get_or_create_log("gone", 0)
    log.append_as_leader(kbatch(1), 0)
    slice_ = log.read(0, 1000).records
    now = int(time.time() * 1000)
    assert m.delete_log("gone", 0, now_ms=now)
    assert m.get_log("gone", 0) is None
    (renamed,) = os.listdir(d)
    assert renamed.startswith("gone-0.") and renamed.endswith("-delete")
    assert len(slice_.read()) == slice_.size  # an in-flight read still works
    m.cleanup(now + 500)
    assert os.listdir(d) == [renamed]
    m.cleanup(now + 1000)
    assert os.listdir(d) == []
    assert not m.delete_log("gone", 0)
    # A leftover -delete dir from a crash is removed at startup.
    os.makedirs(os.path.join(d, "old-3.0123456789abcdef0123456789abcdef-delete"))
    m.shutdown()
    m2 = LogManager(d, _cfg())
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    assert len(m2) == 0
    m2.shutdown()


def test_multiple_log_dirs_and_topic_configs(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    special = LogConfig.from_dict({"segment.bytes": "500"})
    m = LogManager(dirs, _cfg(), config_for=lambda topic: special if topic == "small" else None)
    for p in range(4):
        m.get_or_create_log("t", p)
    assert sorted(len(os.listdir(d)) for d in dirs) == [2, 2]
    assert m.get_or_create_log("small", 0).config.segment_bytes == 500
    m.shutdown()
    m2 = LogManager(",".join(dirs), _cfg(), config_for=lambda topic: special if topic == "small" else None)
    assert len(m2) == 5
    assert m2.get_log("small", 0).config.segment_bytes == 500
    m2.shutdown()


def test_flush_due_and_checkpoints(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d, _cfg(**{"flush.ms": "100"}))
    log = m.get_or_create_log("f", 0)
    log.append_as_leader(kbatch(3), 0)
    assert m.flush_due(int(time.time() * 1000) + 1000) == 1
    m.checkpoint_all({("f", 0): 2})
    assert read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) == {("f", 0): 3}
    assert read_offset_checkpoint(os.path.join(d, "replication-offset-checkpoint")) == {("f", 0): 2}
    m.shutdown()


def test_meta_properties(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d)
    m.ensure_meta_properties(1, "abc")
    m.ensure_meta_properties(1, "abc")
    import pytest

    with pytest.raises(RuntimeError, match="cluster.id"):
        m.ensure_meta_properties(1, "other")
    m.shutdown()


def test_startup_is_fast(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager(d, _cfg())
    for p in range(20):
        log = m.get_or_create_log("many", p)
        for _ in range(20):
            log.append_as_leader(kbatch(2), 0)
    m.shutdown()
    m2 = LogManager(d, _cfg())
    assert len(m2) == 20
    m2.shutdown()
