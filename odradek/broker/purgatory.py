"""Delayed operations and the purgatory that holds them (Kafka's ``DelayedOperationPurgatory``).

A delayed operation is a request that cannot be answered yet: a Fetch waiting for
``fetch.min.bytes`` or ``max_wait_ms``, a Produce with ``acks=all`` waiting for the high
watermark. It completes exactly once, either because an event made it satisfiable or because
its delay ran out:

* ``try_complete()`` checks the condition; when it holds it calls ``force_complete()`` and
  returns True (returning True alone also works: the purgatory then completes it).
* ``force_complete()`` completes the operation if nobody did before: it leaves the timer and its
  watcher lists, runs ``on_complete()``, and resolves the operation's awaitable. Only the first
  call does anything; it returns True for that call only.
* when the delay runs out the timer calls ``run()``: ``force_complete()`` then ``on_expiration()``.

The purgatory watches an operation under keys (e.g. a topic-partition). Whoever changes the
state behind a key (an append, a high-watermark move) calls ``check_and_complete(key)``, which
retries ``try_complete()`` on every operation watching that key.

A handler awaits the operation: ``result = await op`` returns what ``on_complete()`` returned (or
raises what it raised). If the awaiting task is cancelled, the operation is abandoned: it leaves
the timer and the watcher lists without running any callback.

Differences from Kafka, all from running on one asyncio loop: no locks; an operation leaves
every watcher list as soon as it completes (O(keys)), so no purge thread is needed and
``purge_completed()`` is only a safety net; callbacks run inline when the triggering event or
the timer fires; a delay of 0 or less completes (as expired) at once and schedules nothing.

Threading: none needed, none provided. Call everything from the event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable
from typing import Any, Generic, TypeVar

from odradek.broker.timing_wheel import SystemTimer, TimerTask

__all__ = ["DelayedOperation", "DelayedOperationPurgatory"]

log = logging.getLogger(__name__)


class DelayedOperation(TimerTask):
    """An operation that completes once, on an event or after ``delay_ms``. Subclass it.

    Override ``try_complete`` and ``on_complete``; ``on_expiration`` is optional.
    """

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._expired = False
        self._abandoned = False
        self._result: Any = None
        self._exception: BaseException | None = None
        self._future: asyncio.Future | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._watch_keys: tuple[Hashable, ...] = ()

    # -- to override -----------------------------------------------------------------------

    def try_complete(self) -> bool:
        """If the operation can complete now, call ``self.force_complete()`` and return True."""
        raise NotImplementedError

    def on_complete(self) -> Any:
        """Build the outcome, exactly once; the return value is what ``await op`` gives."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed because its delay ran out."""

    # -- state -----------------------------------------------------------------------------

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def expired(self) -> bool:
        """True if the delay ran out (set before ``on_complete`` runs, so it can look)."""
        return self._expired

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def force_complete(self) -> bool:
        """Complete now, unless already completed. True only for the call that completed it."""
        if self._completed:
            return False
        self._finish()
        try:
            self._result = self.on_complete()
        except Exception as exc:
            self._exception = exc
        self._resolve()
        return True

    def abandon(self) -> bool:
        """Drop the operation without running callbacks (its requester went away)."""
        if self._completed:
            return False
        self._abandoned = True
        self._finish()
        if self._future is not None and not self._future.done():
            self._future.cancel()
        return True

    def run(self) -> None:
        """Timer callback: the delay ran out."""
        if self._completed:
            return
        self._expired = True
        self.force_complete()
        self.on_expiration()

    def _fail(self, exc: BaseException) -> None:
        if self._completed:
            return
        self._finish()
        self._exception = exc
        self._resolve()

    def _finish(self) -> None:
        self._completed = True
        self.cancel()
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._untrack(self)

    def _resolve(self) -> None:
        fut = self._future
        if fut is None or fut.done():
            return
        if self._exception is not None:
            fut.set_exception(self._exception)
        else:
            fut.set_result(self._result)

    # -- awaiting --------------------------------------------------------------------------

    async def wait(self) -> Any:
        """Wait for completion; return ``on_complete()``'s value or raise its exception.

        Meant for one waiter. Cancelling the waiting task abandons the operation.
        """
        if not self._completed:
            if self._future is None:
                self._future = asyncio.get_running_loop().create_future()
            try:
                await self._future
            except asyncio.CancelledError:
                self.abandon()
                raise
        if self._abandoned:
            raise asyncio.CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def __await__(self):
        return self.wait().__await__()


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    """Holds delayed operations until they complete or expire.

    ``timer`` may be shared by several purgatories; without one the purgatory makes its own,
    on the running loop if there is one, else on a manual clock (then call
    ``timer.advance_clock``), and closes it in ``close()``.
    """

    def __init__(self, name: str, timer: SystemTimer | None = None) -> None:
        self.name = name
        self._owns_timer = timer is None
        if timer is None:
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            timer = SystemTimer(loop=loop)
        self.timer = timer
        self._watchers: dict[Hashable, dict[int, Op]] = {}
        self._pending: dict[int, Op] = {}
        self._watched = 0

    @property
    def watched(self) -> int:
        """Watch registrations (an operation watching three keys counts three times)."""
        return self._watched

    @property
    def delayed(self) -> int:
        """Operations waiting in this purgatory."""
        return len(self._pending)

    def watch_keys(self) -> list[Hashable]:
        return list(self._watchers)

    def try_complete_else_watch(self, op: Op, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; else watch it under the keys and start its timer.

        Returns True if ``op`` completed in this call through ``try_complete``. An operation
        whose delay is 0 or less and cannot complete at once expires at once (False).
        """
        if op.is_completed:
            raise ValueError(f"{self.name}: operation {op!r} is already completed")
        if self._try(op):
            return True
        if op.is_completed:  # try_complete raised; the operation failed with that error
            return False
        if op.delay_ms <= 0:
            op.run()
            return False
        keys = tuple(dict.fromkeys(watch_keys))
        op._purgatory = self
        op._watch_keys = keys
        oid = id(op)
        self._pending[oid] = op
        watchers = self._watchers
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                ops = watchers[key] = {}
            ops[oid] = op
        self._watched += len(keys)
        self.timer.add(op)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry every operation watching ``key``; return how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        # A snapshot: completions remove operations from the live dict, and a callback may
        # trigger a nested check on the same key.
        for op in list(ops.values()):
            if not op.is_completed and self._try(op):
                completed += 1
        return completed

    def purge_completed(self) -> int:
        """Drop completed operations still registered (normally none); return how many."""
        purged = 0
        for key in list(self._watchers):
            ops = self._watchers[key]
            for oid, op in list(ops.items()):
                if op.is_completed:
                    del ops[oid]
                    self._watched -= 1
                    purged += 1
            if not ops:
                del self._watchers[key]
        for oid, op in list(self._pending.items()):
            if op.is_completed:
                del self._pending[oid]
        return purged

    def close(self) -> None:
        """Abandon every waiting operation (their waiters see CancelledError); close an owned timer."""
        for op in list(self._pending.values()):
            op.abandon()
        if self._owns_timer:
            self.timer.close()

    def _try(self, op: Op) -> bool:
        try:
            ready = op.try_complete()
        except Exception as exc:
            log.exception("%s: try_complete of %r failed", self.name, op)
            op._fail(exc)
            return False
        if ready and not op.is_completed:
            op.force_complete()
        return op.is_completed

    def _untrack(self, op: Op) -> None:
        oid = id(op)
        self._pending.pop(oid, None)
        watchers = self._watchers
        for key in op._watch_keys:
            ops = watchers.get(key)
            if ops is not None and ops.pop(oid, None) is not None:
                self._watched -= 1
                if not ops:
                    del watchers[key]
        op._watch_keys = ()
        op._purgatory = None
