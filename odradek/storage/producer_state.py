"""ProducerStateManager: idempotent-producer state of one partition, and its snapshot files.

Per producer id it keeps the epoch and the metadata of the last 5 batches (first and last
sequence, last offset, max timestamp), Kafka's semantics:

* an epoch older than the known one → ``InvalidProducerEpochError``;
* a new epoch must start at sequence 0 → else ``OutOfOrderSequenceNumberError``;
* a batch equal (same epoch, first and last sequence) to one of the last 5 is a duplicate:
  the log answers with the original offsets and writes nothing;
* otherwise the first sequence must follow the last one (wrapping at Int32.MAX) →
  else ``OutOfOrderSequenceNumberError``;
* an unknown producer id (or one whose state was lost to retention) may start at any
  sequence, as in Kafka since KIP-360 (so no UnknownProducerIdError from here).

Snapshot files ``<20-digit offset>.snapshot`` in the partition directory hold the state of
every producer after all offsets below the file's offset, in Kafka's layout (version 1)::

    int16  version = 1
    uint32 crc     CRC-32C of everything after this field
    int32  count
    count × { int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset,
              int32 offset_delta, int64 timestamp, int32 coordinator_epoch,
              int64 current_txn_first_offset }

A snapshot keeps only the last batch of each producer (as Kafka's does). Snapshots are
written on segment roll and on close; on open the log loads the newest valid one and replays
batch headers from its offset to the log end. Snapshots are pruned with the segments.

Transactions: a producer's first transactional batch opens its transaction at that offset
(``current_txn_first_offset``, kept in snapshots); its COMMIT or ABORT marker closes it
(``complete_txn``). ``first_unstable_offset`` is the first offset of the oldest open
transaction, or of a closed one whose marker is not yet below the high watermark; the
partition's last stable offset (LSO) is that or the high watermark, whichever is lower.
Markers carry the transaction coordinator's epoch; a marker from an older coordinator
epoch than one already seen for the producer is refused (TRANSACTION_COORDINATOR_FENCED).

Thread rules: owned by its Log and called from the log owner's thread only, except
``fsync_snapshots`` (a flush, from any thread).
"""

from __future__ import annotations

import os
import struct

import crc32c

from ..protocol import errors

INT32_MAX = (1 << 31) - 1
NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


def snapshot_path(dir: str, offset: int) -> str:
    return os.path.join(dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def _first_seq(last_seq: int, delta: int) -> int:
    if last_seq < delta:
        return INT32_MAX - (delta - last_seq) + 1
    return last_seq - delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata:
    """What dedup needs of one appended batch."""

    __slots__ = ("first_seq", "last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int):
        self.last_seq = last_seq
        self.first_seq = _first_seq(last_seq, offset_delta) if last_seq >= 0 else NO_SEQUENCE
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    def __repr__(self) -> str:
        return f"BatchMetadata(seq={self.first_seq}..{self.last_seq}, offsets={self.first_offset}..{self.last_offset})"


class ProducerStateEntry:
    """One producer id's state: epoch, last batches (for duplicates), open transaction, as a
    snapshot file holds it (see the module docstring)."""

    __slots__ = (
        "producer_id",
        "epoch",
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
    )

    def __init__(self, producer_id: int, epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: list[BatchMetadata] = []
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = -1
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        batches = self.batches
        if len(batches) >= NUM_BATCHES_TO_RETAIN:
            del batches[0]
        batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def __repr__(self) -> str:
        return f"ProducerStateEntry(pid={self.producer_id}, epoch={self.epoch}, batches={self.batches})"


class ProducerStateManager:
    """The producer state of one partition and its ``<offset>.snapshot`` files (Kafka's
    layout, version 1; see the module docstring). Owned by its Log, called from the log
    owner's thread, except ``fsync_snapshots`` (a flush, any thread)."""

    def __init__(self, dir: str, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        self.dir = dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._unreplicated: list[tuple[int, int]] = []  # (first, marker offset) of closed txns above the HW
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self._snapshots: list[int] = self._list_snapshots()
        self._unsynced: list[str] = []

    # ---- validation on append -----------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, pending: dict | None):
        """Validate a client batch. Returns the original BatchMetadata for a duplicate, else None.

        ``pending`` maps producer id → (epoch, last_seq) of batches earlier in the same append.
        Raises InvalidProducerEpochError / OutOfOrderSequenceNumberError.
        """
        entry = self.producers.get(producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
        if pending is not None and producer_id in pending:
            known_epoch, cur_last = pending[producer_id]
        elif entry is not None:
            known_epoch, cur_last = entry.epoch, entry.last_seq
        else:
            known_epoch, cur_last = NO_PRODUCER_EPOCH, NO_SEQUENCE
        unknown = entry is None or entry.epoch == NO_PRODUCER_EPOCH
        if epoch < known_epoch:
            raise errors.InvalidProducerEpochError(
                f"Epoch {epoch} of producer {producer_id} is older than the current epoch {known_epoch}"
            )
        if epoch != known_epoch:
            if first_seq != 0 and known_epoch != NO_PRODUCER_EPOCH:
                raise errors.OutOfOrderSequenceNumberError(
                    f"Invalid sequence {first_seq} for new epoch {epoch} of producer {producer_id}: must be 0"
                )
        elif not unknown and not _in_sequence(cur_last, first_seq):
            raise errors.OutOfOrderSequenceNumberError(
                f"Out of order sequence for producer {producer_id} epoch {epoch}: "
                f"got {first_seq}, expected {(cur_last + 1) & INT32_MAX}"
            )
        if pending is not None:
            pending[producer_id] = (epoch, last_seq)
        return None

    # ---- updates ------------------------------------------------------------------------

    def update(
        self,
        producer_id: int,
        epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
        first_offset: int = -1,
        transactional: bool = False,
    ) -> None:
        """Record an appended data batch (from a client, a leader, or replayed from the log)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        elif epoch < entry.epoch:
            return  # a stale replica batch: keep the newer state
        entry.add_batch(epoch, last_seq, last_offset, offset_delta, timestamp)
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset

    def replay(self, header) -> None:
        """Rebuild state from a stored v2 batch header (no validation)."""
        pid = header.producer_id
        if pid < 0:
            return
        if header.is_control:
            self.complete_txn(pid, header.producer_epoch, header.base_offset, -1, header.max_timestamp)
            return
        self.update(
            pid,
            header.producer_epoch,
            header.last_sequence,
            header.base_offset + header.last_offset_delta,
            header.last_offset_delta,
            header.max_timestamp,
            header.base_offset,
            header.is_transactional,
        )

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # ---- transactions -------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker before it is written (Kafka's checkProducerEpoch and
        checkCoordinatorEpoch). Raises InvalidProducerEpochError / TransactionCoordinatorFencedError."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise errors.InvalidProducerEpochError(
                f"Marker epoch {epoch} of producer {producer_id} is older than the current epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise errors.TransactionCoordinatorFencedError(
                f"Marker for producer {producer_id} from coordinator epoch {coordinator_epoch}; "
                f"epoch {entry.coordinator_epoch} was seen already"
            )

    def last_stable_offset_after(self, producer_id: int, marker_offset: int) -> int:
        """The LSO once ``producer_id``'s transaction ends with a marker at ``marker_offset``."""
        others = [first for pid, first in self.ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    def complete_txn(
        self, producer_id: int, epoch: int, marker_offset: int, coordinator_epoch: int, timestamp: int
    ) -> int:
        """Record a COMMIT/ABORT marker; returns the first offset of the transaction it closed,
        or -1 when the producer had none open (a marker written again after a restart)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()  # a bumped epoch (a fence) starts its sequences afresh
        if coordinator_epoch > entry.coordinator_epoch:
            entry.coordinator_epoch = coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        self.ongoing.pop(producer_id, None)
        if first >= 0:
            self._unreplicated.append((first, marker_offset))
        return first

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the oldest transaction still undecided below ``high_watermark``."""
        unreplicated = self._unreplicated
        if unreplicated:
            self._unreplicated = unreplicated = [t for t in unreplicated if t[1] >= high_watermark]
        if not unreplicated and not self.ongoing:
            return None
        firsts = list(self.ongoing.values())
        firsts.extend(first for first, _ in unreplicated)
        return min(firsts)

    def _reset_ongoing(self) -> None:
        self._unreplicated = []
        self.ongoing = {
            pid: e.current_txn_first_offset
            for pid, e in self.producers.items()
            if e.current_txn_first_offset >= 0
        }

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def remove_expired_producers(self, now_ms: int) -> None:
        limit = self.producer_id_expiration_ms
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= limit
        ]
        for pid in expired:
            del self.producers[pid]

    # ---- snapshots ----------------------------------------------------------------------

    def _list_snapshots(self) -> list[int]:
        offsets: list[int] = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return offsets
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    offsets.append(int(stem))
        offsets.sort()
        return offsets

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self, sync: bool = False) -> str | None:
        """Write a snapshot at ``map_end_offset`` unless one exists there already."""
        offset = self.map_end_offset
        if offset <= self.last_snap_offset and offset in self._snapshots:
            return None
        if offset == 0 and not self.producers:
            return None  # nothing comes before offset 0: the snapshot would say nothing
        path = snapshot_path(self.dir, offset)
        write_snapshot(path, self.producers.values(), sync=sync)
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        self.last_snap_offset = offset
        if not sync:
            self._unsynced.append(path)
        return path

    def fsync_snapshots(self) -> None:
        """Make snapshots written since the last call durable."""
        pending, self._unsynced = self._unsynced, []
        for path in pending:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(snapshot_path(self.dir, offset))
        except FileNotFoundError:
            pass
        if offset in self._snapshots:
            self._snapshots.remove(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [s for s in self._snapshots if s < offset]:
            self._delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets) -> None:
        """Drop snapshots matching no segment, except the newest if above every segment (clean close)."""
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        strays = [s for s in self._snapshots if s not in bases]
        keep = strays[-1] if strays and (max_base is None or strays[-1] > max_base) else None
        for snap in strays:
            if snap != keep:
                self._delete_snapshot(snap)

    def load_latest_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        """Reset to the newest valid snapshot (corrupt ones are deleted), or empty at log start."""
        self.producers.clear()
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                entries = read_snapshot(snapshot_path(self.dir, offset))
            except (CorruptSnapshotError, OSError):
                self._delete_snapshot(offset)
                continue
            limit = self.producer_id_expiration_ms
            for entry in entries:
                if entry.current_txn_first_offset >= 0 or now_ms - entry.last_timestamp < limit:
                    self.producers[entry.producer_id] = entry
            self.map_end_offset = self.last_snap_offset = offset
            self._reset_ongoing()
            return
        self.map_end_offset = self.last_snap_offset = log_start_offset
        self._reset_ongoing()

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log start, log end] and reload the newest remaining one."""
        for snap in list(self._snapshots):
            if snap > log_end_offset or snap <= log_start_offset:
                self._delete_snapshot(snap)
        if log_end_offset != self.map_end_offset:
            self.load_latest_snapshot(log_start_offset, now_ms)
        elif self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self._reset_ongoing()
        for snap in list(self._snapshots):
            self._delete_snapshot(snap)
        self.last_snap_offset = 0
        self.map_end_offset = offset


class CorruptSnapshotError(Exception):
    """A snapshot file fails its CRC or does not parse: it is deleted and an older one (or a
    replay of the log) takes its place."""


def write_snapshot(path: str, entries, sync: bool = False) -> None:
    body = bytearray(_HEAD.size)
    pack = _ENTRY.pack
    count = 0
    for e in entries:
        if e.batches:
            last = e.batches[-1]
            seq, offset, delta = last.last_seq, last.last_offset, last.offset_delta
        else:
            seq, offset, delta = NO_SEQUENCE, -1, 0
        body += pack(
            e.producer_id,
            e.epoch,
            seq,
            offset,
            delta,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        count += 1
    struct.pack_into(">i", body, 6, count)
    crc = crc32c.crc32c(memoryview(body)[6:])
    struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(tmp)  # a full disk: leave no partial snapshot behind
        raise
    os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"Snapshot {path} is too short")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot {path} has unknown version {version}")
    if crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError(f"Snapshot {path} is corrupt (CRC mismatch)")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"Snapshot {path} has a bad entry count {count}")
    out = []
    for pid, epoch, seq, offset, delta, ts, coord_epoch, txn_first in _ENTRY.iter_unpack(data[_HEAD.size :]):
        entry = ProducerStateEntry(pid, epoch, coord_epoch)
        entry.last_timestamp = ts
        entry.current_txn_first_offset = txn_first
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, ts))
        out.append(entry)
    return out
