"""Errors on the requesting side of a connection: failures that never crossed the wire.

Errors a broker reports come from ``odradek.protocol.errors`` (one class per Kafka error
code). These are raised by the connection itself, and the client re-exports them
(``odradek.client.client_errors``) as the base of its own errors.
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of the errors raised by the client itself."""

    retriable = False
    invalid_metadata = False


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete within its time limit."""

    retriable = True


class KafkaConnectionError(ClientError, ConnectionError):
    """A connection to a broker failed or was closed while requests were in flight."""

    retriable = True
    invalid_metadata = True


class UnsupportedVersionError(ClientError):
    """The broker does not support a request this operation needs."""
