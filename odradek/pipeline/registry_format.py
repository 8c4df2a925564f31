"""Typed key and value columns through a schema registry (``valueFormat``, ``keyFormat``).

Options (Confluent's spellings where Confluent has one):

* ``valueFormat`` / ``keyFormat``: ``avro``, ``json`` or ``protobuf`` (absent: binary, as before);
* ``schema.registry.url`` (required with a format), ``schema.registry.basic.auth.user.info``
  (``user:password``);
* ``value.subject.name.strategy`` / ``key.subject.name.strategy``: ``TopicNameStrategy``
  (default: ``<topic>-value``), ``RecordNameStrategy`` (the record's full name) or
  ``TopicRecordNameStrategy`` (``<topic>-<record>``), short or as Confluent's class names
  (``io.confluent.kafka.serializers.subject.…``);
* ``value.record.name`` / ``key.record.name``: the record's (Protobuf: message's) full name,
  for the record strategies and to pick a Protobuf message; the sink names the schema it
  derives with it (default ``topLevelRecord``, as Spark's ``to_avro``);
* ``schema.version`` (or ``value.schema.version``) / ``key.schema.version``: ``latest``
  (default) or a version number;
* reading: ``mode`` = ``FAILFAST`` (default: a value that does not decode fails the task,
  naming its topic, partition and offset), ``PERMISSIVE`` (it reads as null and the reason goes
  to ``columnNameOfCorruptRecord``, default ``_corrupt_record``) or ``DROPMALFORMED`` (the
  record is left out) — Spark's modes for its file formats;
* writing: ``auto.register.schemas`` (default true: register the schema derived from the
  DataFrame; false: write with ``schema.version`` of the subject).

The schema of the version read becomes the DataFrame's ``key``/``value`` type (``spark_types``),
resolved on the driver; tasks decode whole Arrow batches with the registry's schemas cached by
id per worker process (``spark_codec``).
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import BinaryType, DataType, StringType, StructField, StructType

from odradek.pipeline.options import OptionError, Options
from odradek.schema_registry import protobuf_messages, spark_schemas, spark_types
from odradek.schema_registry.registry_errors import RegistryError
from odradek.schema_registry.spark_codec import (
    FORMATS,
    SCHEMA_TYPES,
    ColumnSchema,
    CorruptValue,
    RegistryAddress,
    decoder,
    encoder,
    protobuf_class,
    reference_texts,
    registry_for,
)
from odradek.schema_registry.spark_types import UnsupportedSchemaError

STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
MODES = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")
DEFAULT_RECORD_NAME = "topLevelRecord"


class MalformedRecordError(ValueError):
    """A record whose key or value cannot be read with the column's schema (mode FAILFAST)."""


class SchemaRegistrationError(ValueError):
    """The registry refused the schema derived from the DataFrame, or has no schema to use."""


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (``key`` or ``value``) is framed, as the options say."""

    column: str
    format: str
    strategy: str
    record_name: str | None
    version: str

    def subject(self, topic: str | None, record_name: str | None = None) -> str:
        record = record_name or self.record_name
        if self.strategy == "TopicNameStrategy":
            if not topic:
                raise OptionError(
                    f"{self.column}.subject.name.strategy TopicNameStrategy needs one topic: subscribe to "
                    "(or write to, with the topic option) a single topic, or use RecordNameStrategy"
                )
            return f"{topic}-{self.column}"
        if not record:
            raise OptionError(f"{self.strategy} needs the option {self.column}.record.name (e.g. com.example.User)")
        return record if self.strategy == "RecordNameStrategy" else f"{topic}-{record}"


def _column_format(opts: Options, column: str) -> ColumnFormat | None:
    name = opts.get(f"{column}Format")
    if name is None:
        return None
    fmt = name.strip().lower()
    if fmt not in FORMATS:
        raise OptionError(f"option {column}Format must be one of {', '.join(FORMATS)}, got {name!r}")
    strategy = (opts.get(f"{column}.subject.name.strategy") or "TopicNameStrategy").strip()
    short = strategy.removeprefix(_STRATEGY_PACKAGE)
    if short not in STRATEGIES:
        raise OptionError(
            f"option {column}.subject.name.strategy must be one of {', '.join(STRATEGIES)} "
            f"(or {_STRATEGY_PACKAGE}<name>), got {strategy!r}"
        )
    version_keys = ("schema.version", "value.schema.version") if column == "value" else ("key.schema.version",)
    version = next((opts.get(k) for k in version_keys if opts.get(k)), "latest").strip().lower()
    if version != "latest" and not (version.isdigit() and int(version) > 0):
        raise OptionError(f"option {version_keys[-1]} must be latest or a version number, got {version!r}")
    return ColumnFormat(column, fmt, short, opts.get(f"{column}.record.name"), version)


def _address(opts: Options) -> RegistryAddress:
    url = opts.get("schema.registry.url")
    if not url:
        raise OptionError("valueFormat/keyFormat need the option schema.registry.url (e.g. http://127.0.0.1:8081)")
    return RegistryAddress(url.split(",")[0].strip(), opts.get("schema.registry.basic.auth.user.info"))


def _subject_version(client, subject: str, version: str) -> dict:
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
    try:
        return client.request("GET", path)
    except RegistryError as exc:
        if exc.code in (40401, 40402):
            raise OptionError(f"the registry at {client.url} has no version {version} of subject {subject!r}") from None
        raise


def registered_column(client, fmt: ColumnFormat, found: dict, spark_type: DataType | None = None) -> ColumnSchema:
    """A column schema from the registry's answer for a subject version (``spark_type``: the
    DataFrame's, when writing; else the schema's own)."""
    schema_type = found.get("schemaType", "AVRO")
    if schema_type != SCHEMA_TYPES[fmt.format]:
        raise OptionError(
            f"{fmt.column}Format is {fmt.format} but subject {found.get('subject')!r} holds a {schema_type} schema"
        )
    refs = tuple(reference_texts(client, found.get("references")))
    text = found["schema"]
    message = fmt.record_name if fmt.format == "protobuf" else None
    if spark_type is None:
        try:
            if fmt.format == "avro":
                named: dict = {}
                for _, ref in refs:  # each reference's named types become known to the next
                    spark_types.avro_to_spark(json.loads(ref), named)
                spark_type, _ = spark_types.avro_to_spark(json.loads(text), named)
            elif fmt.format == "json":
                spark_type = spark_types.json_schema_to_spark(json.loads(text))
            else:
                cls = protobuf_class(ColumnSchema("protobuf", int(found["id"]), text, refs, message))
                message = cls.DESCRIPTOR.full_name
                spark_type = spark_types.protobuf_to_spark(cls.DESCRIPTOR)
        except (UnsupportedSchemaError, ValueError) as exc:
            raise OptionError(f"schema id {found['id']} ({found.get('subject')}) cannot be a Spark column: {exc}") from None
    return ColumnSchema(fmt.format, int(found["id"]), text, refs, message, spark_type)


# -- reading ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadFormats:
    """The typed columns of a read: resolved on the driver, applied by each task to its batches."""

    address: RegistryAddress
    columns: tuple[tuple[str, ColumnSchema], ...]  # ("key" | "value", schema)
    mode: str
    corrupt_column: str

    def overrides(self) -> tuple[StructField, ...]:
        """The source schema's fields these replace or add."""
        fields = [StructField(name, schema.spark_type, True) for name, schema in self.columns]
        if self.mode == "PERMISSIVE":
            fields.append(StructField(self.corrupt_column, StringType(), True))
        return tuple(fields)

    def record_batch(self, decoded, topic: str, partition: int, schema: pa.Schema, builders) -> pa.RecordBatch:
        client = registry_for(self.address)
        values: dict[str, list] = {}
        reasons: list[str | None] = [None] * len(decoded)
        for name, column in self.columns:
            if name not in schema.names and self.mode == "FAILFAST":
                continue
            decode = _decoder_for(column, client)
            raw = (decoded.keys if name == "key" else decoded.values).to_pylist()
            out = values[name] = [None] * len(raw)
            for i, data in enumerate(raw):
                if data is None:
                    continue
                try:
                    out[i] = decode(data)
                except CorruptValue as exc:
                    if self.mode == "FAILFAST":
                        raise MalformedRecordError(
                            f"{topic}-{partition} offset {int(decoded.offsets[i])}: the {name} cannot be read "
                            f"as {column.format} with the registry's schemas: {exc}. Set the option "
                            "mode=PERMISSIVE to read such records as null (the reason in _corrupt_record) "
                            "or mode=DROPMALFORMED to leave them out"
                        ) from None
                    reasons[i] = f"{reasons[i]}; " if reasons[i] else ""
                    reasons[i] += f"{name}: {exc}"
        arrays = []
        for f in schema:
            if f.name in values:
                arrays.append(pa.array(values[f.name], type=f.type))
            elif f.name == self.corrupt_column and self.mode == "PERMISSIVE":
                arrays.append(pa.array(reasons, type=f.type))
            else:
                arrays.append(builders[f.name](decoded, topic, partition, f.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        if self.mode == "DROPMALFORMED" and any(reasons):
            batch = batch.filter(pa.array([r is None for r in reasons]))
        return batch


_decoders: dict[tuple[str, ColumnSchema], object] = {}  # per worker process


def _decoder_for(column: ColumnSchema, client):
    key = (client.url, column)
    found = _decoders.get(key)
    if found is None:
        found = _decoders[key] = decoder(column, client)
    return found


def _read_topic(opts: Options) -> str | None:
    """The one topic a read names (None when it names several, or a pattern)."""
    if opts.get("subscribe"):
        topics = [t.strip() for t in opts.get("subscribe").split(",") if t.strip()]
        return topics[0] if len(topics) == 1 else None
    if opts.get("assign"):
        try:
            topics = list(json.loads(opts.get("assign")))
        except (ValueError, TypeError):
            return None
        return topics[0] if len(topics) == 1 else None
    return None


def read_formats(options) -> ReadFormats | None:
    """The typed columns a read's options ask for (None: none), with their schemas from the registry."""
    opts = options if isinstance(options, Options) else Options(options)
    formats = [f for f in (_column_format(opts, "key"), _column_format(opts, "value")) if f is not None]
    if not formats:
        return None
    mode = (opts.get("mode") or "FAILFAST").strip().upper()
    if mode not in MODES:
        raise OptionError(f"option mode must be one of {', '.join(MODES)}, got {opts.get('mode')!r}")
    address = _address(opts)
    client = registry_for(address)
    topic = _read_topic(opts)
    columns = []
    for fmt in formats:
        subject = fmt.subject(topic)
        try:
            found = _subject_version(client, subject, fmt.version)
        except RegistryError as exc:
            raise OptionError(f"the registry at {address.url} answered {exc.code}: {exc.message}") from None
        columns.append((fmt.column, registered_column(client, fmt, found)))
    return ReadFormats(address, tuple(columns), mode, opts.get("columnNameOfCorruptRecord") or "_corrupt_record")


# -- writing ---------------------------------------------------------------------------------------

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers")


@dataclass(frozen=True)
class WriteFormats:
    """The typed columns of a write: schemas registered on the driver, encoded by each task."""

    columns: tuple[tuple[str, ColumnSchema], ...]
    value_fields: tuple[str, ...]  # the columns that make the value when there is no value column

    def binary_schema(self, schema: StructType) -> StructType:
        """The columns the plain sink sees once the typed ones are encoded."""
        kept = [f for f in schema.fields if f.name.lower() in SINK_COLUMNS]
        if self.value_fields:
            kept.append(StructField("value", BinaryType(), True))
        out = []
        typed = {name for name, _ in self.columns}
        for f in kept:
            out.append(StructField(f.name, BinaryType(), True) if f.name.lower() in typed else f)
        return StructType(out)

    def encode(self, batches):
        """Arrow batches with typed columns → the same batches with framed binary key/value."""
        encoders = {name: (encoder(column), column) for name, column in self.columns}
        for batch in batches:
            index = {n.lower(): i for i, n in enumerate(batch.schema.names)}
            arrays, names = [], []
            for name in batch.schema.names:
                if name.lower() in SINK_COLUMNS and name.lower() not in encoders:
                    arrays.append(batch.column(index[name.lower()]))
                    names.append(name)
            for name, (encode, column) in encoders.items():
                if name == "value" and self.value_fields:
                    rows = batch.select(list(self.value_fields)).to_pylist()
                else:
                    rows = batch.column(index[name]).to_pylist()
                out = []
                for row in rows:
                    if row is None:
                        out.append(None)
                        continue
                    try:
                        out.append(encode(row))
                    except Exception as exc:  # noqa: BLE001 - each format's writer raises its own kinds
                        raise SchemaRegistrationError(
                            f"a row's {name} does not fit schema id {column.schema_id}: {type(exc).__name__}: {exc}"
                        ) from None
                arrays.append(pa.array(out, type=pa.binary()))
                names.append(name)
            yield pa.RecordBatch.from_arrays(arrays, names=names)


def write_formats(options, schema: StructType) -> WriteFormats | None:
    """Register (or look up) the schemas of a write's typed columns; None when there are none."""
    opts = options if isinstance(options, Options) else Options(options)
    formats = [f for f in (_column_format(opts, "key"), _column_format(opts, "value")) if f is not None]
    if not formats:
        return None
    address = _address(opts)
    client = registry_for(address)
    topic = opts.get("topic")
    if not topic:
        raise OptionError("valueFormat/keyFormat writes need the topic option (the subject is named after it)")
    by_name = {f.name.lower(): f for f in schema.fields}
    value_fields: tuple[str, ...] = ()
    columns = []
    for fmt in formats:
        if fmt.column in by_name:
            dtype = by_name[fmt.column].dataType
        elif fmt.column == "value":
            value_fields = tuple(f.name for f in schema.fields if f.name.lower() not in SINK_COLUMNS)
            if not value_fields:
                raise OptionError("no value to write: give a value column or columns besides key/topic/partition/headers")
            dtype = StructType([by_name[n.lower()] for n in value_fields])
        else:
            raise OptionError("keyFormat is set but there is no key column")
        columns.append((fmt.column, _write_column(client, opts, fmt, topic, dtype)))
    return WriteFormats(tuple(columns), value_fields)


def _write_column(client, opts: Options, fmt: ColumnFormat, topic: str, dtype: DataType) -> ColumnSchema:
    full_name = fmt.record_name or DEFAULT_RECORD_NAME
    subject = fmt.subject(topic, full_name)
    if not opts.flag("auto.register.schemas", True):
        return registered_column(client, fmt, _subject_version(client, subject, fmt.version), dtype)
    namespace, _, name = full_name.rpartition(".")
    try:
        if fmt.format == "avro":
            text = json.dumps(spark_schemas.spark_to_avro(dtype, name, namespace))
        elif fmt.format == "json":
            text = json.dumps(spark_schemas.spark_to_json_schema(dtype, full_name))
        else:
            fd = spark_schemas.spark_to_protobuf(dtype, name, namespace)
            text = protobuf_messages.schema_text(fd)
    except UnsupportedSchemaError as exc:
        raise OptionError(f"the {fmt.column} column cannot be written as {fmt.format}: {exc}") from None
    try:
        schema_id = client.register(subject, text, SCHEMA_TYPES[fmt.format])
    except RegistryError as exc:
        raise SchemaRegistrationError(
            f"the registry at {client.url} refused the DataFrame's {fmt.column} schema under subject "
            f"{subject!r} ({exc.code}: {exc.message}). Make the columns a compatible evolution of the "
            "subject's schema, or set auto.register.schemas=false to write with a registered version "
            "(schema.version)"
        ) from None
    message = full_name if fmt.format == "protobuf" else None
    return ColumnSchema(fmt.format, schema_id, text, (), message, dtype)
