"""Connect schemas and structs: ``Type``, ``Schema``, ``Field``, ``Struct`` and ``SchemaAndValue``
(Kafka's ``org.apache.kafka.connect.data`` Schema, ConnectSchema, Field, Struct, SchemaAndValue).
Schemas are built with ``data_builder.SchemaBuilder``; ``odradek.connect.data`` gathers them all.

A ``Schema`` is immutable once built. Python values stand for Connect's Java ones: INT8..INT64
are ``int`` (range-checked), FLOAT32/64 ``float``, BOOLEAN ``bool``, STRING ``str``, BYTES
``bytes``, ARRAY ``list``, MAP ``dict``, STRUCT ``Struct``. The logical types (a name on a
primitive schema) take ``decimal.Decimal`` (Decimal), ``datetime.date`` (Date), ``datetime.time``
(Time) and ``datetime.datetime`` (Timestamp); see ``logical_types``.

Immutable values and stateless functions; safe from any thread (a builder belongs to its caller).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from enum import Enum
from typing import Any

from odradek.connect.errors import DataException, SchemaBuilderException

DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"


class Type(Enum):
    """A schema's type; ``value`` is the lower-case name Kafka writes in JSON schemas."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    # Members are singletons: hash by identity (Enum's own __hash__ runs Python code on every lookup).
    __hash__ = object.__hash__

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)

    def get_name(self) -> str:
        return self.value


INT_RANGES = {
    Type.INT8: (-(1 << 7), (1 << 7) - 1),
    Type.INT16: (-(1 << 15), (1 << 15) - 1),
    Type.INT32: (-(1 << 31), (1 << 31) - 1),
    Type.INT64: (-(1 << 63), (1 << 63) - 1),
}


class Field:
    """A struct's field: its name, its position and its schema."""

    __slots__ = ("name", "index", "schema")

    def __init__(self, name: str, index: int, schema: Schema):
        self.name = name
        self.index = index
        self.schema = schema

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Field)
            and self.name == other.name
            and self.index == other.index
            and self.schema == other.schema
        )

    def __hash__(self) -> int:
        return hash((self.name, self.index))

    def __repr__(self) -> str:
        return f"Field{{name={self.name}, index={self.index}, schema={self.schema}}}"


class Schema:
    """A built, immutable Connect schema (Kafka's ``ConnectSchema``)."""

    # Set below, after the class exists: Schema.INT8_SCHEMA, Schema.OPTIONAL_STRING_SCHEMA, ...
    INT8_SCHEMA: Schema
    INT16_SCHEMA: Schema
    INT32_SCHEMA: Schema
    INT64_SCHEMA: Schema
    FLOAT32_SCHEMA: Schema
    FLOAT64_SCHEMA: Schema
    BOOLEAN_SCHEMA: Schema
    STRING_SCHEMA: Schema
    BYTES_SCHEMA: Schema
    OPTIONAL_INT8_SCHEMA: Schema
    OPTIONAL_INT16_SCHEMA: Schema
    OPTIONAL_INT32_SCHEMA: Schema
    OPTIONAL_INT64_SCHEMA: Schema
    OPTIONAL_FLOAT32_SCHEMA: Schema
    OPTIONAL_FLOAT64_SCHEMA: Schema
    OPTIONAL_BOOLEAN_SCHEMA: Schema
    OPTIONAL_STRING_SCHEMA: Schema
    OPTIONAL_BYTES_SCHEMA: Schema

    def __init__(
        self,
        type: Type,
        optional: bool = False,
        default_value: Any = None,
        name: str | None = None,
        version: int | None = None,
        doc: str | None = None,
        parameters: Mapping[str, str] | None = None,
        fields: list[Field] | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ):
        self._type = type
        self._optional = optional
        self._default_value = default_value
        self._name = name
        self._version = version
        self._doc = doc
        self._parameters = dict(parameters) if parameters else None
        if type == Type.STRUCT:
            self._fields: list[Field] | None = list(fields or [])
            self._by_name = {f.name: f for f in self._fields}
        elif fields:
            raise SchemaBuilderException(f"Cannot add fields to a {type.value} schema")
        else:
            self._fields, self._by_name = None, {}
        if (key_schema is not None) and type != Type.MAP:
            raise SchemaBuilderException("Only map schemas have a key schema")
        if (value_schema is not None) and type not in (Type.MAP, Type.ARRAY):
            raise SchemaBuilderException("Only map and array schemas have a value schema")
        self._key_schema = key_schema
        self._value_schema = value_schema
        self._hash: int | None = None

    @property
    def type(self) -> Type:
        return self._type

    @property
    def is_optional(self) -> bool:
        return self._optional

    @property
    def default_value(self) -> Any:
        return self._default_value

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def version(self) -> int | None:
        return self._version

    @property
    def doc(self) -> str | None:
        return self._doc

    @property
    def parameters(self) -> dict[str, str] | None:
        return None if self._parameters is None else dict(self._parameters)

    @property
    def key_schema(self) -> Schema:
        if self._type != Type.MAP:
            raise DataException(f"Cannot look up key schema on non-map type {self._type.name}")
        assert self._key_schema is not None
        return self._key_schema

    @property
    def value_schema(self) -> Schema:
        if self._type not in (Type.MAP, Type.ARRAY):
            raise DataException(f"Cannot look up value schema on non-array and non-map type {self._type.name}")
        assert self._value_schema is not None
        return self._value_schema

    def fields(self) -> list[Field]:
        if self._fields is None:
            raise DataException(f"Cannot list fields on non-struct type {self._type.name}")
        return list(self._fields)

    def field(self, name: str) -> Field | None:
        """The field called ``name``, or None when there is none."""
        if self._fields is None:
            raise DataException(f"Cannot look up fields on non-struct type {self._type.name}")
        return self._by_name.get(name)

    def schema(self) -> Schema:
        return self

    def replace(self, **changes: Any) -> Schema:
        """A copy with some of the constructor's arguments changed (``optional=True``, ``name=...``)."""
        current: dict[str, Any] = {
            "optional": self._optional, "default_value": self._default_value, "name": self._name,
            "version": self._version, "doc": self._doc, "parameters": self._parameters, "fields": self._fields,
            "key_schema": self._key_schema, "value_schema": self._value_schema,
        }
        return Schema(self._type, **{**current, **changes})

    def validate_value(self, value: Any) -> None:
        validate_value(self, value)

    def _identity(self) -> tuple:
        return (
            self._type,
            self._optional,
            self._name,
            self._version,
            self._doc,
            self._parameters,
            self._fields,
            self._key_schema,
            self._value_schema,
        )

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Schema):
            return NotImplemented
        return self._identity() == other._identity() and _same_value(self._default_value, other._default_value)

    def __hash__(self) -> int:
        if self._hash is None:  # immutable, so computed once (converters look schemas up per record)
            fields = tuple(f.name for f in self._fields) if self._fields is not None else None
            self._hash = hash((self._type, self._optional, self._name, self._version, fields))
        return self._hash

    def __repr__(self) -> str:
        if self._name:
            return f"Schema{{{self._name}:{self._type.name}}}"
        return f"Schema{{{self._type.name}}}"


def _same_value(a: Any, b: Any) -> bool:
    # True == 1 in Python; a default of True must not equal a default of 1.
    return type(a) is type(b) and a == b


def _primitive(type: Type, optional: bool) -> Schema:
    return Schema(type, optional=optional)


for _t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN,
           Type.STRING, Type.BYTES):
    setattr(Schema, f"{_t.name}_SCHEMA", _primitive(_t, False))
    setattr(Schema, f"OPTIONAL_{_t.name}_SCHEMA", _primitive(_t, True))


def _expected_classes(schema: Schema) -> tuple[type, ...]:
    if schema.name == DECIMAL_NAME:
        return (decimal.Decimal,)
    if schema.name == TIMESTAMP_NAME:
        return (datetime.datetime,)
    if schema.name == DATE_NAME:
        return (datetime.date,)
    if schema.name == TIME_NAME:
        return (datetime.time,)
    return _CLASSES[schema.type]


_CLASSES: dict[Type, tuple[type, ...]] = {
    Type.INT8: (int,),
    Type.INT16: (int,),
    Type.INT32: (int,),
    Type.INT64: (int,),
    Type.FLOAT32: (float, int),
    Type.FLOAT64: (float, int),
    Type.BOOLEAN: (bool,),
    Type.STRING: (str,),
    Type.BYTES: (bytes, bytearray, memoryview),
    Type.ARRAY: (list, tuple),
    Type.MAP: (dict,),
}


# The one class a plain (unnamed) primitive schema's values usually have.
_EXACT_CLASSES: dict[Type, type] = {
    Type.INT8: int, Type.INT16: int, Type.INT32: int, Type.INT64: int, Type.FLOAT32: float,
    Type.FLOAT64: float, Type.BOOLEAN: bool, Type.STRING: str, Type.BYTES: bytes,
}


def validate_value(schema: Schema, value: Any, field: str | None = None) -> None:
    """Raise ``DataException`` unless ``value`` fits ``schema`` (Kafka's ConnectSchema.validateValue)."""
    if schema._name is None and value.__class__ is _EXACT_CLASSES.get(schema._type):
        bounds = INT_RANGES.get(schema._type)  # the common case, decided without the checks below
        number: Any = value
        if bounds is None or bounds[0] <= number <= bounds[1]:
            return
    if value is None:
        if not schema.is_optional:
            raise DataException(
                f"Invalid value: null used for required {_where(field)}, schema type: {schema.type.name}"
            )
        return
    if schema.type == Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataException(
                f"Invalid Java object for schema with type STRUCT: {type(value).__name__} for {_where(field)}"
            )
        if value.schema != schema:
            raise DataException(f"Struct schemas do not match for {_where(field)}.")
        value.validate()
        return
    classes = _expected_classes(schema)
    is_bool = isinstance(value, bool)
    if not isinstance(value, classes) or (is_bool and bool not in classes):
        raise DataException(
            f"Invalid Java object for schema \"{schema.name or schema.type.name}\" with type "
            f"{schema.type.name}: {type(value).__name__} for {_where(field)}"
        )
    value_: Any = value  # the isinstance over a tuple of classes narrowed value to object
    if schema.type in INT_RANGES and schema.name is None:
        low, high = INT_RANGES[schema.type]
        if not low <= value_ <= high:
            raise DataException(f"Value {value} out of range for schema type {schema.type.name} for {_where(field)}")
    elif schema.name == DATE_NAME and isinstance(value_, datetime.datetime):
        if value_.time() != datetime.time(0):
            raise DataException("Kafka Connect Date type should not have any time fields set to non-zero values.")
    elif schema.type == Type.ARRAY:
        for item in value_:
            validate_value(schema.value_schema, item, field)
    elif schema.type == Type.MAP:
        for k, v in value_.items():
            validate_value(schema.key_schema, k, field)
            validate_value(schema.value_schema, v, field)


def _where(field: str | None) -> str:
    return f'field: "{field}"' if field is not None else "value"


class Struct:
    """A structured value: one value per field of a STRUCT schema (Kafka's ``Struct``).

    ``put`` checks each value against its field's schema; ``validate`` checks that every required
    field is set. ``get`` gives a field's default when it holds nothing.
    """

    __slots__ = ("_schema", "_values")

    def __init__(self, schema: Any):
        if not isinstance(schema, Schema) and hasattr(schema, "build"):
            schema = schema.build()  # a SchemaBuilder
        if not isinstance(schema, Schema) or schema.type != Type.STRUCT:
            raise DataException("Not a struct schema: " + repr(schema))
        self._schema: Schema = schema
        self._values: list[Any] = [None] * len(schema.fields())

    @classmethod
    def from_checked_values(cls, schema: Schema, values: list[Any]) -> Struct:
        """A struct of ``schema`` holding ``values`` (one per field, in field order) as they are:
        for callers that have checked each value against its field's schema already."""
        struct = cls.__new__(cls)
        struct._schema = schema
        struct._values = values
        return struct

    @property
    def schema(self) -> Schema:
        return self._schema

    def values_by_index(self) -> list[Any]:
        """The fields' values as held (no defaults filled in), in field order; do not modify."""
        return self._values

    def _lookup(self, field: str | Field) -> Field:
        if isinstance(field, Field):
            known = self._schema.field(field.name)
            if known is not field and known != field:
                raise DataException(f"Field not a member of struct schema: {field.name}")
            return field
        found = self._schema.field(field)
        if found is None:
            raise DataException(f"{field} is not a valid field name")
        return found

    def put(self, field: str | Field, value: Any) -> Struct:
        """Set a field (by name or ``Field``) to ``value`` after checking it; returns self to chain."""
        found = self._lookup(field)
        validate_value(found.schema, value, found.name)
        self._values[found.index] = value
        return self

    def get(self, field: str | Field) -> Any:
        """The field's value, or its schema's default when it holds none."""
        found = self._lookup(field)
        value = self._values[found.index]
        return found.schema.default_value if value is None else value

    def get_without_default(self, field: str | Field) -> Any:
        return self._values[self._lookup(field).index]

    def validate(self) -> None:
        """Raise ``DataException`` if a required field without a default holds nothing."""
        for field in self._schema.fields():
            value = self._values[field.index]
            if value is None and (field.schema.is_optional or field.schema.default_value is not None):
                continue
            validate_value(field.schema, value, field.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self._schema == other._schema and self._values == other._values

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = [f"{f.name}={v}" for f, v in zip(self._schema.fields(), self._values, strict=True) if v is not None]
        return "Struct{" + ",".join(parts) + "}"


class SchemaAndValue:
    """A value with its schema (either may be None), as converters return them."""

    __slots__ = ("schema", "value")

    NULL: SchemaAndValue

    def __init__(self, schema: Schema | None, value: Any):
        self.schema = schema
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SchemaAndValue):
            return NotImplemented
        return self.schema == other.schema and self.value == other.value

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self):
        return iter((self.schema, self.value))

    def __repr__(self) -> str:
        return f"SchemaAndValue{{schema={self.schema}, value={self.value!r}}}"


SchemaAndValue.NULL = SchemaAndValue(None, None)
