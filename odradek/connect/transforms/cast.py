"""``Cast`` (Kafka's ``org.apache.kafka.connect.transforms.Cast$Key``/``$Value``): casts fields, or
the whole key or value, to int8, int16, int32, int64, float32, float64, boolean or string.

``spec=price:float64,active:boolean`` casts fields; ``spec=int32`` the whole key or value. Numbers
narrow as Java's casts do (wrapping), strings parse (a string that is no number is an error),
booleans become 1/0 and numbers booleans by ``!= 0``; anything casts to string (Java's text for
numbers, base64 for bytes, ISO-8601 for dates and times). Instances belong to one task.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
from typing import Any

from odradek.config_def import LIST, ConfigDef, config_table
from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import DECIMAL_NAME, INT_RANGES, Schema, Struct, Type
from odradek.connect.data_values import convert_to_string
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

TARGETS = {
    "int8": Type.INT8, "int16": Type.INT16, "int32": Type.INT32, "int64": Type.INT64,
    "float32": Type.FLOAT32, "float64": Type.FLOAT64, "boolean": Type.BOOLEAN, "string": Type.STRING,
}
SOURCES = set(TARGETS.values()) | {Type.BYTES}
WHOLE_VALUE = ""


def _wrap(number: int, type: Type) -> int:
    low, high = INT_RANGES[type]
    span = high - low + 1
    return (number - low) % span + low


def cast_value(value: Any, target: Type) -> Any:
    """``value`` cast to ``target`` as Kafka's Cast does; ``DataException`` when it cannot be."""
    if value is None:
        return None
    try:
        if target == Type.STRING:
            if isinstance(value, (bytes, bytearray)):
                return base64.b64encode(bytes(value)).decode("ascii")
            return convert_to_string(None, value)
        if target == Type.BOOLEAN:
            if isinstance(value, str):
                return value.strip().lower() == "true"
            if isinstance(value, (int, float, decimal.Decimal)):
                return value != 0
        elif target in INT_RANGES:
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, str):
                number = int(value.strip())
                low, high = INT_RANGES[target]
                if not low <= number <= high:
                    raise ValueError(f"{value} out of range for {target.name}")
                return number
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{value} is not a finite number")
            if isinstance(value, (int, float, decimal.Decimal)):
                return _wrap(int(value), target)
        elif target in (Type.FLOAT32, Type.FLOAT64):
            if isinstance(value, (bool, int, float, decimal.Decimal)):
                return float(value)
            if isinstance(value, str):
                return float(value.strip())
    except (ValueError, decimal.InvalidOperation) as e:
        raise DataException(f"Cannot cast {value!r} to {target.name}: {e}") from e
    kind = type(value).__name__
    if isinstance(value, (datetime.date, datetime.time)):
        kind = "a date or time"
    raise DataException(f"Cast transformation does not support casting {kind} to {target.name}")


class Cast(KeyOrValue, Transformation):
    PURPOSE = "cast types"
    REQUIRED = ("spec",)
    CONFIG = config_table(
        ConfigDef(
            "spec", LIST, None,
            doc="List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of "
            "Maps or Structs. A single type to cast the entire value. Valid types are int8, int16, int32, int64, "
            "float32, float64, boolean, and string.",
        ),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        spec: list[str] = settings["spec"]
        self.casts: dict[str, Type] = {}
        for item in spec:
            field, sep, type_name = item.rpartition(":")
            if not sep:
                field, type_name = WHOLE_VALUE, item
            target = TARGETS.get(type_name.strip().lower())
            if target is None:
                raise ConfigException(
                    "spec", ",".join(spec),
                    f"Invalid type found in casting spec: {type_name.strip()} (valid: {', '.join(TARGETS)})",
                )
            if not sep and len(spec) > 1:
                raise ConfigException(
                    "spec", ",".join(spec),
                    "Cast transformations that specify a type to cast the entire value to may only specify a "
                    "single cast in their spec",
                )
            self.casts[field.strip()] = target
        self.whole = self.casts.get(WHOLE_VALUE)
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, cast_value(value, self.whole))
            if value is None:
                return record
            source = require_map(value, self.PURPOSE)
            return self.new_record(
                record, None,
                {k: cast_value(v, self.casts[k]) if k in self.casts else v for k, v in source.items()},
            )
        if self.whole is not None:
            _check_castable(schema, self.whole)
            target_schema = self.cache.get_or_build(schema, lambda s: _target_schema(s, self.whole))  # type: ignore[arg-type]
            return self.new_record(record, target_schema, cast_value(value, self.whole))
        if value is None:
            return record
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get_or_build(struct.schema, self._cast_schema)
        updated = Struct(new_schema)
        for field in struct.schema.fields():
            current = self.read(struct, field)
            target = self.casts.get(field.name)
            updated.put(field.name, current if target is None else cast_value(current, target))
        return self.new_record(record, new_schema, updated)

    def _cast_schema(self, source: Schema) -> Schema:
        builder = struct_builder_like(source)
        for field in source.fields():
            target = self.casts.get(field.name)
            if target is None:
                builder.field(field.name, field.schema)
            else:
                _check_castable(field.schema, target)
                builder.field(field.name, _target_schema(field.schema, target))
        return builder.build()


def _check_castable(schema: Schema, target: Type) -> None:
    if schema.type not in SOURCES or (schema.type == Type.BYTES and target != Type.STRING and schema.name != DECIMAL_NAME):
        raise DataException(f"Cast transformation does not support casting from {schema.type.name} to {target.name}")


def _target_schema(source: Schema, target: Type) -> Schema:
    builder = SchemaBuilder(target)
    if source.is_optional:
        builder.optional()
    if source.default_value is not None:
        builder.default_value(cast_value(source.default_value, target))
    return builder.build()
