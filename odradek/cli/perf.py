"""``odradek perf``: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

Both show a live progress bar on stderr (when it is a terminal) and end with
records/s, MB/s and latency percentiles: for produce, send → acknowledgement per record
(Kafka's definition); for consume, record timestamp → receipt (end to end: meaningful
when the records are being produced while the test runs), plus the time between polls
that returned records. Ctrl-C ends a test early: the statistics so far are printed,
then the exit status is 130.
"""

from __future__ import annotations

import random
import string
import sys
import threading
import time

import click

from odradek.cli.common import (
    EXIT_INTERRUPTED,
    CliError,
    client_command,
    one_name,
    parse_key_values,
    topic_arguments,
)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(int(len(sorted_values) * q), len(sorted_values) - 1)
    return sorted_values[i]


def latency_summary(latencies_ms: list[float]) -> dict:
    vals = sorted(latencies_ms)
    if not vals:
        return {"avg_ms": 0.0, "max_ms": 0.0, "p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0}
    return {
        "avg_ms": sum(vals) / len(vals),
        "max_ms": vals[-1],
        "p50_ms": percentile(vals, 0.5),
        "p95_ms": percentile(vals, 0.95),
        "p99_ms": percentile(vals, 0.99),
        "p999_ms": percentile(vals, 0.999),
    }


def _progress(session, total: int | None, enabled: bool, label: str):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
    ]
    progress = Progress(
        *columns, console=session.err_console, disable=not enabled, transient=False, refresh_per_second=8
    )
    task = progress.add_task(label, total=total, rate="")
    return progress, task


def _rate_text(count: int, nbytes: int, elapsed: float) -> str:
    if elapsed <= 0:
        return ""
    return f"{count / elapsed:,.0f} rec/s  {nbytes / elapsed / 1048576:,.2f} MB/s"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def perf():
    """Measure producer and consumer throughput and latency.

    \b
    Examples:
      odradek perf produce --topic perf --num-records 100000 --record-size 100
      odradek perf consume --topic perf --messages 100000
    """


@perf.command("produce")
@topic_arguments()
@click.option(
    "--num-records",
    "-n",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Records to send.",
)
@click.option(
    "--record-size",
    "-s",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Value size in bytes.",
)
@click.option(
    "--payload-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Take values from the lines of this file instead.",
)
@click.option(
    "--throughput", type=int, default=-1, show_default=True, help="Records per second at most (-1: no limit)."
)
@click.option("--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True)
@click.option(
    "--compression-type",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@click.option(
    "--producer-props",
    "producer_props",
    multiple=True,
    metavar="K=V",
    help="Producer properties, comma-separated or repeated, e.g. linger.ms=10,batch.size=65536.",
)
@click.option("--no-progress", is_flag=True, help="No live progress bar.")
@click.option(
    "--reporting-interval",
    type=click.IntRange(min=0),
    default=0,
    help="Print Kafka-style interval lines every N ms (0: none).",
)
@client_command
def produce_perf(
    session,
    topic,
    topic_opt,
    num_records,
    record_size,
    payload_file,
    throughput,
    acks,
    compression_type,
    producer_props,
    no_progress,
    reporting_interval,
):
    """Send records as fast as allowed; report records/s, MB/s and latency percentiles.

    \b
    Examples:
      odradek perf produce --topic perf --num-records 100000 --record-size 100
      odradek perf produce perf -n 50000 --throughput 10000 --acks 1 --producer-props linger.ms=10,batch.size=65536
      odradek perf produce perf -n 10000 -o json
    """
    name = one_name(topic, topic_opt, "topic")
    props = parse_key_values(producer_props, "--producer-props")
    props.setdefault("acks", acks)
    props.setdefault("compression.type", compression_type)
    if payload_file:
        with open(payload_file, "rb") as f:
            payloads = [line for line in f.read().split(b"\n") if line]
        if not payloads:
            raise CliError(f"{payload_file} has no non-empty lines", "give a file with one payload per line")
    else:
        rnd = random.Random(0)
        payloads = [bytes(rnd.choice(string.ascii_uppercase.encode()) for _ in range(record_size))]

    latencies: list[float] = []
    errors: list[BaseException] = []
    acked = [0]
    acked_bytes = [0]
    lock = threading.Lock()

    def make_callback(sent_at: float, size: int):
        def done(fut):
            lat = (time.perf_counter() - sent_at) * 1000
            exc = fut.exception(0)
            with lock:
                if exc is not None:
                    errors.append(exc)
                else:
                    latencies.append(lat)
                    acked[0] += 1
                    acked_bytes[0] += size

        return done

    show = not no_progress and not session.json
    progress, task = _progress(session, num_records, show and session.err_console.is_terminal, "produce")
    sent_bytes = 0
    with session.producer(**props) as producer:
        from odradek.cli.console_producer import _partition_count

        _partition_count(session, producer, name)  # metadata (and auto-creation) outside the measured time
        start = time.perf_counter()
        last_report = start
        window = [0, 0, 0.0, 0.0]  # records, bytes, latency sum, latency max (since last report)
        interrupted = False
        with progress:
            try:
                for i in range(num_records):
                    payload = payloads[i % len(payloads)]
                    now = time.perf_counter()
                    if throughput > 0:
                        ahead = (i / throughput) - (now - start)
                        if ahead > 0:
                            time.sleep(ahead)
                            now = time.perf_counter()
                    producer.send(name, payload).add_done_callback(make_callback(now, len(payload)))
                    sent_bytes += len(payload)
                    if errors:
                        break
                    if i % 2000 == 0:
                        elapsed = now - start
                        progress.update(
                            task, completed=acked[0], rate=_rate_text(acked[0], acked_bytes[0], elapsed)
                        )
                        if reporting_interval and (now - last_report) * 1000 >= reporting_interval:
                            last_report = _interval_line(latencies, acked, acked_bytes, window, now, last_report)
            except KeyboardInterrupt:
                interrupted = True  # report what was acknowledged so far
            producer.flush()
            end = time.perf_counter()
            progress.update(task, completed=acked[0], rate=_rate_text(acked[0], acked_bytes[0], end - start))
    if errors:
        raise CliError(
            f"{len(errors)} records failed; the first: {errors[0]}",
            "see the error above; the broker log may say more",
        )
    elapsed = end - start
    summary = {
        "topic": name,
        "records": acked[0],
        "bytes": acked_bytes[0],
        "elapsed_s": elapsed,
        "records_per_sec": acked[0] / elapsed if elapsed else 0.0,
        "mb_per_sec": acked_bytes[0] / elapsed / 1048576 if elapsed else 0.0,
        **latency_summary(latencies),
        "interrupted": interrupted,
    }
    if session.json:
        session.print_json(summary)
    else:
        s = summary
        if interrupted:
            session.info(f"Interrupted: {acked[0]} of {num_records} records sent.")
        click.echo(
            f"{s['records']} records sent, {s['records_per_sec']:.1f} records/sec ({s['mb_per_sec']:.2f} MB/sec), "
            f"{s['avg_ms']:.2f} ms avg latency, {s['max_ms']:.2f} ms max latency, {s['p50_ms']:.0f} ms 50th, "
            f"{s['p95_ms']:.0f} ms 95th, {s['p99_ms']:.0f} ms 99th, {s['p999_ms']:.0f} ms 99.9th."
        )
    if interrupted:
        sys.exit(EXIT_INTERRUPTED)


def _interval_line(latencies, acked, acked_bytes, window, now, last_report) -> float:
    n = acked[0] - window[0]
    b = acked_bytes[0] - window[1]
    recent = latencies[window[0] :] if len(latencies) > window[0] else []
    span = now - last_report
    avg = sum(recent) / len(recent) if recent else 0.0
    click.echo(
        f"{n} records sent, {n / span:.1f} records/sec ({b / span / 1048576:.2f} MB/sec), "
        f"{avg:.1f} ms avg latency, {max(recent, default=0.0):.1f} ms max latency."
    )
    window[0], window[1] = acked[0], acked_bytes[0]
    return now


@perf.command("consume")
@topic_arguments()
@click.option(
    "--messages",
    "-n",
    type=click.IntRange(min=1),
    help="Records to consume (default: everything up to the end at start).",
)
@click.option(
    "--group",
    "-g",
    metavar="GROUP",
    help="Consume as a member of GROUP (default: assign all partitions, no group).",
)
@click.option(
    "--from-latest",
    is_flag=True,
    help="Start at the end and wait for new records (default: from the beginning).",
)
@click.option(
    "--timeout",
    "timeout_ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Stop after this many ms without records.",
)
@click.option(
    "--consumer-props",
    "consumer_props",
    multiple=True,
    metavar="K=V",
    help="Consumer properties, comma-separated or repeated.",
)
@click.option("--no-progress", is_flag=True, help="No live progress bar.")
@client_command
def consume_perf(
    session, topic, topic_opt, messages, group, from_latest, timeout_ms, consumer_props, no_progress
):
    """Consume records as fast as possible; report records/s, MB/s and latency percentiles.

    \b
    Examples:
      odradek perf consume --topic perf --messages 100000
      odradek perf consume perf --group perf-test --timeout 5000
      odradek perf consume perf -o json
    """
    from odradek.client.structs import TopicPartition

    name = one_name(topic, topic_opt, "topic")
    props = parse_key_values(consumer_props, "--consumer-props")
    props.setdefault("allow.auto.create.topics", "false")
    props.setdefault("auto.offset.reset", "latest" if from_latest else "earliest")
    props.setdefault("enable.auto.commit", "true" if group else "false")
    if group:
        props["group.id"] = group
    show = not no_progress and not session.json
    count = nbytes = 0
    e2e: list[float] = []
    gaps: list[float] = []
    with session.consumer(**props) as consumer:
        if name not in consumer.topics():
            raise CliError(f"topic {name!r} does not exist", "check the name with `odradek topics list`")
        tps = [TopicPartition(name, p) for p in sorted(consumer.partitions_for_topic(name))]
        target = messages
        if target is None and not from_latest:
            ends = consumer.end_offsets(tps)
            starts = consumer.beginning_offsets(tps)
            target = sum(ends[tp] - starts[tp] for tp in tps)
            if target == 0:
                raise CliError(
                    f"topic {name!r} is empty",
                    f"fill it first, e.g. `odradek perf produce {name}`, or give --messages and --from-latest",
                )
        if group:
            consumer.subscribe([name])
        else:
            consumer.assign(tps)
            if from_latest:
                consumer.seek_to_end(tps)
            else:
                consumer.seek_to_beginning(tps)
        progress, task = _progress(session, target, show and session.err_console.is_terminal, "consume")
        start = time.perf_counter()
        first = last = None
        idle_since = time.perf_counter()
        interrupted = False
        with progress:
            try:
                while target is None or count < target:
                    records = consumer.poll(0.1)
                    now = time.perf_counter()
                    if not records:
                        if (now - idle_since) * 1000 >= timeout_ms:
                            break
                        continue
                    wall_ms = time.time() * 1000
                    if last is not None:
                        gaps.append((now - last) * 1000)
                    first = first or now
                    last = idle_since = now
                    for r in records:
                        count += 1
                        nbytes += (len(r.value) if r.value else 0) + (len(r.key) if r.key else 0)
                        if r.timestamp >= 0:
                            e2e.append(max(wall_ms - r.timestamp, 0.0))
                    progress.update(task, completed=count, rate=_rate_text(count, nbytes, now - start))
            except KeyboardInterrupt:
                interrupted = True  # report what was consumed so far
    end = last or time.perf_counter()
    elapsed = max(end - start, 1e-9)
    summary = {
        "topic": name,
        "records": count,
        "bytes": nbytes,
        "elapsed_s": elapsed,
        "records_per_sec": count / elapsed,
        "mb_per_sec": nbytes / elapsed / 1048576,
        "end_to_end_latency": latency_summary(e2e),
        "poll_interval": latency_summary(gaps),
        "interrupted": interrupted,
    }
    if session.json:
        session.print_json(summary)
    else:
        _print_consume_summary(summary, target, timeout_ms, session)
    if interrupted:
        sys.exit(EXIT_INTERRUPTED)


def _print_consume_summary(s: dict, target: int | None, timeout_ms: int, session) -> None:
    count, elapsed = s["records"], s["elapsed_s"]
    if s["interrupted"]:
        session.info(f"Interrupted: {count}{f' of {target}' if target is not None else ''} records consumed.")
    elif target is not None and count < target:
        session.info(
            f"Warning: consumed {count} of {target} records before --timeout ({timeout_ms} ms) without new ones."
        )
    lat = s["end_to_end_latency"]
    click.echo(
        f"{count} records consumed, {s['records_per_sec']:.1f} records/sec ({s['mb_per_sec']:.2f} MB/sec) in {elapsed:.2f} s"
    )
    click.echo(
        f"end-to-end latency (record timestamp to receipt): {lat['avg_ms']:.1f} ms avg, {lat['max_ms']:.1f} ms max, "
        f"{lat['p50_ms']:.0f} ms 50th, {lat['p95_ms']:.0f} ms 95th, {lat['p99_ms']:.0f} ms 99th, {lat['p999_ms']:.0f} ms 99.9th"
    )
    gap = s["poll_interval"]
    click.echo(
        f"time between polls with records: {gap['p50_ms']:.2f} ms 50th, {gap['p99_ms']:.2f} ms 99th, {gap['max_ms']:.2f} ms max"
    )
