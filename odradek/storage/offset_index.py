"""OffsetIndex: the sparse ``<base offset>.index`` file of a log segment.

File format (Kafka's, byte for byte): an array of 8-byte big-endian entries::

    int32 relativeOffset   offset - segment base offset (the last offset of an indexed batch)
    int32 position         byte position in the .log file of that batch's first byte

Entries are strictly increasing in both fields. One entry is added every
``index.interval.bytes`` of appended data, so ``lookup(offset)`` gives a position at or before
the batch holding ``offset``; the segment then scans batch headers forward from there.

Memory mapped, preallocated to ``segment.index.bytes`` while active, trimmed on roll/close.
Thread rules: see ``_index.AbstractIndex`` (single owner; ``flush`` from a worker is fine).
"""

from __future__ import annotations

import struct

from ._index import AbstractIndex, CorruptIndexError

_ENTRY = struct.Struct(">ii")
_unpack = _ENTRY.unpack_from
_pack_entry = _ENTRY.pack


class OffsetIndex(AbstractIndex):
    """``<base offset>.index``: 8-byte entries (int32 offset - base offset, int32 position in
    the ``.log``), one every ``index.interval.bytes``. Owned by its LogSegment, called from
    the log owner's thread (``flush`` from a worker too)."""

    ENTRY_SIZE = 8
    __slots__ = ("_last_offset",)

    def __init__(
        self, path: str, base_offset: int, max_index_size: int = 10 * 1024 * 1024, writable: bool = True
    ):
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_offset = self._read_last_offset()

    def _read_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.entry(self._entries - 1)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry (the base offset when empty)."""
        return self._last_offset

    def entry(self, n: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``n``."""
        assert self._mm is not None, "entries imply a mapping"
        rel, pos = _unpack(self._mm, n * 8)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        if self._entries == 0:
            return self.base_offset, 0
        return self.entry(self._entries - 1)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must be above the last one and the index not full."""
        n = self._entries
        if n and offset <= self._last_offset:
            raise ValueError(
                f"Attempt to append offset {offset} to {self.path} whose last offset is {self._last_offset}"
            )
        if n >= self._max_entries:
            raise ValueError(f"Attempt to append to a full index {self.path} ({n} entries)")
        self._write_entry(n, _pack_entry(offset - self.base_offset, position))
        self._entries = n + 1
        self._last_offset = offset

    def _largest_lower_bound_slot(self, offset: int) -> int:
        """Slot of the greatest entry with offset <= ``offset``, or -1."""
        rel = offset - self.base_offset
        mm = self._mm
        n = self._entries
        if n == 0:
            return -1
        assert mm is not None, "entries imply a mapping"
        if _unpack(mm, 0)[0] > rel:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if _unpack(mm, mid * 8)[0] <= rel:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry <= ``offset``; (base offset, 0) if none."""
        slot = self._largest_lower_bound_slot(offset)
        if slot < 0:
            return self.base_offset, 0
        assert self._mm is not None, "entries imply a mapping"
        rel, pos = _unpack(self._mm, slot * 8)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset)
        if slot < 0:
            keep = 0
        elif self.entry(slot)[0] == offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)
        self._last_offset = self._read_last_offset()

    def reset(self) -> None:
        super().reset()
        self._last_offset = self.base_offset

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if the file is obviously damaged."""
        if self._opened_length % 8:
            raise CorruptIndexError(
                f"Index file {self.path} has size {self._opened_length}, not a multiple of 8"
            )
        if self._entries and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index {self.path}: last offset {self._last_offset} < base offset {self.base_offset}"
            )
        if self._entries:
            assert self._mm is not None, "entries imply a mapping"
            first_rel, first_pos = _unpack(self._mm, 0)
            last_rel, last_pos = _unpack(self._mm, (self._entries - 1) * 8)
            if first_rel < 0 or last_rel < first_rel or last_pos < first_pos or first_pos < 0:
                raise CorruptIndexError(f"Corrupt index {self.path}: entries out of order")
