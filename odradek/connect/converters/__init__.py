"""Converters and header converters under Kafka's class names.

``CONVERTERS`` and ``HEADER_CONVERTERS`` map each Kafka class name to its Python class, for the
worker's ``key.converter``, ``value.converter`` and ``header.converter`` keys (the runtime's plugin
lookup resolves short aliases from them).
"""

from odradek.connect.converters.avro_converter import AvroConverter
from odradek.connect.converters.converter_base import Converter, HeaderConverter
from odradek.connect.converters.json_converter import JsonConverter
from odradek.connect.converters.simple_converters import (
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
    StringConverter,
)
from odradek.connect.converters.simple_header_converter import SimpleHeaderConverter

_NUMBERS = "org.apache.kafka.connect.converters."

CONVERTERS: dict[str, type[Converter]] = {
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    _NUMBERS + "ByteArrayConverter": ByteArrayConverter,
    _NUMBERS + "ShortConverter": ShortConverter,
    _NUMBERS + "IntegerConverter": IntegerConverter,
    _NUMBERS + "LongConverter": LongConverter,
    _NUMBERS + "FloatConverter": FloatConverter,
    _NUMBERS + "DoubleConverter": DoubleConverter,
    _NUMBERS + "BooleanConverter": BooleanConverter,
    "io.confluent.connect.avro.AvroConverter": AvroConverter,
}

# Every converter above is a header converter too, as in Kafka.
HEADER_CONVERTERS: dict[str, type[HeaderConverter]] = {
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": SimpleHeaderConverter,
    **{name: cls for name, cls in CONVERTERS.items() if issubclass(cls, HeaderConverter)},
}

# Kafka's class name of each converter class (for the dead letter queue's class.name header).
KAFKA_NAMES: dict[type, str] = {cls: name for name, cls in {**HEADER_CONVERTERS, **CONVERTERS}.items()}

DEFAULT_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

__all__ = [
    "AvroConverter",
    "CONVERTERS",
    "DEFAULT_HEADER_CONVERTER",
    "HEADER_CONVERTERS",
    "KAFKA_NAMES",
    "BooleanConverter",
    "ByteArrayConverter",
    "Converter",
    "DoubleConverter",
    "FloatConverter",
    "HeaderConverter",
    "IntegerConverter",
    "JsonConverter",
    "LongConverter",
    "ShortConverter",
    "SimpleHeaderConverter",
    "StringConverter",
]
