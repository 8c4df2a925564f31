"""The ``odradek`` PySpark data source: batch and streaming reads and writes of topics.

``spark.read.format("odradek")`` and ``spark.readStream.format("odradek")`` take the
options of Spark's Kafka source (see ``options.py``) and give its schema: ``key``,
``value`` (binary), ``topic``, ``partition``, ``offset``, ``timestamp``,
``timestampType`` and, with ``includeHeaders``, ``headers``. ``df.write`` and
``df.writeStream`` with ``format("odradek")`` take ``value`` and optional ``key``,
``topic``, ``partition`` and ``headers`` columns (see ``sink.py``).

Planning runs on the driver (in a Python worker Spark starts for the data source):

* batch: resolve the starting and ending offsets of every subscribed partition, then
  one Spark partition per offset range, ranges over ``maxRecordsPerPartition`` split,
  and more splits until there are ``minPartitions``;
* streaming: offsets are JSON ``{"topic": {"0": 42}}``; ``latestOffset(start, limit)``
  looks at the partitions now (new ones join at offset 0, as in Spark), applies the
  read limit (``maxOffsetsPerTrigger`` → ``ReadMaxRows``, spread over partitions by
  their backlog; ``minOffsetsPerTrigger`` → ``ReadMinRows`` with ``maxTriggerDelay``)
  and, under ``Trigger.AvailableNow``, never passes the offsets recorded by
  ``prepareForTriggerAvailableNow``. Data loss (partitions gone, offsets moved back,
  records aged out before they were read) fails the query unless
  ``failOnDataLoss=false``.

Tasks read their range (or, with ``maxPartitions``, their group of ranges) with ``reader.read_ranges`` (Arrow record batches).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.pipeline.blocking_client import EARLIEST, LATEST, Cluster
from odradek.pipeline.options import (
    OffsetSpec,
    OptionError,
    Options,
    ReadOptions,
    read_options,
    source_schema,
    wants_typed_columns,
)
from odradek.pipeline.reader import RangeGroup, RangePartition, data_loss, read_ranges

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class OdradekDataSource(DataSource):
    """``format("odradek")``: Odradek (or any Kafka) topics as Spark tables and streams."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        formats = _read_formats(self.options)
        overrides = formats.overrides() if formats is not None else ()
        return source_schema(Options(self.options).flag("includeHeaders", False), overrides)

    def reader(self, schema: StructType) -> DataSourceReader:
        formats = _read_formats(self.options)
        return BatchReader(read_options(self.options, streaming=False, schema=schema, formats=formats))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        formats = _read_formats(self.options)
        return StreamReader(read_options(self.options, streaming=True, schema=schema, formats=formats))

    def writer(self, schema: StructType, overwrite: bool):
        from odradek.pipeline.sink import BatchWriter

        if overwrite:
            raise OptionError("save mode overwrite is not allowed for Odradek topics; use append")
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from odradek.pipeline.sink import StreamWriter

        return StreamWriter(self.options, schema)


def _read_formats(options):
    """The typed key/value columns a read asks for (``registry_format``, loaded only then)."""
    if not wants_typed_columns(options):
        return None
    from odradek.pipeline.registry_format import read_formats

    return read_formats(options)


# -- offsets ---------------------------------------------------------------------------------


def resolve_offsets(
    cluster: Cluster,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    opts: ReadOptions,
    *,
    starting: bool,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``tps`` from an offset spec (earliest/latest/JSON/timestamps)."""
    level = opts.isolation_level
    fallback = EARLIEST if starting else LATEST
    if spec.kind == "earliest":
        return cluster.offsets(tps, EARLIEST)
    if spec.kind == "latest":
        return cluster.offsets(tps, LATEST, isolation_level=level)
    if spec.kind == "offsets":
        unknown = set(spec.per_partition) - set(tps)
        if unknown:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(unknown))
            raise OptionError(
                f"{'starting' if starting else 'ending'}Offsets names partitions not subscribed: {names}"
            )
        wanted = {tp: spec.default_for(tp, fallback) for tp in tps}
        specials = {tp: v for tp, v in wanted.items() if v < 0}
        resolved = {}
        for special in (EARLIEST, LATEST):
            group = [tp for tp, v in specials.items() if v == special]
            if group:
                resolved.update(cluster.offsets(group, special, isolation_level=level))
        return {tp: resolved.get(tp, v) for tp, v in wanted.items()}
    # timestamps
    if spec.kind == "timestamp":
        stamps = {tp: spec.timestamp for tp in tps}
    else:
        stamps = {tp: spec.default_for(tp, fallback) for tp in tps}
    found = cluster.list_offsets(stamps, isolation_level=level)
    latest = None
    out = {}
    for tp in tps:
        offset = found[tp][0]
        if offset < 0:
            if starting and opts.by_timestamp_strategy == "error" and stamps[tp] >= 0:
                raise OptionError(
                    f"no record of {tp[0]}-{tp[1]} has a timestamp at or after {stamps[tp]}; "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
                )
            if latest is None:
                latest = cluster.offsets(tps, LATEST, isolation_level=level)
            offset = latest[tp]
        out[tp] = offset
    return out


def split_ranges(
    ranges: list[RangePartition],
    *,
    max_records: int,
    min_partitions: int | None,
    max_partitions: int | None = None,
) -> list[RangePartition | RangeGroup]:
    """Split ranges over ``max_records``, then the largest until ``min_partitions``; then, over
    ``max_partitions``, pack them into that many groups (each a task)."""
    out: list[RangePartition] = []
    for r in ranges:
        size = r.end - r.start
        if size <= 0:
            continue
        pieces = -(-size // max_records)
        step = -(-size // pieces)
        for start in range(r.start, r.end, step):
            out.append(RangePartition(r.topic, r.partition, start, min(start + step, r.end)))
    if min_partitions and 0 < len(out) < min_partitions:
        total = sum(r.end - r.start for r in out)
        split: list[RangePartition] = []
        for r in out:
            size = r.end - r.start
            pieces = max(1, min(size, round(size * min_partitions / total)))
            step = -(-size // pieces)
            for start in range(r.start, r.end, step):
                split.append(RangePartition(r.topic, r.partition, start, min(start + step, r.end)))
        out = split
    if max_partitions and len(out) > max_partitions:
        return pack_ranges(out, max_partitions)
    return list(out)


def pack_ranges(ranges: list[RangePartition], groups: int) -> list[RangePartition | RangeGroup]:
    """``ranges`` in ``groups`` tasks of about equal records: the largest range first, each to
    the group with the fewest records so far."""
    packed: list[list[RangePartition]] = [[] for _ in range(groups)]
    sizes = [0] * groups
    for r in sorted(ranges, key=lambda r: (r.start - r.end, r.topic, r.partition, r.start)):
        smallest = sizes.index(min(sizes))
        packed[smallest].append(r)
        sizes[smallest] += r.end - r.start
    return [group[0] if len(group) == 1 else RangeGroup(tuple(group)) for group in packed if group]


def check_log_start(
    cluster: Cluster, starts: dict[TopicPartition, int], opts: ReadOptions
) -> dict[TopicPartition, int]:
    """Move starts below the log start offset up to it, reporting the data loss."""
    if not starts:
        return starts
    earliest = cluster.offsets(list(starts), EARLIEST)
    out = dict(starts)
    for tp, start in starts.items():
        if start < earliest[tp]:
            data_loss(
                f"{tp[0]}-{tp[1]}: offsets {start}..{earliest[tp]} were removed before they were read",
                opts.fail_on_data_loss,
            )
            out[tp] = earliest[tp]
    return out


# -- batch -----------------------------------------------------------------------------------


class BatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self) -> list[RangePartition | RangeGroup]:
        opts = self.opts
        with opts.cluster() as cluster:
            tps = opts.subscription.resolve(cluster)
            if not tps:
                return []
            starts = resolve_offsets(cluster, tps, opts.starting, opts, starting=True)
            ends = resolve_offsets(cluster, tps, opts.ending, opts, starting=False)
            for tp in tps:
                if starts[tp] > ends[tp]:
                    raise OptionError(
                        f"{tp[0]}-{tp[1]}: the starting offset {starts[tp]} is after the ending offset {ends[tp]}"
                    )
            starts = check_log_start(cluster, starts, opts)
        ranges = [RangePartition(t, p, starts[(t, p)], ends[(t, p)]) for t, p in tps]
        return split_ranges(
            ranges,
            max_records=opts.max_records_per_partition,
            min_partitions=opts.min_partitions,
            max_partitions=opts.max_partitions,
        )

    def read(self, partition: RangePartition | RangeGroup):
        return read_ranges(partition, self.opts)


# -- streaming -------------------------------------------------------------------------------


def offsets_to_json(offsets: dict[TopicPartition, int]) -> dict:
    """``{(topic, p): offset}`` → ``{"topic": {"p": offset}}``, ordered (Spark compares the JSON)."""
    out: dict = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(data: dict) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(off) for topic, parts in (data or {}).items() for p, off in parts.items()}


def rate_limit(
    start: dict[TopicPartition, int], latest: dict[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """Spread ``max_rows`` over partitions in proportion to their backlog (Spark's rule)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    out = {}
    granted = 0
    for tp in sorted(latest):
        share = int(backlog[tp] * max_rows / total)
        out[tp] = start.get(tp, 0) + share
        granted += share
    # Hand out what rounding left over, largest backlog first, so each trigger moves.
    for tp in sorted(latest, key=lambda t: -(backlog[t] - (out[t] - start.get(t, 0)))):
        if granted >= max_rows:
            break
        if out[tp] < latest[tp]:
            out[tp] += 1
            granted += 1
    return out


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reads. Lives on the driver for the whole query run."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self._cluster: Cluster | None = None
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._last_batch_time = time.monotonic()

    def __getstate__(self) -> dict:
        # Spark pickles the reader to send ``read`` to executors; sockets stay behind.
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = self.opts.cluster()
        return self._cluster

    def _latest_offsets(self) -> dict[TopicPartition, int]:
        cluster = self.cluster
        tps = self.opts.subscription.resolve(cluster)
        return cluster.offsets(tps, LATEST, isolation_level=self.opts.isolation_level) if tps else {}

    def initialOffset(self) -> dict:
        opts = self.opts
        tps = opts.subscription.resolve(self.cluster)
        if not tps:
            return {}
        return offsets_to_json(resolve_offsets(self.cluster, tps, opts.starting, opts, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest_offsets()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest = self._latest_offsets()
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target}
        self._latest = latest
        for tp, off in begin.items():
            if tp not in latest:
                if self._target is not None and tp not in self._target:
                    latest[tp] = off
                    continue
                data_loss(f"{tp[0]}-{tp[1]} is gone (the topic was deleted?)", self.opts.fail_on_data_loss)
            elif latest[tp] < off:
                data_loss(
                    f"{tp[0]}-{tp[1]}: the log ends at {latest[tp]}, before offset {off} already read "
                    "(the topic was recreated or truncated)",
                    self.opts.fail_on_data_loss,
                )
                latest[tp] = off
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            available = sum(max(0, latest[tp] - begin.get(tp, 0)) for tp in latest)
            waited = (time.monotonic() - self._last_batch_time) * 1000
            if available < limit.min_rows and waited < self.opts.max_trigger_delay_ms:
                return start
            end = latest
        else:
            end = latest
        # Keep partitions that vanished (failOnDataLoss=false) out of the next offsets.
        end = {tp: off for tp, off in end.items()}
        result = offsets_to_json(end)
        if result != start:
            self._last_batch_time = time.monotonic()
        return result

    def reportLatestOffset(self):
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[RangePartition | RangeGroup]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        starts = {tp: begin.get(tp, 0) for tp in finish}
        new = [tp for tp in finish if tp not in begin]
        if new:
            log.info("new partitions join at offset 0: %s", ", ".join(f"{t}-{p}" for t, p in new))
        starts = check_log_start(
            self.cluster, {tp: s for tp, s in starts.items() if s < finish[tp]}, self.opts
        )
        ranges = [RangePartition(t, p, starts[(t, p)], finish[(t, p)]) for t, p in sorted(starts)]
        return split_ranges(
            ranges,
            max_records=self.opts.max_records_per_partition,
            min_partitions=self.opts.min_partitions,
            max_partitions=self.opts.max_partitions,
        )

    def read(self, partition: RangePartition | RangeGroup):
        return read_ranges(partition, self.opts)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
