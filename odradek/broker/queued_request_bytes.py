"""``queued.max.request.bytes``: one pool of request bytes shared by every connection."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.broker.network import Connection

log = logging.getLogger("odradek.broker.network")  # the network layer's log, where it always was

_LOG_EVERY_S = 10.0  # at most one "pool spent" warning this often


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
        self._waiting: dict[Connection, None] = {}  # insertion-ordered
        self._last_log = -_LOG_EVERY_S

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def reserve(self, conn: Connection, size: int) -> bool:
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

    def forget(self, conn: Connection) -> None:
        self._waiting.pop(conn, None)
