"""JDBC sink throughput into a real PostgreSQL: rows per second through ``JdbcSinkTask.put``
(insert and upsert, new rows and updates of existing ones) beside psycopg's own
``executemany`` of the same INSERT … ON CONFLICT, so the connector's overhead is the figure.

Also runs the same records end to end: JSON with schemas on a topic of a broker, written by a
JdbcSinkConnector on a standalone worker (``--no-worker`` skips it).

Starts Debian's PostgreSQL through ``odradek.testing.postgres.PostgresServer`` (fsync off, as
the tests run it) and prints one table. Target (issue 27): ≥ 50,000 rows/s with batched upserts.

    python benchmarks/connect_jdbc_bench.py                 # 200,000 rows, puts of 5,000
    python benchmarks/connect_jdbc_bench.py --rows 1000000 --put 10000 --batch-size 3000
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import os
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "connect"))
from _brokers import cpu_seconds, process_tree_cpu_seconds, py_spy_record  # noqa: E402
from connect_support import WorkerProcess, quickstart_worker  # noqa: E402

from odradek.client import Producer  # noqa: E402
from odradek.connect.converters.json_converter import JsonConverter  # noqa: E402
from odradek.connect.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from odradek.connect.jdbc import JdbcSinkTask
from odradek.connect.records import SinkRecord
from odradek.testing.postgres import PostgresServer  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

KEY = SchemaBuilder.struct().name("key").field("id", Schema.INT64_SCHEMA).build()
VALUE = (
    SchemaBuilder.struct()
    .name("order")
    .field("id", Schema.INT64_SCHEMA)
    .field("customer", Schema.STRING_SCHEMA)
    .field("amount", Decimal.schema(2))
    .field("quantity", Schema.INT32_SCHEMA)
    .field("placed", Timestamp.SCHEMA)
    .build()
)


class _Context:
    offset_storage_reader = None


def records(count: int, generation: int) -> list[SinkRecord]:
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    out = []
    for i in range(count):
        value = (
            Struct(VALUE)
            .put("id", i)
            .put("customer", f"customer-{i % 997}-{generation}")
            .put("amount", decimal.Decimal(i % 10_000) / 100)
            .put("quantity", i % 50 + generation)
            .put("placed", base + dt.timedelta(seconds=i))
        )
        out.append(
            SinkRecord(
                topic="orders",
                kafka_partition=0,
                key_schema=KEY,
                key=Struct(KEY).put("id", i),
                value_schema=VALUE,
                value=value,
                kafka_offset=generation * count + i,
            )
        )
    return out


def through_sink(pg: PostgresServer, db: str, mode: str, batch: list[SinkRecord], put: int, batch_size: int):
    task = JdbcSinkTask()
    task.initialize(_Context())
    task.start(
        {
            "connection.url": pg.jdbc_url(db),
            "connection.user": pg.user,
            "insert.mode": mode,
            "pk.mode": "record_key",
            "auto.create": "true",
            "batch.size": str(batch_size),
        }
    )
    try:
        start, cpu, server = time.perf_counter(), time.process_time(), server_cpu(pg)
        for first in range(0, len(batch), put):
            task.put(batch[first : first + put])
        return time.perf_counter() - start, time.process_time() - cpu, server_cpu(pg) - server
    finally:
        task.stop()


def server_cpu(pg: PostgresServer) -> float:
    """CPU seconds of the PostgreSQL server so far (the postmaster and its backends)."""
    assert pg.proc is not None
    return process_tree_cpu_seconds(pg.proc.pid)


def raw_psycopg(pg: PostgresServer, db: str, count: int, put: int) -> tuple[float, float, float]:
    """The same upserts as plain executemany (psycopg pipelines them), values prepared up front."""
    base = dt.datetime(2024, 1, 1)
    rows = [
        (
            i,
            f"customer-{i % 997}-9",
            decimal.Decimal(i % 10_000) / 100,
            i % 50,
            base + dt.timedelta(seconds=i),
        )
        for i in range(count)
    ]
    statement = (
        'INSERT INTO "orders" ("id", "customer", "amount", "quantity", "placed") VALUES (%s, %s, %s, %s, %s) '
        'ON CONFLICT ("id") DO UPDATE SET "customer" = excluded."customer", "amount" = excluded."amount", '
        '"quantity" = excluded."quantity", "placed" = excluded."placed"'
    )
    with psycopg.connect(pg.conninfo(db)) as conn:
        start, cpu, server = time.perf_counter(), time.process_time(), server_cpu(pg)
        for first in range(0, count, put):
            with conn.cursor() as cursor:
                cursor.executemany(statement, rows[first : first + put])
            conn.commit()
        return time.perf_counter() - start, time.process_time() - cpu, server_cpu(pg) - server


def through_worker(
    pg: PostgresServer, db: str, batch: list[SinkRecord], workdir: Path, profile: str | None = None
) -> tuple[float, float, float]:
    """The same records as JSON with schemas on a topic, written by a JdbcSinkConnector on a
    standalone worker: seconds from creating the connector to the last row in the table, and
    the worker process's and PostgreSQL's CPU seconds meanwhile (the count queries included)."""
    topic = "orders"
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    keys = JsonConverter()
    keys.configure({"schemas.enable": "true"}, is_key=True)
    with BrokerProcess(workdir / "broker", overrides={"group.initial.rebalance.delay.ms": "0"}) as broker:
        with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": "20"}) as producer:
            for r in batch:
                producer.send(
                    topic,
                    key=keys.from_connect_data(topic, r.key_schema, r.key),
                    value=converter.from_connect_data(topic, r.value_schema, r.value),
                )
            producer.flush()
        worker = WorkerProcess(workdir, quickstart_worker(broker.bootstrap_servers, workdir)).start()
        try:
            config = {
                "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "topics": topic,
                "connection.url": pg.jdbc_url(db),
                "connection.user": pg.user,
                "insert.mode": "upsert",
                "pk.mode": "record_key",
                "auto.create": "true",
                "consumer.override.max.poll.records": "5000",
            }
            assert worker.proc is not None
            with py_spy_record(worker.proc.pid, profile):
                start, cpu, server = time.perf_counter(), cpu_seconds(worker.proc.pid), server_cpu(pg)
                created = worker.request("POST", "/connectors", json={"name": "bench-sink", "config": config})
                assert created.status_code == 201, created.text
                # One connection, and a primary-key lookup of the last record's row (a topic of
                # one partition is written in order): the wait costs the server next to nothing.
                first_id, last_id = batch[0].key.get("id"), batch[-1].key.get("id")
                with psycopg.connect(pg.conninfo(db), autocommit=True) as conn:
                    first_row = None
                    while True:
                        try:
                            if first_row is None and conn.execute(
                                    'SELECT 1 FROM "orders" WHERE "id" = %s', [first_id]).fetchone():
                                first_row = time.perf_counter() - start
                                print(f"worker: the first row after {first_row:.2f} s (connector, task, group"
                                      " join, first fetch)", flush=True)
                            found = conn.execute('SELECT 1 FROM "orders" WHERE "id" = %s', [last_id]).fetchone()
                        except psycopg.errors.UndefinedTable:
                            found = None
                        if found:
                            after = time.perf_counter() - start - (first_row or 0.0)
                            print(f"worker: {len(batch):,} rows {after:.2f} s after the first:"
                                  f" {len(batch) / after:,.0f} rows/s", flush=True)
                            seconds = time.perf_counter() - start
                            cpu_s, server_s = cpu_seconds(worker.proc.pid) - cpu, server_cpu(pg) - server
                            row = conn.execute('SELECT count(*) FROM "orders"').fetchone()
                            assert row is not None and row[0] == len(batch), f"{row} rows, expected {len(batch)}"
                            return seconds, cpu_s, server_s
                        time.sleep(0.05)
        finally:
            worker.kill()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000, help="rows per measured run")
    parser.add_argument("--put", type=int, default=5_000, help="records per put() (a worker's poll batch)")
    parser.add_argument("--batch-size", type=int, default=3_000, help="the sink's batch.size")
    parser.add_argument(
        "--no-worker", action="store_true", help="skip the run through a broker and a standalone worker"
    )
    parser.add_argument("--worker-only", action="store_true", help="only the run through the worker")
    parser.add_argument("--profile", metavar="FILE",
                        help="py-spy record the worker during its run into FILE (benchmarks/profile_summary.py)")
    args = parser.parse_args()

    results = []
    with PostgresServer() as pg:
        print(f"PostgreSQL on {pg.host}:{pg.port}; building {args.rows:,} records…", flush=True)
        fresh, again = records(args.rows, 0), records(args.rows, 1)
        megabytes = topic_bytes(fresh) / 1e6
        if not args.worker_only:
            db = pg.create_database()
            results.append(("sink upsert, new rows", through_sink(pg, db, "upsert", fresh, args.put, args.batch_size)))
            results.append(("sink upsert, existing rows",
                            through_sink(pg, db, "upsert", again, args.put, args.batch_size)))
            results.append(("psycopg executemany upsert", raw_psycopg(pg, db, args.rows, args.put)))
            results.append(("sink insert, new rows",
                            through_sink(pg, pg.create_database(), "insert", fresh, args.put, args.batch_size)))
            with psycopg.connect(pg.conninfo(db)) as conn:
                row = conn.execute('SELECT count(*) FROM "orders"').fetchone()
                stored = row[0] if row else 0
            assert stored == args.rows, f"{stored} rows in the table, expected {args.rows}"
        if not args.no_worker:
            with tempfile.TemporaryDirectory(prefix="jdbc-bench-") as workdir:
                results.append(("worker: topic → sink upsert",
                                through_worker(pg, pg.create_database(), fresh, Path(workdir), args.profile)))

    # On a shared machine the wall clock depends on the load; the CPU seconds (this process's
    # for the direct rows, the worker process's for the worker row, and PostgreSQL's) say what
    # each path costs. With every CPU free, a path could go no faster than CPUs / (client µs +
    # server µs) per row: the "ceiling" column.
    print(f"\n{args.rows:,} rows; MB/s counts the records' JSON (with schemas) as on the topic, {megabytes:.1f} MB")
    print(f"{'path':<30} {'seconds':>9} {'rows/s':>10} {'MB/s':>6} {'client CPU s':>13} {'µs/row':>8}"
          f" {'PG CPU s':>9} {'PG µs/row':>10} {'ceiling rows/s':>15}")
    cpus = os.cpu_count() or 1
    for name, (seconds, cpu, server) in results:
        per_row = (cpu + server) / args.rows
        print(f"{name:<30} {seconds:>9.2f} {args.rows / seconds:>10,.0f} {megabytes / seconds:>6.1f} {cpu:>13.2f}"
              f" {cpu / args.rows * 1e6:>8.1f} {server:>9.2f} {server / args.rows * 1e6:>10.1f}"
              f" {cpus / per_row:>15,.0f}")
    by_name = dict(results)
    if "worker: topic → sink upsert" in by_name and "psycopg executemany upsert" in by_name:
        worker_s, raw_s = by_name["worker: topic → sink upsert"][0], by_name["psycopg executemany upsert"][0]
        print(f"worker throughput / psycopg executemany: {raw_s / worker_s:.0%}")
    print(
        f"target: sink upsert >= 50,000 rows/s; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


def topic_bytes(batch: list[SinkRecord]) -> int:
    keys, values = JsonConverter(), JsonConverter()
    keys.configure({"schemas.enable": "true"}, is_key=True)
    values.configure({"schemas.enable": "true"}, is_key=False)
    return sum(len(keys.from_connect_data("orders", r.key_schema, r.key))
               + len(values.from_connect_data("orders", r.value_schema, r.value)) for r in batch)


if __name__ == "__main__":
    main()
