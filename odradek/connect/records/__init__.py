"""Connect records and headers (Kafka's ``ConnectRecord``, ``SourceRecord``, ``SinkRecord``,
``Header`` and ``ConnectHeaders``).

A record is what connectors and transforms see: topic, partition, key and value with their
schemas, timestamp and headers. Source records also carry the source partition and offset (plain
dicts the worker stores in the offset topic); sink records carry the Kafka offset they were read
at and, as KIP-793 has it, the topic/partition/offset before any transform rerouted them.

``new_record(**changes)`` copies a record with some attributes changed; the copy gets its own
headers (a duplicate) unless ``headers=`` is among the changes, as Kafka's ``newRecord`` does.
Records and headers belong to the task that handles them; nothing here is shared between threads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from enum import Enum
from typing import Any

from odradek.connect.data_schema import Schema, SchemaAndValue, validate_value
from odradek.connect.errors import DataException


class Header:
    """One header: a key, and a value with its (optional) schema."""

    __slots__ = ("key", "schema", "value")

    def __init__(self, key: str, schema: Schema | None, value: Any):
        self.key = key
        self.schema = schema
        self.value = value

    def rename(self, key: str) -> Header:
        return Header(key, self.schema, self.value)

    def with_value(self, schema: Schema | None, value: Any) -> Header:
        return Header(self.key, schema, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Header):
            return NotImplemented
        return (self.key, self.schema, self.value) == (other.key, other.schema, other.value)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ConnectHeader(key={self.key}, value={self.value!r}, schema={self.schema})"


class Headers:
    """An ordered list of headers; a key may repeat (Kafka's ``ConnectHeaders``)."""

    def __init__(self, headers: Iterable[Header] = ()):
        self._headers: list[Header] = list(headers)

    def add(self, key: str, value: Any = None, schema: Schema | None = None) -> Headers:
        """Add a header; ``value`` may be a ``SchemaAndValue`` (then ``schema`` is taken from it).
        A value with a schema is checked against it. Returns self to chain."""
        if isinstance(value, SchemaAndValue):
            schema, value = value.schema, value.value
        if key is None:
            raise DataException("Header key cannot be null")
        if schema is not None:
            validate_value(schema, value, key)
        self._headers.append(Header(key, schema, value))
        return self

    def add_header(self, header: Header) -> Headers:
        self._headers.append(header)
        return self

    def add_string(self, key: str, value: str | None) -> Headers:
        return self.add(key, value, Schema.OPTIONAL_STRING_SCHEMA if value is None else Schema.STRING_SCHEMA)

    def add_boolean(self, key: str, value: bool) -> Headers:
        return self.add(key, value, Schema.BOOLEAN_SCHEMA)

    def add_int(self, key: str, value: int) -> Headers:
        return self.add(key, value, Schema.INT32_SCHEMA)

    def add_long(self, key: str, value: int) -> Headers:
        return self.add(key, value, Schema.INT64_SCHEMA)

    def add_double(self, key: str, value: float) -> Headers:
        return self.add(key, value, Schema.FLOAT64_SCHEMA)

    def add_bytes(self, key: str, value: bytes) -> Headers:
        return self.add(key, value, Schema.BYTES_SCHEMA)

    def add_all(self, headers: Iterable[Header]) -> Headers:
        self._headers.extend(headers)
        return self

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self._headers if h.key == key]

    def last_with_name(self, key: str) -> Header | None:
        for header in reversed(self._headers):
            if header.key == key:
                return header
        return None

    def remove(self, key: str) -> Headers:
        self._headers = [h for h in self._headers if h.key != key]
        return self

    def retain_latest(self, key: str | None = None) -> Headers:
        """Keep only the last header of ``key`` (of every key when None), in their order."""
        last_index: dict[str, int] = {}
        for i, header in enumerate(self._headers):
            last_index[header.key] = i
        self._headers = [
            h for i, h in enumerate(self._headers) if (key is not None and h.key != key) or last_index[h.key] == i
        ]
        return self

    def clear(self) -> Headers:
        self._headers.clear()
        return self

    def duplicate(self) -> Headers:
        return Headers(self._headers)

    def is_empty(self) -> bool:
        return not self._headers

    def __iter__(self) -> Iterator[Header]:
        return iter(list(self._headers))

    def __len__(self) -> int:
        return len(self._headers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Headers):
            return NotImplemented
        return self._headers == other._headers

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ConnectHeaders(headers={self._headers})"


def _as_headers(headers: Headers | Iterable[Header] | None) -> Headers:
    if isinstance(headers, Headers):
        return headers
    return Headers(headers or ())


class TimestampType(Enum):
    """Kafka's record timestamp types, as a sink record reports its timestamp's meaning."""

    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclasses.dataclass(eq=True)
class ConnectRecord:
    """What every record has: topic, partition, key and value with their schemas, timestamp, headers."""

    topic: str
    kafka_partition: int | None = None
    key_schema: Schema | None = None
    key: Any = None
    value_schema: Schema | None = None
    value: Any = None
    timestamp: int | None = None
    headers: Headers = dataclasses.field(default_factory=Headers)

    def __post_init__(self) -> None:
        self.headers = _as_headers(self.headers)

    def new_record(self, **changes: Any) -> ConnectRecord:
        """A copy with ``changes`` applied (``topic=``, ``value=``, ...); its own duplicate headers
        unless ``headers=`` is given."""
        if "headers" not in changes:
            changes["headers"] = self.headers.duplicate()
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(eq=True)
class SourceRecord(ConnectRecord):
    """A record a source task produced: also where it came from (``source_partition``) and how far
    the task had read (``source_offset``), both plain JSON-able dicts."""

    source_partition: dict[str, Any] | None = None
    source_offset: dict[str, Any] | None = None


@dataclasses.dataclass(eq=True)
class SinkRecord(ConnectRecord):
    """A record read for a sink task: its Kafka offset and timestamp type, and (KIP-793) the topic,
    partition and offset it had before transforms changed them."""

    kafka_offset: int = -1
    timestamp_type: TimestampType = TimestampType.NO_TIMESTAMP_TYPE
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    @classmethod
    def read(cls, topic: str, partition: int, offset: int, key_schema: Schema | None, key: Any,
             value_schema: Schema | None, value: Any, timestamp: int | None, timestamp_type: TimestampType,
             headers: Headers) -> SinkRecord:
        """The worker's constructor for a record just read and converted (no transform has
        moved it yet): the same record as the dataclass's, built without its per-field checks."""
        record = cls.__new__(cls)
        record.__dict__ = {
            "topic": topic, "kafka_partition": partition, "key_schema": key_schema, "key": key,
            "value_schema": value_schema, "value": value, "timestamp": timestamp, "headers": headers,
            "kafka_offset": offset, "timestamp_type": timestamp_type, "original_topic": topic,
            "original_kafka_partition": partition, "original_kafka_offset": offset,
        }
        return record

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.original_topic is None:
            self.original_topic = self.topic
        if self.original_kafka_partition is None:
            self.original_kafka_partition = self.kafka_partition
        if self.original_kafka_offset is None:
            self.original_kafka_offset = self.kafka_offset
