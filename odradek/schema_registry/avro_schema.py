"""Avro schemas: parsed by fastavro, kept in a canonical text for lookup and deduplication.

The stored text is the schema's JSON without insignificant whitespace (attribute order and
every attribute kept, as Confluent keeps the writer's text); with ``normalize`` it is also
rewritten with full names, ``{"type": "int"}`` collapsed to ``"int"`` and object keys
sorted, so that the same schema spelled differently registers once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import fastavro.schema as fastavro_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class AvroParseError(ValueError):
    pass


@dataclass
class AvroSchema:
    """A parsed Avro schema: fastavro's form plus every named type it (and its references) defines."""

    text: str
    parsed: object
    named: dict = field(default_factory=dict)
    source: object = None  # the text's JSON, loaded once by parse

    schema_type = "AVRO"

    def _source(self):
        return json.loads(self.text) if self.source is None else self.source

    def canonical(self) -> str:
        return json.dumps(self._source(), separators=(",", ":"))

    def normalized(self) -> str:
        return json.dumps(_normal(self._source(), None), separators=(",", ":"), sort_keys=True)


def parse(text: str, references: list[str] | None = None) -> AvroSchema:
    """Parse ``text``; ``references`` are the texts of the schemas it references, dependencies
    first (their named types become known to it). AvroParseError says what is wrong."""
    named: dict = {}
    try:
        for ref_text in references or ():
            fastavro_schema.parse_schema(json.loads(ref_text), named_schemas=named)
        obj = json.loads(text)
        _check_structure(obj)
        parsed = fastavro_schema.parse_schema(obj, named_schemas=named)
    except json.JSONDecodeError as exc:
        raise AvroParseError(f"not JSON: {exc}") from None
    except (fastavro_schema.SchemaParseException, fastavro_schema.UnknownType) as exc:
        raise AvroParseError(f"{type(exc).__name__}: {exc}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise AvroParseError(f"not an Avro schema: {exc}") from None
    if isinstance(parsed, dict):
        parsed = {k: v for k, v in parsed.items() if not k.startswith("__")}
    return AvroSchema(text, parsed, named, obj)


NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_structure(node, path: str = "") -> None:
    """What fastavro lets through but the specification forbids (a record without fields,
    enum symbols that are not a list of names, a fixed without a size)."""
    where = path or "/"
    if isinstance(node, list):
        for i, branch in enumerate(node):
            _check_structure(branch, f"{path}/{i}")
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("record", "error"):
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise AvroParseError(f"the record at {where} needs a \"fields\" list")
        for i, field_ in enumerate(fields):
            if not isinstance(field_, dict) or not isinstance(field_.get("name"), str) or "type" not in field_:
                raise AvroParseError(f"field {i} of the record at {where} needs a name and a type")
            _check_structure(field_["type"], f"{path}/fields/{i}/type")
    elif kind == "enum":
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) and NAME.match(s) for s in symbols):
            raise AvroParseError(f"the enum at {where} needs \"symbols\", a list of names")
        if len(set(symbols)) != len(symbols):
            raise AvroParseError(f"the enum at {where} repeats a symbol")
    elif kind == "fixed":
        size = node.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise AvroParseError(f"the fixed at {where} needs a non-negative integer \"size\"")
    elif kind == "array":
        _check_structure(node.get("items"), f"{path}/items")
    elif kind == "map":
        _check_structure(node.get("values"), f"{path}/values")
    elif isinstance(kind, dict | list):
        _check_structure(kind, path)


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _normal(node, namespace: str | None):
    """The schema JSON with full names, primitive objects collapsed and defaults kept."""
    if isinstance(node, str):
        return node if node in PRIMITIVES else _full_name(node, namespace)
    if isinstance(node, list):
        return [_normal(branch, namespace) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in PRIMITIVES and len(node) == 1:
        return kind
    out = dict(node)
    if kind in ("record", "error", "enum", "fixed") and isinstance(node.get("name"), str):
        full = _full_name(node["name"], node.get("namespace", namespace))
        out["name"] = full
        out.pop("namespace", None)
        namespace = full.rpartition(".")[0] or None
    if kind in ("record", "error"):
        out["fields"] = [
            {**f, "type": _normal(f.get("type"), namespace)} if isinstance(f, dict) else f
            for f in node.get("fields", ())
        ]
    elif kind == "array":
        out["items"] = _normal(node.get("items"), namespace)
    elif kind == "map":
        out["values"] = _normal(node.get("values"), namespace)
    elif isinstance(kind, dict | list):
        out["type"] = _normal(kind, namespace)
    return out
