"""LocalLog: the segments of one partition's log and their files (Kafka's LocalLog).

It holds the segment list in offset order (``segments`` and their ``bases``), the recovery
point (below it everything is fsynced) and the segments renamed ``*.deleted`` that wait for
``file.delete.delay.ms``; it rolls, reads, truncates, deletes, swaps in cleaned segments and
flushes. Offsets, producer state, leader epochs and the append itself are the log's
(``log.Log``, Kafka's UnifiedLog), which owns one LocalLog.

Files (Kafka's names, see segment.LogSegment)::

    00000000000000000000.log / .index / .timeindex / .txnindex   a segment
    *.deleted                                                    awaiting file.delete.delay.ms
    <base>.log.cleaned (+ .index / .timeindex / .txnindex)       the cleaner's output
    <base>.log.swap                                              a cleaned segment, committed

Compaction's swap (``replace_segments``, owner thread): ``.log.cleaned`` → ``.log.swap`` (the
commit point), old segments renamed ``.deleted``, ``.log.swap`` → ``.log``, and the segment
list replaced in one assignment, so readers see either the old segments or the new one; the
log loader finishes a swap a crash interrupted (log_loader.complete_swaps).

Thread rules: called from the log owner's thread, except ``flush``, which may run in a worker
thread concurrently with appends and reads, and the cleaner's reads of inactive segments'
files. ``segments``/``bases`` are never mutated in place, only replaced under ``_lock``, so any
thread may take a consistent snapshot of them; ``deferred_deletes`` (the cleaner manager's
flag, owner thread) keeps every file open while a cleaner reads.
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading

from ..faults import fault_point
from .checkpoint import fsync_dir
from .file_records import FileSlice
from .log_config import LogConfig
from .segment import (
    CLEANED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    remove_path,
    segment_paths,
)
from .txn_index import write_entries as write_txn_entries


def new_segment(
    dir: str, config: LogConfig, base_offset: int, now_ms: int, *, active: bool = True, create: bool = True
) -> LogSegment:
    """A segment of the log in ``dir`` with ``config``'s index settings and a random roll
    jitter below ``segment.jitter.ms``."""
    jitter = 0
    if config.segment_jitter_ms > 0:
        jitter = int.from_bytes(os.urandom(4), "big") % min(config.segment_jitter_ms, config.segment_ms)
    return LogSegment(
        dir,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        roll_jitter_ms=jitter,
        now_ms=now_ms,
        active=active,
        create=create,
    )


class LocalLog:
    """The segments of one log directory (see the module docstring for its files). Owned by
    its Log and called from the log owner's thread, except ``flush`` (a worker thread)."""

    def __init__(
        self,
        dir: str,
        config: LogConfig,
        segments: list[LogSegment],
        recovery_point: int,
        *,
        dir_dirty: bool = False,
    ):
        self.dir = dir
        self.config = config
        self._lock = threading.Lock()
        self.segments = segments
        self.bases = [seg.base_offset for seg in segments]
        self.recovery_point = recovery_point
        self.pending_deletes: list[LogSegment] = []
        self._max_pos_cache: tuple[int, int, int] | None = None
        self._dir_dirty = dir_dirty  # a name in the directory changed since its last fsync
        self.roll_flush_offset = -1  # the newest roll's offset: flush_if_due flushes up to it
        self.truncations = 0  # bumped by every truncation: the cleaner's swap checks it
        self.closed = False

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self.segments)

    def new_segment(
        self, base_offset: int, now_ms: int, active: bool = True, create: bool = True
    ) -> LogSegment:
        return new_segment(self.dir, self.config, base_offset, now_ms, active=active, create=create)

    def _replace(self, segments: list[LogSegment], *, dir_dirty: bool = False) -> None:
        with self._lock:
            self.segments = segments
            self.bases = [seg.base_offset for seg in segments]
            self._max_pos_cache = None
            if dir_dirty:
                self._dir_dirty = True

    # ---- roll ---------------------------------------------------------------------------

    def roll(self, new_offset: int, now_ms: int) -> LogSegment:
        """Close the active segment for appends and start a new one at ``new_offset`` (the
        caller checked that it is past the active segment's base offset)."""
        self.segments[-1].on_become_inactive()
        seg = self.new_segment(new_offset, now_ms)
        with self._lock:
            self.segments = self.segments + [seg]
            self.bases = self.bases + [new_offset]
            self._dir_dirty = True
            self.roll_flush_offset = max(self.roll_flush_offset, new_offset)
        return seg

    # ---- read ---------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, leo: int, min_one_message: bool
    ) -> FileSlice | None:
        """Batches from the one holding ``fetch_offset`` (within the log), up to ``max_bytes``
        (the whole first batch when ``min_one_message``), never holding an offset >=
        ``max_offset`` (<= ``leo``, the log end offset). None if there is none."""
        segments = self.segments
        bases = self.bases
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
                return slice_ if slice_.size > 0 else None
            i += 1
        return None

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

    def segment_holding(self, offset: int) -> int:
        """The index in ``segments`` of the segment whose offsets include ``offset`` (the
        first one for an offset below them all)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    # ---- truncation and deletion --------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove every batch holding offsets >= ``offset`` (at or past the first segment's
        base offset); returns the new log end offset."""
        self.truncations += 1
        i = bisect.bisect_right(self.bases, offset) - 1
        doomed = self.segments[i + 1 :]
        self._replace(self.segments[: i + 1])
        for seg in doomed:
            self.schedule_delete(seg, now_ms)
        seg = self.segments[-1]
        seg.truncate_to(offset, now_ms)
        seg.resize_indexes(self.config.segment_index_bytes)
        leo = seg.read_next_offset() if seg.size else seg.base_offset
        with self._lock:
            self.recovery_point = min(self.recovery_point, leo)
        return leo

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Delete every segment and start again, empty, at ``offset``."""
        self.truncations += 1
        doomed = self.segments
        self._replace([])
        for old in doomed:
            self.schedule_delete(old, now_ms)
        self._replace([self.new_segment(offset, now_ms)], dir_dirty=True)
        with self._lock:
            self.recovery_point = offset

    def delete_oldest(self, n: int, now_ms: int) -> None:
        """Delete the ``n`` oldest segments (never the active one: the caller rolls first)."""
        doomed = self.segments[:n]
        self._replace(self.segments[n:])
        for seg in doomed:
            self.schedule_delete(seg, now_ms)

    def schedule_delete(self, seg: LogSegment, now_ms: int) -> None:
        """Kafka's async delete: rename the files ``*.deleted`` now, close and unlink them
        after ``file.delete.delay.ms`` (``delete_expired_files``), so reads in flight finish."""
        try:
            seg.rename_to_deleted(now_ms)
        except FileNotFoundError:
            pass
        self.pending_deletes.append(seg)

    def delete_expired_files(self, now_ms: int) -> int:
        """Close and unlink segments renamed ``.deleted`` more than file.delete.delay.ms ago."""
        delay = self.config.file_delete_delay_ms
        keep = []
        n = 0
        for seg in self.pending_deletes:
            if now_ms - seg.deleted_at_ms >= delay:
                seg.delete_files()
                n += 1
            else:
                keep.append(seg)
        self.pending_deletes = keep
        return n

    # ---- compaction -----------------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], truncations: int, now_ms: int) -> bool:
        """Swap the cleaner's ``<base>.log.cleaned`` (+ ``.index.cleaned``/``.timeindex.cleaned``),
        already fsynced, in for the consecutive segments ``old`` (owner thread).

        Refused (False, nothing touched) if the log was closed or truncated since the cleaner
        took its snapshot (``truncations``), or if ``old`` is no longer a run of the current
        segments. The caller then removes its files.
        """
        if self.closed or truncations != self.truncations or not old:
            return False
        base = old[0].base_offset
        segments = self.segments
        i = bisect.bisect_left(self.bases, base)
        n = len(old)
        if i + n >= len(segments) or any(segments[i + k] is not seg for k, seg in enumerate(old)):
            return False  # never the active segment, and every old segment still in place
        log_path, index_path, time_index_path = segment_paths(self.dir, base)
        swap = log_path + SWAP_SUFFIX
        # The old segments' aborted transactions move to the new segment: written before the
        # commit point, renamed into place after it (``complete_swaps`` finishes a crash).
        txn_path = log_path[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX
        aborted = [entry for seg in old for entry in seg.txn_index.entries]
        if aborted:
            write_txn_entries(txn_path + CLEANED_SUFFIX, aborted)
        try:
            os.replace(log_path + CLEANED_SUFFIX, swap)
        except FileNotFoundError:
            remove_path(txn_path + CLEANED_SUFFIX)
            return False
        fault_point("cleaner-after-swap")
        for seg in old:
            self.schedule_delete(seg, now_ms)
        fault_point("cleaner-after-old-deleted")
        os.replace(swap, log_path)
        for path in (index_path, time_index_path):
            try:
                os.replace(path + CLEANED_SUFFIX, path)
            except FileNotFoundError:
                pass  # rebuilt from the log on first use
        if aborted:
            os.replace(txn_path + CLEANED_SUFFIX, txn_path)
        new = self.new_segment(base, now_ms, active=False)
        self._replace(segments[:i] + [new] + segments[i + n :], dir_dirty=True)
        return True

    # ---- flush ----------------------------------------------------------------------------

    def flush(self, target: int, leo: int, before_dir_sync=None) -> bool:
        """fsync every segment holding offsets below ``target`` (<= ``leo``), then
        ``before_dir_sync()`` (the producer snapshots), then the directory if a name in it
        changed, and advance the recovery point. Returns whether there was anything to do.
        Safe to call from a worker thread while the owner appends."""
        with self._lock:
            rp = self.recovery_point
            segments = self.segments
            bases = self.bases
            dir_dirty = self._dir_dirty
            self._dir_dirty = False
        if target <= rp and not dir_dirty:
            return False
        first = max(bisect.bisect_right(bases, rp) - 1, 0)
        for seg in segments[first:]:
            if seg.base_offset >= target and seg.base_offset > rp:
                break
            try:
                seg.flush()
            except (OSError, ValueError):
                if not seg.log.closed:
                    raise
        if before_dir_sync is not None:
            before_dir_sync()
        if dir_dirty:
            fsync_dir(self.dir)
        with self._lock:
            if target > self.recovery_point:
                self.recovery_point = min(target, leo)
        return True

    # ---- lifecycle ------------------------------------------------------------------------

    def close(self, on_error) -> None:
        """Close every segment (indexes trimmed; ``on_error(OSError)`` for each that fails) and
        unlink the files waiting for deletion."""
        self.closed = True
        for seg in self.segments:
            try:
                seg.close()
            except OSError as e:
                on_error(e)
        for seg in self.pending_deletes:
            seg.delete_files()
        self.pending_deletes = []

    def delete(self) -> None:
        """Close every file and remove the whole directory."""
        self.closed = True
        for seg in self.segments + self.pending_deletes:
            try:
                seg.delete_files()
            except OSError:
                pass
        self.segments = []
        self.pending_deletes = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: str) -> None:
        """Move the directory (e.g. to ``*-delete``); files stay open."""
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        for seg in self.segments + self.pending_deletes:
            seg.moved_to(new_dir)


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``my-topic-3`` → (``my-topic``, 3). Raises ValueError for anything else."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"Not a partition directory name: {dir_name!r}")
    return topic, int(partition)
