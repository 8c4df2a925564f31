"""Serdes: Kafka's byte formats for keys and values, so what a Streams app writes is what a Java
consumer (or ``odradek consume``) reads, and the other way round.

A ``Serde`` turns a Python value into bytes for a topic and back. Null handling is Kafka's: every
serializer maps ``None`` to ``None`` (a null key, or a tombstone value) and every deserializer maps
``None`` to ``None``. The fixed-width formats are big-endian, as Kafka's ``LongSerializer``,
``IntegerSerializer``, ``ShortSerializer``, ``DoubleSerializer`` and ``FloatSerializer`` write them.

``spark_decode(col)`` / ``spark_encode(col)`` give the same conversion as a Spark SQL expression over
a binary (resp. typed) column, or ``None`` when the format has no native expression; the compiler
uses them to keep the work inside the JVM when no Python function needs the value. They agree
byte for byte with ``serialize``/``deserialize`` (tests/streams/test_serdes.py checks both ways).

``Serdes.from_class_name`` accepts Kafka's class names (``org.apache.kafka.common.serialization.
Serdes$LongSerde``), Confluent's registry serdes' names, our own (``odradek.streams.serdes.JsonSerde``)
and short names (``long``), so ``default.value.serde`` in a config carries over from Java.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from odradek.client.client_errors import SerializationError

_KAFKA = "org.apache.kafka.common.serialization.Serdes$"


class Serde:
    """A key or value format. Subclasses set ``kafka_class_name`` and implement the two methods."""

    kafka_class_name = ""
    short_name = ""

    def configure(self, config: dict[str, Any], is_key: bool) -> None:
        """Kafka's ``Serde.configure``: the app's config, and whether this serde is for keys."""

    def serialize(self, topic: str, value: Any) -> bytes | None:
        raise NotImplementedError

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        raise NotImplementedError

    def spark_decode(self, col: Any) -> Any:
        """A Spark Column holding the deserialized value of binary ``col``, or None if not native.
        Bytes the format cannot read make the query fail with this serde's message."""
        return None

    def spark_encode(self, col: Any) -> Any:
        """A Spark binary Column holding the serialized form of ``col``, or None if not native."""
        return None

    def __repr__(self) -> str:
        return f"Serdes.{type(self).__name__.removesuffix('Serde')}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(type(self))


class StringSerde(Serde):
    """UTF-8, as Kafka's StringSerializer (bytes that are not UTF-8 read as U+FFFD, as Java's)."""

    kafka_class_name = _KAFKA + "StringSerde"
    short_name = "string"

    def serialize(self, topic, value):
        if value is None:
            return None
        if not isinstance(value, str):
            raise SerializationError(
                f"StringSerde expects a str, got {type(value).__name__} for topic {topic!r}"
            )
        return value.encode()

    def deserialize(self, topic, data):
        return None if data is None else bytes(data).decode("utf-8", errors="replace")

    def spark_decode(self, col):
        return col.cast("string")

    def spark_encode(self, col):
        return col.cast("binary")


class _FixedWidthSerde(Serde):
    """A big-endian number of ``width`` bytes (``fmt`` for struct)."""

    fmt = ""
    width = 0
    integral = True

    def serialize(self, topic, value):
        if value is None:
            return None
        if self.integral and (isinstance(value, bool) or not isinstance(value, int)):
            raise SerializationError(f"{type(self).__name__} expects an int, got {type(value).__name__}")
        try:
            return struct.pack(self.fmt, value)
        except struct.error as exc:
            raise SerializationError(f"{type(self).__name__} cannot write {value!r}: {exc}") from None

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) != self.width:
            raise SerializationError(
                f"Size of data received by {type(self).__name__.removesuffix('Serde')}Deserializer "
                f"is not {self.width} (got {len(data)} bytes on topic {topic!r})"
            )
        return struct.unpack(self.fmt, data)[0]

    def spark_decode(self, col):
        if not self.integral:
            return None
        from pyspark.sql import functions as F

        # conv(hex, 16, -10) reads 16 hex digits as a signed long; narrower widths read unsigned
        # (they fit in a long) and fold into their signed range.
        if self.width == 8:
            signed = F.conv(F.hex(col), 16, -10).cast("long")
        else:
            unsigned = F.conv(F.hex(col), 16, 10).cast("long")
            half, full = 1 << (8 * self.width - 1), 1 << (8 * self.width)
            signed = F.when(unsigned >= half, unsigned - F.lit(full)).otherwise(unsigned)
        bad = F.raise_error(
            F.concat(
                F.lit(f"Size of data received by {type(self).__name__} is not {self.width}: "), F.hex(col)
            )
        )
        checked = F.when(col.isNull(), F.lit(None)).when(F.length(col) != self.width, bad).otherwise(signed)
        return checked.cast({8: "long", 4: "int", 2: "short"}[self.width])

    def spark_encode(self, col):
        if not self.integral:
            return None
        from pyspark.sql import functions as F

        # hex() of a negative long is its two's complement in 16 digits; keep the low `width` bytes.
        digits = F.lpad(F.hex(col.cast("long")), 16, "0")
        return F.unhex(F.substring(digits, 17 - 2 * self.width, 2 * self.width))


class LongSerde(_FixedWidthSerde):
    kafka_class_name = _KAFKA + "LongSerde"
    short_name = "long"
    fmt, width = ">q", 8


class IntegerSerde(_FixedWidthSerde):
    kafka_class_name = _KAFKA + "IntegerSerde"
    short_name = "integer"
    fmt, width = ">i", 4


class ShortSerde(_FixedWidthSerde):
    kafka_class_name = _KAFKA + "ShortSerde"
    short_name = "short"
    fmt, width = ">h", 2


class DoubleSerde(_FixedWidthSerde):
    kafka_class_name = _KAFKA + "DoubleSerde"
    short_name = "double"
    fmt, width, integral = ">d", 8, False

    def serialize(self, topic, value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise SerializationError(f"DoubleSerde expects a float, got {type(value).__name__}")
        return super().serialize(topic, value)


class FloatSerde(DoubleSerde):
    kafka_class_name = _KAFKA + "FloatSerde"
    short_name = "float"
    fmt, width = ">f", 4


class ByteArraySerde(Serde):
    """The bytes as they are (Kafka's ByteArraySerde)."""

    kafka_class_name = _KAFKA + "ByteArraySerde"
    short_name = "bytearray"

    def serialize(self, topic, value):
        if value is None:
            return None
        if not isinstance(value, bytes | bytearray | memoryview):
            raise SerializationError(f"{type(self).__name__} expects bytes, got {type(value).__name__}")
        return bytes(value)

    def deserialize(self, topic, data):
        return None if data is None else bytes(data)

    def spark_decode(self, col):
        return col

    def spark_encode(self, col):
        return col.cast("binary")


class BytesSerde(ByteArraySerde):
    """Kafka's BytesSerde (its ``Bytes`` wrapper is plain ``bytes`` in Python)."""

    kafka_class_name = _KAFKA + "BytesSerde"
    short_name = "bytes"


class VoidSerde(Serde):
    """Always null (Kafka's VoidSerde): writes None; reading anything but null is an error."""

    kafka_class_name = _KAFKA + "VoidSerde"
    short_name = "void"

    def serialize(self, topic, value):
        if value is not None:
            raise SerializationError("VoidSerde writes only None")
        return None

    def deserialize(self, topic, data):
        if data is not None:
            raise SerializationError(f"Data should be null for a VoidDeserializer (topic {topic!r})")
        return None

    def spark_decode(self, col):
        from pyspark.sql import functions as F

        bad = F.raise_error(F.lit("Data should be null for a VoidDeserializer"))
        return F.when(col.isNull(), F.lit(None)).otherwise(bad)

    def spark_encode(self, col):
        from pyspark.sql import functions as F

        return F.lit(None).cast("binary")


class UUIDSerde(Serde):
    """A UUID as its 36-character string in UTF-8 (Kafka's UUIDSerde)."""

    kafka_class_name = _KAFKA + "UUIDSerde"
    short_name = "uuid"

    def serialize(self, topic, value):
        return None if value is None else str(value).encode()

    def deserialize(self, topic, data):
        import uuid

        if data is None:
            return None
        try:
            return uuid.UUID(bytes(data).decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise SerializationError(f"UUIDDeserializer: {exc} (topic {topic!r})") from None


class JsonSerde(Serde):
    """Any JSON value as compact UTF-8 JSON text (no schema, no framing)."""

    kafka_class_name = "odradek.streams.serdes.JsonSerde"
    short_name = "json"

    def serialize(self, topic, value):
        if value is None:
            return None
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"JsonSerde cannot write {type(value).__name__}: {exc}") from None

    def deserialize(self, topic, data):
        if data is None:
            return None
        try:
            return json.loads(bytes(data))
        except ValueError as exc:
            raise SerializationError(f"JsonSerde: not JSON on topic {topic!r}: {exc}") from None


class Serdes:
    """Kafka's ``Serdes`` factory: ``Serdes.String()``, ``Serdes.Long()``, ..."""

    String = StringSerde
    Long = LongSerde
    Integer = IntegerSerde
    Short = ShortSerde
    Double = DoubleSerde
    Float = FloatSerde
    ByteArray = ByteArraySerde
    Bytes = BytesSerde
    Void = VoidSerde
    UUID = UUIDSerde
    JSON = JsonSerde

    @staticmethod
    def from_class_name(name: str | Serde | type) -> Serde:
        """A serde from a config value: a Serde, a Serde class, or a class name (Kafka's, Confluent's,
        ours) or short name. Unknown names raise ValueError listing the known ones."""
        if isinstance(name, Serde):
            return name
        if isinstance(name, type) and issubclass(name, Serde):
            return name()
        text = str(name).strip()
        known = _by_name()
        found = known.get(text) or known.get(text.lower()) or known.get(text.replace(".Serdes.", ".Serdes$"))
        if found is None:
            shorts = sorted(n for n in known if "." not in n)
            raise ValueError(
                f"unknown serde {text!r}: give a Kafka class name such as {_KAFKA}StringSerde, "
                f"a Serde object, or one of {', '.join(shorts)}"
            )
        return found()


# Confluent's registry serdes live in registry_serdes (imported on first use: it needs the registry client).
_REGISTRY_SERDES = {
    "io.confluent.kafka.streams.serdes.avro.GenericAvroSerde": "AvroSerde",
    "io.confluent.kafka.streams.serdes.avro.SpecificAvroSerde": "AvroSerde",
    "io.confluent.kafka.streams.serdes.json.KafkaJsonSchemaSerde": "JsonSchemaSerde",
    "io.confluent.kafka.streams.serdes.protobuf.KafkaProtobufSerde": "ProtobufSerde",
    "avro": "AvroSerde",
    "json-schema": "JsonSchemaSerde",
    "protobuf": "ProtobufSerde",
}

_FIXED_SERDES: list[type[Serde]] = [
    StringSerde,
    LongSerde,
    IntegerSerde,
    ShortSerde,
    DoubleSerde,
    FloatSerde,
    ByteArraySerde,
    BytesSerde,
    VoidSerde,
    UUIDSerde,
    JsonSerde,
]


def _by_name() -> dict[str, type[Serde]]:
    import importlib

    names: dict[str, type[Serde]] = {}
    for cls in _FIXED_SERDES:
        names[cls.kafka_class_name] = cls
        names[f"{cls.__module__}.{cls.__name__}"] = cls
        names[cls.short_name] = cls
    registry = importlib.import_module("odradek.streams.registry_serdes")
    for name, class_name in _REGISTRY_SERDES.items():
        names[name] = names[f"odradek.streams.registry_serdes.{class_name}"] = getattr(registry, class_name)
    return names
