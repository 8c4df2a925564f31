"""``Flatten`` (Kafka's ``org.apache.kafka.connect.transforms.Flatten$Key``/``$Value``): nested
structs (or maps, schemaless) become top-level fields named by their path joined with
``delimiter`` (``.`` by default). Arrays stay as they are. A field under an optional struct becomes
optional. Instances belong to one task.
"""

from __future__ import annotations

from typing import Any

from odradek.config_def import STR, ConfigDef, config_table
from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import Schema, Struct, Type
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.field_transforms import REPLACE_NULL, field_reader, struct_builder_like
from odradek.connect.transforms.transformation_base import (
    KeyOrValue,
    SchemaCache,
    Transformation,
    optional_of,
    require_map,
    require_struct,
)


class Flatten(KeyOrValue, Transformation):
    PURPOSE = "flattening"
    CONFIG = config_table(
        ConfigDef("delimiter", STR, ".", doc="Delimiter to insert between field names from the input record."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.delimiter: str = settings["delimiter"]
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if value is None and (schema is None or schema.type != Type.STRUCT):
            return record
        if schema is None:
            flat: dict[str, Any] = {}
            self._flatten_map(require_map(value, self.PURPOSE), "", flat)
            return self.new_record(record, None, flat)
        if schema.type != Type.STRUCT:
            return record
        new_schema = self.cache.get_or_build(schema, self._flat_schema)
        updated = None
        if value is not None:
            updated = Struct(new_schema)
            self._flatten_struct(require_struct(value, self.PURPOSE), "", updated)
        return self.new_record(record, new_schema, updated)

    def _flatten_map(self, source: dict, prefix: str, out: dict[str, Any]) -> None:
        for key, item in source.items():
            name = self._name(prefix, str(key))
            if isinstance(item, dict):
                self._flatten_map(item, name, out)
            else:
                out[name] = item

    def _flat_schema(self, source: Schema) -> Schema:
        builder = struct_builder_like(source)
        self._add_fields(source, "", False, builder)
        return builder.build()

    def _add_fields(self, schema: Schema, prefix: str, optional: bool, builder: SchemaBuilder) -> None:
        for field in schema.fields():
            name = self._name(prefix, field.name)
            if field.schema.type == Type.STRUCT:
                self._add_fields(field.schema, name, optional or field.schema.is_optional, builder)
            else:
                builder.field(name, optional_of(field.schema) if optional else field.schema)

    def _flatten_struct(self, struct: Struct | None, prefix: str, out: Struct) -> None:
        if struct is None:
            return  # every field beneath an absent optional struct stays null
        for field in struct.schema.fields():
            name = self._name(prefix, field.name)
            item = self.read(struct, field)
            if field.schema.type == Type.STRUCT:
                self._flatten_struct(item, name, out)
            else:
                out.put(name, item)
