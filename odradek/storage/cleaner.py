"""Log compaction of one log: Kafka's ``Cleaner``, ``SkimpyOffsetMap`` and ``Throttler``.

A pass over a log, given a ``CleaningPlan`` made on the owner thread (``cleaner_manager``):

1. **Offset map.** Read the dirty section, [first dirty offset, first uncleanable offset),
   batch by batch, and map each key to its latest offset. The map has a memory budget
   (``log.cleaner.dedupe.buffer.size`` / threads × ``io.buffer.load.factor``); when full, the
   pass stops at a batch boundary: the map covers [first dirty, ``end_offset``).
2. **Groups.** The segments holding offsets below ``end_offset`` (from the first segment:
   the clean section is re-cleaned too) are grouped by size, each group's bytes within
   ``segment.bytes``, so small cleaned segments merge.
3. **Clean.** Each group is copied into ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``), keeping a record unless a later offset of its key is in the map,
   or it is a tombstone whose delete horizon has passed, or it has no key. The files are
   fsynced, then ``Log.replace_segments`` (on the owner thread) swaps them in.

What is kept, and why (offsets never change and order is kept; batches keep their base
offset, last offset delta, producer fields and leader epoch, so sequence numbers and
leader epochs stay right):

* records at or after ``end_offset`` (the map knows nothing of later versions);
* control batches and transactional batches, verbatim: there is no transaction index to
  tell committed from aborted data, and an aborted record must never shadow a committed
  one, so transactional records neither enter the map nor are removed (conservative);
* legacy (magic 0/1) batches, verbatim;
* tombstones, until the batch's delete horizon (KIP-534): the first pass that keeps a
  tombstone sets the batch's ``DELETE_HORIZON`` attribute bit with the horizon
  (now + ``delete.retention.ms``) in its base timestamp field (record timestamp deltas are
  rebased, so timestamps read the same); a later pass after the horizon drops it;
* the last batch of an active idempotent producer (empty if all its records go, without
  compression), so its sequence state survives a reload, as Kafka does.

No other empty batch is written: librdkafka treats a fetch response holding nothing but
empty batches as a message too large for its buffer (it doubles its fetch size, then fails).

A batch whose records are all kept is copied byte for byte; otherwise the kept records'
bytes are copied into a new batch (recompressed with the batch's codec).

Chunks and throttling: segments are read ``log.cleaner.io.buffer.size`` bytes at a time and
written in chunks of that size; every read and write is charged to the ``Throttler``
(``log.cleaner.io.max.bytes.per.second``, shared by all cleaner threads). The pass checks
for shutdown and for changes to the log (truncation, deletion) between batches.

Memory: Kafka's map spends 24 bytes a key (MD5 + offset); a Python dict entry costs about
``OffsetMap.ENTRY_BYTES``, so the buffer is honoured as memory and holds fewer keys per pass.
Keys shorter than 16 bytes are stored as they are; longer ones by their MD5 digest.

Thread rules: ``Cleaner`` runs in one cleaner thread; it only reads the plan's segments'
``.log`` files (positional reads on descriptors the log keeps open while ``log.cleaning``),
writes its own ``.cleaned`` files, and reaches the log only through ``call_owner``.
``Throttler`` is thread-safe; ``OffsetMap`` belongs to one thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..faults import fault_point
from ..protocol import batch as batch_format
from ..protocol import compression as codecs
from ..protocol.records import scan_records
from ..protocol.varint import encode_varlong, read_raw
from ._record_scan import batch_records_buffer, build_batch, decompressed_batch_limit
from .checkpoint import fsync_dir
from .file_records import FileRecords
from .log_config import LogConfig
from .offset_index import OffsetIndex
from .segment import (
    CLEANED_SUFFIX,
    INT32_MAX,
    LogSegment,
    batch_last_offset,
    batch_max_timestamp,
    segment_paths,
)
from .time_index import TimeIndex

if TYPE_CHECKING:
    from .log import Log

_log = logging.getLogger(__name__)

_md5 = hashlib.md5
_KEEP_AS_IS = batch_format.CONTROL_BIT | batch_format.TRANSACTIONAL_BIT
_HORIZON = batch_format.DELETE_HORIZON_BIT


class CleanerAborted(Exception):
    """The pass stopped: shutdown, or the log changed under it. Nothing was swapped since."""


# ---- offset map ---------------------------------------------------------------------------


class OffsetMap:
    """key → latest offset seen, within a memory budget (Kafka's SkimpyOffsetMap)."""

    ENTRY_BYTES = 128  # measured: dict slot + 16-byte bytes key + int value

    __slots__ = ("_map", "capacity", "latest_offset")

    def __init__(self, memory: int, load_factor: float = 0.9):
        self.capacity = max(int(memory * load_factor) // self.ENTRY_BYTES, 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._map[key if len(key) < 16 else _md5(key).digest()] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int | None:
        return self._map.get(key if len(key) < 16 else _md5(key).digest())

    def __len__(self) -> int:
        return len(self._map)

    @property
    def free(self) -> int:
        return self.capacity - len(self._map)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


# ---- throttling ---------------------------------------------------------------------------


class Throttler:
    """Keeps the bytes charged by all threads under ``rate`` bytes per second (inf: no limit)."""

    def __init__(self, rate: float, *, clock=time.monotonic):
        self.rate = rate
        self._clock = clock
        self._lock = threading.Lock()
        self._next_free = 0.0

    def throttle(self, nbytes: int, stop: threading.Event | None = None) -> None:
        rate = self.rate
        if rate == float("inf") or rate <= 0 or nbytes <= 0:
            return
        with self._lock:
            now = self._clock()
            self._next_free = max(self._next_free, now) + nbytes / rate
            delay = self._next_free - now
        if delay > 0.005:
            if stop is not None:
                stop.wait(delay)
            else:
                time.sleep(delay)


# ---- the plan and the result ---------------------------------------------------------------


class SegmentFile:
    """What the cleaner reads of a segment: its base offset and its ``.log`` (``log.batches``,
    ``log.path``). A LogSegment has both; the worker process opens read-only ones, and stands
    in for the active segment, which it never reads, with one that has no ``.log``."""

    __slots__ = ("base_offset", "log")

    def __init__(self, base_offset: int, log: FileRecords | None):
        self.base_offset = base_offset
        self.log = log


@dataclass
class CleaningPlan:
    """What the owner thread hands the cleaner: a snapshot of one log's state."""

    log: Log | None  # None in the worker process; touched only on the owner thread
    topic: str
    partition: int
    dir: str
    segments: list  # LogSegment (or SegmentFile) of every segment, the active one last
    sizes: list[int]  # their sizes when the plan was made
    first_dirty: int
    first_uncleanable: int
    truncations: int
    config: LogConfig
    producer_last_offsets: dict[int, int]  # active producer id → offset of its last batch
    now_ms: int
    dirty_ratio: float = 0.0

    def changed(self) -> bool:
        """Whether the log was closed, moved or truncated since (any thread may ask)."""
        log = self.log
        if log is None:
            return False
        return log.closed or log.dir != self.dir or log.truncations != self.truncations

    def to_spec(self) -> dict:
        """The plan as plain data for the worker process (segments by path, never by object)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "dir": self.dir,
            "segments": [(seg.base_offset, seg.log.path) for seg in self.segments[:-1]],
            "sizes": self.sizes[:-1],
            "active_base": self.segments[-1].base_offset,
            "first_dirty": self.first_dirty,
            "first_uncleanable": self.first_uncleanable,
            "truncations": self.truncations,
            "config": self.config,
            "producer_last_offsets": self.producer_last_offsets,
            "now_ms": self.now_ms,
            "dirty_ratio": self.dirty_ratio,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> CleaningPlan:
        """In the worker: open each inactive segment's ``.log`` read-only (FileNotFoundError if
        one was deleted meanwhile). The active segment is a stand-in that is never read."""
        opened: list[FileRecords] = []
        try:
            for _base, path in spec["segments"]:
                opened.append(FileRecords.open_read_only(path))
        except OSError:
            for records in opened:
                records.close()
            raise
        segments = [
            SegmentFile(base, records) for (base, _path), records in zip(spec["segments"], opened, strict=True)
        ]
        segments.append(SegmentFile(spec["active_base"], None))
        return cls(
            log=None,
            topic=spec["topic"],
            partition=spec["partition"],
            dir=spec["dir"],
            segments=segments,
            sizes=spec["sizes"] + [0],
            first_dirty=spec["first_dirty"],
            first_uncleanable=spec["first_uncleanable"],
            truncations=spec["truncations"],
            config=spec["config"],
            producer_last_offsets=spec["producer_last_offsets"],
            now_ms=spec["now_ms"],
            dirty_ratio=spec["dirty_ratio"],
        )

    def close_files(self) -> None:
        for seg in self.segments:
            if isinstance(seg, SegmentFile) and seg.log is not None:
                seg.log.close()


@dataclass
class CleanResult:
    """What one pass did, for the cleaner manager's checkpoint and the broker's metrics."""

    end_offset: int  # the new first dirty offset
    bytes_read: int = 0
    bytes_written: int = 0
    dirty_bytes: int = 0  # bytes of the dirty section that were mapped
    records_read: int = 0
    records_kept: int = 0
    groups: int = 0
    segments_before: int = 0
    elapsed_s: float = 0.0
    min_delete_horizon: int | None = None  # earliest horizon of a tombstone kept
    stats: dict = field(default_factory=dict)


# ---- writing a cleaned segment ------------------------------------------------------------


class _CleanedSegmentWriter:
    """Writes ``<base>.log.cleaned`` with its indexes, batch by batch, in chunks."""

    def __init__(self, dir: str, base: int, index_interval: int, max_index_size: int, chunk: int):
        self.paths = segment_paths(dir, base, CLEANED_SUFFIX)
        for path in self.paths:
            _unlink(path)
        self.base = base
        self.records = FileRecords(self.paths[0])
        self.oi = OffsetIndex(self.paths[1], base, max_index_size, writable=True)
        self.ti = TimeIndex(self.paths[2], base, max_index_size, writable=True)
        self.interval = index_interval
        self.chunk = chunk
        self.pending: list = []
        self.pending_bytes = 0
        self.position = 0
        self.since = 0
        self.max_ts = -1
        self.offset_of_max = base
        self.written = 0

    def add(self, data, last_offset: int, max_ts: int) -> int:
        """Queue one batch; returns the bytes flushed to the file (for the throttler)."""
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.offset_of_max = last_offset
        if self.since > self.interval:
            if not self.oi.is_full():
                self.oi.append(last_offset, self.position)
            if not self.ti.is_full():
                self.ti.maybe_append(self.max_ts, self.offset_of_max)
            self.since = 0
        size = len(data)
        self.pending.append(data)
        self.pending_bytes += size
        self.position += size
        self.since += size
        if self.pending_bytes >= self.chunk:
            return self._write()
        return 0

    def _write(self) -> int:
        n = self.pending_bytes
        if n:
            self.records.appendv(self.pending, n)
            self.written += n
        self.pending = []
        self.pending_bytes = 0
        return n

    def finish(self, mtime: float | None) -> int:
        """Write what is queued, add the final time index entry, fsync and close everything."""
        n = self._write()
        self.ti.maybe_append(self.max_ts, self.offset_of_max, skip_full_check=True)
        self.oi.trim_to_valid_size()
        self.ti.trim_to_valid_size()
        self.oi.flush()
        self.ti.flush()
        self.records.flush()
        self.oi.close()
        self.ti.close()
        self.records.close()
        if mtime is not None:
            os.utime(self.paths[0], (mtime, mtime))
        return n

    def discard(self) -> None:
        for closer in (self.oi.close_handler, self.ti.close_handler, self.records.close):
            try:
                closer()
            except OSError:
                pass
        for path in self.paths:
            _unlink(path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---- rebuilding a batch -------------------------------------------------------------------


def rebase_record(data: bytes, start: int, end: int, ts_delta: int) -> bytes:
    """The record at ``data[start:end]`` with its timestamp delta replaced by ``ts_delta``."""
    z, pos = read_raw(data, start, 5)
    pos += 1  # attributes
    attributes = data[pos - 1 : pos]
    _, after_ts = read_raw(data, pos, 10)
    rest = data[after_ts:end]
    body = attributes + encode_varlong(ts_delta) + rest
    return encode_varlong(len(body)) + body


# ---- the cleaner --------------------------------------------------------------------------


class Cleaner:
    """One cleaner thread's (or worker process's) compaction of a CleaningPlan: reads the
    plan's segments' ``.log`` files, writes ``<base>.log.cleaned`` and its indexes, and
    commits each group through ``swap`` on the owner thread. Never mutates a Log itself."""

    def __init__(
        self,
        *,
        map_memory: int = 128 * 1024 * 1024,
        load_factor: float = 0.9,
        io_buffer_size: int = 512 * 1024,
        throttler: Throttler | None = None,
        call_owner=None,
        swap=None,
        stop: threading.Event | None = None,
        name: str = "cleaner-0",
    ):
        """``swap(plan, old_segments) -> bool`` commits a group (default: ``replace_segments``
        on the owner thread through ``call_owner``; the worker process asks its parent)."""
        self.offset_map = OffsetMap(map_memory, load_factor)
        self.io_buffer_size = max(io_buffer_size, batch_format.HEADER_SIZE)
        self.throttler = throttler or Throttler(float("inf"))
        self.call_owner = call_owner or (lambda fn, *args: fn(*args))
        self.swap = swap or (lambda plan, old: self.call_owner(swap_on_owner, plan, old))
        self.stop = stop or threading.Event()
        self.name = name

    # ---- one pass ---------------------------------------------------------------------

    def clean(self, plan: CleaningPlan) -> CleanResult:
        """Clean ``plan``'s log once. Raises CleanerAborted (nothing half-done stays)."""
        t0 = time.monotonic()
        result = CleanResult(end_offset=plan.first_dirty)
        result.segments_before = len(plan.segments)
        omap = self.offset_map
        omap.clear()
        end_offset = self._build_offset_map(plan, result)
        result.end_offset = end_offset
        fault_point("cleaner-after-map")
        to_clean = [
            (seg, size)
            for seg, size in zip(plan.segments[:-1], plan.sizes[:-1], strict=True)
            if seg.base_offset < end_offset
        ]
        groups = self._group(plan, to_clean)
        for group in groups:
            self._check(plan)
            self._clean_group(plan, group, end_offset, result)
            result.groups += 1
        result.elapsed_s = time.monotonic() - t0
        omap.clear()
        return result

    def _check(self, plan: CleaningPlan) -> None:
        if self.stop.is_set():
            raise CleanerAborted("the cleaner is shutting down")
        if plan.changed():
            raise CleanerAborted(f"{plan.topic}-{plan.partition} changed during cleaning")

    # ---- phase 1: the offset map -------------------------------------------------------

    def _build_offset_map(self, plan: CleaningPlan, result: CleanResult) -> int:
        omap = self.offset_map
        first_dirty = plan.first_dirty
        stop_offset = plan.first_uncleanable
        end = first_dirty
        chunk = self.io_buffer_size
        for seg, size, nxt in zip(plan.segments, plan.sizes, plan.segments[1:] + [None], strict=True):
            if seg.base_offset >= stop_offset:
                break
            if nxt is not None and nxt.base_offset <= first_dirty:
                continue  # wholly clean
            read = 0
            for _pos, buf, rel, bsize in seg.log.batches(0, size, chunk_size=chunk, full=True):
                read += bsize
                if read >= chunk:
                    self._check(plan)
                    self.throttler.throttle(read, self.stop)
                    result.bytes_read += read
                    read = 0
                if buf[rel + batch_format.MAGIC_OFFSET] != 2:
                    last = batch_last_offset(buf, rel)
                    if last >= stop_offset:
                        break
                    end = max(end, last + 1)  # legacy: kept verbatim, never mapped
                    continue
                h = batch_format.read_header(buf, rel)
                if h.base_offset >= stop_offset:
                    break
                last = h.base_offset + h.last_offset_delta
                if last < first_dirty:
                    continue
                if not h.attributes & _KEEP_AS_IS:
                    count = h.record_count
                    if count > omap.free and len(omap):
                        result.bytes_read += read
                        return end  # full: the map covers [first_dirty, end)
                    records = self._records_of(plan, buf, rel, h)
                    if records is not None:
                        data, records = records
                        base = h.base_offset
                        for r in records:
                            key = r[2]
                            if key is not None:
                                omap.put(key, base + r[0])
                        result.records_read += count
                result.dirty_bytes += bsize
                end = last + 1
            result.bytes_read += read
            self.throttler.throttle(read, self.stop)
        return max(end, first_dirty)

    # ---- phase 2: grouping ---------------------------------------------------------------

    @staticmethod
    def _group(plan: CleaningPlan, segs: list[tuple[LogSegment, int]]) -> list[list[tuple[LogSegment, int]]]:
        """Consecutive segments whose total size fits ``segment.bytes`` and whose offsets fit
        one segment's relative offsets (Kafka's groupSegmentsBySize)."""
        max_size = plan.config.segment_bytes
        bases = [seg.base_offset for seg in plan.segments]
        next_base = {b: bases[i + 1] for i, b in enumerate(bases[:-1])}
        groups = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            total = segs[i][1]
            i += 1
            while i < len(segs):
                seg, size = segs[i]
                last_offset = next_base[seg.base_offset] - 1
                if total + size > max_size or last_offset - group[0][0].base_offset > INT32_MAX:
                    break
                group.append(segs[i])
                total += size
                i += 1
            groups.append(group)
        return groups

    # ---- phase 3: cleaning a group ---------------------------------------------------------

    def _clean_group(self, plan: CleaningPlan, group, end_offset: int, result: CleanResult) -> None:
        cfg = plan.config
        base = group[0][0].base_offset
        writer = _CleanedSegmentWriter(
            plan.dir, base, cfg.index_interval_bytes, cfg.segment_index_bytes, self.io_buffer_size
        )
        try:
            self._copy_group(plan, group, end_offset, writer, result)
            try:
                mtime = os.stat(group[-1][0].log.path).st_mtime
            except OSError:
                mtime = None
            result.bytes_written += writer.finish(mtime)
            fault_point("cleaner-after-cleaned")
            self._check(plan)
            swapped = self.swap(plan, [seg for seg, _size in group])
        except BaseException:
            writer.discard()
            raise
        if not swapped:
            writer.discard()
            raise CleanerAborted(f"{plan.topic}-{plan.partition} changed before the swap")
        fsync_dir(plan.dir)  # the renames done on the owner thread, made durable off it

    def _copy_group(self, plan: CleaningPlan, group, end_offset: int, writer, result: CleanResult) -> None:
        chunk = self.io_buffer_size
        throttle = self.throttler.throttle
        stop = self.stop
        read = 0
        for seg, size in group:
            for _pos, buf, rel, bsize in seg.log.batches(0, size, chunk_size=chunk, full=True):
                written = self._copy_batch(plan, buf, rel, bsize, end_offset, writer, result)
                if written:
                    throttle(written, stop)
                read += bsize
                if read >= chunk:
                    self._check(plan)
                    throttle(read, stop)
                    result.bytes_read += read
                    read = 0
        result.bytes_read += read
        throttle(read, stop)

    def _copy_batch(self, plan, buf, rel, size, end_offset, writer, result) -> int:
        """Write what stays of the batch at ``buf[rel:rel+size]``; returns bytes flushed."""
        if buf[rel + batch_format.MAGIC_OFFSET] != 2:
            return writer.add(
                buf[rel : rel + size], batch_last_offset(buf, rel), batch_max_timestamp(buf, rel)
            )
        h = batch_format.read_header(buf, rel)
        last = h.base_offset + h.last_offset_delta
        attributes = h.attributes
        if attributes & _KEEP_AS_IS:
            return writer.add(buf[rel : rel + size], last, h.max_timestamp)
        scanned = self._records_of(plan, buf, rel, h)
        if scanned is None:
            return writer.add(buf[rel : rel + size], last, h.max_timestamp)
        data, records = scanned
        now = plan.now_ms
        horizon = h.base_timestamp if attributes & _HORIZON else None
        omap = self.offset_map
        base = h.base_offset
        kept = []
        tombstone_kept = False
        droppable_later = False  # a kept tombstone that a pass after its horizon will drop
        for r in records:
            offset = base + r[0]
            if offset < end_offset:
                key = r[2]
                if key is None:
                    continue
                latest = omap.get(key)
                if latest is not None and latest > offset:
                    continue
                if r[3]:
                    if horizon is not None and now >= horizon:
                        continue
                    droppable_later = True
            if r[3]:
                tombstone_kept = True
            kept.append(r)
        result.records_kept += len(kept)
        needs_horizon = tombstone_kept and horizon is None
        if kept and len(kept) == len(records) and not needs_horizon:
            if droppable_later:
                result.min_delete_horizon = _min(result.min_delete_horizon, horizon)
            return writer.add(buf[rel : rel + size], last, h.max_timestamp)
        if not kept:
            if h.producer_id < 0 or plan.producer_last_offsets.get(h.producer_id) != last:
                return 0
            if not records:
                return writer.add(buf[rel : rel + size], last, h.max_timestamp)  # already empty
            batch = build_batch(
                h, attributes & ~batch_format.COMPRESSION_MASK, h.base_timestamp, h.max_timestamp, 0, b""
            )
            return writer.add(batch, last, h.max_timestamp)
        log_append_time = bool(attributes & batch_format.TIMESTAMP_TYPE_BIT)
        base_ts = h.base_timestamp
        if log_append_time:
            max_ts = h.max_timestamp
        else:
            max_ts = base_ts + max(r[1] for r in kept)
        if needs_horizon:
            horizon = now + plan.config.delete_retention_ms
            attributes |= _HORIZON
            if log_append_time:
                body = b"".join([data[r[4] : r[5]] for r in kept])
            else:
                body = b"".join([rebase_record(data, r[4], r[5], base_ts + r[1] - horizon) for r in kept])
            base_ts = horizon
        else:
            body = b"".join([data[r[4] : r[5]] for r in kept])
        if droppable_later:
            result.min_delete_horizon = _min(result.min_delete_horizon, horizon)
        batch = build_batch(h, attributes, base_ts, max_ts, len(kept), body)
        return writer.add(batch, last, max_ts)

    @staticmethod
    def _records_of(plan: CleaningPlan, buf, rel: int, h: batch_format.BatchHeader):
        """``(records section, scan_records of it)`` of the batch, or None for a batch that
        expands past the topic's decompression limit: it is kept as it is (its keys stay out
        of the map, so nothing it would supersede is removed either)."""
        try:
            data, s, e = batch_records_buffer(
                buf, rel, h, decompressed_batch_limit(plan.config.max_message_bytes)
            )
        except codecs.DecompressedTooLargeError as exc:
            _log.warning(
                "Cleaner keeps the batch at offset %d of %s-%d as it is: %s",
                h.base_offset,
                plan.topic,
                plan.partition,
                exc.message,
            )
            return None
        return data, scan_records(data, s, e, h.record_count)


def swap_on_owner(plan: CleaningPlan, old: list[LogSegment]) -> bool:
    """On the owner thread: swap the cleaned group in unless the log changed meanwhile (closed,
    moved, truncated, or one of the old segments gone or of another size)."""
    assert plan.log is not None, "a plan made on the owner thread has its log"
    if plan.changed():
        return False
    sizes = dict(zip((id(seg) for seg in plan.segments), plan.sizes, strict=True))
    if any(seg.size != sizes.get(id(seg)) for seg in old):
        return False
    return plan.log.replace_segments(old, plan.truncations)


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
