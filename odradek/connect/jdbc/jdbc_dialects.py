"""SQL dialects: how to connect, name, inspect and write tables in PostgreSQL and SQLite.

A dialect owns everything that differs between databases (Confluent's ``DatabaseDialect``):
the driver and its placeholder, identifier quoting, listing tables, describing columns,
the SQL type for a Connect type, and the statements the sink runs (CREATE/ALTER TABLE,
INSERT, upsert as ``INSERT … ON CONFLICT … DO UPDATE``, UPDATE, DELETE). Statements are
built from quoted identifiers only; values always travel as parameters.

PostgreSQL is reached through psycopg 3 with the session time zone set to UTC (timestamps
without a zone are read and written as UTC, Confluent's ``db.timezone`` default); SQLite
through the standard library's sqlite3, keeping dates and timestamps as ISO-8601 text
(which sorts as the instants do).
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.connect.jdbc.jdbc_url import ConnectionTarget

# Kafka's logical type names (org.apache.kafka.connect.data.*).
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"


@dataclass(frozen=True)
class Column:
    """A table column as the database describes it. ``kind`` is the dialect-neutral family
    the source maps to a Connect schema: bool, int16, int32, int64, float32, float64,
    decimal, string, bytes, date, time, timestamp."""

    name: str
    kind: str
    nullable: bool = True
    scale: int = 0


class Dialect:
    name = ""
    placeholder = "%s"
    converts_values = True  # whether to_db changes anything
    # Connect type (or logical name) → SQL type, for CREATE TABLE and ALTER TABLE ADD.
    sql_types: dict[str, str] = {}
    # Rows per multi-row statement, capped by the driver's limit of bound parameters.
    max_parameters = 32767

    def __init__(self, target: ConnectionTarget):
        self.target = target

    def connect(self, autocommit: bool = False) -> Any:
        raise NotImplementedError

    # -- names ------------------------------------------------------------------------------

    @staticmethod
    def quote(identifier: str) -> str:
        return '"' + identifier.replace('"', '""') + '"'

    def table_ref(self, table: str) -> str:
        """``schema.table`` or ``table``, each part quoted."""
        return ".".join(self.quote(part) for part in table.split(".", 1))

    # -- inspection -------------------------------------------------------------------------

    def list_tables(self, conn: Any) -> list[str]:
        raise NotImplementedError

    def describe_columns(self, conn: Any, table: str) -> list[Column]:
        """The table's columns in order, or [] when the table does not exist."""
        raise NotImplementedError

    def current_timestamp(self, conn: Any) -> dt.datetime:
        """The database's clock, as a UTC datetime without tzinfo."""
        raise NotImplementedError

    def comparable_timestamp(self, expression: str) -> str:
        """``expression`` (a timestamp column) in the form query parameters compare with."""
        return expression

    # -- values -----------------------------------------------------------------------------

    def to_db(self, kind: str, value: Any) -> Any:
        """A Python value (from a Connect record) as the driver takes it for a column of ``kind``."""
        return value

    def from_db(self, column: Column, value: Any) -> Any:
        """A driver value as the Python value Connect's data model uses for ``column.kind``."""
        return value

    # -- statements -------------------------------------------------------------------------

    def sql_type(self, connect_type: str, logical: str | None = None) -> str:
        key = logical if logical in self.sql_types else connect_type
        try:
            return self.sql_types[key]
        except KeyError:
            raise ValueError(
                f"no {self.name} column type for Connect type {logical or connect_type}"
            ) from None

    def column_definition(self, name: str, sql_type: str, optional: bool) -> str:
        return f"{self.quote(name)} {sql_type}" + ("" if optional else " NOT NULL")

    def create_table(self, table: str, definitions: Sequence[str], key_columns: Sequence[str]) -> str:
        body = list(definitions)
        if key_columns:
            body.append("PRIMARY KEY(" + ", ".join(self.quote(c) for c in key_columns) + ")")
        return f"CREATE TABLE {self.table_ref(table)} (\n  " + ",\n  ".join(body) + "\n)"

    def add_column(self, table: str, definition: str) -> str:
        return f"ALTER TABLE {self.table_ref(table)} ADD {definition}"

    def _values(self, count: int, rows: int = 1) -> str:
        one = "(" + ", ".join([self.placeholder] * count) + ")"
        return ", ".join([one] * rows)

    def insert(self, table: str, columns: Sequence[str], rows: int = 1) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        return f"INSERT INTO {self.table_ref(table)} ({cols}) VALUES {self._values(len(columns), rows)}"

    def upsert(
        self, table: str, key_columns: Sequence[str], value_columns: Sequence[str], rows: int = 1
    ) -> str:
        """Insert, or update the non-key columns of the row with the same key (both dialects
        speak ``ON CONFLICT``: PostgreSQL since 9.5, SQLite since 3.24)."""
        return self.on_conflict(
            self.insert(table, [*key_columns, *value_columns], rows), key_columns, value_columns
        )

    def on_conflict(self, statement: str, key_columns: Sequence[str], value_columns: Sequence[str]) -> str:
        """``statement`` (an INSERT) made an upsert on ``key_columns``."""
        conflict = ", ".join(self.quote(c) for c in key_columns)
        if not value_columns:
            return f"{statement} ON CONFLICT ({conflict}) DO NOTHING"
        updates = ", ".join(f"{self.quote(c)} = excluded.{self.quote(c)}" for c in value_columns)
        return f"{statement} ON CONFLICT ({conflict}) DO UPDATE SET {updates}"

    def copy_types(self, sql_types: Sequence[str]) -> list[str] | None:
        """The types a binary ``COPY`` of these columns declares, or None (no binary ``COPY``)."""
        return None

    def copy_into(self, name: str, columns: Sequence[str], binary: bool = False) -> str:
        raise NotImplementedError

    def insert_from(self, table: str, name: str, columns: Sequence[str]) -> str:
        raise NotImplementedError

    def staging_table(self, name: str, columns: Sequence[str], sql_types: Sequence[str]) -> str | None:
        """``CREATE`` of a session's temporary table that rows are copied into before one
        ``INSERT … SELECT`` moves them on, or None when the dialect has no ``COPY``."""
        return None

    def update(self, table: str, key_columns: Sequence[str], value_columns: Sequence[str]) -> str:
        sets = ", ".join(f"{self.quote(c)} = {self.placeholder}" for c in value_columns)
        return f"UPDATE {self.table_ref(table)} SET {sets} WHERE {self._key_match(key_columns)}"

    def delete(self, table: str, key_columns: Sequence[str]) -> str:
        return f"DELETE FROM {self.table_ref(table)} WHERE {self._key_match(key_columns)}"

    def _key_match(self, key_columns: Sequence[str]) -> str:
        return " AND ".join(f"{self.quote(c)} = {self.placeholder}" for c in key_columns)

    def rows_per_statement(self, columns: int) -> int:
        return max(1, min(1000, self.max_parameters // max(1, columns)))


class PostgresDialect(Dialect):
    name = "PostgreSQL"
    placeholder = "%s"
    converts_values = False
    sql_types = {
        "INT8": "SMALLINT",
        "INT16": "SMALLINT",
        "INT32": "INT",
        "INT64": "BIGINT",
        "FLOAT32": "REAL",
        "FLOAT64": "DOUBLE PRECISION",
        "BOOLEAN": "BOOLEAN",
        "STRING": "TEXT",
        "BYTES": "BYTEA",
        DECIMAL: "DECIMAL",
        DATE: "DATE",
        TIME: "TIME",
        TIMESTAMP: "TIMESTAMP",
    }
    max_parameters = 65535
    # pg_type names → column kinds.
    _kinds = {
        "bool": "bool",
        "int2": "int16",
        "int4": "int32",
        "int8": "int64",
        "oid": "int64",
        "float4": "float32",
        "float8": "float64",
        "numeric": "decimal",
        "bytea": "bytes",
        "date": "date",
        "time": "time",
        "timetz": "time",
        "timestamp": "timestamp",
        "timestamptz": "timestamp",
    }

    def connect(self, autocommit: bool = False) -> Any:
        import psycopg

        params: dict[str, Any] = dict(self.target.params)
        return psycopg.connect(**params, options="-c TimeZone=UTC", autocommit=autocommit)

    def list_tables(self, conn: Any) -> list[str]:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
            " WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
            " ORDER BY table_schema, table_name"
        ).fetchall()
        return [name if schema == "public" else f"{schema}.{name}" for schema, name in rows]

    def describe_columns(self, conn: Any, table: str) -> list[Column]:
        schema, _, name = table.rpartition(".")
        rows = conn.execute(
            "SELECT a.attname, t.typname, NOT a.attnotnull,"
            "  CASE WHEN t.typname = 'numeric' AND a.atttypmod > 0 THEN (a.atttypmod - 4) & 65535 ELSE -1 END"
            " FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
            " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            [self.table_ref(f"{schema or 'public'}.{name}")],
        ).fetchall()
        return [
            numeric_aware_column(n, self._kinds.get(t, "string"), bool(nullable), int(scale))
            for n, t, nullable, scale in rows
        ]

    def staging_table(self, name: str, columns: Sequence[str], sql_types: Sequence[str]) -> str | None:
        # Connect timestamps are UTC instants: staged as timestamptz they reach a TIMESTAMP column
        # through the session's TimeZone (UTC), as the array statement's cast takes them.
        defs = ", ".join(f"{self.quote(c)} {'TIMESTAMPTZ' if t == 'TIMESTAMP' else t}"
                         for c, t in zip(columns, sql_types, strict=True))
        return f"CREATE TEMPORARY TABLE IF NOT EXISTS {self.quote(name)} ({defs}) ON COMMIT DELETE ROWS"

    # The staging table's SQL types as psycopg names them for a binary COPY (set_types).
    _copy_types = {
        "SMALLINT": "int2",
        "INT": "int4",
        "BIGINT": "int8",
        "REAL": "float4",
        "DOUBLE PRECISION": "float8",
        "BOOLEAN": "bool",
        "TEXT": "text",
        "BYTEA": "bytea",
        "DECIMAL": "numeric",
        "DATE": "date",
        "TIME": "time",
        "TIMESTAMP": "timestamptz",  # as staged (see staging_table)
    }

    def copy_types(self, sql_types: Sequence[str]) -> list[str] | None:
        names = [self._copy_types.get(t) for t in sql_types]
        return None if None in names else names  # type: ignore[return-value]

    def copy_into(self, name: str, columns: Sequence[str], binary: bool = False) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        return f"COPY {self.quote(name)} ({cols}) FROM STDIN" + (" (FORMAT BINARY)" if binary else "")

    def insert_from(self, table: str, name: str, columns: Sequence[str]) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        return f"INSERT INTO {self.table_ref(table)} ({cols}) SELECT {cols} FROM {self.quote(name)}"

    def result_kind(self, type_name: str) -> str:
        return self._kinds.get(type_name, "string")

    def current_timestamp(self, conn: Any) -> dt.datetime:
        return conn.execute("SELECT LOCALTIMESTAMP").fetchone()[0]

    def from_db(self, column: Column, value: Any) -> Any:
        if value is None:
            return None
        if column.kind == "timestamp" and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        if column.kind == "time" and value.tzinfo is not None:
            return value.replace(tzinfo=None)
        if column.kind == "string" and not isinstance(value, str):
            return str(value)  # uuid, json, interval…: their text form
        if column.kind == "bytes":
            return bytes(value)
        return value


class SqliteDialect(Dialect):
    name = "SQLite"
    placeholder = "?"
    sql_types = {
        "INT8": "INTEGER",
        "INT16": "INTEGER",
        "INT32": "INTEGER",
        "INT64": "INTEGER",
        "FLOAT32": "REAL",
        "FLOAT64": "REAL",
        "BOOLEAN": "INTEGER",
        "STRING": "TEXT",
        "BYTES": "BLOB",
        DECIMAL: "NUMERIC",
        DATE: "DATE",
        TIME: "TIME",
        TIMESTAMP: "TIMESTAMP",
    }
    max_parameters = 32766  # SQLITE_MAX_VARIABLE_NUMBER since 3.32

    def connect(self, autocommit: bool = False) -> Any:
        # The connection is used by one task at a time, though not always from the thread that opened it.
        path = self.target.params["path"]
        if autocommit:
            return sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        return sqlite3.connect(path, check_same_thread=False)

    def list_tables(self, conn: Any) -> list[str]:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        return [name for (name,) in rows]

    def describe_columns(self, conn: Any, table: str) -> list[Column]:
        rows = conn.execute(f"PRAGMA table_info({self.quote(table)})").fetchall()
        return [
            numeric_aware_column(
                name, self.declared_kind(decl), not notnull and not pk, _declared_scale(decl)
            )
            for _, name, decl, notnull, _, pk in rows
        ]

    @staticmethod
    def declared_kind(declared: str | None) -> str:
        """SQLite's type affinity rules, refined by the names Confluent's users declare."""
        decl = (declared or "").upper()
        if decl.startswith("BOOL"):
            return "bool"
        if decl == "DATE":
            return "date"
        if decl == "TIME":
            return "time"
        if "TIMESTAMP" in decl or "DATETIME" in decl:
            return "timestamp"
        if "INT" in decl:
            return "int64"
        if any(t in decl for t in ("CHAR", "CLOB", "TEXT")):
            return "string"
        if "BLOB" in decl or not decl:
            return "bytes" if decl else "string"
        if any(t in decl for t in ("REAL", "FLOA", "DOUB")):
            return "float64"
        return "decimal" if ("DEC" in decl or "NUMERIC" in decl) else "string"

    def current_timestamp(self, conn: Any) -> dt.datetime:
        (text,) = conn.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").fetchone()
        return dt.datetime.fromisoformat(text)

    def comparable_timestamp(self, expression: str) -> str:
        # Stored text may omit the fraction or use a "T": compare in one canonical form.
        return f"strftime('%Y-%m-%d %H:%M:%f', {expression})"

    def to_db(self, kind: str, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value.isoformat(sep=" ", timespec="milliseconds")
        if isinstance(value, (dt.date, dt.time)):
            return value.isoformat()
        if kind == "decimal" or type(value).__name__ == "Decimal":
            return str(value)
        if isinstance(value, bool):
            return int(value)
        return value

    def from_db(self, column: Column, value: Any) -> Any:
        import decimal

        if value is None:
            return None
        kind = column.kind
        if kind == "timestamp":
            if isinstance(value, (int, float)):
                return dt.datetime.fromtimestamp(value / 1000, dt.UTC).replace(tzinfo=None)
            return dt.datetime.fromisoformat(str(value)).replace(tzinfo=None)
        if kind == "date":
            return dt.date.fromisoformat(str(value))
        if kind == "time":
            return dt.time.fromisoformat(str(value))
        if kind == "bool":
            return bool(value)
        if kind == "int64":
            return int(value)
        if kind == "float64":
            return float(value)
        if kind == "decimal":
            return decimal.Decimal(str(value))
        if kind == "string" and not isinstance(value, str):
            return str(value)
        return value


def _declared_scale(declared: str | None) -> int:
    """The scale of ``DECIMAL(10,2)`` (2) or ``DECIMAL(10)`` (0); -1 when the declaration gives none."""
    match = re.search(r"\(\s*\d+\s*(?:,\s*(\d+)\s*)?\)", declared or "")
    if not match:
        return -1
    return int(match.group(1) or 0)


def numeric_aware_column(name: str, kind: str, nullable: bool, scale: int) -> Column:
    """A column; a NUMERIC without a declared scale reads as FLOAT64, as Kafka's Decimal needs a fixed scale."""
    if kind == "decimal" and scale < 0:
        return Column(name, "float64", nullable)
    return Column(name, kind, nullable, max(scale, 0))


def dialect_for(target: ConnectionTarget) -> Dialect:
    return SqliteDialect(target) if target.dialect == "sqlite" else PostgresDialect(target)
