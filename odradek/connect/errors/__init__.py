"""Kafka Connect's exceptions (``org.apache.kafka.connect.errors`` and ``ConfigException``).

``ConnectException`` is the root; a ``RetriableException`` tells the worker the operation may
succeed if retried; ``DataException`` is bad data (a value that does not match its schema, bytes a
converter cannot read). ``ConfigException`` names the configuration key it is about.
"""

from __future__ import annotations

from typing import Any


class ConnectException(Exception):
    """Any failure in Connect: a connector, a task, a converter, a transform."""


class RetriableException(ConnectException):
    """A failure that may go away: the worker retries the operation (``errors.retry.timeout.ms``)."""


class DataException(ConnectException):
    """A value that does not fit its schema, or bytes that cannot be converted."""


class SchemaBuilderException(DataException):
    """A schema built wrongly: a field added twice, a default that does not fit, a key schema on a string."""


class SchemaProjectorException(DataException):
    """A value that cannot be projected from its schema onto another one."""


class NotFoundException(ConnectException):
    """Something asked for by name (a connector, a task, a plugin) does not exist."""


class AlreadyExistsException(ConnectException):
    """Something created by name (a connector) exists already."""


class IllegalWorkerStateException(ConnectException):
    """An operation asked of a worker in a state that does not allow it."""


_NO_VALUE = object()


class ConfigException(ConnectException, ValueError):
    """A missing or invalid configuration value; ``key`` names the key, ``value`` is what was given.

    The message reads as Kafka's: ``Invalid value 5 for configuration batch.size: must be >= 1``.
    """

    def __init__(self, key: str, value: Any = _NO_VALUE, message: str | None = None):
        self.key = key
        self.value = None if value is _NO_VALUE else value
        if value is _NO_VALUE:
            text = key if message is None else f"{key}: {message}"
        else:
            text = f"Invalid value {value} for configuration {key}"
            if message:
                text += f": {message}"
        self.message = message if message is not None else text
        super().__init__(text)
