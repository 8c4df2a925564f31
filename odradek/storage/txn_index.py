"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions whose markers it holds.

File format (Kafka's, unchanged): a sequence of 34-byte big-endian entries, no header::

    int16 version = 0
    int64 producer_id
    int64 first_offset        the transaction's first offset in this partition
    int64 last_offset         the offset of its ABORT marker
    int64 last_stable_offset  the partition's LSO right after the marker was written

An entry is appended to the segment that receives the ABORT marker, so entries are in
marker order and an aborted transaction that overlaps ``[fetch offset, upper bound)`` is
found in the segment holding the fetch offset or a later one. The search may stop at the
first entry whose ``last_stable_offset`` reaches the upper bound: every transaction that
began below that bound had ended by then (Kafka's ``collectAbortedTxns``).

The file is small and rarely written (once per aborted transaction per partition), so it
is not memory-mapped: entries are read into a list on first use, appended with a plain
write, and fsynced with the segment. A torn trailing entry (a crash mid-write) is dropped
when the file is read.

Thread rules: owned by its LogSegment; the log owner's thread calls everything except
``flush``, which may run in a worker thread.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction: a 34-byte ``.txnindex`` entry (int16 version 0, int64
    producer id, first offset, ABORT marker offset, last stable offset after it)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return ENTRY.pack(VERSION, *self)


class TransactionIndex:
    """``<base offset>.txnindex``: AbortedTxn entries back to back, no header, appended when
    an ABORT marker lands in the segment. Owned by its LogSegment; the log owner's thread
    calls everything except ``flush`` (a worker thread)."""

    __slots__ = ("path", "_entries", "_dirty")

    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = read_entries(self.path)
        return self._entries

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, entry: AbortedTxn) -> None:
        """Append an entry; one whose marker is not after the last entry's is already there."""
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            return
        with open(self.path, "ab") as f:
            f.write(entry.pack())
        entries.append(entry)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether the search is complete."""
        out = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                out.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        entries = self.entries
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep == len(entries):
            return
        del entries[keep:]
        self._rewrite()

    def reset(self) -> None:
        self._entries = []
        self._rewrite()

    def _rewrite(self) -> None:
        entries = self._entries or []
        if not entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._dirty = False
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(e.pack() for e in entries))
        os.replace(tmp, self.path)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_entries(path: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file (none if it does not exist; a torn tail is dropped)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    usable = len(data) - len(data) % ENTRY_SIZE
    out = []
    for version, pid, first, last, lso in ENTRY.iter_unpack(memoryview(data)[:usable]):
        if version != VERSION:
            break  # not an index we wrote: stop at the first entry we cannot read
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def write_entries(path: str, entries: list[AbortedTxn], *, sync: bool = True) -> None:
    """Write a whole index file (the cleaner's merged index); nothing when ``entries`` is empty."""
    if not entries:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(e.pack() for e in entries))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
