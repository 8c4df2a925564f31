"""LogLoader: a partition's log state built from its directory when the log opens (Kafka's
LogLoader), and the producer-state rebuild that truncation reuses.

The directory (``<topic>-<partition>/``, Kafka's names; see log.Log)::

    00000000000000000000.log / .index / .timeindex / .txnindex   segments
    00000000000000000000.snapshot                                producer state
    leader-epoch-checkpoint                                      leader epochs
    *.deleted, *.cleaned, *.swap, *.tmp                          leftovers of a crash

Loading, in order:

1. ``complete_swaps``: a compaction swap interrupted by a crash is finished. ``.deleted`` and
   ``.cleaned`` files go (the old segments they shadow are intact, or already replaced); a
   ``<base>.log.swap`` (the swap's commit point was passed) replaces every segment whose base
   offset lies in [base, the swap's next offset) — at least the one at its own base offset,
   even when it is empty — and takes the ``.log`` name (Kafka's rule). Old segments past
   that range whose records were all cleaned away may survive: they hold only superseded
   records, so the log stays ordered and complete, and the next pass removes them.
2. Leftovers and index files without a ``.log`` are removed; the segments are opened lazily
   (only their ``.log`` is stat'ed).
3. Recovery. After a clean shutdown the segments are trusted (a segment without index
   files gets them rebuilt). Otherwise every segment from the one holding the recovery point
   is re-read (``LogSegment.recover``: size, magic, CRC, offsets; indexes rebuilt): the file
   is cut at the first torn or corrupt batch, with a warning naming it, and the segments
   after it are removed (everything after a corrupt point is suspect); leader epochs are
   re-learnt from the batches. A log end below the checkpointed high watermark is logged
   as acknowledged records lost.
4. Offsets: the log end offset from the last segment, the log start offset, the recovery
   point. The leader-epoch cache is trimmed to them.
5. Producer state: the newest snapshot plus a replay of the batch headers after it
   (``rebuild_producer_state``), which also rebuilds the aborted-transaction indexes of the
   replayed range from the markers in the log.

Who calls it: ``Log.__init__`` (the log manager's loading, before anyone else sees the log),
and ``Log.truncate_to`` for ``rebuild_producer_state`` (the log owner's thread).
"""

from __future__ import annotations

import bisect
import logging
import os
from typing import NamedTuple

from ._record_scan import end_txn_marker
from .checkpoint import fsync_dir
from .file_records import FileRecords
from .leader_epoch_cache import LeaderEpochFileCache
from .producer_state import ProducerStateManager
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
    remove_path,
)
from .txn_index import AbortedTxn

_ABORT = 0  # control record type of an ABORT marker (protocol.records.ABORT)

_log = logging.getLogger(__name__)


class LoadedLog(NamedTuple):
    """What loading found: the segments (in offset order) and the log's offsets."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    new_segment_file: bool  # an empty log's first segment was named: fsync the dir


class LogLoader:
    """Loads one log directory (see the module docstring for its files and the steps), once,
    from ``Log.__init__``, before anyone else can see the log."""

    def __init__(
        self,
        dir: str,
        new_segment,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        on_index_error,
    ):
        """``new_segment(base_offset, now_ms, active=, create=)`` opens a segment with the
        log's config; ``on_index_error(OSError)`` hears of index entries recovery could not
        write (a full disk: the log dir goes offline, the log itself is recovered)."""
        self.dir = dir
        self.new_segment = new_segment
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self.on_index_error = on_index_error

    def load(
        self,
        log_start_offset: int,
        recovery_point: int,
        clean: bool,
        now: int,
        high_watermark: int | None,
    ) -> LoadedLog:
        complete_swaps(self.dir)
        segments = self._open_segments(now)
        if not clean and segments:
            bases = [seg.base_offset for seg in segments]
            recover_from = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
            self.leader_epoch_cache.truncate_from_end(segments[recover_from].base_offset)
        else:
            recover_from = len(segments)
        self._recover(segments, recover_from)
        new_segment_file = False
        if not segments:
            # A log without segments starts at offset 0 with no file until its first write
            # (creating thousands of partitions then costs one mkdir each); any other start
            # offset is written down at once in the segment's file name.
            segments.append(self.new_segment(log_start_offset, now, create=log_start_offset != 0))
            new_segment_file = True
        leo = segments[-1].read_next_offset()
        log_start = min(max(log_start_offset, segments[0].base_offset), leo)
        recovery_point = leo if clean else min(recovery_point, leo)
        if high_watermark is not None and high_watermark > leo:
            _log.warning(
                "Recovery of %s ended the log at offset %d, below its checkpointed high watermark %d: "
                "%d acknowledged records were lost (a crash loses what was not fsynced yet, as in "
                "Kafka; the topic config flush.messages=1 fsyncs each write before it is acknowledged)",
                self.dir,
                leo,
                high_watermark,
                high_watermark - leo,
            )
        cache = self.leader_epoch_cache
        # Epochs starting past the end are gone; one starting at the end stays (it is what
        # becoming leader writes), so a never-written partition loads without a write.
        cache.truncate_from_end(leo + 1)
        cache.truncate_from_start(log_start)
        self.producer_state.remove_stray_snapshots([seg.base_offset for seg in segments])
        rebuild_producer_state(self.producer_state, segments, log_start, leo, now)
        return LoadedLog(segments, log_start, leo, recovery_point, new_segment_file)

    def _open_segments(self, now: int) -> list[LogSegment]:
        """The segments of the directory, after removing what no segment needs."""
        bases = []
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")):
                remove_path(path)
                continue
            stem, _dot, ext = name.partition(".")
            if not stem.isdigit() or len(stem) != 20:
                continue
            ext = "." + ext
            if ext == LOG_SUFFIX:
                bases.append(int(stem))
            elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if not os.path.exists(os.path.join(self.dir, stem + LOG_SUFFIX)):
                    remove_path(path)  # orphan index
        return [self.new_segment(base, now, active=False, create=False) for base in sorted(bases)]

    def _recover(self, segments: list[LogSegment], recover_from: int) -> None:
        """Re-read the segments from ``recover_from`` on (and any without index files)."""
        i = 0
        while i < len(segments):
            seg = segments[i]
            if seg.size == 0:
                seg.empty_index_files()  # nothing to index; stale entries would point past the end
            elif i >= recover_from or not seg.indexes_exist():
                truncated = seg.recover(
                    self._on_recovered_batch, on_cut=self._warn_cut, on_index_error=self.on_index_error
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
                    else:
                        seg.on_become_inactive()
                seg.release(sync=bool(truncated))
            i += 1

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

    def _on_recovered_batch(self, header) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                self.leader_epoch_cache.assign(epoch, header.base_offset)


def complete_swaps(dir: str) -> None:
    """Finish what a crash interrupted in ``LocalLog.replace_segments`` (step 1 above). Index
    files of a swapped segment are missing afterwards and get rebuilt from the log."""
    names = os.listdir(dir)
    swaps = []
    committed_txn_indexes = []  # <base>.txnindex.cleaned whose .log.cleaned was renamed: keep
    listed = set(names)
    for name in names:
        path = os.path.join(dir, name)
        if name.endswith(TXN_INDEX_SUFFIX + CLEANED_SUFFIX) and (
            name[:20] + LOG_SUFFIX + CLEANED_SUFFIX not in listed
        ):
            committed_txn_indexes.append(path)
        elif name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
            remove_path(path)
        elif name.endswith(SWAP_SUFFIX):
            stem = name[: -len(SWAP_SUFFIX)]
            if stem.endswith(LOG_SUFFIX) and stem[:20].isdigit() and len(stem) == 20 + len(LOG_SUFFIX):
                swaps.append(int(stem[:20]))
            else:
                remove_path(path)  # an index .swap: rebuilt from the log instead
    if not swaps:
        for path in committed_txn_indexes:
            os.replace(path, path[: -len(CLEANED_SUFFIX)])
        return
    for base in sorted(swaps):
        swap_path = os.path.join(dir, f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}")
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
        for name in os.listdir(dir):
            stem, dot, ext = name.partition(".")
            if dot and len(stem) == 20 and stem.isdigit() and base <= int(stem) < end:
                if "." + ext in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    remove_path(os.path.join(dir, name))
        os.replace(swap_path, swap_path[: -len(SWAP_SUFFIX)])
    for path in committed_txn_indexes:
        os.replace(path, path[: -len(CLEANED_SUFFIX)])
    fsync_dir(dir)


def rebuild_producer_state(
    psm: ProducerStateManager, segments: list[LogSegment], log_start: int, leo: int, now: int
) -> None:
    """Producer state from the newest snapshot plus a replay of the batches after it. The
    aborted-transaction indexes of the replayed range are rebuilt on the way (markers are
    read from the log), so they are as trustworthy as the log itself."""
    psm.truncate_and_reload(log_start, leo, now)
    start = psm.map_end_offset
    if leo > start:
        bases = [seg.base_offset for seg in segments]
        i = max(bisect.bisect_right(bases, start) - 1, 0)
        for seg in segments[i:]:
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
                    marker = end_txn_marker(seg.log.pread(pos, header.size))
                    if marker is not None:
                        apply_txn_marker(
                            psm,
                            seg,
                            header.producer_id,
                            header.producer_epoch,
                            header.base_offset,
                            marker,
                            header.max_timestamp,
                        )
                else:
                    psm.replay(header)
    psm.update_map_end_offset(leo)


def apply_txn_marker(
    psm: ProducerStateManager, segment: LogSegment, producer_id, epoch, offset, marker, timestamp
) -> None:
    """A transaction marker at ``offset``, in ``segment``: close the producer's transaction
    and, for an ABORT, index it in that segment's aborted-transaction index."""
    control_type, coordinator_epoch = marker
    lso = psm.last_stable_offset_after(producer_id, offset)
    first = psm.complete_txn(producer_id, epoch, offset, coordinator_epoch, timestamp)
    if first >= 0 and control_type == _ABORT:
        segment.update_txn_index(AbortedTxn(producer_id, first, offset, lso))
