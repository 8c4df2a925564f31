"""Exactly-once streaming writes without transactions: tagged records, a commit log, replay scans.

Spark runs a micro-batch's write tasks, then calls the sink's ``commit(batch)``, then
records the batch in its checkpoint. A failure anywhere in between makes Spark run the
same batch id again over the same input offsets (after a restart, or a task again after
a task failure). Spark's Kafka sink then writes the batch twice. This sink does not:

1. **Tag.** Every record a write task produces carries the header
   ``odradek.sink = query id (16 bytes) · batch id (8) · Spark partition id (4) · sinkId``.
2. **Commit log.** ``commit(batch)`` on the driver appends
   ``{"type": "commit", "batch": B, "run": R, "offsets": {topic: {partition: HW}}}``
   under the key ``query id[/sinkId]`` to a compacted topic (``_odradek_sink_commits``),
   where the offsets are the target partitions' high watermarks after batch B, i.e. a
   lower bound for anything a later batch writes.
3. **Task start.** A write task of batch B reads its query's newest commit record and
   the markers written after it, then appends its own *marker* (batch, Spark partition,
   and the high watermarks of target topics the commit does not list), before writing:
   * B ≤ committed batch → the batch is already in the topics: the task writes nothing.
   * No marker of an earlier attempt of (B, this partition) → nothing of it can exist:
     write everything.
   * Otherwise earlier attempts (task retries, stage retries, a run killed mid-batch)
     may have written part of it: before the first write to a target partition, scan it
     from the commit's offset (or the earlier marker's) to its end and collect the records
     tagged with this task's tag (a multiset of key, value and headers). Rows found there
     are skipped, one per copy found; the rest are written.
4. **In-task retries.** Records go out one Produce request at a time per broker, so what
   reached a partition is always a prefix of what was sent there. If a request fails
   without an answer (or with a timeout, after which the batch may still be appended),
   the task counts its tagged records in the partition again and resends the batch only
   if it is not there.

The guarantee: with ``kafka.acks=all``, every row of every micro-batch is in the target
topics exactly once, across task retries, killed executors and killed drivers that
restart from the same checkpoint, provided that

* replaying a batch gives each Spark partition the same rows (in any order) — true for
  queries whose rows are a deterministic function of the source offsets, e.g.
  projections, filters and aggregations whose state is in the checkpoint, and Spark's
  own requirement for idempotent sinks;
* speculative execution is off (Spark's default): two attempts of one task running at
  the same time would both write;
* nothing else writes records with this query's tag, and the commit log topic is not
  deleted while the query lives (deleting it makes the next batch after a crash write
  again what a killed attempt already wrote);
* a killed attempt's last Produce request has reached the broker before the replay scans
  (in practice: the restart takes longer than a request's flight time; Kafka closes
  this gap with producer epochs, which need the transactions work).

Readers see every record as soon as it is written (there is no read_committed
filtering): a consumer may read rows of a batch whose commit has not happened yet, but
never two copies of a row.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass, field

from odradek.pipeline.blocking_client import EARLIEST, LATEST, Cluster, WireError
from odradek.pipeline.columns import decode_response
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch
from odradek.protocol.record_batch import iter_records

SINK_HEADER = "odradek.sink"
COMMIT_TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}
_BATCH_AND_PARTITION = struct.Struct(">qi")


class ExactlyOnceError(RuntimeError):
    """The sink cannot tell what an earlier attempt wrote; the batch must not continue."""


@dataclass(frozen=True)
class TaskIdentity:
    """Who is writing: the streaming query, its run, the micro-batch and the Spark task."""

    query_id: str
    run_id: str
    batch_id: int
    partition_id: int
    attempt: int
    sink_id: str = ""

    @classmethod
    def current(cls, sink_id: str = "") -> TaskIdentity | None:
        """From Spark's TaskContext (None outside a streaming query's job)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return None
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            return None
        run = ctx.getLocalProperty("spark.jobGroup.id") or ""
        return cls(
            query_id=query,
            run_id=run,
            batch_id=int(batch),
            partition_id=ctx.partitionId(),
            attempt=ctx.attemptNumber(),
            sink_id=sink_id,
        )

    @property
    def log_key(self) -> str:
        return f"{self.query_id}/{self.sink_id}" if self.sink_id else self.query_id

    @property
    def tag(self) -> bytes:
        try:
            query = uuid.UUID(self.query_id).bytes
        except ValueError:
            query = self.query_id.encode()
        return query + _BATCH_AND_PARTITION.pack(self.batch_id, self.partition_id) + self.sink_id.encode()


@dataclass
class LogState:
    commit: dict | None
    markers: list[dict] = field(default_factory=list)


class CommitLog:
    """The sink's commit log: JSON records in a compacted topic, keyed by query (and sink id).

    Created on first use with one partition and the cluster's ``default.replication.factor``
    and ``min.insync.replicas`` (no topic-level override, as ``__consumer_offsets`` has
    none): on a cluster set up to survive a broker failure, the log survives it too.
    """

    def __init__(self, cluster: Cluster, topic: str):
        self.cluster = cluster
        self.topic = topic

    def _partition_for(self, key: str) -> int | None:
        parts = self.cluster.topic_partitions([self.topic]).get(self.topic)
        if not parts:
            return None
        return zlib.crc32(key.encode()) % len(parts)

    def ensure(self) -> None:
        """Create the topic if it does not exist, and wait until its leader serves it."""
        if self.topic in self.cluster.partitions:
            return
        if self.cluster.topic_partitions([self.topic], refresh=True).get(self.topic):
            self.cluster.await_topic(self.topic)
        else:
            # Many write tasks may race to create it: the losers wait for the winner's topic.
            self.cluster.create_topic(self.topic, 1, configs=COMMIT_TOPIC_CONFIGS)

    def state(self, key: str) -> LogState:
        """The newest commit for ``key`` and the markers written after it."""
        partition = self._partition_for(key)
        if partition is None:
            return LogState(None, [])
        tp = (self.topic, partition)
        hi = self.cluster.offsets([tp], LATEST)[tp]
        lo = 0
        prefix = key + "#"
        markers: list[dict] = []
        window = 256
        while hi > lo:
            first = max(lo, hi - window)
            records, lo = self._read(tp, first, hi, lo)
            for record in reversed(records):
                if record.key is None or record.value is None:
                    continue
                k = record.key.decode("utf-8", "replace")
                if k == key:
                    value = json.loads(record.value)
                    if value.get("type") == "commit":
                        return LogState(value, markers)
                elif k.startswith(prefix):
                    markers.append(json.loads(record.value))
            hi = first
            window *= 4
        return LogState(None, markers)

    def _read(self, tp, start: int, end: int, lo: int) -> tuple[list, int]:
        """Records of ``[start, end)``, and the log start offset if it turned out to be higher."""
        out = []
        offset = start
        while offset < end:
            conn, corr = self.cluster.fetch_request(tp, offset, max_bytes=4 << 20, isolation_level=0)
            p = Cluster.fetch_result(conn, corr)
            if p.error_code == errors.ErrorCode.offset_out_of_range:
                lo = self.cluster.offsets([tp], EARLIEST)[tp]  # compaction or retention moved the start
                if offset >= lo:
                    raise errors.OffsetOutOfRangeError(f"sink commit log {tp[0]}-{tp[1]} at {offset}")
                offset = lo
                continue
            errors.raise_for(p.error_code, f"read the sink commit log {tp[0]}-{tp[1]}")
            got = [r for r in iter_records(p.records or b"") if offset <= r.offset < end]
            if not got:
                break
            out.extend(got)
            offset = got[-1].offset + 1
        return out, lo

    def append(self, key: str, value: dict) -> None:
        batch = build_batch([(key.encode(), json.dumps(value, sort_keys=True).encode(), (), None)])
        retry = self.cluster.retry(f"append to the sink commit log {self.topic}")
        while True:
            try:
                self.ensure()
                partition = self._partition_for(key)
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError(f"the sink commit log {self.topic} is gone")
                tp = (self.topic, partition)
                result = self.cluster.produce(self.cluster.leader(*tp), {tp: batch}, acks=-1)
                code, _, message = result[tp]
                errors.raise_for(code, message or f"append to the sink commit log {self.topic}")
                return
            except (WireError, errors.KafkaError) as exc:
                retry.after(exc)


def high_watermarks(cluster: Cluster, topics) -> dict[str, dict[str, int]]:
    parts = cluster.topic_partitions(sorted(set(topics)), refresh=True)
    tps = [(t, p) for t, ps in parts.items() for p in ps]
    hws = cluster.offsets(tps, LATEST) if tps else {}
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(hws.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


class ReplayGuard:
    """One write task's knowledge of what earlier attempts of its batch wrote.

    Created at the start of a write task: reads the commit log, decides whether the batch
    is already committed (``skip``) or may have been partly written before (not
    ``fresh``), and appends this attempt's marker before any record is written.
    """

    def __init__(self, cluster: Cluster, log: CommitLog, ident: TaskIdentity, topics=()):
        self.cluster = cluster
        self.log = log
        self.ident = ident
        self.tag = ident.tag
        state = log.state(ident.log_key)
        self.commit = state.commit
        c = self.commit
        self.skip = c is not None and int(c["batch"]) >= ident.batch_id
        # Markers of earlier attempts of this very task (any run, any stage attempt).
        self.prior = [
            m
            for m in state.markers
            if int(m.get("batch", -1)) == ident.batch_id and int(m.get("partition", -1)) == ident.partition_id
        ]
        self.fresh = not self.prior
        self._landed: dict[tuple[str, int], Counter] = {}
        self._tagged_at_scan: dict[tuple[str, int], int] = {}
        self._marked: set[str] = set()
        self._bounds: dict[str, dict[str, int]] = {}
        if not self.skip:
            self._mark([t for t in topics if t and not self._covered(t)])

    # -- markers --------------------------------------------------------------------------

    def _covered(self, topic: str) -> bool:
        return self.commit is not None and topic in (self.commit.get("offsets") or {})

    def _mark(self, topics: list[str]) -> None:
        """Append this attempt's marker: it started, and where ``topics`` ended before it wrote.

        Markers of one Spark partition share a key, so compaction may drop an earlier
        attempt's marker: each marker therefore carries the lowest bounds of the earlier
        attempts' markers too.
        """
        i = self.ident
        self._marked.update(topics)
        if topics:
            for topic, parts in high_watermarks(self.cluster, topics).items():
                self._bounds.setdefault(topic, {}).update(parts)
        bounds = {t: dict(ps) for t, ps in self._bounds.items()}
        for m in self.prior:
            for topic, parts in (m.get("offsets") or {}).items():
                mine = bounds.setdefault(topic, {})
                for p, off in parts.items():
                    mine[p] = min(int(off), mine.get(p, int(off)))
        self.log.append(
            f"{i.log_key}#marker#{i.partition_id}",
            {
                "type": "marker",
                "run": i.run_id,
                "batch": i.batch_id,
                "partition": i.partition_id,
                "attempt": i.attempt,
                "offsets": bounds,
                "time": int(time.time() * 1000),
            },
        )

    def before_first_write(self, topic: str) -> None:
        """Leave a lower bound for replays before writing to a topic the commit does not cover."""
        if topic in self._marked or self._covered(topic):
            return
        self._mark([topic])

    # -- what landed ----------------------------------------------------------------------

    def lower_bound(self, tp: tuple[str, int]) -> int | None:
        """Where this task's records in ``tp`` can start (None: no attempt wrote there)."""
        topic, partition = tp
        if self._covered(topic):
            return int(self.commit["offsets"][topic].get(str(partition), 0))
        marks = [m.get("offsets") or {} for m in self.prior] + [self._bounds]
        bounds = [int(m[topic].get(str(partition), 0)) for m in marks if topic in m]
        return min(bounds) if bounds else None

    def leftovers(self) -> int:
        """Records earlier attempts wrote that this attempt's input did not contain."""
        return sum(n for found in self._landed.values() for n in found.values() if n > 0)

    def landed(self, tp: tuple[str, int]) -> Counter | None:
        """The multiset of this task's records already in ``tp`` (None when fresh)."""
        if self.fresh:
            return None
        if tp not in self._landed:
            found, count = self._scan(tp)
            self._landed[tp] = found
            self._tagged_at_scan[tp] = count
        return self._landed[tp]

    def count_tagged(self, tp: tuple[str, int]) -> int:
        """How many records with this task's tag ``tp`` holds now."""
        return self._scan(tp)[1]

    def tagged_before_this_attempt(self, tp: tuple[str, int]) -> int:
        return self._tagged_at_scan.get(tp, 0)

    def _scan(self, tp: tuple[str, int]) -> tuple[Counter, int]:
        found: Counter = Counter()
        start = self.lower_bound(tp)
        if start is None:
            return found, 0
        earliest = self.cluster.offsets([tp], EARLIEST)[tp]
        end = self.cluster.offsets([tp], LATEST)[tp]
        offset = max(start, earliest)
        count = 0
        tag = self.tag
        while offset < end:
            conn, corr = self.cluster.fetch_request(tp, offset, max_bytes=8 << 20, isolation_level=0)
            p = Cluster.fetch_result(conn, corr)
            if p.error_code == errors.ErrorCode.offset_out_of_range:
                offset = self.cluster.offsets([tp], EARLIEST)[tp]
                continue
            errors.raise_for(p.error_code, f"scan {tp[0]}-{tp[1]} for a replayed batch")
            decoded = decode_response(p.records or b"", start=offset, end=end, include_headers=True)
            if decoded.next_offset <= offset:
                break
            keys = decoded.keys.to_pylist()
            values = decoded.values.to_pylist()
            for k, v, hs in zip(keys, values, decoded.headers, strict=True):
                if hs and hs[-1][0] == SINK_HEADER and hs[-1][1] == tag:
                    found[(k, v, tuple(hs[:-1]))] += 1
                    count += 1
            offset = decoded.next_offset
        return found, count


def record_commit(cluster: Cluster, log_topic: str, messages: list, batch_id: int, topics) -> dict | None:
    """Driver side of step 2: append the commit record of ``batch_id``."""
    first = next((m for m in messages if m is not None and getattr(m, "query_id", None)), None)
    if first is None:
        return None
    log = CommitLog(cluster, log_topic)
    key = f"{first.query_id}/{first.sink_id}" if first.sink_id else first.query_id
    previous = log.state(key).commit
    names = set(topics)
    for m in messages:
        if m is not None:
            names.update(m.topics)
    if previous:
        names.update((previous.get("offsets") or {}).keys())
    value = {
        "type": "commit",
        "query": first.query_id,
        "sink": first.sink_id,
        "run": first.run_id,
        "batch": int(batch_id),
        "offsets": high_watermarks(cluster, names) if names else {},
        "rows": sum(m.rows for m in messages if m is not None),
        "skipped": sum(m.skipped for m in messages if m is not None),
        "time": int(time.time() * 1000),
    }
    log.append(key, value)
    return value
