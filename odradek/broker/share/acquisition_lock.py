"""The acquisition lock of one run of records a share-group member acquired (Kafka's
AcquisitionLockTimerTask): a task on the broker's timing wheel that, when the lock's time is
up, gives the records the member still holds under it back to the share partition
(``ShareFetchManager.lock_timed_out``). A record acknowledged, released or re-acquired
meanwhile carries another lock (its deadline differs), so a stale task changes nothing;
RENEW schedules a new task rather than moving this one.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.timing_wheel import TimerTask


class AcquisitionLockTimeout(TimerTask):
    __slots__ = ("expire",)

    def __init__(self, delay_ms: int, expire: Callable[[], None]):
        super().__init__(delay_ms)
        self.expire = expire

    def run(self) -> None:
        self.expire()
