"""Shared machinery of Kafka's memory-mapped index files (``.index`` and ``.timeindex``).

An index file is an array of fixed-size big-endian entries. While its segment is active the
file is preallocated to ``segment.index.bytes`` (rounded down to whole entries) and memory
mapped; on roll and on close it is trimmed to the entries actually written, as Kafka does.
Entries are sorted, so lookups are binary searches over the mapping.

After an unclean shutdown the preallocated tail is zeros; opening an index trims trailing
all-zero entries (an index entry is never all zeros in practice: the first entry is only
added after ``index.interval.bytes`` of data, so its position is > 0). Indexes are caches:
``sanity_check`` spots the obvious damage and the segment rebuilds the index from the log.

An open index holds one file descriptor, the mapping's own (Python's mmap keeps a duplicate):
the descriptor used to open the file is closed at once, and the rare truncations go through
the mapping or reopen the file by its path.

Thread rules: one owner (the log's owner) mutates; lookups from the owner's thread only.
``flush`` (msync) may run in a worker thread concurrently with lookups.
"""

from __future__ import annotations

import errno
import mmap
import os

from .file_records import open_or_explain

_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)


class CorruptIndexError(Exception):
    """The index failed its sanity check; rebuild it from the log."""


class AbstractIndex:
    """A memory-mapped index file of fixed-size big-endian entries, sorted (the layout of each
    kind: OffsetIndex, TimeIndex). Owned by its LogSegment; the log owner's thread mutates
    and looks up, ``flush`` may run in a worker thread."""

    ENTRY_SIZE = 0
    __slots__ = (
        "path",
        "base_offset",
        "max_index_size",
        "_mm",
        "_open",
        "_entries",
        "_max_entries",
        "_length",
        "_opened_length",
        "_backed_end",
    )

    def __init__(
        self, path: str, base_offset: int, max_index_size: int = 10 * 1024 * 1024, writable: bool = True
    ):
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        fd = open_or_explain(path, os.O_RDWR | os.O_CREAT)
        try:
            length = os.fstat(fd).st_size
            self._map(fd, length)
        finally:
            os.close(fd)  # the mapping keeps a descriptor of its own: one per open index
        self._open = True
        self._opened_length = length
        entries = length // self.ENTRY_SIZE
        if entries and self._entry_is_zero(entries - 1):
            entries = self._count_nonzero_prefix(entries)
        self._entries = entries
        self._backed_end = entries * self.ENTRY_SIZE
        if writable:
            self.resize(max_index_size)
        else:
            self._max_entries = self._length // self.ENTRY_SIZE

    # ---- mapping --------------------------------------------------------------------

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        if length > 0:
            self._mm = mmap.mmap(fd, length)
            if _MADV_RANDOM is not None:
                # Lookups are binary searches: readahead around each probe only costs time
                # (a probe into the preallocated hole is ~40x slower without this).
                self._mm.madvise(_MADV_RANDOM)

    def _set_length(self, length: int) -> None:
        """Truncate or extend the file (sparse) to ``length`` bytes and map all of it."""
        if self._mm is not None and length > 0:
            self._mm.resize(length)  # ftruncate through the mapping's own descriptor, then mremap
            if _MADV_RANDOM is not None:
                self._mm.madvise(_MADV_RANDOM)
            self._length = length
        else:
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, length)
                self._map(fd, length)
            finally:
                os.close(fd)
        self._backed_end = min(self._backed_end, length)

    def _write_entry(self, n: int, data: bytes) -> None:
        """Write entry ``n``. The preallocated part of the file is a hole: the first store into
        each of its pages goes through ``pwrite``, which fails with ENOSPC on a full disk,
        where a store through the mapping would kill the process with SIGBUS."""
        position = n * self.ENTRY_SIZE
        end = position + len(data)
        if end <= self._backed_end:
            assert self._mm is not None, "backed bytes imply a mapping"
            self._mm[position:end] = data
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            written = 0
            while written < len(data):  # an entry across two pages may be written in part
                more = os.pwrite(fd, data[written:], position + written)
                if more <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += more
        except OSError as e:
            e.filename = self.path
            raise
        finally:
            os.close(fd)
        self._backed_end = -(-end // mmap.PAGESIZE) * mmap.PAGESIZE

    def _entry_is_zero(self, n: int) -> bool:
        e = self.ENTRY_SIZE
        assert self._mm is not None, "a non-empty file is mapped"
        return self._mm[n * e : (n + 1) * e] == bytes(e)

    def _count_nonzero_prefix(self, entries: int) -> int:
        lo, hi = 0, entries  # first zero entry is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry_is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def resize(self, new_size: int) -> bool:
        """Set the file to ``new_size`` rounded down to whole entries (never below the used part)."""
        e = self.ENTRY_SIZE
        rounded = max(new_size // e * e, self._entries * e)
        self._max_entries = rounded // e
        if rounded == self._length:
            return False
        self._set_length(rounded)
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries * self.ENTRY_SIZE)

    # ---- state ------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def _truncate_to_entries(self, n: int) -> None:
        e = self.ENTRY_SIZE
        if n < self._entries and self._mm is not None:
            self._mm[n * e : self._entries * e] = bytes((self._entries - n) * e)
        self._entries = n

    def reset(self) -> None:
        """Drop every entry (the file keeps its size)."""
        self._truncate_to_entries(0)

    def flush(self) -> None:
        mm = self._mm
        if mm is not None:
            try:
                mm.flush()
            except (ValueError, OSError):
                pass  # closed concurrently

    def close(self) -> None:
        """Trim to the valid entries and unmap."""
        if not self._open:
            return
        try:
            self.trim_to_valid_size()
        finally:
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without touching the file (for a deleted or renamed index)."""
        self._open = False
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def rename(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close_handler()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
