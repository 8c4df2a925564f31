"""The sink's destination tables: created (``auto.create``) and widened (``auto.evolve``) to fit
the records, as Confluent's ``DbStructure`` does.

A missing table is created with a column per key and value field (NOT NULL unless the field is
optional) and a PRIMARY KEY of the key columns. A table missing some of a record's columns gets
them through ``ALTER TABLE … ADD``, one per column; a required field without a default cannot be
added to a table that has rows, so that is refused with a message. Without the matching setting
each case is a ``ConnectException`` saying which key to set. What the database holds is cached
per table and read again after every change.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.connect.errors import ConnectException
from odradek.connect.jdbc.jdbc_dialects import Dialect
from odradek.connect.jdbc.jdbc_fields import RowLayout
from odradek.connect.jdbc.jdbc_schemas import sql_type_of

log = logging.getLogger(__name__)


class TableManager:
    def __init__(self, dialect: Dialect, auto_create: bool, auto_evolve: bool):
        self.dialect = dialect
        self.auto_create = auto_create
        self.auto_evolve = auto_evolve
        self._columns: dict[str, set[str]] = {}

    def ensure(self, conn: Any, table: str, layout: RowLayout) -> None:
        """Make ``table`` hold every column of ``layout`` (or raise); cheap once it does."""
        wanted = [*layout.key_columns, *layout.value_columns]
        known = self._columns.get(table)
        if known is not None and all(c in known for c in wanted):
            return
        known = self._read(conn, table)
        if not known:
            self._create(conn, table, layout)
        else:
            missing = [c for c in wanted if c not in known]
            if missing:
                self._evolve(conn, table, layout, missing)
        self._read(conn, table)

    def forget(self, table: str | None = None) -> None:
        """Read the table's columns again next time (after a rollback undid a CREATE or ALTER)."""
        if table is None:
            self._columns.clear()
        else:
            self._columns.pop(table, None)

    def _read(self, conn: Any, table: str) -> set[str]:
        names = {c.name for c in self.dialect.describe_columns(conn, table)}
        self._columns[table] = names
        return names

    def _definition(self, layout: RowLayout, column: str, key: bool) -> str:
        schema = layout.schemas[column]
        try:
            sql_type = self.dialect.sql_type(*sql_type_of(schema))
        except ValueError as exc:
            raise ConnectException(f"column {column!r}: {exc}") from None
        return self.dialect.column_definition(column, sql_type, optional=schema.is_optional and not key)

    def _create(self, conn: Any, table: str, layout: RowLayout) -> None:
        if not self.auto_create:
            raise ConnectException(
                f"table {table!r} is missing and auto.create is false; create it or set auto.create=true"
            )
        definitions = [self._definition(layout, c, True) for c in layout.key_columns]
        definitions += [self._definition(layout, c, False) for c in layout.value_columns]
        statement = self.dialect.create_table(table, definitions, layout.key_columns)
        log.info("JDBC sink: creating table %s: %s", table, statement)
        conn.execute(statement)

    def _evolve(self, conn: Any, table: str, layout: RowLayout, missing: list[str]) -> None:
        if not self.auto_evolve:
            raise ConnectException(
                f"table {table!r} has no column(s) {', '.join(missing)} and auto.evolve is false; "
                "add them or set auto.evolve=true"
            )
        for column in missing:
            schema = layout.schemas[column]
            if column in layout.key_columns:
                raise ConnectException(
                    f"table {table!r} lacks key column {column!r}; key columns are never added"
                )
            if not schema.is_optional and schema.default_value is None:
                raise ConnectException(
                    f"cannot add column {column!r} to {table!r}: the field is required and has no default "
                    "(make it optional in the record's schema, or add the column by hand)"
                )
            statement = self.dialect.add_column(table, self._definition(layout, column, False))
            log.info("JDBC sink: evolving table %s: %s", table, statement)
            conn.execute(statement)
