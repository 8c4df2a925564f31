#!/usr/bin/env python
"""Odradek vs tansu, side by side, with confluent-kafka as the load generator.

    python benchmarks/broker_bench.py                 # full run (a few minutes)
    python benchmarks/broker_bench.py --quick         # 10x fewer records, a smoke run
    python benchmarks/broker_bench.py --only odradek --json /tmp/bench.json
    python benchmarks/broker_bench.py --profile /tmp/prof   # + py-spy of Odradek (needs py-spy)

Odradek writes to disk (a temporary log dir); tansu runs with ``memory://`` storage. Both
run as child processes on 127.0.0.1 and are measured in the same run, row by row, one
after the other (never loaded at the same time). Every load job runs in its own
``python _loadgen.py`` process, separate from the brokers and from this orchestrator.

Rows
- produce 100 B x 1M and 1 KB x 300k records, acks=1 and acks=all, into a fresh topic
  (``--partitions``, default 1); timed from the first ``produce()`` to ``flush()`` returning
  (every record acknowledged). One warm-up record per topic is sent before the clock starts.
- consume the acks=1 topics back from the beginning (``fetch.queue.backoff.ms=10``), timed
  from the first non-empty ``consume()`` batch to the last record.
- startup: spawn → first successful Metadata v1 answer on a raw socket (median of several
  fresh starts; Odradek's include creating an empty data dir).
- RSS (``VmRSS`` from /proc/PID/status) when idle after startup and after every row has run.
- broker CPU per one-record Produce request: ``linger.ms=0``, ``max.in.flight=1``, each
  record awaited (``flush()``) before the next, so each request carries one record; broker
  utime+stime (/proc/PID/stat) over the loop divided by the number of requests.

The generator: ``produce()`` in a tight loop with ``poll(0)`` every 20k records, a queue big
enough for the whole run (``queue.buffering.max.messages``), ``linger.ms=5``, no per-record
delivery callback (``delivery.report.only.error``). The reference rows show its ceiling
(enqueueing into librdkafka with no broker at all) next to the machine's loopback and disk
speed. Each throughput cell also shows broker CPU (cores) and the generator's Python thread
busy share, so a reader can tell which side was saturated. With 2 cores the broker, the
Python loop and librdkafka's threads share the machine: the 100 B produce rows are capped by
the generator (its ~1M records/s enqueue ceiling plus librdkafka's own per-record work), not
by the brokers.
"""

from __future__ import annotations

import argparse
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

from _brokers import BROKERS, Broker, cpu_seconds, proc_status, rss_mib, tansu_version  # noqa: E402
from _machine import disk_write_mb_s, loopback_mb_s  # noqa: E402
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


def run_job(job: dict, timeout: float = 600) -> dict:
    proc = subprocess.run(
        [sys.executable, str(LOADGEN), json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"load job {job['job']} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    stderr = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    if stderr:
        result["stderr"] = stderr[-10:]
    return result


def median_by(results: list[dict], key: str) -> dict:
    ordered = sorted(results, key=lambda r: r[key])
    return ordered[(len(ordered) - 1) // 2]


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
# profiling (optional, extra runs outside the table's numbers)


def profiled(pid: int, out: Path, job: dict, rate: int) -> dict:
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        raise RuntimeError("py-spy not found (pip install py-spy)")
    cmd = [pyspy, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate), "-o", str(out)]
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


def fmt_rate(r: dict | None) -> str:
    if not r:
        return "—"
    msgs = r["msgs_per_s"]
    msgs_txt = f"{msgs / 1e6:.2f}M" if msgs >= 1e6 else f"{msgs / 1e3:,.0f}k"
    text = f"{msgs_txt} msg/s\n{r['mb_per_s']:,.1f} MB/s"
    busy = []
    if "broker_cpu" in r:
        busy.append(f"broker {r['broker_cpu']:.2f} CPU")
    if "gen_main_thread_cpu" in r:
        busy.append(f"gen py {r['gen_main_thread_cpu']:.0%}")
    if busy:
        text += "\n[dim]" + " · ".join(busy) + "[/dim]"
    return text


def verdict(ok: bool | None, detail: str = "") -> str:
    if ok is None:
        return "[dim]n/a[/dim]"
    mark = "[green]✓ met[/green]" if ok else "[red]✗ missed[/red]"
    return f"{mark} {detail}".strip()


def ratio_cells(od: float | None, ta: float | None, minimum: float) -> tuple[str, str]:
    if not od or not ta:
        return "—", verdict(None)
    ratio = od / ta
    return f"{ratio:.2f}×", verdict(ratio >= minimum, f"({ratio / minimum:.0%} of target)")


def build_table(res: dict, names: list[str]) -> Table:
    quick = res["meta"]["quick"]
    t = Table(
        title=f"Odradek vs tansu — {res['meta']['cpus']} CPUs, {res['meta']['partitions']} partition(s)/topic"
        + (" — QUICK (10× fewer records)" if quick else ""),
        caption=(
            "Throughput = payload bytes (10^6 B = 1 MB) of records acknowledged / consumed per second; "
            "median of --repeat runs. Dim lines: broker CPU in cores and the generator's Python thread "
            "busy share during the timed section. Odradek writes to disk; tansu keeps data in memory. "
            "Reference rows are properties of the machine and of the load generator, not of a broker."
        ),
        show_lines=True,
    )
    t.add_column("Metric", style="bold")
    for n in names:
        t.add_column("Odradek" if n == "odradek" else "tansu", justify="right")
    both = len(names) == 2
    if both:
        t.add_column("Odradek ÷ tansu", justify="right")
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

    sizes = res["meta"]["sizes"]
    for size, count in sizes:
        label = "100 B" if size == 100 else "1 KB"
        minimum = TARGETS[f"produce_{size}"]
        for acks in ("1", "all"):
            key = f"produce_{size}_acks{acks}"
            od, ta = get("odradek", "rows", key), get("tansu", "rows", key)
            r_txt, v_txt = ratio_cells(od and od["msgs_per_s"], ta and ta["msgs_per_s"], minimum)
            row(
                f"produce {label} × {count:,} (acks={acks})",
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
        row(
            f"consume {label} × {count:,}",
            {n: fmt_rate(get(n, "rows", key)) for n in names},
            r_txt,
            f"≥ {TARGETS['consume']}× tansu",
            v_txt,
        )

    # startup
    cells = {}
    for n in names:
        s = get(n, "startup")
        if s:
            cells[n] = f"{s['median_ms']:.0f} ms\n[dim]{min(s['runs_ms']):.0f}–{max(s['runs_ms']):.0f} ms, n={len(s['runs_ms'])}[/dim]"
    od_s, ta_s = get("odradek", "startup", "median_ms"), get("tansu", "startup", "median_ms")
    row(
        "startup: spawn → first Metadata answer",
        cells,
        f"{od_s / ta_s:.0f}×" if od_s and ta_s else "—",
        f"< {TARGETS['startup_ms']} ms",
        verdict(od_s < TARGETS["startup_ms"], f"({od_s:.0f} ms)") if od_s else verdict(None),
    )

    # memory
    cells = {n: f"{get(n, 'mem_idle', 'rss_mib'):.1f} MiB" for n in names if get(n, "mem_idle")}
    od_i = get("odradek", "mem_idle", "rss_mib")
    ta_i = get("tansu", "mem_idle", "rss_mib")
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
            cells[n] = (
                f"{m['rss_mib']:.1f} MiB (+{m['rss_mib'] - i['rss_mib']:.1f})\n"
                f"[dim]peak {m['hwm_mib']:.0f} · anon {m['anon_mib']:.0f} · file {m['file_mib']:.0f}[/dim]"
            )
    od_a = get("odradek", "mem_after")
    written = get("odradek", "bytes_written") or get("tansu", "bytes_written") or 0
    ta_a = get("tansu", "mem_after", "rss_mib")
    row(
        f"RSS after the run ({written / 1e9:.2f} GB written)",
        cells,
        f"{od_a['rss_mib'] / ta_a:.2f}×" if od_a and ta_a else "—",
        f"< {TARGETS['rss_mib']} MiB, not growing",
        verdict(od_a["rss_mib"] < TARGETS["rss_mib"], f"(+{od_a['rss_mib'] - od_i:.1f} MiB)")
        if od_a and od_i
        else verdict(None),
    )

    # CPU per request
    cells = {}
    for n in names:
        c = get(n, "cpu_per_request")
        if c:
            cells[n] = (
                f"{c['cpu_us_per_request']:.0f} µs CPU/req\n"
                f"[dim]schedstat {c['sched_us_per_request']:.0f} µs · RTT {c['latency_us']:.0f} µs · n={c['requests']:,}[/dim]"
            )
    od_c = get("odradek", "cpu_per_request", "cpu_us_per_request")
    ta_c = get("tansu", "cpu_per_request", "cpu_us_per_request")
    if od_c and ta_c:
        ratio = od_c / ta_c
        r_txt = f"{ratio:.2f}×"
        v_txt = verdict(ratio <= TARGETS["cpu_ratio"], f"({TARGETS['cpu_ratio'] / ratio:.0%} of target)")
    else:
        r_txt, v_txt = "—", verdict(None)
    row("broker CPU per one-record Produce (linger.ms=0)", cells, r_txt, f"≤ {TARGETS['cpu_ratio']}× tansu", v_txt)

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
        ref("loopback TCP, 1 stream (socket pair)", f"{m['loopback_mb_s']:,.0f} MB/s", "most one connection can carry")
    if "disk_mb_s" in m:
        ref(
            "disk write, 1 MiB os.write (work dir)",
            f"{m['disk_mb_s']:,.0f} MB/s\n[dim]{m['disk_fsync_mb_s']:,.0f} MB/s incl. fsync[/dim]",
            "Odradek's log file system",
        )
    for size, _ in sizes:
        e = m.get(f"enqueue_{size}")
        if e:
            ref(
                f"generator ceiling: produce() {'100 B' if size == 100 else '1 KB'}, no broker",
                fmt_rate({k: v for k, v in e.items() if k != "gen_main_thread_cpu"}),
                "upper bound for produce rows",
            )
    for n in names:
        idle = get(n, "idle_cpu_per_s")
        if idle is not None:
            ref(f"{n} idle CPU", f"{idle * 1000:.1f} ms CPU/s", "background cost, not subtracted")
    return t


# ---------------------------------------------------------------------------------------------
# log scan


_NOISE = re.compile(r"^\S+ \S+ ")


def broker_problems(text: str, name: str) -> list[str]:
    pat = (
        re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b")
        if name == "odradek"
        else re.compile(r"\b(WARN|ERROR|panicked)\b")
    )
    seen: dict[str, int] = {}
    out = []
    for line in text.splitlines():
        if line.startswith("%"):  # librdkafka chatter of a client, not the broker
            continue
        if pat.search(line):
            key = _NOISE.sub("", line)[:200]
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 1 and len(out) < 30:
                out.append(line[:400])
    return out


# ---------------------------------------------------------------------------------------------
# main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10x fewer records (a smoke run)")
    ap.add_argument("--only", choices=sorted(BROKERS), help="run one broker only")
    ap.add_argument("--json", metavar="PATH", help="save all numbers as JSON")
    ap.add_argument("--partitions", type=int, default=1, help="partitions per topic (default 1)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per throughput row; the median is shown")
    ap.add_argument("--startup-runs", type=int, default=None, help="fresh starts per broker (default 7, quick 3)")
    ap.add_argument("--cpu-requests", type=int, default=None, help="one-record requests (default 5000, quick 1000)")
    ap.add_argument("--workdir", help="where brokers keep logs and data (default: a temp dir, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--profile", metavar="DIR", help="also py-spy Odradek under produce-1KB and consume-1KB loads")
    ap.add_argument("--profile-rate", type=int, default=200)
    args = ap.parse_args(argv)

    div = 10 if args.quick else 1
    sizes = [(100, 1_000_000 // div), (1024, 300_000 // div)]
    names = [args.only] if args.only else ["odradek", "tansu"]
    startup_runs = args.startup_runs or (3 if args.quick else 7)
    cpu_requests = args.cpu_requests or (1000 if args.quick else 5000)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="odradek-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)

    import confluent_kafka

    res: dict = {
        "meta": {
            "quick": args.quick,
            "partitions": args.partitions,
            "repeat": args.repeat,
            "sizes": sizes,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
            "tansu": tansu_version() if "tansu" in names else None,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
        },
        "machine": {},
        "brokers": {n: {"rows": {}, "runs": {}} for n in names},
    }
    t_start = time.perf_counter()
    brokers: dict[str, Broker] = {}
    try:
        # -- reference points ---------------------------------------------------------------
        err.log("machine reference: loopback, disk, generator ceiling")
        res["machine"]["loopback_mb_s"] = loopback_mb_s((2 << 30) // div)
        res["machine"]["disk_mb_s"], res["machine"]["disk_fsync_mb_s"] = disk_write_mb_s(workdir, (512 << 20) // div)
        for size, count in sizes:
            res["machine"][f"enqueue_{size}"] = run_job({"job": "enqueue", "size": size, "count": count})

        # -- startup -------------------------------------------------------------------------
        for n in names:
            err.log(f"{n}: startup x{startup_runs}")
            res["brokers"][n]["startup"] = measure_startup(BROKERS[n], workdir, startup_runs)

        # -- the brokers under load ------------------------------------------------------------
        for n in names:
            brokers[n] = BROKERS[n](workdir)
            brokers[n].start()
        time.sleep(1.0)
        for n, b in brokers.items():
            res["brokers"][n]["pid"] = b.pid
            res["brokers"][n]["mem_idle"] = memory(b.pid)
            res["brokers"][n]["idle_cpu_per_s"] = idle_cpu_per_s(b.pid, 1.0)

        topics = [f"p{size}-acks{acks}-r{rep}" for size, _ in sizes for acks in ("1", "all") for rep in range(args.repeat)]
        topics.append("cpu-per-request")
        for n, b in brokers.items():
            run_job({"job": "create", "bootstrap": b.bootstrap, "topics": topics, "partitions": args.partitions})

        for size, count in sizes:
            for acks in ("1", "all"):
                key = f"produce_{size}_acks{acks}"
                for rep in range(args.repeat):
                    for n, b in brokers.items():
                        err.log(f"{n}: {key} run {rep + 1}/{args.repeat} ({count:,} records)")
                        r = run_job(
                            {
                                "job": "produce",
                                "bootstrap": b.bootstrap,
                                "topic": f"p{size}-acks{acks}-r{rep}",
                                "size": size,
                                "count": count,
                                "acks": acks,
                                "broker_pid": b.pid,
                            }
                        )
                        res["brokers"][n]["runs"].setdefault(key, []).append(r)
                        res["brokers"][n]["bytes_written"] = res["brokers"][n].get("bytes_written", 0) + r["bytes"]
                        time.sleep(0.5)
                for n in brokers:
                    res["brokers"][n]["rows"][key] = median_by(res["brokers"][n]["runs"][key], "msgs_per_s")

        for size, count in sizes:
            key = f"consume_{size}"
            for rep in range(args.repeat):
                for n, b in brokers.items():
                    err.log(f"{n}: {key} run {rep + 1}/{args.repeat}")
                    r = run_job(
                        {
                            "job": "consume",
                            "bootstrap": b.bootstrap,
                            "topic": f"p{size}-acks1-r{rep}",
                            "size": size,
                            "expect": count + 1,
                            "partitions": args.partitions,
                            "broker_pid": b.pid,
                        }
                    )
                    res["brokers"][n]["runs"].setdefault(key, []).append(r)
                    time.sleep(0.5)
            for n in brokers:
                res["brokers"][n]["rows"][key] = median_by(res["brokers"][n]["runs"][key], "msgs_per_s")

        for n, b in brokers.items():
            err.log(f"{n}: CPU per one-record request x{cpu_requests:,}")
            res["brokers"][n]["cpu_per_request"] = run_job(
                {
                    "job": "cpu_per_request",
                    "bootstrap": b.bootstrap,
                    "topic": "cpu-per-request",
                    "requests": cpu_requests,
                    "broker_pid": b.pid,
                }
            )

        time.sleep(2.0)
        for n, b in brokers.items():
            res["brokers"][n]["mem_after"] = memory(b.pid)

        # -- optional profiles (extra load, after every measured number) -----------------------
        if args.profile and "odradek" in brokers:
            b = brokers["odradek"]
            pdir = Path(args.profile)
            pdir.mkdir(parents=True, exist_ok=True)
            size, count = sizes[1]
            run_job({"job": "create", "bootstrap": b.bootstrap, "topics": ["profile-1k"], "partitions": args.partitions})
            err.log("odradek: py-spy during produce 1 KB")
            res["profile"] = {
                "produce": profiled(
                    b.pid,
                    pdir / "produce-1k.txt",
                    {"job": "produce", "bootstrap": b.bootstrap, "topic": "profile-1k", "size": size, "count": count,
                     "acks": "1", "broker_pid": b.pid},
                    args.profile_rate,
                )
            }
            err.log("odradek: py-spy during consume 1 KB")
            res["profile"]["consume"] = profiled(
                b.pid,
                pdir / "consume-1k.txt",
                {"job": "consume", "bootstrap": b.bootstrap, "topic": "profile-1k", "size": size, "expect": count + 1,
                 "partitions": args.partitions, "broker_pid": b.pid},
                args.profile_rate,
            )
    finally:
        for n, b in brokers.items():
            alive = b.proc is not None and b.proc.poll() is None
            rc = b.stop()
            if n in res["brokers"]:
                res["brokers"][n]["exit_code"] = rc if alive else f"died earlier ({b.proc.returncode})"
                res["brokers"][n]["log_problems"] = broker_problems(b.log_text(), n)
    res["meta"]["elapsed_s"] = time.perf_counter() - t_start

    console = Console() if sys.stdout.isatty() else Console(width=150)
    console.print(build_table(res, names))
    console.print(f"[dim]{res['meta']['command']} · {res['meta']['elapsed_s']:.0f} s · confluent-kafka "
                  f"{res['meta']['confluent_kafka']} / librdkafka {res['meta']['librdkafka']} · "
                  f"{res['meta']['tansu'] or ''}[/dim]")

    problems = []
    for n in names:
        bres = res["brokers"][n]
        for line in bres.get("log_problems", []):
            problems.append(f"{n} log: {line}")
        for key, runs in bres["runs"].items():
            for r in runs:
                if r.get("undelivered") or r.get("failed"):
                    problems.append(f"{n} {key}: {r.get('failed')} failed, {r.get('undelivered')} undelivered {r.get('failures')}")
                if "expected" in r and r["count"] != r["expected"]:
                    problems.append(f"{n} {key}: consumed {r['count']:,} of {r['expected']:,}")
                for e in r.get("message_errors", []) + r.get("client_errors", []):
                    problems.append(f"{n} {key}: client saw: {e}")
    if problems:
        console.print("[yellow]Problems seen:[/yellow]")
        for p in dict.fromkeys(problems):
            console.print(f"  {p}", markup=False)

    if args.profile and "profile" in res:
        from profile_summary import format_top, summarize

        for what in ("produce", "consume"):
            path = Path(args.profile) / f"{what}-1k.txt"
            if path.exists():
                s = summarize(path)
                r = res["profile"][what]
                console.print(f"\n[bold]py-spy: Odradek during {what} 1 KB[/bold] ({s['samples']} samples, "
                              f"{r['msgs_per_s']:,.0f} msg/s while profiled) — top 15 by self time")
                console.print(format_top(s, 15, "self"), markup=False, highlight=False)

    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
        err.log(f"numbers saved to {args.json}")
    if not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    elif args.keep:
        err.log(f"work dir kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
