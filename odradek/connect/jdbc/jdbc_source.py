"""The JDBC source connector: tables (or one query) of PostgreSQL or SQLite → topics.

Confluent's ``io.confluent.connect.jdbc.JdbcSourceConnector`` with its keys (see jdbc_settings.py).
The connector lists the tables (``table.whitelist``/``table.blacklist``, or the newer
``table.include.list``/``table.exclude.list``), deals them out to at most ``tasks.max`` tasks in
contiguous groups (task config ``tables``), and every ``table.poll.interval.ms`` looks again,
asking the worker to reconfigure the tasks when the set of tables changed. With ``query`` there
is one task.

Each task polls its tables in turn, each no more often than ``poll.interval.ms``, and returns
at most ``batch.max.rows`` rows per poll. A row becomes a record on ``topic.prefix`` + table
(or the prefix alone with ``query``), with no key and a struct value; its source partition is
``{"table": name}`` (``{"query": "query"}``) and its source offset is Confluent's map (see
jdbc_queries.py), so a restarted task reads on from the last row whose offset the worker committed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from odradek.connect.api import SourceConnector, SourceTask
from odradek.connect.connector_config import Config
from odradek.connect.connector_config import ConfigDef as ConnectConfigDef
from odradek.connect.errors import ConnectException
from odradek.connect.jdbc.connector_support import Watcher, connect_config_def, validation
from odradek.connect.jdbc.jdbc_connection import open_connection
from odradek.connect.jdbc.jdbc_queries import Offset, QuerySpec
from odradek.connect.jdbc.jdbc_reader import TableReader
from odradek.connect.jdbc.jdbc_settings import SOURCE_CONFIGS, parse, problems
from odradek.connect.records import SourceRecord

log = logging.getLogger(__name__)

VERSION = "10.7.0-odradek"  # the Confluent JDBC connector release whose keys this follows


def select_tables(available: list[str], config: dict[str, Any]) -> list[str]:
    include = config["table.whitelist"] or config["table.include.list"]
    exclude = set(config["table.blacklist"] or config["table.exclude.list"])
    if include:
        wanted = set(include)
        return [t for t in available if t in wanted or t.rpartition(".")[2] in wanted]
    return [t for t in available if t not in exclude and t.rpartition(".")[2] not in exclude]


def group_tables(tables: list[str], groups: int) -> list[list[str]]:
    """``tables`` in at most ``groups`` contiguous, nearly equal groups (Kafka's ConnectorUtils.groupPartitions)."""
    groups = max(1, min(groups, len(tables)))
    size, extra = divmod(len(tables), groups)
    out, start = [], 0
    for i in range(groups):
        end = start + size + (1 if i < extra else 0)
        out.append(tables[start:end])
        start = end
    return out


class JdbcSourceConnector(SourceConnector):
    def __init__(self) -> None:
        super().__init__()
        self._props: dict[str, str] = {}
        self._config: dict[str, Any] = {}
        self._watcher: Watcher | None = None

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConnectConfigDef:
        return connect_config_def(SOURCE_CONFIGS)

    def validate(self, configs: dict[str, str]) -> Config:
        return validation(SOURCE_CONFIGS, configs, problems(SOURCE_CONFIGS, configs))

    def start(self, props: dict[str, str]) -> None:
        self._props = dict(props)
        self._config = parse(SOURCE_CONFIGS, props)
        if not self._config["query"]:
            self._watcher = Watcher(
                "the JDBC source's tables",
                self._config["table.poll.interval.ms"] / 1000,
                self._list_tables,
                lambda: self.context.request_task_reconfiguration(),
                self._list_tables(),
            ).start()

    def _list_tables(self) -> list[str]:
        dialect, conn = open_connection(self._config)
        try:
            return select_tables(dialect.list_tables(conn), self._config)
        finally:
            conn.close()

    def task_class(self):
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self._config["query"]:
            return [dict(self._props)]
        tables = self._watcher.current if self._watcher else []
        if not tables:
            log.warning("JDBC source: no tables match the configuration; no tasks until one appears")
            return []
        return [{**self._props, "tables": ",".join(group)} for group in group_tables(tables, max_tasks)]

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None


class JdbcSourceTask(SourceTask):
    def __init__(self) -> None:
        super().__init__()
        self._stopping = threading.Event()
        self._readers: list[TableReader] = []
        self._conn: Any = None

    def version(self) -> str:
        return VERSION

    def start(self, props: dict[str, str]) -> None:
        self.config = config = parse(SOURCE_CONFIGS, props)
        self._stopping.clear()
        self.dialect, self._conn = open_connection(config, autocommit=True)
        mode = config["mode"]
        common = {
            "mode": mode,
            "incrementing_column": config["incrementing.column.name"] or None,
            "timestamp_columns": tuple(config["timestamp.column.name"]),
        }
        if config["query"]:
            specs = [QuerySpec(query=config["query"], **common)]
        elif config["tables"]:
            specs = [QuerySpec(table=table, **common) for table in config["tables"]]
        else:
            raise ConnectException("JDBC source task: no tables assigned (task config 'tables' is empty)")
        context: Any = self.context
        offsets = context.offset_storage_reader
        for spec in specs:
            stored = offsets.offset(spec.partition)
            topic = config["topic.prefix"] + (spec.table or "").rpartition(".")[2]
            offset = Offset.from_map(stored)
            log.info(
                "JDBC source: %s starts from offset %s", spec.table or "query", offset.to_map() or "the start"
            )
            self._readers.append(
                TableReader(self.dialect, spec, offset, topic, config["timestamp.delay.interval.ms"])
            )

    def poll(self) -> list[SourceRecord] | None:
        if not self._readers:
            return None
        reader = min(self._readers, key=lambda r: (not r.reading(), r.next_query_at))
        if not reader.reading():
            wait = reader.next_query_at - time.monotonic()
            if wait > 0:
                # Return now and then so the worker can pause or stop the task.
                self._stopping.wait(min(wait, 1.0))
                if wait > 1.0 or self._stopping.is_set():
                    return None
            reader.start_query(self._conn)
        rows = reader.next_rows(self.config["batch.max.rows"])
        if not reader.reading():
            reader.schedule(self.config["poll.interval.ms"])
        partition = reader.spec.partition
        return [
            SourceRecord(
                topic=reader.topic,
                value_schema=value.schema,
                value=value,
                source_partition=partition,
                source_offset=offset.to_map(),
            )
            for _, offset, value in rows
        ]

    def stop(self) -> None:
        self._stopping.set()
        for reader in self._readers:
            reader.finish()
        self._readers = []
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing after a failure
                log.debug("closing the JDBC source connection failed", exc_info=True)
            self._conn = None
