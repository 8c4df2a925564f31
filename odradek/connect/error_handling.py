"""Kafka Connect's error handling of one task: ``errors.tolerance``, retries, log and dead letter queue.

``ErrorHandler.run(stage, cls, fn, *args)`` runs one step of a record's way (a converter, a
transform, ``put``) on the task's own thread. A ``RetriableException`` is retried with growing
pauses (at most ``errors.retry.delay.max.ms``) until ``errors.retry.timeout.ms``; then, or on any
other exception, with ``errors.tolerance=none`` the error fails the task (``ToleranceExceeded``),
with ``all`` the record is skipped (``SKIPPED`` is returned), logged when ``errors.log.enable``,
and — for a sink — written unchanged to ``errors.deadletterqueue.topic.name``, with the
``__connect.errors.*`` headers when ``errors.deadletterqueue.context.headers.enable``.

Owned by one task; ``run`` is called from its thread only.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass
from typing import Any

from odradek.config_def import AtLeast, OneOf
from odradek.connect.api import ConfigDef
from odradek.connect.errors import ConnectException, RetriableException

log = logging.getLogger("odradek.connect.errors")

ERROR_CONFIG = (
    ConfigDef()
    .define("errors.tolerance", "STRING", "none", OneOf("none", "all"), group="Error Handling",
            doc="none: an error fails the task; all: problematic records are skipped.")
    .define("errors.retry.timeout.ms", "LONG", 0, AtLeast(-1), group="Error Handling",
            doc="How long a failed operation is retried (-1: forever).")
    .define("errors.retry.delay.max.ms", "LONG", 60000, AtLeast(1), group="Error Handling",
            doc="The longest pause between retries.")
    .define("errors.log.enable", "BOOLEAN", False, group="Error Handling", doc="Log each error and record.")
    .define("errors.log.include.messages", "BOOLEAN", False, group="Error Handling",
            doc="Include the record in the log line.")
    .define("errors.deadletterqueue.topic.name", "STRING", "", group="Error Handling",
            doc="Topic a sink's failed records go to (empty: none).")
    .define("errors.deadletterqueue.topic.replication.factor", "SHORT", 3, group="Error Handling",
            doc="Replication factor of the dead letter queue topic.")
    .define("errors.deadletterqueue.context.headers.enable", "BOOLEAN", False, group="Error Handling",
            doc="Add __connect.errors.* headers to dead letter queue records.")
)

SKIPPED: Any = object()
HEADER_PREFIX = "__connect.errors."


class ToleranceExceeded(ConnectException):
    """An error the connector's errors.tolerance does not allow; the task fails with it."""


@dataclass
class RawRecord:
    """A record as read from Kafka, for the dead letter queue."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


class ErrorHandler:
    def __init__(self, config: dict[str, Any], connector: str, task: int, dlq_send=None):
        self.tolerate_all = config["errors.tolerance"] == "all"
        self.retry_timeout_ms = config["errors.retry.timeout.ms"]
        self.retry_delay_max_ms = config["errors.retry.delay.max.ms"]
        self.log_enable = config["errors.log.enable"]
        self.log_messages = config["errors.log.include.messages"]
        self.dlq_topic = config["errors.deadletterqueue.topic.name"]
        self.context_headers = config["errors.deadletterqueue.context.headers.enable"]
        self.connector, self.task = connector, task
        self.dlq_send = dlq_send  # (topic, key, value, headers) -> None, thread-safe
        self.total_errors = 0
        self.skipped = 0
        self.dlq_records = 0

    def run(self, stage: str, cls: type | None, fn, *args, raw: RawRecord | None = None, record: Any = None):
        deadline = None
        delay_ms = 300
        while True:
            try:
                return fn(*args)
            except RetriableException:
                if deadline is None:
                    timeout = self.retry_timeout_ms
                    deadline = float("inf") if timeout < 0 else time.monotonic() + timeout / 1000
                if time.monotonic() + delay_ms / 1000 <= deadline:
                    time.sleep(delay_ms / 1000)
                    delay_ms = min(delay_ms * 2, self.retry_delay_max_ms)
                    continue
                return self._failed(stage, cls, raw, record)
            except Exception:
                return self._failed(stage, cls, raw, record)

    def _failed(self, stage: str, cls: type | None, raw: RawRecord | None, record: Any):
        error = traceback.format_exc()
        exc_text = error.strip().splitlines()[-1]
        self.total_errors += 1
        where = f"connector {self.connector} task {self.task}, stage {stage}"
        if not self.tolerate_all:
            raise ToleranceExceeded(f"Tolerance exceeded in error handler ({where}): {exc_text}")
        self.skipped += 1
        if self.log_enable:
            shown = f", record {record if record is not None else raw}" if self.log_messages else ""
            log.error("Error encountered in %s; skipped%s\n%s", where, shown, error)
        if raw is not None and self.dlq_topic and self.dlq_send is not None:
            headers = list(raw.headers)
            if self.context_headers:
                headers += self._context_headers(stage, cls, raw, error)
            self.dlq_send(self.dlq_topic, raw.key, raw.value, headers)
            self.dlq_records += 1
        return SKIPPED

    def _context_headers(self, stage: str, cls: type | None, raw: RawRecord, error: str) -> list[tuple[str, bytes]]:
        lines = error.strip().splitlines()
        exc_class, _, message = lines[-1].partition(": ")
        values = {
            "topic": raw.topic,
            "partition": str(raw.partition),
            "offset": str(raw.offset),
            "connector.name": self.connector,
            "task.id": str(self.task),
            "stage": stage,
            "class.name": f"{cls.__module__}.{cls.__qualname__}" if cls is not None else "",
            "exception.class.name": exc_class,
            "exception.message": message,
            "exception.stacktrace": error,
        }
        return [(HEADER_PREFIX + k, v.encode()) for k, v in values.items()]
