"""A hierarchical timing wheel, and the timer that drives it from one asyncio event loop.

Theory of operation (Kafka's ``TimingWheel`` / ``SystemTimer``)
-----------------------------------------------------------------
A wheel has ``wheel_size`` buckets, each ``tick_ms`` wide, so it covers ``interval = tick_ms *
wheel_size`` milliseconds from its ``current_time`` (always a multiple of ``tick_ms``). A bucket
(``TimerTaskList``) is a circular doubly-linked list of ``TimerTaskEntry`` items plus the
expiration of the tick it currently stands for. Adding an entry is O(1): pick the bucket by
``expiration // tick_ms % wheel_size``. An expiration beyond the wheel's interval goes to an
overflow wheel, created on demand, whose tick is the whole interval of the wheel below it
(1 ms, 20 ms, 400 ms, 8 s, 160 s, ... with the defaults). Cancelling is O(1): unlink the entry.

When a bucket's time comes, every entry in it is re-added: an entry of an overflow wheel then
falls into a finer wheel (or is found expired and its task runs). So a task fires no earlier
than its expiration and, in a finer wheel, as close to it as the loop allows.

Kafka waits for the next bucket with a ``DelayQueue`` polled by a reaper thread. Here a min-heap
of bucket expirations replaces the queue, and a single ``loop.call_at`` handle is kept armed for
the earliest non-empty bucket: it is re-armed when an earlier bucket appears and after each
firing. There is no polling and no handle per task. Without a loop (tests, simulations) the
timer keeps a manual clock moved by ``advance_clock(now_ms)``.

Times are milliseconds. On a loop the clock is ``loop.time() * 1000`` (monotonic); expirations
are rounded up to a whole tick so that a task never fires early.

Threading: none. Every method must be called from the thread that runs the timer's loop (or,
for a manual timer, from one thread). Task callbacks run inline, on that thread, while the
timer advances; they must not block, and must not call ``advance_clock``.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable

__all__ = ["SystemTimer", "TimerTask", "TimerTaskEntry", "TimerTaskList", "TimingWheel"]

log = logging.getLogger(__name__)


class TimerTask:
    """Something to run once ``delay_ms`` after it is added to a timer. Subclasses define ``run``."""

    __slots__ = ("delay_ms", "_entry")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Take the task out of its timer, in O(1). Harmless if it is not in one."""
        entry = self._entry
        if entry is not None:
            self._entry = None
            entry.remove()

    def _set_entry(self, entry: TimerTaskEntry) -> None:
        # A task lives in at most one bucket: re-adding it drops the previous entry.
        old = self._entry
        if old is not None and old is not entry:
            old.remove()
        self._entry = entry


class _Link:
    __slots__ = ("next", "prev")

    def __init__(self) -> None:
        self.next: _Link = self
        self.prev: _Link = self


class TimerTaskEntry(_Link):
    """A task's place in a bucket. ``cancelled`` once the task was cancelled or re-added."""

    __slots__ = ("task", "expiration_ms", "list")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        super().__init__()
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        task._set_entry(self)

    @property
    def cancelled(self) -> bool:
        return self.task._entry is not self

    def remove(self) -> None:
        bucket = self.list
        if bucket is not None:
            bucket.remove(self)


class _Counter:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


class TimerTaskList:
    """A bucket: a circular doubly-linked list of entries with a sentinel root."""

    __slots__ = ("_root", "_counter", "expiration_ms", "count")

    def __init__(self, counter: _Counter) -> None:
        self._root = _Link()
        self._counter = counter
        self.expiration_ms = -1
        self.count = 0

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the tick this bucket stands for; True if it changed (the bucket must be scheduled)."""
        changed = expiration_ms != self.expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        entry.remove()
        if entry.cancelled:
            return
        root = self._root
        tail = root.prev
        entry.next = root
        entry.prev = tail
        tail.next = entry
        root.prev = entry
        entry.list = self
        self.count += 1
        self._counter.n += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is not self:
            return
        entry.next.prev = entry.prev
        entry.prev.next = entry.next
        entry.next = entry.prev = entry
        entry.list = None
        self.count -= 1
        self._counter.n -= 1

    def flush(self, fn: Callable[[TimerTaskEntry], None]) -> None:
        """Empty the bucket, mark it unused, then hand each former entry to ``fn``.

        The bucket is emptied first because ``fn`` may run tasks that add new entries, and a
        new entry may land in this very bucket for a later tick.
        """
        root = self._root
        entries = []
        head = root.next
        while head is not root:
            entries.append(head)
            self.remove(head)  # type: ignore[arg-type]
            head = root.next
        self.expiration_ms = -1
        for entry in entries:
            fn(entry)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.count


class TimingWheel:
    """One level of the hierarchy. ``schedule(bucket)`` is called when a bucket takes a new expiration."""

    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval_ms",
        "current_time",
        "_buckets",
        "_counter",
        "_schedule",
        "_overflow",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        counter: _Counter,
        schedule: Callable[[TimerTaskList], None],
    ) -> None:
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.current_time = start_ms - start_ms % tick_ms
        self._counter = counter
        self._buckets = [TimerTaskList(counter) for _ in range(wheel_size)]
        self._schedule = schedule
        self._overflow: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        return self._overflow

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place the entry; False if it is cancelled or already expired (then the caller runs it)."""
        expiration = entry.expiration_ms
        if entry.cancelled:
            return False
        if expiration < self.current_time + self.tick_ms:
            return False
        if expiration < self.current_time + self.interval_ms:
            virtual_id = expiration // self.tick_ms
            bucket = self._buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self._schedule(bucket)
            return True
        if self._overflow is None:
            self._overflow = TimingWheel(
                self.interval_ms, self.wheel_size, self.current_time, self._counter, self._schedule
            )
        return self._overflow.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        if time_ms >= self.current_time + self.tick_ms:
            self.current_time = time_ms - time_ms % self.tick_ms
            if self._overflow is not None:
                self._overflow.advance_clock(self.current_time)


class SystemTimer:
    """Runs ``TimerTask``s when they expire, on an asyncio loop or on a manual clock.

    ``SystemTimer(loop=loop)`` reads ``loop.time()`` and keeps one ``call_at`` handle armed;
    ``SystemTimer()`` starts a manual clock at ``start_ms`` (default 0) that only
    ``advance_clock(now_ms)`` moves.
    """

    def __init__(
        self,
        *,
        tick_ms: int = 1,
        wheel_size: int = 20,
        loop: asyncio.AbstractEventLoop | None = None,
        start_ms: int | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError("tick_ms must be >= 1 and wheel_size >= 2")
        self._loop = loop
        self._tick_ms = tick_ms
        if loop is not None:
            now = loop.time() * 1000.0
        else:
            now = float(start_ms or 0)
        self._manual_now = now
        self._counter = _Counter()
        # (expiration_ms, seq, bucket); an item is stale when the bucket's expiration moved on.
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = 0
        self._wheel = TimingWheel(tick_ms, wheel_size, math.floor(now), self._counter, self._push_bucket)
        self._handle: asyncio.TimerHandle | None = None
        self._armed_ms: int | None = None
        self._closed = False

    # -- clock -----------------------------------------------------------------------------

    def now_ms(self) -> float:
        if self._loop is not None:
            return self._loop.time() * 1000.0
        return self._manual_now

    @property
    def size(self) -> int:
        """Tasks waiting in the wheels."""
        return self._counter.n

    @property
    def armed_ms(self) -> int | None:
        """Expiration (ms) the loop handle is armed for, or None."""
        return self._armed_ms

    # -- adding and running ----------------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task.run()`` in ``task.delay_ms``; an already expired task runs at once."""
        now = self.now_ms()
        # With no bucket due by now the wheels can safely move up to now, so a short delay
        # lands in the finest wheel rather than in a coarse overflow bucket.
        heap = self._heap
        if not heap or heap[0][0] > now:
            self._wheel.advance_clock(math.floor(now))
        expiration = math.ceil(now + task.delay_ms)
        tick = self._tick_ms
        if tick > 1:  # round up to a tick so that no task fires early
            expiration = -(-expiration // tick) * tick
        self._add_entry(TimerTaskEntry(task, expiration))
        self._arm()

    def advance_clock(self, now_ms: float | None = None) -> int:
        """Run every task due by ``now_ms`` (default: the clock's now); return how many ran.

        On a manual timer this is what moves time; it never moves backwards.
        """
        if now_ms is None:
            now_ms = self.now_ms()
        if self._loop is None:
            now_ms = max(now_ms, self._manual_now)
            self._manual_now = now_ms
        ran = self._advance(now_ms)
        self._arm()
        return ran

    def close(self) -> None:
        """Disarm the loop handle. Waiting tasks stay in the wheels and never run."""
        self._closed = True
        self._disarm()

    def _push_bucket(self, bucket: TimerTaskList) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (bucket.expiration_ms, self._seq, bucket))

    def _add_entry(self, entry: TimerTaskEntry) -> int:
        if self._wheel.add(entry):
            return 0
        if entry.cancelled:
            return 0
        self._run(entry.task)
        return 1

    def _run(self, task: TimerTask) -> None:
        task._entry = None
        try:
            task.run()
        except Exception:
            log.exception("timer task %r failed", task)

    def _advance(self, now_ms: float) -> int:
        heap = self._heap
        ran = 0

        def reinsert(entry: TimerTaskEntry) -> None:
            nonlocal ran
            ran += self._add_entry(entry)

        while heap and heap[0][0] <= now_ms:
            expiration, _, bucket = heapq.heappop(heap)
            if bucket.expiration_ms != expiration:
                continue  # stale: the bucket was flushed and reused since
            self._wheel.advance_clock(expiration)
            bucket.flush(reinsert)
        self._wheel.advance_clock(math.floor(now_ms))
        return ran

    # -- the one loop handle ---------------------------------------------------------------

    def _earliest(self) -> int | None:
        """Expiration of the earliest non-empty bucket, dropping stale and empty heap items."""
        heap = self._heap
        while heap:
            expiration, _, bucket = heap[0]
            if bucket.expiration_ms != expiration:
                heapq.heappop(heap)
            elif bucket.count == 0:
                # Every entry was cancelled. Forget the tick so a later add re-schedules it.
                heapq.heappop(heap)
                bucket.expiration_ms = -1
            else:
                return expiration
        return None

    def _arm(self) -> None:
        if self._loop is None or self._closed:
            return
        earliest = self._earliest()
        if earliest is None:
            self._disarm()
        elif self._armed_ms is None or earliest < self._armed_ms:
            self._disarm()
            self._armed_ms = earliest
            self._handle = self._loop.call_at(earliest / 1000.0, self._on_fire)

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._armed_ms = None

    def _on_fire(self) -> None:
        armed = self._armed_ms or 0
        self._handle = None
        self._armed_ms = None
        # The loop may wake a hair before the deadline; the armed tick counts as reached.
        self._advance(max(self.now_ms(), armed))
        self._arm()
