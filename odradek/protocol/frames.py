"""Size-prefixed frames, read straight into preallocated buffers.

``FrameReader`` is the sans-IO half of a connection: the transport asks it where to
receive (``get_buffer``), tells it how many bytes arrived (``buffer_updated``) and gets
back the complete frames. Small frames are sliced out of one reusable buffer without
copying; a frame larger than that buffer gets a buffer of its own, received into
directly; that buffer is kept and reused for the next large frame, so a stream of
1 MB Produce requests allocates nothing per request. Frames are memoryviews that stay
valid until the next ``get_buffer`` call, so the caller must finish with them (or copy
what it keeps) before receiving again.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameTooLarge(ValueError):
    def __init__(self, size: int, limit: int):
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidFrameSize(ValueError):
    pass


class FrameReader:
    def __init__(self, max_frame_size: int, buffer_size: int = 256 * 1024):
        self.max_frame_size = max_frame_size
        self._buf = bytearray(buffer_size)
        self._view = memoryview(self._buf)
        self._start = 0  # first unconsumed byte
        self._end = 0  # first free byte
        self._large: memoryview | None = None  # the frame too big for _buf being received
        self._large_filled = 0
        self._spare = bytearray(0)  # reused storage for large frames

    def get_buffer(self) -> memoryview:
        if self._large is not None:
            return self._large[self._large_filled :]
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < 16 * 1024:
            pending = self._end - self._start
            self._buf[:pending] = self._buf[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled < len(self._large):
                return []
            frame = self._large
            self._large = None
            return [frame]
        self._end += nbytes
        frames = []
        buf, start, end = self._buf, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0:
                raise InvalidFrameSize(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            if end - start - 4 >= size:
                frames.append(self._view[start + 4 : start + 4 + size])
                start += 4 + size
                continue
            if 4 + size > len(buf):
                have = end - start - 4
                if len(self._spare) < size:
                    self._spare = bytearray(size)
                self._large = memoryview(self._spare)[:size]
                self._large[:have] = buf[start + 4 : end]
                self._large_filled = have
                start = end
            break
        self._start, self._end = start, end
        return frames
