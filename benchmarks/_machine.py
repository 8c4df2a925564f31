"""Machine reference points, so the broker numbers can be read against what the box can do.

- ``loopback_mb_s``: one TCP stream over 127.0.0.1 between two processes (sender in a child
  process doing ``sendall`` of 1 MiB chunks, receiver doing ``recv_into`` a preallocated
  buffer): the most a single Kafka connection could carry here.
- ``disk_write_mb_s``: ``os.write`` of 1 MiB chunks into a file in the benchmark's work
  directory (the file system Odradek writes its log to), once into the page cache and once
  including a final ``fsync``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import time
from pathlib import Path

CHUNK = 1 << 20


def _sender(port: int, total: int) -> None:
    buf = os.urandom(CHUNK)
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        while sent < total:
            s.sendall(buf)
            sent += CHUNK


def loopback_mb_s(total_bytes: int) -> float:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        child = mp.get_context("spawn").Process(target=_sender, args=(port, total_bytes))
        child.start()
        conn, _ = srv.accept()
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        got = 0
        t0 = time.perf_counter()
        with conn:
            while True:
                n = conn.recv_into(view)
                if n == 0:
                    break
                got += n
        elapsed = time.perf_counter() - t0
        child.join()
    return got / elapsed / 1e6


def disk_write_mb_s(directory: Path, total_bytes: int) -> tuple[float, float]:
    """Returns (page-cache MB/s, MB/s including fsync)."""
    path = Path(directory) / "disk-probe.bin"
    buf = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        written = 0
        while written < total_bytes:
            written += os.write(fd, buf)
        t1 = time.perf_counter()
        os.fsync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return written / (t1 - t0) / 1e6, written / (t2 - t0) / 1e6
