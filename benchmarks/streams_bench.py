"""Streams benchmark: Kafka's WordCount three ways against the same broker, one table.

    python benchmarks/streams_bench.py                      # starts its own broker
    python benchmarks/streams_bench.py --bootstrap 127.0.0.1:9092 --lines 200000

1. **DSL** — ``odradek.streams`` (``StreamsBuilder``: ``flat_map_values(split)``, ``group_by``,
   ``count``, ``to``), run by ``KafkaStreams`` on ``--master`` (default ``local[2]``); skipped with a
   note when the DSL is not installed;
2. **PySpark** — the same word count written directly in PySpark (``readStream`` from the ``odradek``
   data source, ``explode(split)``, ``groupBy().count()``, counts as Kafka longs, ``update`` mode);
3. **faust** — the same in ``faust-streaming`` (a ``Table`` of counts; ``pip install '.[benchmark]'``).

Each app is started and counts one warm-up line first (its start-up time, in the table: the
JVM, Python workers, the first micro-batch); then ``--lines`` lines (``--words`` words each, from a
vocabulary of ``--vocabulary`` words) are produced, and throughput is input records/s from the
start of that production to the moment every word is counted in the output; then end-to-end
latency: one probe line (a fresh word) every ``1/--rate`` s; a consumer of the output topic stamps
when the probe's count arrives; p50/p99.
The commit interval (the trigger) is ``--commit-interval-ms`` (default 100) for all three.

Targets (issue 28): DSL ≤ 1.15× the PySpark time per record; ≥ 3× faust's throughput; p99 ≤ 1 s.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid

from odradek.pipeline import worker_python

os.environ.setdefault("PYSPARK_PYTHON", worker_python())


def produce_lines(bootstrap: str, topic: str, n: int, words: int, vocabulary: int) -> None:
    from confluent_kafka import Producer

    rng = random.Random(28)
    vocab = [f"w{i}" for i in range(vocabulary)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for _ in range(n):
        producer.produce(topic, " ".join(rng.choice(vocab) for _ in range(words)).encode())
        producer.poll(0)
    producer.flush(60)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep the handle alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


class OutputWatcher:
    """Consumes the output topic from the start; records when each key's latest count arrived."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"watch-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([topic])
        self.counts: dict[bytes, int] = {}
        self.arrived: dict[bytes, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self.consumer.consume(1000, 0.2):
                if msg.error() or msg.key() is None or msg.value() is None:
                    continue
                self.counts[msg.key()] = int.from_bytes(msg.value(), "big", signed=True)
                self.arrived.setdefault(msg.key(), time.monotonic())

    def total(self) -> int:
        return sum(self.counts.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def measure(
    bootstrap: str, out_topic: str, in_topic: str, args, start, stop, lines: int | None = None, queries=None
) -> dict:
    """Start the app (``start()``) and wait for it to count one warm-up line (its start-up: JVM,
    Python workers, the first micro-batch); then time the bulk (produced now, counted when every
    word is in the output), then the probes; ``stop()`` ends the app."""
    from confluent_kafka import Producer

    lines = lines or args.lines
    watcher = OutputWatcher(bootstrap, out_topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    began = time.monotonic()
    start()
    sent: dict[bytes, float] = {}
    try:
        warm = f"warmup{uuid.uuid4().hex[:6]}".encode()
        producer.produce(in_topic, warm)
        producer.flush(10)
        deadline = began + args.timeout
        while warm not in watcher.arrived and time.monotonic() < deadline:
            time.sleep(0.02)
        if warm not in watcher.arrived:
            return {"error": f"no output within {args.timeout}s of the start"}
        startup = time.monotonic() - began
        expected_words = lines * args.words + 1
        bulk_began = time.monotonic()
        produce_lines(bootstrap, in_topic, lines, args.words, args.vocabulary)
        deadline = bulk_began + args.timeout
        while watcher.total() < expected_words and time.monotonic() < deadline:
            time.sleep(0.02)
        if watcher.total() < expected_words:
            return {"error": f"counted {watcher.total()} of {expected_words} words in {args.timeout}s"}
        elapsed = time.monotonic() - bulk_began
        for i in range(args.probes):
            word = f"probe{i}x{uuid.uuid4().hex[:6]}".encode()
            sent[word] = time.monotonic()
            producer.produce(in_topic, word)
            producer.flush(10)
            time.sleep(1 / args.rate)
        wait_end = time.monotonic() + 30
        while any(w not in watcher.arrived for w in sent) and time.monotonic() < wait_end:
            time.sleep(0.02)
        latencies = sorted((watcher.arrived[w] - t) * 1000 for w, t in sent.items() if w in watcher.arrived)
        phases = micro_batch_phases(queries() if queries else [])
    finally:
        stop()
        watcher.close()
    return {
        "records_per_s": lines / elapsed,
        "lines": lines,
        "startup_s": startup,
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else None,
        "probes_lost": len(sent) - len(latencies),
        "phases": phases,
    }


PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def micro_batch_phases(queries) -> dict:
    """Where the micro-batches that had input spent their time, from Spark's progress reports:
    the batch duration (``triggerExecution``) and each phase (``durationMs``: latestOffset,
    getBatch, queryPlanning, addBatch, walCommit, commitOffsets), plus the state store's updates
    and commit (inside addBatch), each as p50/p99 ms; with several queries (an app's aggregations)
    a phase is summed over the queries of the same batch index, as they run one beside another."""
    per_batch: dict[int, dict[str, float]] = {}
    for query in queries:
        for progress in query.recentProgress:
            if not progress.get("numInputRows"):
                continue
            batch = per_batch.setdefault(len(per_batch), {})
            durations = progress["durationMs"]
            batch["batch"] = batch.get("batch", 0) + durations.get("triggerExecution", 0)
            for phase in PHASES:
                batch[phase] = batch.get(phase, 0) + durations.get(phase, 0)
            for operator in progress.get("stateOperators", []):
                batch["state updates"] = batch.get("state updates", 0) + operator.get("allUpdatesTimeMs", 0)
                batch["state commit"] = batch.get("state commit", 0) + operator.get("commitTimeMs", 0)
    if not per_batch:
        return {}
    summary = {}
    for name in per_batch[0]:
        values = sorted(b.get(name, 0) for b in per_batch.values())
        summary[name] = (statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))])
    summary["batches"] = len(per_batch)
    return summary


def load_average() -> str:
    """The machine's 1/5/15-minute load (other processes share the cores: read the times with it)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def pyspark_wordcount(
    spark, bootstrap: str, in_topic: str, out_topic: str, checkpoint: str, interval_ms: int
):
    """The hand-written word count: the baseline the DSL is measured against."""
    from pyspark.sql import functions as F

    from odradek.streams.serdes import Serdes

    lines = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    words = lines.select(F.explode(F.split(F.lower(F.col("value").cast("string")), r"\W+")).alias("word"))
    counts = words.where(F.col("word") != "").groupBy("word").count()
    out = counts.select(
        Serdes.String().spark_encode(F.col("word")).alias("key"),
        Serdes.Long().spark_encode(F.col("count")).alias("value"),
    )

    def write(batch, _batch_id):  # the odradek sink appends; a batch of updates is appended as is
        batch.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", out_topic
        ).save()

    return (
        out.writeStream.outputMode("update")
        .foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{interval_ms} milliseconds")
        .start()
    )


def dsl_wordcount(bootstrap: str, in_topic: str, out_topic: str, state_dir: str, args):
    """The DSL's word count (KafkaStreams on Spark), or None when odradek.streams has no DSL yet."""
    try:
        from odradek.streams import KafkaStreams, Produced, Serdes, StreamsBuilder
    except ImportError:
        return None
    builder = StreamsBuilder()
    (
        builder.stream(in_topic)
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count()
        .to_stream()
        .to(out_topic, Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    config = {
        "application.id": f"wordcount-{uuid.uuid4().hex[:8]}",
        "bootstrap.servers": bootstrap,
        "default.key.serde": Serdes.String(),
        "default.value.serde": Serdes.String(),
        "commit.interval.ms": args.commit_interval_ms,
        "state.dir": state_dir,
        "spark.master": args.master,
    }
    return KafkaStreams(builder.build(), config)


FAUST_APP = textwrap.dedent(
    """
    import sys
    import faust

    bootstrap, in_topic, out_topic, interval_s, data_dir = sys.argv[1:6]
    app = faust.App(f"wordcount-{in_topic}", broker=f"kafka://{bootstrap}", store="memory://",
                    broker_commit_interval=float(interval_s), topic_partitions=4, datadir=data_dir,
                    web_enabled=False, producer_linger=0.01)
    lines = app.topic(in_topic, key_type=bytes, value_type=bytes, value_serializer="raw")
    out = app.topic(out_topic, key_type=bytes, value_type=bytes, value_serializer="raw")
    counts = app.Table("counts", default=int, partitions=4)

    @app.agent(lines)
    async def count(stream):
        async for line in stream:
            for word in line.decode().lower().split():
                counts[word] += 1
                await out.send(key=word.encode(), value=counts[word].to_bytes(8, "big", signed=True))

    if __name__ == "__main__":
        sys.argv = [sys.argv[0], "worker", "-l", "warn"]
        app.main()
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start one)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument(
        "--faust-lines",
        type=int,
        default=3_000,
        help="faust's bulk (it counts a few hundred words/s: --lines would take it many minutes)",
    )
    parser.add_argument("--words", type=int, default=8)
    parser.add_argument("--vocabulary", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument("--probes", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="probe lines per second")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=2,
        help="spark.sql.shuffle.partitions: the aggregation's tasks (one per core of local[2])",
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Extra Spark settings, to compare."
    )
    parser.add_argument("--skip", action="append", default=[], choices=["dsl", "pyspark", "faust"])
    args = parser.parse_args()
    args.load_before = load_average()

    workdir = tempfile.mkdtemp(prefix="odradek-streams-bench-")
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from odradek.testing.process import BrokerProcess

        broker = BrokerProcess(os.path.join(workdir, "broker")).start()
        bootstrap = broker.bootstrap_servers
    results: dict[str, dict] = {}
    try:
        spark = None
        if not {"dsl", "pyspark"} <= set(args.skip):
            from odradek.pipeline import spark_session

            extra = dict(item.split("=", 1) for item in args.conf)
            spark = spark_session(
                args.master,
                app_name="odradek-streams-bench",
                config={
                    "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
                    "spark.sql.streaming.numRecentProgressUpdates": "1000",  # every batch of a run
                    **extra,
                },
            )
            spark.sparkContext.setLogLevel("WARN")

        def topics(name: str) -> tuple[str, str]:
            in_topic, out_topic = f"bench-{name}-lines-{uuid.uuid4().hex[:6]}", f"bench-{name}-counts"
            create_topic(bootstrap, in_topic, args.partitions)
            out_topic += in_topic[-6:]
            create_topic(bootstrap, out_topic, args.partitions)
            return in_topic, out_topic

        if "pyspark" not in args.skip:
            in_topic, out_topic = topics("pyspark")
            holder: list = []
            results["PySpark (hand-written)"] = measure(
                bootstrap, out_topic, in_topic, args,
                lambda: holder.append(pyspark_wordcount(spark, bootstrap, in_topic, out_topic,
                                                        os.path.join(workdir, "ckpt-pyspark"), args.commit_interval_ms)),
                lambda: holder and holder[0].stop(),
                queries=lambda: holder,
            )  # fmt: skip
        if "dsl" not in args.skip:
            in_topic, out_topic = topics("dsl")
            app = dsl_wordcount(bootstrap, in_topic, out_topic, os.path.join(workdir, "state"), args)
            if app is None:
                results["odradek.streams DSL"] = {
                    "error": "the DSL is not installed (odradek.streams has no StreamsBuilder)"
                }
            else:
                results["odradek.streams DSL"] = measure(
                    bootstrap, out_topic, in_topic, args, app.start, app.close, queries=app.queries
                )
        if spark is not None:
            spark.stop()
        if "faust" not in args.skip:
            results["faust-streaming"] = run_faust(bootstrap, topics("faust"), args, workdir)
    finally:
        if broker is not None:
            broker.stop()
    print_table(results, args)


def run_faust(bootstrap: str, topic_pair: tuple[str, str], args, workdir: str) -> dict:
    try:
        import faust  # noqa: F401
    except ImportError:
        return {"error": "faust-streaming is not installed: pip install '.[benchmark]'"}
    in_topic, out_topic = topic_pair
    script = os.path.join(workdir, "faust_wordcount.py")
    with open(script, "w") as f:
        f.write(FAUST_APP)
    procs: list[subprocess.Popen] = []
    log = open(os.path.join(workdir, "faust.log"), "ab")  # noqa: SIM115 (closed in stop)

    def start():
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    script,
                    bootstrap,
                    in_topic,
                    out_topic,
                    str(args.commit_interval_ms / 1000),
                    os.path.join(workdir, "faust-data"),
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )
        )

    def stop():
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()

    return measure(bootstrap, out_topic, in_topic, args, start, stop, lines=args.faust_lines)


def print_table(results: dict[str, dict], args) -> None:
    print(f"\nWordCount: {args.lines} lines x {args.words} words, {args.partitions} partitions, "
          f"commit interval {args.commit_interval_ms} ms, master {args.master}, "
          f"{args.shuffle_partitions} shuffle partitions")  # fmt: skip
    print(f"load average (1/5/15 min): {args.load_before} before, {load_average()} after; "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'engine':<26} {'records/s':>12} {'p50 ms':>9} {'p99 ms':>9} {'start s':>8}  note")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<26} {'-':>12} {'-':>9} {'-':>9} {'-':>8}  {r['error']}")
            continue

        def ms(v):
            return "-" if v is None else f"{v:.0f}"

        note = f"{r['probes_lost']} probes lost" if r["probes_lost"] else ""
        if r["lines"] != args.lines:
            note = f"{r['lines']} lines {note}"
        print(
            f"{name:<26} {r['records_per_s']:>12,.0f} {ms(r['p50_ms']):>9} {ms(r['p99_ms']):>9} "
            f"{r['startup_s']:>8.1f}  {note}"
        )
    for name, r in results.items():
        phases = dict(r.get("phases") or {})
        if not phases:
            continue
        batches, (p50, p99) = phases.pop("batches"), phases.pop("batch")
        biggest = sorted(phases.items(), key=lambda item: -item[1][0])
        parts = ", ".join(f"{phase} {a:.0f}/{b:.0f}" for phase, (a, b) in biggest if b > 0)
        print(f"  {name}: {batches} micro-batches with input, duration p50 {p50:.0f} ms, p99 {p99:.0f} ms")
        print(f"    phases p50/p99 ms, biggest first: {parts}")
    base = results.get("PySpark (hand-written)", {})
    dsl = results.get("odradek.streams DSL", {})
    faust = results.get("faust-streaming", {})
    if "records_per_s" in base and "records_per_s" in dsl:
        print(
            f"DSL overhead: {base['records_per_s'] / dsl['records_per_s']:.2f}x the PySpark time per record (target <= 1.15)"
        )
    if "records_per_s" in dsl and "records_per_s" in faust:
        print(
            f"DSL vs faust: {dsl['records_per_s'] / faust['records_per_s']:.1f}x faust's throughput (target >= 3)"
        )


if __name__ == "__main__":
    main()
