"""``AvroConverter`` under Confluent's name (``io.confluent.connect.avro.AvroConverter``): Connect
data as Avro in the schema registry's framing (byte 0, the schema id, the Avro binary), the
schema registered with Odradek's (or Confluent's) registry at ``schema.registry.url``.

Keys: ``schema.registry.url`` (required), ``auto.register.schemas`` (true), and
``key.subject.name.strategy``/``value.subject.name.strategy`` (Confluent's TopicNameStrategy by
default; RecordNameStrategy and TopicRecordNameStrategy too). The schema translation is
``avro_data``'s (Confluent's AvroData conventions). One instance per connector slot; its
registry client caches ids and schemas.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import fastavro

from odradek.config_def import BOOL, STR, ConfigDef, config_table
from odradek.connect.converters.avro_data import (
    to_avro_schema,
    to_avro_value,
    to_connect_schema,
    to_connect_value,
)
from odradek.connect.converters.converter_base import Converter
from odradek.connect.data_schema import Schema, SchemaAndValue
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.plugin_config import parse_plugin_config
from odradek.connect.records import Headers
from odradek.schema_registry.avro_serde import (
    frame,
    record_subject,
    topic_record_subject,
    topic_subject,
    unframe,
)
from odradek.schema_registry.registry_client import RegistryClient
from odradek.schema_registry.registry_errors import RegistryError

_STRATEGIES = "io.confluent.kafka.serializers.subject."
STRATEGIES = {
    _STRATEGIES + "TopicNameStrategy": "topic",
    _STRATEGIES + "RecordNameStrategy": "record",
    _STRATEGIES + "TopicRecordNameStrategy": "topic-record",
}
AVRO_CONVERTER_CONFIG = config_table(
    ConfigDef("schema.registry.url", STR, None, doc="Comma-separated list of schema registry URLs (the first is used)."),
    ConfigDef("auto.register.schemas", BOOL, True, doc="Register a record's schema if the subject does not have it."),
    ConfigDef("key.subject.name.strategy", STR, _STRATEGIES + "TopicNameStrategy", doc="Subject name strategy for keys."),
    ConfigDef("value.subject.name.strategy", STR, _STRATEGIES + "TopicNameStrategy", doc="Subject name strategy for values."),
    ConfigDef("converter.type", STR, None, doc="key, value or header: set by the worker."),
)


class AvroConverter(Converter):
    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self._writers: dict[int, tuple[Any, Schema]] = {}
        self._parsed: dict[str, Any] = {}

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        settings = parse_plugin_config(AVRO_CONVERTER_CONFIG, configs, ("schema.registry.url",))
        self.is_key = is_key
        self.client = RegistryClient(settings["schema.registry.url"].split(",")[0].strip())
        self.auto_register: bool = settings["auto.register.schemas"]
        key = "key.subject.name.strategy" if is_key else "value.subject.name.strategy"
        strategy = STRATEGIES.get(settings[key])
        if strategy is None:
            raise ConfigException(key, settings[key], f"expected one of {', '.join(STRATEGIES)}")
        self.strategy = strategy

    def config_def(self) -> dict:
        return AVRO_CONVERTER_CONFIG

    def _client(self) -> RegistryClient:
        if self.client is None:
            raise DataException("AvroConverter is not configured: set schema.registry.url")
        return self.client

    def _subject(self, topic: str, avro_text: str) -> str:
        if self.strategy == "topic":
            return topic_subject(topic, self.is_key)
        if self.strategy == "record":
            return record_subject(avro_text)
        return topic_record_subject(topic, avro_text)

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if value is None and (schema is None or schema.default_value is None):
            return None
        if schema is None:
            raise DataException("AvroConverter needs a schema: the value has none (use JsonConverter for schemaless data)")
        avro = to_avro_schema(schema)
        avro_text = json.dumps(avro, separators=(",", ":"))
        parsed = self._parsed.get(avro_text)
        if parsed is None:
            parsed = self._parsed[avro_text] = fastavro.parse_schema(avro)
        subject = self._subject(topic, avro_text)
        try:
            client = self._client()
            schema_id = client.register(subject, avro_text) if self.auto_register else client.lookup(subject, avro_text)
        except RegistryError as e:
            raise DataException(f"Failed to register the Avro schema for subject {subject}: {e}") from e
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, to_avro_value(schema, value))
        except (ValueError, TypeError, AttributeError) as e:
            raise DataException(f"Failed to serialize Avro data from topic {topic}: {e}") from e
        return frame(schema_id, out.getvalue())

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue.NULL
        try:
            schema_id, payload = unframe(data)
        except ValueError as e:
            raise DataException(f"Failed to deserialize data for topic {topic} to Avro: {e}") from e
        writer = self._writers.get(schema_id)
        if writer is None:
            try:
                found = self._client().schema(schema_id)
            except RegistryError as e:
                raise DataException(f"Failed to read Avro schema id {schema_id}: {e}") from e
            avro = json.loads(found["schema"])
            writer = self._writers[schema_id] = (fastavro.parse_schema(avro), to_connect_schema(avro))
        parsed, connect_schema = writer
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
        except (ValueError, EOFError, IndexError) as e:
            raise DataException(f"Failed to deserialize Avro data for topic {topic}: {e}") from e
        return SchemaAndValue(connect_schema, to_connect_value(connect_schema, datum))
