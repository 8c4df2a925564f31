"""A ShareFetch parked until it can acquire records or its wait ends (Kafka's DelayedShareFetch).

Watched in the broker's fetch purgatory under the ``(topic, partition)`` keys of its share
session: an append to one of them, an acknowledgement that releases records, or a member
leaving asks it again. Each try acquires what is available for the member; the first try
that gets records (or finds the member's session closed or replaced) completes it.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.purgatory import DelayedOperation


class DelayedShareFetch(DelayedOperation):
    def __init__(self, attempt: Callable[[], bool], still_open: Callable[[], bool], max_wait_ms: int):
        super().__init__(max_wait_ms)
        self.attempt = attempt  # acquires records into the answer; True when it got some
        self.still_open = still_open  # False once the member's session is closed or replaced
        self.got = False

    def try_complete(self) -> bool:
        if not self.still_open():
            return self.force_complete()
        if self.attempt():
            self.got = True
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass
