"""Kafka Connect's exceptions (``org.apache.kafka.connect.errors`` and ``ConfigException``).

``ConnectException`` is the root; a ``RetriableException`` tells the worker the operation may
succeed if retried; ``DataException`` is bad data (a value that does not match its schema, bytes a
converter cannot read). ``ConfigException`` names the configuration key it is about.
Each class names its Kafka counterpart in ``kafka_name``, for the dead letter queue's
``__connect.errors.exception.class.name`` header and the traces of the status API.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ConnectException(Exception):
    """Any failure in Connect: a connector, a task, a converter, a transform."""

    kafka_name: ClassVar[str] = "org.apache.kafka.connect.errors.ConnectException"


class RetriableException(ConnectException):
    """A failure that may go away: the worker retries the operation (``errors.retry.timeout.ms``)."""

    kafka_name = "org.apache.kafka.connect.errors.RetriableException"


class DataException(ConnectException):
    """A value that does not fit its schema, or bytes that cannot be converted."""

    kafka_name = "org.apache.kafka.connect.errors.DataException"


class SchemaBuilderException(DataException):
    """A schema built wrongly: a field added twice, a default that does not fit, a key schema on a string."""

    kafka_name = "org.apache.kafka.connect.errors.SchemaBuilderException"


class SchemaProjectorException(DataException):
    """A value that cannot be projected from its schema onto another one."""

    kafka_name = "org.apache.kafka.connect.errors.SchemaProjectorException"


class NotFoundException(ConnectException):
    """Something asked for by name (a connector, a task, a plugin) does not exist."""

    kafka_name = "org.apache.kafka.connect.errors.NotFoundException"


class AlreadyExistsException(ConnectException):
    """Something created by name (a connector) exists already."""

    kafka_name = "org.apache.kafka.connect.errors.AlreadyExistsException"


class IllegalWorkerStateException(ConnectException):
    """An operation asked of a worker in a state that does not allow it."""

    kafka_name = "org.apache.kafka.connect.errors.IllegalWorkerStateException"


_NO_VALUE = object()


class ConfigException(ConnectException, ValueError):
    """A missing or invalid configuration value; ``key`` names the key, ``value`` is what was given.

    With a value the text reads as Kafka's ``Invalid value 5 for configuration batch.size: must
    be >= 1``; without one, ``message`` is the whole text (``Missing required configuration
    "file" which has no default value.``), or ``<key>: <message>`` when it does not name the key.
    """

    kafka_name = "org.apache.kafka.common.config.ConfigException"

    def __init__(self, key: str, value: Any = _NO_VALUE, message: str | None = None):
        self.key = key
        self.has_value = value is not _NO_VALUE
        self.value = value if self.has_value else None
        self.message = message
        if not self.has_value:
            text = key if message is None else (message if key in message else f"{key}: {message}")
        else:
            text = f"Invalid value {'null' if value is None else value} for configuration {key}"
            if message:
                text += f": {message}"
        super().__init__(text)

    def renamed(self, key: str) -> ConfigException:
        """The same problem under another name for the key (a plugin's key as the connector spells it)."""
        message = None if self.message is None else self.message.replace(f'"{self.key}"', f'"{key}"')
        return ConfigException(key, self.value if self.has_value else _NO_VALUE, message)
