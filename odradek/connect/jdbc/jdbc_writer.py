"""Batched writes of the JDBC sink: rows in, as few statements as the dialect allows.

A batch is a list of operations on one table, in record order: ("write", key values + value
values) and ("delete", key values). Consecutive operations of one kind run together; a change
of kind ends the run, so "write k, delete k, write k" leaves the row as the last record says.

- insert: PostgreSQL: ``INSERT … SELECT * FROM unnest(%s::type[], …)`` with one array per
  column, ``batch.size`` rows per statement; SQLite: ``executemany`` of a one-row INSERT.
- upsert: the same with ``ON CONFLICT (key) DO UPDATE``; PostgreSQL refuses to touch a row
  twice in one such statement, so within a run only the last write of each key is kept (the
  table ends the same).
- update: ``UPDATE … WHERE key = …`` per row, through ``executemany`` (pipelined by psycopg).
- delete: ``DELETE … WHERE key = …`` per key, through ``executemany``.

The array statement has one parameter per column whatever the row count, so psycopg parses
it once and prepares it after a few uses. The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.connect.jdbc.jdbc_dialects import Dialect

WRITE = "write"
DELETE = "delete"


class BatchWriter:
    def __init__(self, dialect: Dialect, insert_mode: str, batch_size: int):
        self.dialect = dialect
        self.insert_mode = insert_mode
        self.batch_size = batch_size

    def execute(
        self,
        conn: Any,
        table: str,
        key_columns: Sequence[str],
        value_columns: Sequence[str],
        operations: Sequence[tuple[str, tuple]],
        sql_types: Sequence[str] = (),
    ) -> None:
        """``sql_types``: the SQL type of each key and value column, for the array statement."""
        start = 0
        while start < len(operations):
            kind = operations[start][0]
            end = start
            while end < len(operations) and operations[end][0] == kind:
                end += 1
            rows = [row for _, row in operations[start:end]]
            if kind == DELETE:
                self._delete(conn, table, key_columns, rows)
            else:
                self._write(conn, table, key_columns, value_columns, rows, sql_types)
            start = end

    def _write(
        self,
        conn: Any,
        table: str,
        keys: Sequence[str],
        values: Sequence[str],
        rows: list[tuple],
        sql_types: Sequence[str],
    ) -> None:
        d = self.dialect
        if self.insert_mode == "update":
            reordered = [row[len(keys) :] + row[: len(keys)] for row in rows]
            self._many(conn, d.update(table, keys, values), reordered)
            return
        if self.insert_mode == "upsert":
            latest = {row[: len(keys)]: row for row in rows}
            rows = list(latest.values())
        statement = d.from_arrays(table, [*keys, *values], sql_types) if sql_types else None
        if statement is None:  # SQLite: executemany of a one-row statement is as fast as it gets
            self._many(conn, self._statement(table, keys, values, 1), rows)
            return
        if self.insert_mode == "upsert":
            statement = d.on_conflict(statement, keys, values)
        for first in range(0, len(rows), self.batch_size):
            chunk = rows[first : first + self.batch_size]
            conn.execute(statement, [list(column) for column in zip(*chunk, strict=True)])

    def _statement(self, table: str, keys: Sequence[str], values: Sequence[str], rows: int) -> str:
        if self.insert_mode == "upsert":
            return self.dialect.upsert(table, keys, values, rows)
        return self.dialect.insert(table, [*keys, *values], rows)

    def _delete(self, conn: Any, table: str, keys: Sequence[str], rows: list[tuple]) -> None:
        self._many(conn, self.dialect.delete(table, keys), rows)

    def _many(self, conn: Any, statement: str, rows: list[tuple]) -> None:
        cursor = conn.cursor()
        try:
            for first in range(0, len(rows), self.batch_size):
                cursor.executemany(statement, rows[first : first + self.batch_size])
        finally:
            cursor.close()
