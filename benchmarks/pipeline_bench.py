"""Spark pipeline benchmark: the ``odradek`` data source's read throughput and the
produce→sink latency of a streaming query.

    python benchmarks/pipeline_bench.py                    # starts its own broker
    python benchmarks/pipeline_bench.py --bootstrap 127.0.0.1:9092 --records 1000000

Measures, against a real broker and a local Spark (``--master``, default ``local[*]``):

1. **batch read** — ``spark.read.format("odradek")…load().count()`` over ``--records``
   records (100-byte values, keys, 4 partitions): rows/s with the full Kafka schema and
   with a user schema of ``value`` only; plus the Python side alone (the task's reader,
   in this process, no Spark) for reference;
2. **streaming micro-batches** — ``readStream`` with ``Trigger.AvailableNow`` and
   ``maxOffsetsPerTrigger`` into Spark's ``noop`` sink: rows/s per micro-batch;
3. **produce→sink latency** — records produced one at a time (``--rate`` per second,
   value = send time) into a topic read by a streaming query with a processing-time
   trigger (``--trigger``) that copies them, exactly once, to another topic; a consumer
   stamps the arrival: p50/p95/p99.

Targets (issue 6): ≥ 500k rows/s batch read; p50 produce→sink ≤ 500 ms.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid

from odradek.pipeline import worker_python

os.environ.setdefault("PYSPARK_PYTHON", worker_python())


def _produce_bulk(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep the handle alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    pad = "x" * 80
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=f"value-{i:010d}-{pad}".encode(), key=f"key-{i}".encode())
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush()
    return time.perf_counter() - started


def _timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def bench_batch_read(spark, bootstrap: str, topic: str, n: int, repeat: int) -> dict:
    def load(schema=None):
        reader = (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
        )
        if schema:
            reader = reader.schema(schema)
        return reader.load()

    full = load()
    assert full.count() == n  # warm up: Python workers, imports
    times = _timed(lambda: full.count(), repeat)
    value_only = load("value binary")
    value_only.count()
    pruned = _timed(lambda: value_only.count(), repeat)

    from odradek.pipeline.options import read_options
    from odradek.pipeline.source import BatchReader

    reader = BatchReader(
        read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    )

    def python_only():
        rows = sum(b.num_rows for part in reader.partitions() for b in reader.read(part))
        assert rows == n

    py = _timed(python_only, repeat)
    return {
        "records": n,
        "full_schema_rows_per_s": {"best": n / min(times), "median": n / statistics.median(times)},
        "value_only_rows_per_s": {"best": n / min(pruned), "median": n / statistics.median(pruned)},
        "python_reader_only_rows_per_s": {"best": n / min(py), "median": n / statistics.median(py)},
        "seconds": {"full": times, "value_only": pruned, "python_only": py},
    }


def bench_streaming(spark, bootstrap: str, topic: str, n: int, per_trigger: int, workdir: str) -> dict:
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", os.path.join(workdir, f"stream-{uuid.uuid4().hex}"))
        .trigger(availableNow=True)
    )
    started = time.perf_counter()
    q = query.start()
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in batches)
    assert rows == n, rows
    per_batch = [p["numInputRows"] / (p["durationMs"]["triggerExecution"] / 1000) for p in batches]
    return {
        "records": rows,
        "micro_batches": len(batches),
        "rows_per_trigger": per_trigger,
        "micro_batch_rows_per_s": {"median": statistics.median(per_batch), "best": max(per_batch)},
        "whole_query_rows_per_s": rows / elapsed,
    }


def bench_latency(
    spark, bootstrap: str, seconds: float, rate: float, trigger: str, workdir: str, warmup: float = 5.0
) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    source, target = f"lat-in-{uuid.uuid4().hex[:8]}", f"lat-out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(source, 2, 1), NewTopic(target, 2, 1)]).values():
        f.result(30)
    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", os.path.join(workdir, f"latency-{uuid.uuid4().hex}"))
        .trigger(processingTime=trigger)
        .start()
    )
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "fetch.wait.max.ms": 5, "fetch.min.bytes": 1}
    )
    consumer.assign([TopicPartition(target, p, 0) for p in range(2)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    # Let the query start (Python workers, first batches) before timing anything: send
    # marked warm-up records for ``warmup`` seconds and drop their latencies.
    producer.produce(source, value=b"w0", key=b"w")
    producer.flush()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            break
    latencies: list[float] = []
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is None or msg.error() or msg.value().startswith(b"w"):
                continue
            latencies.append((time.time_ns() - int(msg.value())) / 1e6)

    warm_until = time.monotonic() + warmup
    while time.monotonic() < warm_until:
        producer.produce(source, value=b"w%d" % time.time_ns(), key=b"w")
        producer.poll(0)
        time.sleep(1 / rate)
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        producer.produce(source, value=str(time.time_ns()).encode(), key=str(sent % 16).encode())
        producer.poll(0)
        sent += 1
        time.sleep(max(0.0, started + sent / rate - time.monotonic()))
    producer.flush()
    wait_until = time.monotonic() + 30
    while len(latencies) < sent and time.monotonic() < wait_until:
        time.sleep(0.1)
    stop.set()
    reader.join()
    q.stop()
    consumer.close()
    latencies.sort()

    def pct(p):
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

    return {
        "trigger": trigger,
        "warmup_seconds": warmup,
        "sent": sent,
        "received": len(latencies),
        "ms": {
            "p50": pct(50),
            "p95": pct(95),
            "p99": pct(99),
            "max": latencies[-1],
            "mean": statistics.mean(latencies),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="an existing broker (default: start one)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--per-trigger", type=int, default=250_000, help="maxOffsetsPerTrigger of the streaming run"
    )
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=50.0, help="records per second in the latency run")
    ap.add_argument(
        "--trigger", default="100 milliseconds", help="processing-time trigger of the latency run"
    )
    ap.add_argument(
        "--warmup", type=float, default=5.0, help="seconds of unmeasured records before the latency run"
    )
    ap.add_argument("--skip", default="", help="comma-separated: read,stream,latency")
    ap.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    broker = None
    workdir = tempfile.mkdtemp(prefix="odradek-pipeline-bench-")
    atexit.register(shutil.rmtree, workdir, True)  # the logs are gigabytes; also when a run fails
    if args.bootstrap is None:
        from odradek.testing.process import BrokerProcess

        broker = BrokerProcess(os.path.join(workdir, "broker")).start()
        args.bootstrap = broker.bootstrap_servers
    from odradek.pipeline import spark_session

    spark = spark_session(args.master, "odradek-pipeline-bench", {"spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    results: dict = {"master": args.master, "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    try:
        if not {"read", "stream"} <= skip:
            topic = f"bench-read-{uuid.uuid4().hex[:8]}"
            results["produce_seconds"] = _produce_bulk(args.bootstrap, topic, args.records, 4)
            if "read" not in skip:
                results["batch_read"] = bench_batch_read(
                    spark, args.bootstrap, topic, args.records, args.repeat
                )
            if "stream" not in skip:
                results["streaming"] = bench_streaming(
                    spark, args.bootstrap, topic, args.records, args.per_trigger, workdir
                )
        if "latency" not in skip:
            results["latency"] = bench_latency(
                spark, args.bootstrap, args.latency_seconds, args.rate, args.trigger, workdir, args.warmup
            )
    finally:
        spark.stop()
        if broker is not None:
            broker.close()
    results["load_average_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(json.dumps(results, indent=2))
    if "batch_read" in results:
        r = results["batch_read"]
        print(
            f"\nbatch read of {r['records']:,} records: {r['full_schema_rows_per_s']['best']:,.0f} rows/s full schema "
            f"(median {r['full_schema_rows_per_s']['median']:,.0f}), {r['value_only_rows_per_s']['best']:,.0f} rows/s "
            f"value only; Python reader alone {r['python_reader_only_rows_per_s']['best']:,.0f} rows/s (target ≥ 500,000)"
        )
    if "streaming" in results:
        s = results["streaming"]
        print(
            f"streaming: {s['micro_batches']} micro-batches of ≤ {s['rows_per_trigger']:,}: "
            f"median {s['micro_batch_rows_per_s']['median']:,.0f} rows/s per micro-batch, "
            f"{s['whole_query_rows_per_s']:,.0f} rows/s for the whole query"
        )
    if "latency" in results:
        lat = results["latency"]
        print(
            f"produce→sink latency, trigger {lat['trigger']}, {lat['received']}/{lat['sent']} records: "
            f"p50 {lat['ms']['p50']:.0f} ms, p95 {lat['ms']['p95']:.0f} ms, p99 {lat['ms']['p99']:.0f} ms "
            f"(target p50 ≤ 500 ms)"
        )


if __name__ == "__main__":
    main()
