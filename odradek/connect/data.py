"""The Connect data model in one import: ``from odradek.connect.data import Schema, SchemaBuilder, Struct``.

The classes live in ``data_schema`` (Type, Schema, Field, Struct, SchemaAndValue), ``data_builder``
(SchemaBuilder) and ``logical_types`` (Decimal, Date, Time, Timestamp); ``data_values`` infers
schemas for schemaless values and reads and writes values as strings (Kafka's ``Values``).
"""

from odradek.connect.data_builder import SchemaBuilder, as_schema, copy_schema_basics
from odradek.connect.data_schema import Field, Schema, SchemaAndValue, Struct, Type, validate_value
from odradek.connect.logical_types import Date, Decimal, Time, Timestamp

__all__ = [
    "Date",
    "Decimal",
    "Field",
    "Schema",
    "SchemaAndValue",
    "SchemaBuilder",
    "Struct",
    "Time",
    "Timestamp",
    "Type",
    "as_schema",
    "copy_schema_basics",
    "validate_value",
]
