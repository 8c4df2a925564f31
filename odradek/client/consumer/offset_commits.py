"""A group member's offset commits and fetches (OffsetCommit, OffsetFetch).

A group member commits in the generation it completed; in the middle of a rebalance a
commit raises RebalanceInProgressError at once (commit again after it), as Kafka's client
does. An answer saying the member left its generation (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION) loses its partitions, unless the member has moved on since it sent the
commit. ``commit`` (sync) retries retriable errors until its timeout. ``commit_async``
numbers every commit per partition; a failed async commit is retried only for the
partitions whose newest commit it still is, so a late retry never overwrites a newer
commit.

``OffsetCommits`` belongs to a ``ConsumerCoordinator``, seen through the ``GroupMember``
interface of ``member_state``: every commit carries that coordinator's membership
(generation, member id) and goes to its coordinator connection; an answer that ends the
membership resets it there. Async commits run as tasks kept in
``pending`` until done; the coordinator awaits or cancels them on close.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time

from odradek.client.client_errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from odradek.client.consumer.member_state import COORDINATOR_ERRORS, REBALANCING, STABLE, GroupMember
from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, KafkaError, RebalanceInProgressError, error_for

log = logging.getLogger("odradek.client.consumer")


class OffsetCommits:
    def __init__(self, coordinator: GroupMember):
        self.coordinator = coordinator
        self.last_committed: dict[TopicPartition, int] = {}  # offset committed last, per partition
        self._commit_seq = itertools.count(1)
        self._latest_commit: dict[TopicPartition, int] = {}  # number of the newest commit, per partition
        self.pending: set[asyncio.Task] = set()  # async commits still running
        self.commit_fault = None  # test hook: f(offsets, attempt) -> exception or None

    def consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions consumed up to, as offsets to commit."""
        return {tp: OffsetAndMetadata(pos) for tp, pos in self.coordinator.subs.positions().items()}

    def commit_consumed_async(self) -> None:
        """Auto-commit: what was consumed since the last commit, in the background."""
        offsets = {tp: om for tp, om in self.consumed().items() if self.last_committed.get(tp) != om.offset}
        if offsets:
            self.commit_async(offsets)

    def _commit_values(self, offsets):
        managed = self.coordinator.subs.group_managed and self.coordinator.state == STABLE
        by_topic: dict[str, list] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch,
                    "committed_metadata": om.metadata or "",
                    "commit_timestamp": -1,
                }
            )
        return {
            "group_id": self.coordinator.group_id,
            "generation_id_or_member_epoch": self.coordinator.generation if managed else -1,
            "member_id": self.coordinator.member_id if managed else "",
            "group_instance_id": self.coordinator.instance_id if managed else None,
            "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    def _check_commit_allowed(self) -> None:
        """A group member commits only in a generation it has completed (Kafka's rule).

        Between generations it has none the broker would take: a commit without one is
        refused (UNKNOWN_MEMBER_ID), and taking that answer for "we were removed" would
        throw away a member id the group still waits for, stalling its rebalance.
        """
        if not self.coordinator.subs.group_managed or self.coordinator.state == STABLE:
            return
        if self.coordinator.state == REBALANCING or self.coordinator.rejoin_needed:
            raise RebalanceInProgressError(
                f"cannot commit while group {self.coordinator.group_id!r} rebalances; poll() to finish the "
                "rebalance, then commit again"
            )
        raise CommitFailedError(
            f"cannot commit: this consumer is not a member of group {self.coordinator.group_id!r} now "
            "(its partitions may belong to another member)"
        )

    async def _send_commit(self, offsets, attempt: int) -> None:
        self._check_commit_allowed()
        if self.commit_fault is not None:
            exc = self.commit_fault(offsets, attempt)
            if exc is not None:
                raise exc
        sent_as = (self.coordinator.generation, self.coordinator.member_id)
        resp = await self.coordinator.call(api_keys.OFFSET_COMMIT, self._commit_values(offsets))
        first = None
        for t in resp.topics:
            for p in t.partitions:
                code = int(p.error_code)
                if code and first is None:
                    first = (code, t.name, int(p.partition_index))
        if first is not None:
            code, topic, part = first
            if code in COORDINATOR_ERRORS:
                self.coordinator.coordinator_dead()
            if code in (
                int(ErrorCode.unknown_member_id),
                int(ErrorCode.illegal_generation),
                int(ErrorCode.fenced_instance_id),
            ):
                if (
                    self.coordinator.generation,
                    self.coordinator.member_id,
                ) == sent_as:  # not a late answer to an older one
                    # out of the generation its partitions came from: they are lost (Kafka)
                    self.coordinator.reset_generation(
                        member=code == int(ErrorCode.unknown_member_id), lost=True
                    )
                raise CommitFailedError(
                    f"commit failed for group {self.coordinator.group_id!r}: the group rebalanced and the partitions "
                    f"may belong to another member ({error_for(code).code.name})"
                )
            if code == int(ErrorCode.rebalance_in_progress):
                self.coordinator.request_rejoin()
            raise error_for(code)(f"OffsetCommit for {topic}-{part} in group {self.coordinator.group_id!r}")
        for tp, om in offsets.items():
            self.last_committed[tp] = om.offset
        for ic in self.coordinator.interceptors:
            fn = getattr(ic, "on_commit", None)
            if fn is not None:
                try:
                    fn(dict(offsets))
                except Exception:
                    log.exception("consumer interceptor on_commit failed")

    def _check_group(self) -> None:
        if self.coordinator.group_id is None:
            raise IllegalStateError("committing offsets needs a group_id")

    async def commit(self, offsets, timeout: float) -> None:
        """Commit and wait, retrying retriable errors until ``timeout``."""
        self._check_group()
        seq = next(self._commit_seq)
        for tp in offsets:
            self._latest_commit[tp] = seq
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    await self._send_commit(offsets, attempt)
                return
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"commit for group {self.coordinator.group_id!r} timed out after {timeout}s"
                ) from None
            except (KafkaError, KafkaConnectionError) as exc:
                if (
                    not getattr(exc, "retriable", False)
                    or loop.time() + self.coordinator.retry_backoff >= deadline
                ):
                    raise
                log.debug("commit retry after %s", exc)
                await asyncio.sleep(self.coordinator.retry_backoff)

    def commit_async(self, offsets, callback=None) -> asyncio.Task:
        self._check_group()
        seq = next(self._commit_seq)
        for tp in offsets:
            self._latest_commit[tp] = seq
        task = asyncio.get_running_loop().create_task(self._commit_async(dict(offsets), seq, callback))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        return task

    async def _commit_async(self, offsets, seq: int, callback) -> None:
        original = dict(offsets)
        attempt = 0
        error = None
        deadline = time.monotonic() + max(self.coordinator.request_timeout, 5.0)
        while offsets:
            attempt += 1
            try:
                await self._send_commit(offsets, attempt)
                error = None
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc
                if (
                    not getattr(exc, "retriable", False)
                    or time.monotonic() + self.coordinator.retry_backoff > deadline
                ):
                    break
                await asyncio.sleep(self.coordinator.retry_backoff)
                # Ordering protection: retry only what no newer commit has superseded
                # (checked after the backoff: a newer commit may have gone out meanwhile).
                offsets = {tp: om for tp, om in offsets.items() if self._latest_commit.get(tp) == seq}
                if not offsets:
                    log.debug("async commit %d superseded by a newer commit; not retrying", seq)
                    break
        if error is not None:
            log.info("async commit for group %s failed: %s", self.coordinator.group_id, error)
        if callback is not None:
            try:
                result = callback(original, error)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("commit callback failed")

    async def fetch_committed(
        self, partitions, timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._check_group()
        partitions = list(partitions)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        values = {
            "group_id": self.coordinator.group_id,
            "topics": topics,
            "groups": [
                {
                    "group_id": self.coordinator.group_id,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": topics,
                }
            ],
            "require_stable": True,
        }
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    resp = await self.coordinator.call(api_keys.OFFSET_FETCH, values)
                out = {}
                if hasattr(resp, "groups") and resp.groups:
                    g = resp.groups[0]
                    code, rtopics = int(g.error_code), g.topics
                else:
                    code, rtopics = int(getattr(resp, "error_code", 0)), resp.topics
                if code:
                    if code in COORDINATOR_ERRORS:
                        self.coordinator.coordinator_dead()
                    raise error_for(code)(f"OffsetFetch for group {self.coordinator.group_id!r}")
                for t in rtopics:
                    for p in t.partitions:
                        pcode = int(p.error_code)
                        if pcode:
                            raise error_for(pcode)(f"OffsetFetch for {t.name}-{p.partition_index}")
                        off = int(p.committed_offset)
                        tp = TopicPartition(t.name, int(p.partition_index))
                        out[tp] = (
                            OffsetAndMetadata(
                                off, p.metadata or "", int(getattr(p, "committed_leader_epoch", -1))
                            )
                            if off >= 0
                            else None
                        )
                return {tp: out.get(tp) for tp in partitions}
            except TimeoutError:
                raise KafkaTimeoutError(f"fetching committed offsets timed out after {timeout}s") from None
            except (KafkaError, KafkaConnectionError) as exc:
                if (
                    not getattr(exc, "retriable", False)
                    or loop.time() + self.coordinator.retry_backoff >= deadline
                ):
                    raise
                await asyncio.sleep(self.coordinator.retry_backoff)
