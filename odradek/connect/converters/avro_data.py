"""Connect schemas and values <-> Avro schemas and data, in the conventions of Confluent's
``AvroData`` (the Avro converter's translation), so records read the same to its converter.

- INT8/INT16 are Avro ints marked ``"connect.type": "int8"``/``"int16"``; INT32 int, INT64 long,
  FLOAT32 float, FLOAT64 double, BOOLEAN boolean, STRING string, BYTES bytes.
- A struct is a record named after the schema (``ConnectDefault`` in ``io.confluent.connect.avro``
  when it has no name), with ``connect.name``/``connect.version``/``connect.doc``/
  ``connect.parameters`` properties carrying what Avro has no place for.
- Optional means a union with null first (``["null", T]``, default null).
- A map with string keys is an Avro map; any other map an array of ``MapEntry`` records
  (``key``, ``value``).
- Decimal is bytes with ``logicalType: decimal`` (``precision`` from the parameter
  ``connect.decimal.precision``, 64 by default); Date ``date``, Time ``time-millis``,
  Timestamp ``timestamp-millis``.

Reading turns any Avro schema into a Connect one (enums as strings, fixed as bytes, the
connect.* properties honoured). Pure functions; safe from any thread.
"""

from __future__ import annotations

from typing import Any

from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Struct,
    Type,
)
from odradek.connect.errors import DataException
from odradek.connect.logical_types import Date, Decimal, Time, Timestamp

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_RECORD = "ConnectDefault"
MAP_ENTRY = "MapEntry"
DEFAULT_PRECISION = 64  # a Decimal's Avro precision unless its parameter connect.decimal.precision says
PRIMITIVES = {
    Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float", Type.FLOAT64: "double",
    Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes",
}
LOGICAL = {
    DATE_NAME: ("int", "date"),
    TIME_NAME: ("int", "time-millis"),
    TIMESTAMP_NAME: ("long", "timestamp-millis"),
}


class _Names:
    """Record names already given in one Avro schema (Avro refuses a name defined twice)."""

    def __init__(self) -> None:
        self.defined: dict[str, Any] = {}
        self.count = 0


def to_avro_schema(schema: Schema) -> Any:
    """The Avro schema (as JSON data) of a Connect schema."""
    return _to_avro(schema, _Names(), top_level=True)


def _to_avro(schema: Schema, names: _Names, top_level: bool = False) -> Any:
    avro = _non_null(schema, names)
    return ["null", avro] if schema.is_optional else avro


def _connect_props(schema: Schema, avro: dict[str, Any]) -> dict[str, Any]:
    if schema.name is not None:
        avro["connect.name"] = schema.name
    if schema.version is not None:
        avro["connect.version"] = schema.version
    if schema.doc is not None:
        avro["connect.doc"] = schema.doc
    if schema.parameters:
        avro["connect.parameters"] = dict(schema.parameters)
    return avro


def _non_null(schema: Schema, names: _Names) -> Any:
    if schema.name == DECIMAL_NAME:
        scale = Decimal.scale(schema)
        precision = int((schema.parameters or {}).get("connect.decimal.precision", DEFAULT_PRECISION))
        return _connect_props(
            schema, {"type": "bytes", "scale": scale, "precision": precision, "logicalType": "decimal"}
        )
    if schema.name in LOGICAL:
        base, logical = LOGICAL[schema.name]
        return _connect_props(schema, {"type": base, "logicalType": logical})
    if schema.type in (Type.INT8, Type.INT16):
        return _connect_props(schema, {"type": "int", "connect.type": schema.type.value})
    if schema.type in PRIMITIVES:
        plain = PRIMITIVES[schema.type]
        if schema.name or schema.version is not None or schema.doc or schema.parameters:
            return _connect_props(schema, {"type": plain})
        return plain
    if schema.type == Type.ARRAY:
        return {"type": "array", "items": _to_avro(schema.value_schema, names)}
    if schema.type == Type.MAP:
        if schema.key_schema.type == Type.STRING and not schema.key_schema.is_optional:
            return {"type": "map", "values": _to_avro(schema.value_schema, names)}
        entry = {
            "type": "record", "name": MAP_ENTRY, "namespace": NAMESPACE,
            "fields": [
                {"name": "key", "type": _to_avro(schema.key_schema, names)},
                {"name": "value", "type": _to_avro(schema.value_schema, names)},
            ],
        }
        return {"type": "array", "items": _named(entry, names)}
    full_name = schema.name or DEFAULT_RECORD
    namespace, _, name = full_name.rpartition(".")
    record: dict[str, Any] = {"type": "record", "name": name}
    record["namespace"] = namespace or (NAMESPACE if not schema.name else "")
    if not record["namespace"]:
        del record["namespace"]
    if schema.doc is not None:
        record["doc"] = schema.doc
    record["fields"] = [_avro_field(field.name, field.schema, names) for field in schema.fields()]
    return _named(_connect_props(schema, record), names)


def _named(record: dict[str, Any], names: _Names) -> Any:
    full = f"{record.get('namespace', '')}.{record['name']}".lstrip(".")
    if full in names.defined:
        if names.defined[full] == record:
            return full  # the same record again: a reference to it
        names.count += 1
        record = {**record, "name": f"{record['name']}{names.count}"}
        full = f"{record.get('namespace', '')}.{record['name']}".lstrip(".")
    names.defined[full] = record
    return record


def _avro_field(name: str, schema: Schema, names: _Names) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": _to_avro(schema, names)}
    if schema.default_value is not None:
        default = _default_json(schema, schema.default_value)
        if schema.is_optional:
            field["type"] = [field["type"][1], "null"]  # Avro: the default's branch comes first
        field["default"] = default
    elif schema.is_optional:
        field["default"] = None
    return field


def _default_json(schema: Schema, value: Any) -> Any:
    if schema.name == DECIMAL_NAME:
        return Decimal.from_logical(schema, value).decode("latin-1")
    if schema.name == DATE_NAME:
        return Date.from_logical(schema, value)
    if schema.name == TIME_NAME:
        return Time.from_logical(schema, value)
    if schema.name == TIMESTAMP_NAME:
        return Timestamp.from_logical(schema, value)
    if schema.type == Type.BYTES:
        return bytes(value).decode("latin-1")
    if schema.type == Type.STRUCT:
        return {f.name: _default_json(f.schema, value.get(f)) for f in schema.fields() if value.get(f) is not None}
    if schema.type == Type.ARRAY:
        return [_default_json(schema.value_schema, v) for v in value]
    if schema.type == Type.MAP:
        return {k: _default_json(schema.value_schema, v) for k, v in value.items()}
    return value


def to_avro_value(schema: Schema, value: Any) -> Any:
    """The datum fastavro writes for a Connect value (it handles the logical types itself)."""
    if value is None:
        if schema.default_value is not None:
            return to_avro_value(schema, schema.default_value)
        if not schema.is_optional:
            raise DataException(f"Conversion error: null value for a required {schema.type.name} without a default")
        return None
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        return value
    if schema.type == Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataException(f"Expected a Struct for {schema}, got {type(value).__name__}")
        return {f.name: to_avro_value(f.schema, value.get(f)) for f in schema.fields()}
    if schema.type == Type.ARRAY:
        return [to_avro_value(schema.value_schema, v) for v in value]
    if schema.type == Type.MAP:
        if schema.key_schema.type == Type.STRING and not schema.key_schema.is_optional:
            return {k: to_avro_value(schema.value_schema, v) for k, v in value.items()}
        return [
            {"key": to_avro_value(schema.key_schema, k), "value": to_avro_value(schema.value_schema, v)}
            for k, v in value.items()
        ]
    if schema.type == Type.BYTES:
        return bytes(value)
    return value


# -- Avro -> Connect ---------------------------------------------------------------------

def to_connect_schema(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (JSON data, as the registry holds it)."""
    return _to_connect(avro, {}, optional=False)


def _to_connect(avro: Any, named: dict[str, Schema], optional: bool) -> Schema:
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise DataException(f"Avro unions other than [null, T] are not supported: {avro}")
        return _to_connect(branches[0], named, optional=True)
    if isinstance(avro, str):
        if avro in named:
            found = named[avro]
            return found.replace(optional=True) if optional and not found.is_optional else found
        avro = {"type": avro}
    kind = avro["type"]
    if isinstance(kind, (dict, list)):
        return _to_connect(kind, named, optional)
    logical = avro.get("logicalType")
    builder: SchemaBuilder
    named_already = logical in ("decimal", "date", "time-millis", "timestamp-millis")  # the logical builders
    if logical == "decimal" and kind in ("bytes", "fixed"):
        builder = Decimal.builder(int(avro.get("scale", 0)))
        if int(avro.get("precision", DEFAULT_PRECISION)) != DEFAULT_PRECISION:
            builder.parameter("connect.decimal.precision", str(avro["precision"]))
    elif logical == "date" and kind == "int":
        builder = Date.builder()
    elif logical == "time-millis" and kind == "int":
        builder = Time.builder()
    elif logical == "timestamp-millis" and kind == "long":
        builder = Timestamp.builder()
    elif kind == "int":
        builder = SchemaBuilder({"int8": Type.INT8, "int16": Type.INT16}.get(avro.get("connect.type"), Type.INT32))
    elif kind in ("long", "float", "double", "boolean", "string", "bytes"):
        builder = SchemaBuilder(
            {"long": Type.INT64, "float": Type.FLOAT32, "double": Type.FLOAT64, "boolean": Type.BOOLEAN,
             "string": Type.STRING, "bytes": Type.BYTES}[kind]
        )
    elif kind == "enum":
        builder = SchemaBuilder.string()
    elif kind == "fixed":
        builder = SchemaBuilder.bytes()
    elif kind == "array":
        items = avro["items"]
        entry = items if isinstance(items, dict) else None
        if entry and entry.get("type") == "record" and entry.get("name") in (MAP_ENTRY, f"{NAMESPACE}.{MAP_ENTRY}"):
            fields = {f["name"]: f["type"] for f in entry["fields"]}
            builder = SchemaBuilder.map(_to_connect(fields["key"], named, False), _to_connect(fields["value"], named, False))
        else:
            builder = SchemaBuilder.array(_to_connect(items, named, False))
    elif kind == "map":
        builder = SchemaBuilder.map(Schema.STRING_SCHEMA, _to_connect(avro["values"], named, False))
    elif kind == "record":
        builder = SchemaBuilder.struct()
        for field in avro["fields"]:
            field_schema = _to_connect(field["type"], named, False)
            if "default" in field and field["default"] is not None:
                field_schema = field_schema.replace(default_value=_default_connect(field_schema, field["default"]))
            builder.field(field["name"], field_schema)
        full = avro["name"] if "." in avro["name"] else f"{avro.get('namespace', '')}.{avro['name']}".lstrip(".")
        if "connect.name" not in avro and full != f"{NAMESPACE}.{DEFAULT_RECORD}":
            builder.name(full)
            named_already = True
    else:
        raise DataException(f"Unsupported Avro type: {kind}")
    if "connect.name" in avro and not named_already:
        builder.name(avro["connect.name"])
    if "connect.version" in avro and not named_already:
        builder.version(int(avro["connect.version"]))
    if "connect.doc" in avro:
        builder.doc(avro["connect.doc"])
    for key, value in (avro.get("connect.parameters") or {}).items():
        builder.parameter(key, value)
    if optional:
        builder.optional()
    schema = builder.build()
    if kind == "record":
        full = avro["name"] if "." in avro["name"] else f"{avro.get('namespace', '')}.{avro['name']}".lstrip(".")
        named[full] = schema
        named[avro["name"]] = schema
    return schema


def _default_connect(schema: Schema, default: Any) -> Any:
    return to_connect_value(schema, _default_datum(schema, default))


def _default_datum(schema: Schema, default: Any) -> Any:
    if schema.name == DECIMAL_NAME:
        return Decimal.to_logical(schema, default.encode("latin-1"))
    if schema.name == DATE_NAME:
        return Date.to_logical(schema, default)
    if schema.name == TIME_NAME:
        return Time.to_logical(schema, default)
    if schema.name == TIMESTAMP_NAME:
        return Timestamp.to_logical(schema, default)
    if schema.type == Type.BYTES:
        return default.encode("latin-1")
    return default


def to_connect_value(schema: Schema, datum: Any) -> Any:
    """The Connect value of a datum fastavro read under the Avro schema ``schema`` came from."""
    if datum is None:
        return None
    if schema.type == Type.STRUCT:
        struct = Struct(schema)
        for field in schema.fields():
            struct.put(field, to_connect_value(field.schema, datum.get(field.name)))
        return struct
    if schema.type == Type.ARRAY:
        return [to_connect_value(schema.value_schema, v) for v in datum]
    if schema.type == Type.MAP:
        if isinstance(datum, list):
            return {
                to_connect_value(schema.key_schema, e["key"]): to_connect_value(schema.value_schema, e["value"])
                for e in datum
            }
        return {k: to_connect_value(schema.value_schema, v) for k, v in datum.items()}
    return datum
