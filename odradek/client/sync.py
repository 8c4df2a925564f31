"""The blocking API: the asyncio engine on a private event loop in a background thread.

Each blocking client owns one ``LoopThread``. Blocking methods submit a coroutine to it
and wait for the result; the producer's ``send`` appends to the (thread-safe)
accumulator directly from the caller's thread and only crosses to the loop when it must
wait for metadata or memory. Consumer callbacks that must run on the user's thread (the
rebalance listener) are handed back through ``UserThreadCalls`` and run while the user's
thread waits in a blocking call.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading

from odradek.client.client_errors import IllegalStateError, KafkaTimeoutError


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.new_event_loop()


class UserThreadCalls:
    """Calls the engine wants made on the user's thread (rebalance callbacks)."""

    def __init__(self):
        self._calls = collections.deque()
        self._event = threading.Event()

    async def call(self, fn, *args):
        """From the loop: run ``fn(*args)`` on the user's thread and wait for it."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._calls.append((fn, args, fut, loop))
        self._event.set()
        return await fut

    def run_pending(self) -> None:
        """On the user's thread: run what is queued."""
        self._event.clear()
        while self._calls:
            fn, args, fut, loop = self._calls.popleft()
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed back to the engine
                loop.call_soon_threadsafe(_set_exception, fut, exc)
            else:
                loop.call_soon_threadsafe(_set_result, fut, result)

    @property
    def event(self) -> threading.Event:
        return self._event


def _set_result(fut, value):
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut, exc):
    if not fut.done():
        fut.set_exception(exc)


class LoopThread:
    def __init__(self, name: str):
        self.loop = new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()
        self.user_calls: UserThreadCalls | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            finally:
                self.loop.close()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def run(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop and wait for its result on this thread."""
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError(
                "a blocking client method was called from its own I/O thread (e.g. inside a delivery "
                "callback); use the asyncio API there or call it from another thread"
            )
        if not self.thread.is_alive():
            coro.close()
            raise IllegalStateError("the client's I/O thread is not running")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        calls = self.user_calls
        if calls is None:
            try:
                return fut.result(timeout)
            except concurrent.futures.TimeoutError:
                if fut.done():
                    raise  # the operation's own timeout error
                fut.cancel()
                raise KafkaTimeoutError(f"operation did not complete within {timeout}s") from None
        # Serve callbacks the engine hands to this thread while waiting.
        done_event = threading.Event()
        fut.add_done_callback(lambda _: (done_event.set(), calls.event.set()))
        while not done_event.is_set():
            calls.event.wait()
            calls.run_pending()
        return fut.result()

    def call_soon(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if not self.thread.is_alive():
            return
        if self.in_loop_thread():
            self.loop.stop()
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
