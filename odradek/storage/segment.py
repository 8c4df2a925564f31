"""LogSegment: one ``<base offset>.log`` with its ``.index`` and ``.timeindex``.

Files, named by the segment's base offset as 20 zero-padded digits (Kafka's names)::

    00000000000000001234.log         record batches (see file_records.FileRecords)
    00000000000000001234.index       sparse offset index (see offset_index.OffsetIndex)
    00000000000000001234.timeindex   sparse time index (see time_index.TimeIndex)
    00000000000000001234.txnindex    aborted transactions whose markers are here (see txn_index)

Every offset in the segment is >= the base offset and within Int32.MAX of it (indexes store
relative offsets). An index entry is added every ``index.interval.bytes`` of appended data:
(last offset of the batch, position of the batch). A segment becomes inactive when the log
rolls: its indexes are trimmed and it is never appended to again (except after a truncation
makes it the active one again). Deleting renames the files to ``*.deleted``; the log closes
and unlinks them after ``file.delete.delay.ms`` so in-flight FileSlices stay valid.

Files are opened lazily: loading a log with many segments only stats the ``.log`` files,
and ``release`` closes what a load opened, so an idle segment holds no descriptor (see
file_records); the active one holds three while in use (``.log``, ``.index``, ``.timeindex``).
An index that fails its sanity check on first use is rebuilt from the ``.log``.

Thread rules: owned by its Log; called from the log owner's thread, except ``flush`` and
reads of FileSlices, which may run in a worker thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import zlib

import crc32c

from ..protocol import batch as batch_format
from ..protocol import compression as codecs
from ..protocol import errors
from ._index import CorruptIndexError
from ._record_scan import DEFAULT_LIMIT, iter_record_timestamps
from .file_records import FileRecords, FileSlice
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import AbortedTxn, TransactionIndex

INT32_MAX = (1 << 31) - 1
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_unpack_int64 = _Q.unpack_from
_unpack_int32 = _I.unpack_from
_UINT32 = struct.Struct(">I")
_MAX_TS = struct.Struct(">q")
_SCAN_CHUNK = 16384
_RECOVER_CHUNK = 1 << 20

_log = logging.getLogger(__name__)


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def segment_paths(dir: str, base_offset: int, suffix: str = "") -> tuple[str, str, str]:
    prefix = os.path.join(dir, filename_prefix(base_offset))
    return prefix + LOG_SUFFIX + suffix, prefix + INDEX_SUFFIX + suffix, prefix + TIME_INDEX_SUFFIX + suffix


def remove_path(path: str) -> None:
    """Remove a file (or a directory tree) if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(path, ignore_errors=True)


def batch_last_offset(buf, rel: int) -> int:
    """Last offset of the batch at ``buf[rel:]`` (v2: base + lastOffsetDelta; legacy: the offset field)."""
    base = _unpack_int64(buf, rel)[0]
    if buf[rel + batch_format.MAGIC_OFFSET] == 2:
        return base + _unpack_int32(buf, rel + 23)[0]
    return base


def batch_max_timestamp(buf, rel: int) -> int:
    magic = buf[rel + batch_format.MAGIC_OFFSET]
    if magic == 2:
        return _unpack_int64(buf, rel + batch_format.MAX_TIMESTAMP_OFFSET)[0]
    if magic == 1:
        return _unpack_int64(buf, rel + 18)[0]
    return -1


def stored_batch_problem(buf, rel: int, size: int, base_offset: int) -> str | None:
    """Why the batch at ``buf[rel:rel+size]``, read from the segment at ``base_offset``, cannot
    be trusted (recovery cuts the log there; verify-log reports it), or None if it can: size,
    magic, CRC (CRC-32C for v2, CRC-32 for legacy messages) and offsets the segment's relative
    offsets can hold. Unlike the produce path's LogValidator it accepts what a log may hold:
    legacy messages, and batches with gaps or no records left by compaction."""
    magic = buf[rel + batch_format.MAGIC_OFFSET]
    offset = _unpack_int64(buf, rel)[0]
    if offset < base_offset:
        return f"offset {offset} below the segment base offset {base_offset}"
    if magic == 2:
        if size < batch_format.HEADER_SIZE:
            return f"batch size {size} smaller than a v2 header"
        stored = _UINT32.unpack_from(buf, rel + batch_format.CRC_OFFSET)[0]
        if crc32c.crc32c(memoryview(buf)[rel + batch_format.ATTRIBUTES_OFFSET : rel + size]) != stored:
            return "CRC mismatch"
        delta = _unpack_int32(buf, rel + 23)[0]
        if delta < 0 or offset + delta - base_offset > INT32_MAX:
            return f"last offset delta {delta} out of range"
        return None
    if magic in (0, 1):
        if size < 26:
            return f"legacy message size {size} too small"
        stored = _UINT32.unpack_from(buf, rel + 12)[0]
        if zlib.crc32(memoryview(buf)[rel + 16 : rel + size]) != stored:
            return "CRC mismatch"
        if offset - base_offset > INT32_MAX:
            return "offset out of range"
        return None
    return f"unknown magic {magic}"


class LogSegment:
    """One segment: ``<base>.log`` (FileRecords) with its ``.index``, ``.timeindex`` and
    ``.txnindex``, named by its base offset in 20 digits. Owned by its Log's LocalLog and
    called from the log owner's thread, except ``flush`` and reads of FileSlices (any
    thread); the log loader recovers it, the cleaner reads an inactive one's ``.log``."""

    __slots__ = (
        "dir",
        "base_offset",
        "log",
        "index_interval_bytes",
        "max_index_size",
        "roll_jitter_ms",
        "created_ms",
        "_oi",
        "_ti",
        "_txn",
        "_writable_indexes",
        "_bytes_since_last_index_entry",
        "_max_ts",
        "_offset_of_max_ts",
        "_rolling_based_ts",
        "deleted_at_ms",
    )

    def __init__(
        self,
        dir: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        now_ms: int = 0,
        active: bool = True,
        suffix: str = "",
        create: bool = True,
    ):
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        log_path, _, _ = segment_paths(dir, base_offset, suffix)
        self.log = FileRecords(log_path, lazy=not create)
        self._oi: OffsetIndex | None = None
        self._ti: TimeIndex | None = None
        self._txn: TransactionIndex | None = None
        self._writable_indexes = active
        self._bytes_since_last_index_entry = 0
        self._max_ts: int | None = None  # None: not loaded yet (from the time index)
        self._offset_of_max_ts = base_offset
        self._rolling_based_ts: int | None = None
        self.deleted_at_ms = -1
        if active and create:
            # A new active segment gets its index files at once, as in Kafka.
            self.offset_index  # noqa: B018
            self.time_index  # noqa: B018

    # ---- files ------------------------------------------------------------------------

    @property
    def index_path(self) -> str:
        return self._index_file(INDEX_SUFFIX)

    @property
    def time_index_path(self) -> str:
        return self._index_file(TIME_INDEX_SUFFIX)

    def _index_file(self, suffix: str) -> str:
        log_path = self.log.path
        i = log_path.rindex(LOG_SUFFIX)
        return log_path[:i] + suffix + log_path[i + len(LOG_SUFFIX) :]

    @property
    def offset_index(self) -> OffsetIndex:
        oi = self._oi
        if oi is None:
            oi = self._load_index(OffsetIndex, INDEX_SUFFIX)
        return oi

    @property
    def time_index(self) -> TimeIndex:
        ti = self._ti
        if ti is None:
            ti = self._load_index(TimeIndex, TIME_INDEX_SUFFIX)
        return ti

    def _load_index(self, cls, suffix):
        path = self._index_file(suffix)
        index = cls(path, self.base_offset, self.max_index_size, writable=self._writable_indexes)
        try:
            index.sanity_check()
        except CorruptIndexError:
            index.close_handler()
            os.unlink(path)
            index = cls(path, self.base_offset, self.max_index_size, writable=self._writable_indexes)
            if cls is OffsetIndex:
                self._oi = index
            else:
                self._ti = index
            self.rebuild_indexes()
            return index
        if cls is OffsetIndex:
            self._oi = index
        else:
            self._ti = index
        return index

    @property
    def txn_index(self) -> TransactionIndex:
        txn = self._txn
        if txn is None:
            txn = self._txn = TransactionIndex(self._index_file(TXN_INDEX_SUFFIX))
        return txn

    def update_txn_index(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker was just written to this segment."""
        self.txn_index.append(entry)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect(fetch_offset, upper_bound)

    def indexes_exist(self) -> bool:
        return os.path.exists(self._index_file(INDEX_SUFFIX)) and os.path.exists(
            self._index_file(TIME_INDEX_SUFFIX)
        )

    @property
    def size(self) -> int:
        return self.log.size

    def resize_indexes(self, size: int) -> None:
        """Make the indexes writable up to ``size`` bytes (a segment becoming active again);
        an index not open yet gets that size when it opens."""
        self._writable_indexes = True
        self.max_index_size = size
        for index in (self._oi, self._ti):
            if index is not None:
                index.resize(size)

    def release(self, sync: bool = False) -> None:
        """Close the segment's descriptors and mappings; the next use reopens them. The
        active segment's indexes are trimmed, and grow again when reopened."""
        for index in (self._oi, self._ti):
            if index is not None:
                index.close()
        self._oi = self._ti = None
        self.log.release(sync)

    # ---- timestamps -------------------------------------------------------------------

    def _load_max_timestamp(self) -> int:
        """Load (and return) the segment's max timestamp so far from its time index."""
        opened_here = self._ti is None and not self._writable_indexes
        ti = self.time_index
        ts, offset = ti.last_entry()
        self._max_ts = ts
        self._offset_of_max_ts = offset
        if opened_here:
            # Retention asks every segment for its max timestamp: an inactive segment
            # need not keep its time index mapped for that.
            ti.close_handler()
            self._ti = None
        return ts

    @property
    def max_timestamp_so_far(self) -> int:
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self._load_max_timestamp()
        return max_ts

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            self._load_max_timestamp()
        return self._offset_of_max_ts

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp in the segment, or the file's mtime if it has none (for retention.ms)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log.path).st_mtime * 1000)

    def _first_batch_timestamp(self) -> int | None:
        if self._rolling_based_ts is None and self.log.size >= batch_format.HEADER_SIZE:
            head = self.log.pread(0, batch_format.HEADER_SIZE)
            if len(head) >= batch_format.HEADER_SIZE:
                self._rolling_based_ts = batch_max_timestamp(head, 0)
        return self._rolling_based_ts

    @property
    def first_batch_timestamp(self) -> int | None:
        """Max timestamp of the first batch (max.compaction.lag.ms); None if the segment is empty."""
        return self._first_batch_timestamp()

    def should_roll(
        self,
        append_size: int,
        max_timestamp: int,
        max_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll rule: size, age (``segment.ms`` minus jitter), a full index, or offset overflow."""
        size = self.log.size
        if size > segment_bytes - append_size:
            return True
        if size > 0:  # age: by the first batch's timestamp if it has one, else by creation
            first = self._rolling_based_ts
            if first is None:
                first = self._first_batch_timestamp()
            waited = max_timestamp - first if first is not None and first >= 0 else now_ms - self.created_ms
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        return not 0 <= max_offset - self.base_offset <= INT32_MAX

    # ---- appending --------------------------------------------------------------------

    def append(self, parts, total: int, batches) -> int:
        """Write ``parts`` (a bytes-like or a list for writev) holding the batches described by
        ``batches``: a sequence of (size, last_offset, max_timestamp). Returns the position.
        """
        last_offset = batches[-1][1]
        if not 0 <= last_offset - self.base_offset <= INT32_MAX:
            raise ValueError(
                f"Offset {last_offset} cannot be stored relative to base offset {self.base_offset}"
            )
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self._load_max_timestamp()
        log = self.log
        if isinstance(parts, list):
            position = log.appendv(parts, total)
        else:
            position = log.append(parts)
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        pos = position
        offset_of_max = self._offset_of_max_ts
        for size, batch_last, batch_max_ts in batches:
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max = batch_last
            if since > interval:
                try:
                    self.offset_index.append(batch_last, pos)
                    self.time_index.maybe_append(max_ts, offset_of_max)
                except OSError as e:
                    self._undo_append(position, batches[0][1])
                    raise errors.KafkaStorageErrorError(f"Write to {self.index_path} failed: {e}") from e
                since = 0
            pos += size
            since += size
        self._max_ts = max_ts
        self._offset_of_max_ts = offset_of_max
        self._bytes_since_last_index_entry = since
        if position == 0:
            self._rolling_based_ts = max(b[2] for b in batches)
        return position

    def _undo_append(self, position: int, first_batch_last_offset: int) -> None:
        """Take back an append whose index entries could not be written (a full disk)."""
        self.log.truncate_to(position)
        self.offset_index.truncate_to(first_batch_last_offset)
        self.time_index.truncate_to(first_batch_last_offset)

    # ---- reading ------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int, int] | None:
        """(base offset, position, size) of the first batch whose last offset >= ``offset``."""
        _, position = self.offset_index.lookup(offset)
        if position < starting_position:
            position = starting_position
        for pos, buf, rel, size in self.log.batches(position, chunk_size=_SCAN_CHUNK):
            if batch_last_offset(buf, rel) >= offset:
                return _unpack_int64(buf, rel)[0], pos, size
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        *,
        max_offset: int | None = None,
    ) -> FileSlice | None:
        """Batches from the one holding ``start_offset``, at most ``max_size`` bytes (but the
        whole first batch when ``min_one_message``), never past ``max_position`` nor into the
        batch holding ``max_offset`` (exclusive). None if the segment has no batch at or after
        ``start_offset``; an empty slice if the bound stops it before the first batch.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        first, position, batch_size = found
        if max_position is None:
            max_position = self.log.size
        if max_offset is not None:
            bound = self.translate_offset(max_offset, position)
            if bound is not None:
                max_position = min(max_position, bound[1])
        wanted = max(max_size, batch_size) if min_one_message else max_size
        size = min(max_position - position, wanted)
        return FileSlice(self.log, position, max(size, 0), first)

    def read_next_offset(self) -> int:
        """Offset after the last batch (the base offset when empty); scans from the last index entry."""
        if self.log.size == 0:
            return self.base_offset
        _, position = self.offset_index.last_entry()
        next_offset = self.base_offset
        for _pos, buf, rel, _size in self.log.batches(position, chunk_size=_RECOVER_CHUNK):
            next_offset = batch_last_offset(buf, rel) + 1
        if position and next_offset == self.base_offset:
            # Index entry past the end of the file: the index is stale; scan from the start.
            for _pos, buf, rel, _size in self.log.batches(0, chunk_size=_RECOVER_CHUNK):
                next_offset = batch_last_offset(buf, rel) + 1
        return next_offset

    def batch_headers(self, start_position: int = 0, end: int | None = None):
        """Yield ``(position, BatchHeader or None for legacy)`` of each batch from ``start_position``."""
        for pos, buf, rel, size in self.log.batches(start_position, end, chunk_size=_RECOVER_CHUNK):
            if buf[rel + batch_format.MAGIC_OFFSET] == 2 and size >= batch_format.HEADER_SIZE:
                yield pos, batch_format.read_header(buf, rel)
            else:
                yield pos, None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0, *, limit: int = DEFAULT_LIMIT
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose
        timestamp >= ``timestamp``, or None if this segment has none.

        Records are read from each batch streaming, decompressing at most ``limit`` bytes of
        one batch; for a batch that expands further, the answer is its first offset (with its
        max timestamp): a reader seeking there misses no record at or after ``timestamp``.
        """
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_offset, starting_offset))
        for _pos, buf, rel, _size in self.log.batches(position, chunk_size=_RECOVER_CHUNK, full=True):
            if buf[rel + batch_format.MAGIC_OFFSET] != 2:
                continue
            h = batch_format.read_header(buf, rel)
            if h.max_timestamp < timestamp or h.last_offset < starting_offset:
                continue
            try:
                for offset, ts in iter_record_timestamps(buf, rel, h, limit):
                    if ts >= timestamp and offset >= starting_offset:
                        return offset, ts
            except codecs.DecompressedTooLargeError as e:
                _log.warning(
                    "Timestamp search in %s answers with a whole batch: %s", self.log.path, e.message
                )
                return max(h.base_offset, starting_offset), h.max_timestamp
        return None

    def find_max_timestamp_record(self, *, limit: int = DEFAULT_LIMIT) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding this segment's largest timestamp."""
        target = self.max_timestamp_so_far
        if target < 0:
            return None
        return self.find_offset_by_timestamp(target, 0, limit=limit)

    # ---- recovery -------------------------------------------------------------------------

    def recover(self, on_batch=None, validate: bool = True, on_cut=None, on_index_error=None) -> int:
        """Re-read the whole ``.log``: validate every batch (size, magic, CRC), cut the file at
        the first invalid or torn one, and rebuild both indexes. ``on_batch(header)`` is called
        for each valid v2 batch (leader epochs, producer state), ``on_cut(path, position,
        next_offset, reason, bytes_removed)`` before a cut. Returns the bytes truncated.

        Index entries that cannot be written (a full disk) are left out: the index stays
        valid, only sparser. The OSError goes to ``on_index_error`` once the log itself is
        recovered (raised without one).
        """
        oi = self.offset_index
        ti = self.time_index
        if not self._writable_indexes:
            self.resize_indexes(self.max_index_size)
        oi.reset()
        ti.reset()
        max_ts = -1
        offset_of_max = self.base_offset
        interval = self.index_interval_bytes
        since = 0
        valid = 0
        base = self.base_offset
        log = self.log
        prev_last = base - 1
        reason = None
        index_error = None
        for pos, buf, rel, size in log.batches(0, chunk_size=_RECOVER_CHUNK, full=validate):
            if validate:
                reason = stored_batch_problem(buf, rel, size, base)
                if reason is None and _unpack_int64(buf, rel)[0] <= prev_last:
                    reason = f"batch offset {_unpack_int64(buf, rel)[0]} is not above the previous batch's {prev_last}"
                if reason is not None:
                    break
            last = batch_last_offset(buf, rel)
            prev_last = last
            batch_ts = batch_max_timestamp(buf, rel)
            if batch_ts > max_ts:
                max_ts = batch_ts
                offset_of_max = last
            if since > interval and index_error is None:
                try:
                    if not oi.is_full():
                        oi.append(last, pos)
                    if not ti.is_full():
                        ti.maybe_append(max_ts, offset_of_max)
                except OSError as e:
                    index_error = e
                since = 0
            since += size
            if on_batch is not None and buf[rel + batch_format.MAGIC_OFFSET] == 2:
                on_batch(batch_format.read_header(buf, rel))
            valid = pos + size
        truncated = log.size - valid
        if truncated:
            if on_cut is not None:
                why = reason or "the last batch is incomplete or its length field is invalid (a torn write)"
                on_cut(log.path, valid, prev_last + 1, why, truncated)
            log.truncate_to(valid)
        if index_error is None:
            try:
                ti.maybe_append(max_ts, offset_of_max, skip_full_check=True)
            except OSError as e:
                index_error = e
        self._max_ts = max_ts
        self._offset_of_max_ts = offset_of_max
        self._bytes_since_last_index_entry = since
        self._rolling_based_ts = None
        if index_error is not None:
            if on_index_error is None:
                raise index_error
            on_index_error(index_error)
        return truncated

    def empty_index_files(self) -> None:
        """Empty the index files of an empty segment: any entry would point past its end."""
        for index in (self._oi, self._ti):
            if index is not None:
                index.close_handler()
        self._oi = self._ti = None
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = self._index_file(suffix)
            try:
                if os.path.getsize(path):
                    os.truncate(path, 0)
            except FileNotFoundError:
                pass

    def rebuild_indexes(self) -> None:
        """Rebuild the indexes from the ``.log`` without validating or truncating data."""
        was_writable = self._writable_indexes
        self.recover(validate=False)
        if not was_writable:
            self._writable_indexes = False
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()

    def truncate_to(self, offset: int, now_ms: int = 0) -> int:
        """Remove every batch whose last offset >= ``offset`` (whole batches); returns bytes removed."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        removed = self.log.truncate_to(found[1])
        self._bytes_since_last_index_entry = 0
        if self.log.size == 0:
            self.created_ms = now_ms
            self._rolling_based_ts = None
        # The time index is sparse: take its last entry, then scan the unindexed tail.
        max_ts = self._load_max_timestamp()
        _, position = self.offset_index.last_entry()
        for _pos, buf, rel, _size in self.log.batches(position, chunk_size=_SCAN_CHUNK):
            ts = batch_max_timestamp(buf, rel)
            if ts > max_ts:
                max_ts = self._max_ts = ts
                self._offset_of_max_ts = batch_last_offset(buf, rel)
        return removed

    # ---- lifecycle ----------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """After a roll: record the final max timestamp and trim the indexes."""
        ti = self.time_index
        ti.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        ti.trim_to_valid_size()
        self._writable_indexes = False

    def flush(self) -> None:
        self.log.flush()
        if self._oi is not None:
            self._oi.flush()
        if self._ti is not None:
            self._ti.flush()
        if self._txn is not None:
            self._txn.flush()

    def close(self) -> None:
        """Add the final time index entry, trim the indexes and close everything; an OSError
        (a full disk) is raised once every file is closed."""
        error = None
        try:
            if self._ti is not None and self._max_ts is not None and not self.log.closed:
                self._ti.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        except OSError as e:
            error = e
        for index in (self._oi, self._ti):
            if index is not None:
                try:
                    index.close()
                except OSError as e:
                    error = error or e
                    index.close_handler()
        self.log.close()
        if error is not None:
            raise error

    def moved_to(self, new_dir: str) -> None:
        """The log's directory was renamed to ``new_dir`` (files stay open): follow it."""
        old = self.dir
        self.dir = new_dir
        self.log.path = self.log.path.replace(old, new_dir, 1)
        for index in (self._oi, self._ti, self._txn):
            if index is not None:
                index.path = index.path.replace(old, new_dir, 1)

    def rename_to_deleted(self, now_ms: int) -> None:
        """Kafka's async delete, step one: rename every file to ``*.deleted``; keep them open."""
        for index in (self._oi, self._ti):
            if index is not None:
                index.close()
        self._oi = self._ti = None
        self._txn = None
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = self._index_file(suffix)
            try:
                os.replace(path, path + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        self.log.rename(self.log.path + DELETED_SUFFIX)
        self.deleted_at_ms = now_ms

    def delete_files(self) -> None:
        """Close and unlink every file of the segment (whatever its suffix)."""
        for index in (self._oi, self._ti):
            if index is not None:
                index.close_handler()
        self._oi = self._ti = None
        self._txn = None
        self.log.delete()
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                os.unlink(self._index_file(suffix))
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.log.size}, path={self.log.path!r})"
