"""The hierarchical timing wheel and its timer, on a manual clock and on a real asyncio loop."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from odradek.broker.timing_wheel import SystemTimer, TimerTask


class Recorder(TimerTask):
    def __init__(self, delay_ms: int, log: list, clock=None, name=None):
        super().__init__(delay_ms)
        self.log = log
        self.clock = clock
        self.name = name if name is not None else delay_ms

    def run(self) -> None:
        self.log.append((self.name, self.clock() if self.clock else None))


def manual_timer(**kw) -> SystemTimer:
    return SystemTimer(start_ms=0, **kw)


# -- manual clock ---------------------------------------------------------------------------


def test_tasks_fire_exactly_at_expiration_in_order():
    timer = manual_timer()
    fired: list = []
    rng = random.Random(7)
    delays = [rng.randrange(1, 3000) for _ in range(500)]
    for d in delays:
        timer.add(Recorder(d, fired, timer.now_ms))
    assert timer.size == len(delays)
    for now in range(1, 3001):
        timer.advance_clock(now)
    assert timer.size == 0
    assert [name for name, _ in fired] == sorted(delays)
    assert all(at == name for name, at in fired), "a task fired early or late"


def test_nothing_fires_before_its_time():
    timer = manual_timer()
    fired: list = []
    timer.add(Recorder(10, fired))
    assert timer.advance_clock(9) == 0
    assert fired == []
    assert timer.advance_clock(10) == 1
    assert [n for n, _ in fired] == [10]


@pytest.mark.parametrize(
    "delay",
    [1, 19, 20, 21, 350, 399, 400, 450, 7_999, 8_000, 60_000, 3_600_000, 3 * 3_600_000 + 17],
)
def test_overflow_wheels_fire_at_the_exact_millisecond(delay):
    timer = manual_timer()
    fired: list = []
    timer.add(Recorder(delay, fired, timer.now_ms))
    # Jump close to the deadline in big steps (each overflow level hands the task down).
    timer.advance_clock(delay - 1)
    assert fired == []
    timer.advance_clock(delay)
    assert fired == [(delay, delay)]
    assert timer.size == 0


def test_hierarchy_matches_the_textbook_example():
    # tick 1 ms, 20 buckets: 350 ms goes to the second wheel, 450 ms to the third.
    timer = manual_timer()
    fired: list = []
    timer.add(Recorder(350, fired))
    level1 = timer._wheel
    level2 = level1.overflow_wheel
    assert level2 is not None and level2.tick_ms == 20 and level2.interval_ms == 400
    assert level2.overflow_wheel is None
    timer.add(Recorder(450, fired))
    level3 = level2.overflow_wheel
    assert level3 is not None and level3.tick_ms == 400 and level3.interval_ms == 8000
    timer.advance_clock(400)  # the 450 ms task moves down a level, it does not fire
    assert [n for n, _ in fired] == [350]
    timer.advance_clock(449)
    assert [n for n, _ in fired] == [350]
    timer.advance_clock(450)
    assert [n for n, _ in fired] == [350, 450]


def test_one_big_jump_runs_everything_in_expiration_order():
    timer = manual_timer()
    fired: list = []
    delays = [3_600_000, 5, 90_000, 450, 1, 21, 8_000_000]
    for d in delays:
        timer.add(Recorder(d, fired))
    assert timer.advance_clock(10_000_000) == len(delays)
    assert [n for n, _ in fired] == sorted(delays)


def test_cancel_is_o1_and_idempotent():
    timer = manual_timer()
    fired: list = []
    tasks = [Recorder(d, fired) for d in (5, 5, 500, 50_000)]
    for t in tasks:
        timer.add(t)
    tasks[0].cancel()
    tasks[2].cancel()
    tasks[2].cancel()
    assert timer.size == 2
    timer.advance_clock(100_000)
    assert sorted(n for n, _ in fired) == [5, 50_000]
    tasks[1].cancel()  # after it ran: harmless
    assert timer.size == 0


def test_re_adding_a_task_moves_it():
    timer = manual_timer()
    fired: list = []
    task = Recorder(10, fired, timer.now_ms)
    timer.add(task)
    task.delay_ms = 30
    timer.add(task)
    assert timer.size == 1
    timer.advance_clock(29)
    assert fired == []
    timer.advance_clock(30)
    assert fired == [(10, 30)]


def test_zero_or_negative_delay_runs_inside_add():
    timer = manual_timer()
    fired: list = []
    timer.add(Recorder(0, fired))
    timer.add(Recorder(-5, fired))
    assert [n for n, _ in fired] == [0, -5]
    assert timer.size == 0


def test_a_failing_task_does_not_stop_the_others(caplog):
    class Boom(TimerTask):
        def run(self):
            raise RuntimeError("boom")

    timer = manual_timer()
    fired: list = []
    timer.add(Boom(5))
    timer.add(Recorder(5, fired))
    assert timer.advance_clock(5) == 2
    assert [n for n, _ in fired] == [5]
    assert "boom" in caplog.text


def test_task_scheduling_into_the_bucket_being_flushed():
    """Regression: an overdue bucket whose task schedules a task for the same slot one lap later.

    Bucket 10 (of 20) is flushed late, at 15; its task adds a 15 ms task: 15 + 15 = 30, which
    maps to bucket 10 again. It must fire at 30, once, and the flush must terminate.
    """
    timer = manual_timer()
    fired: list = []

    class Chain(TimerTask):
        def run(self):
            fired.append(("first", timer.now_ms()))
            timer.add(Recorder(15, fired, timer.now_ms, name="second"))

    timer.add(Chain(10))
    timer.advance_clock(15)
    assert fired == [("first", 15)]
    assert timer.size == 1
    timer.advance_clock(29)
    assert len(fired) == 1
    timer.advance_clock(30)
    assert fired == [("first", 15), ("second", 30)]


def test_late_clock_does_not_push_short_tasks_into_coarse_wheels():
    # The clock jumped far ahead with nothing due: a 3 ms task must still fire at +3 ms.
    timer = manual_timer()
    fired: list = []
    timer.advance_clock(1_234_567)
    timer.add(Recorder(3, fired, timer.now_ms))
    timer.advance_clock(1_234_569)
    assert fired == []
    timer.advance_clock(1_234_570)
    assert fired == [(3, 1_234_570)]


def test_clock_never_moves_backwards():
    timer = manual_timer()
    fired: list = []
    timer.advance_clock(100)
    timer.advance_clock(50)
    assert timer.now_ms() == 100
    timer.add(Recorder(1, fired, timer.now_ms))
    timer.advance_clock(101)
    assert fired == [(1, 101)]


def test_larger_tick_and_wheel():
    timer = manual_timer(tick_ms=10, wheel_size=64)
    fired: list = []
    for d in (5, 15, 640, 700, 41_000):
        timer.add(Recorder(d, fired, timer.now_ms))
    for now in range(0, 41_001):
        timer.advance_clock(now)
    # With a 10 ms tick a task fires at the first tick boundary at or after its expiration.
    assert [(n, at) for n, at in fired] == [(5, 10), (15, 20), (640, 640), (700, 700), (41_000, 41_000)]


def test_100k_tasks_performance_sanity():
    timer = manual_timer()
    fired: list = []
    rng = random.Random(1)
    tasks = [Recorder(rng.randrange(1, 30_000), fired) for _ in range(100_000)]
    start = time.process_time()
    for t in tasks:
        timer.add(t)
    added = time.process_time()
    for t in tasks[::4]:
        t.cancel()
    cancelled = time.process_time()
    for now in range(0, 30_001, 7):
        timer.advance_clock(now)
    timer.advance_clock(30_000)
    done = time.process_time()
    assert len(fired) == 75_000
    assert timer.size == 0
    # Captured like any test output: shown with -rP, or when the test fails.
    print(
        f"\n[timing wheel] 100k add {added - start:.3f}s, 25k cancel {cancelled - added:.3f}s,"
        f" expire 75k {done - cancelled:.3f}s"
    )
    # CPU time of this process, not wall time: other processes on a busy machine (the suite
    # runs in parallel) slow the clock on the wall, not the work done here.
    assert done - start < 5.0


# -- real asyncio loop ----------------------------------------------------------------------


def live_handles(loop) -> int:
    return sum(1 for h in loop._scheduled if not h.cancelled())


def test_on_a_real_loop_tasks_fire_in_order_never_early():
    async def main():
        loop = asyncio.get_running_loop()
        timer = SystemTimer(loop=loop)
        done = loop.create_future()
        fired: list = []
        delays = [37, 3, 15, 1, 80, 15, 22, 60, 0, 5]
        remaining = len(delays)
        max_live = 0

        class T(TimerTask):
            def __init__(self, d):
                super().__init__(d)
                self.added = loop.time() * 1000

            def run(self):
                nonlocal remaining, max_live
                fired.append((self.delay_ms, loop.time() * 1000 - self.added, self.added + self.delay_ms))
                remaining -= 1
                max_live = max(max_live, live_handles(loop))
                if remaining == 0:
                    done.set_result(None)

        for d in delays:
            timer.add(T(d))
            max_live = max(max_live, live_handles(loop))
        await asyncio.wait_for(done, 5)
        return fired, max_live, timer

    fired, max_live, timer = asyncio.run(main())
    # In the order they expire (added + delay, to the wheel's 1 ms tick): on a busy machine the
    # adds themselves take time, so a 1 ms task added first may expire before a 0 ms one.
    due = [expires for _, _, expires in fired]
    assert all(a <= b + 1 for a, b in zip(due, due[1:], strict=False)), fired
    assert sorted(d for d, _, _ in fired) == sorted(delays := [37, 3, 15, 1, 80, 15, 22, 60, 0, 5])
    for delay, elapsed, _ in fired:
        assert elapsed >= delay - 0.01, f"{delay} ms task fired after {elapsed:.3f} ms"
    assert max_live <= 1
    assert timer.armed_ms is None
    assert len(delays) == 10


def test_on_a_real_loop_an_earlier_task_re_arms_the_handle():
    async def main():
        loop = asyncio.get_running_loop()
        timer = SystemTimer(loop=loop)
        done = loop.create_future()
        fired = []
        calls = 0
        real_call_at = loop.call_at

        def counting_call_at(when, cb, *args, **kw):
            nonlocal calls
            calls += 1
            return real_call_at(when, cb, *args, **kw)

        loop.call_at = counting_call_at
        start = loop.time()

        class T(TimerTask):
            def run(self):
                fired.append((self.delay_ms, (loop.time() - start) * 1000))
                if len(fired) == 2:
                    done.set_result(None)

        timer.add(T(300))
        first_armed = timer.armed_ms
        timer.add(T(10))
        assert timer.armed_ms < first_armed
        assert live_handles(loop) == 1
        await asyncio.wait_for(done, 5)
        return fired, calls

    fired, calls = asyncio.run(main())
    assert [d for d, _ in fired] == [10, 300]
    assert 10 <= fired[0][1] < 100
    # One handle per bucket hop at most: 300 ms sits in the 20 ms wheel, then the 1 ms wheel.
    assert calls <= 5


def test_on_a_real_loop_cancelled_tasks_leave_nothing_armed():
    async def main():
        loop = asyncio.get_running_loop()
        timer = SystemTimer(loop=loop)
        tasks = [Recorder(d, []) for d in (30, 30, 60)]
        for t in tasks:
            timer.add(t)
        for t in tasks:
            t.cancel()
        await asyncio.sleep(0.1)
        return timer, [t.log for t in tasks]

    timer, logs = asyncio.run(main())
    assert logs == [[], [], []]
    assert timer.armed_ms is None
    assert timer.size == 0


def test_close_disarms():
    async def main():
        loop = asyncio.get_running_loop()
        timer = SystemTimer(loop=loop)
        log: list = []
        timer.add(Recorder(5, log))
        timer.close()
        await asyncio.sleep(0.03)
        return log, live_handles(loop)

    log, live = asyncio.run(main())
    assert log == []
    assert live == 0
