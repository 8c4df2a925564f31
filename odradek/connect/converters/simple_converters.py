"""The converters that do not look inside a value: ``StringConverter``, ``ByteArrayConverter`` and
the number converters (Kafka's ``org.apache.kafka.connect.storage.StringConverter``,
``org.apache.kafka.connect.converters.ByteArrayConverter``, ``IntegerConverter`` ...).

Each is a converter and a header converter at once, as in Kafka. The number converters write
Kafka's serializers' bytes: big-endian two's complement (short 2, int 4, long 8 bytes), IEEE 754
big-endian floats (4 and 8 bytes), one byte 0/1 for booleans; they read back an optional schema of
their type. One instance per connector key/value/header slot; not shared between tasks.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from odradek.config_def import STR, ConfigDef, config_table
from odradek.connect.converters.converter_base import Converter, HeaderConverter
from odradek.connect.data_schema import Schema, SchemaAndValue, Type
from odradek.connect.data_values import convert_to_string
from odradek.connect.errors import DataException
from odradek.connect.plugin_config import parse_plugin_config
from odradek.connect.records import Headers

_ENCODINGS = {"UTF8": "utf-8", "UTF-8": "utf-8", "UTF16": "utf-16", "ISO-8859-1": "latin-1"}


def _python_encoding(name: str) -> str:
    return _ENCODINGS.get(name.upper(), name)


STRING_CONVERTER_CONFIG = config_table(
    ConfigDef("converter.encoding", STR, "UTF-8", doc="The name of the character encoding of the strings."),
    ConfigDef("converter.type", STR, None, doc="key, value or header: set by the worker."),
)


class StringConverter(Converter, HeaderConverter):
    """Any value as its string form, in ``converter.encoding`` (UTF-8 by default); reads back an
    optional STRING. ``serializer.encoding``/``deserializer.encoding`` override each direction."""

    def __init__(self) -> None:
        self._encode_with = "utf-8"
        self._decode_with = "utf-8"

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        settings = parse_plugin_config(STRING_CONVERTER_CONFIG, configs)
        encoding = settings["converter.encoding"]
        self._encode_with = _python_encoding(configs.get("serializer.encoding") or encoding)
        self._decode_with = _python_encoding(configs.get("deserializer.encoding") or encoding)
        for name in (self._encode_with, self._decode_with):
            try:
                "".encode(name)
            except LookupError:
                raise DataException(f"Unknown character encoding {name!r} (converter.encoding)") from None

    def config_def(self) -> dict[str, ConfigDef]:
        return STRING_CONVERTER_CONFIG

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        text = convert_to_string(schema, value)
        return None if text is None else text.encode(self._encode_with)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, None)
        try:
            return SchemaAndValue(Schema.OPTIONAL_STRING_SCHEMA, bytes(data).decode(self._decode_with))
        except UnicodeDecodeError as e:
            raise DataException(f"Failed to deserialize string ({self._decode_with}): {e}") from e

    def to_connect_all(self, topic: str, datas: list) -> tuple[list, list]:
        decoding = self._decode_with
        try:
            values = [None if data is None else bytes(data).decode(decoding) for data in datas]
        except UnicodeDecodeError as e:
            raise DataException(f"Failed to deserialize string ({decoding}): {e}") from e
        return [Schema.OPTIONAL_STRING_SCHEMA] * len(values), values

    def from_connect_all(self, topic: str, schemas: list, values: list, headers: list) -> list:
        encoding = self._encode_with
        return [None if value is None else value.encode(encoding) if type(value) is str  # no call for these
                else self.from_connect_data(topic, schema, value) for schema, value in zip(schemas, values, strict=True)]

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)


class ByteArrayConverter(Converter, HeaderConverter):
    """Bytes through untouched; refuses a schema other than BYTES."""

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is not None and schema.type != Type.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is None:
            return None
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
        return bytes(value)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        return SchemaAndValue(Schema.OPTIONAL_BYTES_SCHEMA, None if data is None else bytes(data))

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)


class NumberConverter(Converter, HeaderConverter):
    """One number type in Kafka's serializer bytes; subclasses name the type and the struct format."""

    type_name = ""
    schema: Schema
    format = ""
    python_types: tuple[type, ...] = (int,)

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bool) != (bool in self.python_types) or not isinstance(value, self.python_types):
            raise DataException(
                f"Failed to serialize to {self.type_name} (was {type(value).__name__}): "
                f"{type(self).__name__} expects {self.type_name} values"
            )
        try:
            return struct.pack(self.format, value)
        except (struct.error, OverflowError) as e:
            raise DataException(f"Failed to serialize to {self.type_name}: {value!r} does not fit ({e})") from e

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(self.schema, None)
        size = struct.calcsize(self.format)
        if len(data) != size:
            raise DataException(
                f"Failed to deserialize {self.type_name}: size of data received by {type(self).__name__} "
                f"is not {size} (got {len(data)} bytes)"
            )
        (value,) = struct.unpack(self.format, data)
        return SchemaAndValue(self.schema, value)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)


class ShortConverter(NumberConverter):
    type_name, schema, format = "short", Schema.OPTIONAL_INT16_SCHEMA, ">h"


class IntegerConverter(NumberConverter):
    type_name, schema, format = "integer", Schema.OPTIONAL_INT32_SCHEMA, ">i"


class LongConverter(NumberConverter):
    type_name, schema, format = "long", Schema.OPTIONAL_INT64_SCHEMA, ">q"


class FloatConverter(NumberConverter):
    type_name, schema, format, python_types = "float", Schema.OPTIONAL_FLOAT32_SCHEMA, ">f", (float, int)


class DoubleConverter(NumberConverter):
    type_name, schema, format, python_types = "double", Schema.OPTIONAL_FLOAT64_SCHEMA, ">d", (float, int)


class BooleanConverter(NumberConverter):
    """One byte: 1 true, 0 false (Kafka's BooleanSerializer); any other byte is refused."""

    type_name, schema, format, python_types = "boolean", Schema.OPTIONAL_BOOLEAN_SCHEMA, ">?", (bool,)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is not None and len(data) == 1 and data[0] not in (0, 1):
            raise DataException(f"Failed to deserialize boolean: unexpected byte {data[0]} (expected 0 or 1)")
        return super().to_connect_data(topic, data, headers)
