"""TimeIndex: the sparse ``<base offset>.timeindex`` file of a log segment.

File format (Kafka's): an array of 12-byte big-endian entries::

    int64 timestamp        the largest timestamp seen in the segment so far
    int32 relativeOffset   offset - base offset of the batch holding that timestamp

Both columns are non-decreasing and an entry is only added when the timestamp grows. An
entry is added next to each offset index entry, plus one on roll/close holding the segment's
largest timestamp (``is_full`` keeps one slot free for it, like Kafka).

``lookup(ts)`` returns the greatest entry whose timestamp is <= ``ts``: the records with a
timestamp >= ``ts`` start at or after that offset, so the segment scans the log from there.

Memory mapped, preallocated to ``segment.index.bytes`` while active, trimmed on roll/close.
Thread rules: see ``_index.AbstractIndex``.
"""

from __future__ import annotations

import struct

from ._index import AbstractIndex, CorruptIndexError

_ENTRY = struct.Struct(">qi")
_unpack = _ENTRY.unpack_from
_pack_entry = _ENTRY.pack

NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex):
    """``<base offset>.timeindex``: 12-byte entries (int64 largest timestamp so far, int32
    offset - base offset), added as the timestamp grows. Owned by its LogSegment, called from
    the log owner's thread (``flush`` from a worker too)."""

    ENTRY_SIZE = 12
    __slots__ = ("_last_ts", "_last_offset")

    def __init__(
        self, path: str, base_offset: int, max_index_size: int = 10 * 1024 * 1024, writable: bool = True
    ):
        super().__init__(path, base_offset, max_index_size, writable)
        self._load_last()

    def _load_last(self) -> None:
        if self._entries == 0:
            self._last_ts, self._last_offset = NO_TIMESTAMP, self.base_offset
        else:
            self._last_ts, self._last_offset = self.entry(self._entries - 1)

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry ``n``."""
        assert self._mm is not None, "entries imply a mapping"
        ts, rel = _unpack(self._mm, n * 12)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        return self._last_ts, self._last_offset

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if ``timestamp`` is larger than the last entry's."""
        if timestamp <= self._last_ts:
            return
        n = self._entries
        if n and offset < self._last_offset:
            raise ValueError(f"Attempt to append offset {offset} to {self.path} after {self._last_offset}")
        if n >= self._max_entries or (not skip_full_check and n >= self._max_entries - 1):
            raise ValueError(f"Attempt to append to a full time index {self.path} ({n} entries)")
        self._write_entry(n, _pack_entry(timestamp, offset - self.base_offset))
        self._entries = n + 1
        self._last_ts = timestamp
        self._last_offset = offset

    def _largest_lower_bound_slot(self, value: int, by_offset: bool) -> int:
        mm = self._mm
        n = self._entries
        col = 1 if by_offset else 0
        target = value - self.base_offset if by_offset else value
        if n == 0:
            return -1
        assert mm is not None, "entries imply a mapping"
        if _unpack(mm, 0)[col] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if _unpack(mm, mid * 12)[col] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry with timestamp <= ``timestamp``; (-1, base) if none."""
        slot = self._largest_lower_bound_slot(timestamp, by_offset=False)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._largest_lower_bound_slot(offset, by_offset=True)
        if slot < 0:
            keep = 0
        elif self.entry(slot)[1] == offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)
        self._load_last()

    def reset(self) -> None:
        super().reset()
        self._load_last()

    def sanity_check(self) -> None:
        if self._opened_length % 12:
            raise CorruptIndexError(
                f"Time index {self.path} has size {self._opened_length}, not a multiple of 12"
            )
        if self._entries:
            first_ts, first_off = self.entry(0)
            if self._last_ts < first_ts:
                raise CorruptIndexError(f"Corrupt time index {self.path}: last timestamp below the first")
            if self._last_offset < self.base_offset or first_off < self.base_offset:
                raise CorruptIndexError(f"Corrupt time index {self.path}: offset below the base offset")
