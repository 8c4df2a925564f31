"""``odradek dump-log`` (kafka-dump-log): batch and record lines, control records, indexes checked
against the log (mismatches flagged), sanity checks, torn tails, producer snapshots."""

from __future__ import annotations

import os
import re
import struct

from click.testing import CliRunner

from odradek.cli.dump_log import dump_log
from odradek.cli.main import cli
from odradek.protocol.batch_builder import build_batch, now_ms
from odradek.protocol.control_records import COMMIT, build_control_batch
from odradek.protocol.records import NewRecord
from odradek.storage import Log, LogConfig


def run(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(dump_log, list(args))
    return result.exit_code, result.stdout, result.stderr


def make_log(tmp_path) -> Log:
    log = Log(
        str(tmp_path / "t-0"), LogConfig.from_dict({"segment.bytes": "10000", "index.interval.bytes": "200"})
    )
    ts = now_ms()
    log.append_as_leader(
        build_batch(
            [NewRecord(b"k1", b"hello", (("h", b"1"),), ts), NewRecord(None, b"world", (), ts + 1)]
        ),
        3,
    )
    log.append_as_leader(
        build_batch(
            [NewRecord(b"k%d" % i, b"v" * 50, (), ts + 2) for i in range(20)],
            compression=1,
            producer_id=9,
            producer_epoch=2,
            base_sequence=0,
        ),
        3,
    )
    for i in range(30):
        log.append_as_leader(build_batch([NewRecord(b"x", b"y" * 100, (), ts + 3 + i)]), 3)
    log.append_as_leader(
        build_control_batch(COMMIT, producer_id=9, producer_epoch=2, coordinator_epoch=5),
        3,
        origin="coordinator",
    )
    log.roll()
    return log


def seg0(log: Log, ext: str) -> str:
    return os.path.join(log.dir, f"{0:020d}{ext}")


def test_batches_of_a_log_segment(tmp_path):
    log = make_log(tmp_path)
    code, out, err = run("--files", seg0(log, ".log"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {seg0(log, '.log')}"
    assert lines[1] == "Log starting offset: 0"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert not any(line.startswith("|") for line in lines)
    first = batches[0]
    assert re.match(
        r"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        r"producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
        r"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: \d+ size: \d+ magic: 2 "
        r"compresscodec: none crc: \d+ isvalid: true$",
        first,
    ), first
    second = batches[1]
    assert (
        "baseOffset: 2 lastOffset: 21 count: 20 baseSequence: 0 lastSequence: 19 producerId: 9 producerEpoch: 2"
        in second
    )
    assert "compresscodec: gzip" in second
    control = batches[-1]
    assert "isTransactional: true isControl: true" in control
    positions = [int(re.search(r"position: (\d+)", b).group(1)) for b in batches]
    sizes = [int(re.search(r"size: (\d+)", b).group(1)) for b in batches]
    assert positions == [sum(sizes[:i]) for i in range(len(sizes))]
    assert sum(sizes) == os.path.getsize(seg0(log, ".log"))


def test_records_with_print_data_log(tmp_path):
    log = make_log(tmp_path)
    code, out, _err = run("--print-data-log", "--files", seg0(log, ".log"))
    assert code == 0
    records = [line for line in out.splitlines() if line.startswith("|")]
    assert re.match(
        r"\| offset: 0 CreateTime: \d+ keySize: 2 valueSize: 5 sequence: -1 headerKeys: \[h\] key: k1 payload: hello$",
        records[0],
    ), records[0]
    assert re.match(r"\| offset: 1 CreateTime: \d+ keySize: -1 valueSize: 5 .* payload: world$", records[1])
    assert "offset: 2 " in records[2] and "sequence: 0 " in records[2] and "key: k0" in records[2]
    assert "sequence: 19 " in records[21]
    assert records[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    # --deep-iteration alone: record lines without keys and payloads.
    _, out2, _ = run("--deep-iteration", "--files", seg0(log, ".log"))
    deep = [line for line in out2.splitlines() if line.startswith("|")]
    assert len(deep) == len(records) and not any("payload:" in line for line in deep)


def test_index_and_time_index_match_the_log(tmp_path):
    log = make_log(tmp_path)
    code, out, err = run("--files", f"{seg0(log, '.index')},{seg0(log, '.timeindex')}")
    assert code == 0, err
    entries = [line for line in out.splitlines() if line.startswith("offset:")]
    assert len(entries) >= 5
    assert all(re.match(r"offset: \d+ position: \d+$", e) for e in entries)
    times = [line for line in out.splitlines() if line.startswith("timestamp:")]
    assert times and all(re.match(r"timestamp: \d+ offset: \d+$", t) for t in times)
    assert "Mismatches" not in err and "mismatch" not in err
    code, out, _ = run("--index-sanity-check", "--files", seg0(log, ".index"), seg0(log, ".timeindex"))
    assert code == 0
    assert out.count("passed sanity check.") == 2 and "offset:" not in out


def test_index_mismatches_are_flagged(tmp_path):
    log = make_log(tmp_path)
    path = seg0(log, ".index")
    with open(path, "r+b") as f:
        rel, pos = struct.unpack(">ii", f.read(8))
        f.seek(0)
        f.write(struct.pack(">ii", rel + 1, pos))  # points at a batch whose last offset differs
    code, _out, err = run("--verify-index-only", "--files", path)
    assert code == 1
    assert f"Mismatches in :{os.path.abspath(path)}" in err
    assert f"  Index offset: {rel + 1}, log offset: {rel}" in err
    tpath = seg0(log, ".timeindex")
    with open(tpath, "r+b") as f:
        ts, trel = struct.unpack(">qi", f.read(12))
        f.seek(0)
        f.write(struct.pack(">qi", ts + 12345, trel))
    code, _out, err = run("--files", tpath)
    assert code == 1
    assert f"Found timestamp mismatch in :{os.path.abspath(tpath)}" in err
    assert f"  Index timestamp: {ts + 12345}, log timestamp: {ts}" in err


def test_sanity_check_failure_and_torn_tail(tmp_path):
    log = make_log(tmp_path)
    path = seg0(log, ".index")
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")
    code, out, _ = run("--index-sanity-check", "--files", path)
    assert code == 1 and "failed sanity check" in out
    log_path = seg0(log, ".log")
    with open(log_path, "ab") as f:
        f.write(b"\x00" * 10 + b"\xff" * 7)
    code, out, _ = run("--files", log_path)
    assert code == 0
    assert out.splitlines()[-1] == f"Found 17 invalid bytes at the end of {os.path.basename(log_path)}"


def test_gaps_in_compacted_logs_and_renamed_files(tmp_path):
    log = make_log(tmp_path)
    deleted = seg0(log, ".log") + ".deleted"
    os.rename(seg0(log, ".log"), deleted)
    code, out, err = run("--deep-iteration", "--files", deleted)
    assert code == 0 and "baseOffset: 0 " in out
    assert "Non-consecutive offsets" not in err
    # A gap (as compaction leaves) is reported under deep iteration.
    data = open(deleted, "rb").read()
    first_size = struct.unpack_from(">i", data, 8)[0] + 12
    rest = bytearray(data[first_size:])
    os.unlink(deleted)
    with open(os.path.join(log.dir, "gap.log"), "wb") as f:
        f.write(data[:first_size] + bytes(rest[:0]))
        second_size = struct.unpack_from(">i", rest, 8)[0] + 12
        f.write(bytes(rest[second_size:]))
    code, out, err = run("--deep-iteration", "--files", os.path.join(log.dir, "gap.log"))
    assert "Non-consecutive offsets in" in err and "  1 is followed by 22" in err


def test_producer_snapshot_and_registration(tmp_path):
    log = make_log(tmp_path)
    snaps = [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    assert snaps
    code, out, _ = run("--files", os.path.join(log.dir, snaps[-1]))
    assert code == 0
    assert "producerId: 9 producerEpoch: 2" in out
    result = CliRunner().invoke(cli, ["dump-log", "--files", seg0(log, ".log")])
    assert result.exit_code == 0 and "baseOffset: 0" in result.stdout
