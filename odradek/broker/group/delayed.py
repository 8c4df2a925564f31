"""The classic group protocol's delayed operations, on the broker's timing wheel.

Kafka's names: ``DelayedJoin`` closes a join phase when every member has rejoined or
the rebalance timeout runs out; ``InitialDelayedJoin`` holds a new group's first join
phase open for ``group.initial.rebalance.delay.ms``; ``DelayedHeartbeat`` removes a
member whose session runs out; ``DelayedSync`` drops members that got their JoinGroup
answer but never sent SyncGroup. Each calls back into the classic group manager
(``classic_group_manager.py``), which owns all state; the operations hold no logic of
their own beyond "is the join phase complete".

A timer that is no longer wanted is dropped with ``abandon()`` (no callbacks run).
"""

from __future__ import annotations

from odradek.broker.purgatory import DelayedOperation


class DelayedJoin(DelayedOperation):
    def __init__(self, manager, group, delay_ms: int):
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group

    def try_complete(self) -> bool:
        return self.group.has_all_members_joined()

    def on_complete(self) -> None:
        self.manager._on_join_phase_over(self)


class InitialDelayedJoin(DelayedOperation):
    """Waits ``delay_ms`` without completing early; the manager may start another."""

    def __init__(self, manager, group, delay_ms: int, deadline_ms: float):
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group
        self.deadline_ms = deadline_ms  # the rebalance timeout caps the whole initial wait

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        self.manager._on_initial_delay_over(self)


class DelayedHeartbeat(DelayedOperation):
    def __init__(self, manager, group, member_id: str, delay_ms: int):
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group
        self.member_id = member_id

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.manager._on_session_expired(self)


class DelayedSync(DelayedOperation):
    def __init__(self, manager, group, generation_id: int, delay_ms: int):
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.manager._on_sync_expired(self)
