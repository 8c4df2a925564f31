"""Size-prefixed frames, received into buffers that grow with the bytes that arrive.

``FrameReader`` is the sans-IO half of a connection: the transport asks it where to
receive (``get_buffer``) and tells it how many bytes arrived (``received``); the caller
then takes complete frames one at a time (``next_frame``), so it may stop between two
frames (back-pressure) and carry on later from the same buffer. ``buffer_updated`` does
both steps and returns every complete frame at once.

Memory follows the bytes that arrived, never the size a prefix announces:

* Frames that fit the small buffer (``min_buffer``, allocated on the first receive) are
  sliced out of it without copying. A busy connection whose receives keep filling it
  gets it doubled, up to ``busy_buffer``.
* A larger frame is received into chunks of its own: the first is small, each next one
  twice the last up to ``LARGE_CHUNK`` (never past the announced size), so a partial frame
  holds its bytes received plus at most one chunk's unfilled room, and nothing is copied
  while it arrives (a doubling buffer would copy everything at each step and hold up to
  twice the bytes). A peer announcing 100 MiB and sending one byte costs kilobytes. Once
  complete, the chunks are copied into one buffer, each given back as soon as it is copied.
  A buffer of at most ``keep_large`` is kept for the next large frame, which is received
  straight into it (a stream of 1 MB Produce requests allocates nothing per request).
* ``release()`` gives the buffers back while nothing is buffered (an idle connection).

Frames are memoryviews that stay valid until the next ``get_buffer`` or ``release``, so
the caller must finish with them (or copy what it keeps) before receiving again.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

MIN_BUFFER = 8 * 1024
BUSY_BUFFER = 256 * 1024
KEEP_LARGE = 4 * 1024 * 1024
LARGE_CHUNK = 1024 * 1024
_LARGE_START = 64 * 1024


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int):
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrameSize(ValueError):
    pass


_EMPTY = bytearray(0)  # shared: never written to


class FrameReader:
    def __init__(
        self,
        max_frame_size: int,
        *,
        min_buffer: int = MIN_BUFFER,
        busy_buffer: int = BUSY_BUFFER,
        keep_large: int = KEEP_LARGE,
    ):
        self.max_frame_size = max_frame_size
        self.min_buffer = min_buffer
        self._busy_buffer = max(busy_buffer, min_buffer)
        self._keep_large = keep_large
        self._buf = _EMPTY  # the small buffer
        self._view = memoryview(self._buf)
        self._start = 0  # first unconsumed byte of _buf
        self._end = 0  # first free byte of _buf
        self._filled = False  # the last receive took all the room offered in _buf
        self._partial = 0  # announced size of the incomplete frame at _start (0: not known)
        self._large = _EMPTY  # the chunk a frame too big for _buf is being received into
        self._chunks: list[bytearray] = []  # that frame's earlier chunks, full
        self._large_size = 0  # that frame's size (0: no large frame in progress)
        self._large_filled = 0  # its bytes received, in _chunks and _large together
        self._chunk_filled = 0  # of which in _large
        self._spare = _EMPTY  # a large buffer kept for the next large frame

    # -- receiving ---------------------------------------------------------------------

    def get_buffer(self) -> memoryview:
        """Where the next receive should go (never empty)."""
        if self._large_size:
            return self._large_room()
        start, end = self._start, self._end
        if start == end:
            start = end = self._start = self._end = 0
        size = len(self._buf)
        if size == 0:
            self._set_buf(bytearray(self.min_buffer), 0)
            return self._view
        wanted = size
        if self._filled and size < self._busy_buffer:
            wanted = min(size * 2, self._busy_buffer)
        partial = self._partial
        if partial and 4 + partial > wanted:
            self._start_large()
            return self._large_room()
        if wanted != size:
            self._set_buf(bytearray(wanted), start)
        elif start and (size - end < size // 4 or start + 4 + partial > size):
            self._set_buf(self._buf, start)  # move the unconsumed bytes to the front
        return self._view[self._end :]

    def received(self, nbytes: int) -> None:
        """``nbytes`` arrived in the buffer ``get_buffer`` returned."""
        if self._large_size:
            self._large_filled += nbytes
            self._chunk_filled += nbytes
            return
        self._end += nbytes
        self._filled = self._end == len(self._buf)

    def next_frame(self) -> memoryview | None:
        """The next complete frame (without its size prefix), or None until more arrives.

        Raises ``FrameTooLarge`` or ``InvalidFrameSize`` for a size prefix out of range."""
        if self._large_size:
            size = self._large_size
            if self._large_filled < size:
                return None
            whole = self._assemble()
            if len(whole) <= self._keep_large:
                self._spare = whole
            self._large, self._large_size, self._large_filled, self._partial = _EMPTY, 0, 0, 0
            self._chunk_filled = 0
            return memoryview(whole)[:size]
        start, end = self._start, self._end
        if end - start < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buf, start)
        if size < 0:
            raise InvalidFrameSize(f"negative frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)
        if end - start - 4 < size:
            self._partial = size
            return None
        self._partial = 0
        self._start = start + 4 + size
        return self._view[start + 4 : start + 4 + size]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``received(nbytes)``, then every complete frame."""
        self.received(nbytes)
        frames = []
        while (frame := self.next_frame()) is not None:
            frames.append(frame)
        return frames

    # -- what is held ------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._end - self._start + self._large_filled

    @property
    def capacity(self) -> int:
        """Bytes of buffers this reader holds."""
        return len(self._buf) + sum(map(len, self._chunks)) + len(self._large) + len(self._spare)

    def outgrowing_frame(self) -> int:
        """The announced size of an incomplete frame that needs a buffer of its own (its
        receive grows memory beyond the small buffer), else 0."""
        if self._large_size:
            return self._large_size
        partial = self._partial
        if partial and 4 + partial > max(len(self._buf), self.min_buffer):
            return partial
        return 0

    def release(self) -> bool:
        """Give the buffers back if nothing is buffered; True if it did. The next receive
        starts again with a small buffer."""
        if self._end != self._start or self._large_size:
            return False
        self._buf = self._spare = _EMPTY
        self._view = memoryview(_EMPTY)
        self._start = self._end = 0
        self._filled = False
        return True

    # -- internals ---------------------------------------------------------------------

    def _set_buf(self, buf: bytearray, start: int) -> None:
        """Make ``buf`` the small buffer, holding the unconsumed bytes at its front."""
        pending = self._end - start
        if pending:
            # A slice of the old buffer itself is a copy, so an in-place move cannot overlap.
            buf[:pending] = (
                self._buf[start : self._end] if buf is self._buf else self._view[start : self._end]
            )
        self._buf = buf
        self._view = memoryview(buf)
        self._start, self._end = 0, pending
        self._filled = False

    def _start_large(self) -> None:
        size = self._partial
        have = self._end - self._start - 4
        if len(self._spare) >= size:  # the kept buffer holds the whole frame: one chunk
            buf = self._spare
        else:
            buf = bytearray(min(size, max(2 * have, _LARGE_START)))
        self._spare = _EMPTY
        buf[:have] = self._view[self._start + 4 : self._end]
        self._large, self._large_size, self._large_filled, self._chunk_filled = buf, size, have, have
        self._start = self._end = 0
        self._filled = False  # filled by a large frame's first bytes: not a sign of a busy stream

    def _large_room(self) -> memoryview:
        large, filled = self._large, self._chunk_filled
        if filled == len(large):
            self._chunks.append(large)
            left = self._large_size - self._large_filled
            self._large = large = bytearray(min(left, max(_LARGE_START, min(2 * len(large), LARGE_CHUNK))))
            self._chunk_filled = filled = 0
        return memoryview(large)[filled : min(len(large), filled + self._large_size - self._large_filled)]

    def _assemble(self) -> bytearray:
        """The complete large frame in one buffer; each chunk is dropped once copied, so
        the frame is held about once while it is put together."""
        chunks = self._chunks
        if not chunks:
            return self._large
        chunks.append(self._large)
        self._large = _EMPTY
        chunks.reverse()  # pop() from the end hands them out in order
        whole = bytearray(self._large_size)
        pos = 0
        while chunks:
            chunk = chunks.pop()
            whole[pos : pos + len(chunk)] = chunk
            pos += len(chunk)
        return whole
