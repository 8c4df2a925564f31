"""Writing a response's buffers: small ones joined so a response costs one send, large ones
(record data) and file slices kept apart, and a direct ``writev`` to a non-blocking socket."""

from __future__ import annotations

import os

JOIN_BELOW = 64 * 1024


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
