"""Group membership with the consumer rebalance protocol (KIP-848): ``group_protocol="consumer"``.

The broker assigns; the member only heartbeats. ``ConsumerGroupHeartbeat`` carries the
member's subscription (topic names, or the pattern as ``subscribed_topic_regex``) and the
partitions it owns; the answer carries its epoch, the heartbeat interval and, when it
changed, its assignment (topic ids). The member revokes what it no longer has (committing
first, then ``on_partitions_revoked``), takes what is new (``on_partitions_assigned``), and
heartbeats again at once so the broker learns it is done. FENCED_MEMBER_EPOCH and
UNKNOWN_MEMBER_ID mean the partitions are lost; the member rejoins with epoch 0 under the
same member id. Closing leaves with epoch -1, or -2 for a static member (which keeps its
partitions until its session ends). Offsets are committed with the member epoch as the
generation, which is how the broker checks them.

Everything else (offset commits and fetches, auto-commit, the rebalance listener, the
coordinator lookup) is ``ConsumerCoordinator``'s.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid

from odradek._tasks import cancel_and_wait
from odradek.client.consumer.consumer_coordinator import ConsumerCoordinator
from odradek.client.consumer.member_state import COORDINATOR_ERRORS, STABLE, UNJOINED
from odradek.client.structs import TopicPartition
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, error_for

log = logging.getLogger("odradek.client.consumer")

_LOST = {int(ErrorCode.fenced_member_epoch), int(ErrorCode.unknown_member_id)}
_RETRY = {int(ErrorCode.unreleased_instance_id), int(ErrorCode.coordinator_load_in_progress)}


class ConsumerProtocolCoordinator(ConsumerCoordinator):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Kafka's clients make the member id: a random uuid, base64url without padding
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.generation = 0  # the member epoch
        self._interval = self.heartbeat_interval
        self._pending_target: set[tuple[object, int]] | None = None  # by topic id, names unknown yet

    def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self.client.add_metadata_listener(self._on_metadata)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.client.client_id}-member")

    async def _step(self) -> None:
        wait = self._interval
        if self.subs.group_managed and self._fatal is None and not self.closing:
            await self.ensure_coordinator()
            if self._lost:
                self._lost = False
                await self._lose_partitions()
            wait = await self._heartbeat_once()
        await self._maybe_auto_commit()
        await self._wait(min(wait, self._next_wait()) if self.auto_commit else wait)

    def _request(self, epoch: int) -> dict:
        pattern = self.subs.pattern.pattern if self.subs.mode == self.subs.AUTO_PATTERN else None
        owned: dict[object, list[int]] = {}
        for tp in self.subs.assigned():
            info = self.client.cluster.topics.get(tp.topic)
            if info is not None and info.topic_id is not None:
                owned.setdefault(info.topic_id, []).append(tp.partition)
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": self.instance_id,
            "rack_id": None,
            "rebalance_timeout": self.rebalance_timeout_ms,
            "subscribed_topic_names": [] if pattern is not None else sorted(self.subs.topics),
            "subscribed_topic_regex": pattern,
            "server_assignor": None,
            "topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in owned.items()]
            if epoch > 0
            else [],
        }

    async def _heartbeat_once(self) -> float:
        """One heartbeat and what follows from its answer; the seconds until the next."""
        resp = await self.call(api_keys.CONSUMER_GROUP_HEARTBEAT, self._request(self.generation))
        code = int(resp.error_code)
        if code in _LOST:
            log.info("group %s: member %s fenced (%s); rejoining", self.group_id, self.member_id, ErrorCode(code).name)
            await self._lose_partitions()
            return 0
        if code in _RETRY:
            return self.retry_backoff
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead()
            return self.retry_backoff
        if code:
            self._fatal = error_for(code)(resp.error_message or f"ConsumerGroupHeartbeat of group {self.group_id}")
            return self._interval
        self.generation = int(resp.member_epoch)
        self._interval = max(resp.heartbeat_interval.total_seconds(), 0.01)
        self.state = STABLE
        if resp.assignment is not None:
            self._pending_target = {
                (t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions
            }
        if self._pending_target is not None and await self._reconcile():
            return 0  # tell the broker at once
        return self._interval

    async def _reconcile(self) -> bool:
        """Move to the pending target assignment; True when the assignment changed."""
        names = {info.topic_id: name for name, info in self.client.cluster.topics.items()}
        target = set()
        for topic_id, partition in self._pending_target:
            if topic_id not in names:
                self.client.request_update()  # a topic we do not know yet: next heartbeat
                return False
            target.add(TopicPartition(names[topic_id], partition))
        self._pending_target = None
        current = self.subs.assigned()
        revoked, added = current - target, target - current
        if revoked:
            await self._commit_before_revoke()
            await self._call_listener("on_partitions_revoked", revoked)
            self.subs.remove_partitions(revoked)
        if added:
            self.subs.add_partitions(added)
            await self._call_listener("on_partitions_assigned", added)
            self.rebalances += 1
        if revoked or added:
            log.info("group %s: epoch %d, assigned %s", self.group_id, self.generation, sorted(target))
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        return bool(revoked or added)

    async def _lose_partitions(self) -> None:
        self.generation = 0
        self.state = UNJOINED
        self._pending_target = None
        assigned = self.subs.assigned()
        if assigned:
            await self._call_listener("on_partitions_lost", assigned)
            self.subs.remove_partitions(assigned)

    def reset_generation(self, member: bool, lost: bool) -> None:
        """A commit was refused as from outside the group: rejoin (epoch 0) under the same id."""
        self.generation = 0
        self.state = UNJOINED
        if lost and self.subs.assigned():
            self._lost = True
        self.wakeup()

    def subscription_changed(self) -> None:
        super().subscription_changed()
        self.wakeup()

    async def close(self, timeout: float) -> None:
        if self._task is None:
            return
        self.closing = True
        try:
            async with asyncio.timeout(timeout):
                await cancel_and_wait(self._task)
                if self.subs.group_managed and self.state == STABLE:
                    await self._commit_before_revoke()
                    assigned = self.subs.assigned()
                    if assigned:
                        await self._call_listener("on_partitions_revoked", assigned)
                await self.leave_group("the consumer is closing")
                if self.offsets.pending:
                    await asyncio.gather(*self.offsets.pending, return_exceptions=True)
        except TimeoutError:
            log.warning("consumer group close did not finish within %.1fs", timeout)
        except Exception as exc:
            log.warning("error while leaving group %s: %s", self.group_id, exc)
        finally:
            await cancel_and_wait(self._task, *self.offsets.pending)

    async def leave_group(self, reason: str) -> None:
        if self.generation <= 0 and self.state != STABLE:
            return
        epoch = -2 if self.instance_id is not None else -1
        log.info("group %s: member %s leaving: %s", self.group_id, self.member_id, reason)
        try:
            await self.call(api_keys.CONSUMER_GROUP_HEARTBEAT, self._request(epoch))
        except Exception as exc:
            log.info("group %s: leaving failed: %s", self.group_id, exc)
        self.generation = 0
        self.state = UNJOINED
