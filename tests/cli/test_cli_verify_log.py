"""``odradek verify-log`` finds damage inside closed segments, which the broker serves as is.

Guards issue 12's item 9: corruption in the middle of a closed segment went unnoticed (the
broker re-validates only what a crash may have torn, as Kafka does); verify-log checks every
batch's CRC on demand. Real broker, real segment files, the command run as a user would.
"""

from __future__ import annotations

import struct

from cli_helpers import run_odradek
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.storage.verify import batch_positions
from odradek.testing.process import BrokerProcess


def test_verify_log_reports_a_flipped_byte_in_a_closed_segment(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = client.create_topics(
            [NewTopic("rolled", 1, 1, config={"segment.bytes": "2000"}), NewTopic("intact", 1, 1)]
        )
        for f in futures.values():
            f.result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(60):
            p.produce("rolled", f"record-{i:03d}".encode() * 4)
            p.produce("intact", b"fine")
            p.flush(30)
    segments = sorted((data / "rolled-0").glob("*.log"))
    assert len(segments) >= 3
    closed = segments[1]
    position, base, size = batch_positions(closed)[2]
    damaged = bytearray(closed.read_bytes())
    damaged[position + size - 5] ^= 0x01
    closed.write_bytes(bytes(damaged))

    r = run_odradek("verify-log", data)
    assert r.code == 1, r
    bad = [line for line in r.lines() if line.startswith("BAD")]
    assert bad == [f"BAD   {closed} at byte {position} (offset {base}): CRC mismatch"], r
    assert any(line.startswith("ok") and "intact-0" in line for line in r.lines()), r
    assert r.lines()[-1].endswith(": 1 problems"), r

    r = run_odradek("verify-log", "-q", data / "intact-0")
    assert r.code == 0 and r.lines() == [r.lines()[-1]] and r.lines()[-1].endswith("no problems"), r
    r = run_odradek("verify-log", segments[0])
    assert r.code == 0, r


def test_verify_log_reports_bytes_that_frame_no_batch(tmp_path):
    partition = tmp_path / "t-0"
    partition.mkdir()
    segment = partition / "00000000000000000000.log"
    segment.write_bytes(struct.pack(">qi", 0, 400) + b"\x00" * 30)
    r = run_odradek("verify-log", partition)
    assert r.code == 1, r
    assert f"BAD   {segment} at byte 0 (offset 0): 42 bytes at the end do not frame a complete batch" in r.out, r
