"""Which columns a sink record fills, and with what: Confluent's ``FieldsMetadata`` per ``pk.mode``.

- ``none``: no key columns; every value field is a column.
- ``kafka``: key columns ``__connect_topic``, ``__connect_partition``, ``__connect_offset`` (or
  the three ``pk.fields``), filled from where the record was read.
- ``record_key``: a primitive key fills one column (``pk.fields`` or ``__connect_key``); a struct
  key fills the ``pk.fields`` it names (all its fields by default).
- ``record_value``: the ``pk.fields`` of the value (all its fields by default) are the key.

Value columns are the value's fields that are not key columns, narrowed by ``fields.whitelist``.
A ``RowLayout`` is computed once per (key schema, value schema) and reused for every record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from odradek.connect.data import Schema, Type
from odradek.connect.errors import ConnectException
from odradek.connect.records import SinkRecord

KAFKA_COLUMNS = ("__connect_topic", "__connect_partition", "__connect_offset")
KAFKA_SCHEMAS = (Schema.STRING_SCHEMA, Schema.INT32_SCHEMA, Schema.INT64_SCHEMA)
DEFAULT_KEY_COLUMN = "__connect_key"


@dataclass(frozen=True)
class RowLayout:
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    schemas: dict[str, Schema]  # column → the schema of the values it holds
    pk_mode: str
    # Where the columns sit in structs of the schemas the layout was made for: a struct of that
    # very schema object is read by position (None: by name, as some field has a default).
    key_struct: tuple[Schema, tuple[int, ...]] | None = field(default=None, compare=False, repr=False)
    value_struct: tuple[Schema, tuple[int, ...]] | None = field(default=None, compare=False, repr=False)

    def key_values(self, record: SinkRecord) -> tuple:
        if self.pk_mode == "kafka":
            return (record.topic, record.kafka_partition, record.kafka_offset)
        if self.pk_mode == "record_key":
            if record.key_schema is not None and record.key_schema.type == Type.STRUCT:
                return _read(record.key, self.key_columns, self.key_struct)
            return (record.key,)
        if self.pk_mode == "record_value":
            return _read(record.value, self.key_columns, self.key_struct)
        return ()

    def value_values(self, record: SinkRecord) -> tuple:
        return _read(record.value, self.value_columns, self.value_struct)

    def rows(self, records: list[SinkRecord], values: bool = True) -> list[tuple]:
        """The key values (and, with ``values``, the value values after them) of each record, all
        of the schemas this layout was made for. Struct keys and values of those very schema
        objects (what converters hand out) are read by position, a whole run in one comprehension."""
        keys, fields = self.key_struct, self.value_struct
        if self.pk_mode == "record_key" and keys is not None and (fields is not None or not values):
            key_of = _picker(keys[1])
            if not values:
                if all(r.key.schema is keys[0] for r in records):
                    return [key_of(r.key.values_by_index()) for r in records]
            else:
                assert fields is not None
                value_of = _picker(fields[1])
                if all(r.key.schema is keys[0] and r.value.schema is fields[0] for r in records):
                    return [key_of(r.key.values_by_index()) + value_of(r.value.values_by_index()) for r in records]
        if values:
            return [self.key_values(r) + self.value_values(r) for r in records]
        return [self.key_values(r) for r in records]


def _picker(positions: tuple[int, ...]) -> Callable[[list[Any]], tuple]:
    """A function taking the items at ``positions`` of a list, as a tuple (itemgetter does it in C)."""
    if len(positions) == 1:
        (only,) = positions
        return lambda held: (held[only],)
    return itemgetter(*positions) if positions else (lambda held: ())


def _read(struct: Any, columns: tuple[str, ...], positions: tuple[Schema, tuple[int, ...]] | None) -> tuple:
    if positions is not None and struct.schema is positions[0]:
        held = struct.values_by_index()
        return tuple([held[i] for i in positions[1]])
    return tuple(struct.get(c) for c in columns)


def _positions(schema: Schema | None, columns: list[str]) -> tuple[Schema, tuple[int, ...]] | None:
    if schema is None or schema.type != Type.STRUCT:
        return None
    fields = [schema.field(c) for c in columns]
    if any(f is None or f.schema.default_value is not None for f in fields):
        return None
    return schema, tuple(f.index for f in fields if f is not None)


def layout_for(record: SinkRecord, pk_mode: str, pk_fields: list[str], whitelist: list[str]) -> RowLayout:
    value_schema = record.value_schema
    if record.value is not None and (value_schema is None or value_schema.type != Type.STRUCT):
        raise ConnectException(
            f"the JDBC sink needs struct values with schemas; the record at {_where(record)} has "
            f"{'no schema' if value_schema is None else 'a ' + value_schema.type.name + ' schema'} "
            "(use a converter that carries schemas, such as JsonConverter with schemas.enable=true)"
        )
    schemas: dict[str, Schema] = {}
    keys: list[str] = []
    if pk_mode == "kafka":
        keys = list(pk_fields or KAFKA_COLUMNS)
        schemas.update(zip(keys, KAFKA_SCHEMAS, strict=True))
    elif pk_mode == "record_key":
        keys = _key_columns(record, pk_fields, schemas)
    elif pk_mode == "record_value":
        if value_schema is None:
            raise ConnectException(
                f"pk.mode=record_value needs a value; the record at {_where(record)} has none"
            )
        fields = {f.name: f.schema for f in value_schema.fields()}
        keys = list(pk_fields or fields)
        missing = [k for k in keys if k not in fields]
        if missing:
            raise ConnectException(f"pk.fields {missing} are not fields of the value at {_where(record)}")
        schemas.update((k, fields[k]) for k in keys)
    values: list[str] = []
    if value_schema is not None:
        for field in value_schema.fields():
            if field.name in schemas or (whitelist and field.name not in whitelist):
                continue
            values.append(field.name)
            schemas[field.name] = field.schema
    key_holder = record.key_schema if pk_mode == "record_key" else value_schema if pk_mode == "record_value" else None
    return RowLayout(tuple(keys), tuple(values), schemas, pk_mode, _positions(key_holder, keys),
                     _positions(value_schema, values))


def _key_columns(record: SinkRecord, pk_fields: list[str], schemas: dict[str, Schema]) -> list[str]:
    key_schema = record.key_schema
    if key_schema is None:
        raise ConnectException(
            f"pk.mode=record_key needs keys with schemas; the record at {_where(record)} has "
            f"{'no key' if record.key is None else 'a key without schema'}"
        )
    if key_schema.type == Type.STRUCT:
        fields = {f.name: f.schema for f in key_schema.fields()}
        keys = list(pk_fields or fields)
        missing = [k for k in keys if k not in fields]
        if missing:
            raise ConnectException(f"pk.fields {missing} are not fields of the key at {_where(record)}")
        schemas.update((k, fields[k]) for k in keys)
        return keys
    if len(pk_fields) > 1:
        raise ConnectException(f"a primitive key fills one column, but pk.fields names {len(pk_fields)}")
    name = pk_fields[0] if pk_fields else DEFAULT_KEY_COLUMN
    schemas[name] = key_schema
    return [name]


def _where(record: Any) -> str:
    return f"{record.topic}-{record.kafka_partition}@{record.kafka_offset}"
