"""The JDBC connectors end to end on a standalone worker process, created through the REST API
with Confluent's example configuration keys: a PostgreSQL table → topic → another PostgreSQL
database, with upserts and a delete; the validate endpoint naming bad keys; and a restarted
worker resuming the source at its stored offset."""

from __future__ import annotations

import json

import psycopg
import pytest
from connect_support import WorkerProcess, quickstart_worker
from support import wait_until

from odradek import Producer
from odradek.testing.postgres import PostgresServer


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


def sql(pg, db, statement, params=()):
    with psycopg.connect(pg.conninfo(db), autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else None


def rows_or_none(pg, db, statement):
    try:
        return sql(pg, db, statement)
    except psycopg.errors.UndefinedTable:
        return None


def state_of(worker, name):
    status = worker.get(f"/connectors/{name}/status").json()
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def create(worker, name, config):
    created = worker.request("POST", "/connectors", json={"name": name, "config": config})
    assert created.status_code == 201, created.text
    wait_until(lambda: state_of(worker, name) == ("RUNNING", ["RUNNING"]), 30, f"{name} to run")


def source_config(pg, db, prefix):
    """Confluent's source-quickstart keys, with a ValueToKey transform so the sink can key by id."""
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "tasks.max": "1",
        "connection.url": pg.jdbc_url(db),
        "connection.user": pg.user,
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "table.whitelist": "accounts",
        "topic.prefix": prefix,
        "poll.interval.ms": "200",
        "transforms": "createKey",
        "transforms.createKey.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.createKey.fields": "id",
    }


def sink_config(pg, db, topic):
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connection.url": pg.jdbc_url(db),
        "connection.user": pg.user,
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "auto.create": "true",
        "delete.enabled": "true",
        "table.name.format": "accounts_copy",
    }


def test_postgres_table_to_topic_to_table_through_the_rest_api(broker, postgres, tmp_path, topic_name):
    source_db, target_db = postgres.create_database(), postgres.create_database()
    sql(
        postgres,
        source_db,
        "CREATE TABLE accounts (id SERIAL PRIMARY KEY, owner TEXT NOT NULL, balance NUMERIC(12,2))",
    )
    sql(
        postgres,
        source_db,
        "INSERT INTO accounts (owner, balance) VALUES ('ann', 10.50), ('bob', 20), ('cy', 0)",
    )
    prefix = f"{topic_name}-"
    topic = prefix + "accounts"
    worker = WorkerProcess(tmp_path, quickstart_worker(broker.bootstrap_servers, tmp_path)).start()
    try:
        # Confluent's source-quickstart keys, with a ValueToKey transform so the sink can key by id.
        create(worker, "accounts-source", source_config(postgres, source_db, prefix))
        create(worker, "accounts-sink", sink_config(postgres, target_db, topic))
        copy = "SELECT id, owner, balance::text FROM accounts_copy ORDER BY id"
        wait_until(
            lambda: (
                rows_or_none(postgres, target_db, copy)
                == [(1, "ann", "10.50"), (2, "bob", "20.00"), (3, "cy", "0.00")]
            ),
            60,
            "the copy",
        )

        # A new row arrives; a tombstone for id 2 (as a CDC source would send) deletes its row.
        sql(postgres, source_db, "INSERT INTO accounts (owner, balance) VALUES ('dee', 7)")
        key = {"schema": {"type": "struct", "fields": [{"field": "id", "type": "int32", "optional": False}],
                          "optional": False}, "payload": {"id": 2}}  # fmt: skip
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            wait_until(lambda: rows_or_none(postgres, target_db, copy)[-1][0] == 4, 60, "row 4 in the copy")
            producer.send(topic, key=json.dumps(key).encode(), value=None)
            producer.flush()
        wait_until(
            lambda: [r[0] for r in rows_or_none(postgres, target_db, copy)] == [1, 3, 4], 60, "row 2 deleted"
        )

        # Source offsets are flushed every offset.flush.interval.ms, not with each record.
        stored = [{"partition": {"table": "accounts"}, "offset": {"incrementing": 4}}]
        wait_until(
            lambda: worker.get("/connectors/accounts-source/offsets").json()["offsets"] == stored,
            30,
            "the source's offset of row 4",
        )
        # The sink commits its consumer offsets on the same interval; until then a restart re-delivers
        # (at least once), which would overwrite the hand edit below. Four rows and the tombstone: 5.
        def sink_committed():
            offsets = worker.get("/connectors/accounts-sink/offsets").json()["offsets"]
            return sum(o["offset"]["kafka_offset"] for o in offsets)

        wait_until(
            lambda: sink_committed() == 5,
            30,
            "the sink's committed offset past the tombstone",
        )
    finally:
        worker.kill()

    # A new worker on the same offsets file reads on after id 4: only the new row reaches the topic.
    sql(postgres, source_db, "INSERT INTO accounts (owner, balance) VALUES ('eve', 1)")
    sql(postgres, target_db, "UPDATE accounts_copy SET owner = 'changed by hand' WHERE id = 1")
    restarted = WorkerProcess(tmp_path, worker.worker).start()
    try:
        create(restarted, "accounts-source", source_config(postgres, source_db, prefix))
        create(restarted, "accounts-sink", sink_config(postgres, target_db, topic))
        wait_until(
            lambda: [r[0] for r in rows_or_none(postgres, target_db, copy)] == [1, 3, 4, 5], 60, "row 5"
        )
        # Row 1 was not read again (neither the source nor the sink re-delivered it): the hand edit stays.
        assert rows_or_none(postgres, target_db, copy)[0][1] == "changed by hand"
    finally:
        restarted.kill()


def test_validate_endpoint_names_bad_jdbc_keys(broker, tmp_path):
    worker = WorkerProcess(tmp_path, quickstart_worker(broker.bootstrap_servers, tmp_path)).start()
    try:
        validated = worker.request(
            "PUT",
            "/connector-plugins/io.confluent.connect.jdbc.JdbcSinkConnector/config/validate",
            json={
                "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "name": "bad-sink",
                "topics": "orders",
                "connection.url": "jdbc:oracle:thin:@db:1521:orcl",
                "insert.mode": "merge",
                "delete.enabled": "true",
            },
        ).json()
        errors = {
            c["value"]["name"]: c["value"]["errors"] for c in validated["configs"] if c["value"]["errors"]
        }
        assert set(errors) == {"connection.url", "insert.mode", "delete.enabled"}, errors
        assert "jdbc:postgresql://host:port/database or jdbc:sqlite:path" in errors["connection.url"][0]
        assert validated["error_count"] == 3
        refused = worker.request("POST", "/connectors", json={"name": "bad-sink", "config": {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders",
            "connection.url": "jdbc:sqlite:x.db", "delete.enabled": "true"}})  # fmt: skip
        assert refused.status_code == 400 and "delete.enabled" in refused.json()["message"]
    finally:
        worker.kill()
