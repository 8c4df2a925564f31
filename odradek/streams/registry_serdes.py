"""Schema-registry serdes for Streams: Avro, JSON Schema and Protobuf in Confluent's framing (byte 0,
the schema id as 4 bytes big-endian, then the payload; Protobuf puts the message indexes before its
payload), over ``odradek.schema_registry``'s client, as Confluent's ``GenericAvroSerde``,
``KafkaJsonSchemaSerde`` and ``KafkaProtobufSerde`` write them.

The registry's address comes from the constructor or from ``schema.registry.url`` in the app's config
(``configure``). Subjects follow the TopicNameStrategy (``<topic>-value`` / ``<topic>-key``) unless
``subject`` is given. A serde built without a schema can read but not write.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.client.client_errors import SerializationError
from odradek.protocol.varint import VarintError, decode_varint, encode_varint
from odradek.schema_registry.avro_serde import AvroDeserializer, AvroSerializer, frame, topic_subject, unframe
from odradek.schema_registry.registry_client import RegistryClient
from odradek.schema_registry.registry_errors import RegistryError

from .serdes import Serde


class _RegistrySerde(Serde):
    schema_type = ""

    def __init__(
        self,
        registry: str | RegistryClient | None = None,
        schema: str | None = None,
        *,
        is_key: bool = False,
        subject: str | None = None,
        auto_register: bool = True,
    ):
        self._client = RegistryClient(registry) if isinstance(registry, str) else registry
        self.schema = schema
        self.is_key = is_key
        self.subject = subject
        self.auto_register = auto_register

    def configure(self, config: dict[str, Any], is_key: bool) -> None:
        self.is_key = is_key
        url = config.get("schema.registry.url")
        if self._client is None and url:
            self._client = RegistryClient(str(url).split(",")[0])
        if "auto.register.schemas" in config:
            self.auto_register = str(config["auto.register.schemas"]).lower() == "true"

    @property
    def client(self) -> RegistryClient:
        if self._client is None:
            raise SerializationError(
                f"{type(self).__name__} needs a registry: pass its URL or set schema.registry.url in the config"
            )
        return self._client

    def _subject(self, topic: str) -> str:
        return self.subject or topic_subject(topic, self.is_key)

    def _schema_id(self, topic: str) -> int:
        if self.schema is None:
            raise SerializationError(f"{type(self).__name__} without a schema can only read; give schema=...")
        subject = self._subject(topic)
        try:
            if self.auto_register:
                return self.client.register(subject, self.schema, self.schema_type)
            return self.client.lookup(subject, self.schema, self.schema_type)
        except RegistryError as exc:
            raise SerializationError(f"registry, subject {subject!r}: {exc}") from None

    def _unframe(self, topic: str, data: bytes) -> tuple[int, bytes]:
        try:
            return unframe(data)
        except ValueError as exc:
            raise SerializationError(f"{type(self).__name__} on topic {topic!r}: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


class AvroSerde(_RegistrySerde):
    """Avro records (dicts) as Confluent's GenericAvroSerde; reads with the writer's schema by id."""

    kafka_class_name = "io.confluent.kafka.streams.serdes.avro.GenericAvroSerde"
    short_name = "avro"
    schema_type = "AVRO"

    def __init__(
        self, registry: str | RegistryClient | None = None, schema: str | None = None, **kwargs: Any
    ):
        super().__init__(registry, schema, **kwargs)
        self._writers: dict[str, AvroSerializer] = {}
        self._reader: AvroDeserializer | None = None

    def serialize(self, topic, value):
        if value is None:
            return None
        if self.schema is None:
            raise SerializationError("AvroSerde without a schema can only read; give schema=...")
        subject = self._subject(topic)
        writer = self._writers.get(subject)
        if writer is None:
            writer = self._writers[subject] = AvroSerializer(
                self.client, self.schema, subject, auto_register=self.auto_register
            )
        try:
            return writer(value)
        except (ValueError, TypeError) as exc:
            raise SerializationError(f"AvroSerde cannot write to {topic!r}: {exc}") from None

    def deserialize(self, topic, data):
        if data is None:
            return None
        self._unframe(topic, data)
        if self._reader is None:
            self._reader = AvroDeserializer(self.client)
        return self._reader(bytes(data))


class JsonSchemaSerde(_RegistrySerde):
    """JSON values checked against a JSON Schema, as Confluent's KafkaJsonSchemaSerde."""

    kafka_class_name = "io.confluent.kafka.streams.serdes.json.KafkaJsonSchemaSerde"
    short_name = "json-schema"
    schema_type = "JSON"

    def serialize(self, topic, value):
        if value is None:
            return None
        if self.schema is not None:
            import jsonschema

            try:
                jsonschema.validate(value, json.loads(self.schema))
            except jsonschema.ValidationError as exc:
                raise SerializationError(
                    f"JsonSchemaSerde: the value does not match the schema: {exc.message}"
                ) from None
        return frame(self._schema_id(topic), json.dumps(value, separators=(",", ":")).encode())

    def deserialize(self, topic, data):
        if data is None:
            return None
        _, payload = self._unframe(topic, data)
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise SerializationError(f"JsonSchemaSerde: not JSON on topic {topic!r}: {exc}") from None


class ProtobufSerde(_RegistrySerde):
    """Messages of one generated Protobuf class, as Confluent's KafkaProtobufSerde: the schema is the
    class's file descriptor (registered base64-encoded), then the message indexes, then the message."""

    kafka_class_name = "io.confluent.kafka.streams.serdes.protobuf.KafkaProtobufSerde"
    short_name = "protobuf"
    schema_type = "PROTOBUF"

    def __init__(self, registry=None, message_class: Any = None, **kwargs):
        schema = None
        if message_class is not None:
            import base64

            from google.protobuf import descriptor_pb2

            fd = descriptor_pb2.FileDescriptorProto()
            message_class.DESCRIPTOR.file.CopyToProto(fd)
            schema = base64.b64encode(fd.SerializeToString()).decode()
        super().__init__(registry, schema, **kwargs)
        self.message_class = message_class

    def _indexes(self) -> bytes:
        """Confluent's message-index path: zigzag varints, ``[0]`` (the first message) written as 0."""
        path: list[int] = []
        desc = self.message_class.DESCRIPTOR
        while desc is not None:
            siblings = (
                desc.containing_type.nested_types
                if desc.containing_type
                else list(desc.file.message_types_by_name.values())
            )
            path.insert(0, [s.full_name for s in siblings].index(desc.full_name))
            desc = desc.containing_type
        if path == [0]:
            return b"\x00"
        return b"".join(encode_varint(n) for n in [len(path), *path])

    def serialize(self, topic, value):
        if value is None:
            return None
        if self.message_class is None or not isinstance(value, self.message_class):
            raise SerializationError(
                f"ProtobufSerde writes {getattr(self.message_class, '__name__', None)} messages"
            )
        return frame(self._schema_id(topic), self._indexes() + value.SerializeToString())

    def deserialize(self, topic, data):
        if data is None:
            return None
        if self.message_class is None:
            raise SerializationError("ProtobufSerde needs message_class to read")
        _, payload = self._unframe(topic, data)
        try:
            count, pos = decode_varint(payload, 0)
            for _ in range(count):  # count 0 means the first message; the class tells which one anyway
                _, pos = decode_varint(payload, pos)
        except VarintError:
            raise SerializationError(f"ProtobufSerde: bad message indexes on topic {topic!r}") from None
        message = self.message_class()
        try:
            message.ParseFromString(payload[pos:])
        except Exception as exc:  # protobuf's DecodeError has no stable import path across versions
            raise SerializationError(f"ProtobufSerde: cannot parse on topic {topic!r}: {exc}") from None
        return message
