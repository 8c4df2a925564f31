"""Batched writes of the JDBC sink: rows in, as few statements as the dialect allows.

A batch is a list of runs of operations on one table, in record order: ("write", rows of key
values + value values) and ("delete", rows of key values). A run is written at once; runs follow
one another, so "write k, delete k, write k" leaves the row as the last record says.

- insert: PostgreSQL: the run's rows go by ``COPY`` into a temporary staging table of the same
  columns (one per table and row layout, kept for the session, emptied at each commit), then one
  ``INSERT … SELECT`` moves them into the table; SQLite: ``executemany`` of a one-row INSERT.
- upsert: the same with ``ON CONFLICT (key) DO UPDATE``; PostgreSQL refuses to touch a row
  twice in one such statement, so within a run only the last write of each key is kept (the
  table ends the same).
- update: ``UPDATE … WHERE key = …`` per row, through ``executemany`` (pipelined by psycopg).
- delete: ``DELETE … WHERE key = …`` per key, through ``executemany``.

``COPY`` formats the rows in psycopg's C code and the server parses them as one stream, so a
run of any length costs three statements; the table's constraints and triggers still apply
row by row to the ``INSERT``. The ``COPY`` is binary (``FORMAT BINARY``, each column's type
declared): half the client's CPU of the text format and less of the server's. A binary dumper
takes only the Python type its column's type expects (a naive datetime for a timestamp, say,
which the text format reads as UTC): a value it refuses raises ``BinaryCopyRefused``, and the
caller, after rolling back, turns ``binary`` off and writes again. The caller owns the
transaction and calls ``transaction_ended`` after each commit or rollback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.connect.jdbc.jdbc_dialects import Dialect

WRITE = "write"
DELETE = "delete"


class BinaryCopyRefused(Exception):
    """A value the binary ``COPY`` cannot send as its column's type; the transaction is aborted."""


class BatchWriter:
    def __init__(self, dialect: Dialect, insert_mode: str, batch_size: int):
        self.dialect = dialect
        self.insert_mode = insert_mode
        self.batch_size = batch_size
        self._staging: dict[tuple, str] = {}  # (table, columns, SQL types) -> staging table name
        self._staged: set[str] = set()  # staging tables holding rows in the current transaction
        self.binary = True  # COPY in PostgreSQL's binary format where every column's type has one

    def transaction_ended(self, committed: bool) -> None:
        """Commit empties the staging tables; a rollback may also have undone their creation."""
        self._staged.clear()
        if not committed:
            self._staging.clear()

    def execute(
        self,
        conn: Any,
        table: str,
        key_columns: Sequence[str],
        value_columns: Sequence[str],
        operations: Sequence[tuple[str, list[tuple]]],
        sql_types: Sequence[str] = (),
    ) -> None:
        """``operations``: runs of rows, each ``(kind, rows)``, in record order; ``sql_types``: the
        SQL type of each key and value column, for the staging table."""
        for kind, rows in operations:
            if kind == DELETE:
                self._delete(conn, table, key_columns, rows)
            else:
                self._write(conn, table, key_columns, value_columns, rows, sql_types)

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
        columns = [*keys, *values]
        stage = self._stage(conn, table, columns, sql_types) if sql_types else None
        if stage is None:  # SQLite: executemany of a one-row statement is as fast as it gets
            self._many(conn, self._statement(table, keys, values, 1), rows)
            return
        statement = d.insert_from(table, stage, columns)
        if self.insert_mode == "upsert":
            statement = d.on_conflict(statement, keys, values)
        with conn.cursor() as cursor:
            if stage in self._staged:  # a second run in this transaction: the first's rows are moved on
                cursor.execute(f"DELETE FROM {d.quote(stage)}")
            self._staged.add(stage)
            self._copy(cursor, stage, columns, rows, d.copy_types(sql_types) if self.binary else None)
            cursor.execute(statement)

    def _copy(self, cursor: Any, stage: str, columns: list[str], rows: list[tuple], types: list[str] | None) -> None:
        with cursor.copy(self.dialect.copy_into(stage, columns, binary=types is not None)) as copy:
            write = copy.write_row
            if types is None:
                for row in rows:
                    write(row)
                return
            copy.set_types(types)
            try:
                for row in rows:
                    write(row)
            except (TypeError, ValueError, OverflowError) as exc:
                raise BinaryCopyRefused(f"{exc} (a row of {stage}: {columns})") from exc

    def _stage(self, conn: Any, table: str, columns: list[str], sql_types: Sequence[str]) -> str | None:
        key = (table, tuple(columns), tuple(sql_types))
        name = self._staging.get(key)
        if name is None:
            name = f"odradek_stage_{len(self._staging)}"
            create = self.dialect.staging_table(name, columns, sql_types)
            if create is None:
                return None
            conn.execute(create)
            self._staging[key] = name
        return name

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
