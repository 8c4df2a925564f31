"""Options and schema of the ``odradek`` data source: Spark's Kafka source, spelled the same.

Spark hands a data source its options in a case-insensitive dict; ``Options`` keeps that
property (keys are compared lower-cased) so ``startingOffsets`` and ``startingoffsets``
are one option, whichever way a job spells it.

Read options (batch and streaming): ``kafka.bootstrap.servers`` (or
``bootstrap.servers``); exactly one of ``subscribe`` (comma-separated topics),
``subscribePattern`` (a regular expression matched against whole topic names) and
``assign`` (JSON ``{"topic": [0, 1]}``); ``startingOffsets`` and, for batch,
``endingOffsets`` (``earliest``, ``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}``,
-2 meaning earliest and -1 latest); ``startingTimestamp`` / ``endingTimestamp`` (one
timestamp for every partition) and ``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp`` (JSON per partition), which take precedence over the
offsets options in that order; ``startingOffsetsByTimestampStrategy`` (``error`` or
``latest``: what to do when no record is that new); ``maxOffsetsPerTrigger``;
``minOffsetsPerTrigger`` with ``maxTriggerDelay``; ``minPartitions`` and
``maxRecordsPerPartition`` (how offset ranges are split into Spark partitions);
``maxPartitions`` (Odradek's: at most this many Spark tasks per read, small ranges packed into
one task that reads them in turn: a micro-batch of a few records is one wave of tasks);
``includeHeaders``; ``failOnDataLoss``; ``kafka.isolation.level``
(``read_uncommitted`` or ``read_committed``); ``kafka.client.id``;
``kafka.request.timeout.ms``; ``kafka.max.partition.fetch.bytes``. With ``valueFormat`` or
``keyFormat``, the registry options of ``registry_format.py`` type those columns.

Write options: the bootstrap servers; ``topic`` (the topic of rows whose ``topic``
column is null or missing); ``kafka.acks`` (``all``, ``1``, ``0``);
``kafka.compression.type``; ``kafka.batch.size``; ``exactlyOnce`` (streaming: default
true); ``sinkId`` (tells apart several exactly-once writes made by one query per
micro-batch, as in ``foreachBatch``); ``sinkCommitTopic``.

Both, and the admin calls they make: the client security options as Spark's Kafka source
spells them, ``kafka.security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``kafka.sasl.mechanism`` (PLAIN, SCRAM-SHA-256/512), ``kafka.sasl.username`` /
``kafka.sasl.password`` or ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location`` /
``kafka.ssl.ca.location`` (PEM), ``kafka.ssl.keystore.location`` … (the Python client's keys).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.pipeline.blocking_client import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED
from odradek.protocol import compression as codecs

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

DEFAULT_COMMIT_TOPIC = "_odradek_sink_commits"
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000


def source_schema(include_headers: bool, overrides: tuple[StructField, ...] = ()) -> StructType:
    """Spark's Kafka source schema (``headers`` only when asked for); ``overrides`` replace
    fields of the same name (typed ``key``/``value``) or come last (a corrupt-record column)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    replaced = {f.name: f for f in overrides}
    fields = [replaced.pop(f.name, f) for f in fields]
    return StructType(fields + list(replaced.values()))


def project(
    schema: StructType | None, include_headers: bool, overrides: tuple[StructField, ...] = ()
) -> tuple[str, ...]:
    """The columns a read produces: the source schema's, or a user-given subset of them.

    ``spark.read.format("odradek").schema("value binary, offset long")`` reads only those
    columns, which saves moving the others from Python to the JVM. Names and types must be
    the source schema's.
    """
    full = source_schema(True, overrides)
    if schema is None:
        return tuple(f.name for f in source_schema(include_headers, overrides).fields)
    known = {f.name.lower(): f for f in full.fields}
    names = []
    for f in schema.fields:
        ref = known.get(f.name.lower())
        if ref is None:
            raise OptionError(f"column {f.name!r} is not in the odradek schema ({', '.join(known)})")
        if ref.dataType.simpleString() != f.dataType.simpleString():
            raise OptionError(
                f"column {f.name} is {ref.dataType.simpleString()}, not {f.dataType.simpleString()}"
            )
        names.append(ref.name)
    return tuple(names)


def projected_schema(columns: tuple[str, ...], overrides: tuple[StructField, ...] = ()) -> StructType:
    fields = {f.name: f for f in source_schema(True, overrides).fields}
    return StructType([fields[name] for name in columns])


def wants_typed_columns(options: Mapping[str, str]) -> bool:
    """Whether the options ask for registry-typed key/value columns (``registry_format``)."""
    return bool({"keyformat", "valueformat"} & {str(k).lower() for k in options})


class OptionError(ValueError):
    """An option is missing, unknown where it matters, or has a bad value."""


class Options:
    """A read-only, case-insensitive view of Spark's options."""

    def __init__(self, options: Mapping[str, str]):
        self._items = {str(k).lower(): v for k, v in dict(options).items()}

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self._items.get(name.lower())
        return default if value is None else str(value)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._items

    def flag(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise OptionError(f"option {name} must be true or false, got {value!r}")

    def integer(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise OptionError(f"option {name} must be an integer, got {value!r}") from None
        if minimum is not None and number < minimum:
            raise OptionError(f"option {name} must be at least {minimum}, got {number}")
        return number

    def duration_ms(self, name: str, default: int) -> int:
        value = self.get(name)
        if value is None:
            return default
        match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h)?\s*", value.lower())
        if not match:
            raise OptionError(f"option {name} must be a duration such as 30s or 15m, got {value!r}")
        scale = {"ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}[match.group(2)]
        return int(match.group(1)) * scale

    def security(self) -> tuple[tuple[str, str], ...]:
        """The client security options (``kafka.security.protocol``, ``kafka.ssl.*``,
        ``kafka.sasl.*``) without their ``kafka.`` prefix, checked here so a bad one fails the
        query at its start, with the key named."""
        from odradek.client.client_errors import ConfigError
        from odradek.pipeline.blocking_client import is_security_key, security_of

        settings = tuple(
            sorted(
                (k[len("kafka.") :], str(v))
                for k, v in self._items.items()
                if k.startswith("kafka.") and is_security_key(k[len("kafka.") :])
            )
        )
        try:
            security_of(settings)
        except ConfigError as exc:
            raise OptionError(f"the kafka.security.protocol/ssl/sasl options: {exc}") from None
        return settings

    def bootstrap_servers(self) -> str:
        servers = self.get("kafka.bootstrap.servers") or self.get("bootstrap.servers")
        if not servers:
            raise OptionError("option kafka.bootstrap.servers is required (for example 127.0.0.1:9092)")
        return servers


# -- offsets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``per_partition`` maps
    ``(topic, partition)`` to an offset, -2 earliest, -1 latest), ``timestamp`` (one
    timestamp for all partitions) or ``timestamps`` (per partition).
    """

    kind: str
    per_partition: dict = field(default_factory=dict)
    timestamp: int | None = None

    def default_for(self, tp: tuple[str, int], fallback: int) -> int:
        return self.per_partition.get(tp, fallback)


def _parse_partition_json(name: str, text: str, *, allowed_specials: tuple[int, ...]) -> dict:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic": {{"0": 23}}}}')
    out = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for partition, value in parts.items():
            try:
                number = int(value)
                index = int(partition)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: {topic}/{partition} = {value!r} is not a number") from None
            if number < 0 and number not in allowed_specials:
                raise OptionError(f"option {name}: {topic}/{partition} = {number} is not allowed here")
            out[(topic, index)] = number
    return out


def offset_spec(opts: Options, which: str, default: str) -> OffsetSpec:
    """``which`` is ``starting`` or ``ending``; precedence follows Spark's Kafka source."""
    ts = opts.get(f"{which}Timestamp")
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=opts.integer(f"{which}Timestamp", minimum=0))
    by_ts = opts.get(f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec(
            "timestamps", _parse_partition_json(f"{which}OffsetsByTimestamp", by_ts, allowed_specials=())
        )
    text = opts.get(f"{which}Offsets", default).strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        if which == "ending" and lowered == "earliest":
            raise OptionError("option endingOffsets cannot be earliest")
        return OffsetSpec(lowered)
    specials = (EARLIEST, LATEST) if which == "starting" else (LATEST,)
    return OffsetSpec("offsets", _parse_partition_json(f"{which}Offsets", text, allowed_specials=specials))


# -- what to read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """One of ``subscribe``, ``subscribePattern`` or ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()

    def resolve(self, cluster) -> list[tuple[str, int]]:
        """The topic-partitions this subscription means now (sorted)."""
        if self.assignment:
            return sorted(self.assignment)
        if self.pattern is not None:
            regex = re.compile(self.pattern)
            topics = [t for t in cluster.all_topics() if regex.fullmatch(t)]
            parts = cluster.topic_partitions(topics)
        else:
            parts = cluster.topic_partitions(self.topics, refresh=True)
        return sorted((t, p) for t, ps in parts.items() for p in ps)


def subscription(opts: Options) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if opts.get(name)]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern and assign must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    name = given[0]
    value = opts.get(name)
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
        return Subscription(pattern=value)
    try:
        raw = json.loads(value)
        pairs = tuple(sorted((str(t), int(p)) for t, ps in raw.items() for p in ps))
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise OptionError('option assign must be JSON like {"topicA": [0, 1], "topicB": [2]}') from None
    if not pairs:
        raise OptionError("option assign names no partition")
    return Subscription(assignment=pairs)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: str
    include_headers: bool
    fail_on_data_loss: bool
    isolation_level: int
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_partitions: int | None
    max_records_per_partition: int
    client_id: str
    timeout_s: float
    partition_fetch_bytes: int
    columns: tuple[str, ...] = ()
    # Typed key/value columns through a schema registry (``registry_format.ReadFormats``).
    formats: object | None = None
    security: tuple[tuple[str, str], ...] = ()

    @property
    def overrides(self) -> tuple[StructField, ...]:
        return self.formats.overrides() if self.formats is not None else ()

    @property
    def wants_headers(self) -> bool:
        return "headers" in self.columns

    def cluster(self):
        """A new Cluster, owned (and closed) by the caller."""
        from odradek.pipeline.blocking_client import Cluster

        return Cluster(
            self.bootstrap_servers, client_id=self.client_id, timeout=self.timeout_s, security=self.security
        )

    def borrow(self):
        """This worker process's shared Cluster, as a context manager (see ``blocking_client.borrowed``)."""
        from odradek.pipeline.blocking_client import borrowed

        return borrowed(
            self.bootstrap_servers, client_id=self.client_id, timeout=self.timeout_s, security=self.security
        )


def read_options(
    options: Mapping[str, str], *, streaming: bool, schema: StructType | None = None, formats=None
) -> ReadOptions:
    opts = options if isinstance(options, Options) else Options(options)
    level = (opts.get("kafka.isolation.level") or "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            f"option kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}"
        )
    strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option startingOffsetsByTimestampStrategy must be error or latest")
    if streaming and any(
        opts.get(n) for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    ):
        raise OptionError("ending offsets are for batch queries; a streaming query reads on")
    include_headers = opts.flag("includeHeaders", False)
    return ReadOptions(
        bootstrap_servers=opts.bootstrap_servers(),
        subscription=subscription(opts),
        starting=offset_spec(opts, "starting", "latest" if streaming else "earliest"),
        ending=offset_spec(opts, "ending", "latest"),
        by_timestamp_strategy=strategy,
        include_headers=include_headers,
        fail_on_data_loss=opts.flag("failOnDataLoss", True),
        isolation_level=READ_COMMITTED if level == "read_committed" else READ_UNCOMMITTED,
        max_offsets_per_trigger=opts.integer("maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=opts.integer("minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=opts.duration_ms("maxTriggerDelay", 15 * 60_000),
        min_partitions=opts.integer("minPartitions", minimum=1),
        max_partitions=opts.integer("maxPartitions", minimum=1),
        max_records_per_partition=opts.integer(
            "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION, minimum=1
        ),
        client_id=opts.get("kafka.client.id", "odradek-spark"),
        timeout_s=opts.integer("kafka.request.timeout.ms", 30_000, minimum=1) / 1000,
        partition_fetch_bytes=opts.integer("kafka.max.partition.fetch.bytes", 8 << 20, minimum=1024),
        columns=project(schema, include_headers, formats.overrides() if formats is not None else ()),
        formats=formats,
        security=opts.security(),
    )


# -- writes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    acks: int
    compression: int
    batch_bytes: int
    exactly_once: bool
    sink_id: str
    commit_topic: str
    client_id: str
    timeout_s: float
    security: tuple[tuple[str, str], ...] = ()

    def cluster(self):
        """A new Cluster, owned (and closed) by the caller."""
        from odradek.pipeline.blocking_client import Cluster

        return Cluster(
            self.bootstrap_servers, client_id=self.client_id, timeout=self.timeout_s, security=self.security
        )

    def borrow(self):
        """This worker process's shared Cluster, as a context manager (see ``blocking_client.borrowed``)."""
        from odradek.pipeline.blocking_client import borrowed

        return borrowed(
            self.bootstrap_servers, client_id=self.client_id, timeout=self.timeout_s, security=self.security
        )


def write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    opts = options if isinstance(options, Options) else Options(options)
    acks_text = (opts.get("kafka.acks") or "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1, "0": 0}.get(acks_text)
    if acks is None:
        raise OptionError(f"option kafka.acks must be all, 1 or 0, got {acks_text!r}")
    exactly_once = opts.flag("exactlyOnce", streaming)
    if exactly_once and acks != -1:
        raise OptionError("exactlyOnce needs kafka.acks=all")
    try:
        compression = codecs.codec_for_name((opts.get("kafka.compression.type") or "none").strip().lower())
    except Exception as exc:  # noqa: BLE001 - reported as an option error
        raise OptionError(f"option kafka.compression.type: {exc}") from None
    return WriteOptions(
        bootstrap_servers=opts.bootstrap_servers(),
        topic=opts.get("topic"),
        acks=acks,
        compression=compression,
        batch_bytes=opts.integer("kafka.batch.size", 1 << 20, minimum=1),
        exactly_once=exactly_once,
        sink_id=opts.get("sinkId", ""),
        commit_topic=opts.get("sinkCommitTopic", DEFAULT_COMMIT_TOPIC),
        client_id=opts.get("kafka.client.id", "odradek-spark-sink"),
        timeout_s=opts.integer("kafka.request.timeout.ms", 30_000, minimum=1) / 1000,
        security=opts.security(),
    )
