"""Helpers for cluster tests: run an async body with a deadline, wait for a matching event."""

from __future__ import annotations

import asyncio
import time


def run(coro, timeout: float = 30.0):
    """Run an async test body on a fresh event loop, failing it if it takes longer than ``timeout``."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def next_event(queue: asyncio.Queue, match, timeout: float = 10.0, what: str = "event"):
    """The first event on ``queue`` for which ``match(event)`` is true, skipping others."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; saw {seen}")
        try:
            event = await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            continue
        if match(event):
            return event
        seen.append(event)
