"""Connect schemas for SQL columns (source), and SQL column types for Connect schemas (sink).

The source gives each table (or query) a struct schema named after it, one field per column:
integers, floats, booleans, text and bytes as the like Connect types; NUMERIC as Kafka's
Decimal with the column's scale; DATE, TIME and TIMESTAMP as Kafka's logical Date, Time and
Timestamp. A column the database allows to be NULL makes an optional field (Confluent's
behaviour), so consumers see the table's own constraints.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.connect.data import Date, Decimal, Schema, SchemaBuilder, Time, Timestamp, Type
from odradek.connect.data_schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME
from odradek.connect.jdbc.jdbc_dialects import Column

_PRIMITIVES = {
    "bool": SchemaBuilder.bool,
    "int16": SchemaBuilder.int16,
    "int32": SchemaBuilder.int32,
    "int64": SchemaBuilder.int64,
    "float32": SchemaBuilder.float32,
    "float64": SchemaBuilder.float64,
    "string": SchemaBuilder.string,
    "bytes": SchemaBuilder.bytes,
}


def column_schema(column: Column) -> Schema:
    builder = _builder(column)
    if column.nullable:
        builder.optional()
    return builder.build()


def _builder(column: Column) -> SchemaBuilder:
    kind = column.kind
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]()
    if kind == "decimal":
        return Decimal.builder(column.scale)
    if kind == "date":
        return Date.builder()
    if kind == "time":
        return Time.builder()
    if kind == "timestamp":
        return Timestamp.builder()
    return SchemaBuilder.string()


def table_schema(name: str, columns: Sequence[Column]) -> Schema:
    builder = SchemaBuilder.struct().name(name)
    for column in columns:
        builder.field(column.name, column_schema(column))
    return builder.build()


def sql_type_of(schema: Schema) -> tuple[str, str | None]:
    """(Connect type name, logical name) — the key a dialect's ``sql_types`` is looked up by."""
    if schema.type in (Type.ARRAY, Type.MAP, Type.STRUCT):
        raise ValueError(
            f"a {schema.type.name} field has no column type; flatten it first (the Flatten transform)"
        )
    return schema.type.name, schema.name


def column_kind(schema: Schema) -> str:
    """The dialect-neutral kind of a field's values, for ``Dialect.to_db``."""
    logical = {DECIMAL_NAME: "decimal", DATE_NAME: "date", TIME_NAME: "time", TIMESTAMP_NAME: "timestamp"}
    if schema.name in logical:
        return logical[schema.name]
    return schema.type.name.lower()
