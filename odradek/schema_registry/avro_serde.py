"""Avro serializers for Odradek's client, in Confluent's framing: byte 0, the schema id as 4
bytes big-endian, then the Avro binary encoding (what confluent-kafka's AvroSerializer writes
and its AvroDeserializer reads).

``Producer(value_serializer=AvroSerializer(client, schema, topic_subject("orders")))`` and
``Consumer(value_deserializer=AvroDeserializer(client))``. The subject name strategies are
the three functions below. The first record of a schema asks the registry (a blocking HTTP
call); later ones use the client's cache.
"""

from __future__ import annotations

import io
import json
import struct
import urllib.parse
from typing import Any

import fastavro

from .avro_schema import parse
from .registry_client import RegistryClient

MAGIC = 0
_HEADER = struct.Struct(">bI")


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, payload); ValueError when the bytes are not in Confluent's framing."""
    if len(data) < _HEADER.size or data[0] != MAGIC:
        raise ValueError("not a schema-registry framed value (byte 0 must be 0, then a 4-byte schema id)")
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, bytes(data[_HEADER.size:])


def record_name(schema: str) -> str:
    obj = json.loads(schema)
    name = obj.get("name", "")
    namespace = obj.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def topic_subject(topic: str, is_key: bool = False) -> str:
    """TopicNameStrategy: ``<topic>-value`` (``-key``)."""
    return f"{topic}-{'key' if is_key else 'value'}"


def record_subject(schema: str) -> str:
    """RecordNameStrategy: the record's full name."""
    return record_name(schema)


def topic_record_subject(topic: str, schema: str) -> str:
    """TopicRecordNameStrategy: ``<topic>-<record full name>``."""
    return f"{topic}-{record_name(schema)}"


class AvroSerializer:
    def __init__(self, client: RegistryClient, schema: str, subject: str, auto_register: bool = True):
        self.client = client
        self.schema = schema
        self.subject = subject
        self.auto_register = auto_register
        self._parsed = fastavro.parse_schema(json.loads(schema))
        parse(schema)  # the registry's own checks, before the first record

    def __call__(self, value) -> bytes:
        if self.auto_register:
            schema_id = self.client.register(self.subject, self.schema)
        else:
            schema_id = self.client.lookup(self.subject, self.schema)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._parsed, value)
        return frame(schema_id, out.getvalue())


class AvroDeserializer:
    """Decodes with the writer's schema (by id); with ``reader_schema``, resolves into it."""

    def __init__(self, client: RegistryClient, reader_schema: str | None = None):
        self.client = client
        self.reader = fastavro.parse_schema(json.loads(reader_schema)) if reader_schema else None
        self._writers: dict[int, Any] = {}

    def __call__(self, data: bytes):
        schema_id, payload = unframe(data)
        writer = self._writers.get(schema_id)
        if writer is None:
            found = self.client.schema(schema_id)
            named: dict = {}
            for ref in found.get("references") or ():
                subject = urllib.parse.quote(ref["subject"], safe="")
                ref_schema = self.client.request("GET", f"/subjects/{subject}/versions/{ref['version']}")["schema"]
                fastavro.parse_schema(json.loads(ref_schema), named_schemas=named)
            writer = self._writers[schema_id] = fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)
        return fastavro.schemaless_reader(io.BytesIO(payload), writer, self.reader)
