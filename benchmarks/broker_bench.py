#!/usr/bin/env python
"""Odradek vs tansu, side by side, with confluent-kafka as the load generator.

    python benchmarks/broker_bench.py                 # full run (3–7 minutes, more on a busy box)
    python benchmarks/broker_bench.py --quick         # 10x fewer records, one run per row
    python benchmarks/broker_bench.py --only odradek --json /tmp/bench.json
    python benchmarks/broker_bench.py --profile /tmp/prof   # + py-spy of Odradek (pip install py-spy)
    python benchmarks/broker_bench.py --security-only --security-mb 64   # TLS and SASL_SSL rows only

Odradek writes to disk (a temporary log dir); tansu runs with ``memory://`` storage. Both run
as child processes on 127.0.0.1 and are measured in the same run, row by row and never at
the same time; with ``--repeat`` (5 by default) each row alternates which broker goes first
and the table shows the median run. Every load job runs in its own ``python _loadgen.py``
process, separate from the brokers and from this orchestrator.

Rows
- produce 100 B x 1M and 1 KB x 300k records, acks=1 and acks=all, into a fresh topic
  (``--partitions``, default 1), timed from the first ``produce()`` until ``flush()``
  returns (every record acknowledged). One warm-up record per producer goes first.
- consume the acks=1 topics back from the beginning with ``fetch.queue.backoff.ms=10``,
  timed from the first non-empty ``consume()`` batch to the last record.
- the same topics read again by a raw Fetch v11 loop on one socket (1 MB per partition and
  request, records counted from batch headers, the topic read 10 times over): the broker's
  side of consuming, where the confluent-kafka consumer's per-record cost would hide it.
- startup: spawn → first successful Metadata v1 answer on a raw socket (median of several
  fresh starts; Odradek's include creating its empty data dir).
- RSS (``VmRSS``, /proc/PID/status) idle after startup, after every row has run, and the
  most it reached while a run's data was still held.
- with ``--security`` (or ``--security-only``): produce and consume 1 KB records over
  PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners of one Odradek broker, with the
  broker's CPU per MB (``security_bench.py``'s rows; ``--security-mb`` MB per listener).

Each run (per size) produces its acks=1 and acks=all topics, consumes the acks=1 topic, reads
it again raw, and then deletes both topics, so the machine holds one run's data at a time:
on this VM, page cache beyond about a GB slows every write ~10x (the sustained disk-write
reference row), which would otherwise decide the later rows instead of the broker.
- broker CPU per one-record Produce request: ``linger.ms=0``, ``max.in.flight=1``, each record
  awaited (``flush()``) before the next, so each request carries exactly one record; broker
  utime+stime (/proc/PID/stat) over the loop divided by the number of requests; the
  brokers take turns (``--repeat`` runs each) and the median run counts.

The load generator
``produce()`` in a tight loop with ``poll(0)`` every 20k records, a queue that holds the
whole run (``queue.buffering.max.messages``), ``linger.ms=5``, 1 MB batches, and no
per-record delivery callback (``delivery.report.only.error``). ``--producer-api batch`` uses
``produce_batch()`` (one C call per 10k records) and ``--producers N`` splits a row over N
processes started together. The reference rows give the generator's ceiling (enqueueing
into librdkafka with no broker at all) next to the machine's loopback and disk speed. Each
throughput cell shows the broker's CPU (in cores), the generator's Python thread busy share
and the CPU other processes on the machine used meanwhile, so one can tell who was
saturated. Where the generator is still the bottleneck: the 100 B produce rows (the
Python thread runs at 80–100 % and both brokers sit mostly idle; the enqueue ceiling is
~1–1.6M records/s), and the 100 B consume row: consume() builds one Python object per
record, and the consumer process (its Python thread plus librdkafka's fetch thread) needs
~0.6–0.9 µs of CPU per record against either broker, so it tops out at ~2–2.5M records/s
(with the cyclic GC off during the loop, as here) whichever broker feeds it. A consume
row whose generator thread ran ≥ 85 % busy says how much any broker could have shown
("generator-bound: ≤ N× reachable"). On a 2-core machine the broker, the Python loop and
librdkafka's threads also compete for the same cores, so the 1 KB rows measure
broker + client CPU together.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _brokers import BROKERS, Broker, OdradekBroker, cpu_seconds, proc_status, tansu_version  # noqa: E402
from _machine import disk_write_mb_s, loopback_mb_s, sustained_write_mb_s  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

HERE = Path(__file__).resolve().parent
LOADGEN = HERE / "_loadgen.py"

TARGETS = {
    "produce_1024": 2.5,
    "produce_100": 1.2,
    "consume": 1.5,
    "cpu_ratio": 0.5,
    "startup_ms": 250,
    "rss_mib": 60,
}

err = Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------------------------
# running jobs


def _spawn(job: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(LOADGEN), json.dumps(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collect(proc: subprocess.Popen, job: dict, timeout: float) -> dict:
    try:
        out, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, stderr = proc.communicate()
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"load job {job['job']} failed (rc {proc.returncode}):\n{stderr[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if lines:
        result["stderr"] = lines[-10:]
    return result


def run_job(job: dict, timeout: float = 600) -> dict:
    return _collect(_spawn(job), job, timeout)


def run_producers(job: dict, producers: int, timeout: float = 600) -> dict:
    """One produce row, split over ``producers`` processes that start at the same moment;
    the result spans the earliest start to the latest end."""
    if producers == 1:
        return run_job(job, timeout)
    count = job["count"]
    start_at = time.time() + 2.0  # time to import, connect and warm up
    jobs = []
    for i in range(producers):
        share = count // producers + (1 if i < count % producers else 0)
        jobs.append({**job, "count": share, "start_at": start_at, "first_partition": i})
    procs = [_spawn(j) for j in jobs]
    parts = [_collect(p, j, timeout) for p, j in zip(procs, jobs, strict=True)]
    first = min(parts, key=lambda r: r["wall_start"])
    last = max(parts, key=lambda r: r["wall_end"])
    seconds = last["wall_end"] - first["wall_start"]
    size = job["size"]
    r = {
        "producers": producers,
        "parts": parts,
        "seconds": seconds,
        "count": count,
        "size": size,
        "bytes": count * size,
        "msgs_per_s": count / seconds,
        "mb_per_s": count * size / seconds / 1e6,
        "gen_main_thread_cpu": max(p["gen_main_thread_cpu"] for p in parts),
        "gen_process_cpu": sum(p["gen_process_cpu_s"] for p in parts) / seconds,
        "undelivered": sum(p["undelivered"] for p in parts),
        "failed": sum(p["failed"] for p in parts),
        "failures": [f for p in parts for f in p["failures"]],
        "client_errors": [e for p in parts for e in p["client_errors"]],
    }
    if "broker_cpu0" in first:
        r["broker_cpu_s"] = last["broker_cpu1"] - first["broker_cpu0"]
        r["broker_cpu"] = r["broker_cpu_s"] / seconds
        machine = max(p["machine_busy_s"] for p in parts)  # the widest window
        r["other_cpu"] = (machine - r["broker_cpu_s"] - sum(p["gen_process_cpu_s"] for p in parts)) / seconds
    return r


def wait_quiet(args, label: str) -> tuple[float, float]:
    """Wait (at most ``--quiet-wait`` s) until the rest of the machine uses no more than
    ``--max-other`` cores; our brokers are idle between runs, so the machine's busy CPU is
    other processes'. Returns (seconds waited, cores busy in the last window)."""
    from _loadgen import machine_busy_s

    t_start = time.perf_counter()
    while True:
        b0, t0 = machine_busy_s(), time.perf_counter()
        time.sleep(0.3)
        busy = (machine_busy_s() - b0) / (time.perf_counter() - t0)
        waited = time.perf_counter() - t_start
        if busy <= args.max_other or waited >= args.quiet_wait:
            if busy > args.max_other:
                err.log(
                    f"  {label}: machine still busy ({busy:.2f} cores) after {waited:.0f} s; measuring anyway"
                )
            return waited, busy


def steady(run, args, label: str) -> dict:
    """Run a measurement once the machine is quiet; if other processes on the (shared)
    machine still used more than ``--max-other`` cores meanwhile, run it again (up to
    ``--retries`` times) and keep the quietest attempt. Discarded attempts are listed."""
    attempts = []
    for attempt in range(args.retries + 1):
        waited, busy = wait_quiet(args, label)
        r = run(attempt)
        r["quiet_wait_s"], r["busy_before"] = waited, busy
        attempts.append(r)
        other = r.get("other_cpu", 0.0)
        if other <= args.max_other:
            break
        if attempt < args.retries:
            err.log(f"  {label}: other processes used {other:.2f} cores meanwhile; measuring again")
    best = min(attempts, key=lambda a: a.get("other_cpu", 0.0))
    best["noisy_attempts"] = [
        {"msgs_per_s": a.get("msgs_per_s"), "other_cpu": a.get("other_cpu")}
        for a in attempts
        if a is not best
    ]
    return best


def pick_run(runs: list[dict], how: str = "median") -> dict:
    """The run a table row shows: the median by msg/s, the best, or the quietest (least CPU
    used by other processes meanwhile)."""
    if how == "best":
        chosen = max(runs, key=lambda r: r["msgs_per_s"])
    elif how == "quietest":
        chosen = min(runs, key=lambda r: r.get("other_cpu", 0.0))
    else:
        chosen = sorted(runs, key=lambda r: r["msgs_per_s"])[(len(runs) - 1) // 2]
    row = dict(chosen)
    row["all_msgs_per_s"] = [r["msgs_per_s"] for r in runs]
    return row


def pick_rows(res: dict, how: str) -> None:
    res["meta"]["pick"] = how
    for bres in res["brokers"].values():
        for key, runs in bres["runs"].items():
            bres["rows"][key] = pick_run(runs, how)


def git_state() -> str:
    """The commit Odradek runs from, and whether the work tree differs from it (read-only)."""
    root = HERE.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "odradek"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" + uncommitted changes under odradek/" if dirty else "")


def measure_startup(cls: type[Broker], workdir: Path, runs: int) -> dict:
    times = []
    for i in range(runs):
        b = cls(workdir, tag=f"startup{i}")
        try:
            times.append(b.start())
        finally:
            b.stop()
        if hasattr(b, "data_dir"):
            shutil.rmtree(b.data_dir, ignore_errors=True)
    return {"runs_ms": [t * 1000 for t in times], "median_ms": statistics.median(times) * 1000}


def idle_cpu_per_s(pid: int, seconds: float = 2.0) -> float:
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)


def machine_busy_now(seconds: float = 1.0) -> float:
    """Cores the machine is busy with (/proc/stat) over ``seconds``, before we load it."""
    from _loadgen import machine_busy_s

    b0, t0 = machine_busy_s(), time.perf_counter()
    time.sleep(seconds)
    return (machine_busy_s() - b0) / (time.perf_counter() - t0)


def memory(pid: int) -> dict:
    st = proc_status(pid)
    return {
        "rss_mib": st["VmRSS"] / 1024,
        "hwm_mib": st["VmHWM"] / 1024,
        "anon_mib": st.get("RssAnon", 0) / 1024,
        "file_mib": st.get("RssFile", 0) / 1024,
        "threads": st.get("Threads", 0),
    }


# ---------------------------------------------------------------------------------------------
# profiling (optional, extra runs after the table's numbers)


def run_profiles(b: Broker, args, size_count: tuple[int, int]) -> dict:
    """py-spy (``--threads``, raw) on Odradek while it takes a produce-1KB load and then
    serves the same records to a consumer; 3x the row's records for enough samples."""
    pdir = Path(args.profile)
    pdir.mkdir(parents=True, exist_ok=True)
    size, count = size_count
    count *= 3
    common = {"bootstrap": b.bootstrap, "size": size, "broker_pid": b.pid}
    out = {}
    wait_quiet(args, "profile produce")
    err.log("odradek: py-spy during produce 1 KB")
    out["produce"] = profiled(
        b.pid,
        pdir / "produce-1k.txt",
        {
            "job": "produce",
            "topic": "profile-1k",
            "create_partitions": args.partitions,
            "count": count,
            "acks": "1",
            "api": args.producer_api,
            **common,
        },
        args.profile_rate,
        args.profile_native,
    )
    time.sleep(1.0)
    wait_quiet(args, "profile consume")
    err.log("odradek: py-spy during consume 1 KB")
    out["consume"] = profiled(
        b.pid,
        pdir / "consume-1k.txt",
        {
            "job": "consume",
            "topic": "profile-1k",
            "expect": count + 1,
            "partitions": args.partitions,
            **common,
        },
        args.profile_rate,
        args.profile_native,
    )
    return out


def profiled(pid: int, out: Path, job: dict, rate: int, native: bool = False) -> dict:
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        raise RuntimeError("py-spy not found (pip install py-spy)")
    cmd = [
        pyspy,
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--threads",
        "--rate",
        str(rate),
        "-o",
        str(out),
    ]
    if native:
        cmd.append("--native")
    spy = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)  # let it attach
    try:
        result = run_job(job)
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy_out = spy.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            spy.kill()
            spy_out = spy.communicate()[0]
    result["py_spy_output"] = spy_out.strip().splitlines()[-3:]
    return result


# ---------------------------------------------------------------------------------------------
# the table


def _n(x: int) -> str:
    if x % 1_000_000 == 0:
        return f"{x // 1_000_000}M"
    return f"{x // 1000}k" if x % 1000 == 0 else f"{x:,}"


def _k(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:,.0f}k"


def fmt_rate(r: dict | None, fetch: bool = False) -> str:
    if not r:
        return "—"
    text = f"{_k(r['msgs_per_s'])} msg/s\n{r['mb_per_s']:,.1f} MB/s"
    lines = []
    if "broker_cpu" in r:
        per_mb = r.get("broker_cpu_s", 0) / (r["count"] * r["size"] / 1e6) * 1000 if r.get("count") else 0
        lines.append([f"broker {r['broker_cpu']:.2f} CPU", f"{per_mb:.1f} ms/MB"])
    load = []
    if "gen_main_thread_cpu" in r:
        load.append(f"gen {r['gen_main_thread_cpu']:.0%}")
    if "other_cpu" in r:
        load.append(f"other {max(r['other_cpu'], 0):.1f}")
    lines.append(load)
    last = []
    if fetch and r.get("kb_per_fetch"):
        last.append(f"{r['kb_per_fetch']:,.0f} KB/fetch")
    runs = r.get("all_msgs_per_s", [])
    if len(runs) > 1:
        last.append(f"{_k(min(runs))}–{_k(max(runs))}")
    lines.append(last)
    for line in lines:
        if line:
            text += "\n[dim]" + " · ".join(line) + "[/dim]"
    return text


def verdict(ok: bool | None, detail: str = "") -> str:
    if ok is None:
        return "[dim]n/a[/dim]"
    mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
    return f"{mark} {detail}".strip()


def ratio_cells(od: float | None, ta: float | None, minimum: float) -> tuple[str, str]:
    if not od or not ta:
        return "—", verdict(None)
    ratio = od / ta
    return f"{ratio:.2f}×", verdict(ratio >= minimum, f"({ratio / minimum:.0%} of target)")


def reachable_ratio(od: dict | None, ta: dict | None, busy: float = 0.85) -> float | None:
    """When the generator's Python thread was saturated in Odradek's run, the most any broker
    could have shown there: the generator's ceiling (rate ÷ busy share) over tansu's rate.
    None when the generator had room."""
    if not od or not ta or not ta.get("msgs_per_s"):
        return None
    gen = od.get("gen_main_thread_cpu") or 0.0
    if gen < busy:
        return None
    return od["msgs_per_s"] / min(gen, 1.0) / ta["msgs_per_s"]


def build_table(res: dict, names: list[str]) -> Table:
    meta = res["meta"]
    title = (
        f"Odradek vs tansu — {meta['cpus']} CPUs, {meta['partitions']} partition(s)/topic, "
        f"{meta['producers']} producer process(es), {meta.get('pick', 'median')} of {meta['repeat']} run(s)"
    )
    if meta["quick"]:
        title += " — QUICK (10× fewer records)"
    t = Table(
        title=title,
        caption=(
            "msg/s and MB/s (10^6 B of payload) acknowledged or consumed per second. Dim: broker CPU in cores "
            "and CPU-ms per MB of payload (robust to a busy machine); "
            "gen = the generator's Python thread busy share; other = CPU (cores) other processes on the machine "
            "used meanwhile; min–max of the runs. "
            "Odradek writes to disk; tansu keeps data in memory. Reference rows describe the machine and "
            "the load generator, not a broker."
        ),
        show_lines=True,
    )
    t.add_column("Metric", style="bold", max_width=26)
    for n in names:
        t.add_column("Odradek" if n == "odradek" else "tansu", justify="right", min_width=26)
    both = len(names) == 2
    if both:
        t.add_column("÷ tansu", justify="right")
    t.add_column("Target")
    t.add_column("Verdict")

    b = res["brokers"]

    def row(metric: str, cells: dict[str, str], ratio: str, target: str, verd: str) -> None:
        vals = [metric] + [cells.get(n, "—") for n in names]
        if both:
            vals.append(ratio)
        vals += [target, verd]
        t.add_row(*vals)

    def get(name: str, *path):
        cur = b.get(name)
        for p in path:
            if cur is None:
                return None
            cur = cur.get(p)
        return cur

    sizes = meta["sizes"]
    for size, count in sizes:
        label = "100 B" if size == 100 else "1 KB"
        minimum = TARGETS[f"produce_{size}"]
        for acks in ("1", "all"):
            key = f"produce_{size}_acks{acks}"
            od, ta = get("odradek", "rows", key), get("tansu", "rows", key)
            r_txt, v_txt = ratio_cells(od and od["msgs_per_s"], ta and ta["msgs_per_s"], minimum)
            row(
                f"produce {label} × {_n(count)}, acks={acks}",
                {n: fmt_rate(get(n, "rows", key)) for n in names},
                r_txt,
                f"≥ {minimum}× tansu",
                v_txt,
            )
    for size, count in sizes:
        label = "100 B" if size == 100 else "1 KB"
        key = f"consume_{size}"
        od, ta = get("odradek", "rows", key), get("tansu", "rows", key)
        r_txt, v_txt = ratio_cells(od and od["msgs_per_s"], ta and ta["msgs_per_s"], TARGETS["consume"])
        reach = reachable_ratio(od, ta)
        if reach is not None:
            v_txt += f"\n[dim]generator-bound: ≤ {reach:.2f}× reachable[/dim]"
        row(
            f"consume {label} × {_n(count)}",
            {n: fmt_rate(get(n, "rows", key), fetch=True) for n in names},
            r_txt,
            f"≥ {TARGETS['consume']}× tansu",
            v_txt,
        )

    for size, _count in sizes:
        label = "100 B" if size == 100 else "1 KB"
        key = f"fetch_raw_{size}"
        od, ta = get("odradek", "rows", key), get("tansu", "rows", key)
        if not od and not ta:
            continue
        ratio = f"{od['msgs_per_s'] / ta['msgs_per_s']:.2f}×" if od and ta else "—"
        row(
            f"consume {label}, broker side: raw Fetch loop",
            {n: fmt_rate(get(n, "rows", key), fetch=True) for n in names},
            ratio,
            "no client per-record work",
            "reference",
        )

    # startup
    cells = {}
    for n in names:
        s = get(n, "startup")
        if s:
            lo, hi = min(s["runs_ms"]), max(s["runs_ms"])
            cells[n] = f"{s['median_ms']:.0f} ms\n[dim]{lo:.0f}–{hi:.0f} ms, n={len(s['runs_ms'])}[/dim]"
    od_s, ta_s = get("odradek", "startup", "median_ms"), get("tansu", "startup", "median_ms")
    row(
        "startup: spawn → 1st Metadata answer",
        cells,
        f"{od_s / ta_s:.0f}×" if od_s and ta_s else "—",
        f"< {TARGETS['startup_ms']} ms",
        verdict(od_s < TARGETS["startup_ms"], f"({od_s:.0f} ms)") if od_s else verdict(None),
    )

    # memory
    cells = {n: f"{get(n, 'mem_idle', 'rss_mib'):.1f} MiB" for n in names if get(n, "mem_idle")}
    od_i, ta_i = get("odradek", "mem_idle", "rss_mib"), get("tansu", "mem_idle", "rss_mib")
    row(
        "RSS idle (after startup)",
        cells,
        f"{od_i / ta_i:.1f}×" if od_i and ta_i else "—",
        f"< {TARGETS['rss_mib']} MiB",
        verdict(od_i < TARGETS["rss_mib"]) if od_i else verdict(None),
    )
    cells = {}
    for n in names:
        m, i = get(n, "mem_after"), get(n, "mem_idle")
        if m and i:
            held = get(n, "mem_with_data") or {}
            holding = (
                f"\nmax {held['rss_mib']:.0f} holding {held['held_bytes'] / 1e6:,.0f} MB"
                if held.get("held_bytes")
                else ""
            )
            cells[n] = (
                f"{m['rss_mib']:.1f} MiB (+{m['rss_mib'] - i['rss_mib']:.1f})\n"
                f"[dim]peak {m['hwm_mib']:.0f} · anon {m['anon_mib']:.0f} · file {m['file_mib']:.0f}"
                f"{holding}[/dim]"
            )
    od_a, ta_a = get("odradek", "mem_after"), get("tansu", "mem_after", "rss_mib")
    written = max((get(n, "bytes_written") or 0) for n in names)
    row(
        f"RSS after the run ({written / 1e9:.1f} GB written)",
        cells,
        f"{od_a['rss_mib'] / ta_a:.2f}×" if od_a and ta_a else "—",
        f"< {TARGETS['rss_mib']} MiB, flat",
        verdict(od_a["rss_mib"] < TARGETS["rss_mib"], f"(+{od_a['rss_mib'] - od_i:.1f} MiB)")
        if od_a and od_i
        else verdict(None),
    )

    # CPU per request
    cells = {}
    for n in names:
        c = get(n, "cpu_per_request")
        if c:
            runs = c.get("all_cpu_us_per_request") or [c["cpu_us_per_request"]]
            cells[n] = (
                f"{c['cpu_us_per_request']:.0f} µs CPU/req\n"
                f"[dim]schedstat {c['sched_us_per_request']:.0f} µs\n"
                f"RTT {c['latency_us']:.0f} µs · n={c['requests']:,}\n"
                f"{min(runs):.0f}–{max(runs):.0f} µs[/dim]"
            )
    od_c = get("odradek", "cpu_per_request", "cpu_us_per_request")
    ta_c = get("tansu", "cpu_per_request", "cpu_us_per_request")
    if od_c and ta_c:
        ratio = od_c / ta_c
        r_txt = f"{ratio:.2f}×"
        v_txt = verdict(ratio <= TARGETS["cpu_ratio"], f"({TARGETS['cpu_ratio'] / ratio:.0%} of target)")
    else:
        r_txt, v_txt = "—", verdict(None)
    row(
        "broker CPU per 1-record Produce request",
        cells,
        r_txt,
        f"≤ {TARGETS['cpu_ratio']}× tansu",
        v_txt,
    )

    # reference rows
    t.add_section()
    m = res["machine"]

    def ref(metric: str, value: str, note: str) -> None:
        vals = [f"[dim]ref:[/dim] {metric}", value] + [""] * (len(names) - 1)
        if both:
            vals.append("")
        vals += [note, "[dim]reference[/dim]"]
        t.add_row(*vals)

    if "loopback_mb_s" in m:
        ref(
            "loopback TCP, 1 stream",
            f"{m['loopback_mb_s']:,.0f} MB/s",
            "one connection's max",
        )
    if "disk_mb_s" in m:
        ref(
            "disk write, 1 MiB os.write",
            f"{m['disk_mb_s']:,.0f} MB/s\n[dim]{m['disk_fsync_mb_s']:,.0f} MB/s incl. fsync[/dim]",
            "Odradek's log fs",
        )
    sw = m.get("sustained_write")
    if sw:
        ref(
            f"disk write sustained, {sw['bytes'] / 1e9:.1f} GB",
            f"{sw['first_mb_s']:,.0f} → {sw['slowest_mb_s']:,.0f} MB/s\n"
            f"[dim]first vs slowest 256 MB · {sw['sys_s_per_gb']:.2f} s kernel CPU/GB[/dim]",
            "after the rows",
        )
    for size, _ in sizes:
        e = m.get(f"enqueue_{size}")
        if e:
            ref(
                f"generator ceiling, {'100 B' if size == 100 else '1 KB'}: produce() to no broker",
                f"{_k(e['msgs_per_s'])} msg/s\n{e['mb_per_s']:,.1f} MB/s",
                "produce rows' cap",
            )
    if "busy_before" in m:
        others = [
            r["other_cpu"] for n in names for runs in b[n]["runs"].values() for r in runs if "other_cpu" in r
        ]
        txt = f"{m['busy_before']:.2f} cores before start"
        if others:
            txt += f"\n[dim]{statistics.median(others):.2f} median, {max(others):.2f} max in rows[/dim]"
        ref("other processes' CPU", txt, "shared machine")
    for n in names:
        g = get(n, "group_warmup_s")
        if g is not None:
            ref(f"{n}: first OffsetFetch (group coordinator setup)", f"{g * 1000:,.0f} ms", "untimed warm-up")
    for n in names:
        idle = get(n, "idle_cpu_per_s")
        if idle is not None:
            ref(f"{n} idle CPU", f"{idle * 1000:.1f} ms CPU/s", "not subtracted")
    return t


# ---------------------------------------------------------------------------------------------
# log scan


_STAMP = re.compile(r"^\S+ \S+ ")


def broker_problems(text: str, name: str) -> list[str]:
    pat = (
        re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b")
        if name == "odradek"
        else re.compile(r"\b(WARN|ERROR|panicked)\b")
    )
    seen: dict[str, int] = {}
    out = []
    for line in text.splitlines():
        if pat.search(line):
            key = _STAMP.sub("", line)[:200]
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1 and len(out) < 30:
                out.append(line[:400])
    return out


def problems_seen(res: dict, names: list[str]) -> list[str]:
    problems = []
    for n in names:
        bres = res["brokers"][n]
        if bres.get("exit_code") not in (0, None):
            problems.append(f"{n} exit code on SIGTERM: {bres['exit_code']}")
        for line in bres.get("log_problems", []):
            problems.append(f"{n} log: {line}")
        for key, runs in bres["runs"].items():
            for r in runs:
                if r.get("undelivered") or r.get("failed"):
                    problems.append(
                        f"{n} {key}: {r.get('failed')} failed, {r.get('undelivered')} undelivered {r.get('failures')}"
                    )
                if "expected" in r and r["count"] != r["expected"]:
                    problems.append(f"{n} {key}: consumed {r['count']:,} of {r['expected']:,}")
                for e in r.get("message_errors", []) + r.get("client_errors", []):
                    problems.append(f"{n} {key}: client saw: {e}")
    return list(dict.fromkeys(problems))


def print_report(res: dict, names: list[str], profile_dir: str | None) -> None:
    console = Console() if sys.stdout.isatty() else Console(width=150)
    console.print(build_table(res, names))
    meta = res["meta"]
    console.print(
        f"[dim]{meta['command']} · {meta['elapsed_s']:.0f} s · confluent-kafka {meta['confluent_kafka']} / "
        f"librdkafka {meta['librdkafka']} · {meta['tansu'] or ''} · Python {meta['python']}[/dim]"
    )

    problems = problems_seen(res, names)
    if problems:
        console.print("[yellow]Problems seen:[/yellow]")
        for p in problems:
            console.print(f"  {p}", markup=False)

    if profile_dir and "profile" in res:
        print_profiles(console, res, profile_dir)


def print_profiles(console: Console, res: dict, profile_dir: str) -> None:
    from profile_summary import format_threads, format_top, summarize

    for what in ("produce", "consume"):
        path = Path(profile_dir) / f"{what}-1k.txt"
        if path.exists():
            s = summarize(path, "MainThread")
            r = res["profile"][what]
            console.print(
                f"\n[bold]py-spy: Odradek during {what} 1 KB[/bold] ({r['msgs_per_s']:,.0f} msg/s while "
                f"profiled, broker {r.get('broker_cpu', 0):.2f} CPU, other processes "
                f"{max(r.get('other_cpu', 0), 0):.1f} CPU); samples per thread:"
            )
            console.print(format_threads(s), markup=False, highlight=False)
            console.print(f"event-loop thread (MainThread), {s['samples']} samples — top 15 by self time:")
            console.print(format_top(s, 15, "self"), markup=False, highlight=False)
            console.print(f"[dim]raw stacks: {path}[/dim]")


# ---------------------------------------------------------------------------------------------
# main


def print_security_rows(args) -> None:
    """What TLS and SASL_SSL cost beside PLAINTEXT (``security_bench.py``'s measurement)."""
    import security_bench

    mb = args.security_mb or (8 if args.quick else 64)
    err.log(f"security rows: {mb} MB of 1 KB records per listener")
    print(f"\nOdradek over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), {mb} MB of 1 KB records each:")
    security_bench.print_rows(security_bench.measure(mb, args.repeat or 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10x fewer records, one run per row (a smoke run)")
    ap.add_argument("--only", choices=sorted(BROKERS), help="run one broker only")
    ap.add_argument("--json", metavar="PATH", help="save all numbers as JSON")
    ap.add_argument("--partitions", type=int, default=1, help="partitions per topic (default 1)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per throughput row (default 5, quick 1)")
    ap.add_argument(
        "--pick",
        choices=["median", "best", "quietest"],
        default="median",
        help="which of the --repeat runs a row shows (default median)",
    )
    ap.add_argument(
        "--from-json", metavar="PATH", help="print the table from a saved --json file; run nothing"
    )
    ap.add_argument(
        "--producers", type=int, default=1, help="generator processes per produce row (default 1)"
    )
    ap.add_argument("--producer-api", choices=["produce", "batch"], default="produce")
    ap.add_argument(
        "--max-other",
        type=float,
        default=0.3,
        help="re-measure a run when other processes used more CPU (cores) meanwhile (default 0.3)",
    )
    ap.add_argument("--retries", type=int, default=1, help="re-measurements per run at most (default 1)")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=3.0,
        help="before each run, wait up to this many seconds for the machine to be quiet (default 3)",
    )
    ap.add_argument(
        "--startup-runs", type=int, default=None, help="fresh starts per broker (default 7, quick 3)"
    )
    ap.add_argument(
        "--cpu-requests",
        type=int,
        default=None,
        help="one-record requests per run (default 10000, quick 1000)",
    )
    ap.add_argument("--workdir", help="where brokers keep logs and data (default: a temp dir, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument(
        "--profile", metavar="DIR", help="then py-spy Odradek under produce-1KB and consume-1KB loads"
    )
    ap.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second (default 200)")
    ap.add_argument(
        "--profile-only", action="store_true", help="with --profile: skip the table, only profile Odradek"
    )
    ap.add_argument("--profile-native", action="store_true", help="py-spy --native (C frames too)")
    ap.add_argument(
        "--security",
        action="store_true",
        help="then Odradek over PLAINTEXT, SSL and SASL_SSL listeners: produce/consume 1 KB, CPU per MB",
    )
    ap.add_argument("--security-only", action="store_true", help="only the --security rows")
    ap.add_argument(
        "--security-mb", type=int, default=None, help="MB per listener for --security (default 64, quick 8)"
    )
    args = ap.parse_args(argv)
    # Byte-compile Odradek first, as an installed wheel is: where PYTHONDONTWRITEBYTECODE is
    # set, the broker would otherwise compile its sources at every start.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1] / "odradek")],
        check=False,
    )

    if args.from_json:
        res = json.loads(Path(args.from_json).read_text())
        pick_rows(res, args.pick)
        print_report(res, list(res["brokers"]), None)
        return 0

    if args.security_only:
        print_security_rows(args)
        return 0

    div = 10 if args.quick else 1
    sizes = [(100, 1_000_000 // div), (1024, 300_000 // div)]
    names = [args.only] if args.only else ["odradek", "tansu"]
    repeat = args.repeat or (1 if args.quick else 5)
    startup_runs = args.startup_runs or (3 if args.quick else 7)
    cpu_requests = args.cpu_requests or (1000 if args.quick else 10_000)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="odradek-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not (args.keep or args.workdir):
        atexit.register(shutil.rmtree, workdir, True)  # also when a run fails

    import confluent_kafka

    res: dict = {
        "meta": {
            "quick": args.quick,
            "partitions": args.partitions,
            "repeat": repeat,
            "producers": args.producers,
            "producer_api": args.producer_api,
            "pick": args.pick,
            "sizes": sizes,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
            "tansu": tansu_version() if "tansu" in names else None,
            "odradek_git": git_state(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(["python", *sys.argv]),
        },
        "machine": {},
        "brokers": {n: {"rows": {}, "runs": {}} for n in names},
    }
    t_start = time.perf_counter()
    brokers: dict[str, Broker] = {}

    if args.profile and args.profile_only:
        b = OdradekBroker(workdir)
        b.start()
        try:
            run_job(
                {
                    "job": "create",
                    "bootstrap": b.bootstrap,
                    "topics": ["warm"],
                    "partitions": 1,
                    "warm_group": True,
                }
            )
            res["profile"] = run_profiles(b, args, sizes[1])
        finally:
            b.stop()
        res["brokers"] = {
            "odradek": {"rows": {}, "runs": {}, "log_problems": broker_problems(b.log_text(), "odradek")}
        }
        print_profiles(Console() if sys.stdout.isatty() else Console(width=150), res, args.profile)
        for line in res["brokers"]["odradek"]["log_problems"]:
            print(f"odradek log: {line}")
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=2, default=str))
        return 0

    def in_order(rep: int) -> list[tuple[str, Broker]]:
        items = list(brokers.items())
        return items if rep % 2 == 0 else items[::-1]

    try:
        res["machine"]["busy_before"] = machine_busy_now(1.0)
        # -- startup (first: the reference probes below write and drop a GB of page cache) ----
        for n in names:
            err.log(f"{n}: startup x{startup_runs}")
            res["brokers"][n]["startup"] = measure_startup(BROKERS[n], workdir, startup_runs)

        # -- reference points ---------------------------------------------------------------
        err.log("machine reference: background load, loopback, disk, generator ceiling")
        res["machine"]["loopback_mb_s"] = loopback_mb_s((2 << 30) // div)
        res["machine"]["disk_mb_s"], res["machine"]["disk_fsync_mb_s"] = disk_write_mb_s(
            workdir, (512 << 20) // div
        )
        for size, count in sizes:
            res["machine"][f"enqueue_{size}"] = run_job({"job": "enqueue", "size": size, "count": count})

        # -- the brokers under load ------------------------------------------------------------
        for n in names:
            brokers[n] = BROKERS[n](workdir)
            brokers[n].start()
        time.sleep(1.0)
        for n, b in brokers.items():
            res["brokers"][n]["pid"] = b.pid
            res["brokers"][n]["mem_idle"] = memory(b.pid)
            res["brokers"][n]["idle_cpu_per_s"] = idle_cpu_per_s(b.pid, 1.0)

        for n, b in brokers.items():
            res["brokers"][n]["group_warmup_s"] = run_job(
                {
                    "job": "create",
                    "bootstrap": b.bootstrap,
                    "topics": ["cpu-per-request"],
                    "partitions": 1,
                    "warm_group": True,
                }
            ).get("group_warmup_s")

        # Per size and run: produce (acks=1, then acks=all), consume the acks=1 topic, read it
        # again with raw fetches, then delete the run's topics. Keeping at most one run's data
        # matters on this VM: past ~1 GB of fresh page cache, writes slow down ~10x (see the
        # sustained disk-write reference row), which would decide the later rows, not the broker.
        for size, count in sizes:
            for rep in range(repeat):
                created: dict[str, list[str]] = {n: [] for n in brokers}
                accepted: dict[str, str] = {}  # broker -> this run's acks=1 topic
                for acks in ("1", "all"):
                    key = f"produce_{size}_acks{acks}"
                    for n, b in in_order(rep):
                        err.log(f"{n}: {key} run {rep + 1}/{repeat} ({count:,} records)")

                        def produce_once(
                            attempt: int,
                            n=n,
                            b=b,
                            size=size,
                            count=count,
                            acks=acks,
                            rep=rep,
                            created=created,
                        ) -> dict:
                            topic = f"p{size}-acks{acks}-r{rep}-a{attempt}"
                            created[n].append(topic)
                            job = {
                                "job": "produce",
                                "bootstrap": b.bootstrap,
                                "topic": topic,
                                "create_partitions": args.partitions,
                                "size": size,
                                "count": count,
                                "acks": acks,
                                "api": args.producer_api,
                                "partitions": args.partitions,
                                "broker_pid": b.pid,
                            }
                            r = run_producers(job, args.producers)
                            r["topic"] = topic
                            res["brokers"][n]["bytes_written"] = (
                                res["brokers"][n].get("bytes_written", 0) + r["bytes"]
                            )
                            return r

                        r = steady(produce_once, args, f"{n} {key}")
                        res["brokers"][n]["runs"].setdefault(key, []).append(r)
                        if acks == "1":
                            accepted[n] = r["topic"]
                        time.sleep(0.3)
                for key, job_name, extra in (
                    (f"consume_{size}", "consume", {"partitions": args.partitions}),
                    # The broker's side of consuming: a raw Fetch loop that does no per-record
                    # work, so the client's ceiling does not hide the broker's.
                    (f"fetch_raw_{size}", "fetch_raw", {"passes": 3 if args.quick else 10}),
                ):
                    for n, b in in_order(rep):
                        err.log(f"{n}: {key} run {rep + 1}/{repeat}")
                        job = {
                            "job": job_name,
                            "bootstrap": b.bootstrap,
                            "topic": accepted[n],
                            "size": size,
                            "expect": count + args.producers,  # + each producer's warm-up record
                            "broker_pid": b.pid,
                            **extra,
                        }
                        r = steady(lambda attempt, job=job: run_job(job), args, f"{n} {key}")
                        res["brokers"][n]["runs"].setdefault(key, []).append(r)
                        time.sleep(0.3)
                for n, b in brokers.items():
                    # RSS while the run's data is still held, then let it go
                    held = res["brokers"][n].setdefault("mem_with_data", {"rss_mib": 0.0})
                    rss = memory(b.pid)["rss_mib"]
                    if rss >= held["rss_mib"]:
                        res["brokers"][n]["mem_with_data"] = {
                            "rss_mib": rss,
                            "held_bytes": sum(
                                res["brokers"][n]["runs"][f"produce_{size}_acks{a}"][-1]["bytes"]
                                for a in ("1", "all")
                            ),
                        }
                    run_job({"job": "delete", "bootstrap": b.bootstrap, "topics": created[n]})
            for key in (
                f"produce_{size}_acks1",
                f"produce_{size}_acksall",
                f"consume_{size}",
                f"fetch_raw_{size}",
            ):
                for n in brokers:
                    res["brokers"][n]["rows"][key] = pick_run(res["brokers"][n]["runs"][key], args.pick)

        # Per-request CPU swings with how idle the CPUs were (wake-ups cost more from deep
        # idle), so the brokers take turns, several times, and the median run counts.
        cpu_runs: dict[str, list[dict]] = {n: [] for n in brokers}
        for rep in range(repeat):
            for n, b in in_order(rep):
                err.log(f"{n}: CPU per one-record request x{cpu_requests:,} run {rep + 1}/{repeat}")
                job = {
                    "job": "cpu_per_request",
                    "bootstrap": b.bootstrap,
                    "topic": "cpu-per-request",
                    "requests": cpu_requests,
                    "broker_pid": b.pid,
                }
                cpu_runs[n].append(steady(lambda attempt, job=job: run_job(job), args, f"{n} cpu"))
        for n, runs in cpu_runs.items():
            ordered = sorted(runs, key=lambda r: r["cpu_us_per_request"])
            chosen = dict(ordered[(len(ordered) - 1) // 2])
            chosen["all_cpu_us_per_request"] = [r["cpu_us_per_request"] for r in runs]
            res["brokers"][n]["cpu_per_request"] = chosen

        time.sleep(2.0)
        for n, b in brokers.items():
            res["brokers"][n]["mem_after"] = memory(b.pid)

        # After the rows, so that it cannot change the conditions they ran in.
        err.log("machine reference: sustained disk write")
        res["machine"]["sustained_write"] = sustained_write_mb_s(workdir, (2560 << 20) // div)

        # -- optional profiles (extra load, after every measured number) -----------------------
        if args.profile and "odradek" in brokers:
            res["profile"] = run_profiles(brokers["odradek"], args, sizes[1])
    finally:
        for n, b in brokers.items():
            alive = b.proc is not None and b.proc.poll() is None
            rc = b.stop()
            res["brokers"][n]["exit_code"] = rc if alive else f"died earlier ({b.proc.returncode})"
            res["brokers"][n]["log_problems"] = broker_problems(b.log_text(), n)
    res["meta"]["elapsed_s"] = time.perf_counter() - t_start

    if args.json:  # first, so that the numbers survive a report that fails
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
        err.log(f"numbers saved to {args.json}")
    print_report(res, names, args.profile)
    if args.security:
        print_security_rows(args)
    if args.keep or args.workdir:
        err.log(f"work dir kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
