"""Errors the client raises.

Errors the broker reports come from ``odradek.protocol.errors``: one class per Kafka error
code, with ``retriable`` and ``invalid_metadata`` flags (``error_for(code)``). The classes
here are the client's own: failures that never crossed the wire. The connection's
(``ClientError``, the base of them all, timeouts, lost connections, unsupported versions)
come from ``odradek.net.connection_errors``.
"""

from __future__ import annotations

from odradek.net.connection_errors import (  # noqa: F401  (re-exported)
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SecurityMismatchError,
    UnsupportedVersionError,
)
from odradek.protocol.errors import KafkaError, error_for  # noqa: F401  (re-exported)
from odradek.protocol.errors import MessageTooLargeError as RecordTooLargeError  # noqa: F401


class ConfigError(ClientError, ValueError):
    """An unknown option or a bad option value."""


class SerializationError(ClientError, ValueError):
    """A serializer or deserializer failed; the message names the record."""


class ClientClosedError(ClientError, RuntimeError):
    """The client was closed; create a new one."""


class IllegalStateError(ClientError, RuntimeError):
    """The call does not fit the client's state (e.g. poll without subscription)."""


class NoOffsetForPartitionError(ClientError):
    """No committed offset and auto_offset_reset is "none"."""

    def __init__(self, partitions):
        self.partitions = set(partitions)
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(self.partitions))
        super().__init__(f"no committed offset and auto_offset_reset='none' for {names}")


class OffsetOutOfRangeClientError(ClientError):
    """A fetch position is out of range and auto_offset_reset is "none"."""

    def __init__(self, positions):
        self.positions = dict(positions)
        names = ", ".join(f"{tp.topic}-{tp.partition}@{pos}" for tp, pos in sorted(self.positions.items()))
        super().__init__(f"fetch position out of range and auto_offset_reset='none': {names}")


class CommitFailedError(ClientError):
    """The commit cannot complete: the group rebalanced and the partitions may belong to another member."""


class CorruptRecordError(ClientError):
    """A fetched batch failed its CRC check or could not be parsed."""


class ProducerFencedError(ClientError):
    """Another producer with the same id and a newer epoch exists."""


def is_retriable(exc: BaseException) -> bool:
    return bool(getattr(exc, "retriable", False))
