"""Ending background asyncio tasks at shutdown, the one way every component does it."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("odradek")


async def cancel_and_wait(*tasks: asyncio.Task | None) -> None:
    """Cancel every task given (None entries are skipped) and wait until each has ended. A
    task that had already failed is logged, not raised, so that the shutdown goes on."""
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    for task in live:
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("background task %s failed", task.get_name())


def start_task(make_coro, name: str) -> asyncio.Task | None:
    """Run ``make_coro()`` as a task on the running loop; None when no loop runs (a component
    driven synchronously, as some tests do)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.create_task(make_coro(), name=name)
