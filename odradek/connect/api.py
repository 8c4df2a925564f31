"""The connector API: what a connector written in Python subclasses (Kafka's ``connect-api``).

A **connector** (``SourceConnector`` or ``SinkConnector``) is configured once, from its
connector config, and splits its work into at most ``tasks.max`` task configs; a **task**
(``SourceTask`` or ``SinkTask``) does the copying. The worker calls them as Kafka's does:

- ``Connector``: ``initialize(context)`` → ``start(props)`` → ``task_class()`` and
  ``task_configs(max_tasks)`` (again after ``context.request_task_reconfiguration()``) → ``stop()``.
  ``config_def()`` declares the keys; ``validate(configs)`` checks them for the REST API.
- ``SourceTask``: ``initialize(context)`` → ``start(props)`` → ``poll()`` in a loop, each record
  acknowledged through ``commit_record(record, metadata)``, ``commit()`` after the worker stored
  the offsets → ``stop()``. ``poll`` returns a list of ``SourceRecord``s, or None when it has
  nothing (it may block briefly; ``stop()`` is called from another thread to end it).
  ``context.offset_storage_reader.offset(partition)`` gives where the task stopped last time.
- ``SinkTask``: ``initialize(context)`` → ``start(props)`` → ``open(partitions)`` → ``put(records)``
  for each batch → ``pre_commit(current_offsets)`` (by default ``flush``) before the worker
  commits the consumer group ``connect-<name>`` → ``close(partitions)`` → ``stop()``.
  ``context.pause/resume/offset/timeout/request_commit`` steer the consumer.

Every method is plain (not async) and is called from the task's own thread: a task may block
in ``poll``/``put`` without holding up the worker. Raise ``RetriableException`` from ``put`` to
have the batch retried (after ``context.timeout(ms)``); any other exception fails the task.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from odradek.client.structs import OffsetAndMetadata, RecordMetadata, TopicPartition
from odradek.connect.connector_config import NO_DEFAULT, Config, ConfigDef, ConfigValue, Importance, Width

if TYPE_CHECKING:
    from odradek.connect.records import SinkRecord, SourceRecord

__all__ = [
    "NO_DEFAULT",
    "Config",
    "ConfigDef",
    "ConfigValue",
    "Connector",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "ErrantRecordReporter",
    "ExactlyOnceSupport",
    "Importance",
    "OffsetStorageReader",
    "SinkConnector",
    "SinkConnectorContext",
    "SinkTask",
    "SinkTaskContext",
    "SourceConnector",
    "SourceConnectorContext",
    "SourceTask",
    "SourceTaskContext",
    "Task",
    "TransactionContext",
    "Width",
]


def odradek_version() -> str:
    try:
        return metadata.version("odradek")
    except metadata.PackageNotFoundError:
        return "unknown"


# -- what the worker hands connectors and tasks -----------------------------------------------


class OffsetStorageReader:
    """Reads the offsets source tasks stored (the offset topic, or the standalone file).

    A source partition and its offset are JSON-able dicts, as the task put them on its records.
    """

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The stored offset of one source partition, or None when none is stored."""
        return self.offsets([partition])[0]

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
        """The stored offset of each partition, in the order given (None where none is stored)."""
        raise NotImplementedError


class ConnectorContext:
    """Given to a connector by the worker."""

    def request_task_reconfiguration(self) -> None:
        """Ask the worker to call ``task_configs`` again (the set of tables/files changed)."""
        raise NotImplementedError

    def raise_error(self, error: BaseException) -> None:
        """Fail the connector from a background thread of its own: it shows FAILED with this error."""
        raise NotImplementedError


class SourceConnectorContext(ConnectorContext):
    offset_storage_reader: OffsetStorageReader


class SinkConnectorContext(ConnectorContext):
    pass


class TransactionContext:
    """With ``exactly.once.source.support`` and connector-defined boundaries: where transactions end."""

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit after ``record`` is written (None: after the current batch)."""
        raise NotImplementedError

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the transaction holding ``record`` (None: the current one)."""
        raise NotImplementedError


class SourceTaskContext:
    offset_storage_reader: OffsetStorageReader
    transaction_context: TransactionContext | None = None

    def configs(self) -> dict[str, str]:
        """The task's config, as given to ``start``."""
        raise NotImplementedError


class ErrantRecordReporter:
    """Reports a record a sink task could not handle to the worker's error handling (DLQ, log)."""

    def report(self, record: SinkRecord, error: BaseException) -> None:
        raise NotImplementedError


class SinkTaskContext:
    errant_record_reporter: ErrantRecordReporter | None = None

    def configs(self) -> dict[str, str]:
        raise NotImplementedError

    def offset(self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None) -> None:
        """Rewind (or skip) the consumer: ``offset({tp: n, ...})`` or ``offset(tp, n)``."""
        raise NotImplementedError

    def timeout(self, timeout_ms: int) -> None:
        """Wait this long before retrying the batch whose ``put`` raised RetriableException."""
        raise NotImplementedError

    def assignment(self) -> set[TopicPartition]:
        raise NotImplementedError

    def pause(self, *partitions: TopicPartition) -> None:
        raise NotImplementedError

    def resume(self, *partitions: TopicPartition) -> None:
        raise NotImplementedError

    def request_commit(self) -> None:
        """Commit offsets as soon as possible instead of at the next ``offset.flush.interval.ms``."""
        raise NotImplementedError


# -- connectors ---------------------------------------------------------------------------------


class ExactlyOnceSupport(enum.Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(enum.Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector:
    """The configuration side of a connector; subclass ``SourceConnector`` or ``SinkConnector``."""

    context: Any = None

    def initialize(self, context: ConnectorContext, task_configs: list[dict[str, str]] | None = None) -> None:
        self.context = context

    def version(self) -> str:
        return odradek_version()

    def start(self, props: dict[str, str]) -> None:
        """Read the connector config; raise ConnectException (or ConfigException) if unusable."""

    def reconfigure(self, props: dict[str, str]) -> None:
        self.stop()
        self.start(props)

    def task_class(self) -> type[Task]:
        raise NotImplementedError(f"{type(self).__name__} must define task_class()")

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` configs, one per task to run."""
        raise NotImplementedError(f"{type(self).__name__} must define task_configs()")

    def stop(self) -> None:
        pass

    def config_def(self) -> ConfigDef:
        """The connector's own keys (the worker adds the common ones: name, tasks.max, ...)."""
        return ConfigDef()

    def validate(self, configs: dict[str, str]) -> Config:
        """Every key's value and errors; by default the checks of ``config_def()``."""
        return Config(self.config_def().validate(configs))


class SourceConnector(Connector):
    context: SourceConnectorContext

    def exactly_once_support(self, configs: dict[str, str]) -> ExactlyOnceSupport | None:
        """Whether the connector can run with ``exactly.once.support=required`` (None: unknown)."""
        return None

    def can_define_transaction_boundaries(self, configs: dict[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, connector_config: dict[str, str], offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
    ) -> bool:
        """Told of an offsets change through the REST API (``(partition, offset or None)`` pairs);
        True if the connector also changed offsets it keeps elsewhere. Raise to refuse it."""
        return False


class SinkConnector(Connector):
    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    context: SinkConnectorContext

    def alter_offsets(self, connector_config: dict[str, str], offsets: dict[TopicPartition, int | None]) -> bool:
        """As ``SourceConnector.alter_offsets``, for the consumer group's offsets."""
        return False


# -- tasks --------------------------------------------------------------------------------------


class Task:
    context: Any = None

    def initialize(self, context: Any) -> None:
        self.context = context

    def version(self) -> str:
        return odradek_version()

    def start(self, props: dict[str, str]) -> None:
        pass

    def stop(self) -> None:
        """Called from another thread than ``poll``/``put``: make them return soon."""


class SourceTask(Task):
    context: SourceTaskContext

    def poll(self) -> list[SourceRecord] | None:
        raise NotImplementedError(f"{type(self).__name__} must define poll()")

    def commit(self) -> None:
        """The worker stored the offsets of every record acknowledged so far."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """``record`` was written (``metadata`` None: a transform dropped it, or errors.tolerance
        skipped it)."""


class SinkTask(Task):
    context: SinkTaskContext

    def put(self, records: list[SinkRecord]) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define put()")

    def flush(self, current_offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Make everything ``put`` so far durable."""

    def pre_commit(
        self, current_offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets safe to commit (by default: flush, then all of them)."""
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: list[TopicPartition]) -> None:
        """Partitions newly assigned to this task."""

    def close(self, partitions: list[TopicPartition]) -> None:
        """Partitions taken away (a rebalance, or the task stopping)."""
