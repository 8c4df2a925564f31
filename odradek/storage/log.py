"""Log: one partition's log in ``<topic>-<partition>/`` (Kafka's UnifiedLog): offsets, appends,
reads, truncation, retention, producer state and leader epochs, over a LocalLog of segments.

Directory contents (all Kafka's names and formats)::

    00000000000000000000.log / .index / .timeindex     segments (local_log, segment)
    00000000000000000000.txnindex                      aborted transactions (txn_index)
    00000000000000000000.snapshot                      producer state (producer_state)
    leader-epoch-checkpoint                            leader epochs (leader_epoch_cache)
    *.deleted, *.cleaned, *.log.swap                   deletion and compaction in flight

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO, the next offset
to assign); ``recovery_point`` is the offset below which everything is fsynced. The broker
owns the high watermark (``Log`` only clamps it and keeps it <= LEO).

Append as leader: ``LogValidator`` checks every v2 batch of the request as bytes and assigns
offsets in a new 16-byte prefix; the log checks producer state (duplicates, sequences,
epochs, transaction markers), and the append goes out in one ``os.writev`` of [new prefix,
untouched rest of batch, ...]: no payload copy on the CreateTime path. The usual request,
one plain batch, takes a shorter path (``_append_plain_batch``). Append as follower: the
leader's batches verbatim (replication, and moves between log dirs).

Opening a log loads it (``log_loader.LogLoader``: swaps finished, recovery after an unclean
shutdown, producer state rebuilt). Compaction (``cleaner.py``) writes cleaned segments that
``replace_segments`` swaps in (``local_log``).

Thread rules: one owner (the broker's event loop) calls everything, except ``flush`` /
``flush_if_due``, which may run in a worker thread concurrently with appends and reads, and
the cleaner's reads of inactive segments' files (``seg.log.pread``/``batches``) from its
thread (the broker's cleaner reads them from a worker process, through descriptors of its
own). While ``cleaning`` is set (by the cleaner manager, owner thread) no segment file of this
log is closed: expired ``.deleted`` files wait, so an in-process cleaner never reads a closed
or reused descriptor. The cleaner never mutates the log: ``replace_segments`` runs on the
owner thread.
"""

from __future__ import annotations

import bisect
import errno
import functools
import logging
import os
import time
from typing import NamedTuple

from ..metrics import LockedHistogram
from ..protocol import batch as batch_format
from ..protocol import errors
from ._record_scan import end_txn_marker
from .file_records import FileSlice
from .leader_epoch_cache import LeaderEpochFileCache
from .local_log import LocalLog, new_segment, parse_topic_partition
from .log_append_info import LogAppendInfo, UnexpectedAppendOffsetError
from .log_config import LONG_MAX, LogConfig
from .log_loader import LogLoader, apply_txn_marker, rebuild_producer_state
from .log_validator import LogValidator
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from .segment import LogSegment, batch_max_timestamp
from .txn_index import AbortedTxn

_NO_TS = batch_format.NO_TIMESTAMP

# How long each flush that wrote something took, for the whole process as Kafka's
# LogFlushStats is (exported as kafka_log_logflushstats_logflushrateandtimems).
LOG_FLUSH_TIMES = LockedHistogram()


_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["Log", "LogAppendInfo", "LogReadResult", "UnexpectedAppendOffsetError", "parse_topic_partition"]


class LogReadResult(NamedTuple):
    """What a read found: the batches (a slice of one segment's file, or None) and the log's
    offsets at the time."""

    records: FileSlice | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class Log:
    """One partition's log: the ``<topic>-<partition>/`` directory in the module docstring.
    Made and owned by the LogManager; the broker's event loop (Partition, ReplicaManager, the
    group and transaction coordinators) calls it, except ``flush``/``flush_if_due`` (a worker
    thread) and the cleaner's reads of inactive segments (its thread or worker process)."""

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
        """Open (load) the log in ``dir``, creating the directory if needed. The log manager
        passes what its checkpoints say: start offset, recovery point, high watermark, and
        whether the broker shut down cleanly (recovery runs otherwise)."""
        self.dir = os.path.abspath(dir)
        name = os.path.basename(self.dir)
        try:
            self.topic, self.partition = parse_topic_partition(name)
        except ValueError:
            self.topic, self.partition = name, -1
        self._unflushed_messages = 0
        self._closed = False
        self.cleaning = False  # set by the cleaner manager (owner thread) while a pass runs
        self.offline_reason: str | None = None  # set once a write to the disk failed
        self._on_disk_error = on_disk_error  # (log, OSError) -> None: the log manager's
        config = config or LogConfig()
        now = _now_ms() if now_ms is None else now_ms
        self._last_flush_ms = now
        if not os.path.isdir(self.dir):
            os.makedirs(self.dir, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir)
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        loader = LogLoader(
            self.dir,
            functools.partial(new_segment, self.dir, config),
            self.leader_epoch_cache,
            self.producer_state,
            self.disk_error,
        )
        with self.leader_epoch_cache.deferred_flush(on_error=self.disk_error):
            loaded = loader.load(log_start_offset, recovery_point, had_clean_shutdown, now, high_watermark)
        self._local = LocalLog(
            self.dir, config, loaded.segments, loaded.recovery_point, dir_dirty=loaded.new_segment_file
        )
        self._leo = loaded.log_end_offset
        self._log_start = loaded.log_start_offset
        self.update_config(config)
        hw = self._log_start if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start), self._leo)
        for seg in loaded.segments:  # a loaded log holds no descriptor until it is used
            seg.release()
        # Writable (preallocated) indexes once the active segment is next used; reading them
        # while loading needed no preallocation.
        loaded.segments[-1].resize_indexes(config.segment_index_bytes)

    # ---- configuration -------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self._local.update_config(config)
        self._segment_bytes = config.segment_bytes
        # Appends larger than this are refused; -1 once the log dir is offline, so that
        # _write's size check also refuses every write, at no cost to the hot path.
        self._write_limit = -1 if self.offline_reason else config.segment_bytes
        self._segment_ms = config.segment_ms
        if config.compact and config.max_compaction_lag_ms > 0:
            # KIP-354: roll in time for the cleaner to honour max.compaction.lag.ms.
            self._segment_ms = min(config.segment_ms, config.max_compaction_lag_ms)
        self._validator = LogValidator(config, f"{self.topic}-{self.partition}")
        self._plain_appends = self._validator.plain
        self._plain_batch = self._validator.plain_batch
        self._flush_messages = config.flush_messages
        self._flush_ms = config.flush_ms

    # ---- transactions -----------------------------------------------------------------------

    def _complete_txn(self, producer_id, epoch, offset, marker, timestamp) -> None:
        """A transaction marker just appended at ``offset`` (in the active segment)."""
        apply_txn_marker(self.producer_state, self._local.segments[-1], producer_id, epoch, offset, marker, timestamp)

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
        local = self._local
        out: list[AbortedTxn] = []
        for seg in local.segments[local.segment_holding(fetch_offset) :]:
            found, complete = seg.collect_aborted_txns(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def fetch_upper_bound(self, first_offset: int, max_offset: int) -> int:
        """An offset past every batch a read starting at ``first_offset`` returned: the next
        segment's base offset (a read never crosses segments), capped at ``max_offset``."""
        bases = self._local.bases
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
        return self._local.recovery_point

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
        return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def size(self) -> int:
        return self._local.size

    @property
    def closed(self) -> bool:
        return self._closed

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
        producer epochs checked), as Kafka's AppendOrigin. The other keyword arguments
        override the topic's config for this call.
        """
        if now_ms is None:
            now_ms = _now_ms()
        validator = self._validator
        if timestamp_type is not None or max_message_bytes is not None or compression_type is not None:
            validator = LogValidator(
                self.config,
                validator.name,
                timestamp_type=timestamp_type,
                max_message_bytes=max_message_bytes,
                compression_type=compression_type,
            )
        elif self._plain_appends and origin == "client":
            info = self._append_plain_batch(buf, leader_epoch, now_ms)
            if info is not None:
                return info
        from_client = origin == "client"
        v = validator.validate(buf, self._leo, leader_epoch, now_ms, from_client=from_client)
        psm = self.producer_state
        if v.producer_batches:
            duplicate = self._check_producers(v.producer_batches, from_client)
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp if v.log_append_time >= 0 else -1,
                    self._log_start,
                    duplicate.offset_delta + 1,
                    True,
                    duplicate.timestamp,
                    duplicate.last_offset,
                )
        first_offset = v.first_offset
        self._write(v.parts, v.total, v.infos, first_offset, v.last_offset, v.max_timestamp, now_ms)
        for h, base, marker in v.producer_batches:
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
                now_ms if v.log_append_time >= 0 else h.max_timestamp,
                base,
                h.is_transactional,
            )
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
            self.assign_epoch(leader_epoch, first_offset)
        self._after_append(v.record_count, v.last_offset + 1)
        return LogAppendInfo(
            first_offset,
            v.last_offset,
            v.log_append_time,
            self._log_start,
            v.record_count,
            False,
            v.max_timestamp,
            v.offset_of_max_timestamp,
            v.total,
            len(v.infos),
        )

    def _check_producers(self, batches, from_client: bool):
        """The producer-state checks of the batches that carry a producer id, in order (Kafka's
        analyzeAndValidateProducerState): a client's sequences (returns the original batch's
        entry for a duplicate), a coordinator's marker and producer epochs. Raises for a
        batch the producer state refuses; changes nothing."""
        psm = self.producer_state
        if from_client:
            pending: dict = {}
            for h, _base, _marker in batches:
                duplicate = psm.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, pending)
                if duplicate is not None:
                    return duplicate
            return None
        producers = psm.producers
        for h, _base, marker in batches:
            pid = h.producer_id
            if marker is not None:
                psm.check_marker(pid, h.producer_epoch, marker[1])
            elif pid in producers and h.producer_epoch < producers[pid].epoch:
                raise errors.InvalidProducerEpochError(f"Stale epoch {h.producer_epoch} for producer {pid}")
        return None

    def _append_plain_batch(self, buf, leader_epoch: int, now_ms: int) -> LogAppendInfo | None:
        """The usual append, shortened: ``buf`` is a single valid v2 batch without producer id,
        transactional or control bit, in the topic's codec (``LogValidator.plain_batch``).
        Returns None, having changed nothing, for anything else, valid or not: the general
        path then appends it, or raises the error that explains it."""
        base = self._leo
        plain = self._plain_batch(buf, base, leader_epoch)
        if plain is None:
            return None
        parts, size, last, max_ts, count = plain
        self._write(parts, size, ((size, last, max_ts),), base, last, max_ts, now_ms)
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
            self.assign_epoch(leader_epoch, base)
        self._after_append(count, last + 1)
        offset_of_max = last if max_ts > _NO_TS else -1
        return LogAppendInfo(base, last, -1, self._log_start, count, False, max_ts, offset_of_max, size, 1)

    def append_as_follower(self, buf, *, now_ms: int | None = None) -> LogAppendInfo | None:
        """Append batches that already carry their offsets, exactly as they are (Kafka's
        appendAsFollower): a follower's copy of its leader's batches, and moves between log
        dirs. Offsets, CRCs and partition leader epochs stay as the leader wrote them.

        Each batch is checked as a stored batch (``LogValidator.check_replicated``) and must
        start at or after the log end offset, later batches after earlier ones
        (UnexpectedAppendOffsetError; gaps left by compaction are fine). A partial batch at the
        end (a fetch response cut at its size limit) is left out. The producer state follows
        the batches (sequences, transactions, aborted-transaction index) and the leader-epoch
        cache learns each new epoch at its first batch. Returns None when ``buf`` holds no
        complete batch; nothing is written when a batch fails.
        """
        if now_ms is None:
            now_ms = _now_ms()
        mv = memoryview(buf)
        total = len(mv)
        check = self._validator.check_replicated
        infos: list[tuple[int, int, int]] = []  # (size, last offset, max timestamp) per batch
        headers = []
        pos = 0
        records = 0
        max_ts = _NO_TS
        offset_of_max = -1
        first_offset = expected = self._leo
        while pos + batch_format.LOG_OVERHEAD <= total:
            base_offset, size = batch_format.read_offset_and_size(buf, pos)
            if size >= batch_format.LOG_OVERHEAD + 5 and pos + size > total:
                break  # the partial batch a size-limited read ends with
            h = check(buf, pos, size)
            if base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"Replicated batch at offset {base_offset} is below the expected next offset {expected} "
                    f"of {self.topic}-{self.partition}"
                )
            if h is None:  # a legacy message: its offset is its last one
                last, batch_max_ts, count = base_offset, batch_max_timestamp(buf, pos), 1
            else:
                last, batch_max_ts, count = h.last_offset, h.max_timestamp, h.record_count
                headers.append((h, pos))
            if not infos:
                first_offset = base_offset
            infos.append((size, last, batch_max_ts))
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max = last
            records += count
            expected = last + 1
            pos += size
        if not infos:
            return None
        self._write(mv[:pos], pos, infos, first_offset, expected - 1, max_ts, now_ms)
        psm = self.producer_state
        cache = self.leader_epoch_cache
        for h, at in headers:
            if h.is_control:
                marker = end_txn_marker(mv[at : at + h.size]) if h.producer_id >= 0 else None
                if marker is not None:
                    self._complete_txn(h.producer_id, h.producer_epoch, h.base_offset, marker, h.max_timestamp)
            else:
                psm.replay(h)
            epoch = h.partition_leader_epoch
            if epoch >= 0 and epoch != cache.latest_epoch:
                self.assign_epoch(epoch, h.base_offset)
        self._after_append(records, expected)
        return LogAppendInfo(
            first_offset, expected - 1, -1, self._log_start, records, False, max_ts, offset_of_max, pos, len(infos)
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
            seg = self._local.segments[-1]
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
        """Close the active segment for appends and start a new one at the log end offset
        (or ``expected_next_offset``, the first offset of the append that needs it)."""
        if now_ms is None:
            now_ms = _now_ms()
        new_offset = self._leo if expected_next_offset is None else max(expected_next_offset, self._leo)
        active = self._local.segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            return active
        if new_offset <= active.base_offset:
            raise errors.KafkaStorageErrorError(
                f"Cannot roll {self.dir} to offset {new_offset}: active segment starts at {active.base_offset}"
            )
        psm = self.producer_state
        psm.update_map_end_offset(new_offset)
        psm.take_snapshot()
        return self._local.roll(new_offset, now_ms)

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
        records = self._local.read(fetch_offset, max_bytes, max_offset, leo, min_one_message)
        return LogReadResult(records, start, leo, self._hw)

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
        limit = self._validator.decompressed_limit
        for seg in self._local.segments:
            if seg.max_timestamp_so_far >= timestamp and seg.size:
                found = seg.find_offset_by_timestamp(timestamp, start, limit=limit)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best = None
        best_ts = -1
        for seg in self._local.segments:
            if seg.size and seg.max_timestamp_so_far > best_ts:
                best, best_ts = seg, seg.max_timestamp_so_far
        if best is None:
            return None
        return best.find_max_timestamp_record(limit=self._validator.decompressed_limit)

    # ---- truncation and deletion --------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> bool:
        """Remove every batch holding offsets >= ``offset`` (follower truncation). Returns whether
        anything was removed.
        """
        if offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset {offset}")
        if offset >= self._leo:
            # Nothing to cut, but an epoch this replica started as leader without writing
            # a batch of it must go, or the follower would keep naming it (as Kafka does).
            self.leader_epoch_cache.truncate_from_end(self._leo)
            return False
        if now_ms is None:
            now_ms = _now_ms()
        local = self._local
        if offset < local.bases[0]:
            self.truncate_fully_and_start_at(offset, now_ms)
            return True
        self._leo = local.truncate_to(offset, now_ms)
        self._log_start = min(self._log_start, self._leo)
        self._hw = min(self._hw, self._leo)
        self.leader_epoch_cache.truncate_from_end(self._leo)
        rebuild_producer_state(self.producer_state, local.segments, self._log_start, self._leo, now_ms)
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        if now_ms is None:
            now_ms = _now_ms()
        self._local.truncate_fully_and_start_at(offset, now_ms)
        self._leo = offset
        self._log_start = offset
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
        segments = self._local.segments
        n = 0
        hw = self._hw
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if hw < upper or not predicate(seg, nxt):
                break
            n += 1
        if not n:
            return 0
        if n == len(segments):
            self.roll(now_ms)
        self._local.delete_oldest(n, now_ms)
        new_start = self._local.bases[0]
        if new_start > self._log_start:
            self._log_start = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.delete_snapshots_before(new_start)
        return n

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Close and unlink segments renamed ``.deleted`` more than file.delete.delay.ms ago."""
        if not self._local.pending_deletes or self.cleaning:
            return 0  # while the cleaner reads, no descriptor of this log may close
        return self._local.delete_expired_files(_now_ms() if now_ms is None else now_ms)

    # ---- compaction -------------------------------------------------------------------------

    @property
    def truncations(self) -> int:
        """How many truncations this log has had (the cleaner's consistency check)."""
        return self._local.truncations

    def replace_segments(self, old: list[LogSegment], truncations: int, now_ms: int | None = None) -> bool:
        """Swap the cleaner's cleaned files in for the consecutive segments ``old`` (owner
        thread; see ``LocalLog.replace_segments``). False, nothing touched, if the log changed
        since the cleaner took its snapshot."""
        return self._local.replace_segments(old, truncations, _now_ms() if now_ms is None else now_ms)

    # ---- flush ------------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync everything below ``up_to_offset`` (default: the LEO) and advance the recovery point.

        Safe to call from a worker thread while the owner appends.
        """
        leo = self._leo
        target = leo if up_to_offset is None else min(up_to_offset, leo)
        started = time.perf_counter_ns()
        if not self._local.flush(target, leo, self.producer_state.fsync_snapshots):
            return
        LOG_FLUSH_TIMES.observe_ns(time.perf_counter_ns() - started)
        if target >= leo:
            self._unflushed_messages = 0
        self._last_flush_ms = _now_ms()

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """Flush what a roll left behind, and everything if ``flush.ms`` has passed. For the
        broker's periodic task (in a worker thread). Returns whether it flushed.
        """
        if now_ms is None:
            now_ms = _now_ms()
        flushed = False
        local = self._local
        roll_offset = local.roll_flush_offset
        if roll_offset > local.recovery_point:
            self.flush(roll_offset)
            flushed = True
        if (
            self._flush_ms != LONG_MAX
            and self._leo > local.recovery_point
            and now_ms - self._last_flush_ms >= self._flush_ms
        ):
            self.flush()
            flushed = True
        return flushed

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` (periodic, owner thread)."""
        self.producer_state.remove_expired_producers(_now_ms() if now_ms is None else now_ms)

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
        self._local.close(self.disk_error)

    def delete(self) -> None:
        """Close every file and remove the whole directory."""
        self._closed = True
        self._local.delete()

    def rename_dir(self, new_dir: str) -> None:
        """Move the partition directory (e.g. to ``*-delete``); files stay open."""
        self._local.rename_dir(new_dir)
        self.dir = new_dir
        self.producer_state.dir = new_dir
        self.leader_epoch_cache.moved_to(new_dir)

    def __repr__(self) -> str:
        return (
            f"Log({self.dir!r}, start={self._log_start}, leo={self._leo}, hw={self._hw}, "
            f"segments={len(self._local.segments)})"
        )
