"""The schema types this registry serves: how each is parsed and checked.

A type is a parser (text, its references as (name, text) in dependency order → a parsed
schema with ``canonical()`` and ``normalized()``, ValueError when invalid) and a
reader/writer check (``compatibility.ReaderReadsWriter``). Avro and Protobuf find referenced
types inside the texts; JSON Schema resolves a ``$ref`` by the reference's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import (
    avro_compatibility,
    avro_schema,
    json_compatibility,
    json_schema,
    protobuf_compatibility,
    protobuf_schema,
)


class ParsedSchema(Protocol):
    def canonical(self) -> str: ...

    def normalized(self) -> str: ...


Referenced = list[tuple[str, str]]


@dataclass(frozen=True)
class SchemaType:
    name: str
    parse: Callable[[str, Referenced], ParsedSchema]
    reads: Callable[[Any, Any], list[str]]


def _by_text(parse: Callable[[str, list[str]], ParsedSchema]) -> Callable[[str, Referenced], ParsedSchema]:
    return lambda text, referenced: parse(text, [ref_text for _, ref_text in referenced])


TYPES: dict[str, SchemaType] = {
    "AVRO": SchemaType("AVRO", _by_text(avro_schema.parse), avro_compatibility.reader_reads_writer),
    "JSON": SchemaType("JSON", json_schema.parse, json_compatibility.reader_reads_writer),
    "PROTOBUF": SchemaType("PROTOBUF", _by_text(protobuf_schema.parse), protobuf_compatibility.reader_reads_writer),
}


def schema_type(name: str | None) -> SchemaType | None:
    """The type named (AVRO when None, as Confluent's default), or None if not served."""
    return TYPES.get((name or "AVRO").upper())
