"""Writing DataFrames to topics: batch (at least once) and streaming (exactly once).

Columns, as Spark's Kafka sink takes them: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string; the ``topic`` option, when set, wins),
``partition`` (int) and ``headers`` (array<struct<key string, value binary>>). Other
columns are an error, as in Spark, unless ``valueFormat`` makes them the value's fields
(``registry_format.py``: typed columns framed with a schema registry's ids). A row goes to its ``partition`` when given, else
to ``murmur2(key) % partitions`` (Kafka's default partitioner, so a key lands where Java
clients put it), else, for a null key, to ``crc32(value) % partitions`` (a function of
the row, so that a replayed row goes where its first copy went).

Each task builds v2 batches per partition (``kafka.batch.size``, default 1 MiB,
``kafka.compression.type``) and sends them with one Produce request in flight per
broker. Batch writes retry retriable errors (at least once, like Spark's sink);
streaming writes are exactly once by default — see ``exactly_once.py`` for how and
under which conditions. ``foreachBatch`` users can make a batch write inside the
function exactly once too, with ``exactlyOnce=true`` and a distinct ``sinkId`` per write.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.client.producer.partitioner import murmur2
from odradek.pipeline.blocking_client import Cluster, WireError
from odradek.pipeline.exactly_once import (
    SINK_HEADER,
    CommitLog,
    ExactlyOnceError,
    ReplayGuard,
    TaskIdentity,
    record_commit,
)
from odradek.pipeline.options import OptionError, WriteOptions, wants_typed_columns, write_options
from odradek.protocol import errors
from odradek.protocol.batch_builder import BatchBuilder

log = logging.getLogger(__name__)

# Produce errors after which the batch may be in the log anyway (acks=all timed out).
_MAYBE_APPENDED = {
    int(errors.ErrorCode.request_timed_out),
    int(errors.ErrorCode.not_enough_replicas_after_append),
}
_COLUMNS = {"key", "value", "topic", "partition", "headers"}


@dataclass
class SinkMessage(WriterCommitMessage):
    """What one write task reports to the driver's commit."""

    query_id: str | None = None
    run_id: str = ""
    sink_id: str = ""
    batch_id: int = -1
    topics: list = field(default_factory=list)
    rows: int = 0
    skipped: int = 0


def _write_formats(options, schema: StructType):
    """The typed key/value columns a write asks for (``registry_format``, loaded only then)."""
    if not wants_typed_columns(options):
        return None
    from odradek.pipeline.registry_format import write_formats

    return write_formats(options, schema)


def check_schema(schema: StructType, opts: WriteOptions) -> None:
    """Spark's Kafka sink rules for the input columns, checked on the driver."""
    names = {f.name.lower(): f for f in schema.fields}
    extra = set(names) - _COLUMNS
    if extra:
        raise OptionError(
            f"columns {sorted(extra)} cannot be written; an Odradek sink takes value and optional "
            "key, topic, partition and headers"
        )
    if "value" not in names:
        raise OptionError("required column 'value' not found")
    for name in ("key", "value"):
        if name in names and not isinstance(names[name].dataType, BinaryType | StringType):
            raise OptionError(
                f"column {name} must be string or binary, not {names[name].dataType.simpleString()}"
            )
    if "topic" in names and not isinstance(names["topic"].dataType, StringType):
        raise OptionError("column topic must be a string")
    if "topic" not in names and not opts.topic:
        raise OptionError("no topic: give the topic option or a topic column")
    if "partition" in names and not isinstance(names["partition"].dataType, IntegerType):
        raise OptionError("column partition must be an int")
    if "headers" in names and not _is_headers_type(names["headers"].dataType):
        raise OptionError("column headers must be array<struct<key: string, value: binary>>")


def _is_headers_type(dtype) -> bool:
    """array<struct<key: string, value: binary>>, whatever the nullability."""
    if not isinstance(dtype, ArrayType) or not isinstance(dtype.elementType, StructType):
        return False
    fields = [(f.name.lower(), type(f.dataType)) for f in dtype.elementType.fields]
    return fields == [("key", StringType), ("value", BinaryType)]


def _as_bytes(value):
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _headers(value) -> tuple:
    if not value:
        return ()
    out = []
    for h in value:
        if isinstance(h, dict):
            k, v = h.get("key"), h.get("value")
        else:
            k, v = h
        if k is None:
            raise ValueError("a header key cannot be null")
        out.append((k, _as_bytes(v)))
    return tuple(out)


class Sender:
    """Per-partition batch builders and one Produce request at a time per broker."""

    def __init__(self, cluster: Cluster, opts: WriteOptions, guard: ReplayGuard | None):
        self.cluster = cluster
        self.opts = opts
        self.guard = guard
        self.builders: dict[tuple[str, int], BatchBuilder] = {}
        self.acked: dict[tuple[str, int], int] = {}  # records acknowledged per partition
        self.rows = 0

    def add(self, tp: tuple[str, int], key, value, headers: tuple) -> None:
        builder = self.builders.get(tp)
        if builder is None:
            builder = self.builders[tp] = BatchBuilder(self.opts.compression)
        builder.append(key, value, headers)
        self.rows += 1
        if builder.size_in_bytes >= self.opts.batch_bytes:
            self._send_leader_of(tp)

    def _send_leader_of(self, tp) -> None:
        node = self.cluster.leader(*tp)
        ready = {t: b for t, b in self.builders.items() if len(b) and self.cluster.leader(*t) == node}
        self._send(node, ready)

    def flush(self) -> None:
        while any(len(b) for b in self.builders.values()):
            tp = next(t for t, b in self.builders.items() if len(b))
            self._send_leader_of(tp)

    def _send(self, node: int, ready: dict) -> None:
        for tp in ready:
            self.builders[tp] = BatchBuilder(self.opts.compression)
        batches = {tp: (b.build(), len(b)) for tp, b in ready.items()}
        acks = self.opts.acks
        try:
            result = self.cluster.produce(
                node,
                {tp: data for tp, (data, _) in batches.items()},
                acks=acks,
                timeout_ms=int(self.opts.timeout_s * 1000),
            )
        except (WireError, errors.KafkaError) as exc:
            log.warning("produce to broker %s failed (%s); retrying partition by partition", node, exc)
            result = {tp: (-1, -1, str(exc)) for tp in batches}
        if acks == 0:
            for tp, (_, n) in batches.items():
                self.acked[tp] = self.acked.get(tp, 0) + n
            return
        for tp, (data, n) in batches.items():
            code, _, message = result.get(tp, (-1, -1, "no answer for this partition"))
            if code == 0:
                self.acked[tp] = self.acked.get(tp, 0) + n
            else:
                self._retry(tp, data, n, code, message)

    def _retry(self, tp, data: bytes, n: int, code: int, message) -> None:
        """Send one batch again until it is in; exactly-once checks whether it already is.

        Retriable failures (the leader died or moved, a broker restarts) are retried with
        fresh metadata until the request timeout has passed (``Retry``)."""
        retry = self.cluster.retry(f"produce to {tp[0]}-{tp[1]}")
        failure = _produce_failure(tp, code, message)
        while True:
            retry.after(failure)
            if self.guard is not None and _maybe_appended(failure):
                # The request may or may not have landed: count what is there.
                try:
                    there = self.guard.count_tagged(tp)
                except (WireError, errors.KafkaError) as exc:
                    failure = exc
                    continue
                expected = self.guard.tagged_before_this_attempt(tp) + self.acked.get(tp, 0)
                if there == expected + n:
                    self.acked[tp] = self.acked.get(tp, 0) + n
                    return
                if there != expected:
                    raise ExactlyOnceError(
                        f"{tp[0]}-{tp[1]} holds {there} records of this task, expected {expected} or "
                        f"{expected + n}; another writer uses this query's tag?"
                    )
            try:
                result = self.cluster.produce(
                    self.cluster.leader(*tp),
                    {tp: data},
                    acks=self.opts.acks,
                    timeout_ms=int(self.opts.timeout_s * 1000),
                )
            except (WireError, errors.KafkaError) as exc:
                failure = exc
                continue
            code, _, message = result[tp]
            if code == 0:
                self.acked[tp] = self.acked.get(tp, 0) + n
                return
            failure = _produce_failure(tp, code, message)


def _produce_failure(tp, code: int, message) -> Exception:
    """The exception for a partition's failed produce; code -1: the request got no answer."""
    if code < 0:
        return WireError(f"produce to {tp[0]}-{tp[1]} got no answer: {message}")
    return errors.error_for(code)(message or f"produce to {tp[0]}-{tp[1]}")


def _maybe_appended(failure: Exception) -> bool:
    """Whether the batch may be in the log although the produce failed."""
    return isinstance(failure, WireError) or int(getattr(failure, "code", 0)) in _MAYBE_APPENDED


class _Router:
    """Topic and partition of each row."""

    def __init__(self, cluster: Cluster, opts: WriteOptions):
        self.cluster = cluster
        self.default_topic = opts.topic
        self.counts: dict[str, int] = {}

    def partitions(self, topic: str) -> int:
        n = self.counts.get(topic)
        if n is None:
            parts = self.cluster.topic_partitions([topic], refresh=True).get(topic)
            if not parts:
                raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} does not exist; create it first")
            n = self.counts[topic] = len(parts)
        return n

    def route(self, topic, partition, key, value) -> tuple[str, int]:
        if self.default_topic:
            topic = self.default_topic
        elif topic is None:
            raise ValueError("null topic present in the data; use the topic option to give a default topic")
        n = self.partitions(topic)
        if partition is not None:
            if not 0 <= partition < n:
                raise errors.UnknownTopicOrPartitionError(
                    f"{topic} has no partition {partition} (it has {n})"
                )
            return topic, partition
        if key is not None:
            return topic, (murmur2(key) & 0x7FFFFFFF) % n
        return topic, zlib.crc32(value or b"") % n


def _column(batch: pa.RecordBatch, index: dict, name: str, convert=None) -> list:
    i = index.get(name)
    if i is None:
        return [None] * batch.num_rows
    column = batch.column(i)
    values = column.to_pylist()
    if convert is not None and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        values = [convert(v) for v in values]
    return values


def _rows(batches: Iterator[pa.RecordBatch]):
    """(topic, partition, key, value, headers) per row, from Arrow batches."""
    for batch in batches:
        index = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        if "headers" in index:
            headers = [_headers(h) for h in batch.column(index["headers"]).to_pylist()]
        else:
            headers = [()] * batch.num_rows
        yield from zip(
            _column(batch, index, "topic"),
            _column(batch, index, "partition"),
            _column(batch, index, "key", _as_bytes),
            _column(batch, index, "value", _as_bytes),
            headers,
            strict=True,
        )


def write_rows(opts: WriteOptions, batches: Iterator[pa.RecordBatch], *, exactly_once: bool) -> SinkMessage:
    """One write task: route, deduplicate against earlier attempts, send."""
    ident = TaskIdentity.current(opts.sink_id) if exactly_once else None
    if exactly_once and ident is None:
        raise ExactlyOnceError(
            "exactly-once writes need a streaming query's context (query id and batch id); "
            "set exactlyOnce=false for plain batch writes"
        )
    with opts.borrow() as cluster:
        guard = (
            ReplayGuard(cluster, CommitLog(cluster, opts.commit_topic), ident, topics=[opts.topic])
            if ident
            else None
        )
        message = SinkMessage()
        if ident is not None:
            message = SinkMessage(ident.query_id, ident.run_id, ident.sink_id, ident.batch_id)
        if guard is not None and guard.skip:
            for _ in batches:  # the batch is committed already: consume the input, write nothing
                pass
            log.info("batch %s of query %s is already committed; skipping", ident.batch_id, ident.query_id)
            return message
        router = _Router(cluster, opts)
        sender = Sender(cluster, opts, guard)
        tag = (SINK_HEADER, guard.tag) if guard is not None else None
        topics: set[str] = set()
        skipped = 0
        for topic, partition, key, value, headers in _rows(batches):
            tp = router.route(topic, partition, key, value)
            if guard is not None:
                if tp[0] not in topics:
                    guard.before_first_write(tp[0])
                landed = guard.landed(tp)
                if landed:
                    content = (key, value, headers)
                    if landed.get(content, 0) > 0:
                        landed[content] -= 1
                        skipped += 1
                        topics.add(tp[0])
                        continue
                headers = headers + (tag,)
            topics.add(tp[0])
            sender.add(tp, key, value, headers)
        sender.flush()
        message.topics = sorted(topics)
        message.rows = sender.rows
        message.skipped = skipped
        if skipped:
            log.info("skipped %d rows an earlier attempt of this batch already wrote", skipped)
        if guard is not None and guard.leftovers():
            log.warning(
                "an earlier attempt of batch %s wrote %d records this attempt's input does not have: "
                "the query's output is not deterministic, so exactly-once cannot hold for them",
                ident.batch_id,
                guard.leftovers(),
            )
        return message


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``: at least once, or exactly once inside ``foreachBatch``."""

    def __init__(self, options, schema: StructType):
        self.opts = write_options(options, streaming=False)
        self.formats = _write_formats(options, schema)
        check_schema(self.formats.binary_schema(schema) if self.formats else schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkMessage:
        if self.formats is not None:
            iterator = self.formats.encode(iterator)
        return write_rows(self.opts, iterator, exactly_once=self.opts.exactly_once)

    def commit(self, messages: list) -> None:
        if not self.opts.exactly_once:
            return
        first = next((m for m in messages if m is not None and m.query_id), None)
        if first is None:
            return
        with self.opts.borrow() as cluster:
            record_commit(
                cluster,
                self.opts.commit_topic,
                messages,
                first.batch_id,
                [self.opts.topic] if self.opts.topic else [],
            )

    def abort(self, messages: list) -> None:
        log.warning("write to Odradek aborted; records already sent stay in their topics")


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek")``: exactly once unless ``exactlyOnce=false``."""

    def __init__(self, options, schema: StructType):
        self.opts = write_options(options, streaming=True)
        self.formats = _write_formats(options, schema)
        check_schema(self.formats.binary_schema(schema) if self.formats else schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkMessage:
        if self.formats is not None:
            iterator = self.formats.encode(iterator)
        return write_rows(self.opts, iterator, exactly_once=self.opts.exactly_once)

    def commit(self, messages: list, batchId: int) -> None:
        if not self.opts.exactly_once:
            return
        with self.opts.borrow() as cluster:
            record_commit(
                cluster,
                self.opts.commit_topic,
                messages,
                batchId,
                [self.opts.topic] if self.opts.topic else [],
            )

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("micro-batch %s aborted; a retry of it will not write its rows twice", batchId)
