"""``SchemaBuilder``: builds Connect schemas fluently (Kafka's ``org.apache.kafka.connect.data.SchemaBuilder``),
and ``copy_schema_basics`` (Kafka's ``SchemaUtil.copySchemaBasics``) for transforms that rebuild a schema.

A builder belongs to the code that builds with it; the ``Schema`` it builds is immutable.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from odradek.connect.data_schema import Field, Schema, Type, validate_value
from odradek.connect.errors import DataException, SchemaBuilderException


class SchemaBuilder:
    """Builds a ``Schema`` fluently: ``SchemaBuilder.struct().name("x").field("id", Schema.INT32_SCHEMA).build()``.

    Each setting may be made once (Kafka refuses a second ``name(...)``); ``build()`` checks the
    default value against the schema.
    """

    def __init__(self, type: Type):
        self._type = type
        self._optional: builtins.bool | None = None
        self._default: Any = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None
        self._fields: dict[str, Field] | None = {} if type == Type.STRUCT else None
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    # -- factories
    @classmethod
    def type(cls, type: Type) -> SchemaBuilder:
        return cls(type)

    @classmethod
    def int8(cls) -> SchemaBuilder:
        return cls(Type.INT8)

    @classmethod
    def int16(cls) -> SchemaBuilder:
        return cls(Type.INT16)

    @classmethod
    def int32(cls) -> SchemaBuilder:
        return cls(Type.INT32)

    @classmethod
    def int64(cls) -> SchemaBuilder:
        return cls(Type.INT64)

    @classmethod
    def float32(cls) -> SchemaBuilder:
        return cls(Type.FLOAT32)

    @classmethod
    def float64(cls) -> SchemaBuilder:
        return cls(Type.FLOAT64)

    @classmethod
    def bool(cls) -> SchemaBuilder:
        return cls(Type.BOOLEAN)

    @classmethod
    def string(cls) -> SchemaBuilder:
        return cls(Type.STRING)

    @classmethod
    def bytes(cls) -> SchemaBuilder:
        return cls(Type.BYTES)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if value_schema is None:
            raise SchemaBuilderException("value schema cannot be null.")
        builder = cls(Type.ARRAY)
        builder._value_schema = as_schema(value_schema)
        return builder

    @classmethod
    def map(cls, key_schema: Schema | SchemaBuilder, value_schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if key_schema is None or value_schema is None:
            raise SchemaBuilderException("key schema and value schema cannot be null.")
        builder = cls(Type.MAP)
        builder._key_schema = as_schema(key_schema)
        builder._value_schema = as_schema(value_schema)
        return builder

    # -- settings
    def _check_unset(self, what: str, current: Any, new: Any) -> None:
        if current is not None and current != new:
            raise SchemaBuilderException(f"Invalid SchemaBuilder call: {what} has already been set.")

    def optional(self) -> SchemaBuilder:
        self._check_unset("optional", self._optional, True)
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        self._check_unset("optional", self._optional, False)
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._check_unset("defaultValue", self._default, value)
        try:
            validate_value(self._peek(), value)
        except DataException as e:
            raise SchemaBuilderException(f"Invalid default value: {e}") from e
        self._default = value
        return self

    def name(self, name: str) -> SchemaBuilder:
        self._check_unset("name", self._name, name)
        self._name = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._check_unset("version", self._version, version)
        self._version = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._check_unset("doc", self._doc, doc)
        self._doc = doc
        return self

    def parameter(self, name: str, value: str) -> SchemaBuilder:
        if self._parameters is None:
            self._parameters = {}
        self._parameters[name] = value
        return self

    def parameters(self, parameters: Mapping[str, str]) -> SchemaBuilder:
        if self._parameters is None:
            self._parameters = {}
        self._parameters.update(parameters)
        return self

    def field(self, name: str, schema: Schema | SchemaBuilder) -> SchemaBuilder:
        if self._fields is None:
            raise SchemaBuilderException("Cannot create fields on type " + self._type.name)
        if not name:
            raise SchemaBuilderException("fieldName cannot be null.")
        if schema is None:
            raise SchemaBuilderException("fieldSchema for field " + name + " cannot be null.")
        if name in self._fields:
            raise SchemaBuilderException("Cannot create field because of field name duplication " + name)
        self._fields[name] = Field(name, len(self._fields), as_schema(schema))
        return self

    # -- reading back what was set (a builder is read by transforms copying a schema's basics)
    @property
    def schema_type(self) -> Type:
        return self._type

    def fields(self) -> list[Field]:
        if self._fields is None:
            raise DataException(f"Cannot list fields on non-struct type {self._type.name}")
        return list(self._fields.values())

    def field_named(self, name: str) -> Field | None:
        return None if self._fields is None else self._fields.get(name)

    def _peek(self) -> Schema:
        return Schema(
            self._type,
            optional=self._optional is True,
            name=self._name,
            version=self._version,
            doc=self._doc,
            parameters=self._parameters,
            fields=list(self._fields.values()) if self._fields is not None else None,
            key_schema=self._key_schema,
            value_schema=self._value_schema,
        )

    def build(self) -> Schema:
        return Schema(
            self._type,
            optional=self._optional is True,
            default_value=self._default,
            name=self._name,
            version=self._version,
            doc=self._doc,
            parameters=self._parameters,
            fields=list(self._fields.values()) if self._fields is not None else None,
            key_schema=self._key_schema,
            value_schema=self._value_schema,
        )

    def schema(self) -> Schema:
        return self.build()


def as_schema(schema: Schema | SchemaBuilder) -> Schema:
    """A built schema from either a schema or a builder (Kafka accepts both where a Schema is asked)."""
    return schema.build() if isinstance(schema, SchemaBuilder) else schema


def copy_schema_basics(source: Schema, builder: SchemaBuilder | None = None) -> SchemaBuilder:
    """A builder with ``source``'s name, version, doc and parameters (Kafka's SchemaUtil.copySchemaBasics);
    a new builder of ``source``'s type unless one is given."""
    if builder is None:
        if source.type == Type.ARRAY:
            builder = SchemaBuilder.array(source.value_schema)
        elif source.type == Type.MAP:
            builder = SchemaBuilder.map(source.key_schema, source.value_schema)
        else:
            builder = SchemaBuilder(source.type)
    if source.name is not None:
        builder.name(source.name)
    if source.version is not None:
        builder.version(source.version)
    if source.doc is not None:
        builder.doc(source.doc)
    if source.parameters:
        builder.parameters(source.parameters)
    return builder
