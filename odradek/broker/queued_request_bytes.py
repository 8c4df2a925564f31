"""``queued.max.request.bytes``: one pool of request bytes shared by every connection, and
its default, derived from the machine's memory."""

from __future__ import annotations

import logging
import os
import time
from typing import Protocol

log = logging.getLogger("odradek.broker.network")  # the network layer's log, where it always was

_LOG_EVERY_S = 10.0  # at most one "pool spent" warning this often
MEMORY_SHARE = 256  # the default pool is this fraction of the memory the broker may use
_CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"


class WaitsForBytes(Protocol):
    """What the pool knows of a connection: its peer (for the log) and how to wake it."""

    peer: str

    def memory_available(self) -> None: ...


def usable_memory() -> int:
    """Bytes of memory this process may use: the machine's RAM, or its cgroup's limit (a
    container) when lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        with open(_CGROUP_LIMIT) as f:
            limit = f.read().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def default_limit(max_request_bytes: int, memory: int | None = None) -> int:
    """The default ``queued.max.request.bytes`` (Kafka's is -1, no limit): 1/256 of the
    usable memory, and at least ``socket.request.max.bytes`` so the largest request fits.
    Since one request may overshoot what is left of the pool (Kafka's rule), large requests
    being received then hold at most this plus one ``socket.request.max.bytes``."""
    memory = usable_memory() if memory is None else memory
    return max(max_request_bytes, memory // MEMORY_SHARE)


def limit_in_force(configured: int | None, max_request_bytes: int) -> int:
    """``queued.max.request.bytes`` as configured (-1: no limit), else its default."""
    return configured if configured is not None else default_limit(max_request_bytes)


def log_default_limit(limit: int) -> None:
    """Say once, after the listeners are bound, which default the broker chose."""
    log.info(
        "queued.max.request.bytes: %d bytes (%d MiB; unset, so 1/%d of the %d MiB of memory this "
        "broker may use, at least socket.request.max.bytes; -1 lifts the limit)",
        limit,
        limit >> 20,
        MEMORY_SHARE,
        usable_memory() >> 20,
    )


class QueuedRequestBytes:
    """``queued.max.request.bytes``: the pool of request bytes every connection draws on.

    Kafka's semantics (its MemoryPool): a request reserves its announced size when it
    starts to arrive and gives it back once handled; while anything is left in the pool a
    request may reserve more than is left, so one request of ``socket.request.max.bytes``
    always fits. Once the pool is spent, connections that start a large request wait
    without reading, and are called back in order as bytes are released. Requests that fit
    a connection's small receive buffer take nothing from the pool.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._waiting: dict[WaitsForBytes, None] = {}  # insertion-ordered
        self._last_log = -_LOG_EVERY_S

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def reserve(self, conn: WaitsForBytes, size: int) -> bool:
        if self.used < self.limit:
            self.used += size
            return True
        if not self._waiting and time.monotonic() - self._last_log >= _LOG_EVERY_S:
            self._last_log = time.monotonic()
            log.warning(
                "queued.max.request.bytes (%d) reached: %d bytes of requests are being received; "
                "connections starting another large request (%s, %d bytes) wait until it drops",
                self.limit,
                self.used,
                conn.peer,
                size,
            )
        self._waiting[conn] = None
        return False

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiting and self.used < self.limit:
            conn = next(iter(self._waiting))
            del self._waiting[conn]
            conn.memory_available()
            if not self._waiting:
                log.info(
                    "requests being received dropped below queued.max.request.bytes (%d); "
                    "every connection reads again",
                    self.limit,
                )

    def forget(self, conn: WaitsForBytes) -> None:
        self._waiting.pop(conn, None)
