"""LeaderEpochFileCache: which leader epoch started at which offset, in ``leader-epoch-checkpoint``.

File format (Kafka's checkpoint frame, see checkpoint.CheckpointFile)::

    0            version
    2            number of entries
    0 0          epoch startOffset
    3 1500

Entries are strictly increasing in both epoch and start offset. The log assigns an entry
whenever it appends a batch whose partition leader epoch is newer than the latest one, and
the file is rewritten (atomically) on every change. ``end_offset_for`` answers
OffsetForLeaderEpoch the way Kafka does; truncation on both ends follows the log.

Thread rules: owned by its Log; called from the log owner's thread.
"""

from __future__ import annotations

import bisect
import contextlib
import os

from .checkpoint import CheckpointError, CheckpointFile

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def _format(entry) -> str:
    return f"{entry[0]} {entry[1]}"


def _parse(fields: list[str]):
    if len(fields) != 2:
        raise ValueError
    return int(fields[0]), int(fields[1])


class LeaderEpochFileCache:
    """``leader-epoch-checkpoint``: Kafka's checkpoint frame (version, count) with
    ``epoch startOffset`` lines, epochs and offsets strictly increasing, rewritten atomically
    on every change. Owned by its Log, called from the log owner's thread; the log loader
    fills it on recovery, the broker reads it for OffsetForLeaderEpoch (``end_offset_for``)."""

    def __init__(self, dir: str):
        self.path = os.path.join(dir, LEADER_EPOCH_CHECKPOINT)
        self._file = CheckpointFile(self.path, 0, _format, _parse)
        try:
            entries = self._file.read()
        except CheckpointError:
            entries = []  # a cache: rebuilt from the log's batches on recovery
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self._deferred = False
        self._dirty = False
        for epoch, offset in entries:
            self._assign(epoch, offset)

    def moved_to(self, dir: str) -> None:
        """The log's directory was renamed to ``dir``: write the checkpoint there from now on."""
        self.path = os.path.join(dir, LEADER_EPOCH_CHECKPOINT)
        self._file.path = self.path

    # ---- queries ------------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, with Kafka's semantics:

        * undefined epoch or nothing known above it → (-1, -1);
        * the latest epoch → (latest epoch, log end offset);
        * otherwise the largest epoch <= requested and the start offset of the next epoch;
          if every known epoch is above the requested one → (requested, first start offset).
        """
        epochs = self._epochs
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher >= len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return epochs[higher - 1], self._offsets[higher]

    # ---- updates ------------------------------------------------------------------------

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        # Remove entries that would break monotonicity (Kafka's maybeTruncateNonMonotonicEntries).
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed."""
        if self._assign(epoch, start_offset):
            self.flush()
            return True
        return False

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[keep:]
        del self._offsets[keep:]
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries before ``start_offset``; the last of them is kept, moved to ``start_offset``."""
        if not self._offsets or self._offsets[0] >= start_offset:
            return
        last_below = bisect.bisect_right(self._offsets, start_offset) - 1
        epoch = self._epochs[last_below]
        del self._epochs[: last_below + 1]
        del self._offsets[: last_below + 1]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self.flush()

    def flush(self) -> None:
        if self._deferred:
            self._dirty = True
            return
        self._file.write(self.entries())
        self._dirty = False

    @contextlib.contextmanager
    def deferred_flush(self, on_error=None):
        """Group many changes (log recovery) into at most one file write at the end; an
        OSError from that write goes to ``on_error`` if given (the entries stay in memory)."""
        before = self.entries()
        self._deferred = True
        try:
            yield self
        finally:
            self._deferred = False
            if self._dirty and self.entries() != before:
                try:
                    self.flush()
                except OSError as e:
                    if on_error is None:
                        raise
                    on_error(e)
            self._dirty = False
