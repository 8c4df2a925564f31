"""Summarise a ``py-spy record --format raw`` file (collapsed stacks) by self and total time.

    python benchmarks/profile_summary.py /tmp/produce.txt [--top 15]

    python benchmarks/profile_summary.py /tmp/consume.txt --thread MainThread

Each raw line is ``frame;frame;...;leaf COUNT``. Self time counts a sample once for its leaf
frame; total time counts it once for every distinct function on the stack. Functions are
keyed by name and file (line numbers dropped). Percentages are of all samples (recorded
with ``--idle`` they are shares of wall time, the event loop's wait included).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
_TRIM = ("site-packages/", "lib/python3.11/", "/work/main/", "/usr/lib/python3.11/")


def _short(path: str) -> str:
    for marker in _TRIM:
        i = path.find(marker)
        if i >= 0:
            return path[i + len(marker) :]
    return path


def frame_key(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    return f"{m['func']} ({_short(m['file'])})"


def summarize(path: str | Path, thread: str | None = None) -> dict:
    """Self and total samples per function. Files recorded with ``--threads`` start every
    stack with ``thread (TID): NAME``; ``thread`` then keeps only that thread's samples."""
    self_c: Counter[str] = Counter()
    total_c: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    thread_leaf: dict[str, Counter[str]] = {}
    samples = 0
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        raw = [f for f in stack.split(";") if f]
        name = "all"
        if raw and raw[0].startswith("thread ("):
            name = raw[0].split(":", 1)[-1].strip()
            raw = raw[1:]
        frames = [frame_key(f) for f in raw]
        threads[name] += n
        if frames:
            thread_leaf.setdefault(name, Counter())[frames[-1]] += n
        if thread is not None and name != thread:
            continue
        samples += n
        if not frames:
            continue
        self_c[frames[-1]] += n
        for f in set(frames):
            total_c[f] += n
    return {
        "samples": samples,
        "self": self_c,
        "total": total_c,
        "threads": threads,
        "thread_leaf": thread_leaf,
    }


def format_top(summary: dict, top: int = 15, kind: str = "self") -> str:
    samples = summary["samples"] or 1
    rows = [f"{'%':>6}  {'samples':>7}  function (file)"]
    for name, n in summary[kind].most_common(top):
        rows.append(f"{100 * n / samples:6.1f}  {n:7d}  {name}")
    return "\n".join(rows)


def format_threads(summary: dict) -> str:
    total = sum(summary["threads"].values()) or 1
    rows = []
    for name, n in summary["threads"].most_common():
        leaf, k = summary["thread_leaf"].get(name, Counter()).most_common(1)[0] if n else ("", 0)
        rows.append(
            f"{100 * n / total:6.1f}  {n:7d}  thread {name} (mostly in {leaf}, {100 * k / max(n, 1):.0f}%)"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", nargs="+", help="py-spy raw (collapsed) output files")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--total", action="store_true", help="also list the top functions by total time")
    ap.add_argument(
        "--thread", help="only this thread's samples (files recorded with --threads), e.g. MainThread"
    )
    args = ap.parse_args(argv)
    for path in args.raw:
        s = summarize(path, args.thread)
        if len(s["threads"]) > 1 or "all" not in s["threads"]:
            print(f"== {path}: samples per thread")
            print(format_threads(s))
        where = f" of thread {args.thread}" if args.thread else ""
        print(f"== {path}: {s['samples']} samples{where} — top {args.top} by self time")
        print(format_top(s, args.top, "self"))
        if args.total:
            print(f"-- top {args.top} by total (inclusive) time")
            print(format_top(s, args.top, "total"))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
