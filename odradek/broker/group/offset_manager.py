"""Committed offsets of the groups in one ``__consumer_offsets`` partition: Kafka's
OffsetMetadataManager.

One manager per coordinator shard (``group_coordinator_shard.py``), which has already
checked that it serves the group. It owns the offsets (group -> partition -> offset), the
commits written but not replicated yet, and the transactional commits not yet decided; whether a member may commit is the group's
question (``ClassicGroup.validate_offset_commit``). Each OffsetCommit is one batch of
OffsetCommitValue records; a TxnOffsetCommit is a transactional batch of the producer,
whose offsets count once the transaction's COMMIT marker lands here
(``complete_transaction``). Removing offsets (OffsetDelete, expiry, a deleted topic) goes
through the shard, which also removes a group left with neither members nor offsets.

An OffsetCommit's offsets stay pending until its batch is in the ISR of the partition
(``InternalTopic.settle_when_replicated``; at once on a single node): OffsetFetch answers
committed offsets only, so it never shows an offset that a coordinator elected after this
one's failure might not have. When the write does not reach the ISR (the commit answers a
retriable coordinator error) the pending offsets are dropped and the previous ones stay.

Expiry follows Kafka's rules: an offset with an expire timestamp of its own (OffsetCommit
v2-v4) expires then; otherwise after ``offsets.retention.minutes`` counted from the
commit, or — for a group that became Empty — from when it did; a Stable consumer group
keeps the offsets of the topics it subscribes to.

Threading: everything runs on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.group import consumer_offsets_schema as schema
from odradek.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from odradek.broker.group.classic_group_state import (
    DEAD,
    EMPTY,
    NON_EMPTY_STATES,
    PREPARING_REBALANCE,
    STABLE,
)
from odradek.broker.group.offset_and_metadata import OffsetAndMetadata
from odradek.broker.group.offsets_topic import commit_append_error
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, OffsetAndMetadata]


class OffsetManager:
    def __init__(self, shard):
        self.shard = shard
        self.groups: dict[str, ClassicGroup] = shard.groups  # the shard's, shared with its group manager
        self.config = shard.context.config
        self.offsets: dict[str, Offsets] = {}  # by group; a group without offsets has no entry
        self.pending: dict[int, dict[str, Offsets]] = {}  # producer id -> group -> undecided offsets
        # group -> its commits written but not yet in the ISR, oldest first (each one batch)
        self.unreplicated: dict[str, list[Offsets]] = {}

    # -- questions -------------------------------------------------------------------------

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self.offsets or group_id in self.unreplicated

    def group_ids(self) -> list[str]:
        return list(self.offsets)

    def partitions_of(self, group_id: str, topic: str | None = None) -> list[TopicPartition]:
        """The partitions ``group_id`` has committed offsets for, or a commit on the way to the
        ISR (of ``topic`` when given)."""
        tps = dict.fromkeys(self.offsets.get(group_id, ()))
        for written in self.unreplicated.get(group_id, ()):
            tps.update(dict.fromkeys(written))
        return [tp for tp in tps if topic is None or tp[0] == topic]

    # -- OffsetCommit, OffsetFetch, OffsetDelete -------------------------------------------

    def commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Offsets,
        retention_ms: int = -1,
        settled: Callable[[int], None] | None = None,
    ) -> dict[TopicPartition, int]:
        """Per partition, its error code. Topics were checked by the handler.

        ``retention_ms`` (OffsetCommit v2-v4; -1 for the broker's rule) gives the offsets an
        expire timestamp of their own, as Kafka did before KIP-211. ``settled(error)`` is
        called once: with 0 when the accepted offsets are committed (in the ISR, visible to
        OffsetFetch), else with the coordinator error that dropped them; at once when nothing
        was written or nothing has to wait.
        """
        settle = settled or _ignore
        now = self.shard.now()
        consumer_group = self.shard.consumer.groups.get(group_id)
        if consumer_group is not None:  # KIP-848: the generation is the member epoch
            try:
                self.shard.consumer.validate_offset_commit(consumer_group, member_id, generation_id)
            except KafkaError as exc:
                settle(NONE)
                return dict.fromkeys(offsets, int(exc.code))
        else:
            error = self._validate_classic_commit(group_id, member_id, group_instance_id, generation_id, now)
            if error != NONE:
                settle(NONE)
                return dict.fromkeys(offsets, error)
        expire = now + retention_ms if retention_ms >= 0 else -1
        results, accepted = self._accept(offsets, now, expire)
        if not accepted:
            settle(NONE)
            return {tp: results[tp] for tp in offsets}
        try:
            self.shard.append(self._records(group_id, accepted), now)
        except KafkaError as exc:
            log.warning("group %s: writing a commit failed: %s", group_id, exc)
            results.update(dict.fromkeys(accepted, commit_append_error(exc.code)))
            settle(NONE)
            return {tp: results[tp] for tp in offsets}
        results.update(dict.fromkeys(accepted, NONE))
        self.unreplicated.setdefault(group_id, []).append(accepted)
        self.shard.when_written_replicated(
            self.config.offsets_commit_timeout_ms,
            lambda error: settle(self._settle(group_id, accepted, error)),
        )
        return {tp: results[tp] for tp in offsets}

    def _settle(self, group_id: str, written: Offsets, error: int) -> int:
        """The commit ``written`` reached the ISR (``error`` 0: its offsets are committed) or
        will not (they are dropped). Offsets removed meanwhile (OffsetDelete, the group
        deleted) are gone from ``written`` already. Returns ``error``."""
        commits = self.unreplicated.get(group_id, [])
        for i, pending in enumerate(commits):
            if pending is written:
                del commits[i]
                break
        else:
            return error  # the group was forgotten meanwhile
        if not commits:
            del self.unreplicated[group_id]
        if error == NONE and written:
            self.offsets.setdefault(group_id, {}).update(written)
        elif written:
            log.info("group %s: a commit of %d offsets did not reach the ISR; dropped", group_id, len(written))
        return error

    def _validate_classic_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int, now: int
    ) -> int:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return int(ErrorCode.illegal_generation)
            # a consumer that assigns partitions itself: a group that only stores offsets
            group = self.groups[group_id] = ClassicGroup(group_id, now)
        error = group.validate_offset_commit(member_id, group_instance_id, generation_id)
        if error != NONE:
            return error
        member = group.members.get(member_id)
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self.shard.classic.schedule_heartbeat(group, member)
        return NONE

    def _accept(self, offsets: Offsets, now: int, expire: int) -> tuple[dict[TopicPartition, int], Offsets]:
        """(error codes of the refused, the accepted as they will be stored)."""
        refused: dict[TopicPartition, int] = {}
        accepted: Offsets = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, om in offsets.items():
            if om.metadata is not None and len(om.metadata) > limit:
                refused[tp] = int(ErrorCode.offset_metadata_too_large)
                continue
            accepted[tp] = om._replace(
                metadata=om.metadata or "", commit_timestamp=now, expire_timestamp=expire
            )
        return refused, accepted

    @staticmethod
    def _records(group_id: str, offsets: Offsets) -> list[tuple[bytes, bytes | None]]:
        return [
            (
                schema.encode_offset_commit_key(group_id, t, p),
                schema.encode_offset_commit_value(om.to_record()),
            )
            for (t, p), om in offsets.items()
        ]

    def fetch(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> list[tuple[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when ``partitions`` is None."""
        group = self.groups.get(group_id)
        known = (group is not None and not group.is_(DEAD)) or group_id in self.shard.consumer.groups
        offsets = self.offsets.get(group_id, {}) if known else {}
        if partitions is None:
            return sorted(offsets.items())
        return [(tp, offsets.get(tp)) for tp in partitions]

    def delete(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete: per partition, its error code; raises KafkaError for the group."""
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            raise errors.GroupIdNotFoundError(f"no group {group_id}")
        results: dict[TopicPartition, int] = {}
        if group.state in NON_EMPTY_STATES:
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise errors.NonEmptyGroupError(f"group {group_id} has members")
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = int(ErrorCode.group_subscribed_to_topic)
        eligible = [tp for tp in partitions if tp not in results]
        stored = set(self.partitions_of(group_id))
        self.shard.remove_offsets(group, [tp for tp in eligible if tp in stored])
        for tp in eligible:
            results[tp] = NONE
        return results

    def remove(self, group_id: str, partitions: list[TopicPartition]) -> list[tuple[bytes, bytes | None]]:
        """Forget these offsets, committed or on the way to the ISR; returns the tombstones
        that delete them from the log."""
        committed = self.offsets.get(group_id, {})
        commits = self.unreplicated.get(group_id, ())
        tombstones: list[tuple[bytes, bytes | None]] = []
        for tp in partitions:
            written = [pending.pop(tp, None) for pending in commits]
            if committed.pop(tp, None) is not None or any(om is not None for om in written):
                tombstones.append((schema.encode_offset_commit_key(group_id, tp[0], tp[1]), None))
        if not committed:
            self.offsets.pop(group_id, None)
        return tombstones

    def forget(self, group_id: str) -> None:
        """The group was deleted with its offsets."""
        self.offsets.pop(group_id, None)
        self.unreplicated.pop(group_id, None)

    # -- TxnOffsetCommit and transaction markers -------------------------------------------

    def commit_transactional(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Offsets,
        settled: Callable[[int], None] | None = None,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: write the offsets as a transactional batch of the producer; they
        become the group's committed offsets when the transaction commits (``complete_transaction``)
        and vanish if it aborts, or if the batch does not reach the ISR. Per partition, its
        error code; ``settled(error)`` as for ``commit``. The log refuses a fenced producer
        epoch (INVALID_PRODUCER_EPOCH)."""
        settle = settled or _ignore
        now = self.shard.now()
        group = self.groups.get(group_id)
        consumer_group = self.shard.consumer.groups.get(group_id)
        if consumer_group is not None:  # KIP-848: checked as an OffsetCommit, the generation is the member epoch
            try:
                self.shard.consumer.validate_offset_commit(consumer_group, member_id, generation_id)
                error = NONE
            except KafkaError as exc:
                error = int(exc.code)
        elif group is None:
            error = int(ErrorCode.illegal_generation) if generation_id >= 0 else NONE
        else:
            error = group.validate_transactional_offset_commit(member_id, group_instance_id, generation_id)
        if error != NONE:
            settle(NONE)
            return dict.fromkeys(offsets, error)
        results, accepted = self._accept(offsets, now, -1)
        if not accepted:
            settle(NONE)
            return {tp: results[tp] for tp in offsets}
        try:
            self.shard.append(self._records(group_id, accepted), now, producer_id, producer_epoch)
        except KafkaError as exc:
            log.info("group %s: a transactional commit of producer %d failed: %s", group_id, producer_id, exc)
            results.update(dict.fromkeys(accepted, commit_append_error(exc.code)))
            settle(NONE)
            return {tp: results[tp] for tp in offsets}
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(accepted)
        results.update(dict.fromkeys(accepted, NONE))
        self.shard.when_written_replicated(
            self.config.offsets_commit_timeout_ms,
            lambda error: settle(self._settle_transactional(group_id, producer_id, accepted, error)),
        )
        return {tp: results[tp] for tp in offsets}

    def _settle_transactional(self, group_id: str, producer_id: int, written: Offsets, error: int) -> int:
        """A transactional commit that did not reach the ISR (``error``) is no longer pending
        (Kafka drops it too); the producer's other offsets stay. Returns ``error``."""
        if error == NONE:
            return error
        undecided = self.pending.get(producer_id, {}).get(group_id, {})
        for tp, om in written.items():
            if undecided.get(tp) is om:
                del undecided[tp]
        if not undecided and group_id in self.pending.get(producer_id, {}):
            del self.pending[producer_id][group_id]
            if not self.pending[producer_id]:
                del self.pending[producer_id]
        log.info("group %s: a transactional commit of producer %d did not reach the ISR; dropped", group_id, producer_id)
        return error

    def undecided(self, producer_id: int) -> dict[str, Offsets] | None:
        """``producer_id``'s transactional offsets waiting for their marker, by group."""
        return self.pending.get(producer_id)

    def complete_transaction(self, producer_id: int, committed: bool) -> list[str]:
        """A COMMIT or ABORT marker of ``producer_id``: its pending offsets become committed
        offsets, or are dropped (Kafka's ``onTransactionCompleted``). Returns the groups
        whose offsets it committed."""
        by_group = self.pending.pop(producer_id, None)
        if not by_group or not committed:
            return []
        for group_id, offsets in by_group.items():
            self.offsets.setdefault(group_id, {}).update(offsets)
        return list(by_group)

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with a commit on the way to the ISR or a transactional
        commit still undecided (OffsetFetch ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
        for them, as Kafka does for both)."""
        out: set[TopicPartition] = set()
        for written in self.unreplicated.get(group_id, ()):
            out.update(written)
        for by_group in self.pending.values():
            out.update(by_group.get(group_id, ()))
        return out

    # -- loading ---------------------------------------------------------------------------

    def replay(self, group_id: str, tp: TopicPartition, value: bytes | None, producer_id: int) -> None:
        """An OffsetCommit record read back from the partition: a commit, a transactional
        commit of ``producer_id`` (>= 0) waiting for its marker, or a tombstone."""
        if value is None:
            self.remove(group_id, [tp])
            return
        om = OffsetAndMetadata.from_record(schema.decode_offset_commit_value(value))
        if producer_id >= 0:
            self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = om
        else:
            self.offsets.setdefault(group_id, {})[tp] = om

    # -- expiry ----------------------------------------------------------------------------

    def expired(self, group: ClassicGroup, now: int, retention: int) -> list[TopicPartition]:
        """The group's offsets past their retention (Kafka's rules, see the module's docstring)."""
        skip: set[str] = set()
        if group.protocol_type is not None:
            if group.is_(EMPTY):
                # retention counts from when the group became empty

                def base(om):
                    return group.state_timestamp if group.state_timestamp is not None else om.commit_timestamp

            elif (
                group.protocol_type == CONSUMER_PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_(STABLE)
            ):
                # a live group keeps what it subscribes to; other topics' offsets age from their commit
                skip = group.subscribed_topics

                def base(om):
                    return om.commit_timestamp

            else:
                return []
        else:

            def base(om):
                return om.commit_timestamp

        out = []
        for tp, om in self.offsets.get(group.group_id, {}).items():
            if tp[0] in skip:
                continue
            if om.expire_timestamp >= 0:
                if now >= om.expire_timestamp:
                    out.append(tp)
            elif now - base(om) >= retention:
                out.append(tp)
        return out

    def expired_consumer_group_offsets(
        self, group_id: str, subscribed: set[str], now: int, retention: int
    ) -> list[TopicPartition]:
        """A consumer-protocol group's offsets past retention (Kafka's rule): those of topics
        it does not subscribe to, counted from their commit."""
        out = []
        for tp, om in self.offsets.get(group_id, {}).items():
            if tp[0] in subscribed:
                continue
            if (om.expire_timestamp >= 0 and now >= om.expire_timestamp) or (
                om.expire_timestamp < 0 and now - om.commit_timestamp >= retention
            ):
                out.append(tp)
        return out


def _ignore(error: int) -> None:
    pass
