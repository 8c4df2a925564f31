"""Writing a response's buffers: small ones joined so a response costs one send, large ones
(record data) and file slices kept apart, and responses holding file slices (Fetch) streamed
from the segment files as the socket drains.

Theory of operation. A Fetch answer may name many megabytes of log; reading it whole before
writing would hold all of it for as long as the peer takes to read it (a peer that never
reads would hold it forever). A ``ResponseStream`` writes such an answer a piece at a time:
each call writes what the transport takes until the transport reports it is over its
high-water mark (``pause_writing``), then stops; the connection calls it again on
``resume_writing``, and takes no further request meanwhile. So one connection holds at
most the transport's high-water mark plus one ``CHUNK``, whatever the answer's size.
File slices go out either copied (``pread`` a chunk, then the transport writes it; the only
way over TLS) or, with ``sendfile``, straight from the page cache into a plaintext socket
while the transport has nothing buffered (so bytes stay in order); when the socket is full,
one chunk goes through the transport, whose ``resume_writing`` says when to carry on.
"""

from __future__ import annotations

import os
from collections.abc import Callable

JOIN_BELOW = 64 * 1024
CHUNK = 512 * 1024  # bytes read from a file per write (benchmarks/broker_bench.py, raw Fetch rows)


def coalesce(parts: list) -> list:
    """Join runs of small buffers; keep large ones (record data) and file slices apart."""
    out: list = []
    run: list = []
    for part in parts:
        if hasattr(part, "send_to") or len(part) >= JOIN_BELOW:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(part)
        else:
            run.append(part)
    if run:
        out.append(b"".join(run))
    return out


def send_direct(fd: int, parts: list) -> list:
    """writev ``parts`` to a non-blocking socket; return what it did not take."""
    try:
        n = os.writev(fd, parts)
    except BlockingIOError:
        return parts
    for i, part in enumerate(parts):
        if n < len(part):
            return [memoryview(part)[n:]] + parts[i + 1 :]
        n -= len(part)
    return []


class ResponseStream:
    """The buffers and file slices of one response, written as the socket takes them.

    ``sendfile``: send file slices with ``os.sendfile`` where the connection offers a socket
    descriptor (plaintext); else they are read a ``CHUNK`` at a time. Errors writing to the
    socket (the peer went away) propagate as ``OSError``; a file that cannot be read raises
    ``KafkaStorageErrorError``."""

    __slots__ = ("parts", "index", "offset", "sendfile")

    def __init__(self, parts: list, sendfile: bool):
        self.parts = parts
        self.index = 0  # the part being written
        self.offset = 0  # bytes of it already written
        self.sendfile = sendfile

    def write(self, transport, fd: int | None, paused: Callable[[], bool]) -> bool:
        """Write until done (True) or until ``paused()`` (False: call again once resumed)."""
        parts = self.parts
        if not self.sendfile:
            fd = None
        batch: list = []
        size = 0
        while self.index < len(parts):
            part = parts[self.index]
            if not hasattr(part, "send_to"):
                batch.append(part)
                size += len(part)
                self._next()
            elif fd is None:
                batch.append(self._read(part, CHUNK - size))
                size += len(batch[-1])
            else:
                if batch:
                    _flush(transport, fd, batch)
                    batch, size = [], 0
                if not transport.get_write_buffer_size() and self._send_file(fd, part):
                    continue
                # The socket is full (or the transport holds bytes that must go first): one
                # chunk through the transport, whose resume_writing says when it drained.
                batch.append(self._read(part, CHUNK))
                size += len(batch[-1])
            if size >= CHUNK:
                transport.writelines(batch)
                batch, size = [], 0
                if transport.is_closing():  # the peer went away: nothing more to read for it
                    return True
                if paused():
                    return self.index == len(parts)
        if batch:
            transport.writelines(batch)
        return True

    def _next(self) -> None:
        self.index += 1
        self.offset = 0

    def _read(self, part, most: int) -> bytes:
        n = min(part.size - self.offset, most)
        data = part.read(self.offset, n)
        self.offset += n
        if self.offset == part.size:
            self._next()
        return data

    def _send_file(self, fd: int, part) -> bool:
        """sendfile the rest of ``part`` while the socket takes it; True if all went."""
        try:
            while self.offset < part.size:
                n = part.send_to(fd, self.offset)
                if n == 0:
                    break
                self.offset += n
        except BlockingIOError:
            pass
        if self.offset < part.size:
            return False
        self._next()
        return True


def _flush(transport, fd: int, batch: list) -> None:
    """Write ``batch`` straight to the socket while the transport holds nothing (else, and
    whatever the socket does not take, through the transport, keeping the order)."""
    if transport.get_write_buffer_size():
        transport.writelines(batch)
        return
    left = send_direct(fd, batch)
    if left:
        transport.writelines(left)
