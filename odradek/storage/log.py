"""Log: one partition's log (Kafka's UnifiedLog + LocalLog + LogLoader) in ``<topic>-<partition>/``.

Directory contents (all Kafka's names and formats)::

    00000000000000000000.log / .index / .timeindex     segments (segment.LogSegment)
    00000000000000000000.snapshot                      producer state (producer_state)
    leader-epoch-checkpoint                            leader epochs (leader_epoch_cache)
    *.deleted                                          segments awaiting file.delete.delay.ms
    *.cleaned                                          the cleaner's output being written
    00000000000000000000.log.swap                      a cleaned segment committed, not yet renamed

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO, the next offset
to assign); ``recovery_point`` is the offset below which everything is fsynced. The broker
owns the high watermark (``Log`` only clamps it and keeps it <= LEO).

Append (leader): every v2 batch of the request buffer is validated as bytes (size, magic,
CRC-32C, record count vs offset delta, max.message.bytes, timestamps, producer id/epoch/
sequence), then offsets are assigned by rewriting the batch's first 16 bytes, and the whole
append goes out in one ``os.writev`` of [new prefix, untouched rest of batch, ...]: no payload
copy on the CreateTime path. LogAppendTime and recompression rewrite a copy of the batch.

Loading: clean shutdown → segments are trusted (indexes opened lazily, only the active
segment's tail is scanned). Unclean → every segment from the one holding the recovery point
is re-validated (torn/corrupt tails truncated, indexes rebuilt). Producer state comes from
the newest snapshot plus a replay of batch headers after it.

Compaction (``cleaner.py``): the cleaner reads inactive segments' ``.log`` files from a worker
thread and writes ``<base>.log.cleaned`` (+ indexes); ``replace_segments`` (owner thread) swaps
the result in: ``.log.cleaned`` → ``.log.swap`` (the commit point), old segments renamed
``.deleted``, ``.log.swap`` → ``.log``, and the segment list replaced in one assignment, so
readers see either the old segments or the new one. Loading finishes an interrupted swap:
``.cleaned`` files are dropped (the old segments are intact), a ``.log.swap`` replaces every
segment whose base offset lies in [its base offset, its next offset) — at least the one at its
own base offset, even when it is empty — and is renamed into place (Kafka's rule). Old segments past that range whose records were all cleaned away may
survive such a crash: they hold only superseded records, above the swap's offsets and below
the next segment's, so the log stays ordered and complete, and the next pass removes them.

Thread rules: one owner (the broker's event loop) calls everything, except ``flush`` /
``flush_if_due``, which may run in a worker thread concurrently with appends and reads, and
the cleaner's reads of inactive segments' files (``seg.log.pread``/``batches``) from its
thread (the broker's cleaner reads them from a worker process, through descriptors of its
own). ``_segments``/``_bases`` are never mutated in place, only replaced under ``_lock``,
so any thread may take a consistent snapshot of them. While ``cleaning`` is set (by the
cleaner manager, owner thread) no segment file of this log is closed: expired ``.deleted``
files wait, so an in-process cleaner never reads a closed or reused descriptor. The cleaner
never mutates the log: ``replace_segments`` runs on the owner thread.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import shutil
import struct
import threading
import time
from typing import NamedTuple

import crc32c

from ..faults import fault_point
from ..metrics import LockedHistogram
from ..protocol import batch as B
from ..protocol import errors
from ._record_scan import null_key_indices, record_timestamps
from .checkpoint import fsync_dir
from .file_records import FileRecords, FileSlice
from .leader_epoch_cache import LeaderEpochFileCache
from .log_config import LONG_MAX, LogConfig
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    batch_last_offset,
    segment_paths,
)
from .txn_index import AbortedTxn
from .txn_index import write_entries as write_txn_entries

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_pack_prefix = _PREFIX.pack
_crc = crc32c.crc32c
_ATTR = B.ATTRIBUTES_OFFSET
_CONTROL = B.CONTROL_BIT
_NO_TS = B.NO_TIMESTAMP
_ABORT = 0  # control record type of an ABORT marker (protocol.control_records.ABORT)

# How long each flush that wrote something took, for the whole process as Kafka's
# LogFlushStats is (exported as kafka_log_logflushstats_logflushrateandtimems).
LOG_FLUSH_TIMES = LockedHistogram()


_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class UnexpectedAppendOffsetError(Exception):
    """A follower append starts below the log end offset."""


class LogAppendInfo:
    """What an append did: offsets assigned (or, for a duplicate, the original ones)."""

    __slots__ = (
        "first_offset",
        "last_offset",
        "log_append_time",
        "log_start_offset",
        "record_count",
        "duplicate",
        "max_timestamp",
        "offset_of_max_timestamp",
        "valid_bytes",
        "num_batches",
    )

    def __init__(
        self,
        first_offset: int,
        last_offset: int,
        log_append_time: int = -1,
        log_start_offset: int = 0,
        record_count: int = 0,
        duplicate: bool = False,
        max_timestamp: int = -1,
        offset_of_max_timestamp: int = -1,
        valid_bytes: int = 0,
        num_batches: int = 0,
    ):
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.record_count = record_count
        self.duplicate = duplicate
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.valid_bytes = valid_bytes
        self.num_batches = num_batches

    def __repr__(self) -> str:
        return (
            f"LogAppendInfo(first={self.first_offset}, last={self.last_offset}, records={self.record_count}, "
            f"log_append_time={self.log_append_time}, duplicate={self.duplicate})"
        )


class LogReadResult(NamedTuple):
    records: FileSlice | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``my-topic-3`` → (``my-topic``, 3). Raises ValueError for anything else."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"Not a partition directory name: {dir_name!r}")
    return topic, int(partition)


class Log:
    def __init__(
        self,
        dir: str,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
        now_ms: int | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        on_disk_error=None,
    ):
        self.dir = os.path.abspath(dir)
        name = os.path.basename(self.dir)
        try:
            self.topic, self.partition = parse_topic_partition(name)
        except ValueError:
            self.topic, self.partition = name, -1
        self._lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[LogSegment] = []
        self._max_pos_cache: tuple[int, int, int] | None = None
        self._dir_dirty = False
        self._roll_flush_offset = -1
        self._unflushed_messages = 0
        self._closed = False
        self.cleaning = False  # set by the cleaner manager (owner thread) while a pass runs
        self._truncations = 0  # bumped by every truncation: the cleaner's swap checks it
        self.offline_reason: str | None = None  # set once a write to the disk failed
        self._on_disk_error = on_disk_error  # (log, OSError) -> None: the log manager's
        self.update_config(config or LogConfig())
        now = _now_ms() if now_ms is None else now_ms
        self._last_flush_ms = now
        if not os.path.isdir(self.dir):
            os.makedirs(self.dir, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir)
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        with self.leader_epoch_cache.deferred_flush(on_error=self.disk_error):
            self._load(log_start_offset, recovery_point, had_clean_shutdown, now, high_watermark)
        hw = self._log_start if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start), self._leo)
        for seg in self._segments:  # a loaded log holds no descriptor until it is used
            seg.release()
        # Writable (preallocated) indexes once the active segment is next used; reading them
        # while loading needed no preallocation.
        self._segments[-1].resize_indexes(self.config.segment_index_bytes)

    # ---- configuration -------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._segment_bytes = config.segment_bytes
        # Appends larger than this are refused; -1 once the log dir is offline, so that
        # _write's size check also refuses every write, at no cost to the hot path.
        self._write_limit = -1 if self.offline_reason else config.segment_bytes
        self._segment_ms = config.segment_ms
        if config.compact and config.max_compaction_lag_ms > 0:
            # KIP-354: roll in time for the cleaner to honour max.compaction.lag.ms.
            self._segment_ms = min(config.segment_ms, config.max_compaction_lag_ms)
        self._compact = config.compact
        self._max_message_bytes = config.max_message_bytes
        self._timestamp_type = config.timestamp_type
        self._codec = config.compression_codec
        self._ts_before = config.timestamp_before_max_ms
        self._ts_after = config.timestamp_after_max_ms
        # Whether a batch may be written as it came, after the checks alone: no key check
        # (compaction), no broker timestamp, no timestamp bounds. See _append_plain_batch.
        self._plain_appends = (
            not config.compact
            and config.timestamp_type != B.LOG_APPEND_TIME
            and self._ts_before == LONG_MAX
            and self._ts_after == LONG_MAX
        )
        self._flush_messages = config.flush_messages
        self._flush_ms = config.flush_ms

    def _jitter(self) -> int:
        cfg = self.config
        if cfg.segment_jitter_ms <= 0:
            return 0
        return int.from_bytes(os.urandom(4), "big") % min(cfg.segment_jitter_ms, cfg.segment_ms)

    def _new_segment(self, base_offset: int, now_ms: int, active: bool = True, create: bool = True) -> LogSegment:
        cfg = self.config
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            roll_jitter_ms=self._jitter(),
            now_ms=now_ms,
            active=active,
            create=create,
        )

    # ---- loading ------------------------------------------------------------------------

    def _load(
        self, log_start_offset: int, recovery_point: int, clean: bool, now: int, high_watermark: int | None
    ) -> None:
        self._complete_swaps()
        bases = []
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")):
                _unlink(path)
                continue
            stem, dot, ext = name.partition(".")
            if not stem.isdigit() or len(stem) != 20:
                continue
            ext = "." + ext
            if ext == LOG_SUFFIX:
                bases.append(int(stem))
            elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if not os.path.exists(os.path.join(self.dir, stem + LOG_SUFFIX)):
                    _unlink(path)  # orphan index
        bases.sort()
        segments = []
        for base in bases:
            segments.append(self._new_segment(base, now, active=False, create=False))
        self._segments = segments
        self._bases = bases
        recover_from = len(segments)
        if not clean and segments:
            recover_from = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
            self.leader_epoch_cache.truncate_from_end(segments[recover_from].base_offset)
        i = 0
        while i < len(segments):
            seg = segments[i]
            if seg.size == 0:
                seg.empty_index_files()  # nothing to index; stale entries would point past the end
            elif i >= recover_from or not seg.indexes_exist():
                truncated = seg.recover(
                    self._on_recovered_batch, on_cut=self._warn_cut, on_index_error=self.disk_error
                )
                if i < len(segments) - 1:
                    if truncated:
                        # Everything after a corrupt point is suspect: drop the later segments.
                        for later in segments[i + 1 :]:
                            _log.warning(
                                "Recovery of %s removed segment %s: it follows the cut above "
                                "(%d bytes, offsets from %d on)",
                                self.dir,
                                os.path.basename(later.log.path),
                                later.size,
                                later.base_offset,
                            )
                            later.delete_files()
                        del segments[i + 1 :]
                        del bases[i + 1 :]
                    else:
                        seg.on_become_inactive()
                seg.release(sync=bool(truncated))
            i += 1
        if not self._segments:
            # A log without segments starts at offset 0 with no file until its first write
            # (creating thousands of partitions then costs one mkdir each); any other start
            # offset is written down at once in the segment's file name.
            seg = self._new_segment(log_start_offset, now, create=log_start_offset != 0)
            self._segments = [seg]
            self._bases = [log_start_offset]
            self._dir_dirty = True
        self._leo = self._compute_leo()
        self._log_start = max(log_start_offset, self._bases[0])
        if self._log_start > self._leo:
            self._log_start = self._leo
        self._recovery_point = self._leo if clean else min(recovery_point, self._leo)
        if high_watermark is not None and high_watermark > self._leo:
            _log.warning(
                "Recovery of %s ended the log at offset %d, below its checkpointed high watermark %d: "
                "%d acknowledged records were lost (a crash loses what was not fsynced yet, as in "
                "Kafka; the topic config flush.messages=1 fsyncs each write before it is acknowledged)",
                self.dir,
                self._leo,
                high_watermark,
                high_watermark - self._leo,
            )
        cache = self.leader_epoch_cache
        # Epochs starting past the end are gone; one starting at the end stays (it is what
        # becoming leader writes), so a never-written partition loads without a write.
        cache.truncate_from_end(self._leo + 1)
        cache.truncate_from_start(self._log_start)
        self.producer_state.remove_stray_snapshots(self._bases)
        self._rebuild_producer_state(now)

    def _warn_cut(self, path: str, position: int, next_offset: int, reason: str, removed: int) -> None:
        _log.warning(
            "Recovery of %s cut %s at byte %d: %s; removed %d bytes holding offsets from %d on",
            self.dir,
            os.path.basename(path),
            position,
            reason,
            removed,
            next_offset,
        )

    def _complete_swaps(self) -> None:
        """Finish what a crash interrupted in ``replace_segments`` (see the module docstring).

        ``.deleted`` and ``.cleaned`` files go first (the old segments they shadow are intact or
        already replaced); then each ``<base>.log.swap`` removes the files of every segment whose
        base offset lies in [base, the swap's next offset) and takes the ``.log`` name. Index
        files of a swapped segment are missing afterwards and get rebuilt from the log.
        """
        names = os.listdir(self.dir)
        swaps = []
        committed_txn_indexes = []  # <base>.txnindex.cleaned whose .log.cleaned was renamed: keep
        listed = set(names)
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith(TXN_INDEX_SUFFIX + CLEANED_SUFFIX) and (
                name[:20] + LOG_SUFFIX + CLEANED_SUFFIX not in listed
            ):
                committed_txn_indexes.append(path)
            elif name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                _unlink(path)
            elif name.endswith(SWAP_SUFFIX):
                stem = name[: -len(SWAP_SUFFIX)]
                if stem.endswith(LOG_SUFFIX) and stem[:20].isdigit() and len(stem) == 20 + len(LOG_SUFFIX):
                    swaps.append(int(stem[:20]))
                else:
                    _unlink(path)  # an index .swap: rebuilt from the log instead
        if not swaps:
            for path in committed_txn_indexes:
                os.replace(path, path[: -len(CLEANED_SUFFIX)])
            return
        for base in sorted(swaps):
            swap_path = os.path.join(self.dir, f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}")
            swap = FileRecords(swap_path)
            try:
                end = None
                for _pos, buf, rel, _size in swap.batches(0, chunk_size=1 << 20):
                    end = batch_last_offset(buf, rel) + 1
            finally:
                swap.close()
            # An empty swap (everything in the group was cleaned away) still replaces the
            # segment at its own base offset, so the log keeps its start offset.
            end = base + 1 if end is None else max(end, base + 1)
            for name in os.listdir(self.dir):
                stem, dot, ext = name.partition(".")
                if dot and len(stem) == 20 and stem.isdigit() and base <= int(stem) < end:
                    if "." + ext in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                        _unlink(os.path.join(self.dir, name))
            os.replace(swap_path, swap_path[: -len(SWAP_SUFFIX)])
        for path in committed_txn_indexes:
            os.replace(path, path[: -len(CLEANED_SUFFIX)])
        fsync_dir(self.dir)

    def _compute_leo(self) -> int:
        return self._segments[-1].read_next_offset()

    def _on_recovered_batch(self, header) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                self.leader_epoch_cache.assign(epoch, header.base_offset)

    def _rebuild_producer_state(self, now: int) -> None:
        """Producer state from the newest snapshot plus a replay of the batches after it. The
        aborted-transaction indexes of the replayed range are rebuilt on the way (markers
        are read from the log), so they are as trustworthy as the log itself."""
        psm = self.producer_state
        leo = self._leo
        psm.truncate_and_reload(self._log_start, leo, now)
        start = psm.map_end_offset
        if leo > start:
            i = max(bisect.bisect_right(self._bases, start) - 1, 0)
            for seg in self._segments[i:]:
                seg.txn_index.truncate_to(start)
                position = 0
                if seg.base_offset < start:
                    found = seg.translate_offset(start)
                    if found is None:
                        continue
                    position = found[1]
                for pos, header in seg.batch_headers(position):
                    if header is None or header.base_offset + header.last_offset_delta < start:
                        continue
                    if header.is_control and header.producer_id >= 0:
                        marker = _marker_of(seg.log.pread(pos, header.size))
                        if marker is not None:
                            self._complete_txn(
                                header.producer_id,
                                header.producer_epoch,
                                header.base_offset,
                                marker,
                                header.max_timestamp,
                                seg,
                            )
                    else:
                        psm.replay(header)
        psm.update_map_end_offset(leo)

    def _complete_txn(self, producer_id, epoch, offset, marker, timestamp, segment=None) -> None:
        """A transaction marker at ``offset``: close the producer's transaction and, for an
        ABORT, index it in the segment holding the marker (the active one when appending)."""
        psm = self.producer_state
        control_type, coordinator_epoch = marker
        lso = psm.last_stable_offset_after(producer_id, offset)
        first = psm.complete_txn(producer_id, epoch, offset, coordinator_epoch, timestamp)
        if first >= 0 and control_type == _ABORT:
            seg = segment if segment is not None else self._segments[-1]
            seg.update_txn_index(AbortedTxn(producer_id, first, offset, lso))

    # ---- transactions -----------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest undecided transaction below it."""
        hw = self._hw
        unstable = self.producer_state.first_unstable_offset(hw)
        return hw if unstable is None or unstable > hw else max(unstable, self._log_start)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Fetch, read_committed).

        Markers follow their data, so the search starts at the segment holding ``fetch_offset``
        and stops at the first index entry written when every transaction that began below
        ``upper_bound`` had ended (see ``txn_index``).
        """
        segments = self._segments
        i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        out: list[AbortedTxn] = []
        for seg in segments[i:]:
            found, complete = seg.collect_aborted_txns(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def fetch_upper_bound(self, first_offset: int, max_offset: int) -> int:
        """An offset past every batch a read starting at ``first_offset`` returned: the next
        segment's base offset (a read never crosses segments), capped at ``max_offset``."""
        bases = self._bases
        i = bisect.bisect_right(bases, first_offset)
        return min(bases[i], max_offset) if i < len(bases) else max_offset

    # ---- properties -----------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._hw = min(max(offset, self._log_start), self._leo)

    def raise_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset`` (never past the log end); whether it moved."""
        if offset > self._hw:
            hw = min(offset, self._leo)
            if hw > self._hw:
                self._hw = hw
                return True
        return False

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self._leo)

    def leader_epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epoch_cache.epoch_for_offset(offset)

    # ---- append -----------------------------------------------------------------------

    def append_as_leader(
        self,
        buf,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        timestamp_type: int | str | None = None,
        max_message_bytes: int | None = None,
        compression_type: str | None = None,
        origin: str = "client",
    ) -> LogAppendInfo:
        """Validate, assign offsets to and write every v2 batch of ``buf`` (a Produce request's
        records for this partition). Raises a KafkaError subclass; nothing is written then.

        ``origin``: ``"client"`` (Produce: sequences checked, control batches refused) or
        ``"coordinator"`` (group/transaction coordinators: control batches allowed, only
        producer epochs checked), as Kafka's AppendOrigin.
        """
        if now_ms is None:
            now_ms = _now_ms()
        if (
            self._plain_appends
            and origin == "client"
            and timestamp_type is None
            and max_message_bytes is None
            and compression_type is None
        ):
            info = self._append_plain_batch(buf, leader_epoch, now_ms)
            if info is not None:
                return info
        from_client = origin == "client"
        if timestamp_type is None:
            timestamp_type = self._timestamp_type
        elif isinstance(timestamp_type, str):
            timestamp_type = B.LOG_APPEND_TIME if timestamp_type == "LogAppendTime" else B.CREATE_TIME
        if max_message_bytes is None:
            max_message_bytes = self._max_message_bytes
        codec = self._codec if compression_type is None else _codec_of(compression_type)
        log_append_time = timestamp_type == B.LOG_APPEND_TIME
        min_ts = now_ms - self._ts_before if self._ts_before < now_ms else -(1 << 63)
        max_ts_allowed = now_ms + self._ts_after if self._ts_after < LONG_MAX - now_ms else LONG_MAX
        check_ts = not log_append_time and (self._ts_before != LONG_MAX or self._ts_after != LONG_MAX)

        mv = memoryview(buf)
        total_len = len(mv)
        psm = self.producer_state
        producers = psm.producers
        pending = None
        idempotent = []
        parts = []
        infos = []
        next_offset = self._leo
        first_offset = next_offset
        records = 0
        end = 0
        max_ts = _NO_TS
        offset_of_max = -1
        for pos, h in B.iter_headers(buf):
            if h is None:
                raise errors.UnsupportedForMessageFormatError(
                    f"Magic {buf[pos + B.MAGIC_OFFSET]} batches are not accepted; send v2 record batches"
                )
            size = h.batch_length + 12
            end = pos + size
            if size > max_message_bytes:
                raise errors.MessageTooLargeError(
                    f"Batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
                )
            if _crc(mv[pos + _ATTR : end]) != h.crc:
                raise errors.CorruptMessageError(f"Batch at position {pos} failed its CRC-32C check")
            count = h.record_count
            delta = h.last_offset_delta
            if count <= 0 or delta != count - 1:
                raise errors.InvalidRecordError(
                    f"Batch record count {count} does not match its last offset delta {delta}"
                )
            attributes = h.attributes
            if attributes & _CONTROL and from_client:
                raise errors.InvalidRecordError("Clients are not allowed to write control records")
            if self._compact and not attributes & _CONTROL:
                keyless = null_key_indices(mv, pos, h)
                if keyless:
                    # Kafka's LogValidator.validateKey: INVALID_RECORD, naming each record (KIP-467).
                    why = (
                        "Compacted topic cannot accept message without key in topic partition "
                        f"{self.topic}-{self.partition}"
                    )
                    raise _rejected(errors.InvalidRecordError, count, [(i, why) for i in keyless])
            batch_max_ts = h.max_timestamp
            if check_ts and any(
                ts != _NO_TS and not min_ts <= ts <= max_ts_allowed for ts in (h.base_timestamp, batch_max_ts)
            ):
                # The batch's first or latest timestamp is out of bounds: name every record that
                # is (decoding records only on this error path).
                allowed = f"the allowed range [{min_ts}, {max_ts_allowed}]"
                bad = [
                    (i, f"Timestamp {t} of record {i} is out of {allowed}")
                    for i, t in enumerate(record_timestamps(mv, pos, h))
                    if t != _NO_TS and not min_ts <= t <= max_ts_allowed
                ]
                if bad:
                    raise _rejected(errors.InvalidTimestampError, count, bad)
                raise errors.InvalidTimestampError(
                    f"Timestamp of the batch at position {pos} is out of {allowed}"
                )
            pid = h.producer_id
            if pid < 0 and attributes & B.TRANSACTIONAL_BIT:
                raise errors.InvalidRecordError("A transactional batch needs a producer id")
            if pid >= 0:
                if h.base_sequence < 0 and from_client:
                    raise errors.InvalidRecordError(
                        f"Invalid sequence number {h.base_sequence} for producer {pid}"
                    )
                if from_client:
                    if pending is None:
                        pending = {}
                    duplicate = psm.check(pid, h.producer_epoch, h.base_sequence, h.last_sequence, pending)
                    if duplicate is not None:
                        return LogAppendInfo(
                            duplicate.first_offset,
                            duplicate.last_offset,
                            duplicate.timestamp if log_append_time else -1,
                            self._log_start,
                            duplicate.offset_delta + 1,
                            True,
                            duplicate.timestamp,
                            duplicate.last_offset,
                        )
                elif attributes & _CONTROL:
                    marker = _marker_of(mv[pos:end])
                    if marker is None:
                        raise errors.InvalidRecordError("A control batch must hold one transaction marker")
                    psm.check_marker(pid, h.producer_epoch, marker[1])
                elif pid in producers and h.producer_epoch < producers[pid].epoch:
                    raise errors.InvalidProducerEpochError(
                        f"Stale epoch {h.producer_epoch} for producer {pid}"
                    )
                idempotent.append((h, next_offset, marker if attributes & _CONTROL else None))
            base = next_offset
            last = base + delta
            batch_codec = attributes & 7
            if (codec is not None and codec != batch_codec) or log_append_time:
                data = bytearray(mv[pos:end])
                if codec is not None and codec != batch_codec:
                    data = bytearray(_recompress(data, codec, self.config))
                    size = len(data)
                if log_append_time:
                    B.set_log_append_time(data, 0, now_ms)
                    batch_max_ts = now_ms
                _PREFIX.pack_into(data, 0, base, size - 12, leader_epoch)
                parts.append(data)
            else:
                parts.append(_pack_prefix(base, h.batch_length, leader_epoch))
                parts.append(mv[pos + 16 : end])
            infos.append((size, last, batch_max_ts))
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max = last
            records += count
            next_offset = last + 1
        if end != total_len or not infos:
            raise errors.CorruptMessageError(
                f"Records for {self.topic}-{self.partition} are truncated or malformed at byte {end} of {total_len}"
            )
        total = 0
        for info in infos:
            total += info[0]
        last_offset = next_offset - 1
        self._write(parts, total, infos, first_offset, last_offset, max_ts, now_ms)
        for h, base, marker in idempotent:
            if marker is not None:
                self._complete_txn(h.producer_id, h.producer_epoch, base, marker, h.max_timestamp)
                continue
            delta = h.last_offset_delta
            psm.update(
                h.producer_id,
                h.producer_epoch,
                h.last_sequence,
                base + delta,
                delta,
                now_ms if log_append_time else h.max_timestamp,
                base,
                h.is_transactional,
            )
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
            self.assign_epoch(leader_epoch, first_offset)
        self._after_append(records, next_offset)
        return LogAppendInfo(
            first_offset,
            last_offset,
            now_ms if log_append_time else -1,
            self._log_start,
            records,
            False,
            max_ts,
            offset_of_max,
            total,
            len(infos),
        )

    def _append_plain_batch(self, buf, leader_epoch: int, now_ms: int) -> LogAppendInfo | None:
        """The usual append, shortened: ``buf`` is a single valid v2 batch without producer id,
        transactional or control bit, in the topic's codec. Returns None, having changed
        nothing, for anything else, valid or not: the general path then appends it, or
        raises the error that explains it."""
        if len(buf) < B.HEADER_SIZE:
            return None
        _, batch_length, _, magic, crc, attributes, delta, _, max_ts, pid, _, _, count = B.header_fields(buf)
        size = batch_length + 12
        if (
            size != len(buf)
            or magic != 2
            or pid >= 0
            or attributes & (_CONTROL | B.TRANSACTIONAL_BIT)
            or count <= 0
            or delta != count - 1
            or size > self._max_message_bytes
            or (self._codec is not None and self._codec != attributes & 7)
        ):
            return None
        mv = memoryview(buf)
        if _crc(mv[_ATTR:]) != crc:
            return None
        if max_ts < _NO_TS:  # a negative timestamp counts as none, as in the general path
            max_ts = _NO_TS
        base = self._leo
        last = base + delta
        parts = [_pack_prefix(base, batch_length, leader_epoch), mv[16:]]
        self._write(parts, size, ((size, last, max_ts),), base, last, max_ts, now_ms)
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
            self.assign_epoch(leader_epoch, base)
        self._after_append(count, last + 1)
        offset_of_max = last if max_ts > _NO_TS else -1
        return LogAppendInfo(base, last, -1, self._log_start, count, False, max_ts, offset_of_max, size, 1)

    def append_as_follower(self, buf, *, now_ms: int | None = None) -> LogAppendInfo | None:
        """Append batches that already carry offsets (replication). A partial trailing batch is
        ignored; returns None when ``buf`` holds no complete batch.
        """
        if now_ms is None:
            now_ms = _now_ms()
        mv = memoryview(buf)
        infos = []
        headers = []
        end = 0
        records = 0
        max_ts = _NO_TS
        offset_of_max = -1
        expected = self._leo
        for pos, h in B.iter_headers(buf):
            if h is None:
                base_offset, size = B.read_offset_and_size(buf, pos)
                last = base_offset
                batch_max_ts = _NO_TS
                count = 1
            else:
                size = h.batch_length + 12
                if _crc(mv[pos + _ATTR : pos + size]) != h.crc:
                    raise errors.CorruptMessageError(
                        f"Replicated batch at position {pos} failed its CRC check"
                    )
                base_offset = h.base_offset
                last = base_offset + h.last_offset_delta
                batch_max_ts = h.max_timestamp
                count = h.record_count
                headers.append((h, pos))
            if base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"Replicated batch at offset {base_offset} is below the expected next offset {expected}"
                )
            expected = last + 1
            end = pos + size
            infos.append((size, last, batch_max_ts))
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max = last
            records += count
        if not infos:
            return None
        first_offset = B.read_offset_and_size(buf, 0)[0]
        last_offset = expected - 1
        self._write(mv[:end], end, infos, first_offset, last_offset, max_ts, now_ms)
        psm = self.producer_state
        cache = self.leader_epoch_cache
        for h, pos in headers:
            if h.is_control:
                marker = _marker_of(mv[pos : pos + h.size])
                if marker is not None:
                    self._complete_txn(
                        h.producer_id, h.producer_epoch, h.base_offset, marker, h.max_timestamp
                    )
            else:
                psm.replay(h)
            epoch = h.partition_leader_epoch
            if epoch >= 0 and epoch != cache.latest_epoch:
                self.assign_epoch(epoch, h.base_offset)
        self._after_append(records, expected)
        return LogAppendInfo(
            first_offset,
            last_offset,
            -1,
            self._log_start,
            records,
            False,
            max_ts,
            offset_of_max,
            end,
            len(infos),
        )

    def _write(self, parts, total, infos, first_offset, last_offset, max_ts, now_ms) -> None:
        if total > self._write_limit:
            if self.offline_reason is not None:
                raise errors.KafkaStorageErrorError(
                    f"{self.topic}-{self.partition} is read-only: {self.offline_reason}"
                )
            raise errors.RecordListTooLargeError(
                f"Append of {total} bytes exceeds segment.bytes {self._segment_bytes}"
            )
        try:
            seg = self._segments[-1]
            if seg.should_roll(total, max_ts, last_offset, now_ms, self._segment_bytes, self._segment_ms):
                seg = self.roll(now_ms, first_offset)
            seg.append(parts, total, infos)
        except (OSError, errors.KafkaStorageErrorError) as e:
            raise self.disk_error(e) from e

    def disk_error(self, exc: BaseException) -> errors.KafkaStorageErrorError:
        """Report a failed write of this log (a full disk, an I/O error) to the log manager,
        which takes the log dir offline; returns the error to answer with."""
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        if (
            isinstance(cause, OSError)
            and cause.errno not in (errno.EMFILE, errno.ENFILE)  # descriptors ran out, not the disk
            and self._on_disk_error is not None
        ):
            self._on_disk_error(self, cause)
        if isinstance(exc, errors.KafkaStorageErrorError):
            return exc
        return errors.KafkaStorageErrorError(f"Write to {self.dir} failed: {exc}")

    def set_offline(self, reason: str) -> None:
        """Refuse every further write (its log dir failed); reads go on."""
        self.offline_reason = reason
        self._write_limit = -1

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that leader ``epoch`` starts at ``start_offset`` (a new leader, or the first
        batch of its epoch, already written). A failed checkpoint write takes the dir offline
        and keeps the epoch in memory: the append stands, and recovery reads epochs from the
        batches anyway."""
        try:
            self.leader_epoch_cache.assign(epoch, start_offset)
        except OSError as e:
            self.disk_error(e)

    def _after_append(self, records: int, next_offset: int) -> None:
        self._leo = next_offset
        self.producer_state.map_end_offset = next_offset
        self._unflushed_messages += records
        if self._unflushed_messages >= self._flush_messages:
            try:
                self.flush()
            except OSError as e:
                raise self.disk_error(e) from e  # written, but maybe not durable: say so

    # ---- roll ----------------------------------------------------------------------------

    def roll(self, now_ms: int | None = None, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at the log end offset."""
        if now_ms is None:
            now_ms = _now_ms()
        new_offset = self._leo if expected_next_offset is None else max(expected_next_offset, self._leo)
        active = self._segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return active
        if new_offset <= active.base_offset:
            raise errors.KafkaStorageErrorError(
                f"Cannot roll {self.dir} to offset {new_offset}: active segment starts at {active.base_offset}"
            )
        active.on_become_inactive()
        psm = self.producer_state
        psm.update_map_end_offset(new_offset)
        psm.take_snapshot()
        seg = self._new_segment(new_offset, now_ms)
        with self._lock:
            self._segments = self._segments + [seg]
            self._bases = self._bases + [new_offset]
            self._dir_dirty = True
            self._roll_flush_offset = max(self._roll_flush_offset, new_offset)
        return seg

    # ---- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> LogReadResult:
        """Batches from the one holding ``fetch_offset``, up to ``max_bytes`` (the whole first
        batch when ``min_one_message``), never holding an offset >= ``max_offset`` (exclusive
        bound, e.g. the high watermark; default the LEO).
        """
        leo = self._leo
        start = self._log_start
        if fetch_offset < start or fetch_offset > leo:
            raise errors.OffsetOutOfRangeError(
                f"Offset {fetch_offset} is out of range [{start}, {leo}] for {self.topic}-{self.partition}"
            )
        if max_offset is None or max_offset > leo:
            max_offset = leo
        if fetch_offset >= max_offset:
            return LogReadResult(None, start, leo, self._hw)
        segments = self._segments
        bases = self._bases
        if max_offset == leo:
            max_index, max_position = len(segments) - 1, segments[-1].size
        else:
            max_index, max_position = self._position_of(max_offset, segments, bases)
        i = bisect.bisect_right(bases, fetch_offset) - 1
        while i <= max_index:
            seg = segments[i]
            slice_ = seg.read(
                fetch_offset, max_bytes, max_position if i == max_index else None, min_one_message
            )
            if slice_ is not None:
                if slice_.size <= 0:
                    break
                return LogReadResult(slice_, start, leo, self._hw)
            i += 1
        return LogReadResult(None, start, leo, self._hw)

    def _position_of(self, offset: int, segments, bases) -> tuple[int, int]:
        """(segment index, byte position) where the batch holding ``offset`` starts."""
        cache = self._max_pos_cache
        if cache is not None and cache[0] == offset and cache[1] < len(segments):
            return cache[1], cache[2]
        i = bisect.bisect_right(bases, offset) - 1
        seg = segments[i]
        found = seg.translate_offset(offset)
        position = seg.size if found is None else found[1]
        self._max_pos_cache = (offset, i, position)
        return i, position

    # ---- timestamps ------------------------------------------------------------------------

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= ``timestamp``; None if none.

        ListOffsets' special values: -2 → (log start, -1), -1 → (LEO, -1), -3 → the max
        timestamp record (see ``max_timestamp_and_offset``). The broker caps "latest" at its
        high watermark / last stable offset.
        """
        if timestamp == -2:
            return self._log_start, -1
        if timestamp == -1:
            return self._leo, -1
        if timestamp == -3:
            return self.max_timestamp_and_offset()
        start = self._log_start
        for seg in self._segments:
            if seg.max_timestamp_so_far >= timestamp and seg.size:
                found = seg.find_offset_by_timestamp(timestamp, start)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best = None
        best_ts = -1
        for seg in self._segments:
            if seg.size and seg.max_timestamp_so_far > best_ts:
                best, best_ts = seg, seg.max_timestamp_so_far
        if best is None:
            return None
        return best.find_max_timestamp_record()

    # ---- truncation and deletion --------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> bool:
        """Remove every batch holding offsets >= ``offset`` (follower truncation). Returns whether
        anything was removed.
        """
        if offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset {offset}")
        if offset >= self._leo:
            return False
        if now_ms is None:
            now_ms = _now_ms()
        self._truncations += 1
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset, now_ms)
            return True
        i = bisect.bisect_right(self._bases, offset) - 1
        doomed = self._segments[i + 1 :]
        with self._lock:
            self._segments = self._segments[: i + 1]
            self._bases = self._bases[: i + 1]
            self._max_pos_cache = None
        for seg in doomed:
            self._schedule_delete(seg, now_ms)
        seg = self._segments[-1]
        seg.truncate_to(offset, now_ms)
        seg.resize_indexes(self.config.segment_index_bytes)
        self._leo = seg.read_next_offset() if seg.size else seg.base_offset
        self._log_start = min(self._log_start, self._leo)
        with self._lock:
            self._recovery_point = min(self._recovery_point, self._leo)
        self._hw = min(self._hw, self._leo)
        self.leader_epoch_cache.truncate_from_end(self._leo)
        self._rebuild_producer_state(now_ms)
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        if now_ms is None:
            now_ms = _now_ms()
        self._truncations += 1
        doomed = self._segments
        with self._lock:
            self._segments = []
            self._bases = []
            self._max_pos_cache = None
        for old in doomed:
            self._schedule_delete(old, now_ms)
        seg = self._new_segment(offset, now_ms)
        with self._lock:
            self._segments = [seg]
            self._bases = [offset]
            self._dir_dirty = True
            self._leo = offset
            self._log_start = offset
            self._recovery_point = offset
            self._hw = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    def maybe_increment_log_start_offset(self, offset: int, now_ms: int | None = None) -> bool:
        """Advance the log start offset (DeleteRecords). Fails above the high watermark."""
        if self.offline_reason is not None:
            raise errors.KafkaStorageErrorError(f"{self.topic}-{self.partition} is read-only: {self.offline_reason}")
        if offset > self._hw:
            raise errors.OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of {self.topic}-{self.partition}: "
                f"it is above the high watermark {self._hw}"
            )
        if offset <= self._log_start:
            return False
        self._log_start = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        if self.producer_state.map_end_offset < offset:
            self.producer_state.map_end_offset = offset
        self._delete_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= offset, now_ms)
        return True

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete segments past ``retention.ms`` / ``retention.bytes`` (cleanup.policy=delete) and
        those wholly below the log start offset. Returns how many segments were deleted.
        """
        if now_ms is None:
            now_ms = _now_ms()
        start = self._log_start
        deleted = self._delete_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= start, now_ms)
        cfg = self.config
        if not cfg.delete:
            return deleted
        if cfg.retention_ms >= 0:
            limit = cfg.retention_ms
            deleted += self._delete_segments(lambda seg, nxt: now_ms - seg.largest_timestamp > limit, now_ms)
        if cfg.retention_bytes >= 0:
            excess = self.size - cfg.retention_bytes

            def over(seg, nxt):
                nonlocal excess
                if excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False

            deleted += self._delete_segments(over, now_ms)
        return deleted

    def _delete_segments(self, predicate, now_ms: int | None) -> int:
        """Delete the longest prefix of segments matching ``predicate(seg, next_seg)`` that lies
        wholly below the high watermark; rolls first if that is every segment.
        """
        if now_ms is None:
            now_ms = _now_ms()
        segments = self._segments
        doomed = []
        hw = self._hw
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if hw < upper or not predicate(seg, nxt):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        if len(doomed) == len(segments):
            self.roll(now_ms)
        n = len(doomed)
        with self._lock:
            self._segments = self._segments[n:]
            self._bases = self._bases[n:]
            self._max_pos_cache = None
        for seg in doomed:
            self._schedule_delete(seg, now_ms)
        new_start = self._bases[0]
        if new_start > self._log_start:
            self._log_start = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.delete_snapshots_before(self._bases[0])
        return n

    def _schedule_delete(self, seg: LogSegment, now_ms: int) -> None:
        try:
            seg.rename_to_deleted(now_ms)
        except FileNotFoundError:
            pass
        self._pending_deletes.append(seg)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Close and unlink segments renamed ``.deleted`` more than file.delete.delay.ms ago."""
        if not self._pending_deletes or self.cleaning:
            return 0  # while the cleaner reads, no descriptor of this log may close
        if now_ms is None:
            now_ms = _now_ms()
        delay = self.config.file_delete_delay_ms
        keep = []
        n = 0
        for seg in self._pending_deletes:
            if now_ms - seg.deleted_at_ms >= delay:
                seg.delete_files()
                n += 1
            else:
                keep.append(seg)
        self._pending_deletes = keep
        return n

    # ---- compaction -------------------------------------------------------------------------

    @property
    def truncations(self) -> int:
        """How many truncations this log has had (the cleaner's consistency check)."""
        return self._truncations

    def replace_segments(self, old: list[LogSegment], truncations: int, now_ms: int | None = None) -> bool:
        """Swap the cleaner's ``<base>.log.cleaned`` (+ ``.index.cleaned``/``.timeindex.cleaned``),
        already fsynced, in for the consecutive segments ``old`` (owner thread).

        Refused (False, nothing touched) if the log was closed, moved or truncated since the
        cleaner took its snapshot (``truncations``), or if ``old`` is no longer a run of the
        current segments with the sizes they had. The caller then removes its files.
        """
        if self._closed or truncations != self._truncations or not old:
            return False
        base = old[0].base_offset
        segments = self._segments
        i = bisect.bisect_left(self._bases, base)
        n = len(old)
        if i + n >= len(segments) or any(segments[i + k] is not seg for k, seg in enumerate(old)):
            return False  # never the active segment, and every old segment still in place
        if now_ms is None:
            now_ms = _now_ms()
        log_path, index_path, time_index_path = segment_paths(self.dir, base)
        swap = log_path + SWAP_SUFFIX
        # The old segments' aborted transactions move to the new segment: written before the
        # commit point, renamed into place after it (``_complete_swaps`` finishes a crash).
        txn_path = log_path[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX
        aborted = [entry for seg in old for entry in seg.txn_index.entries]
        if aborted:
            write_txn_entries(txn_path + CLEANED_SUFFIX, aborted)
        try:
            os.replace(log_path + CLEANED_SUFFIX, swap)
        except FileNotFoundError:
            _unlink(txn_path + CLEANED_SUFFIX)
            return False
        fault_point("cleaner-after-swap")
        for seg in old:
            self._schedule_delete(seg, now_ms)
        fault_point("cleaner-after-old-deleted")
        os.replace(swap, log_path)
        for path in (index_path, time_index_path):
            try:
                os.replace(path + CLEANED_SUFFIX, path)
            except FileNotFoundError:
                pass  # rebuilt from the log on first use
        if aborted:
            os.replace(txn_path + CLEANED_SUFFIX, txn_path)
        cfg = self.config
        new = LogSegment(
            self.dir,
            base,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            now_ms=now_ms,
            active=False,
        )
        with self._lock:
            self._segments = segments[:i] + [new] + segments[i + n :]
            self._bases = self._bases[:i] + [base] + self._bases[i + n :]
            self._max_pos_cache = None
            self._dir_dirty = True
        return True

    # ---- flush ------------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync everything below ``up_to_offset`` (default: the LEO) and advance the recovery point.

        Safe to call from a worker thread while the owner appends.
        """
        leo = self._leo
        target = leo if up_to_offset is None else min(up_to_offset, leo)
        with self._lock:
            rp = self._recovery_point
            segments = self._segments
            bases = self._bases
            dir_dirty = self._dir_dirty
            self._dir_dirty = False
        if target <= rp and not dir_dirty:
            return
        started = time.perf_counter_ns()
        first = max(bisect.bisect_right(bases, rp) - 1, 0)
        for seg in segments[first:]:
            if seg.base_offset >= target and seg.base_offset > rp:
                break
            try:
                seg.flush()
            except (OSError, ValueError):
                if not seg.log.closed:
                    raise
        self.producer_state.fsync_snapshots()
        if dir_dirty:
            fsync_dir(self.dir)
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = min(target, self._leo)
            if target >= leo:
                self._unflushed_messages = 0
            self._last_flush_ms = _now_ms()
        LOG_FLUSH_TIMES.observe_ns(time.perf_counter_ns() - started)

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush what a roll left behind, and everything if ``flush.ms`` has passed. For the
        broker's periodic task (in a worker thread). Returns whether it flushed.
        """
        if now_ms is None:
            now_ms = _now_ms()
        flushed = False
        roll_offset = self._roll_flush_offset
        if roll_offset > self._recovery_point:
            self.flush(roll_offset)
            flushed = True
        if (
            self._flush_ms != LONG_MAX
            and self._leo > self._recovery_point
            and now_ms - self._last_flush_ms >= self._flush_ms
        ):
            self.flush()
            flushed = True
        return flushed

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` (periodic, owner thread)."""
        self.producer_state.remove_expired_producers(_now_ms() if now_ms is None else now_ms)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    # ---- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Write a producer snapshot at the LEO and close every file (indexes trimmed)."""
        if self._closed:
            return
        self._closed = True
        psm = self.producer_state
        psm.update_map_end_offset(self._leo)
        if self.offline_reason is None:
            try:
                psm.take_snapshot(sync=True)
            except OSError as e:
                self.disk_error(e)  # the next load replays the log from an older snapshot
        for seg in self._segments:
            try:
                seg.close()
            except OSError as e:
                self.disk_error(e)
        for seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []

    def delete(self) -> None:
        """Close every file and remove the whole directory."""
        self._closed = True
        for seg in self._segments + self._pending_deletes:
            try:
                seg.delete_files()
            except OSError:
                pass
        self._segments = []
        self._pending_deletes = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: str) -> None:
        """Move the partition directory (e.g. to ``*-delete``); files stay open."""
        os.replace(self.dir, new_dir)
        old = self.dir
        self.dir = new_dir
        for seg in self._segments + self._pending_deletes:
            seg.dir = new_dir
            seg.log.path = seg.log.path.replace(old, new_dir, 1)
            for index in (seg._oi, seg._ti, seg._txn):
                if index is not None:
                    index.path = index.path.replace(old, new_dir, 1)
        self.producer_state.dir = new_dir
        self.leader_epoch_cache.path = os.path.join(new_dir, os.path.basename(self.leader_epoch_cache.path))
        self.leader_epoch_cache._file.path = self.leader_epoch_cache.path

    def __repr__(self) -> str:
        return (
            f"Log({self.dir!r}, start={self._log_start}, leo={self._leo}, hw={self._hw}, "
            f"segments={len(self._segments)})"
        )


def _rejected(error: type[errors.KafkaError], count: int, record_errors: list[tuple[int, str | None]]):
    """The error that rejects a whole batch for some of its records: ``record_errors`` lists
    (index in the batch, why) so the producer can tell the bad records from the rest (KIP-467)."""
    shown = "; ".join(f"record {i}: {why}" for i, why in record_errors[:3] if why)
    more = f" (and {len(record_errors) - 3} more)" if len(record_errors) > 3 else ""
    return error(
        f"{len(record_errors)} of the batch's {count} records were rejected, so none was written: {shown}{more}",
        record_errors=record_errors,
    )


def _marker_of(batch) -> tuple[int, int] | None:
    """``(control type, coordinator epoch)`` of a control batch holding a transaction marker."""
    from ..protocol.record_batch import decode_batch  # control batches are rare: decode them the simple way

    try:
        marker = decode_batch(bytes(batch), 0, check_crc=False).end_txn_marker()
    except (errors.KafkaError, ValueError, IndexError):
        return None
    return None if marker is None else (marker.control_type, marker.coordinator_epoch)


def _codec_of(compression_type: str) -> int | None:
    from .log_config import COMPRESSION_CODECS

    return COMPRESSION_CODECS.get(compression_type)


def _recompress(batch_bytes: bytearray, codec: int, config: LogConfig) -> bytes:
    from ..protocol.record_batch import recompress_batch  # lazy: only topics that force a codec need it

    # Only a level the topic changed from Kafka's default is passed on; else the codec's default.
    level, default = {
        1: (config.compression_gzip_level, -1),
        3: (config.compression_lz4_level, 9),
        4: (config.compression_zstd_level, 3),
    }.get(codec, (None, None))
    if level == default:
        level = None
    return recompress_batch(batch_bytes, codec, compression_level=level)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(path, ignore_errors=True)
