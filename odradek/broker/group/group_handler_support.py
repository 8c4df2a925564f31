"""Small helpers shared by the group handlers (``odradek/broker/handlers/*group*``, offsets)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable

from odradek.protocol import errors


def coordinator_of(broker):
    """The broker's GroupCoordinator; COORDINATOR_NOT_AVAILABLE while there is none."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        raise errors.CoordinatorNotAvailableError("the group coordinator is not running")
    return coordinator


def ms(value) -> int:
    """kio gives durations as timedelta; plain ints pass through."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def client_host(request) -> str:
    """Kafka shows a member's host as ``/<address>``."""
    peer = request.peer or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


def answer_later(register: Callable[[Callable], None], build: Callable):
    """Run ``register(callback)``; answer ``build(result)`` now if it was called, else when it is.

    The callback may fire after the connection went away; then it does nothing.
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def callback(result) -> None:
        if not future.done():
            future.set_result(result)

    register(callback)
    if future.done():
        return build(future.result())

    async def wait():
        return build(await future)

    return wait()
