#!/usr/bin/env python
"""CPU per ``Log.append_as_leader`` call, for two source trees side by side.

    python benchmarks/append_bench.py                          # this tree only
    python benchmarks/append_bench.py --base /path/to/other/tree --repeat 7

Each run is a fresh ``python`` process per tree (trees alternate run by run) that appends
one prebuilt batch over and over to a Log in a temporary directory (no fsync, segments of
1 GiB) and reports the process CPU time per append; the table shows each tree's median.
CPU time, not wall time, so other processes on a shared machine move the numbers less.

Rows: the plain path (one batch, no producer id: what librdkafka sends by default) for a
100 B and a 1 KiB record; the general path for an idempotent producer (sequence checks),
a compacted topic (its key check, uncompressed and lz4) and a LogAppendTime topic (a copy
of the batch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROWS = {
    "plain 100 B": {},
    "plain 1 KiB": {},
    "idempotent 1 KiB": {},
    "compacted 1 KiB x10": {"cleanup.policy": "compact"},
    "compacted lz4 1 KiB x10": {"cleanup.policy": "compact"},
    "LogAppendTime 1 KiB": {"message.timestamp.type": "LogAppendTime"},
}

CHILD = r"""
import json, os, sys, tempfile, time
from odradek.protocol import batch as batch_format
from odradek.protocol.records import NewRecord
from odradek.storage import Log, LogConfig
try:
    from odradek.protocol.batch_builder import build_batch
except ImportError:  # a tree from before protocol/records.py was split
    from odradek.protocol.records import build_batch

rows, seconds = json.loads(sys.argv[1]), float(sys.argv[2])

def batch(value_size, records=1, codec=0, pid=-1):
    now = int(time.time() * 1000)
    recs = [NewRecord(b"key-%d" % i, b"x" * value_size, (), now) for i in range(records)]
    if pid < 0:
        return build_batch(recs, compression=codec)
    return build_batch(recs, compression=codec, producer_id=pid, producer_epoch=0, base_sequence=0)

def batches(name):
    if name == "plain 100 B":
        return [batch(100)]
    if name == "idempotent 1 KiB":
        one = bytearray(batch(1024, pid=1))
        out = []
        for seq in range(200_000):
            batch_format._INT32.pack_into(one, 53, seq)
            batch_format.write_crc(one)
            out.append(bytes(one))
        return out
    if name.startswith("compacted lz4"):
        return [batch(100, records=10, codec=3)]
    if name.startswith("compacted"):
        return [batch(100, records=10)]
    return [batch(1024)]

out = {}
with tempfile.TemporaryDirectory() as d:
    for name, cfg in rows.items():
        pool = batches(name)
        log = Log(os.path.join(d, name.replace(" ", "_") + "-0"), LogConfig.from_dict({**cfg, "segment.bytes": str(1 << 30)}))
        append = log.append_as_leader
        now = int(time.time() * 1000)
        unique = len(pool) > 1  # idempotent batches: each sequence once
        repeated = [] if unique else pool * 500
        n = 0
        start = time.process_time()
        deadline = start + seconds
        while time.process_time() < deadline:
            chunk = pool[n : n + 500] if unique else repeated
            if not chunk:
                break
            for b in chunk:
                append(b, 0, now_ms=now)
            n += len(chunk)
        out[name] = (time.process_time() - start) / n * 1e6
        log.close()
print(json.dumps(out))
"""


def run(tree: str, seconds: float) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": tree}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(ROWS), str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tree,
    )
    if child.returncode:
        raise SystemExit(f"the benchmark failed in {tree}:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="another source tree to compare with (e.g. a checkout of main)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per tree (default 5); the median counts")
    ap.add_argument("--seconds", type=float, default=1.0, help="CPU seconds per row and run (default 1)")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"this tree": here}
    if args.base:
        trees["base"] = str(Path(args.base).resolve())
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for i in range(args.repeat):
        order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
        for name, tree in order:
            results[name].append(run(tree, args.seconds))
    header = f"{'µs CPU / append':26s}" + "".join(f"{name:>12s}" for name in trees)
    if args.base:
        header += f"{'change':>10s}"
    print(header)
    for row in ROWS:
        medians = [statistics.median(r[row] for r in results[name]) for name in trees]
        line = f"{row:26s}" + "".join(f"{m:12.2f}" for m in medians)
        if args.base:
            line += f"{(medians[0] / medians[1] - 1) * 100:+9.1f}%"
        print(line)


if __name__ == "__main__":
    main()
