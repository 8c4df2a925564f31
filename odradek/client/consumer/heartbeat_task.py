"""The heartbeat task of a group member: it keeps the member alive between rebalances.

Every ``heartbeat_interval_ms`` while the member is stable it sends Heartbeat on the
coordinator's connection. REBALANCE_IN_PROGRESS asks the member to rejoin; losing the
coordinator sends the member to look for it again; other errors go through the
coordinator's error handling (which may reset the membership, losing the partitions).
When ``poll`` has not been called for ``max_poll_interval_ms`` the member leaves the
group, as Kafka's client does. One task, owned by the ``ConsumerCoordinator``, which it
reads and drives through the ``GroupMember`` interface of ``member_state``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek._tasks import cancel_and_wait
from odradek.client.client_errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.consumer.member_state import COORDINATOR_ERRORS, STABLE, GroupMember
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode

log = logging.getLogger("odradek.client.consumer")


class Heartbeat:
    """Keeps the member alive between rebalances (one task)."""

    def __init__(self, coordinator: GroupMember):
        self.c = coordinator
        self._task: asyncio.Task | None = None
        self._last_ok = time.monotonic()
        self._wake: asyncio.Event | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"{self.c.client.client_id}-heartbeat"
        )

    def reset(self) -> None:
        self._last_ok = time.monotonic()
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        c = self.c
        while True:
            try:
                async with asyncio.timeout(c.heartbeat_interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if c.state != STABLE or c.coordinator_id is None or c.closing:
                continue
            now = time.monotonic()
            if now - c.last_poll > c.max_poll_interval:
                log.warning(
                    "group %s: poll() not called for %.0f ms (max_poll_interval_ms=%d); leaving the group",
                    c.group_id,
                    (now - c.last_poll) * 1000,
                    c.max_poll_interval * 1000,
                )
                await c.leave_inactive()
                continue
            try:
                resp = await c.client.call(
                    c.coordinator_id,
                    api_keys.HEARTBEAT,
                    {
                        "group_id": c.group_id,
                        "generation_id": c.generation,
                        "member_id": c.member_id,
                        "group_instance_id": c.instance_id,
                    },
                    timeout=min(c.request_timeout, c.session_timeout_ms / 1000),
                )
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError, ClientClosedError) as exc:
                log.info("group %s: heartbeat failed: %s", c.group_id, exc)
                c.coordinator_dead()
                c.wakeup()
                continue
            except Exception:
                log.exception("group %s: heartbeat failed", c.group_id)
                continue
            code = int(resp.error_code)
            if not code:
                self._last_ok = time.monotonic()
                continue
            if c.state != STABLE:
                continue
            if code == int(ErrorCode.rebalance_in_progress):
                log.info("group %s: rebalance in progress; rejoining", c.group_id)
                c.request_rejoin()
            elif code in COORDINATOR_ERRORS:
                c.coordinator_dead()
                c.wakeup()
            else:
                c.handle_group_error(code, "Heartbeat")
