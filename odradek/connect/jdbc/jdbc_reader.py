"""One table (or the query) being read by a JDBC source task: its query, cursor and offset.

A ``TableReader`` runs its query when due, hands out at most ``batch.max.rows`` rows per
call from the open result, and goes back to waiting ``poll.interval.ms`` once the result is
exhausted (Confluent's ``TableQuerier``). It tracks the offset of the last row handed out, so
the next query starts after it, and builds each row's Connect value: a struct named after the
table, its fields typed from the table's columns (or, for a query, from the result's types).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import time
from typing import Any

from odradek.connect.data import Struct
from odradek.connect.jdbc.jdbc_dialects import Column, Dialect, numeric_aware_column
from odradek.connect.jdbc.jdbc_queries import (
    BULK,
    Offset,
    QuerySpec,
    build_select,
    offset_after,
    query_parameters,
)
from odradek.connect.jdbc.jdbc_schemas import table_schema

log = logging.getLogger(__name__)


class TableReader:
    def __init__(self, dialect: Dialect, spec: QuerySpec, offset: Offset, topic: str, delay_ms: int):
        self.dialect = dialect
        self.spec = spec
        self.offset = offset
        self.topic = topic
        self.delay_ms = delay_ms
        self.next_query_at = 0.0  # time.monotonic() when the next query may run
        self._cursor: Any = None
        self._columns: list[Column] = []
        self._schema: Any = None

    @property
    def name(self) -> str:
        return self.spec.table or "query"

    def reading(self) -> bool:
        return self._cursor is not None

    def start_query(self, conn: Any) -> None:
        end = None
        if self.spec.uses_timestamp():
            end = self.dialect.current_timestamp(conn) - dt.timedelta(milliseconds=self.delay_ms)
        cursor = conn.cursor()
        cursor.execute(
            build_select(self.dialect, self.spec), query_parameters(self.dialect, self.spec, self.offset, end)
        )
        self._columns = self._describe(conn, cursor)
        self._schema = table_schema(self.spec.table or "query", self._columns)
        self._cursor = cursor

    def _describe(self, conn: Any, cursor: Any) -> list[Column]:
        names = [d[0] for d in cursor.description]
        if self.spec.table is not None:
            described = {c.name: c for c in self.dialect.describe_columns(conn, self.spec.table)}
            if all(n in described for n in names):
                return [described[n] for n in names]
        return [
            numeric_aware_column(d[0], self._result_kind(conn, d), True, _scale(d))
            for d in cursor.description
        ]

    def _result_kind(self, conn: Any, description: Any) -> str:
        type_code = description[1]
        if type_code is None:  # SQLite names no result types
            return "string"
        info = conn.adapters.types.get(type_code)
        return self.dialect.result_kind(info.name) if info is not None else "string"  # type: ignore[attr-defined]

    def next_rows(self, max_rows: int) -> list[tuple[dict, Offset, Struct]]:
        """Up to ``max_rows`` (row, offset after it, value) from the open result; closes it when done."""
        assert self._cursor is not None
        fetched = self._cursor.fetchmany(max_rows)
        out = []
        for raw in fetched:
            from_db = self.dialect.from_db
            row = {
                c.name: _fit(c.kind, c.scale, from_db(c, v)) for c, v in zip(self._columns, raw, strict=True)
            }
            self.offset = offset_after(self.spec, self.offset, row)
            value = Struct(self._schema)
            for name, v in row.items():
                value.put(name, v)
            out.append((row, self.offset, value))
        if len(fetched) < max_rows:
            self.finish()
        return out

    def finish(self) -> None:
        if self._cursor is not None:
            try:
                self._cursor.close()
            except Exception:  # noqa: BLE001 - a broken connection is reopened by the task
                log.debug("closing the cursor of %s failed", self.name, exc_info=True)
            self._cursor = None

    def schedule(self, poll_interval_ms: int) -> None:
        self.next_query_at = time.monotonic() + poll_interval_ms / 1000

    @property
    def bulk(self) -> bool:
        return self.spec.mode == BULK


def _fit(kind: str, scale: int, value: Any) -> Any:
    """A database value as Connect's data model holds it for a field of ``kind``."""
    if value is None:
        return None
    if kind == "decimal" and isinstance(value, decimal.Decimal):
        return value.quantize(decimal.Decimal(1).scaleb(-scale)) if value.is_finite() else value
    if kind == "date" and isinstance(value, dt.datetime):
        return value.date()
    if kind in ("float32", "float64") and isinstance(value, (int, decimal.Decimal)):
        return float(value)
    return value


def _scale(description: Any) -> int:
    scale = getattr(description, "scale", None)
    return -1 if scale is None else int(scale)
