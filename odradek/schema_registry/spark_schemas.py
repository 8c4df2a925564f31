"""Schemas derived from a DataFrame's columns, for the sink to register (Spark's ``to_avro`` rules).

* Avro: a struct becomes a record named by the caller (nested records are named after their
  field, in the parent's namespace, as Spark names them); a nullable column becomes
  ``["null", T]`` with default null, so that adding a nullable column later is a compatible
  change; byte/short/int → int, long → long, decimal(p, s) → bytes with the decimal logical
  type, date → int (date), timestamp → long (timestamp-micros), timestamp_ntz → long
  (local-timestamp-micros), arrays, maps with string keys.
* JSON Schema (draft-07): objects with ``properties`` and ``required`` (the non-nullable
  fields), nullable types as ``[T, "null"]``, dates and timestamps as strings with their
  ``format``, decimals as numbers, binary as base64 strings.
* Protobuf (proto3): a ``FileDescriptorProto`` with one top-level message (structs nested in
  it, maps as map entries), every field optional.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .spark_types import UnsupportedSchemaError

# -- Avro ------------------------------------------------------------------------------------------


def spark_to_avro(dtype: DataType, name: str, namespace: str = "") -> dict | str:
    """The Avro schema (JSON) of a Spark type; ``name`` names the top-level record."""
    return _avro(dtype, name, namespace)


def _avro(dtype: DataType, name: str, namespace: str):
    if isinstance(dtype, StructType):
        fields = []
        inner = f"{namespace}.{name}" if namespace else name
        for f in dtype.fields:
            field_type = _avro(f.dataType, f.name, inner)
            if f.nullable:
                fields.append({"name": f.name, "type": ["null", field_type], "default": None})
            else:
                fields.append({"name": f.name, "type": field_type})
        record: dict = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    if isinstance(dtype, ArrayType):
        items = _avro(dtype.elementType, name, namespace)
        return {"type": "array", "items": ["null", items] if dtype.containsNull else items}
    if isinstance(dtype, MapType):
        if not isinstance(dtype.keyType, StringType):
            raise UnsupportedSchemaError(f"an Avro map needs string keys, not {dtype.keyType.simpleString()}")
        values = _avro(dtype.valueType, name, namespace)
        return {"type": "map", "values": ["null", values] if dtype.valueContainsNull else values}
    if isinstance(dtype, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
    if isinstance(dtype, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(dtype, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dtype, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    for spark_type, avro in _AVRO_SIMPLE:
        if isinstance(dtype, spark_type):
            return avro
    raise UnsupportedSchemaError(f"no Avro type for the Spark type {dtype.simpleString()}")


_AVRO_SIMPLE = (
    (BooleanType, "boolean"),
    (ByteType, "int"),
    (ShortType, "int"),
    (IntegerType, "int"),
    (LongType, "long"),
    (FloatType, "float"),
    (DoubleType, "double"),
    (StringType, "string"),
    (BinaryType, "bytes"),
)

# -- JSON Schema -----------------------------------------------------------------------------------


def spark_to_json_schema(dtype: DataType, title: str | None = None) -> dict:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **_json(dtype)}
    if title:
        schema["title"] = title
    return schema


def _json(dtype: DataType) -> dict:
    if isinstance(dtype, StructType):
        props = {}
        for f in dtype.fields:
            sub = _json(f.dataType)
            props[f.name] = {**sub, "type": [sub["type"], "null"]} if f.nullable else sub
        required = [f.name for f in dtype.fields if not f.nullable]
        out: dict = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        return out
    if isinstance(dtype, ArrayType):
        return {"type": "array", "items": _json(dtype.elementType)}
    if isinstance(dtype, MapType):
        return {"type": "object", "additionalProperties": _json(dtype.valueType)}
    if isinstance(dtype, BooleanType):
        return {"type": "boolean"}
    if isinstance(dtype, ByteType | ShortType | IntegerType | LongType):
        return {"type": "integer"}
    if isinstance(dtype, FloatType | DoubleType | DecimalType):
        return {"type": "number"}
    if isinstance(dtype, DateType):
        return {"type": "string", "format": "date"}
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return {"type": "string", "format": "date-time"}
    if isinstance(dtype, BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    if isinstance(dtype, StringType):
        return {"type": "string"}
    raise UnsupportedSchemaError(f"no JSON Schema type for the Spark type {dtype.simpleString()}")


# -- Protobuf --------------------------------------------------------------------------------------

_F = descriptor_pb2.FieldDescriptorProto
_PROTO_SIMPLE = (
    (BooleanType, _F.TYPE_BOOL),
    (ByteType, _F.TYPE_INT32),
    (ShortType, _F.TYPE_INT32),
    (IntegerType, _F.TYPE_INT32),
    (LongType, _F.TYPE_INT64),
    (FloatType, _F.TYPE_FLOAT),
    (DoubleType, _F.TYPE_DOUBLE),
    (StringType, _F.TYPE_STRING),
    (BinaryType, _F.TYPE_BYTES),
)


def spark_to_protobuf(dtype: StructType, name: str, package: str = "") -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file with the message ``name`` for a struct (``package``: its package)."""
    if not isinstance(dtype, StructType):
        raise UnsupportedSchemaError("a Protobuf value is a message: write a struct column")
    fd = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", package=package, syntax="proto3")
    _message(fd.message_type.add(), dtype, name, f".{package}.{name}" if package else f".{name}")
    return fd


def _message(msg, dtype: StructType, name: str, full: str) -> None:
    msg.name = name
    for number, f in enumerate(dtype.fields, start=1):
        field = msg.field.add(name=f.name, number=number, label=_F.LABEL_OPTIONAL)
        inner = f.dataType
        if isinstance(inner, MapType):
            entry = msg.nested_type.add(name=_camel(f.name) + "Entry")
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL)
            _scalar(key, inner.keyType)
            value = entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL)
            _typed(msg, value, inner.valueType, full, f.name)
            field.label = _F.LABEL_REPEATED
            field.type = _F.TYPE_MESSAGE
            field.type_name = f"{full}.{entry.name}"
            continue
        if isinstance(inner, ArrayType):
            field.label = _F.LABEL_REPEATED
            inner = inner.elementType
        _typed(msg, field, inner, full, f.name)


def _typed(msg, field, dtype: DataType, full: str, field_name: str) -> None:
    if isinstance(dtype, StructType):
        nested_name = _camel(field_name)  # a map's struct values too live in the enclosing message
        _message(msg.nested_type.add(), dtype, nested_name, f"{full}.{nested_name}")
        field.type = _F.TYPE_MESSAGE
        field.type_name = f"{full}.{nested_name}"
        return
    _scalar(field, dtype)


def _scalar(field, dtype: DataType) -> None:
    for spark_type, proto in _PROTO_SIMPLE:
        if isinstance(dtype, spark_type):
            field.type = proto
            return
    raise UnsupportedSchemaError(f"no Protobuf type for the Spark type {dtype.simpleString()} (use a string)")


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_")) or "Value"
