"""Machine reference points, so the broker numbers can be read against what the box can do.

- ``loopback_mb_s``: one TCP stream over 127.0.0.1 between two processes (sender in a child
  process doing ``sendall`` of 1 MiB chunks, receiver doing ``recv_into`` a preallocated
  buffer): the most a single Kafka connection could carry here.
- ``disk_write_mb_s``: ``os.write`` of 1 MiB chunks into a file in the benchmark's work
  directory (the file system Odradek writes its log to), once into the page cache and once
  including a final ``fsync``.
- ``sustained_write_mb_s``: the same ``os.write`` loop kept up for as many bytes as the
  benchmark writes, timed per window. On this project's VM the page cache takes ~4.7 GB/s
  for the first GB or so and then ~0.4 GB/s, with the difference spent as kernel CPU in
  the writer, so a produce row that writes past that point slows for the machine's reasons.
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


def _fill(fd: int, buf: bytes, nbytes: int) -> int:
    """``os.write`` ``buf`` into ``fd`` until ``nbytes`` have gone; returns the bytes written."""
    written = 0
    while written < nbytes:
        written += os.write(fd, buf)
    return written


def disk_write_mb_s(directory: Path, total_bytes: int) -> tuple[float, float]:
    """Returns (page-cache MB/s, MB/s including fsync)."""
    path = Path(directory) / "disk-probe.bin"
    buf = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        written = _fill(fd, buf, total_bytes)
        t1 = time.perf_counter()
        os.fsync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return written / (t1 - t0) / 1e6, written / (t2 - t0) / 1e6


def sustained_write_mb_s(directory: Path, total_bytes: int, window: int = 256 << 20) -> dict:
    """``os.write`` of 1 MiB chunks into new files until ``total_bytes``; the first and the
    slowest ``window``, in MB/s, and the writer's kernel CPU seconds per GB overall."""
    buf = os.urandom(CHUNK)
    paths = []
    rates = []
    sys0 = os.times().system
    t_all = time.perf_counter()
    try:
        written = 0
        while written < total_bytes:
            path = Path(directory) / f"sustained-probe-{len(paths)}.bin"
            paths.append(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                t0 = time.perf_counter()
                chunk = _fill(fd, buf, window)
                rates.append(chunk / (time.perf_counter() - t0) / 1e6)
                written += chunk
            finally:
                os.close(fd)
        elapsed = time.perf_counter() - t_all
        sys_s = os.times().system - sys0
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    return {
        "first_mb_s": rates[0],
        "slowest_mb_s": min(rates),
        "mean_mb_s": written / elapsed / 1e6,
        "sys_s_per_gb": sys_s / (written / 1e9),
        "bytes": written,
    }
