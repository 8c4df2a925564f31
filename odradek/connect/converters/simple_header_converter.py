"""``SimpleHeaderConverter`` (Kafka's ``org.apache.kafka.connect.storage.SimpleHeaderConverter``),
the worker's default header converter: a header value as its text (``Values``' string form, UTF-8)
and back with an inferred schema — ``42`` reads as INT8, ``true`` as BOOLEAN, ``[1,2]`` as an
array, ``2024-05-01`` as a Date, anything else as a STRING. Stateless.
"""

from __future__ import annotations

from typing import Any

from odradek.connect.converters.converter_base import HeaderConverter
from odradek.connect.data_schema import Schema, SchemaAndValue
from odradek.connect.data_values import convert_to_string, parse_string
from odradek.connect.errors import DataException


class SimpleHeaderConverter(HeaderConverter):
    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        text = convert_to_string(schema, value)
        return None if text is None else text.encode("utf-8")

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue.NULL
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataException(f"Failed to deserialize value for header '{header_key}' on topic '{topic}'") from e
        if not text:
            return SchemaAndValue(Schema.STRING_SCHEMA, text)
        return parse_string(text)
