"""SMTs on headers (Kafka's DropHeaders, InsertHeader, HeaderFrom$Key/$Value). Instances belong to one task."""

from __future__ import annotations

from typing import Any

from odradek.config_def import LIST, STR, ConfigDef, OneOf, config_table
from odradek.connect.data_schema import Schema, Struct
from odradek.connect.data_values import parse_string
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.field_transforms import REPLACE_NULL, field_reader, struct_builder_like
from odradek.connect.transforms.transformation_base import (
    KeyOrValue,
    SchemaCache,
    Transformation,
    require_map,
    require_struct,
)


class DropHeaders(Transformation):
    """Removes every header whose key is in ``headers``."""

    REQUIRED = ("headers",)
    CONFIG = config_table(ConfigDef("headers", LIST, None, doc="The name of the headers to be removed."))

    def configured(self, settings: dict[str, Any]) -> None:
        self.names = set(settings["headers"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        headers = record.headers.duplicate()
        for name in self.names:
            headers.remove(name)
        return record.new_record(headers=headers)


class InsertHeader(Transformation):
    """Adds header ``header`` with ``value.literal``, its schema inferred as Kafka's Values.parseString does."""

    REQUIRED = ("header", "value.literal")
    CONFIG = config_table(
        ConfigDef("header", STR, None, doc="The name of the header."),
        ConfigDef("value.literal", STR, None, doc="The literal value that is to be set as the header value on all records."),
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.header: str = settings["header"]
        self.value = parse_string(settings["value.literal"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        headers = record.headers.duplicate()
        headers.add(self.header, self.value)
        return record.new_record(headers=headers)


class HeaderFrom(KeyOrValue, Transformation):
    """Copies (``operation=copy``) or moves (``move``) the key's or value's ``fields`` into the headers
    named in ``headers`` (one header per field, in order)."""

    PURPOSE = "header from"
    REQUIRED = ("fields", "headers", "operation")
    CONFIG = config_table(
        ConfigDef("fields", LIST, None, doc="Field names in the record whose values are to be copied or moved to headers."),
        ConfigDef("headers", LIST, None, doc="Header names, in the same order as the field names listed in the fields configuration property."),
        ConfigDef("operation", STR, None, OneOf("move", "copy"), doc="Either move if the fields are to be moved to the headers (removed from the key/value), or copy if the fields are to be copied to the headers (retained in the key/value)."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.fields: list[str] = settings["fields"]
        self.headers: list[str] = settings["headers"]
        if len(self.fields) != len(self.headers):
            raise ConfigException(
                "headers", ",".join(self.headers),
                "'fields' config must have the same number of elements as 'headers' config.",
            )
        self.move = settings["operation"] == "move"
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if value is None:
            return record
        headers = record.headers.duplicate()
        if schema is None:
            source = require_map(value, self.PURPOSE)
            for field, header in zip(self.fields, self.headers, strict=True):
                headers.add(header, source.get(field), None)
            if self.move:
                source = {k: v for k, v in source.items() if k not in self.fields}
            return self.new_record(record, None, source).new_record(headers=headers)
        struct = require_struct(value, self.PURPOSE)
        for field_name, header in zip(self.fields, self.headers, strict=True):
            found = struct.schema.field(field_name)
            if found is None:
                raise DataException(f"Field {field_name} does not exist in the record's schema")
            headers.add(header, self.read(struct, found), found.schema)
        new_schema, new_value = struct.schema, struct
        if self.move:
            new_schema = self.cache.get_or_build(struct.schema, self._without_fields)
            new_value = Struct(new_schema)
            for kept in new_schema.fields():
                new_value.put(kept.name, self.read(struct, kept.name))
        return self.new_record(record, new_schema, new_value).new_record(headers=headers)

    def _without_fields(self, source: Schema) -> Schema:
        builder = struct_builder_like(source)
        for field in source.fields():
            if field.name not in self.fields:
                builder.field(field.name, field.schema)
        return builder.build()
