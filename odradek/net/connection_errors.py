"""Errors on the requesting side of a connection: failures that never crossed the wire.

Errors a broker reports come from ``odradek.protocol.errors`` (one class per Kafka error
code). These are raised by the connection itself, and the client re-exports them
(``odradek.client.client_errors``) as the base of its own errors.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError


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


class SecurityMismatchError(ClientError):
    """The broker's listener speaks another security protocol than the client's
    ``security.protocol`` (it expects TLS or SASL and the client does not use it). Fatal, as
    Kafka's authentication failures are: retrying cannot mend it."""


def is_authentication_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure retrying cannot mend (Kafka's AuthenticationException,
    fatal in its clients): wrong credentials, a SASL mechanism or a security protocol the
    listener does not use."""
    if isinstance(exc, SecurityMismatchError):
        return True
    return isinstance(exc, KafkaError) and exc.code in (
        ErrorCode.sasl_authentication_failed,
        ErrorCode.unsupported_sasl_mechanism,
        ErrorCode.illegal_sasl_state,
    )
