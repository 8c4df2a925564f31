"""``TimestampConverter`` (Kafka's ``org.apache.kafka.connect.transforms.TimestampConverter$Key``/
``$Value``): converts a timestamp field, or the whole key or value, between a string (Java
``SimpleDateFormat`` pattern in ``format``), unix time (``unix.precision``: seconds, milliseconds,
microseconds, nanoseconds) and Connect's Date, Time and Timestamp. All in UTC.

The input kind comes from the schema (Timestamp/Date/Time names, INT64 for unix, STRING) or,
schemaless, from the Python value (datetime, int, str). Instances belong to one task.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.config_def import STR, ConfigDef, OneOf, config_table
from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import DATE_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Struct, Type
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.logical_types import Date, Time, Timestamp, datetime_to_millis, millis_to_datetime
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.field_transforms import REPLACE_NULL, field_reader, struct_builder_like
from odradek.connect.transforms.java_date_format import JavaDateFormat
from odradek.connect.transforms.transformation_base import (
    KeyOrValue,
    SchemaCache,
    Transformation,
    require_map,
    require_struct,
)

STRING, UNIX, DATE, TIME, TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
# Unix time in each precision per millisecond (seconds: 1/1000), as (multiply, divide).
UNITS_PER_MILLI = {"seconds": (1, 1000), "milliseconds": (1, 1), "microseconds": (1000, 1), "nanoseconds": (1_000_000, 1)}


class TimestampConverter(KeyOrValue, Transformation):
    PURPOSE = "converting timestamp formats"
    REQUIRED = ("target.type",)
    CONFIG = config_table(
        ConfigDef("field", STR, "", doc="The field containing the timestamp, or empty if the entire value is a timestamp."),
        ConfigDef(
            "target.type", STR, None, OneOf(STRING, UNIX, DATE, TIME, TIMESTAMP),
            doc="The desired timestamp representation: string, unix, Date, Time, or Timestamp.",
        ),
        ConfigDef(
            "format", STR, "",
            doc="A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when "
            "type=string or used to parse the input if the input is a string.",
        ),
        ConfigDef(
            "unix.precision", STR, "milliseconds", OneOf(*UNITS_PER_MILLI),
            doc="The desired unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds.",
        ),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.field: str = settings["field"]
        self.target: str = settings["target.type"]
        self.precision: str = settings["unix.precision"]
        self.format: JavaDateFormat | None = None
        if settings["format"]:
            try:
                self.format = JavaDateFormat(settings["format"])
            except ValueError as e:
                raise ConfigException("format", settings["format"], f"TimestampConverter requires a SimpleDateFormat-compatible pattern: {e}") from None
        elif self.target == STRING:
            raise ConfigException(
                "format", "", "TimestampConverter requires format option to be specified when using string timestamps"
            )
        self.read = field_reader(settings["replace.null.with.default"])
        self.cache = SchemaCache()

    # -- kinds and conversions
    def _kind_of_schema(self, schema: Schema) -> str:
        if schema.name == TIMESTAMP_NAME:
            return TIMESTAMP
        if schema.name == DATE_NAME:
            return DATE
        if schema.name == TIME_NAME:
            return TIME
        if schema.type == Type.INT64:
            return UNIX
        if schema.type == Type.STRING:
            return STRING
        raise DataException(f"Schema {schema} does not correspond to a known timestamp type format")

    def _kind_of_value(self, value: Any) -> str:
        if isinstance(value, datetime.datetime):
            return TIMESTAMP
        if isinstance(value, datetime.date):
            return DATE
        if isinstance(value, datetime.time):
            return TIME
        if isinstance(value, int) and not isinstance(value, bool):
            return UNIX
        if isinstance(value, str):
            return STRING
        raise DataException(f"TimestampConverter does not support {type(value).__name__} objects as timestamps")

    def _to_moment(self, value: Any, kind: str) -> datetime.datetime:
        if kind == TIMESTAMP:
            return millis_to_datetime(datetime_to_millis(value))
        if kind == DATE:
            return datetime.datetime.combine(value, datetime.time(0), datetime.UTC)
        if kind == TIME:
            return datetime.datetime.combine(datetime.date(1970, 1, 1), value, datetime.UTC)
        if kind == UNIX:
            multiply, divide = UNITS_PER_MILLI[self.precision]
            return millis_to_datetime(value * divide // multiply)
        if self.format is None:
            raise DataException("TimestampConverter requires format option to be specified when using string timestamps")
        try:
            return self.format.parse(value)
        except ValueError as e:
            raise DataException(f"Could not parse timestamp: value ({value}) does not match pattern ({self.format.pattern})") from e

    def _from_moment(self, moment: datetime.datetime) -> Any:
        if self.target == STRING:
            assert self.format is not None
            return self.format.format(moment)
        if self.target == UNIX:
            multiply, divide = UNITS_PER_MILLI[self.precision]
            return datetime_to_millis(moment) * multiply // divide
        if self.target == DATE:
            return moment.date()
        if self.target == TIME:
            return moment.time()
        return moment

    def _target_schema(self, optional: bool) -> Schema:
        builder = {
            STRING: SchemaBuilder.string, UNIX: SchemaBuilder.int64, DATE: Date.builder, TIME: Time.builder,
            TIMESTAMP: Timestamp.builder,
        }[self.target]()
        return (builder.optional() if optional else builder).build()

    def convert(self, value: Any, kind: str | None = None) -> Any:
        if value is None:
            return None
        return self._from_moment(self._to_moment(value, kind or self._kind_of_value(value)))

    # -- records
    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if not self.field:
            if schema is None:
                return self.new_record(record, None, self.convert(value))
            kind = self._kind_of_schema(schema)
            return self.new_record(record, self._target_schema(schema.is_optional), self.convert(value, kind))
        if value is None:
            return record
        if schema is None:
            updated = dict(require_map(value, self.PURPOSE))
            if self.field in updated:
                updated[self.field] = self.convert(updated[self.field])
            return self.new_record(record, None, updated)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get_or_build(struct.schema, self._struct_schema)
        source_field = struct.schema.field(self.field)
        assert source_field is not None  # _struct_schema checked it
        kind = self._kind_of_schema(source_field.schema)
        out = Struct(new_schema)
        for field in struct.schema.fields():
            current = self.read(struct, field)
            out.put(field.name, self.convert(current, kind) if field.name == self.field else current)
        return self.new_record(record, new_schema, out)

    def _struct_schema(self, source: Schema) -> Schema:
        if source.field(self.field) is None:
            raise DataException(f"Field {self.field} does not exist in the record's schema")
        builder = struct_builder_like(source)
        for field in source.fields():
            if field.name == self.field:
                builder.field(field.name, self._target_schema(field.schema.is_optional))
            else:
                builder.field(field.name, field.schema)
        return builder.build()
