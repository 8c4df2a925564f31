"""Registry schemas as Spark types: what a topic's records become as DataFrame columns.

The mappings follow Spark's own connectors (``from_avro``, ``from_protobuf``):

* Avro: primitives to their Spark types, ``enum`` to string, ``fixed`` to binary, records
  to structs, arrays, maps (string keys), a union with ``null`` and one other branch to that
  type (nullable), a union of several non-null branches to ``struct<member0, member1, …>``
  (one set, the others null); logical types ``decimal`` → decimal(p, s), ``date`` → date,
  ``timestamp-millis``/``-micros`` → timestamp, ``local-timestamp-*`` → timestamp_ntz,
  ``uuid`` → string. A field is nullable only when its type admits null.
* JSON Schema: ``object`` with ``properties`` → struct (local ``$ref`` pointers followed),
  ``array`` → array, ``integer`` → long, ``number`` → double, ``string`` (``format: date``
  → date, ``date-time`` → timestamp) → string, ``boolean``; a type list with ``null`` or
  ``anyOf``/``oneOf`` of one type and null → that type; an object with only
  ``additionalProperties`` → map; anything else → string holding the JSON text.
  Every JSON field is nullable (a missing field reads as null).
* Protobuf: by the message's descriptor: 32-bit integers → int, 64-bit and uint32 → long,
  float, double, bool, string, bytes → binary, enums → string, messages → structs,
  ``repeated`` → array, ``map<k, v>`` → map, ``google.protobuf.Timestamp`` → timestamp.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)


class UnsupportedSchemaError(ValueError):
    """A schema that has no Spark type (a recursive type, a map with non-string keys…)."""


# -- Avro ------------------------------------------------------------------------------------------

_AVRO_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


def avro_to_spark(schema, named: dict | None = None) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema given as its JSON (``named``: full name →
    definition of the named types it may refer to, e.g. from references; the types this schema
    defines are added to it)."""
    return _AvroMapper(named if named is not None else {}).convert(schema, None, ())


class _AvroMapper:
    def __init__(self, named: dict):
        self.named = named

    def convert(self, node, namespace: str | None, stack: tuple[str, ...]) -> tuple[DataType, bool]:
        if isinstance(node, list):
            return self._union(node, namespace, stack)
        if isinstance(node, str):
            if node == "null":
                raise UnsupportedSchemaError("a bare null type has no Spark column type")
            if node in _AVRO_PRIMITIVES:
                return _AVRO_PRIMITIVES[node], False
            full = node if "." in node or not namespace else f"{namespace}.{node}"
            definition = self.named.get(full) or self.named.get(node)
            if definition is None:
                raise UnsupportedSchemaError(f"unknown Avro type {node!r}")
            if full in stack:
                raise UnsupportedSchemaError(f"the recursive Avro type {full} has no Spark type")
            return self.convert(definition, full.rpartition(".")[0] or None, stack)
        if not isinstance(node, dict):
            raise UnsupportedSchemaError(f"not an Avro schema: {node!r}")
        kind = node.get("type")
        logical = node.get("logicalType")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return DecimalType(int(node["precision"]), int(node.get("scale", 0))), False
        if logical == "date" and kind == "int":
            return DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return TimestampNTZType(), False
        if kind in ("record", "error", "enum", "fixed"):
            full = _full_name(node["name"], node.get("namespace", namespace))
            self.named[full] = node
            if kind == "enum":
                return StringType(), False
            if kind == "fixed":
                return BinaryType(), False
            inner = full.rpartition(".")[0] or None
            fields = []
            for f in node["fields"]:
                dtype, nullable = self.convert(f["type"], inner, (*stack, full))
                fields.append(StructField(f["name"], dtype, nullable))
            return StructType(fields), False
        if kind == "array":
            dtype, nullable = self.convert(node["items"], namespace, stack)
            return ArrayType(dtype, nullable), False
        if kind == "map":
            dtype, nullable = self.convert(node["values"], namespace, stack)
            return MapType(StringType(), dtype, nullable), False
        return self.convert(kind, namespace, stack)

    def _union(self, branches: list, namespace, stack) -> tuple[DataType, bool]:
        others = [b for b in branches if b != "null"]
        nullable = len(others) < len(branches)
        if not others:
            raise UnsupportedSchemaError("a union of null alone has no Spark column type")
        if len(others) == 1:
            return self.convert(others[0], namespace, stack)[0], nullable
        members = [
            StructField(f"member{i}", self.convert(b, namespace, stack)[0], True) for i, b in enumerate(others)
        ]
        return StructType(members), nullable


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def avro_union_branches(branches: list) -> list:
    """The non-null branches of a union, in the order ``struct<member0, …>`` gives them."""
    return [b for b in branches if b != "null"]


# -- JSON Schema -----------------------------------------------------------------------------------


def json_schema_to_spark(schema) -> DataType:
    """The Spark type of a JSON Schema (given as its parsed JSON)."""
    return _json_type(schema, schema, ())


def _follow_ref(node: dict, root) -> dict:
    ref = node["$ref"]
    if not ref.startswith("#"):
        raise UnsupportedSchemaError(f"$ref {ref!r} points outside the schema; only local references are read")
    target = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise UnsupportedSchemaError(f"$ref {ref!r} points to nothing")
        target = target[part]
    return target


def _json_type(node, root, refs: tuple[str, ...]) -> DataType:
    if not isinstance(node, dict):
        return StringType()
    if "$ref" in node:
        if node["$ref"] in refs:
            raise UnsupportedSchemaError(f"the recursive JSON schema at {node['$ref']} has no Spark type")
        return _json_type(_follow_ref(node, root), root, (*refs, node["$ref"]))
    kinds = node.get("type")
    if kinds is None:
        for key in ("anyOf", "oneOf"):
            options = [o for o in node.get(key, ()) if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(options) == 1:
                return _json_type(options[0], root, refs)
        if "properties" in node:
            kinds = "object"
    if isinstance(kinds, list):
        others = [k for k in kinds if k != "null"]
        kinds = others[0] if len(others) == 1 else None
    if kinds == "object":
        props = node.get("properties") or {}
        if not props and isinstance(node.get("additionalProperties"), dict):
            return MapType(StringType(), _json_type(node["additionalProperties"], root, refs), True)
        return StructType([StructField(name, _json_type(sub, root, refs), True) for name, sub in props.items()])
    if kinds == "array":
        return ArrayType(_json_type(node.get("items", {}), root, refs), True)
    if kinds == "integer":
        return LongType()
    if kinds == "number":
        return DoubleType()
    if kinds == "boolean":
        return BooleanType()
    if kinds == "string":
        fmt = node.get("format")
        if fmt == "date":
            return DateType()
        if fmt == "date-time":
            return TimestampType()
    return StringType()


# -- Protobuf --------------------------------------------------------------------------------------

_PROTO_SCALARS: dict[int, DataType] = {
    1: DoubleType(),  # double
    2: FloatType(),  # float
    3: LongType(),  # int64
    4: LongType(),  # uint64
    5: IntegerType(),  # int32
    6: LongType(),  # fixed64
    7: IntegerType(),  # fixed32 (as Spark does; values over 2^31 wrap)
    8: BooleanType(),  # bool
    9: StringType(),  # string
    12: BinaryType(),  # bytes
    13: LongType(),  # uint32
    14: StringType(),  # enum
    15: IntegerType(),  # sfixed32
    16: LongType(),  # sfixed64
    17: IntegerType(),  # sint32
    18: LongType(),  # sint64
}
TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"


def protobuf_to_spark(descriptor, stack: tuple[str, ...] = ()) -> StructType:
    """The struct of a message (a ``google.protobuf.descriptor.Descriptor``)."""
    if descriptor.full_name in stack:
        raise UnsupportedSchemaError(f"the recursive message {descriptor.full_name} has no Spark type")
    return StructType([
        StructField(f.name, _proto_field_type(f, (*stack, descriptor.full_name)), True) for f in descriptor.fields
    ])


def _proto_field_type(field, stack: tuple[str, ...]) -> DataType:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        key, value = message.fields_by_name["key"], message.fields_by_name["value"]
        return MapType(_proto_single_type(key, stack), _proto_single_type(value, stack), True)
    single = _proto_single_type(field, stack)
    return ArrayType(single, True) if is_repeated(field) else single


def is_repeated(field) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf 7 dropped ``label``; older ones lack this
    return bool(flag) if flag is not None else field.label == 3


def _proto_single_type(field, stack: tuple[str, ...]) -> DataType:
    if field.type in (10, 11):  # group, message
        if field.message_type.full_name == TIMESTAMP_MESSAGE:
            return TimestampType()
        return protobuf_to_spark(field.message_type, stack)
    return _PROTO_SCALARS[field.type]
