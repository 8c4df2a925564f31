"""FileRecords: a segment's ``.log`` file; FileSlice: a byte range of one, ready for sendfile.

File format: record batches back to back, exactly as they travel in Produce/Fetch (v2
``RecordBatch``, see ``odradek.protocol.batch``; legacy v0/v1 message sets are read but never
written). There is no file header and no padding: the file size is the end of the log.

Writes use ``os.write``/``os.writev`` on a raw ``O_APPEND`` descriptor, so an append that
returned is in the kernel's page cache and survives ``kill -9`` of the process; ``flush``
is ``fdatasync`` for surviving a machine crash. A failed or short write is undone by
truncating back to the previous size, so the file never keeps a torn batch from a live
process. Reads use ``os.pread`` and never move a file position.

A FileSlice holds a reference to its FileRecords, so the descriptor stays open for the
slice's life even after the segment is rolled or renamed to ``.deleted``; deleted files are
closed only after ``file.delete.delay.ms`` (the log's job), like Kafka's async delete.

Descriptors are opened lazily (``FileRecords(path, lazy=True)``, what segments use): the
file is only stat'ed until its first read or write opens it, and ``release`` closes it again
(to be reopened on next use), so loading thousands of partitions needs a handful of
descriptors at a time. An unopened FileRecords is a ``_Unopened`` (same slots) whose first
use of ``fd`` opens the file and turns it back into a plain FileRecords, so an open one keeps
CPython's fast attribute access and appends pay nothing for the laziness.
An open refused for want of descriptors (EMFILE) raises KafkaStorageErrorError, not OSError:
it says nothing about the disk.

Thread rules: one owner appends/truncates (the log's owner); ``pread``/``FileSlice.read``/
sendfile and ``flush`` are safe from any thread concurrently with appends.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import types

from ..protocol import batch as batch_format
from ..protocol import errors

_IOV_MAX = 1024
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_fdatasync = getattr(os, "fdatasync", os.fsync)
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND
_open_lock = threading.Lock()  # a lazy open may race with a reader thread (the cleaner)


def open_or_explain(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open``, but running out of descriptors raises KafkaStorageErrorError saying so."""
    try:
        return os.open(path, flags, mode)
    except OSError as e:
        if e.errno in (errno.EMFILE, errno.ENFILE):
            raise errors.KafkaStorageErrorError(
                f"Cannot open {path}: too many open files; raise the broker's RLIMIT_NOFILE "
                "(ulimit -n) or host fewer partitions"
            ) from e
        raise


class FileRecords:
    """A segment's ``.log``: record batches back to back as they travel on the wire, no
    header. Its segment's owner appends and truncates; ``pread``, slices (sendfile) and
    ``flush`` are safe from any thread."""

    __slots__ = ("path", "fd", "_size", "closed")

    def __init__(self, path: str, *, lazy: bool = False):
        self.path = path
        self.closed = False
        if lazy:
            try:
                self._size = os.stat(path).st_size
            except FileNotFoundError:
                self._size = 0  # created by the first write
            self.__class__ = _Unopened
        else:
            self.fd = open_or_explain(path, _OPEN_FLAGS)
            self._size = os.fstat(self.fd).st_size

    @property
    def is_open(self) -> bool:
        return not self.closed and _open_fd(self) is not None

    def release(self, sync: bool = False) -> None:
        """Close the descriptor (fdatasync first when ``sync``); the next use reopens the file."""
        fd = _open_fd(self)
        if fd is None or self.closed:
            return
        try:
            if sync:
                _fdatasync(fd)
        finally:
            del self.fd
            self.__class__ = _Unopened
            os.close(fd)

    @classmethod
    def open_read_only(cls, path: str) -> FileRecords:
        """Open an existing file for reading only (never creates it): the cleaner's worker."""
        self = cls.__new__(cls)
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self.fd).st_size
        self.closed = False
        return self

    @property
    def size(self) -> int:
        return self._size

    # ---- writing ---------------------------------------------------------------------

    def append(self, data) -> int:
        """Append one bytes-like; returns the position it was written at."""
        pos = self._size
        try:
            n = os.write(self.fd, data)
            if n != len(data):
                view = memoryview(data)
                while n < len(view):
                    n += os.write(self.fd, view[n:])
        except OSError as e:
            self._undo(pos)
            e.filename = self.path
            raise errors.KafkaStorageErrorError(f"Write to {self.path} failed: {e}") from e
        self._size = pos + n
        return pos

    def appendv(self, parts: list, total: int) -> int:
        """Append the concatenation of ``parts`` (``total`` bytes) with writev; returns the position."""
        pos = self._size
        fd = self.fd
        try:
            if len(parts) <= _IOV_MAX:
                n = os.writev(fd, parts)
                if n != total:
                    self._finish_short_write(parts, n)
            else:
                for i in range(0, len(parts), _IOV_MAX):
                    chunk = parts[i : i + _IOV_MAX]
                    want = sum(len(p) for p in chunk)
                    n = os.writev(fd, chunk)
                    if n != want:
                        self._finish_short_write(chunk, n)
        except OSError as e:
            self._undo(pos)
            e.filename = self.path
            raise errors.KafkaStorageErrorError(f"Write to {self.path} failed: {e}") from e
        self._size = pos + total
        return pos

    def _finish_short_write(self, parts: list, written: int) -> None:
        for part in parts:
            length = len(part)
            if written >= length:
                written -= length
                continue
            view = memoryview(part)[written:]
            written = 0
            while view:
                n = os.write(self.fd, view)
                view = view[n:]

    def _undo(self, pos: int) -> None:
        try:
            os.ftruncate(self.fd, pos)
        except OSError:
            pass

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns the bytes removed."""
        if size > self._size or size < 0:
            raise ValueError(f"Cannot truncate {self.path} of size {self._size} to {size}")
        removed = self._size - size
        if removed:
            os.ftruncate(self.fd, size)
            self._size = size
        return removed

    def flush(self) -> None:
        fd = _open_fd(self)
        if fd is not None and not self.closed:  # never opened since the last release: nothing to sync
            _fdatasync(fd)

    # ---- reading ---------------------------------------------------------------------

    def pread(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (short only at the end of the file)."""
        data = os.pread(self.fd, size, position)
        if len(data) < size and len(data) and position + len(data) < self._size:
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(self.fd, size - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def slice(self, position: int, size: int, first_offset: int = -1) -> FileSlice:
        return FileSlice(self, position, size, first_offset)

    def batches(self, start: int = 0, end: int | None = None, chunk_size: int = 65536, full: bool = False):
        """Yield ``(position, buf, buf_pos, size)`` for each batch in ``[start, end)``.

        ``buf[buf_pos:buf_pos + 61]`` holds the batch's header (or all of the batch when
        ``full``). Stops at the first batch that is incomplete or whose length field is
        nonsense; the caller compares the last position reached with ``end`` to spot a torn
        or corrupt tail.
        """
        if end is None:
            end = self._size
        pos = start
        buf = b""
        buf_start = buf_end = start
        unpack = _OFFSET_AND_LENGTH.unpack_from
        header_size = batch_format.HEADER_SIZE
        chunk = max(chunk_size, header_size)
        while pos + batch_format.LOG_OVERHEAD <= end:
            if pos + min(header_size, end - pos) > buf_end:
                buf = self.pread(pos, min(chunk, end - pos))
                buf_start = pos
                buf_end = pos + len(buf)
                if buf_end < pos + batch_format.LOG_OVERHEAD:
                    return
            rel = pos - buf_start
            size = unpack(buf, rel)[1] + batch_format.LOG_OVERHEAD
            if size < batch_format.LOG_OVERHEAD + 5 or pos + size > end:
                return
            if full and pos + size > buf_end:
                buf = self.pread(pos, max(size, min(chunk, end - pos)))
                buf_start = pos
                buf_end = pos + len(buf)
                rel = 0
                if buf_end < pos + size:
                    return
            yield pos, buf, rel, size
            pos += size

    # ---- lifecycle -------------------------------------------------------------------

    def rename(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            fd = _open_fd(self)
            if fd is not None:
                os.close(fd)

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class _Unopened(FileRecords):
    """A FileRecords whose file is not open: the first use of ``fd`` opens it. (Only this
    class has ``__getattr__``: defining it on FileRecords would slow every attribute access.)"""

    __slots__ = ()

    def __getattr__(self, name: str):
        # Only reached while the ``fd`` slot is unset.
        if name != "fd":
            raise AttributeError(name)
        with _open_lock:
            fd = _open_fd(self)
            if fd is None:
                if self.closed:
                    raise OSError(errno.EBADF, f"{self.path} is closed")
                fd = self.fd = open_or_explain(self.path, _OPEN_FLAGS)
                # Back to a plain FileRecords, the point of this class (mypy allows only subclasses).
                self.__class__ = FileRecords  # type: ignore[assignment]
            return fd


_FD_SLOT: types.MemberDescriptorType = FileRecords.__dict__["fd"]  # the slot's descriptor


def _open_fd(records: FileRecords) -> int | None:
    """The descriptor if the file is open, without opening it."""
    try:
        return _FD_SLOT.__get__(records, FileRecords)
    except AttributeError:
        return None


class FileSlice:
    """``size`` bytes of a log file from ``position``; ``first_offset`` is the first batch's base offset.

    Send it with ``os.sendfile(sock, slice.fd, slice.position, slice.size)`` (or
    ``send_to``) or copy it with ``read()``. The slice keeps its FileRecords alive.
    """

    __slots__ = ("file", "position", "size", "first_offset")

    def __init__(self, file: FileRecords, position: int, size: int, first_offset: int = -1):
        self.file = file
        self.position = position
        self.size = size
        self.first_offset = first_offset

    @property
    def fd(self) -> int:
        if self.file.closed:
            raise errors.KafkaStorageErrorError(f"Log file {self.file.path} was closed")
        return self.file.fd

    @property
    def path(self) -> str:
        return self.file.path

    def __len__(self) -> int:
        return self.size

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        """``size`` bytes of the slice (default: the rest) from ``offset`` within it."""
        size = self.size - offset if size is None else min(size, self.size - offset)
        data = self.file.pread(self.position + offset, size) if size else b""
        if len(data) != size:
            raise errors.KafkaStorageErrorError(
                f"Short read from {self.file.path}: {len(data)} of {size} bytes at {self.position + offset}"
            )
        return data

    def send_to(self, out_fd: int, offset: int = 0) -> int:
        """sendfile the bytes from ``offset`` within the slice; returns the count sent."""
        return os.sendfile(out_fd, self.fd, self.position + offset, self.size - offset)

    def __repr__(self) -> str:
        return f"FileSlice({self.file.path!r}, position={self.position}, size={self.size}, first={self.first_offset})"
