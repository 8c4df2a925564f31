"""Per-schema JSON encoders and decoders for ``JsonConverter``, built once per schema.

A converter sees the same few schemas record after record, so instead of walking the schema for
every value it builds, per schema, one closure that writes a value as JSON text and one that
turns a parsed JSON node into a Connect value. The closures handle the common, well-typed cases
directly; anything else (nulls, defaults, wrong types, maps with non-string keys) goes to the
converter's general path, which gives exactly the result or error it always gave. The decoder
builds structs from values it has just checked, so it skips ``Struct.put``'s second check.

Closures hold no state of their own; the converter that built them owns them.
"""

from __future__ import annotations

import binascii
import datetime
import decimal
from collections.abc import Callable
from typing import Any

from odradek.connect.converters.json_text import JsonNumber, binary, write_string
from odradek.connect.data_schema import (
    DATE_NAME,
    DECIMAL_NAME,
    INT_RANGES,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Struct,
    Type,
)
from odradek.connect.errors import DataException
from odradek.connect.logical_types import (
    Decimal,
    datetime_to_millis,
    millis_to_datetime,
    scaled_decimal,
    unscaled_to_bytes,
)

Encoder = Callable[[Any], str]
Decoder = Callable[[Any], Any]
_LOGICAL = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
_EXACT = decimal.Context(prec=1000)  # wide enough that scaling a Decimal never rounds; only read


def _json_number_text(number: JsonNumber | str) -> str:
    return number.text if isinstance(number, JsonNumber) else '"' + number + '"'


def build_encoder(
    schema: Schema, general: Callable[[Schema, Any], str], numeric_decimals: bool
) -> Encoder:
    """A function writing a value of ``schema`` as JSON text; ``general(schema, value)`` is the
    converter's full path, used for everything the function does not handle itself."""
    kind = schema.type
    name = schema.name

    def fallback(value: Any) -> str:
        return general(schema, value)

    fast: Encoder | None = None
    if schema.name in _LOGICAL:
        if name == TIMESTAMP_NAME and kind == Type.INT64:
            def fast(value: Any) -> str:
                if value.__class__ is datetime.datetime:
                    return str(datetime_to_millis(value))
                return fallback(value)
        elif name == DECIMAL_NAME and kind == Type.BYTES and numeric_decimals:
            def fast(value: Any) -> str:
                return str(value) if value.__class__ is decimal.Decimal else fallback(value)
        elif name == DECIMAL_NAME and kind == Type.BYTES and (scale := _decimal_scale(schema)) is not None:
            exponent = scale

            def fast(value: Any) -> str:
                if value.__class__ is decimal.Decimal:
                    unscaled = value.scaleb(exponent, _EXACT)
                    if unscaled.is_finite() and unscaled == unscaled.to_integral_value():  # else the general path errs
                        return '"' + binary(unscaled_to_bytes(int(unscaled))) + '"'
                return fallback(value)
    elif kind in INT_RANGES:
        def fast(value: Any) -> str:
            return str(value) if value.__class__ is int else fallback(value)
    elif kind == Type.STRING:
        def fast(value: Any) -> str:
            return write_string(value) if value.__class__ is str else fallback(value)
    elif kind == Type.BOOLEAN:
        def fast(value: Any) -> str:
            if value is True:
                return "true"
            return "false" if value is False else fallback(value)
    elif kind == Type.FLOAT64:
        def fast(value: Any) -> str:
            return _json_number_text(JsonNumber.double(value)) if value.__class__ is float else fallback(value)
    elif kind == Type.FLOAT32:
        def fast(value: Any) -> str:
            return _json_number_text(JsonNumber.float32(value)) if value.__class__ is float else fallback(value)
    elif kind == Type.BYTES:
        def fast(value: Any) -> str:
            return '"' + binary(value) + '"' if value.__class__ is bytes else fallback(value)
    elif kind == Type.ARRAY:
        item = build_encoder(schema.value_schema, general, numeric_decimals)

        def fast(value: Any) -> str:
            if value.__class__ is list or value.__class__ is tuple:
                return "[" + ",".join([item(v) for v in value]) + "]"
            return fallback(value)
    elif kind == Type.MAP and schema.key_schema.type == Type.STRING and schema.key_schema.name is None:
        entry = build_encoder(schema.value_schema, general, numeric_decimals)

        def fast(value: Any) -> str:
            if value.__class__ is dict and all(k.__class__ is str for k in value):
                return "{" + ",".join([write_string(k) + ":" + entry(v) for k, v in value.items()]) + "}"
            return fallback(value)
    elif kind == Type.STRUCT:
        fields = schema.fields()
        prefixes = [write_string(field.name) + ":" for field in fields]
        encoders = [build_encoder(field.schema, general, numeric_decimals) for field in fields]
        pairs = list(zip(prefixes, encoders, strict=True))

        def fast(value: Any) -> str:
            if value.__class__ is not Struct or not (value.schema is schema or value.schema == schema):
                return fallback(value)
            values = value.values_by_index()
            return "{" + ",".join([p + e(v) for (p, e), v in zip(pairs, values, strict=True)]) + "}"

    # No fast path accepts None (each checks its value's class), so nulls and with them defaults
    # take the converter's general path without a separate check.
    return fallback if fast is None else fast


def build_decoder(schema: Schema, general: Callable[[Schema, Any], Any]) -> Decoder:
    """A function turning a parsed JSON node into a value of ``schema``; ``general(schema, node)``
    is the converter's full path, used for everything the function does not handle itself."""
    kind = schema.type

    def fallback(node: Any) -> Any:
        return general(schema, node)

    fast: Decoder | None = None
    if schema.name in _LOGICAL:
        fast = _logical_decoder(schema, fallback)
    elif kind in INT_RANGES:
        low, high = INT_RANGES[kind]

        def fast(node: Any) -> Any:
            return node if node.__class__ is int and low <= node <= high else fallback(node)
    elif kind == Type.STRING:
        def fast(node: Any) -> Any:
            return node if node.__class__ is str else fallback(node)
    elif kind == Type.BOOLEAN:
        def fast(node: Any) -> Any:
            return node if node is True or node is False else fallback(node)
    elif kind in (Type.FLOAT32, Type.FLOAT64):
        def fast(node: Any) -> Any:
            return float(node) if node.__class__ is decimal.Decimal or node.__class__ is int else fallback(node)
    elif kind == Type.BYTES:
        def fast(node: Any) -> Any:
            if node.__class__ is str:
                try:
                    return binascii.a2b_base64(node, strict_mode=True)  # b64decode(validate=True) without its wrapper
                except ValueError:
                    pass  # the general path words the error
            return fallback(node)
    elif kind == Type.ARRAY:
        item = build_decoder(schema.value_schema, general)

        def fast(node: Any) -> Any:
            return [item(v) for v in node] if node.__class__ is list else fallback(node)
    elif kind == Type.MAP and schema.key_schema.type == Type.STRING:
        entry = build_decoder(schema.value_schema, general)

        def fast(node: Any) -> Any:
            return {k: entry(v) for k, v in node.items()} if node.__class__ is dict else fallback(node)
    elif kind == Type.STRUCT:
        fields = [(field.name, build_decoder(field.schema, general)) for field in schema.fields()]

        def fast(node: Any) -> Any:
            if node.__class__ is not dict:
                return fallback(node)
            get = node.get
            return Struct.from_checked_values(schema, [field_decoder(get(name)) for name, field_decoder in fields])

    # As for encoders: no fast path accepts None, so nulls go to the general path.
    return fallback if fast is None else fast


def _logical_decoder(schema: Schema, fallback: Decoder) -> Decoder | None:
    if schema.name == TIMESTAMP_NAME and schema.type == Type.INT64:
        def timestamp(node: Any) -> Any:
            return millis_to_datetime(node) if node.__class__ is int else fallback(node)
        return timestamp

    if schema.name == DECIMAL_NAME and schema.type == Type.BYTES:
        scale = _decimal_scale(schema)
        if scale is None:
            return None

        def decimal_(node: Any) -> Any:
            if node.__class__ is str:
                try:
                    unscaled = binascii.a2b_base64(node, strict_mode=True)  # b64decode(validate=True) without its wrapper
                except ValueError:
                    return fallback(node)
                return scaled_decimal(int.from_bytes(unscaled, "big", signed=True), scale)
            if node.__class__ is int or node.__class__ is decimal.Decimal:
                return decimal.Decimal(node)
            return fallback(node)
        return decimal_
    return None


def _decimal_scale(schema: Schema) -> int | None:
    """A Decimal schema's scale; None when the schema has none (the general path reports it on each value)."""
    try:
        return Decimal.scale(schema)
    except DataException:
        return None


def build_schemaless_encoder(general: Callable[[Any], str], struct_encoder: Callable[[Schema], Encoder]) -> Encoder:
    """A function writing a value without a schema as JSON text (integers, floats, strings,
    bytes, lists, maps with string keys, structs); ``general(value)`` handles the rest."""

    def encode(value: Any) -> str:
        cls = value.__class__
        if cls is str:
            return write_string(value)
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if cls is int:
            return str(value)
        if cls is float:
            return _json_number_text(JsonNumber.double(value))
        if cls is dict:
            if all(k.__class__ is str for k in value):
                return "{" + ",".join([write_string(k) + ":" + encode(v) for k, v in value.items()]) + "}"
        elif cls is list or cls is tuple:
            return "[" + ",".join([encode(v) for v in value]) + "]"
        elif cls is bytes:
            return '"' + binary(value) + '"'
        elif cls is Struct:
            return struct_encoder(value.schema)(value)
        return general(value)

    return encode
