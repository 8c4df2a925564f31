"""``JsonConverter`` (Kafka's ``org.apache.kafka.connect.json.JsonConverter``): Connect data as JSON.

With ``schemas.enable=true`` (the default) every key or value is Kafka's envelope,
``{"schema":{...},"payload":...}``, byte for byte as Kafka writes it: the schema object lists
``type``, then ``items`` / ``keys`` and ``values`` / ``fields`` (each field's schema followed by
``"field":"<name>"``), then ``optional``, ``name``, ``version``, ``doc``, ``parameters`` and
``default``. Type names: boolean, int8, int16, int32, int64, float, double, bytes, string, array,
map, struct. Bytes are base64; maps with string keys are objects, other maps arrays of
``[key, value]`` pairs; Decimal is base64 of its unscaled bytes or, with
``decimal.format=NUMERIC``, a JSON number; Date, Time and Timestamp are their integers.

With ``schemas.enable=false`` the payload is written alone and read back without a schema
(integers as INT64, fractions as FLOAT64, objects as maps).

One instance per connector slot, called from the task that owns it; its schema caches are its own.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from odradek.config_def import BOOL, INT, STR, AtLeast, ConfigDef, OneOf, config_table
from odradek.connect.converters.converter_base import Converter, HeaderConverter
from odradek.connect.converters.json_compiled import (
    Decoder,
    Encoder,
    build_decoder,
    build_encoder,
    build_schemaless_encoder,
)
from odradek.connect.converters.json_text import JsonNumber, binary, dumps, loads, scan_value
from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import (
    DATE_NAME,
    DECIMAL_NAME,
    INT_RANGES,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
)
from odradek.connect.errors import DataException
from odradek.connect.logical_types import Date, Decimal, Time, Timestamp
from odradek.connect.plugin_config import parse_plugin_config
from odradek.connect.records import Headers

JSON_CONVERTER_CONFIG = config_table(
    ConfigDef("schemas.enable", BOOL, True, doc="Include schemas within each of the serialized values and keys."),
    ConfigDef(
        "schemas.cache.size", INT, 1000, AtLeast(0),
        doc="The maximum number of schemas that can be cached in this converter instance.",
    ),
    ConfigDef(
        "decimal.format", STR, "BASE64", OneOf("BASE64", "NUMERIC"),
        doc="Controls which format this converter will serialize decimals in: BASE64 (default) or NUMERIC.",
    ),
    ConfigDef(
        "replace.null.with.default", BOOL, True,
        doc="Whether a null field with a default value is written and read as that default (true) or as null.",
    ),
    ConfigDef("converter.type", STR, None, doc="key, value or header: set by the worker."),
)

TYPE_NAMES = {
    Type.BOOLEAN: "boolean",
    Type.INT8: "int8",
    Type.INT16: "int16",
    Type.INT32: "int32",
    Type.INT64: "int64",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BYTES: "bytes",
    Type.STRING: "string",
    Type.ARRAY: "array",
    Type.MAP: "map",
    Type.STRUCT: "struct",
}
TYPES_BY_NAME = {name: type for type, name in TYPE_NAMES.items()}

ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)


class _LruCache:
    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class JsonConverter(Converter, HeaderConverter):
    """Connect data <-> JSON, with Kafka's schema envelope when ``schemas.enable`` is true."""

    def __init__(self) -> None:
        self.configure({}, False)

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        settings = parse_plugin_config(JSON_CONVERTER_CONFIG, configs)
        self.schemas_enabled: bool = settings["schemas.enable"]
        self.numeric_decimals = settings["decimal.format"] == "NUMERIC"
        self.replace_null_with_default: bool = settings["replace.null.with.default"]
        cache_size = settings["schemas.cache.size"]
        self._to_json_schemas = _LruCache(cache_size)
        self._schema_texts = _LruCache(cache_size)
        self._to_connect_schemas = _LruCache(cache_size)
        # A schema's text as it appeared in an envelope -> (schema, decoder): see _known_envelope.
        self._envelopes = _LruCache(cache_size)
        # The last envelope read from that cache: its text up to the payload, the schema, the decoder.
        self._last_envelope: tuple[str, Schema, Decoder] | None = None
        # Per-schema writers and decoders, keyed by the schema object's identity (the entry keeps
        # the schema alive, so its id cannot be reused while the entry exists).
        self._writers = _LruCache(cache_size)
        self._decoders = _LruCache(cache_size)
        self._schemaless_encoder = build_schemaless_encoder(
            lambda value: dumps(self.convert_to_json(None, value)), self._encoder
        )

    def config_def(self) -> dict[str, ConfigDef]:
        return JSON_CONVERTER_CONFIG

    # -- Connect -> bytes
    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            payload = self._schemaless_encoder(value)
            return (('{"schema":null,"payload":' + payload + "}") if self.schemas_enabled else payload).encode()
        _, encode, head, tail = self._writer(schema)
        return (head + encode(value) + tail).encode()

    def _writer(self, schema: Schema) -> tuple[Schema, Encoder, str, str]:
        """The schema's encoder, with the envelope's text around the payload (written once per schema)."""
        entry = self._writers.get(id(schema))
        if entry is None or entry[0] is not schema:
            encoder = build_encoder(schema, self._general_to_text, self.numeric_decimals)
            if self.schemas_enabled:
                entry = (schema, encoder, '{"schema":' + self._schema_text(schema) + ',"payload":', "}")
            else:
                entry = (schema, encoder, "", "")
            self._writers.put(id(schema), entry)
        return entry

    def _encoder(self, schema: Schema) -> Encoder:
        return self._writer(schema)[1]

    def _general_to_text(self, schema: Schema, value: Any) -> str:
        return dumps(self.convert_to_json(schema, value))

    def _decoder(self, schema: Schema) -> Decoder:
        entry = self._decoders.get(id(schema))
        if entry is None or entry[0] is not schema:
            entry = (schema, build_decoder(schema, self.convert_to_connect))
            self._decoders.put(id(schema), entry)
        return entry[1]

    def _decode(self, schema: Schema | None, node: Any) -> Any:
        return self.convert_to_connect(None, node) if schema is None else self._decoder(schema)(node)

    def _schema_text(self, schema: Schema | None) -> str:
        if schema is None:
            return "null"
        text = self._schema_texts.get(schema)
        if text is None:
            text = dumps(self.as_json_schema(schema))
            self._schema_texts.put(schema, text)
        return text

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """The JSON form of ``schema`` (a dict in Kafka's key order), cached."""
        if schema is None:
            return None
        cached = self._to_json_schemas.get(schema)
        if cached is not None:
            return cached
        node: dict[str, Any] = {"type": TYPE_NAMES[schema.type]}
        if schema.type == Type.ARRAY:
            node["items"] = self.as_json_schema(schema.value_schema)
        elif schema.type == Type.MAP:
            node["keys"] = self.as_json_schema(schema.key_schema)
            node["values"] = self.as_json_schema(schema.value_schema)
        elif schema.type == Type.STRUCT:
            node["fields"] = [
                {**(self.as_json_schema(field.schema) or {}), "field": field.name} for field in schema.fields()
            ]
        node["optional"] = schema.is_optional
        if schema.name is not None:
            node["name"] = schema.name
        if schema.version is not None:
            node["version"] = schema.version
        if schema.doc is not None:
            node["doc"] = schema.doc
        if schema.parameters is not None:
            node["parameters"] = dict(schema.parameters)
        if schema.default_value is not None:
            node["default"] = self.convert_to_json(schema, schema.default_value)
        self._to_json_schemas.put(schema, node)
        return node

    def convert_to_json(self, schema: Schema | None, value: Any) -> Any:
        """A JSON node (dicts, lists, str, int, bool, None, JsonNumber) for a Connect value."""
        if value is None:
            if schema is None:
                return None
            if schema.default_value is not None and self.replace_null_with_default:
                return self.convert_to_json(schema, schema.default_value)
            if schema.is_optional:
                return None
            raise DataException("Conversion error: null value for field that is required and has no default value")
        if schema is not None and schema.name in _LOGICAL_NAMES:
            return self._logical_to_json(schema, value)
        type = schema.type if schema is not None else _schemaless_type(value)
        if type is None:
            raise DataException(f"Python type {value.__class__.__name__} does not have corresponding schema type.")
        if type == Type.STRUCT and schema is None:
            schema = value.schema
        return self._typed_to_json(type, schema, value)

    def _typed_to_json(self, type: Type, schema: Schema | None, value: Any) -> Any:
        mismatch = TypeMismatchException("Invalid type for {}: {}", type, value.__class__.__name__)
        if type in INT_RANGES:
            if not isinstance(value, int) or isinstance(value, bool):
                raise mismatch
            return value
        if type in (Type.FLOAT32, Type.FLOAT64):
            if not isinstance(value, (float, int)) or isinstance(value, bool):
                raise mismatch
            return JsonNumber.float32(float(value)) if type == Type.FLOAT32 else JsonNumber.double(float(value))
        if type == Type.BOOLEAN:
            if not isinstance(value, bool):
                raise mismatch
            return value
        if type == Type.STRING:
            if not isinstance(value, str):
                raise mismatch
            return value
        if type == Type.BYTES:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise mismatch
            return binary(bytes(value))
        if type == Type.ARRAY:
            if not isinstance(value, (list, tuple)):
                raise mismatch
            item_schema = schema.value_schema if schema is not None else None
            return [self.convert_to_json(item_schema, item) for item in value]
        if type == Type.MAP:
            if not isinstance(value, dict):
                raise mismatch
            key_schema = schema.key_schema if schema is not None else None
            value_schema = schema.value_schema if schema is not None else None
            object_mode = (
                key_schema.type == Type.STRING if key_schema is not None else all(isinstance(k, str) for k in value)
            )
            if object_mode:
                return {
                    _as_text(self.convert_to_json(key_schema, k)): self.convert_to_json(value_schema, v)
                    for k, v in value.items()
                }
            return [
                [self.convert_to_json(key_schema, k), self.convert_to_json(value_schema, v)] for k, v in value.items()
            ]
        assert schema is not None  # STRUCT
        if not isinstance(value, Struct):
            raise mismatch
        if value.schema != schema:
            raise DataException("Mismatching schema.")
        read = value.get if self.replace_null_with_default else value.get_without_default
        return {field.name: self.convert_to_json(field.schema, read(field)) for field in schema.fields()}

    def _logical_to_json(self, schema: Schema, value: Any) -> Any:
        if schema.name == DECIMAL_NAME:
            if not isinstance(value, decimal.Decimal):
                raise DataException(f"Invalid type for Decimal, expected Decimal but was {value.__class__.__name__}")
            if self.numeric_decimals:
                return JsonNumber.big_decimal(value)
            return binary(Decimal.from_logical(schema, value))
        try:
            if schema.name == DATE_NAME:
                return Date.from_logical(schema, value)
            if schema.name == TIME_NAME:
                return Time.from_logical(schema, value)
            return Timestamp.from_logical(schema, value)
        except (AttributeError, TypeError):
            raise DataException(
                f"Invalid type for {schema.name.rsplit('.', 1)[-1]}, expected a date/time but was "  # type: ignore[union-attr]
                f"{value.__class__.__name__}"
            ) from None

    # -- bytes -> Connect
    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if not data:
            return SchemaAndValue.NULL
        data = bytes(data)
        if self.schemas_enabled:
            known = self._known_envelope(data)
            if known is not None:
                return known
        node = loads(data)
        if self.schemas_enabled:
            if not isinstance(node, dict) or len(node) != 2 or "schema" not in node or "payload" not in node:
                raise DataException(ENVELOPE_ERROR)
        else:
            node = {"schema": None, "payload": node}
        schema = self.as_connect_schema(node["schema"])
        if self.schemas_enabled and schema is not None:
            self._remember_envelope(data, schema)
        return SchemaAndValue(schema, self._decode(schema, node["payload"]))

    def _known_envelope(self, data: bytes) -> SchemaAndValue | None:
        """The record read without parsing its schema, when its bytes are
        ``{"schema":S,"payload":P}`` with S the text of a schema read before (records of a topic
        mostly carry a few schemas, each written the same way every time); else None, and the
        full parse reads it (and reports what is wrong with it)."""
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return None
        last = self._last_envelope
        if last is not None and text.startswith(last[0]):  # the same schema as the record before
            head, schema, decode = last
        else:
            end = text.find(_PAYLOAD_KEY, _SCHEMA_START)
            if end < 0 or not text.startswith(_ENVELOPE_HEAD):
                return None
            entry = self._envelopes.get(text[_SCHEMA_START:end])
            if entry is None:
                return None
            schema, decode = entry
            head = text[:end + len(_PAYLOAD_KEY)]
            self._last_envelope = (head, schema, decode)
        found = scan_value(text, len(head))
        if found is None or found[1] != len(text) - 1 or text[-1] != "}":
            return None
        return SchemaAndValue(schema, decode(found[0]))

    def _remember_envelope(self, data: bytes, schema: Schema) -> None:
        text = data.decode()
        end = text.find(_PAYLOAD_KEY, _SCHEMA_START)
        if end < 0 or not text.startswith(_ENVELOPE_HEAD):
            return  # written another way (spaces, keys swapped): every such record takes the full parse
        # The span is remembered only when it is the whole schema value: then the same span in
        # another record is that record's schema too (a JSON value ends where its text says).
        found = scan_value(text, _SCHEMA_START)
        if found is not None and found[1] == end:
            self._envelopes.put(text[_SCHEMA_START:end], (schema, self._decoder(schema)))

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)

    def as_connect_schema(self, node: Any) -> Schema | None:
        """The Connect schema of a JSON schema node (None for JSON null), cached by its text."""
        if node is None:
            return None
        if not isinstance(node, dict):
            raise DataException(f"Schema must be a JSON object, not {dumps_safe(node)}")
        key = json.dumps(node, separators=(",", ":"), default=str)  # the schema as written, for the cache
        cached = self._to_connect_schemas.get(key)
        if cached is not None:
            return cached
        type_name = node.get("type")
        if not isinstance(type_name, str):
            raise DataException("Schema must contain 'type' field")
        type = TYPES_BY_NAME.get(type_name)
        if type is None:
            raise DataException(f"Unknown schema type: {type_name}")
        if type == Type.ARRAY:
            if node.get("items") is None:
                raise DataException("Array schema did not specify the element type")
            builder = SchemaBuilder.array(self._required_schema(node["items"]))
        elif type == Type.MAP:
            if "keys" not in node:
                raise DataException("Map schema did not specify the key type")
            if "values" not in node:
                raise DataException("Map schema did not specify the value type")
            builder = SchemaBuilder.map(self._required_schema(node["keys"]), self._required_schema(node["values"]))
        elif type == Type.STRUCT:
            builder = SchemaBuilder.struct()
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise DataException("Struct schema's \"fields\" argument is not an array.")
            for field in fields:
                if not isinstance(field, dict) or not isinstance(field.get("field"), str):
                    raise DataException("Struct schema's field name not specified properly")
                builder.field(field["field"], self._required_schema(field))
        else:
            builder = SchemaBuilder(type)
        if node.get("optional") is True:
            builder.optional()
        else:
            builder.required()
        if isinstance(node.get("name"), str):
            builder.name(node["name"])
        version = node.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            builder.version(version)
        if isinstance(node.get("doc"), str):
            builder.doc(node["doc"])
        parameters = node.get("parameters")
        if isinstance(parameters, dict):
            for name, value in parameters.items():
                if not isinstance(value, str):
                    raise DataException("Schema parameters must have string values.")
                builder.parameter(name, value)
        if "default" in node and node["default"] is not None:
            builder.default_value(self.convert_to_connect(builder.build(), node["default"]))
        schema = builder.build()
        self._to_connect_schemas.put(key, schema)
        return schema

    def _required_schema(self, node: Any) -> Schema:
        schema = self.as_connect_schema(node)
        if schema is None:
            raise DataException("A nested schema cannot be null")
        return schema

    def convert_to_connect(self, schema: Schema | None, node: Any) -> Any:
        """The Connect value of a parsed JSON node under ``schema`` (inferred when None)."""
        if schema is None:
            return _schemaless_to_connect(node)
        if node is None:
            if schema.default_value is not None and self.replace_null_with_default:
                return schema.default_value
            if schema.is_optional:
                return None
            raise DataException(f"Invalid null value for required {schema.type.name} field")
        if schema.name in _LOGICAL_NAMES:
            return _logical_to_connect(schema, node)
        type = schema.type
        mismatch = TypeMismatchException("Invalid value for {}: {}", type, node, as_json=True)
        if type in INT_RANGES:
            if isinstance(node, bool) or not isinstance(node, (int, decimal.Decimal)):
                raise mismatch
            number = int(node)
            low, high = INT_RANGES[type]
            if not low <= number <= high:
                raise DataException(f"Value {number} out of range for {type.name}")
            return number
        if type in (Type.FLOAT32, Type.FLOAT64):
            if isinstance(node, bool) or not isinstance(node, (int, decimal.Decimal)):
                raise mismatch
            return float(node)
        if type == Type.BOOLEAN:
            if not isinstance(node, bool):
                raise mismatch
            return node
        if type == Type.STRING:
            if not isinstance(node, str):
                raise mismatch
            return node
        if type == Type.BYTES:
            return _base64(node, "Invalid bytes field")
        if type == Type.ARRAY:
            if not isinstance(node, list):
                raise mismatch
            return [self.convert_to_connect(schema.value_schema, item) for item in node]
        if type == Type.MAP:
            if schema.key_schema.type == Type.STRING:
                if not isinstance(node, dict):
                    raise DataException(f"Maps with string fields should be encoded as JSON objects, but found {node!r}")
                return {k: self.convert_to_connect(schema.value_schema, v) for k, v in node.items()}
            if not isinstance(node, list):
                raise DataException(f"Maps with non-string fields should be encoded as JSON array of tuples, but found {node!r}")
            result = {}
            for entry in node:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise DataException(f"Found invalid map entry, expected an array of length 2 but found {entry!r}")
                result[self.convert_to_connect(schema.key_schema, entry[0])] = self.convert_to_connect(
                    schema.value_schema, entry[1]
                )
            return result
        if not isinstance(node, dict):
            raise DataException(f"Structs should be encoded as JSON objects, but found {dumps_safe(node)}")
        struct = Struct(schema)
        for field in schema.fields():
            struct.put(field, self.convert_to_connect(field.schema, node.get(field.name)))
        return struct


_LOGICAL_NAMES = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
_ENVELOPE_HEAD = '{"schema":'
_SCHEMA_START = len(_ENVELOPE_HEAD)
_PAYLOAD_KEY = ',"payload":'


class TypeMismatchException(DataException):
    """A value of the wrong type; its message (which may print the node) is made only when raised."""

    def __init__(self, template: str, type: Type, found: Any, as_json: bool = False):
        self.template, self.type, self.found, self.as_json = template, type, found, as_json

    def __str__(self) -> str:
        return self.template.format(self.type.name, dumps_safe(self.found) if self.as_json else self.found)


def _as_text(node: Any) -> str:
    if isinstance(node, JsonNumber):
        return node.text
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def _schemaless_type(value: Any) -> Type | None:
    if isinstance(value, bool):
        return Type.BOOLEAN
    if isinstance(value, int):
        return Type.INT64
    if isinstance(value, float):
        return Type.FLOAT64
    if isinstance(value, str):
        return Type.STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Type.BYTES
    if isinstance(value, (list, tuple)):
        return Type.ARRAY
    if isinstance(value, dict):
        return Type.MAP
    if isinstance(value, Struct):
        return Type.STRUCT
    return None


def _schemaless_to_connect(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_schemaless_to_connect(item) for item in node]
    if isinstance(node, dict):
        return {k: _schemaless_to_connect(v) for k, v in node.items()}
    return node  # None, bool, int, str


def _logical_to_connect(schema: Schema, node: Any) -> Any:
    if schema.name == DECIMAL_NAME:
        if isinstance(node, (int, decimal.Decimal)) and not isinstance(node, bool):
            return decimal.Decimal(node)
        if isinstance(node, str):
            return Decimal.to_logical(schema, _base64(node, "Invalid bytes for Decimal field"))
        raise DataException(
            f"Invalid type for Decimal, underlying representation should be numeric or bytes but was {dumps_safe(node)}"
        )
    if isinstance(node, bool) or not isinstance(node, int):
        kind = schema.name.rsplit(".", 1)[-1]  # type: ignore[union-attr]
        raise DataException(f"Invalid type for {kind}, underlying representation should be integer but was {node!r}")
    if schema.name == DATE_NAME:
        return Date.to_logical(schema, node)
    if schema.name == TIME_NAME:
        return Time.to_logical(schema, node)
    return Timestamp.to_logical(schema, node)


def _base64(node: Any, message: str) -> bytes:
    if not isinstance(node, str):
        raise DataException(f"{message}: expected a base64 string, found {dumps_safe(node)}")
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError) as e:
        raise DataException(f"{message}: {e}") from e


def dumps_safe(node: Any) -> str:
    """A parsed JSON node as text, for messages and cache keys."""
    try:
        return dumps(node)
    except DataException:
        return repr(node)
