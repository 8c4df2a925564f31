"""The JDBC sink connector: topics → tables of PostgreSQL or SQLite.

Confluent's ``io.confluent.connect.jdbc.JdbcSinkConnector`` with its keys (see jdbc_settings.py).
Each ``put`` writes its records in one transaction: records go to the table named by
``table.name.format`` (``${topic}`` replaced), a run of writes to one table by ``COPY`` and
one ``INSERT … SELECT`` on PostgreSQL, ``batch.size`` rows per ``executemany`` call on SQLite
(jdbc_writer.py), the table created or widened first when ``auto.create``/``auto.evolve``
allow (jdbc_tables.py). With ``delete.enabled`` a tombstone deletes the row its key names; without
it a tombstone is skipped. The transaction commits before ``put`` returns, so the offsets the
worker commits afterwards never run ahead of the database (at-least-once; with ``upsert`` a
redelivered record rewrites the same row). A failed write rolls back and is retried
``max.retries`` times (a RetriableException; the worker delivers the batch again after
``retry.backoff.ms``), then fails the task with the database's message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from odradek.connect.api import SinkConnector, SinkTask
from odradek.connect.connector_config import Config
from odradek.connect.connector_config import ConfigDef as ConnectConfigDef
from odradek.connect.errors import ConnectException, RetriableException
from odradek.connect.jdbc.connector_support import connect_config_def, validation
from odradek.connect.jdbc.jdbc_connection import open_connection
from odradek.connect.jdbc.jdbc_fields import RowLayout, layout_for
from odradek.connect.jdbc.jdbc_schemas import column_kind, sql_type_of
from odradek.connect.jdbc.jdbc_settings import SINK_CONFIGS, parse, problems
from odradek.connect.jdbc.jdbc_source import VERSION
from odradek.connect.jdbc.jdbc_tables import TableManager
from odradek.connect.jdbc.jdbc_writer import DELETE, WRITE, BatchWriter, BinaryCopyRefused
from odradek.connect.records import SinkRecord

log = logging.getLogger(__name__)


class JdbcSinkConnector(SinkConnector):
    def __init__(self) -> None:
        super().__init__()
        self._props: dict[str, str] = {}

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConnectConfigDef:
        return connect_config_def(SINK_CONFIGS)

    def validate(self, configs: dict[str, str]) -> Config:
        return validation(SINK_CONFIGS, configs, problems(SINK_CONFIGS, configs))

    def start(self, props: dict[str, str]) -> None:
        parse(SINK_CONFIGS, props)
        self._props = dict(props)

    def task_class(self):
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class _Pending:
    """The operations waiting for one table, all sharing one row layout: runs of rows of one kind."""

    def __init__(self, layout: RowLayout):
        self.layout = layout
        self.operations: list[tuple[str, list[tuple]]] = []

    def add(self, kind: str, rows: list[tuple]) -> None:
        if self.operations and self.operations[-1][0] == kind:
            self.operations[-1][1].extend(rows)
        else:
            self.operations.append((kind, rows))


class JdbcSinkTask(SinkTask):
    def __init__(self) -> None:
        super().__init__()
        self._conn: Any = None
        self._layouts: dict[tuple, RowLayout] = {}  # layouts live as long as the task: ids stay unique
        self._layouts_by_id: dict[tuple[int, int], tuple[RowLayout, tuple]] = {}
        self._types: dict[int, list[str]] = {}
        self._kinds: dict[tuple[int, tuple[str, ...]], list[str]] = {}
        self._retries_left = 0

    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        self.config = c = parse(SINK_CONFIGS, props)
        self.dialect, self._conn = open_connection(c)
        self.tables = TableManager(self.dialect, c["auto.create"], c["auto.evolve"])
        self.writer = BatchWriter(self.dialect, c["insert.mode"], c["batch.size"])
        self._retries_left = c["max.retries"]

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        try:
            self._write_binary_or_text(records)
            self._conn.commit()
            self.writer.transaction_ended(committed=True)
        except ConnectException:
            self._rollback()
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors differ per database
            self._rollback()
            if self._retries_left > 0:
                self._retries_left -= 1
                log.warning("JDBC sink: write failed (%s); %d retries left", exc, self._retries_left)
                timeout = getattr(self.context, "timeout", None)
                if timeout is not None:
                    timeout(self.config["retry.backoff.ms"])
                raise RetriableException(f"JDBC write failed, will retry: {exc}") from exc
            raise ConnectException(
                f"JDBC write failed after {self.config['max.retries']} retries: {exc}"
            ) from exc
        self._retries_left = self.config["max.retries"]

    def _write_binary_or_text(self, records: list[SinkRecord]) -> None:
        try:
            self._write(records)
        except BinaryCopyRefused as exc:
            log.warning("JDBC sink: the binary COPY refused a value (%s); this task copies text from now on", exc)
            self._rollback()
            self.writer.binary = False
            self._write(records)

    def _rollback(self) -> None:
        self.tables.forget()
        self.writer.transaction_ended(committed=False)
        try:
            self._conn.rollback()
        except Exception:  # noqa: BLE001 - the connection may be gone; reopen below
            log.warning("JDBC sink: rollback failed; reconnecting", exc_info=True)
            try:
                self._conn.close()
            finally:
                self.dialect, self._conn = open_connection(self.config)

    def _write(self, records: list[SinkRecord]) -> None:
        name_format = self.config["table.name.format"]
        deletes = self.config["delete.enabled"]
        pending: dict[str, _Pending] = {}
        for run in _runs(records):  # records of one topic and schemas: one layout, rows made at once
            first = run[0]
            tombstone = first.value is None
            if tombstone and not deletes:
                continue  # a tombstone without delete.enabled says nothing to a table
            table = name_format.replace("${topic}", first.topic)
            layout = self._layout(first)
            batch = pending.get(table)
            if batch is not None and not _fits(batch, layout, tombstone):
                self._flush(pending.pop(table), table)
                batch = None
            if batch is None:
                batch = pending[table] = _Pending(layout)
            elif not tombstone:
                batch.layout = layout  # the same, or a key-only layout of deletes so far
            if tombstone:
                batch.add(DELETE, self._convert(layout, layout.key_columns, layout.rows(run, values=False)))
            else:
                columns = layout.key_columns + layout.value_columns
                batch.add(WRITE, self._convert(layout, columns, layout.rows(run)))
        for table, batch in pending.items():
            self._flush(batch, table)

    def _layout(self, record: SinkRecord) -> RowLayout:
        # Converters hand out the same schema objects again and again: look them up by identity
        # first (hashing a schema walks all of it), by equality when they are new.
        by_id = (id(record.key_schema), id(record.value_schema))
        known = self._layouts_by_id.get(by_id)
        if known is not None:
            return known[0]
        by_value = (record.key_schema, record.value_schema)
        layout = self._layouts.get(by_value)
        if layout is None:
            c = self.config
            layout = self._layouts[by_value] = layout_for(
                record, c["pk.mode"], c["pk.fields"], c["fields.whitelist"]
            )
        if len(self._layouts_by_id) > 10_000:
            self._layouts_by_id.clear()
        # The schemas are kept with the layout so that their ids cannot be reused by others.
        self._layouts_by_id[by_id] = (layout, by_value)
        return layout

    def _convert(self, layout: RowLayout, columns: tuple[str, ...], rows: list[tuple]) -> list[tuple]:
        if not self.dialect.converts_values:
            return rows
        to_db = self.dialect.to_db
        kinds = self._kinds.get((id(layout), columns))
        if kinds is None:
            kinds = self._kinds[id(layout), columns] = [column_kind(layout.schemas[c]) for c in columns]
        return [tuple(to_db(kind, v) for kind, v in zip(kinds, row, strict=True)) for row in rows]

    def _flush(self, batch: _Pending | None, table: str) -> None:
        if batch is None or not batch.operations:
            return
        layout = batch.layout
        if _has_writes(batch):
            self.tables.ensure(self._conn, table, layout)
        self.writer.execute(
            self._conn,
            table,
            layout.key_columns,
            layout.value_columns,
            batch.operations,
            self._sql_types(layout),
        )

    def _sql_types(self, layout: RowLayout) -> list[str]:
        types = self._types.get(id(layout))
        if types is None:
            columns = layout.key_columns + layout.value_columns
            types = self._types[id(layout)] = [
                self.dialect.sql_type(*sql_type_of(layout.schemas[c])) for c in columns
            ]
        return types

    def flush(self, current_offsets: dict) -> None:
        """Every put commits its own transaction: nothing is left to flush."""

    def stop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing after a failure
                log.debug("closing the JDBC sink connection failed", exc_info=True)
            self._conn = None


def _fits(batch: _Pending, layout: RowLayout, tombstone: bool) -> bool:
    """Whether a record with ``layout`` can join ``batch`` (deletes need only the same key columns)."""
    if batch.layout.key_columns != layout.key_columns:
        return False
    return tombstone or batch.layout == layout or not _has_writes(batch)


def _has_writes(batch: _Pending) -> bool:
    return any(kind == WRITE for kind, _ in batch.operations)


def _runs(records: list[SinkRecord]) -> Iterator[list[SinkRecord]]:
    """Consecutive records of one topic, key schema, value schema (the same objects) and kind
    (tombstone or not), in order."""
    run: list[SinkRecord] = []
    topic, key_schema, value_schema, tombstone = None, None, None, False
    for record in records:
        if (record.value_schema is not value_schema or record.key_schema is not key_schema
                or record.topic != topic or (record.value is None) != tombstone or not run):
            if run:
                yield run
            run = []
            topic, key_schema, value_schema = record.topic, record.key_schema, record.value_schema
            tombstone = record.value is None
        run.append(record)
    if run:
        yield run
