"""Loading a data dir holds no file descriptors; a partition opens its files on first use.

Guards issue 12's item 3: every segment's .log and every active segment's two indexes (two
descriptors each: the file and its mapping) were opened at load, so a data dir with 65,540
partitions needed ~330,000 descriptors and could not start (EMFILE).
"""

from __future__ import annotations

import gc
import os

from odradek.protocol.batch_builder import build_batch
from odradek.protocol.record_batch import iter_batches
from odradek.storage import LogConfig, LogManager

BATCH = build_batch([(b"k", b"v", [], 1_700_000_000_000)])


def open_fds() -> int:
    # Logs that earlier tests left unreferenced (log manager <-> log cycles) would close their
    # files whenever the collector runs: collect first, so the count is this test's alone.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def values(log) -> list[bytes]:
    data = log.read(0, 1 << 20).records.read()
    return [r.value for batch in iter_batches(data) for r in batch.records()]


def build(path, partitions: int, config: LogConfig) -> None:
    manager = LogManager(str(path), config)
    for p in range(partitions):
        manager.get_or_create_log("t", p, sync_dir=False).append_as_leader(BATCH, 0)
    manager.shutdown()


def test_loading_300_partitions_keeps_no_descriptor_open_and_first_use_opens_three(tmp_path):
    config = LogConfig.from_dict({"segment.bytes": "200"})  # a few segments each
    build(tmp_path, 300, config)
    before = open_fds()
    manager = LogManager(str(tmp_path), config)  # after a clean shutdown
    assert len(manager) == 300 and manager.had_clean_shutdown[str(tmp_path)]
    assert open_fds() == before
    manager = LogManager(str(tmp_path), config)  # the marker is gone: recovery runs
    assert len(manager) == 300 and not manager.had_clean_shutdown[str(tmp_path)]
    assert open_fds() == before
    log = manager.get_log("t", 7)
    assert values(log) == [b"v"]  # the segment opens on this read
    log.append_as_leader(BATCH, 0)  # active segment: .log, .index, .timeindex
    assert open_fds() - before <= 4
    assert log.log_end_offset == 2


def test_a_partition_never_written_has_no_segment_file_until_its_first_append(tmp_path):
    manager = LogManager(str(tmp_path), LogConfig())
    log = manager.get_or_create_log("empty", 0)
    assert os.listdir(log.dir) == []  # one mkdir: creating thousands of partitions stays cheap
    manager.shutdown()
    manager = LogManager(str(tmp_path), LogConfig())
    log = manager.get_log("empty", 0)
    assert log.log_end_offset == 0 and not [n for n in os.listdir(log.dir) if n.endswith(".log")]
    log.append_as_leader(BATCH, 0)
    assert sorted(n for n in os.listdir(log.dir) if not n.endswith(("checkpoint", ".snapshot"))) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert values(log) == [b"v"]
