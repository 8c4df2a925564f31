"""SMTs that add, drop, rename, mask or move fields (Kafka's InsertField, ReplaceField, MaskField,
ValueToKey, ExtractField, HoistField), each schemaless (dict values) and with schemas (Struct).

Derived schemas are cached per source schema. Instances belong to one task.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from odradek.config_def import BOOL, LIST, STR, ConfigDef, OneOf, config_table
from odradek.connect.data_builder import SchemaBuilder, copy_schema_basics
from odradek.connect.data_schema import DECIMAL_NAME, Schema, Struct, Type
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.logical_types import Timestamp, millis_to_datetime
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.transformation_base import (
    KeyOrValue,
    SchemaCache,
    Transformation,
    require_map,
    require_schema,
    require_sink_record,
    require_struct,
)

REPLACE_NULL = ConfigDef(
    "replace.null.with.default", BOOL, True,
    doc="Whether a null field with a default value is read as that default (true) or as null.",
)


def struct_builder_like(schema: Schema) -> SchemaBuilder:
    """A struct builder with ``schema``'s name, version, doc, parameters and optionality."""
    builder = copy_schema_basics(schema, SchemaBuilder.struct())
    return builder.optional() if schema.is_optional else builder


def field_reader(replace_null_with_default: bool):
    return Struct.get if replace_null_with_default else Struct.get_without_default


class InsertField(KeyOrValue, Transformation):
    """Adds the record's topic, partition, offset (sink records), timestamp and/or a static string.
    A field name ending in ``!`` is required in the new schema, ``?`` (the default) optional."""

    PURPOSE = "field insertion"
    CONFIG = config_table(
        ConfigDef("topic.field", STR, None, doc="Field name for the Kafka topic. Suffix ! required, ? optional."),
        ConfigDef("partition.field", STR, None, doc="Field name for the Kafka partition."),
        ConfigDef("offset.field", STR, None, doc="Field name for the Kafka offset (sink connectors only)."),
        ConfigDef("timestamp.field", STR, None, doc="Field name for the record timestamp."),
        ConfigDef("static.field", STR, None, doc="Field name for the static data field."),
        ConfigDef("static.value", STR, None, doc="Static field value, if a static field name is configured."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        def spec(key: str) -> tuple[str, bool] | None:
            text = settings[key]
            if not text:
                return None
            if text.endswith("!"):
                return text[:-1], False
            return (text[:-1], True) if text.endswith("?") else (text, True)

        self.topic, self.partition = spec("topic.field"), spec("partition.field")
        self.offset, self.timestamp = spec("offset.field"), spec("timestamp.field")
        self.static = spec("static.field")
        self.static_value = settings["static.value"]
        if self.static is not None and self.static_value is None:
            raise ConfigException("static.value", None, f"No value specified for static field: {self.static[0]}")
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def _insertions(self, record: ConnectRecord) -> list[tuple[tuple[str, bool], Schema, Any, Any]]:
        """(spec, required schema, value with a schema, value without) for each configured field."""
        out: list[tuple[tuple[str, bool], Schema, Any, Any]] = []
        if self.topic:
            out.append((self.topic, Schema.STRING_SCHEMA, record.topic, record.topic))
        if self.partition:
            out.append((self.partition, Schema.INT32_SCHEMA, record.kafka_partition, record.kafka_partition))
        if self.offset:
            offset = require_sink_record(record, self.PURPOSE).kafka_offset
            out.append((self.offset, Schema.INT64_SCHEMA, offset, offset))
        if self.timestamp:
            ts = record.timestamp
            moment = None if ts is None else millis_to_datetime(ts)
            out.append((self.timestamp, Timestamp.SCHEMA, moment, ts))
        if self.static:
            out.append((self.static, Schema.STRING_SCHEMA, self.static_value, self.static_value))
        return out

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record  # a tombstone stays one
        schema = self.operating_schema(record)
        insertions = self._insertions(record)
        if schema is None:
            updated = dict(require_map(value, self.PURPOSE))
            for (name, _), _, _, plain in insertions:
                updated[name] = plain
            return self.new_record(record, None, updated)
        struct = require_struct(value, self.PURPOSE)

        def build(source: Schema) -> Schema:
            builder = struct_builder_like(source)
            for field in source.fields():
                builder.field(field.name, field.schema)
            for (name, optional), field_schema, _, _ in insertions:
                builder.field(name, _optional(field_schema) if optional else field_schema)
            return builder.build()

        new_schema = self.cache.get_or_build(struct.schema, build)
        updated_struct = Struct(new_schema)
        for field in struct.schema.fields():
            updated_struct.put(field.name, self.read(struct, field))
        for (name, _), _, typed, _ in insertions:
            updated_struct.put(name, typed)
        return self.new_record(record, new_schema, updated_struct)


def _optional(schema: Schema) -> Schema:
    builder = SchemaBuilder(schema.type)
    if schema.name:
        builder.name(schema.name)
    if schema.version is not None:
        builder.version(schema.version)
    return builder.optional().build()


class ReplaceField(KeyOrValue, Transformation):
    """Keeps only ``include`` fields (all when empty), drops ``exclude`` ones, renames by
    ``renames=old:new,...``. ``whitelist``/``blacklist`` are the old names of include/exclude."""

    PURPOSE = "field replacement"
    CONFIG = config_table(
        ConfigDef("exclude", LIST, [], doc="Fields to exclude. This takes precedence over the fields to include."),
        ConfigDef("include", LIST, [], doc="Fields to include. If specified, only these fields will be used."),
        ConfigDef("renames", LIST, [], doc="Field rename mappings, as old:new pairs."),
        ConfigDef("blacklist", LIST, None, doc="Deprecated. Use exclude instead."),
        ConfigDef("whitelist", LIST, None, doc="Deprecated. Use include instead."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.exclude = set(settings["exclude"] or settings["blacklist"] or [])
        self.include = set(settings["include"] or settings["whitelist"] or [])
        self.renames: dict[str, str] = {}
        for mapping in settings["renames"]:
            old, sep, new = mapping.partition(":")
            if not sep or not old or not new or ":" in new:
                raise ConfigException("renames", ",".join(settings["renames"]), f"Invalid rename mapping: {mapping}")
            self.renames[old] = new
        self.reverse = {new: old for old, new in self.renames.items()}
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def keeps(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        if schema is None:
            source = require_map(value, self.PURPOSE)
            return self.new_record(
                record, None, {self.renamed(k): v for k, v in source.items() if self.keeps(k)}
            )
        struct = require_struct(value, self.PURPOSE)

        def build(source: Schema) -> Schema:
            builder = struct_builder_like(source)
            for field in source.fields():
                if self.keeps(field.name):
                    builder.field(self.renamed(field.name), field.schema)
            return builder.build()

        new_schema = self.cache.get_or_build(struct.schema, build)
        updated = Struct(new_schema)
        for field in new_schema.fields():
            updated.put(field.name, self.read(struct, self.reverse.get(field.name, field.name)))
        return self.new_record(record, new_schema, updated)


_MASKS: dict[Type, Any] = {
    Type.INT8: 0, Type.INT16: 0, Type.INT32: 0, Type.INT64: 0,
    Type.FLOAT32: 0.0, Type.FLOAT64: 0.0, Type.BOOLEAN: False, Type.STRING: "", Type.BYTES: b"",
}


class MaskField(KeyOrValue, Transformation):
    """Replaces ``fields`` with their type's empty value (0, false, "", empty list/map, the epoch),
    or with ``replacement`` (numbers and strings only)."""

    PURPOSE = "mask fields"
    REQUIRED = ("fields",)
    CONFIG = config_table(
        ConfigDef("fields", LIST, None, doc="Names of fields to mask."),
        ConfigDef("replacement", STR, None, doc="Custom value replacement, applied to all 'fields' values."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.fields = set(settings["fields"])
        self.replacement = settings["replacement"]
        if self.replacement == "":
            raise ConfigException("replacement", "", "String must be non-empty")
        self.read = field_reader(settings["replace.null.with.default"])

    def _masked(self, value: Any, schema: Schema | None, name: str) -> Any:
        if value is None:
            return None
        if self.replacement is not None:
            return self._replacement_for(value, name)
        if schema is not None and schema.name == DECIMAL_NAME or isinstance(value, decimal.Decimal):
            return decimal.Decimal(0)
        if isinstance(value, datetime.datetime):
            return millis_to_datetime(0)
        if isinstance(value, datetime.date):
            return datetime.date(1970, 1, 1)
        if isinstance(value, datetime.time):
            return datetime.time(0)
        if isinstance(value, (list, tuple)):
            return []
        if isinstance(value, dict):
            return {}
        if isinstance(value, Struct):
            raise DataException(f"Cannot mask value of type Struct (field {name})")
        if isinstance(value, bool):
            return False
        for kind, mask in ((int, 0), (float, 0.0), (str, ""), ((bytes, bytearray), b"")):
            if isinstance(value, kind):
                return mask
        raise DataException(f"Cannot mask value of type {type(value).__name__} (field {name})")

    def _replacement_for(self, value: Any, name: str) -> Any:
        text = self.replacement
        try:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, int):
                return int(text)
            if isinstance(value, float):
                return float(text)
            if isinstance(value, decimal.Decimal):
                return decimal.Decimal(text)
            if isinstance(value, str):
                return text
        except (ValueError, decimal.InvalidOperation):
            raise DataException(f"Unable to convert {text} to {type(value).__name__} (field {name})") from None
        raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement (field {name})")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        if schema is None:
            source = require_map(value, self.PURPOSE)
            return self.new_record(
                record, None, {k: self._masked(v, None, k) if k in self.fields else v for k, v in source.items()}
            )
        struct = require_struct(value, self.PURPOSE)
        updated = Struct(struct.schema)
        for field in struct.schema.fields():
            current = self.read(struct, field)
            updated.put(field, self._masked(current, field.schema, field.name) if field.name in self.fields else current)
        return self.new_record(record, struct.schema, updated)


class ValueToKey(Transformation):
    """Replaces the record key with a new key formed from a subset of fields in the record value."""

    PURPOSE = "copying fields from value to key"
    REQUIRED = ("fields",)
    CONFIG = config_table(
        ConfigDef("fields", LIST, None, doc="Field names on the record value to extract as the record key."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.fields: list[str] = settings["fields"]
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None, key={name: value.get(name) for name in self.fields})
        struct = require_struct(record.value, self.PURPOSE)

        def build(source: Schema) -> Schema:
            builder = SchemaBuilder.struct()
            for name in self.fields:
                field = source.field(name)
                if field is None:
                    raise DataException(f"Field does not exist: {name}")
                builder.field(name, field.schema)
            return builder.build()

        key_schema = self.cache.get_or_build(struct.schema, build)
        key = Struct(key_schema)
        for name in self.fields:
            key.put(name, self.read(struct, name))
        return record.new_record(key_schema=key_schema, key=key)


class ExtractField(KeyOrValue, Transformation):
    """Replaces the key or value with one of its fields (``field``; with ``field.syntax.version=V2``
    a dotted path into nested structs or maps)."""

    PURPOSE = "field extraction"
    REQUIRED = ("field",)
    CONFIG = config_table(
        ConfigDef("field", STR, None, doc="Field name to extract."),
        ConfigDef(
            "field.syntax.version", STR, "V1", OneOf("V1", "V2"),
            doc="V1: field names are taken as they are; V2: dots separate the levels of a nested path.",
        ),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        field = settings["field"]
        self.path: list[str] = field.split(".") if settings["field.syntax.version"] == "V2" else [field]
        self.read = field_reader(settings["replace.null.with.default"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            for name in self.path:
                if value is None:
                    break
                value = require_map(value, self.PURPOSE).get(name)
            return self.new_record(record, None, value)
        for name in self.path:
            field = require_schema(schema, self.PURPOSE).field(name) if schema.type == Type.STRUCT else None
            if field is None:
                raise DataException(f"Unknown field: {name}")
            value = None if value is None else self.read(require_struct(value, self.PURPOSE), field)
            schema = field.schema
        return self.new_record(record, schema, value)


class HoistField(KeyOrValue, Transformation):
    """Wraps the key or value in a struct (or map, schemaless) with one field, ``field``."""

    PURPOSE = "field hoisting"
    REQUIRED = ("field",)
    CONFIG = config_table(
        ConfigDef("field", STR, None, doc="Field name for the single field that will be created in the resulting Struct or Map."),
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.field: str = settings["field"]
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        new_schema = self.cache.get_or_build(schema, lambda s: SchemaBuilder.struct().field(self.field, s).build())
        return self.new_record(record, new_schema, Struct(new_schema).put(self.field, value))
