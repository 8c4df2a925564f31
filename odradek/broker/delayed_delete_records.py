"""A DeleteRecords waiting for the followers (Kafka's DelayedDeleteRecords).

The leader moved its log start offset at once; the request completes when every replica in
the ISR has moved its own as far (the partition's low watermark, which followers report in
their fetches), when this broker stops leading (NOT_LEADER_OR_FOLLOWER), or after the
request's ``timeout_ms`` (REQUEST_TIMED_OUT). Watched in the delete-records purgatory under
its partitions.
"""

from __future__ import annotations

from odradek.broker.purgatory import DelayedOperation
from odradek.protocol.errors import ErrorCode


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, timeout_ms: int, waiting: list):
        """``waiting``: ``[partition, required offset, result dict]`` per partition; the
        result dict (a response entry) gets ``low_watermark`` or ``error_code``."""
        super().__init__(timeout_ms)
        self.waiting = waiting

    def try_complete(self) -> bool:
        still = []
        for entry in self.waiting:
            partition, required, result = entry
            if not partition.is_leader:
                result.update(error_code=ErrorCode.not_leader_or_follower, low_watermark=-1)
            elif partition.low_watermark >= required:
                result["low_watermark"] = partition.low_watermark
            else:
                still.append(entry)
        self.waiting = still
        if not still:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        for _, _, result in self.waiting:
            result.update(error_code=ErrorCode.request_timed_out, low_watermark=-1)
        self.waiting = []
