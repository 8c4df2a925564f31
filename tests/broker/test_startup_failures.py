"""A start that cannot succeed says why in one line, exits non-zero and touches no data.

Each case runs ``python -m odradek server`` for real. Guards issue 12's items 12 and 13: a
second broker on the same log dirs lost acknowledged data; a port in use printed ~40 lines
of traceback after a misleading "stopped cleanly".
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.process import BrokerProcess, free_port


def start_server(log_dirs, port: int, timeout: float = 60) -> subprocess.CompletedProcess:
    """``odradek server`` in the foreground; it is expected to exit by itself."""
    command = BrokerProcess(log_dirs, port=port).command()
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def one_line(r: subprocess.CompletedProcess) -> str:
    lines = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0] and "stopped cleanly" not in lines[0]
    return lines[0]


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: (size, mtime in ns, sha256)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: err and failed.append(err))
    assert p.flush(30) == 0 and not failed, failed


def consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "startup-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(100):
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= expected:
                break
    finally:
        c.close()
    return got


def test_a_second_broker_on_the_same_log_dirs_exits_with_one_line_and_the_first_keeps_its_data(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as first:
        values = [f"v{i}".encode() for i in range(200)]
        produce(first.bootstrap_servers, "shared", values)
        r = start_server(data, free_port())
        assert r.returncode == 1
        line = one_line(r)
        assert str(data) in line and "lock" in line and f"process {first.proc.pid}" in line, line
        produce(first.bootstrap_servers, "shared", [b"after"])
        assert consume_all(first.bootstrap_servers, "shared", 201) == values + [b"after"]


def test_port_in_use_is_one_line_exit_1_and_leaves_the_data_dir_untouched(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        produce(broker.bootstrap_servers, "kept", [b"a", b"b", b"c"])
    before = snapshot(data)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        r = start_server(data, port)
    assert r.returncode == 1
    line = one_line(r)
    assert f"port {port} is already in use" in line and "listeners" in line, line
    assert snapshot(data) == before
    with BrokerProcess(data) as broker:  # and it still starts cleanly afterwards
        assert consume_all(broker.bootstrap_servers, "kept", 3) == [b"a", b"b", b"c"]


def test_log_dirs_naming_a_file_is_one_line_and_exit_1(tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_bytes(b"precious")
    r = start_server(target, free_port())
    assert r.returncode == 1
    line = one_line(r)
    assert str(target) in line and "is a file, not a directory" in line, line
    assert target.read_bytes() == b"precious"


def test_a_read_only_log_dir_is_one_line_and_exit_1(small_disk):
    disk = small_disk("1m", read_only=True)
    r = start_server(disk, free_port())
    assert r.returncode == 1
    line = one_line(r)
    assert str(disk) in line and "read-only file system" in line, line
    r = start_server(disk / "missing", free_port())  # cannot even be created
    assert r.returncode == 1
    assert "cannot be created" in one_line(r)
