"""An acks=all produce waiting for the ISR (Kafka's DelayedProduce).

Watched in the produce purgatory under its partitions; every move of one of their high
watermarks (a follower fetched further, the ISR shrank) and every leadership change asks it
again. A partition is done when its high watermark passes the last offset written
(then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas``
meanwhile), or when this broker stopped leading it (NOT_LEADER_OR_FOLLOWER). The request's
``timeout_ms`` expiring answers REQUEST_TIMED_OUT for the partitions still waiting. The
group coordinator's offset commits wait the same way (Kafka appends them with acks=all).
"""

from __future__ import annotations

from odradek.broker.purgatory import DelayedOperation
from odradek.protocol.errors import ErrorCode


class DelayedProduce(DelayedOperation):
    def __init__(self, timeout_ms: int, waiting: list):
        """``waiting``: ``(partition, required offset (last offset + 1), fail)`` per
        partition; ``fail(error code)`` is called for a partition that will not make it."""
        super().__init__(timeout_ms)
        self.waiting = waiting

    def try_complete(self) -> bool:
        still = []
        for entry in self.waiting:
            partition, required, fail = entry
            code = _check(partition, required)
            if code is None:
                still.append(entry)
            elif code:
                fail(code)
        self.waiting = still
        if not still:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        for _, _, fail in self.waiting:
            fail(ErrorCode.request_timed_out)
        self.waiting = []


def _check(partition, required: int) -> int | None:
    """0 when the partition's records reached the ISR, an error code when they never will
    here, None while waiting."""
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower
    if partition.high_watermark >= required:
        if partition.under_min_isr:
            return ErrorCode.not_enough_replicas_after_append
        return 0
    return None


async def wait_for_isr(purgatory, timeout_ms: int, waiting: list):
    """Await ``waiting`` (as for ``DelayedProduce``) in ``purgatory``; at once when all is
    replicated already."""
    op = DelayedProduce(timeout_ms, waiting)
    if not purgatory.try_complete_else_watch(op, [(p.topic, p.index) for p, *_ in waiting]):
        await op
