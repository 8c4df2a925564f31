"""kill -9 of a process mid-append: every append that returned is still there after recovery."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from storage_batches import parse

from odradek.storage import Log, LogConfig, LogManager

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {here!r})
    from storage_batches import kbatch
    from odradek.storage import LogConfig, LogManager
    cfg = LogConfig.from_dict({{"segment.bytes": "20000", "index.interval.bytes": "500"}})
    manager = LogManager({dir!r}, cfg)
    log = manager.get_or_create_log("crash", 0)
    seq = 0
    out = sys.stdout
    while True:
        info = log.append_as_leader(kbatch(2, value=b"c" * 100, pid=77, epoch=0, seq=seq), 0)
        seq += 2
        out.write(f"{{info.last_offset}}\\n")
        out.flush()
    """
)


def test_kill_9_keeps_every_acknowledged_append(tmp_path):
    log_dir = str(tmp_path / "logs")
    script = CHILD.format(root=ROOT, here=os.path.dirname(__file__), dir=log_dir)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    last_acked = -1
    deadline = time.monotonic() + 20
    try:
        while last_acked < 3000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            last_acked = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert last_acked >= 3000, "child did not append enough"

    manager = LogManager(
        log_dir, LogConfig.from_dict({"segment.bytes": "20000", "index.interval.bytes": "500"})
    )
    assert manager.had_clean_shutdown[os.path.abspath(log_dir)] is False
    log = manager.get_log("crash", 0)
    assert log.log_end_offset >= last_acked + 1
    assert len(log.segments) > 5
    offset = 0
    expected = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records.read()
        for batch in parse(data):
            assert batch.validate_crc()
            assert batch.base_offset == expected
            expected = batch.next_offset
        offset = expected
    assert expected == log.log_end_offset
    # Producer state was rebuilt: the next sequence continues where the log ends.
    from storage_batches import kbatch

    log.append_as_leader(kbatch(2, pid=77, epoch=0, seq=log.log_end_offset), 0)
    manager.shutdown()


def test_unclean_log_recovers_after_process_crash_between_batches(tmp_path):
    """A torn write from a dying process (half a batch on disk) is cut on the next open."""
    log = Log(str(tmp_path / "t-0"), LogConfig())
    from storage_batches import kbatch

    for _ in range(5):
        log.append_as_leader(kbatch(1), 0)
    half = kbatch(1)[:40]
    os.write(log.active_segment.log.fd, half)
    log2 = Log(log.dir, LogConfig(), had_clean_shutdown=False)
    assert log2.log_end_offset == 5
    assert log2.active_segment.size == log.active_segment.size
