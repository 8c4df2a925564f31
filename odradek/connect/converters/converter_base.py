"""The converter interfaces (Kafka's ``org.apache.kafka.connect.storage.Converter`` and ``HeaderConverter``).

A ``Converter`` turns a Connect value (schema + value) into the bytes of a record's key or value
and back; a ``HeaderConverter`` does the same for one header. The worker makes one instance per
connector (key, value, header), calls ``configure`` once, then the conversion methods from the
task that owns it; an instance is not shared between tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.config_def import ConfigDef
from odradek.connect.data_schema import Schema, SchemaAndValue
from odradek.connect.records import Headers


class Converter:
    """Connect data <-> the bytes of a record key or value."""

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        """Read the converter's settings (``key.converter.*``/``value.converter.*`` without the prefix)."""

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        raise NotImplementedError

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        raise NotImplementedError

    def to_connect_all(self, topic: str, datas: list) -> tuple[list, list]:
        """``(schemas, values)`` of many records' bytes of one topic (the worker's batch path);
        a converter may do the batch at once. Raises as ``to_connect_data`` would."""
        converted = [self.to_connect_data(topic, data) for data in datas]
        return [sv.schema for sv in converted], [sv.value for sv in converted]

    def from_connect_all(self, topic: str, schemas: list, values: list, headers: list) -> list:
        """The bytes of many records of one topic (the worker's batch path): one
        ``from_connect_data`` each unless a converter does the batch at once."""
        out = self.from_connect_data
        return [out(topic, schema, value, h) for schema, value, h in zip(schemas, values, headers, strict=True)]

    def config_def(self) -> dict[str, ConfigDef]:
        """The keys ``configure`` reads, for validation."""
        return {}

    def close(self) -> None:
        """Release what the converter holds."""


class HeaderConverter:
    """Connect header values <-> header bytes."""

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        """Read the settings (``header.converter.*`` without the prefix)."""

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        raise NotImplementedError

    def config_def(self) -> dict[str, ConfigDef]:
        return {}

    def close(self) -> None:
        """Release what the converter holds."""
