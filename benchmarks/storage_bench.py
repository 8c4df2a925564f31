"""Append/read throughput of the storage engine (not a test; run by hand).

    python benchmarks/storage_bench.py [--seconds 3]

Builds one real v2 batch per size with kafka-python, appends it repeatedly to a fresh Log
in a temp dir (CreateTime, no fsync), then reads everything back through Log.read.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from odradek.storage import Log, LogConfig  # noqa: E402


def make_batch(batch_bytes: int, records: int = 1, pid: int = -1) -> bytes:
    value = b"x" * max(1, (batch_bytes - 61) // records - 20)
    b = DefaultRecordBatchBuilder(2, 0, False, pid, 0 if pid >= 0 else -1, 0 if pid >= 0 else -1, 1 << 24)
    now = int(time.time() * 1000)
    for i in range(records):
        b.append(i, now, None, value, [])
    return bytes(b.build())


def bench_append(dir: str, batch: bytes, seconds: float, idempotent: bool = False) -> tuple[int, float, Log]:
    log = Log(os.path.join(dir, f"bench-{len(batch)}-{int(idempotent)}"), LogConfig())
    append = log.append_as_leader
    n = 0
    now = int(time.time() * 1000)
    start = time.perf_counter()
    deadline = start + seconds
    if idempotent:
        from odradek.protocol import batch as batch_format

        # Batches with consecutive sequences, built (and CRC'd) before the clock starts.
        pool = []
        ba = bytearray(batch)
        for seq in range(int(seconds * 150_000)):
            batch_format._INT32.pack_into(ba, 53, seq)
            batch_format.write_crc(ba)
            pool.append(bytes(ba))
        start = time.perf_counter()
        deadline = start + seconds
        for b in pool:
            append(b, 0, now_ms=now)
            n += 1
            if n % 1000 == 0 and time.perf_counter() > deadline:
                break
    else:
        while True:
            for _ in range(1000):
                append(batch, 0, now_ms=now)
            n += 1000
            if time.perf_counter() > deadline:
                break
    return n, time.perf_counter() - start, log


def bench_read(log: Log, fetch_bytes: int) -> tuple[int, int, float]:
    offset = log.log_start_offset
    leo = log.log_end_offset
    nbytes = 0
    reads = 0
    start = time.perf_counter()
    while offset < leo:
        r = log.read(offset, fetch_bytes)
        data = r.records.read()
        nbytes += len(data)
        reads += 1
        # next fetch starts after the last complete batch (as a consumer would)
        pos = 0
        last = offset
        while pos + 12 <= len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            if pos + size > len(data):
                break
            last = int.from_bytes(data[pos : pos + 8], "big") + int.from_bytes(
                data[pos + 23 : pos + 27], "big"
            )
            pos += size
        offset = last + 1
    return reads, nbytes, time.perf_counter() - start


def bench_tail_reads(log: Log, count: int) -> float:
    """Fetches at random recent offsets (index lookup + short scan), 1 MiB max."""
    import random

    leo = log.log_end_offset
    lo = max(log.log_start_offset, leo - 100000)
    offsets = [random.randrange(lo, leo) for _ in range(count)]
    start = time.perf_counter()
    for off in offsets:
        log.read(off, 1 << 20)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for size, idem in ((1024, False), (100, False), (1024, True), (16384, False)):
            batch = make_batch(size, pid=1 if idem else -1)
            n, secs, log = bench_append(d, batch, args.seconds, idem)
            mb = n * len(batch) / secs / 1e6
            kind = "idempotent" if idem else "plain"
            print(
                f"append {len(batch):6d} B batches ({kind:10s}): {n / secs:10,.0f} batches/s  {mb:8.1f} MB/s"
            )
            if not idem and size == 1024:
                reads, nbytes, rsecs = bench_read(log, 1 << 20)
                print(
                    f"read   sequential 1 MiB fetches        : {reads / rsecs:10,.0f} fetches/s "
                    f"{nbytes / rsecs / 1e6:8.1f} MB/s (pread copy)"
                )
                k = 20000
                t = bench_tail_reads(log, k)
                print(f"read   random-offset fetch (slice only)  : {k / t:10,.0f} fetches/s")
            log.close()


if __name__ == "__main__":
    main()
