"""Kafka error codes as exceptions: one class per code, looked up by code.

The codes and their retriable flags come from kio's ``ErrorCode`` (generated from Kafka's
own definitions). Each class is named after the code in CamelCase with an ``Error``
suffix, e.g. ``OffsetOutOfRangeError``; ``error_for(code)`` returns the class.

The broker raises these inside components and handlers turn them into per-item error
codes; the client raises them to users.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_for", "raise_for"]

# Errors after which a client should refresh metadata before retrying.
_INVALID_METADATA = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.replica_not_available,
    ErrorCode.kafka_storage_error,
}


class KafkaError(Exception):
    """Base of every error that carries a Kafka error code."""

    code: ErrorCode = ErrorCode.unknown_server_error
    retriable: bool = False
    invalid_metadata: bool = False

    def __init__(self, message: str = "", **context):
        self.message = message or self.code.name
        self.context = context
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"[{self.code.name.upper()} ({int(self.code)})] {self.message}"


def _class_name(code: ErrorCode) -> str:
    return "".join(part.capitalize() for part in code.name.split("_")) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}
for _code in ErrorCode:
    if _code is ErrorCode.none:
        continue
    _cls = type(
        _class_name(_code),
        (KafkaError,),
        {
            "code": _code,
            "retriable": bool(_code.retriable),
            "invalid_metadata": _code in _INVALID_METADATA,
            "__module__": __name__,
        },
    )
    _BY_CODE[int(_code)] = _cls
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)


def error_for(code: int) -> type[KafkaError]:
    """The exception class for a Kafka error code (UnknownServerError for unknown codes)."""
    return _BY_CODE.get(int(code), _BY_CODE[-1])


def raise_for(code: int, message: str = "") -> None:
    """Raise the matching exception unless ``code`` is 0."""
    if code:
        raise error_for(code)(message)
