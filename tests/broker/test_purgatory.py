"""Delayed operations and the purgatory: completion, expiration, exactly-once, awaiting."""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from odradek.broker.timing_wheel import SystemTimer


class Op(DelayedOperation):
    """Completes once ``ready`` is set (checked by try_complete), Kafka style."""

    def __init__(self, delay_ms: int, ready: bool = False, result="done"):
        super().__init__(delay_ms)
        self.ready = ready
        self.result = result
        self.completions = 0
        self.expirations = 0
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.ready:
            return self.force_complete()
        return False

    def on_complete(self):
        self.completions += 1
        return ("expired" if self.expired else "completed", self.result)

    def on_expiration(self) -> None:
        self.expirations += 1


def manual_purgatory() -> DelayedOperationPurgatory[Op]:
    return DelayedOperationPurgatory("test", SystemTimer(start_ms=0))


def test_completes_at_once_when_ready():
    p = manual_purgatory()
    op = Op(100, ready=True)
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert op.is_completed and op.completions == 1 and op.expirations == 0
    assert p.watched == 0 and p.delayed == 0 and p.timer.size == 0


def test_returning_true_without_force_complete_is_enough():
    class Lazy(Op):
        def try_complete(self):
            return self.ready

    p = manual_purgatory()
    op = Lazy(100, ready=True)
    assert p.try_complete_else_watch(op, ["a"]) is True
    assert op.completions == 1


def test_watch_then_complete_on_event():
    p = manual_purgatory()
    op = Op(100)
    assert p.try_complete_else_watch(op, ["a", "b"]) is False
    assert p.watched == 2 and p.delayed == 1 and p.timer.size == 1
    assert p.check_and_complete("a") == 0
    op.ready = True
    assert p.check_and_complete("zzz") == 0
    assert p.check_and_complete("b") == 1
    assert op.completions == 1 and op.expirations == 0
    # Left every watcher list and the timer at once.
    assert p.watched == 0 and p.delayed == 0 and p.timer.size == 0
    assert p.watch_keys() == []
    assert p.check_and_complete("a") == 0
    p.timer.advance_clock(1000)
    assert op.expirations == 0 and op.completions == 1


def test_expires_after_delay_exactly_once():
    p = manual_purgatory()
    op = Op(100)
    p.try_complete_else_watch(op, ["a"])
    p.timer.advance_clock(99)
    assert not op.is_completed
    p.timer.advance_clock(100)
    assert op.is_completed and op.expired
    assert (op.completions, op.expirations) == (1, 1)
    op.ready = True
    assert p.check_and_complete("a") == 0
    assert op.force_complete() is False
    assert (op.completions, op.expirations) == (1, 1)
    assert p.watched == 0 and p.delayed == 0


def test_complete_just_before_expiry_wins():
    p = manual_purgatory()
    op = Op(50)
    p.try_complete_else_watch(op, ["a"])
    p.timer.advance_clock(49)
    op.ready = True
    assert p.check_and_complete("a") == 1
    p.timer.advance_clock(50)
    assert (op.completions, op.expirations) == (1, 0)
    assert not op.expired


def test_force_complete_is_exactly_once():
    p = manual_purgatory()
    op = Op(50)
    p.try_complete_else_watch(op, ["a"])
    assert op.force_complete() is True
    assert op.force_complete() is False
    p.timer.advance_clock(1000)
    op.ready = True
    assert p.check_and_complete("a") == 0
    assert (op.completions, op.expirations) == (1, 0)


def test_zero_delay_completes_at_once_and_schedules_nothing():
    p = manual_purgatory()
    op = Op(0)
    assert p.try_complete_else_watch(op, ["a"]) is False
    assert op.is_completed and op.expired
    assert (op.completions, op.expirations) == (1, 1)
    assert p.watched == 0 and p.delayed == 0 and p.timer.size == 0


def test_zero_delay_on_a_loop_arms_no_handle():
    async def main():
        loop = asyncio.get_running_loop()
        p = DelayedOperationPurgatory("fetch")
        op = Op(0)
        p.try_complete_else_watch(op, ["a"])
        armed = p.timer.armed_ms
        live = sum(1 for h in loop._scheduled if not h.cancelled())
        result = await op
        return armed, live, result

    armed, live, result = asyncio.run(main())
    assert armed is None and live == 0
    assert result == ("expired", "done")


def test_many_ops_on_one_key_some_complete():
    p = manual_purgatory()
    ops = [Op(1000) for _ in range(10)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    for op in ops[::2]:
        op.ready = True
    assert p.check_and_complete("k") == 5
    assert p.watched == 5 and p.delayed == 5
    p.timer.advance_clock(1000)
    assert [op.expirations for op in ops] == [0, 1] * 5
    assert p.watched == 0 and p.delayed == 0


def test_duplicate_watch_keys_count_once():
    p = manual_purgatory()
    op = Op(10)
    p.try_complete_else_watch(op, ["a", "a", "b"])
    assert p.watched == 2


def test_no_watch_keys_means_timeout_or_force_only():
    p = manual_purgatory()
    op = Op(10)
    p.try_complete_else_watch(op, [])
    assert p.delayed == 1 and p.watched == 0
    p.timer.advance_clock(10)
    assert op.expirations == 1


def test_already_completed_op_is_rejected():
    p = manual_purgatory()
    op = Op(10, ready=True)
    p.try_complete_else_watch(op, ["a"])
    with pytest.raises(ValueError):
        p.try_complete_else_watch(op, ["a"])


def test_nested_check_on_the_same_key_from_on_complete():
    p = manual_purgatory()

    class Chained(Op):
        def on_complete(self):
            # e.g. completing one operation appends to the partition the others watch
            for other in chain:
                other.ready = True
            p.check_and_complete("k")
            return super().on_complete()

    chain = [Op(100) for _ in range(3)]
    first = Chained(100)
    p.try_complete_else_watch(first, ["k"])
    for op in chain:
        p.try_complete_else_watch(op, ["k"])
    first.ready = True
    completed = p.check_and_complete("k")
    assert completed == 1  # the others were completed by the nested check
    assert all(op.completions == 1 for op in [first, *chain])
    assert p.watched == 0 and p.delayed == 0


def test_try_complete_raising_fails_the_op_not_the_caller(caplog):
    class Broken(Op):
        def try_complete(self):
            if self.ready:
                raise RuntimeError("log gone")
            return False

    async def main():
        p = DelayedOperationPurgatory("test")
        op = Broken(1000)
        p.try_complete_else_watch(op, ["a"])
        op.ready = True
        assert p.check_and_complete("a") == 0  # the append path is not disturbed
        assert p.watched == 0 and p.delayed == 0
        with pytest.raises(RuntimeError, match="log gone"):
            await op
        p.close()

    asyncio.run(main())
    assert "log gone" in caplog.text


def test_on_complete_raising_reaches_the_waiter():
    class Bad(Op):
        def on_complete(self):
            raise KeyError("x")

    async def main():
        p = DelayedOperationPurgatory("test")
        op = Bad(1000, ready=True)
        p.try_complete_else_watch(op, ["a"])
        with pytest.raises(KeyError):
            await op

    asyncio.run(main())


def test_purge_completed_is_a_safety_net():
    p = manual_purgatory()
    ops = [Op(10) for _ in range(4)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    ops[0].ready = True
    p.check_and_complete("a")
    assert p.purge_completed() == 0
    assert p.watched == 6


# -- on a real loop -------------------------------------------------------------------------


def test_handler_awaits_completion_by_an_event():
    async def main():
        p = DelayedOperationPurgatory("fetch")
        op = Op(5_000)

        async def handler():
            p.try_complete_else_watch(op, [("topic", 0)])
            return await op

        async def appender():
            await asyncio.sleep(0.01)
            op.ready = True
            return p.check_and_complete(("topic", 0))

        result, completed = await asyncio.gather(handler(), appender())
        p.close()
        return result, completed, p

    result, completed, p = asyncio.run(main())
    assert result == ("completed", "done")
    assert completed == 1
    assert p.timer.armed_ms is None


def test_handler_awaits_expiry_on_a_real_loop():
    async def main():
        loop = asyncio.get_running_loop()
        p = DelayedOperationPurgatory("fetch")
        ops = [Op(d, result=d) for d in (40, 10, 25)]
        start = loop.time()
        order = []

        async def handler(op):
            p.try_complete_else_watch(op, ["k"])
            res = await op
            order.append((res, (loop.time() - start) * 1000))

        await asyncio.gather(*(handler(op) for op in ops))
        return order

    order = asyncio.run(main())
    assert [r for r, _ in order] == [("expired", 10), ("expired", 25), ("expired", 40)]
    for (_, delay), elapsed in order:
        assert elapsed >= delay - 0.01, f"{delay} ms op expired early, after {elapsed:.3f} ms"


def test_cancelling_the_waiter_abandons_the_op():
    async def main():
        p = DelayedOperationPurgatory("produce")
        op = Op(10_000)
        p.try_complete_else_watch(op, ["a", "b"])
        task = asyncio.ensure_future(op.wait())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return p, op

    p, op = asyncio.run(main())
    assert op.abandoned and op.is_completed
    assert (op.completions, op.expirations) == (0, 0)
    assert p.watched == 0 and p.delayed == 0 and p.timer.size == 0


def test_close_releases_waiters():
    async def main():
        p = DelayedOperationPurgatory("produce")
        op = Op(10_000)
        p.try_complete_else_watch(op, ["a"])
        task = asyncio.ensure_future(op.wait())
        await asyncio.sleep(0)
        p.close()
        with pytest.raises(asyncio.CancelledError):
            await task
        return p

    p = asyncio.run(main())
    assert p.delayed == 0 and p.timer.armed_ms is None


def test_awaiting_an_already_completed_op_returns_at_once():
    async def main():
        p = DelayedOperationPurgatory("fetch")
        op = Op(100, ready=True)
        assert p.try_complete_else_watch(op, ["a"])
        return await op

    assert asyncio.run(main()) == ("completed", "done")


# -- scale ----------------------------------------------------------------------------------


def test_100k_operations_performance_sanity():
    p = manual_purgatory()
    n = 100_000
    keys = [("t", i) for i in range(1000)]
    ops = [Op(1 + (i * 7919) % 30_000) for i in range(n)]
    start = time.process_time()
    for i, op in enumerate(ops):
        p.try_complete_else_watch(op, [keys[i % 1000], keys[(i * 31) % 1000]])
    watched = time.process_time()
    for op in ops[::2]:
        op.ready = True
    completed = sum(p.check_and_complete(k) for k in keys)
    checked = time.process_time()
    p.timer.advance_clock(30_000)
    expired = time.process_time()
    assert completed == n // 2
    assert sum(op.expirations for op in ops) == n // 2
    assert all(op.completions == 1 for op in ops)
    assert p.watched == 0 and p.delayed == 0 and p.timer.size == 0
    # Captured like any test output: shown with -rP, or when the test fails.
    print(
        f"\n[purgatory] 100k ops x2 keys: watch {watched - start:.3f}s, "
        f"check 1000 keys (50k complete) {checked - watched:.3f}s, "
        f"expire 50k {expired - checked:.3f}s"
    )
    # CPU time of this process, not wall time: other processes on a busy machine (the suite
    # runs in parallel) slow the clock on the wall, not the work done here.
    assert expired - start < 8.0
