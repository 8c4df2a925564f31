"""FileStreamSource and FileStreamSink: Kafka's example connectors, with its keys and semantics.

Source (``file``, ``topic``, ``batch.size``): one task reads the file's lines (stdin without
``file``), each a STRING record with no key; its source partition is ``{"filename": file}`` and
its offset ``{"position": <byte position after the line>}``, so a restarted task resumes after
the last line whose offset was stored. At the end of the file it waits for more lines.
Sink (``file``, ``topics``): one line per record value (stdout without ``file``); each put's lines
go to the file in one write, so a reader sees them at once, and ``flush`` (before the worker
commits) makes sure nothing is left in a buffer.
"""

from __future__ import annotations

import sys
import threading
from itertools import accumulate, islice
from typing import IO, Any

from odradek.config_def import AtLeast
from odradek.connect.api import (
    ConfigDef,
    ExactlyOnceSupport,
    Importance,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    Task,
)
from odradek.connect.data import Schema
from odradek.connect.errors import ConfigException, ConnectException
from odradek.connect.records import SinkRecord, SourceRecord

FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
DEFAULT_BATCH_SIZE = 2000
EOF_WAIT_S = 1.0


def _single_topic(value: Any) -> None:
    if value and ("," in value):
        raise ValueError("must be a single topic")


SOURCE_CONFIG = (
    ConfigDef()
    .define("file", "STRING", None, importance=Importance.HIGH, doc="Source filename. If not set, stdin is used.")
    .define("topic", "STRING", validator=_single_topic, importance=Importance.HIGH, doc="The topic to publish to.")
    .define("batch.size", "INT", DEFAULT_BATCH_SIZE, AtLeast(1), Importance.LOW,
            "The maximum number of records the source task can read from the file each time it is polled.")
)
SINK_CONFIG = ConfigDef().define(
    "file", "STRING", None, importance=Importance.HIGH, doc="Destination filename. If not set, stdout is used."
)


class FileStreamSourceConnector(SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        SOURCE_CONFIG.parse(props)

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one task, whatever tasks.max says: a file has one reader

    def config_def(self) -> ConfigDef:
        return SOURCE_CONFIG

    def exactly_once_support(self, configs: dict[str, str]) -> ExactlyOnceSupport:
        # A file can be re-read from a stored position; standard input cannot (Kafka's rule).
        return ExactlyOnceSupport.SUPPORTED if configs.get("file") else ExactlyOnceSupport.UNSUPPORTED

    def alter_offsets(self, connector_config, offsets) -> bool:
        for partition, offset in offsets:
            if offset is not None and not isinstance(offset.get(POSITION_FIELD), int):
                raise ConnectException(f"offset of {partition} must have an integer {POSITION_FIELD!r}")
        return True


class FileStreamSourceTask(SourceTask):
    def start(self, props: dict[str, str]) -> None:
        values = SOURCE_CONFIG.parse(props)
        self.filename: str | None = values["file"]
        self.topic: str = values["topic"]
        self.batch_size: int = values["batch.size"]
        self.stream: IO[bytes] | None = None
        self.position = 0
        self.stopped = threading.Event()

    def _open(self) -> IO[bytes] | None:
        if self.filename is None:
            return sys.stdin.buffer
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 — kept open across polls
        except FileNotFoundError:
            return None  # not there yet: Kafka waits for it
        stored = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
        if stored and isinstance(stored.get(POSITION_FIELD), int):
            stream.seek(stored[POSITION_FIELD])
            self.position = stored[POSITION_FIELD]
        return stream

    def poll(self) -> list[SourceRecord] | None:
        if self.stream is None:
            self.stream = self._open()
            if self.stream is None:
                self.stopped.wait(EOF_WAIT_S)
                return None
        lines = list(islice(self.stream, self.batch_size))
        ends = list(accumulate(map(len, lines), initial=self.position))  # the position after each line
        if lines and lines[-1][-1:] != b"\n":  # end of file in a line still being written: read it again
            del lines[-1], ends[-1]
            self.stream.seek(ends[-1])
        self.position = ends[-1]
        partition, topic, schema = {FILENAME_FIELD: self.filename}, self.topic, Schema.STRING_SCHEMA
        records = [SourceRecord(topic, None, None, None, schema, line.rstrip(b"\r\n").decode("utf-8", "replace"),
                                source_partition=partition, source_offset={POSITION_FIELD: end})
                   for line, end in zip(lines, ends[1:], strict=True)]
        if not records:
            self.stopped.wait(EOF_WAIT_S)
            return None
        return records

    def stop(self) -> None:
        self.stopped.set()
        if self.stream is not None and self.filename is not None:
            self.stream.close()


class FileStreamSinkConnector(SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        SINK_CONFIG.parse(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # As Kafka's: tasks.max tasks, sharing the topics' partitions and appending to one file.
        return [dict(self.props) for _ in range(max_tasks)]

    def config_def(self) -> ConfigDef:
        return SINK_CONFIG

    def alter_offsets(self, connector_config, offsets) -> bool:
        return True  # the file keeps nothing of its own


class FileStreamSinkTask(SinkTask):
    def start(self, props: dict[str, str]) -> None:
        filename = SINK_CONFIG.parse(props)["file"]
        self.filename: str | None = filename
        # Unbuffered and O_APPEND: each put is one write(2) at the file's end, so the lines of
        # several tasks appending to one file never interleave within a line.
        try:
            self.out: IO[bytes] = open(filename, "ab", buffering=0) if filename else sys.stdout.buffer  # noqa: SIM115
        except OSError as exc:
            raise ConfigException("file", filename, f"cannot be opened for appending: {exc}") from None

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        values = [r.value for r in records]
        try:
            text = "\n".join(values)  # strings, as the StringConverter gives them
        except TypeError:
            text = "\n".join([_text(value) for value in values])
        data = (text + "\n").encode("utf-8")
        written = self.out.write(data)
        while written is not None and written < len(data):  # a short write (a full disk, a signal)
            data = data[written:]
            written = self.out.write(data)
        self.out.flush()

    def flush(self, current_offsets) -> None:
        self.out.flush()

    def stop(self) -> None:
        if self.filename:
            self.out.close()


def _text(value: Any) -> str:
    if value is None:
        return "null"  # Java's println of a null value, as Kafka's FileStreamSink writes it
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
