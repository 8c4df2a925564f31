"""Chaos: a real 3-broker cluster under faults, checked Jepsen-style (issue 16).

A real ZooKeeper and three ``odradek server`` processes; an RF=3 topic with
``min.insync.replicas=2``; idempotent acks=all producers write numbered records and a
consumer group reads and commits while the fault loop kill -9s partition leaders, pauses
them (SIGSTOP for 1-3 s, then SIGCONT) and kills the controller, restarting what it killed
and waiting for the ISRs to fill again before the next fault. The history is then checked
(tests/cluster/chaos_support.py): acknowledged records present exactly once at their acked
offsets, per-partition order, replicas byte-identical, committed group offsets never going
back, every broker back in every ISR. Prints the table; keeps the history and broker logs
(``--keep`` or any failed check) in the run directory.

Run::

    python benchmarks/chaos.py --faults 50 [--seed 1] [--partitions 3] [--writers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.cluster.chaos_support import format_table, run_chaos  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=50, help="faults to inject (default 50)")
    parser.add_argument("--seed", type=int, default=None, help="random seed, to repeat a run")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--writers", type=int, default=2, help="concurrent idempotent producers")
    parser.add_argument("--dir", default=None, help="run directory (default: a new temporary one)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run directory even when every check passes"
    )
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-chaos-"))
    t0 = time.monotonic()
    result = run_chaos(base, args.faults, partitions=args.partitions, writers=args.writers, seed=args.seed)
    print()
    print(format_table(result.rows, result.stats))
    acked = len(result.history.of("ack"))
    print(f"{acked} records acknowledged in {time.monotonic() - t0:.0f} s, run directory {base}")
    if not result.ok or args.keep:
        result.history.dump(base / "history.jsonl")
        print(f"history: {base / 'history.jsonl'}; broker logs: {base}/broker-*.log")
    elif args.dir is None:
        shutil.rmtree(base, ignore_errors=True)  # gigabytes of logs nobody needs
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
