"""Connect's logical types: Decimal, Date, Time and Timestamp (Kafka's ``org.apache.kafka.connect.data``
classes of those names), each a named primitive schema with ``from_logical``/``to_logical``.

- Decimal: BYTES holding the unscaled value as a big-endian two's-complement integer (Java's
  ``BigInteger.toByteArray``), the scale in the schema parameter ``scale``; Python ``decimal.Decimal``.
- Date: INT32 days since 1970-01-01; Python ``datetime.date``.
- Time: INT32 milliseconds since midnight; Python ``datetime.time``.
- Timestamp: INT64 milliseconds since the epoch, UTC; Python ``datetime.datetime`` (naive ones are
  taken as UTC; those read back are aware, in UTC).

Stateless; safe from any thread.
"""

from __future__ import annotations

import datetime
import decimal as _decimal

from odradek.connect.data_builder import SchemaBuilder
from odradek.connect.data_schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Type
from odradek.connect.errors import DataException

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
EPOCH_DATE = datetime.date(1970, 1, 1)
MILLIS_PER_DAY = 86_400_000


def _check(schema: Schema, name: str, type: Type) -> None:
    if schema.name != name or schema.type != type:
        raise DataException(f"Requested conversion of {name} object but the schema does not match.")


class Decimal:
    LOGICAL_NAME = DECIMAL_NAME
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes().name(DECIMAL_NAME).parameter("scale", str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        text = (schema.parameters or {}).get("scale")
        if text is None:
            raise DataException("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(text)
        except ValueError:
            raise DataException(f"Invalid scale parameter found in Decimal schema: {text}") from None

    @staticmethod
    def unscaled(schema: Schema, value: _decimal.Decimal) -> int:
        """``value``'s unscaled integer at the schema's scale (exact, or ``DataException``)."""
        scale = Decimal.scale(schema)
        unscaled = value.scaleb(scale, context=_decimal.Context(prec=1000))
        if unscaled != unscaled.to_integral_value():
            raise DataException("Decimal value has mismatching scale for given Decimal schema")
        return int(unscaled)

    @staticmethod
    def from_logical(schema: Schema, value: _decimal.Decimal) -> bytes:
        _check(schema, DECIMAL_NAME, Type.BYTES)
        return unscaled_to_bytes(Decimal.unscaled(schema, value))

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> _decimal.Decimal:
        _check(schema, DECIMAL_NAME, Type.BYTES)
        return scaled_decimal(int.from_bytes(value, "big", signed=True), Decimal.scale(schema))


def unscaled_to_bytes(unscaled: int) -> bytes:
    """The shortest two's-complement big-endian bytes of ``unscaled`` (as Java's BigInteger.toByteArray)."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


_WIDE_CONTEXT = _decimal.Context(prec=1000)  # only read by scaleb (its traps never change)


def scaled_decimal(unscaled: int, scale: int) -> _decimal.Decimal:
    return _decimal.Decimal(unscaled).scaleb(-scale, context=_WIDE_CONTEXT)


class Date:
    LOGICAL_NAME = DATE_NAME

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(DATE_NAME).version(1)

    SCHEMA: Schema

    @staticmethod
    def from_logical(schema: Schema, value: datetime.date) -> int:
        _check(schema, DATE_NAME, Type.INT32)
        if isinstance(value, datetime.datetime):
            utc = _as_utc(value)
            if utc.time() != datetime.time(0):
                raise DataException(
                    "Kafka Connect Date type should not have any time fields set to non-zero values."
                )
            value = utc.date()
        return (value - EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.date:
        _check(schema, DATE_NAME, Type.INT32)
        return EPOCH_DATE + datetime.timedelta(days=value)


class Time:
    LOGICAL_NAME = TIME_NAME

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(TIME_NAME).version(1)

    SCHEMA: Schema

    @staticmethod
    def from_logical(schema: Schema, value: datetime.time) -> int:
        _check(schema, TIME_NAME, Type.INT32)
        if isinstance(value, datetime.datetime):
            value = _as_utc(value).time()
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.time:
        _check(schema, TIME_NAME, Type.INT32)
        if not 0 <= value < MILLIS_PER_DAY:
            raise DataException("Time values must use number of milliseconds greater than 0 and less than 86400000")
        seconds, millis = divmod(value, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return datetime.time(hour, minute, second, millis * 1000)


class Timestamp:
    LOGICAL_NAME = TIMESTAMP_NAME

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(TIMESTAMP_NAME).version(1)

    SCHEMA: Schema

    @staticmethod
    def from_logical(schema: Schema, value: datetime.datetime) -> int:
        _check(schema, TIMESTAMP_NAME, Type.INT64)
        return datetime_to_millis(value)

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.datetime:
        _check(schema, TIMESTAMP_NAME, Type.INT64)
        return millis_to_datetime(value)


def _as_utc(value: datetime.datetime) -> datetime.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.UTC)
    return value.astimezone(datetime.UTC)


def datetime_to_millis(value: datetime.datetime) -> int:
    """Milliseconds since the epoch (naive datetimes taken as UTC), rounded toward minus infinity."""
    delta = _as_utc(value) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def millis_to_datetime(millis: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(milliseconds=millis)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()

LOGICAL_NAMES = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)


def to_logical(schema: Schema, value: object) -> object:
    """The Python value of a logical schema's raw value; other schemas' values as they are."""
    if value is None or schema.name not in LOGICAL_NAMES:
        return value
    if schema.name == DECIMAL_NAME:
        return Decimal.to_logical(schema, value)  # type: ignore[arg-type]
    if schema.name == DATE_NAME:
        return Date.to_logical(schema, value)  # type: ignore[arg-type]
    if schema.name == TIME_NAME:
        return Time.to_logical(schema, value)  # type: ignore[arg-type]
    return Timestamp.to_logical(schema, value)  # type: ignore[arg-type]


def from_logical(schema: Schema, value: object) -> object:
    """The raw value (bytes, int) of a logical schema's Python value; other schemas' values as they are."""
    if value is None or schema.name not in LOGICAL_NAMES:
        return value
    if schema.name == DECIMAL_NAME:
        return Decimal.from_logical(schema, value)  # type: ignore[arg-type]
    if schema.name == DATE_NAME:
        return Date.from_logical(schema, value)  # type: ignore[arg-type]
    if schema.name == TIME_NAME:
        return Time.from_logical(schema, value)  # type: ignore[arg-type]
    return Timestamp.from_logical(schema, value)  # type: ignore[arg-type]
