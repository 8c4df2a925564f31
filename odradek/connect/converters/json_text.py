"""JSON text exactly as Kafka's JsonConverter writes it (Jackson's compact output).

No spaces; object keys in insertion order; strings with ``"`` ``\\`` and the control characters
escaped (``\\b \\t \\n \\f \\r``, others as ``\\u00XX`` in upper-case hex), everything else written
as UTF-8; numbers as Java prints them. A float that must print as Java prints a ``float`` or a
``double``, or a decimal that must print as ``BigDecimal.toString``, travels as a ``JsonNumber``
holding its text. Pure functions; safe from any thread.
"""

from __future__ import annotations

import base64
import decimal
import json
import math
import re
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from odradek.connect.data_values import java_double_str, java_float_str
from odradek.connect.errors import DataException

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04X}")
_TABLE = str.maketrans(_ESCAPES)
# Python's C encoder escapes as Jackson does except for the hex case of rare control characters.
_LOWER_HEX_CONTROLS = re.compile("[\x0a-\x0f\x1a-\x1f]")


class JsonNumber:
    """A number whose JSON text is fixed already (Java's float, double or BigDecimal text)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    @classmethod
    def double(cls, value: float) -> JsonNumber | str:
        # Jackson writes NaN and the infinities as strings (WRITE_NAN_AS_STRINGS).
        text = java_double_str(value)
        return text if not math.isfinite(value) else cls(text)

    @classmethod
    def float32(cls, value: float) -> JsonNumber | str:
        text = java_float_str(value)
        return text if text in ("NaN", "Infinity", "-Infinity") else cls(text)

    @classmethod
    def big_decimal(cls, value: decimal.Decimal) -> JsonNumber:
        return cls(str(value))  # Python's Decimal.__str__ is BigDecimal.toString's to-sci-string


def binary(value: bytes) -> str:
    """Bytes as Jackson writes a binary node: standard base64 with padding."""
    return base64.b64encode(value).decode("ascii")


def dumps(node: Any) -> str:
    parts: list[str] = []
    _write(parts, node)
    return "".join(parts)


def write_string(text: str) -> str:
    """A string as Jackson writes it, quotes included."""
    if _LOWER_HEX_CONTROLS.search(text):
        return '"' + text.translate(_TABLE) + '"'
    return encode_basestring(text)


def _write(parts: list[str], node: Any) -> None:
    if node is None:
        parts.append("null")
    elif node is True:
        parts.append("true")
    elif node is False:
        parts.append("false")
    elif isinstance(node, str):
        parts.append(write_string(node))
    elif isinstance(node, int):
        parts.append(str(node))
    elif isinstance(node, JsonNumber):
        parts.append(node.text)
    elif isinstance(node, decimal.Decimal):  # a number as parsed
        parts.append(str(node))
    elif isinstance(node, float):
        text = JsonNumber.double(node)
        parts.append(text.text if isinstance(text, JsonNumber) else '"' + text + '"')
    elif isinstance(node, dict):
        parts.append("{")
        first = True
        for key, value in node.items():
            if not first:
                parts.append(",")
            first = False
            _write(parts, str(key))
            parts.append(":")
            _write(parts, value)
        parts.append("}")
    elif isinstance(node, list):
        parts.append("[")
        for i, value in enumerate(node):
            if i:
                parts.append(",")
            _write(parts, value)
        parts.append("]")
    else:
        raise DataException(f"Cannot write {type(node).__name__} as JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON keeping every fractional number exact (as ``decimal.Decimal``) and object keys in order."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        return _DECODER.decode(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise DataException(
            f"Converting byte[] to Kafka Connect data failed due to serialization error: {e}"
        ) from e


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"Invalid JSON token {name}")


_DECODER = json.JSONDecoder(parse_float=decimal.Decimal, parse_constant=_refuse_constant)


def scan_value(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value that starts exactly at ``text[start]`` (parsed as ``loads`` parses) and the
    index just past it; None when no valid value starts there."""
    try:
        return _SCAN(text, start)
    except (StopIteration, ValueError):
        return None


# The decoder's C scanner: one value at an index, with _DECODER's number and constant handling.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
