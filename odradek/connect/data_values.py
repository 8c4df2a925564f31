"""Values as text, the way Kafka Connect writes and reads them (Kafka's ``Values``), and Java's
number formatting that text needs.

- ``convert_to_string(schema, value)``: the text form headers and casts use: ``true``, ``12``,
  ``1.5``, ``1.0E10`` (Java's ``Double.toString``), base64 for bytes, ISO-8601 for Date/Time/
  Timestamp (``2024-05-01``, ``12:00:00.000Z``, ``2024-05-01T12:00:00.000Z``), ``[1,2]`` and
  ``{"a":1}`` with embedded strings quoted.
- ``parse_string(text)``: the reverse, inferring a schema: booleans, the smallest integer type
  that holds the number, FLOAT32/FLOAT64/Decimal, arrays, maps, the three ISO temporal forms;
  anything else is a STRING.
- ``infer_schema(value)``: a schema for a schemaless Python value, or None.
- ``java_double_str``/``java_float_str``: Java's ``Double.toString``/``Float.toString``.

Stateless; safe from any thread.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import re
import struct
from typing import Any

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


def java_double_str(value: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else ``d.dddE[-]n``; shortest digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if 1e-3 <= abs(value) < 1e7:
        # Python's repr is positional in this range, with the same shortest digits and ".0".
        return repr(float(value))
    return _java_decimal_text(repr(float(value)), value)


def to_float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float (what a Java ``float`` holds)."""
    try:
        return float(struct.unpack(">f", struct.pack(">f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def java_float_str(value: float) -> str:
    """``Float.toString``: as ``Double.toString`` with the shortest digits that identify the float."""
    value = to_float32(value)
    if math.isnan(value) or math.isinf(value):
        return java_double_str(value)
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        if to_float32(float(text)) == value:
            return _java_decimal_text(text, value)
    return _java_decimal_text(repr(value), value)


def _java_decimal_text(shortest: str, value: float) -> str:
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = decimal.Decimal(shortest).normalize().as_tuple()
    assert isinstance(exponent, int)
    text_digits = "".join(map(str, digits))
    point = len(text_digits) + exponent  # position of the decimal point from the first digit
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{text_digits}"
        if point >= len(text_digits):
            return f"{minus}{text_digits}{'0' * (point - len(text_digits))}.0"
        return f"{minus}{text_digits[:point]}.{text_digits[point:]}"
    mantissa = text_digits[0] + "." + (text_digits[1:] or "0")
    return f"{minus}{mantissa}E{point - 1}"


# -- to text -----------------------------------------------------------------------------

def format_date(value: datetime.date) -> str:
    return value.strftime("%Y-%m-%d")


def format_time(value: datetime.time) -> str:
    return f"{value.strftime('%H:%M:%S')}.{value.microsecond // 1000:03d}Z"


def format_timestamp(value: datetime.datetime) -> str:
    utc = Timestamp.to_logical(Timestamp.SCHEMA, Timestamp.from_logical(Timestamp.SCHEMA, value))
    return f"{format_date(utc)}T{format_time(utc.time())}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _append(parts: list[str], schema: Schema | None, value: Any, embedded: bool) -> None:
    if value is None:
        parts.append("null")
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        is_float32 = schema is not None and schema.type == Type.FLOAT32
        parts.append(java_float_str(value) if is_float32 else java_double_str(value))
    elif isinstance(value, decimal.Decimal):
        parts.append(str(value))
    elif isinstance(value, str):
        parts.append(f'"{_escape(value)}"' if embedded else value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        text = base64.b64encode(bytes(value)).decode("ascii")
        parts.append(f'"{text}"' if embedded else text)
    elif isinstance(value, datetime.datetime):
        parts.append(format_timestamp(value))
    elif isinstance(value, datetime.date):
        parts.append(format_date(value))
    elif isinstance(value, datetime.time):
        parts.append(format_time(value))
    elif isinstance(value, (list, tuple)):
        item_schema = schema.value_schema if schema is not None and schema.type == Type.ARRAY else None
        parts.append("[")
        for i, item in enumerate(value):
            if i:
                parts.append(",")
            _append(parts, item_schema, item, True)
        parts.append("]")
    elif isinstance(value, dict):
        is_map = schema is not None and schema.type == Type.MAP
        parts.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                parts.append(",")
            _append(parts, schema.key_schema if is_map else None, k, True)  # type: ignore[union-attr]
            parts.append(":")
            _append(parts, schema.value_schema if is_map else None, v, True)  # type: ignore[union-attr]
        parts.append("}")
    elif isinstance(value, Struct):
        fields = [f for f in value.schema.fields() if value.get(f) is not None]
        parts.append("Struct{")
        for i, field in enumerate(fields):
            if i:
                parts.append(",")
            parts.append(f"{field.name}=")
            _append(parts, field.schema, value.get(field), False)
        parts.append("}")
    else:
        parts.append(str(value))


def convert_to_string(schema: Schema | None, value: Any) -> str | None:
    """``value`` as text (Kafka's ``Values.convertToString``); None stays None."""
    if value is None:
        return None
    if type(value) is str:  # the common case, as itself
        return value
    parts: list[str] = []
    _append(parts, schema, value, False)
    return "".join(parts)


# -- from text ---------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[\[\]{},:]|[^\[\]{},:"\s][^\[\]{},:"]*)')
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}Z")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


class _Unparsable(Exception):
    pass


def parse_string(text: str | None) -> SchemaAndValue:
    """A value with an inferred schema from its text form (Kafka's ``Values.parseString``)."""
    if text is None:
        return SchemaAndValue.NULL
    if not text:
        return SchemaAndValue(Schema.STRING_SCHEMA, text)
    stripped = text.strip()
    if _TIME.fullmatch(stripped) or _TIMESTAMP.fullmatch(stripped):  # their colons are not map entries
        return _parse_literal(stripped)
    try:
        tokens = list(_TOKEN.findall(text))
        if "".join(t.strip() for t in tokens) != "".join(text.split()) and not text.strip().startswith('"'):
            raise _Unparsable
        position, parsed = _parse(tokens, 0)
        if position != len(tokens):
            raise _Unparsable
        return parsed
    except (_Unparsable, DataException, ValueError, IndexError):
        return SchemaAndValue(Schema.STRING_SCHEMA, text)


def _parse(tokens: list[str], i: int) -> tuple[int, SchemaAndValue]:
    token = tokens[i].strip()
    if token == "[":
        items: list[SchemaAndValue] = []
        i += 1
        while tokens[i].strip() != "]":
            i, item = _parse(tokens, i)
            items.append(item)
            if tokens[i].strip() == ",":
                i += 1
        schema = _common_schema([item.schema for item in items])
        array_schema = SchemaBuilder.array(schema).build() if schema is not None else None
        return i + 1, SchemaAndValue(array_schema, [item.value for item in items])
    if token == "{":
        entries: list[tuple[SchemaAndValue, SchemaAndValue]] = []
        i += 1
        while tokens[i].strip() != "}":
            i, key = _parse(tokens, i)
            if tokens[i].strip() != ":":
                raise _Unparsable
            i, value = _parse(tokens, i + 1)
            entries.append((key, value))
            if tokens[i].strip() == ",":
                i += 1
        key_schema = _common_schema([k.schema for k, _ in entries])
        value_schema = _common_schema([v.schema for _, v in entries])
        map_schema = (
            SchemaBuilder.map(key_schema, value_schema).build()
            if key_schema is not None and value_schema is not None
            else None
        )
        return i + 1, SchemaAndValue(map_schema, {k.value: v.value for k, v in entries})
    if token in ("]", "}", ",", ":"):
        raise _Unparsable
    return i + 1, _parse_literal(token)


def _parse_literal(token: str) -> SchemaAndValue:
    if token.startswith('"'):
        return SchemaAndValue(Schema.STRING_SCHEMA, re.sub(r"\\(.)", r"\1", token[1:-1]))
    if token in ("true", "false"):
        return SchemaAndValue(Schema.BOOLEAN_SCHEMA, token == "true")
    if token == "null":
        return SchemaAndValue.NULL
    if _INTEGER.fullmatch(token):
        number = int(token)
        for type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
            low, high = INT_RANGES[type]
            if low <= number <= high:
                return SchemaAndValue(_PRIMITIVES[type], number)
        return SchemaAndValue(Decimal.schema(0), decimal.Decimal(number))
    if _NUMBER.fullmatch(token):
        exact = decimal.Decimal(token)
        as_double = float(exact)
        if math.isfinite(as_double) and decimal.Decimal(repr(as_double)) == exact:
            if to_float32(as_double) == as_double or decimal.Decimal(java_float_str(as_double)) == exact:
                return SchemaAndValue(Schema.FLOAT32_SCHEMA, as_double)
            return SchemaAndValue(Schema.FLOAT64_SCHEMA, as_double)
        scale = max(0, -exact.as_tuple().exponent)  # type: ignore[operator]
        return SchemaAndValue(Decimal.schema(scale), exact)
    if _TIMESTAMP.fullmatch(token):
        moment = datetime.datetime.strptime(token, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)
        return SchemaAndValue(Timestamp.SCHEMA, moment)
    if _DATE.fullmatch(token):
        return SchemaAndValue(Date.SCHEMA, datetime.datetime.strptime(token, "%Y-%m-%d").date())
    if _TIME.fullmatch(token):
        return SchemaAndValue(Time.SCHEMA, datetime.datetime.strptime(token, "%H:%M:%S.%fZ").time())
    return SchemaAndValue(Schema.STRING_SCHEMA, token)


_PRIMITIVES = {
    Type.INT8: Schema.INT8_SCHEMA,
    Type.INT16: Schema.INT16_SCHEMA,
    Type.INT32: Schema.INT32_SCHEMA,
    Type.INT64: Schema.INT64_SCHEMA,
}


def _common_schema(schemas: list[Schema | None]) -> Schema | None:
    """The one schema all items share, widening integers; None when they differ or there are none."""
    if not schemas or any(s is None for s in schemas):
        return None
    first = schemas[0]
    assert first is not None
    if all(s == first for s in schemas):
        return first
    if all(s is not None and s.type in INT_RANGES and s.name is None for s in schemas):
        widest = max(schemas, key=lambda s: list(INT_RANGES).index(s.type))  # type: ignore[union-attr]
        return widest
    return None


def infer_schema(value: Any) -> Schema | None:
    """A schema for a schemaless Python value (Kafka's ``Values.inferSchema``), or None when the
    value gives too little to go on (None, an empty or mixed list or map)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return Schema.BOOLEAN_SCHEMA
    if isinstance(value, int):
        return Schema.INT64_SCHEMA if not -(1 << 31) <= value < (1 << 31) else Schema.INT32_SCHEMA
    if isinstance(value, float):
        return Schema.FLOAT64_SCHEMA
    if isinstance(value, str):
        return Schema.STRING_SCHEMA
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Schema.BYTES_SCHEMA
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        return Decimal.schema(max(0, -exponent) if isinstance(exponent, int) else 0)
    if isinstance(value, datetime.datetime):
        return Timestamp.SCHEMA
    if isinstance(value, datetime.date):
        return Date.SCHEMA
    if isinstance(value, datetime.time):
        return Time.SCHEMA
    if isinstance(value, Struct):
        return value.schema
    if isinstance(value, (list, tuple)):
        item = _common_schema([infer_schema(v) for v in value])
        return SchemaBuilder.array(item).build() if item is not None else None
    if isinstance(value, dict):
        key = _common_schema([infer_schema(k) for k in value])
        item = _common_schema([infer_schema(v) for v in value.values()])
        return SchemaBuilder.map(key, item).build() if key is not None and item is not None else None
    return None


LOGICAL_NAMES = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
