"""Reading one offset range of one partition into Arrow record batches (runs in Spark tasks).

``read_range`` fetches ``[start, end)`` of a topic-partition from its leader, asking for
the next chunk before decoding the current one (the broker fills it while we decode),
and yields one Arrow record batch per fetch response, with exactly the schema Spark
expects (``to_arrow_schema`` of the source schema, timestamps in UTC microseconds).

Data loss, as Spark's Kafka source defines it: offsets the range needs that the log no
longer has (retention or DeleteRecords moved the log start past them, or the log was
truncated below the range's end). With ``failOnDataLoss`` the task fails with
:class:`DataLossError`; without it the range continues with what is left, and a warning
is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from odradek.pipeline.blocking_client import EARLIEST, LATEST, READ_COMMITTED, Cluster, Retry, WireError
from odradek.pipeline.columns import AbortedFilter, Decoded, decode_response
from odradek.pipeline.options import ReadOptions, projected_schema
from odradek.protocol import errors
from odradek.protocol.record_batch import iter_batches

log = logging.getLogger(__name__)

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_MAX_RESPONSE_BYTES = 64 << 20

DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in Odradek any more; either the "
    "data was aged out by retention or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your query to continue in such cases, set the source option "
    '"failOnDataLoss" to "false".'
)


class DataLossError(RuntimeError):
    """Records a query needed are gone (see ``failOnDataLoss``)."""


def data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s. Continuing because failOnDataLoss is false.", message)


@dataclass
class RangePartition(InputPartition):
    """Offsets ``[start, end)`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class RangeGroup(InputPartition):
    """Several offset ranges read one after another by one Spark task (``maxPartitions``)."""

    ranges: tuple[RangePartition, ...]


def read_ranges(part: RangePartition | RangeGroup, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Yield the Arrow record batches of one Spark partition: one range, or a group in turn."""
    for one in part.ranges if isinstance(part, RangeGroup) else (part,):
        yield from read_range(one, opts)


def arrow_schema(columns: tuple[str, ...], overrides: tuple = ()) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(projected_schema(columns, overrides), timezone="UTC")


def _repeat_string(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


_BUILDERS = {
    "key": lambda d, topic, partition, t: d.keys,
    "value": lambda d, topic, partition, t: d.values,
    "topic": lambda d, topic, partition, t: _repeat_string(topic, len(d)),
    "partition": lambda d, topic, partition, t: pa.array(np.full(len(d), partition, np.int32)),
    "offset": lambda d, topic, partition, t: pa.array(d.offsets),
    "timestamp": lambda d, topic, partition, t: pa.array(d.timestamps * 1000, type=_TIMESTAMP),
    "timestampType": lambda d, topic, partition, t: pa.array(d.timestamp_types),
    "headers": lambda d, topic, partition, t: pa.array(
        [[{"key": k, "value": v} for k, v in hs] for hs in d.headers], type=t
    ),
}


def to_record_batch(decoded: Decoded, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    columns = [_BUILDERS[f.name](decoded, topic, partition, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _last_complete_offset(records, start: int) -> int:
    """Where the next fetch starts: past the last complete batch (``start`` if none)."""
    nxt = start
    for batch in iter_batches(records, check_crc=False):
        nxt = max(nxt, batch.next_offset)
    return nxt


def read_range(part: RangePartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches of ``part``'s records, in offset order."""
    if not isinstance(part, RangePartition) or part.start >= part.end:
        # Spark plans one placeholder partition when a read has none.
        return
    schema = arrow_schema(opts.columns, opts.overrides)
    with opts.borrow() as cluster:
        yield from _read(cluster, part, opts, schema)


def _read(cluster: Cluster, part: RangePartition, opts: ReadOptions, schema: pa.Schema):
    tp = (part.topic, part.partition)
    offset, end = part.start, part.end
    committed = opts.isolation_level == READ_COMMITTED
    aborted = AbortedFilter() if committed else None
    fetch_bytes = opts.partition_fetch_bytes
    deadline_empty = None
    retry: Retry | None = None  # the current streak of failures (a leader change, a restart)

    def failed(exc: Exception) -> None:
        nonlocal retry
        if retry is None:
            retry = cluster.retry(f"fetch {part.topic}-{part.partition} at {offset}")
        retry.after(exc)

    def request(at: int, wait_ms: int = 0):
        while True:
            try:
                return cluster.fetch_request(
                    tp,
                    at,
                    max_bytes=max(fetch_bytes, 1024),
                    isolation_level=opts.isolation_level,
                    max_wait_ms=wait_ms,
                )
            except (WireError, errors.KafkaError) as exc:
                failed(exc)

    pending = request(offset)
    while offset < end:
        try:
            p = Cluster.fetch_result(*pending)
        except (WireError, errors.KafkaError) as exc:
            failed(exc)
            pending = request(offset)
            continue
        code = int(p.error_code)
        if code == errors.ErrorCode.offset_out_of_range:
            offset = _out_of_range(cluster, part, offset, opts)
            if offset >= end:
                return
            pending = request(offset)
            continue
        if code:
            failed(errors.error_for(code)(f"fetch {part.topic}-{part.partition} at {offset}"))
            pending = request(offset)
            continue
        retry = None
        records = p.records or b""
        if aborted is not None:
            aborted.add(p.aborted_transactions)
        nxt = _last_complete_offset(records, offset)
        if nxt <= offset:
            # Nothing complete at this offset. Either the records are not there yet
            # (the range's end was planned against a high watermark that has not caught up,
            # e.g. on a new leader), or a batch is larger than the fetch size.
            available = p.last_stable_offset if committed and p.last_stable_offset >= 0 else p.high_watermark
            if records and len(records) >= fetch_bytes:
                fetch_bytes *= 2
                pending = request(offset)
                continue
            if available > offset:
                # Offsets below the high watermark with no batch: removed by compaction
                # (Kafka keeps an empty batch for them, but be lenient) — skip them.
                offset = min(available, end)
                if offset < end:
                    pending = request(offset)
                continue
            if deadline_empty is None:
                deadline_empty = time.monotonic() + opts.timeout_s
            elif time.monotonic() > deadline_empty:
                data_loss(
                    f"{part.topic}-{part.partition}: offsets {offset}..{end} are not available "
                    f"(high watermark {available})",
                    opts.fail_on_data_loss,
                )
                return
            pending = request(offset, wait_ms=500)
            continue
        deadline_empty = None
        if nxt < end:
            pending = request(nxt)  # the broker works on the next chunk while we decode this one
        decoded = decode_response(
            records, start=offset, end=end, include_headers=opts.wants_headers, aborted=aborted
        )
        offset = max(decoded.next_offset, nxt)
        if len(decoded) and opts.formats is not None:  # typed key/value (registry_format)
            yield opts.formats.record_batch(decoded, part.topic, part.partition, schema, _BUILDERS)
        elif len(decoded):
            yield to_record_batch(decoded, part.topic, part.partition, schema)


def _out_of_range(cluster: Cluster, part: RangePartition, offset: int, opts: ReadOptions) -> int:
    tp = (part.topic, part.partition)
    earliest = cluster.offsets([tp], EARLIEST)[tp]
    latest = cluster.offsets([tp], LATEST, isolation_level=opts.isolation_level)[tp]
    if offset < earliest:
        data_loss(
            f"{part.topic}-{part.partition}: offsets {offset}..{min(earliest, part.end)} were removed "
            f"(the log now starts at {earliest})",
            opts.fail_on_data_loss,
        )
        return earliest
    data_loss(
        f"{part.topic}-{part.partition}: offset {offset} is past the end of the log ({latest}); "
        "the partition was truncated or recreated",
        opts.fail_on_data_loss,
    )
    return part.end
