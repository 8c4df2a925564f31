"""Registry-framed bytes to Spark column values and back, for the data source's tasks.

A ``ColumnSchema`` (picklable: it travels from the driver to the tasks) is the schema a
column is read or written with: its format, id, text, the texts of its references and its
Spark type. In a task, ``decoder`` and ``encoder`` turn it into a function over one value;
writers' schemas are fetched by id once per process (``registry_for``), never per record.

Reading goes through schema resolution: Avro with fastavro's reader/writer resolution (the
record's writer schema, by its id, read into the column's schema); JSON by field name
(missing fields null, others ignored); Protobuf by field number (the message is parsed with
the column's descriptor, whatever version wrote it). A value that is not in Confluent's
framing, names an unknown id or does not decode raises ``CorruptValue`` with the reason.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastavro
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from . import protobuf_messages
from .avro_serde import frame, unframe
from .registry_client import RegistryClient
from .registry_errors import RegistryError
from .spark_types import TIMESTAMP_MESSAGE, avro_union_branches, is_repeated

FORMATS = ("avro", "json", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}


class CorruptValue(ValueError):
    """A value that cannot be read as its column's schema (the message says why)."""


@dataclass(frozen=True)
class RegistryAddress:
    url: str
    user_info: str | None = None


@dataclass(frozen=True)
class ColumnSchema:
    """The registered schema a key or value column is read or written with."""

    format: str  # avro | json | protobuf
    schema_id: int
    text: str
    references: tuple[tuple[str, str], ...] = ()  # (reference name, schema text), dependencies first
    message: str | None = None  # Protobuf: the message's full name (None: the first)
    spark_type: DataType = field(default_factory=BinaryType)


_registries: dict[RegistryAddress, RegistryClient] = {}
_registries_lock = threading.Lock()


def registry_for(address: RegistryAddress) -> RegistryClient:
    """This process's client of a registry: its schema cache serves every task the process runs."""
    with _registries_lock:
        client = _registries.get(address)
        if client is None:
            client = _registries[address] = RegistryClient(address.url, user_info=address.user_info)
        return client


def reference_texts(client: RegistryClient, references) -> list[tuple[str, str]]:
    """(name, text) of a schema's references and theirs, dependencies first."""
    out: list[tuple[str, str]] = []
    for ref in references or ():
        subject = urllib.parse.quote(ref["subject"], safe="")
        found = client.request("GET", f"/subjects/{subject}/versions/{ref['version']}")
        for item in reference_texts(client, found.get("references")):
            if item not in out:
                out.append(item)
        out.append((ref["name"], found["schema"]))
    return out


def _writer(client: RegistryClient, schema_id: int, schema_type: str) -> dict:
    """The registry's answer for a record's schema id (the client caches it: one request per id)."""
    try:
        found = client.schema(schema_id)
    except RegistryError as exc:
        if exc.code == 40403:
            raise CorruptValue(f"schema id {schema_id} is not in the registry at {client.url}") from None
        raise
    if found.get("schemaType", "AVRO") != schema_type:
        raise CorruptValue(f"schema id {schema_id} is a {found.get('schemaType', 'AVRO')} schema, not {schema_type}")
    return found


def _unframe(data) -> tuple[int, bytes]:
    if data is None:
        raise CorruptValue("null where a registry-framed value was expected")
    try:
        return unframe(data)
    except ValueError as exc:
        raise CorruptValue(str(exc)) from None


# -- reading ---------------------------------------------------------------------------------------


def decoder(column: ColumnSchema, client: RegistryClient) -> Callable[[bytes], object]:
    """A function from framed bytes to the column's value (Python, as Arrow takes it)."""
    if column.format == "avro":
        return _avro_decoder(column, client)
    if column.format == "json":
        return _json_decoder(column, client)
    return _protobuf_decoder(column, client)


def _avro_named(texts) -> dict:
    named: dict = {}
    for _, text in texts:
        fastavro.parse_schema(json.loads(text), named_schemas=named)
    return named


def _avro_decoder(column: ColumnSchema, client: RegistryClient):
    reader = fastavro.parse_schema(json.loads(column.text), named_schemas=_avro_named(column.references))
    writers: dict[int, Any] = {}
    convert = _avro_converter(json.loads(column.text), column.spark_type)

    def decode(data):
        schema_id, payload = _unframe(data)
        writer = writers.get(schema_id)
        if writer is None:
            found = _writer(client, schema_id, "AVRO")
            named = _avro_named(reference_texts(client, found.get("references")))
            writer = writers[schema_id] = fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)
        try:
            return convert(fastavro.schemaless_reader(io.BytesIO(payload), writer, reader))
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for bad bytes or schemas
            raise CorruptValue(f"cannot read it with schema id {schema_id}: {type(exc).__name__}: {exc}") from None

    return decode


def _avro_converter(node, dtype: DataType) -> Callable:
    """Reshapes fastavro's output where Spark's type differs: unions of several types become
    ``struct<member0, …>`` (the branch is told by the Python type of the value)."""
    identity = _identity
    if isinstance(node, dict) and node.get("type") in ("record", "error") and isinstance(dtype, StructType):
        parts = [(f["name"], _avro_converter(f["type"], sf.dataType)) for f, sf in zip(node["fields"], dtype.fields, strict=True)]
        if all(c is identity for _, c in parts):
            return identity
        return lambda v: None if v is None else {name: c(v.get(name)) for name, c in parts}
    if isinstance(node, dict) and node.get("type") == "array" and isinstance(dtype, ArrayType):
        inner = _avro_converter(node["items"], dtype.elementType)
        return identity if inner is identity else (lambda v: None if v is None else [inner(x) for x in v])
    if isinstance(node, dict) and node.get("type") == "map" and isinstance(dtype, MapType):
        inner = _avro_converter(node["values"], dtype.valueType)
        return identity if inner is identity else (lambda v: None if v is None else {k: inner(x) for k, x in v.items()})
    if isinstance(node, list):
        branches = avro_union_branches(node)
        if len(branches) == 1:
            return _avro_converter(branches[0], dtype)
        fields = dtype.fields if isinstance(dtype, StructType) else []
        members = [(sf.name, _avro_converter(b, sf.dataType), sf.dataType) for b, sf in zip(branches, fields, strict=True)]

        def pick(v):
            if v is None:
                return None
            for name, convert, member_type in members:
                if _fits(v, member_type):
                    return {name: convert(v)}
            return None

        return pick
    return identity


def _identity(v):
    return v


def _fits(value, dtype: DataType) -> bool:
    if isinstance(dtype, BooleanType):
        return isinstance(value, bool)
    if isinstance(dtype, IntegerType | LongType):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(dtype, FloatType | DoubleType):
        return isinstance(value, float)
    if isinstance(dtype, StringType):
        return isinstance(value, str)
    if isinstance(dtype, BinaryType):
        return isinstance(value, bytes)
    if isinstance(dtype, ArrayType):
        return isinstance(value, list)
    if isinstance(dtype, StructType | MapType):
        return isinstance(value, dict)
    return True


def _json_decoder(column: ColumnSchema, client: RegistryClient):
    convert = _rebuilt(column.spark_type, _json_leaf)

    def decode(data):
        schema_id, payload = _unframe(data)
        _writer(client, schema_id, "JSON")
        try:
            return convert(json.loads(payload))
        except (ValueError, TypeError, AttributeError) as exc:
            raise CorruptValue(f"not JSON of the schema: {exc}") from None

    return decode


def _rebuilt(dtype: DataType, leaf: Callable[[DataType], Callable]) -> Callable:
    """A converter that rebuilds structs, arrays and maps (dicts, or Arrow's key/value pairs)
    and applies ``leaf(type)`` to the other non-null values."""
    if isinstance(dtype, StructType):
        parts = [(f.name, _rebuilt(f.dataType, leaf)) for f in dtype.fields]
        return lambda v: None if v is None else {name: c(v.get(name)) for name, c in parts}
    if isinstance(dtype, ArrayType):
        inner = _rebuilt(dtype.elementType, leaf)
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(dtype, MapType):
        inner = _rebuilt(dtype.valueType, leaf)
        return lambda v: None if v is None else {k: inner(x) for k, x in (v.items() if isinstance(v, dict) else v)}
    convert = leaf(dtype)
    return lambda v: None if v is None else convert(v)


def _json_leaf(dtype: DataType) -> Callable:
    """JSON's values as the Spark type (dates and timestamps are strings in JSON)."""
    if isinstance(dtype, StringType):
        return lambda v: v if isinstance(v, str) else json.dumps(v)
    if isinstance(dtype, LongType):
        return int
    if isinstance(dtype, DoubleType):
        return float
    if isinstance(dtype, DateType):
        return datetime.date.fromisoformat
    if isinstance(dtype, TimestampType):
        return lambda v: _utc(datetime.datetime.fromisoformat(v.replace("Z", "+00:00")))
    return _identity


def _utc(moment: datetime.datetime) -> datetime.datetime:
    return moment.replace(tzinfo=datetime.UTC) if moment.tzinfo is None else moment


def protobuf_class(column: ColumnSchema):
    """The message class of a Protobuf column, its references in the same pool."""
    files = [protobuf_messages.file_descriptor(text, name) for name, text in column.references]
    files.append(protobuf_messages.file_descriptor(column.text, f"schema-{column.schema_id}.proto"))
    return protobuf_messages.message_class(files, column.message)


def _protobuf_decoder(column: ColumnSchema, client: RegistryClient):
    cls = protobuf_class(column)
    convert = _protobuf_converter(cls.DESCRIPTOR)

    def decode(data):
        schema_id, payload = _unframe(data)
        _writer(client, schema_id, "PROTOBUF")
        try:
            message = cls.FromString(protobuf_messages.skip_indexes(payload))
        except Exception as exc:  # noqa: BLE001 - DecodeError and ValueError for bad bytes
            raise CorruptValue(f"not a {cls.DESCRIPTOR.full_name} message: {exc}") from None
        return convert(message)

    return decode


def _protobuf_converter(descriptor) -> Callable:
    """Message → dict of the struct's values, by the message's descriptor."""
    if descriptor.full_name == TIMESTAMP_MESSAGE:
        return lambda m: datetime.datetime.fromtimestamp(m.seconds, datetime.UTC) + datetime.timedelta(
            microseconds=m.nanos // 1000
        )
    parts: list[tuple[str, bool, Callable[[Any], Any]]] = []
    for f in descriptor.fields:
        single = _protobuf_single(f)
        message = f.message_type
        if message is not None and message.GetOptions().map_entry:
            parts.append((f.name, False, _each_value(_protobuf_single(message.fields_by_name["value"]))))
        elif is_repeated(f):
            parts.append((f.name, False, _each_item(single)))
        else:  # a singular message field is null when not set
            parts.append((f.name, message is not None, single))

    def convert(m):
        return {
            name: None if optional and not m.HasField(name) else convert_one(getattr(m, name))
            for name, optional, convert_one in parts
        }

    return convert


def _each_value(convert: Callable) -> Callable:
    return lambda mapping: {k: convert(x) for k, x in mapping.items()}


def _each_item(convert: Callable) -> Callable:
    return lambda items: [convert(x) for x in items]


def _protobuf_single(f) -> Callable:
    if f.message_type is not None:
        return _protobuf_converter(f.message_type)
    if f.enum_type is not None:
        enum = f.enum_type
        return lambda v: enum.values_by_number[v].name if v in enum.values_by_number else str(v)
    return _identity


# -- writing ---------------------------------------------------------------------------------------


def encoder(column: ColumnSchema) -> Callable[[object], bytes]:
    """A function from a row's value (Arrow's Python form: maps as key/value pairs) to framed bytes."""
    encode = _format_encoder(column)
    as_python = _rebuilt(column.spark_type, lambda dtype: _identity)
    return lambda value: encode(as_python(value))


def _format_encoder(column: ColumnSchema) -> Callable[[object], bytes]:
    if column.format == "avro":
        parsed = fastavro.parse_schema(json.loads(column.text), named_schemas=_avro_named(column.references))

        def encode_avro(value) -> bytes:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, value)
            return frame(column.schema_id, out.getvalue())

        return encode_avro
    if column.format == "json":
        return lambda value: frame(column.schema_id, json.dumps(value, default=_json_default).encode())
    cls = protobuf_class(column)
    prefix = frame(column.schema_id, protobuf_messages.encode_indexes(protobuf_messages.message_indexes(cls.DESCRIPTOR)))

    def encode_protobuf(value) -> bytes:
        message = cls()
        _fill(message, value)
        return prefix + message.SerializeToString()

    return encode_protobuf


def _json_default(value):
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _fill(message, value: dict) -> None:
    for f in message.DESCRIPTOR.fields:
        v = value.get(f.name)
        if v is None:
            continue
        target = getattr(message, f.name)
        entry = f.message_type
        if entry is not None and entry.GetOptions().map_entry:
            items = v.items() if isinstance(v, dict) else v
            if entry.fields_by_name["value"].message_type is None:
                target.update(dict(items))
            else:
                for k, x in items:
                    _fill(target[k], x)
        elif is_repeated(f):
            if entry is None:
                target.extend(v)
            else:
                for x in v:
                    _fill(target.add(), x)
        elif entry is not None:
            _fill(target, v)
        else:
            setattr(message, f.name, v)

