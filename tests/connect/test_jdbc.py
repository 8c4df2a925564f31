"""The JDBC source and sink tasks against a real PostgreSQL (Debian's, started for this module)
and SQLite files, with records travelling through a real Odradek broker.

The tasks are driven directly (start/poll/put), as a worker would: the test plays the worker's
part, turning records into bytes and back with Kafka's JsonConverter (schemas.enable=true).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import sqlite3

import psycopg
import pytest

from odradek.client import Consumer, Producer, TopicPartition
from odradek.connect.converters.json_converter import JsonConverter
from odradek.connect.data import Schema, SchemaBuilder, Struct
from odradek.connect.errors import ConfigException, ConnectException
from odradek.connect.jdbc import JdbcSinkConnector, JdbcSinkTask, JdbcSourceConnector, JdbcSourceTask
from odradek.connect.records import SinkRecord
from odradek.testing.postgres import PostgresServer


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


class Database:
    """A fresh database of either kind, with the connector keys to reach it."""

    def __init__(self, kind, postgres, tmp_path):
        self.kind = kind
        if kind == "postgresql":
            name = postgres.create_database()
            self.props = {"connection.url": postgres.jdbc_url(name), "connection.user": postgres.user}
            self._connect = lambda: psycopg.connect(postgres.conninfo(name), autocommit=True)
        else:
            path = tmp_path / "test.db"
            self.props = {"connection.url": f"jdbc:sqlite:{path}"}
            self._connect = lambda: sqlite3.connect(path, isolation_level=None)

    def run(self, statement, params=()):
        statement = statement if self.kind == "postgresql" else statement.replace("%s", "?")
        conn = self._connect()
        try:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else None
        finally:
            conn.close()

    def rows(self, table, order="id"):
        return self.run(f'SELECT * FROM "{table}" ORDER BY {order}')


@pytest.fixture(params=["postgresql", "sqlite"])
def make_db(request, postgres, tmp_path):
    counter = iter(range(100))

    def make():
        return Database(request.param, postgres, tmp_path / f"db{next(counter)}")

    for i in range(3):
        (tmp_path / f"db{i}").mkdir()
    return make


class OffsetContext:
    """A task context whose offset reader answers from offsets committed by the test."""

    def __init__(self, committed=None):
        self.committed = committed if committed is not None else {}
        self.offset_storage_reader = self

    def offset(self, partition):
        return self.committed.get(json.dumps(partition, sort_keys=True))

    def commit(self, records):
        for r in records:
            self.committed[json.dumps(r.source_partition, sort_keys=True)] = r.source_offset


def source_task(db, context, **props):
    task = JdbcSourceTask()
    task.initialize(context)
    task.start({**db.props, "topic.prefix": "db-", "poll.interval.ms": "50", **props})
    return task


def drain(task, want, timeout=20):
    import time

    out, deadline = [], time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += task.poll() or []
    return out


def json_converter(is_key):
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=is_key)
    return converter


KEY_SCHEMA = SchemaBuilder.struct().name("key").field("id", Schema.INT64_SCHEMA).build()


def test_table_to_topic_to_table_with_upserts_and_deletes(make_db, broker, topic_name):
    source, target = make_db(), make_db()
    serial = "SERIAL PRIMARY KEY" if source.kind == "postgresql" else "INTEGER PRIMARY KEY AUTOINCREMENT"
    source.run(
        f"CREATE TABLE orders (id {serial}, item TEXT NOT NULL, amount NUMERIC(10,2), "
        "placed DATE, updated TIMESTAMP NOT NULL)"
    )
    stamp = dt.datetime(2024, 5, 1, 12, 0, 0)
    for i, item in enumerate(["apple", "pear", "plum"]):
        source.run(
            "INSERT INTO orders (item, amount, placed, updated) VALUES (%s, %s, %s, %s)",
            (item, str(decimal.Decimal("1.50") * (i + 1)), "2024-05-01", stamp + dt.timedelta(seconds=i)),
        )
    topic = topic_name
    context = OffsetContext()
    task = source_task(
        source,
        context,
        mode="timestamp+incrementing",
        **{"incrementing.column.name": "id", "timestamp.column.name": "updated", "tables": "orders"},
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"})
    sink = JdbcSinkTask()
    sink.initialize(OffsetContext())
    sink.start(
        {
            **target.props,
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "auto.create": "true",
            "delete.enabled": "true",
            "table.name.format": "copy_${topic}",
        }
    )
    keys, values = json_converter(True), json_converter(False)

    def ship(records):
        """Source records → the broker (key: the id, as ValueToKey would make it), JSON with schemas."""
        for r in records:
            assert r.topic == "db-orders"
            key = Struct(KEY_SCHEMA).put("id", r.value.get("id"))
            producer.send(
                topic,
                key=keys.from_connect_data(topic, KEY_SCHEMA, key),
                value=values.from_connect_data(topic, r.value_schema, r.value),
            )
        producer.flush()
        context.commit(records)

    def deliver(count, tombstones=()):
        """The broker → the sink task, as SinkRecords."""
        for key in tombstones:
            producer.send(
                topic, key=keys.from_connect_data(topic, KEY_SCHEMA, Struct(KEY_SCHEMA).put("id", key))
            )
        producer.flush()
        got = []
        import time

        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            got += consumer.poll(0.5)
        assert len(got) == count
        records = []
        for m in got:
            key, value = keys.to_connect_data(topic, m.key), values.to_connect_data(topic, m.value)
            records.append(
                SinkRecord(
                    topic="orders",
                    kafka_partition=m.partition,
                    key_schema=key.schema,
                    key=key.value,
                    value_schema=value.schema,
                    value=value.value,
                    kafka_offset=m.offset,
                )
            )
        sink.put(records)

    try:
        consumer.assign([TopicPartition(topic, 0)])
        ship(drain(task, 3))
        deliver(3)
        assert [r[:3] for r in target.rows("copy_orders")] == [
            (1, "apple", decimal.Decimal("1.50")),
            (2, "pear", decimal.Decimal("3.00")),
            (3, "plum", decimal.Decimal("4.50")),
        ]
        # An update (newer timestamp) comes through as an upsert; a tombstone deletes.
        source.run(
            "UPDATE orders SET item = 'pear2', updated = %s WHERE id = 2", (stamp + dt.timedelta(minutes=5),)
        )
        ship(drain(task, 1))
        deliver(2, tombstones=[3])
        rows = target.rows("copy_orders")
        assert [r[:2] for r in rows] == [(1, "apple"), (2, "pear2")]
        assert str(rows[1][3]) == "2024-05-01"
        assert context.committed['{"table": "orders"}']["incrementing"] == 2
    finally:
        task.stop()
        sink.stop()
        producer.close()
        consumer.close()


def test_restarted_source_task_resumes_at_the_committed_offset(make_db):
    db = make_db()
    db.run("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT)")
    for i in range(1, 6):
        db.run("INSERT INTO events VALUES (%s, %s)", (i, f"e{i}"))
    context = OffsetContext()
    props = {
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "tables": "events",
        "batch.max.rows": "2",
    }
    first = source_task(db, context, **props)
    batch = drain(first, 2)
    assert [r.value.get("id") for r in batch] == [1, 2]
    context.commit(batch)
    first.stop()  # the worker dies before committing anything further

    second = source_task(db, context, **props)
    rest = drain(second, 3)
    assert [r.value.get("id") for r in rest] == [3, 4, 5]
    assert rest[-1].source_partition == {"table": "events"} and rest[-1].source_offset == {"incrementing": 5}
    context.commit(rest)
    db.run("INSERT INTO events VALUES (6, 'e6')")
    assert [r.value.get("id") for r in drain(second, 1)] == [6]
    second.stop()


def test_bulk_and_query_modes(make_db):
    db = make_db()
    db.run("CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT)")
    db.run("INSERT INTO a VALUES (1, 'x'), (2, 'y')")
    bulk = source_task(db, OffsetContext(), mode="bulk", tables="a")
    first = drain(bulk, 2)
    again = drain(bulk, 2)  # bulk reads the whole table on every poll interval
    assert [r.value.get("v") for r in first + again] == ["x", "y", "x", "y"]
    bulk.stop()
    query = source_task(
        db,
        OffsetContext(),
        mode="incrementing",
        query="SELECT id, upper(v) AS big FROM a",
        **{"incrementing.column.name": "id", "topic.prefix": "q-topic"},
    )
    records = drain(query, 2)
    assert [(r.topic, r.value.get("big"), r.source_partition) for r in records] == [
        ("q-topic", "X", {"query": "query"}),
        ("q-topic", "Y", {"query": "query"}),
    ]
    query.stop()


def test_connector_deals_tables_to_tasks(make_db):
    db = make_db()
    for name in ("t1", "t2", "t3", "skipped"):
        db.run(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)")
    connector = JdbcSourceConnector()
    connector.start({**db.props, "mode": "bulk", "topic.prefix": "p-", "table.blacklist": "skipped"})
    try:
        configs = connector.task_configs(2)
        assert [c["tables"] for c in configs] == ["t1,t2", "t3"]
        assert [c["tables"] for c in connector.task_configs(10)] == ["t1", "t2", "t3"]
    finally:
        connector.stop()


def test_sink_insert_kafka_keys_and_auto_evolve(make_db):
    db = make_db()
    v1 = SchemaBuilder.struct().name("v").field("name", Schema.STRING_SCHEMA).build()
    v2 = (
        SchemaBuilder.struct()
        .name("v")
        .field("name", Schema.STRING_SCHEMA)
        .field("age", Schema.OPTIONAL_INT32_SCHEMA)
        .build()
    )
    sink = JdbcSinkTask()
    sink.initialize(OffsetContext())
    sink.start({**db.props, "pk.mode": "kafka", "auto.create": "true", "auto.evolve": "true"})

    def record(schema, offset, **values):
        value = Struct(schema)
        for k, v in values.items():
            value.put(k, v)
        return SinkRecord(
            topic="people", kafka_partition=0, value_schema=schema, value=value, kafka_offset=offset
        )

    try:
        sink.put([record(v1, 0, name="ann"), record(v1, 1, name="bob")])
        sink.put([record(v2, 2, name="cy", age=7)])
        rows = db.run('SELECT __connect_offset, name, age FROM "people" ORDER BY __connect_offset')
        assert [tuple(r) for r in rows] == [(0, "ann", None), (1, "bob", None), (2, "cy", 7)]
    finally:
        sink.stop()


def test_sink_upserts_runs_of_writes_and_deletes_in_one_put_and_recovers_from_a_failed_one(make_db):
    """Writes, a delete and writes again on one table in one put (two write runs through the
    same PostgreSQL staging table), text that COPY must escape, a timestamp; then a put that
    fails (a null note refused) rolls back whole, and the next put still works."""
    import datetime as dt

    from odradek.connect.data import Timestamp

    db = make_db()
    value_schema = (SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
                    .field("note", Schema.OPTIONAL_STRING_SCHEMA).field("at", Timestamp.SCHEMA).build())
    moment = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)

    def record(offset, key, note="", tombstone=False):
        value = None if tombstone else Struct(value_schema).put("id", key).put("note", note).put("at", moment)
        return SinkRecord(topic="notes", kafka_partition=0, key_schema=KEY_SCHEMA, key=Struct(KEY_SCHEMA).put("id", key),
                          value_schema=None if tombstone else value_schema, value=value, kafka_offset=offset)

    sink = JdbcSinkTask()
    sink.initialize(OffsetContext())
    sink.start({**db.props, "pk.mode": "record_key", "insert.mode": "upsert", "auto.create": "true",
                "delete.enabled": "true"})
    try:
        sink.put([record(0, 1, "first"), record(1, 2, "tab\there\nnew line \\ back"), record(2, 1, tombstone=True),
                  record(3, 1, "again"), record(4, 3, None), record(5, 3, "last wins")])
        rows = db.run('SELECT id, note FROM "notes" ORDER BY id')
        assert [tuple(r) for r in rows] == [(1, "again"), (2, "tab\there\nnew line \\ back"), (3, "last wins")]
        [(stored,)] = db.run('SELECT at FROM "notes" WHERE id = 1')
        assert str(stored).startswith("2024-05-06 07:08:09.123")
        if db.kind == "postgresql":
            db.run('ALTER TABLE "notes" ALTER COLUMN note SET NOT NULL')
        else:
            db.run('CREATE TRIGGER note_needed BEFORE INSERT ON "notes" WHEN NEW.note IS NULL'
                   " BEGIN SELECT RAISE(ABORT, 'note must not be null'); END")
        with pytest.raises(Exception, match="note"):
            sink.put([record(6, 4, "kept?"), record(7, 5, None)])
        assert [r[0] for r in db.run('SELECT id FROM "notes" ORDER BY id')] == [1, 2, 3]
        sink.put([record(8, 4, "after the failure")])
        assert [tuple(r) for r in db.run('SELECT id, note FROM "notes" WHERE id = 4')] == [(4, "after the failure")]
    finally:
        sink.stop()


def test_sink_writes_every_column_type_and_a_naive_timestamp_as_utc(make_db):
    """Each Connect type the sink maps reaches its column unchanged (PostgreSQL: by binary COPY);
    a naive datetime, which the binary format refuses for a timestamp, is written as UTC through
    the text format, and the task goes on writing."""
    from odradek.connect.data import Date, Decimal, Time, Timestamp

    db = make_db()
    types = {"i8": Schema.INT8_SCHEMA, "i16": Schema.INT16_SCHEMA, "i32": Schema.INT32_SCHEMA,
             "i64": Schema.INT64_SCHEMA, "f32": Schema.FLOAT32_SCHEMA, "f64": Schema.FLOAT64_SCHEMA,
             "b": Schema.BOOLEAN_SCHEMA, "s": Schema.STRING_SCHEMA, "raw": Schema.BYTES_SCHEMA,
             "amount": Decimal.schema(2), "day": Date.SCHEMA, "clock": Time.SCHEMA, "at": Timestamp.SCHEMA,
             "maybe": Schema.OPTIONAL_STRING_SCHEMA}
    builder = SchemaBuilder.struct().name("all").field("id", Schema.INT64_SCHEMA)
    for name, schema in types.items():
        builder = builder.field(name, schema)
    value_schema = builder.build()
    values = {"i8": -8, "i16": 1600, "i32": -320000, "i64": 2**40, "f32": 1.5, "f64": -2.25, "b": True,
              "s": "tab\there \\ é", "raw": b"\x00\xff\\", "amount": decimal.Decimal("-12.34"),
              "day": dt.date(2024, 2, 29), "clock": dt.time(23, 59, 58, 125000),
              "at": dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC), "maybe": None}

    def record(offset, at):
        value = Struct(value_schema).put("id", offset)
        for name, v in {**values, "at": at}.items():
            value.put(name, v)
        return SinkRecord(topic="everything", kafka_partition=0, key_schema=KEY_SCHEMA,
                          key=Struct(KEY_SCHEMA).put("id", offset), value_schema=value_schema, value=value,
                          kafka_offset=offset)

    sink = JdbcSinkTask()
    sink.initialize(OffsetContext())
    sink.start({**db.props, "pk.mode": "record_key", "insert.mode": "upsert", "auto.create": "true"})
    try:
        sink.put([record(0, values["at"]), record(1, values["at"])])
        assert sink.writer.binary
        sink.put([record(2, dt.datetime(2024, 5, 6, 7, 8, 9, 123000))])  # naive: UTC
        assert sink.writer.binary == (db.kind == "sqlite")  # PostgreSQL went over to text
        sink.put([record(3, values["at"])])
        columns = ", ".join(f'"{name}"' for name in types)
        rows = db.run(f'SELECT id, {columns} FROM "everything" ORDER BY id')
        assert [r[0] for r in rows] == [0, 1, 2, 3]
        names = list(types)
        for row in rows:
            stored = dict(zip(names, row[1:], strict=True))
            if db.kind == "postgresql":
                assert stored == {**values, "raw": stored["raw"], "at": values["at"].replace(tzinfo=None)}
                assert bytes(stored["raw"]) == values["raw"]
            else:
                assert str(stored["at"]).startswith("2024-05-06 07:08:09.123")
                assert (stored["i64"], stored["s"], stored["raw"]) == (2**40, values["s"], values["raw"])
    finally:
        sink.stop()


def test_worker_sink_task_keeps_the_last_write_of_each_key_across_overlapping_puts(postgres, broker, topic_name,
                                                                                  tmp_path):
    """Updates and tombstones of a few keys through the worker's sink loop (JSON with schemas
    on a topic, puts of at most 40 records, each batch fetched and converted while the put before
    it runs): the table ends as the last record of each key says."""
    from connect_support import SinkTaskOnALoop
    from support import wait_until

    db = Database("postgresql", postgres, tmp_path)
    value_schema = (SchemaBuilder.struct().name("v").field("id", Schema.INT64_SCHEMA)
                    .field("seq", Schema.INT32_SCHEMA).build())
    keys, values = json_converter(True), json_converter(False)
    latest: dict[int, int | None] = {}
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": "5"}) as producer:
        for i in range(600):
            key = i % 9
            tombstone = (key == 4 and i == 247) or (key == 7 and i >= 590)
            value = None if tombstone else values.from_connect_data(
                topic_name, value_schema, Struct(value_schema).put("id", key).put("seq", i))
            producer.send(topic_name, key=keys.from_connect_data(topic_name, KEY_SCHEMA, Struct(KEY_SCHEMA).put("id", key)),
                          value=value)
            latest[key] = None if tombstone else i
        producer.flush()
    expected = sorted((key, seq) for key, seq in latest.items() if seq is not None)
    assert 7 not in dict(expected) and 4 in dict(expected)
    json_class = "org.apache.kafka.connect.json.JsonConverter"
    config = {"topics": topic_name, **db.props, "insert.mode": "upsert", "pk.mode": "record_key",
              "auto.create": "true", "delete.enabled": "true", "table.name.format": "latest",
              "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}

    def table():
        try:
            return [tuple(r) for r in db.run('SELECT id, seq FROM "latest" ORDER BY id')]
        except psycopg.errors.UndefinedTable:
            return []

    task = JdbcSinkTask()
    with SinkTaskOnALoop(tmp_path, broker.bootstrap_servers, task, config, json_class, name=topic_name,
                         batch=40) as harness:
        wait_until(lambda: table() == expected, 60, f"the table to hold {expected}")
        assert harness.runner.state == "RUNNING"
    assert harness.runner.committed[TopicPartition(topic_name, 0)].offset == 600


def test_sink_without_auto_create_names_the_missing_table(make_db):
    db = make_db()
    sink = JdbcSinkTask()
    sink.initialize(OffsetContext())
    sink.start({**db.props, "max.retries": "0"})
    schema = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    try:
        with pytest.raises(ConnectException, match="'nowhere' is missing and auto.create is false"):
            sink.put(
                [
                    SinkRecord(
                        topic="nowhere",
                        kafka_partition=0,
                        value_schema=schema,
                        value=Struct(schema).put("x", 1),
                    )
                ]
            )
        with pytest.raises(ConnectException, match="needs struct values with schemas"):
            sink.put([SinkRecord(topic="nowhere", kafka_partition=0, value={"x": 1})])
    finally:
        sink.stop()


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"connection.url": "jdbc:sqlite:/tmp/x.db", "topic.prefix": "p"}, "mode"),
        (
            {"connection.url": "jdbc:oracle:thin:@h:1521:x", "mode": "bulk", "topic.prefix": "p"},
            "connection.url",
        ),
        (
            {"connection.url": "jdbc:sqlite:x.db", "mode": "incrementing", "topic.prefix": "p"},
            "incrementing.column.name",
        ),
        (
            {
                "connection.url": "jdbc:sqlite:x.db",
                "mode": "bulk",
                "topic.prefix": "p",
                "poll.interval.ms": "soon",
            },
            "poll.interval.ms",
        ),
    ],
)
def test_bad_source_config_names_the_key(props, key):
    with pytest.raises(ConfigException) as caught:
        JdbcSourceConnector().start(props)
    assert caught.value.key == key
    assert key in str(caught.value)


def test_bad_sink_config_names_the_key():
    connector = JdbcSinkConnector()
    with pytest.raises(ConfigException) as caught:
        connector.start(
            {"connection.url": "jdbc:sqlite:x.db", "delete.enabled": "true", "pk.mode": "record_value"}
        )
    assert caught.value.key == "delete.enabled"
    result = connector.validate({"connection.url": "", "insert.mode": "merge", "pk.mode": "upsert"})
    errors = {v.name: v.errors for v in result.config_values if v.errors}
    assert set(errors) == {"connection.url", "insert.mode", "pk.mode"}
    assert "one of insert, upsert, update" in errors["insert.mode"][0]
    result = connector.validate({"connection.url": "jdbc:sqlite:x.db", "delete.enabled": "true"})
    errors = {v.name: v.errors for v in result.config_values if v.errors}
    assert errors == {
        "delete.enabled": ["delete.enabled: deletes need pk.mode=record_key (the key names the row)"]
    }


def test_connector_reconfigures_tasks_when_a_table_appears(make_db):
    import time

    db = make_db()
    db.run("CREATE TABLE first (id INTEGER PRIMARY KEY)")

    class Context:
        requests = 0

        def request_task_reconfiguration(self):
            Context.requests += 1

    connector = JdbcSourceConnector()
    connector.initialize(Context())
    connector.start({**db.props, "mode": "bulk", "topic.prefix": "p-", "table.poll.interval.ms": "100"})
    try:
        assert [c["tables"] for c in connector.task_configs(4)] == ["first"]
        db.run("CREATE TABLE second (id INTEGER PRIMARY KEY)")
        deadline = time.monotonic() + 20
        while Context.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Context.requests >= 1
        assert [c["tables"] for c in connector.task_configs(4)] == ["first", "second"]
    finally:
        connector.stop()
