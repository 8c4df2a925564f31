"""Random but valid kio entities of any message class, for round-trip and fuzz tests.

``sample(cls, rng)`` fills every field with a value of its Kafka type (nullable fields
are sometimes None, arrays hold 0-3 items), so that kio can encode it.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from odradek.protocol import wellformed

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint8": (0, (1 << 8) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
    "uint64": (0, (1 << 64) - 1),
}
_ERROR_CODES = list(ErrorCode)


def _primitive(kafka_type: str, rng: random.Random):
    if kafka_type in _INT_RANGES:
        low, high = _INT_RANGES[kafka_type]
        return rng.choice([0, -1, 1, low, high, rng.randint(low, high)]) if low < 0 else rng.randint(low, high)
    if kafka_type == "string":
        return "".join(rng.choice("abcxyz-._é") for _ in range(rng.randint(0, 8)))
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 12))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.random()
    if kafka_type == "uuid":
        return uuid.UUID(bytes=rng.randbytes(16))
    if kafka_type == "error_code":
        return rng.choice(_ERROR_CODES)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.randint(0, 1 << 30))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.randint(0, 1 << 40) / 1000, datetime.UTC)
    raise TypeError(kafka_type)


def sample(cls: type, rng: random.Random, depth: int = 0):
    values = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        nullable = is_optional(field) and wellformed._array_is_nullable(field.type) or (
            not kind.is_array and is_optional(field)
        )
        if nullable and field.metadata.get("tag") is None and rng.random() < 0.2:
            values[field.name] = None
            continue
        if isinstance(kind, EntityTupleField):
            values[field.name] = tuple(sample(kind.type_, rng, depth + 1) for _ in range(rng.randint(0, 3 - depth)))
        elif isinstance(kind, EntityField):
            values[field.name] = sample(kind.type_, rng, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            kafka_type = field.metadata["kafka_type"]
            values[field.name] = tuple(_primitive(kafka_type, rng) for _ in range(rng.randint(0, 3)))
        else:
            values[field.name] = _primitive(field.metadata["kafka_type"], rng)
    return cls(**values)
