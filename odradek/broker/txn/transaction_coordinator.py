"""The transaction coordinator: transactional ids, their producer epochs, and 2-phase commit.

It owns every transactional id whose ``__transaction_state`` partition this broker leads
(the protocol is described in ``transaction_state.py``). Handlers call one method per API; a method
checks that this broker coordinates the id (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS),
checks the producer (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), consults the state
tables, writes the new state to the id's partition and only then installs it.

Markers: once PrepareCommit/PrepareAbort is written, a marker goes to each partition of
the transaction (``markers.write_markers``: local leader appends). Partitions that cannot
take their marker yet are retried by the coordinator's task every
``MARKER_RETRY_MS``; when none is left, and (in a cluster) the markers written here are in
their partitions' ISRs, CompleteCommit/CompleteAbort is written (a marker whose partition
moved meanwhile is written again to its new leader). All
partitions are local on a single node, so a transaction usually completes before EndTxn
is answered; the answer itself only waits for the Prepare record, as in Kafka.

Loading: on start, and when this broker becomes leader of a partition, the partition is
replayed (the latest record per id wins; a tombstone forgets it). Transactions found in
PrepareCommit/PrepareAbort get their markers (again: a marker written twice is harmless,
the second one closes nothing); Ongoing ones continue — their producer may still commit,
or their timeout aborts them.

The task: aborts transactions Ongoing past their timeout (every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, epoch bumped first so the
late producer is fenced), forgets ids idle past ``transactional.id.expiration.ms`` (every
``transaction.remove.expired.transaction.cleanup.interval.ms``, as tombstones), and
retries markers.

Crash tests: ``ODRADEK_STORAGE_FAULT=txn-after-prepare`` (the decision written, no marker
yet) or ``txn-after-markers`` (every marker written, not the Complete record) kills the
broker there (``odradek.faults``).

Differences from Kafka: InitProducerId over an Ongoing transaction from a new producer
(no producer id given) fences, aborts and — when the abort completed at once, as it does
on a single node — answers with the new epoch instead of CONCURRENT_TRANSACTIONS, which
saves the client a retry. Loading is done in one go (the partitions are small).

Threading: everything runs on the event loop; nothing here blocks for long.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import NamedTuple

from odradek._tasks import cancel_and_wait, start_task
from odradek.broker.group.partitioning import partition_for
from odradek.broker.internal_topic import COORDINATOR_APPEND_ERRORS
from odradek.broker.txn import markers
from odradek.broker.txn import transaction_state_schema as schema
from odradek.broker.txn.state_topic import TRANSACTION_STATE_TOPIC, TransactionStateTopic
from odradek.broker.txn.transaction_metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TxnMetadata,
    epoch_exhausted,
)
from odradek.broker.txn.transaction_state import (
    ADD_ACTION,
    BY_NAME,
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETED,
    DEAD,
    EMPTY,
    END_ACTION,
    EXPIRABLE,
    INIT_ACTION,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARED,
    check_transition,
)
from odradek.faults import fault_point
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)
MARKER_RETRY_MS = 100

# Errors of an append to __transaction_state, as clients should see them (Kafka's mapping).
_APPEND_ERRORS = {
    **COORDINATOR_APPEND_ERRORS,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}


class TxnConfig(NamedTuple):
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    remove_interval_ms: int = 3600000
    load_buffer_size: int = 5 * 1024 * 1024
    verify_partitions: bool = True

    @classmethod
    def from_broker_config(cls, config) -> TxnConfig:
        return cls(
            max_timeout_ms=config.get("transaction.max.timeout.ms"),
            id_expiration_ms=config.get("transactional.id.expiration.ms"),
            abort_interval_ms=config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_interval_ms=config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
            load_buffer_size=config.get("transaction.state.log.load.buffer.size"),
            verify_partitions=config.get("transaction.partition.verification.enable"),
        )


class InitResult(NamedTuple):
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(
        self,
        broker,
        topic: TransactionStateTopic,
        producer_ids,
        config: TxnConfig | None = None,
        *,
        wall_clock_ms=None,
        write_markers=markers.write_markers,
    ):
        self.broker = broker
        self.topic = topic
        self.producer_ids = producer_ids
        self.config = config or TxnConfig()
        self.txns: dict[str, TxnMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch (its leader epoch)
        self.loading: set[int] = set()
        self.pending_markers: dict[str, set[TopicPartition]] = {}
        # markers written here in a cluster, not yet in their partition's ISR: id -> {tp: offset}
        self.unreplicated_markers: dict[str, dict[TopicPartition, int]] = {}
        self.active = False
        self._wall_ms = wall_clock_ms or (lambda: int(time.time() * 1000))
        self._write_markers = write_markers
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None

    @classmethod
    def for_broker(cls, broker) -> TransactionCoordinator:
        config = broker.config
        topic = TransactionStateTopic(
            broker,
            num_partitions=config.get("transaction.state.log.num.partitions"),
            replication_factor=config.get("transaction.state.log.replication.factor"),
            segment_bytes=config.get("transaction.state.log.segment.bytes"),
            min_isr=config.get("transaction.state.log.min.isr"),
        )
        coordinator = cls(broker, topic, broker.producer_ids, TxnConfig.from_broker_config(config))
        broker.controller.on_change(coordinator.on_metadata_change)
        return coordinator

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Load the partitions this broker leads and start the coordinator's task."""
        self.active = True
        self.sync_partitions()
        self._wake = asyncio.Event()
        self._task = start_task(self._run, "txn-coordinator")

    async def close(self) -> None:
        """Stop serving; safe to call twice."""
        self.active = False
        task, self._task = self._task, None
        await cancel_and_wait(task)
        for partition in list(self.owned) + list(self.loading):
            self._unload(partition)

    def _now(self) -> int:
        return self._wall_ms()

    # -- partitions ------------------------------------------------------------------------

    def on_metadata_change(self, event: str, topic: str) -> None:
        if topic != TRANSACTION_STATE_TOPIC:
            return
        try:
            self.sync_partitions()
        except Exception:
            log.exception("transaction coordinator: handling %s of %s failed", event, topic)

    def sync_partitions(self) -> None:
        """Load newly led partitions (or led with a new epoch); unload the ones led elsewhere."""
        if not self.active:
            return
        led = self.topic.led_partitions() if self.topic.partition_count() is not None else {}
        for partition in list(self.owned):
            if led.get(partition) != self.owned[partition]:
                self._unload(partition)
        for partition, epoch in sorted(led.items()):
            if partition not in self.owned:
                self._load(partition, epoch)

    def partition_of(self, transactional_id: str) -> int | None:
        return self.topic.partition_for(transactional_id)

    def _load(self, partition: int, coordinator_epoch: int) -> None:
        t0 = time.perf_counter()
        self.loading.add(partition)
        found: dict[str, TxnMetadata | None] = {}
        skipped = 0
        try:
            for chunk in self.topic.replay(partition, self.config.load_buffer_size):
                for key, value in chunk:
                    try:
                        tid = schema.decode_key(key)
                        found[tid] = (
                            None if value is None else TxnMetadata.from_value(tid, schema.decode_value(value))
                        )
                    except (errors.CorruptMessageError, UnicodeDecodeError) as exc:
                        skipped += 1
                        log.warning("skipping an unreadable %s record: %s", TRANSACTION_STATE_TOPIC, exc)
        except Exception:
            self.loading.discard(partition)
            log.exception(
                "loading %s-%d failed; its transactions are not served", TRANSACTION_STATE_TOPIC, partition
            )
            return
        self.loading.discard(partition)
        self.owned[partition] = coordinator_epoch
        resumed = 0
        for tid, meta in found.items():
            if meta is None:
                continue
            self.txns[tid] = meta
            if meta.state in PREPARED:
                self.pending_markers[tid] = set(meta.partitions)
                resumed += 1
        loaded = sum(1 for m in found.values() if m is not None)
        if loaded or skipped:
            log.info(
                "%s-%d: loaded %d transactional ids (%d completing, %d records skipped) in %.0f ms",
                TRANSACTION_STATE_TOPIC,
                partition,
                loaded,
                resumed,
                skipped,
                (time.perf_counter() - t0) * 1000,
            )
        for tid in [t for t in self.pending_markers if self.partition_of(t) == partition]:
            self._send_markers(tid)

    def _unload(self, partition: int) -> None:
        self.loading.discard(partition)
        self.owned.pop(partition, None)
        count = self.topic.partition_count()
        for tid in list(self.txns):
            if count is None or partition_for(tid, count) == partition:
                del self.txns[tid]
                self.pending_markers.pop(tid, None)
                self.unreplicated_markers.pop(tid, None)

    def _check(self, transactional_id: str | None) -> int:
        """The id's partition, if this broker serves it now; else raise the error to answer."""
        if not transactional_id:
            raise errors.InvalidRequestError("a transactional id must not be empty")
        if not self.active:
            raise errors.CoordinatorNotAvailableError("the transaction coordinator is not running")
        partition = self.partition_of(transactional_id)
        if partition is None:
            raise errors.NotCoordinatorError(f"{TRANSACTION_STATE_TOPIC} does not exist yet")
        if partition in self.loading:
            raise errors.CoordinatorLoadInProgressError(f"{TRANSACTION_STATE_TOPIC}-{partition} is loading")
        if partition not in self.owned:
            raise errors.NotCoordinatorError(
                f"this broker does not lead {TRANSACTION_STATE_TOPIC}-{partition}"
            )
        return partition

    # -- FindCoordinator -------------------------------------------------------------------

    def find_coordinator(self, key: str) -> int:
        """The node id of ``key``'s coordinator; creates ``__transaction_state`` on first use."""
        count = self.topic.ensure_created()
        leader = self.topic.leader(partition_for(key, count))
        if leader is None:
            raise errors.CoordinatorNotAvailableError(
                f"{TRANSACTION_STATE_TOPIC} partition of {key!r} has no leader"
            )
        return leader

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int = -1, expected_epoch: int = -1
    ) -> InitResult:
        """A producer id and a new epoch for ``transactional_id`` (see ``transaction_state.py``)."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(int(ErrorCode.invalid_transaction_timeout))
        try:
            partition = self._check(transactional_id)
        except KafkaError as exc:
            return InitResult(int(exc.code))
        now = self._now()
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(
                transactional_id,
                self.producer_ids.next_id(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                EMPTY,
                update_ms=now,
            )
        expected = expected_pid >= 0
        if expected and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected_pid == meta.producer_id
            or (expected_pid == meta.previous_producer_id and epoch_exhausted(expected_epoch))
        ):
            return InitResult(int(ErrorCode.producer_fenced))
        action = INIT_ACTION[meta.state]
        if action == "fence":
            code = self._fence_and_abort(meta, partition, now)
            if code != NONE:
                return InitResult(code)
            meta = self.txns[transactional_id]
            if expected or meta.state not in COMPLETED:
                return InitResult(int(ErrorCode.concurrent_transactions))  # the client retries
            action = INIT_ACTION[meta.state]
        if action != "bump":
            return InitResult(int(action))
        if epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            new = meta.transit(
                EMPTY,
                now,
                producer_id=self.producer_ids.next_id(),
                producer_epoch=0,
                previous_producer_id=meta.producer_id,
                last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        else:
            if not expected:
                epoch, last = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
                epoch, last = meta.producer_epoch + 1, meta.producer_epoch
            elif expected_epoch == meta.last_producer_epoch:
                epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of the last bump
            else:
                return InitResult(int(ErrorCode.producer_fenced))
            new = meta.transit(
                EMPTY,
                now,
                producer_epoch=epoch,
                last_producer_epoch=last,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        code = self._write(partition, new)
        if code != NONE:
            return InitResult(code)
        log.info(
            "transactional id %r: producer id %d, epoch %d",
            transactional_id,
            new.producer_id,
            new.producer_epoch,
        )
        return InitResult(NONE, new.producer_id, new.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------

    def _producer_error(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return int(ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            return int(ErrorCode.producer_fenced)
        return NONE

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> int:
        """Put ``partitions`` into the transaction (it becomes Ongoing); one error code for all."""
        try:
            partition = self._check(transactional_id)
        except KafkaError as exc:
            return int(exc.code)
        meta = self.txns.get(transactional_id)
        code = self._producer_error(meta, producer_id, producer_epoch)
        if code != NONE:
            return code
        if transactional_id in self.pending_markers:
            return int(ErrorCode.concurrent_transactions)
        action = ADD_ACTION[meta.state]
        if action != "add":
            return int(action)
        wanted = frozenset(partitions)
        if meta.state is ONGOING and wanted <= meta.partitions:
            return NONE
        now = self._now()
        start = meta.start_ms if meta.state is ONGOING else now
        return self._write(
            partition, meta.transit(ONGOING, now, partitions=meta.partitions | wanted, start_ms=start)
        )

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4 ``verify_only``: which partitions are in the open transaction."""
        try:
            self._check(transactional_id)
        except KafkaError as exc:
            return dict.fromkeys(partitions, int(exc.code))
        meta = self.txns.get(transactional_id)
        code = self._producer_error(meta, producer_id, producer_epoch)
        if code != NONE:
            return dict.fromkeys(partitions, code)
        ongoing = meta.state is ONGOING
        return {
            tp: NONE if ongoing and tp in meta.partitions else int(ErrorCode.invalid_txn_state)
            for tp in partitions
        }

    def check_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> int:
        """May this transactional batch be appended to ``tp``? (Produce, KIP-890's verification.)

        Fenced epochs get INVALID_PRODUCER_EPOCH; a partition the producer did not add to an
        open transaction gets INVALID_TXN_STATE (its data could never be decided); a
        coordinator still loading gets NOT_ENOUGH_REPLICAS so that the producer retries.
        """
        if not self.config.verify_partitions:
            return NONE
        partition = self.partition_of(transactional_id) if transactional_id else None
        if partition is None:
            return int(ErrorCode.invalid_txn_state)  # no transaction can exist yet
        if partition in self.loading:
            return int(ErrorCode.not_enough_replicas)
        if partition not in self.owned:
            return NONE  # coordinated by another broker: not verified here
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return int(ErrorCode.invalid_txn_state)
        if producer_epoch < meta.producer_epoch:
            return int(ErrorCode.invalid_producer_epoch)
        if producer_epoch != meta.producer_epoch or meta.state is not ONGOING or tp not in meta.partitions:
            return int(ErrorCode.invalid_txn_state)
        return NONE

    def check_offset_commit(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> int:
        """TxnOffsetCommit: the producer must be current and the group's partition in its transaction."""
        if not self.config.verify_partitions:
            return NONE
        partition = self.partition_of(transactional_id) if transactional_id else None
        if partition is None or partition not in self.owned:
            return NONE  # coordinated elsewhere (or not loaded): the log still checks epochs
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return int(ErrorCode.invalid_producer_id_mapping)
        if producer_epoch != meta.producer_epoch:
            return int(ErrorCode.invalid_producer_epoch)
        if meta.state is not ONGOING or tp not in meta.partitions:
            return int(ErrorCode.invalid_txn_state)
        return NONE

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> int:
        try:
            partition = self._check(transactional_id)
        except KafkaError as exc:
            return int(exc.code)
        meta = self.txns.get(transactional_id)
        code = self._producer_error(meta, producer_id, producer_epoch)
        if code != NONE:
            return code
        action = END_ACTION[(meta.state, committed)]
        if action == "done":
            return NONE
        if action != "prepare":
            return int(action)
        return self._prepare_end(meta, committed, partition, self._now())

    # -- the two phases --------------------------------------------------------------------

    def _fence_and_abort(self, meta: TxnMetadata, partition: int, now: int) -> int:
        """Bump the epoch of an Ongoing transaction (fencing its producer), then abort it."""
        bumped = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        fenced = meta.transit(PREPARE_EPOCH_FENCE, now, producer_epoch=bumped)
        log.info(
            "transactional id %r: fencing producer %d epoch %d and aborting its transaction",
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
        )
        return self._prepare_end(fenced, False, partition, now)

    def _prepare_end(self, meta: TxnMetadata, committed: bool, partition: int, now: int) -> int:
        prepared = meta.transit(PREPARE_COMMIT if committed else PREPARE_ABORT, now)
        code = self._write(partition, prepared)
        if code != NONE:
            return code
        fault_point("txn-after-prepare")
        self.pending_markers[meta.transactional_id] = set(prepared.partitions)
        self._send_markers(meta.transactional_id)
        return NONE

    def _send_markers(self, transactional_id: str) -> None:
        """Write the markers still missing; complete the transaction when none is left."""
        remaining = self.pending_markers.get(transactional_id)
        meta = self.txns.get(transactional_id)
        if remaining is None:
            return
        if meta is None or meta.state not in PREPARED:
            del self.pending_markers[transactional_id]
            self.unreplicated_markers.pop(transactional_id, None)
            return
        partition = self.partition_of(transactional_id)
        coordinator_epoch = self.owned.get(partition)
        if coordinator_epoch is None:
            return
        committed = meta.state is PREPARE_COMMIT
        if remaining:
            results = self._write_markers(
                self.broker,
                meta.producer_id,
                meta.producer_epoch,
                coordinator_epoch,
                committed,
                sorted(remaining),
            )
            for tp, code in results.items():
                if code == NONE or code not in markers.RETRIABLE:
                    if code != NONE:
                        log.warning(
                            "transactional id %r: giving up the marker for %s-%d (error %d)",
                            transactional_id,
                            tp[0],
                            tp[1],
                            code,
                        )
                    remaining.discard(tp)
                    if code == NONE:
                        self._note_marker(transactional_id, tp)
        if remaining:
            self._poke()
            return
        if not self._markers_replicated(transactional_id, remaining):
            return  # the task looks again every MARKER_RETRY_MS
        fault_point("txn-after-markers")
        now = self._now()
        done = meta.transit(COMPLETE_COMMIT if committed else COMPLETE_ABORT, now, partitions=frozenset())
        if self._write(partition, done) != NONE:
            self._poke()  # the markers are out; only the Complete record is missing: retry it
            return
        del self.pending_markers[transactional_id]

    def _note_marker(self, transactional_id: str, tp: TopicPartition) -> None:
        """A marker was just written to ``tp``: when it is led here in a cluster, remember the
        offset its ISR must reach (a remote leader answered only once its ISR had it)."""
        for _, _, required in markers.unreplicated(self.broker, [tp]):
            self.unreplicated_markers.setdefault(transactional_id, {})[tp] = required

    def _markers_replicated(self, transactional_id: str, remaining: set) -> bool:
        """Whether the markers written here for the transaction are in their partitions'
        ISRs; one whose partition is no longer led here goes back to ``remaining``."""
        waiting = self.unreplicated_markers.get(transactional_id)
        if not waiting:
            return True
        replicas = self.broker.replica_manager
        for tp, required in list(waiting.items()):
            p = replicas.partitions.get(tp)
            if p is None or not p.is_leader:
                del waiting[tp]
                remaining.add(tp)  # written again to its new leader (a second marker is harmless)
            elif p.high_watermark >= required:
                del waiting[tp]
        if not waiting:
            del self.unreplicated_markers[transactional_id]
        return not waiting and not remaining

    def _write(self, partition: int, meta: TxnMetadata) -> int:
        """Store ``meta`` in the id's partition, then install it; the error code otherwise."""
        try:
            self.topic.append(
                partition,
                schema.encode_key(meta.transactional_id),
                schema.encode_value(meta.to_value()),
                self._now(),
            )
        except KafkaError as exc:
            log.warning("transactional id %r: writing its state failed: %s", meta.transactional_id, exc)
            code = ErrorCode(int(exc.code))
            return int(_APPEND_ERRORS.get(code, code))
        self.txns[meta.transactional_id] = meta
        return NONE

    # -- timeouts and expiry ----------------------------------------------------------------

    def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort transactions Ongoing past their timeout; return how many."""
        now = self._now() if now_ms is None else now_ms
        aborted = 0
        for tid, meta in list(self.txns.items()):
            if (
                meta.state is not ONGOING
                or meta.start_ms + meta.timeout_ms >= now
                or tid in self.pending_markers
            ):
                continue
            partition = self.partition_of(tid)
            if partition not in self.owned:
                continue
            log.info(
                "transactional id %r: transaction open for %d ms, past its timeout of %d ms; aborting",
                tid,
                now - meta.start_ms,
                meta.timeout_ms,
            )
            if self._fence_and_abort(meta, partition, now) == NONE:
                aborted += 1
        return aborted

    def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Forget ids idle in a final state past ``transactional.id.expiration.ms``."""
        now = self._now() if now_ms is None else now_ms
        limit = self.config.id_expiration_ms
        expired = 0
        for tid, meta in list(self.txns.items()):
            if meta.state not in EXPIRABLE or now - meta.update_ms < limit or tid in self.pending_markers:
                continue
            partition = self.partition_of(tid)
            if partition not in self.owned:
                continue
            check_transition(meta.state, DEAD)
            try:
                self.topic.append(partition, schema.encode_key(tid), None, now)
            except KafkaError as exc:
                log.warning("transactional id %r: writing its tombstone failed: %s", tid, exc)
                continue
            del self.txns[tid]
            expired += 1
        if expired:
            log.info("expired %d transactional ids", expired)
        return expired

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        next_abort = loop.time() + cfg.abort_interval_ms / 1000
        next_expiry = loop.time() + cfg.remove_interval_ms / 1000
        while True:
            wait = min(next_abort, next_expiry) - loop.time()
            if self.pending_markers:
                wait = min(wait, MARKER_RETRY_MS / 1000)
            try:
                async with asyncio.timeout(max(wait, 0.001)):
                    await self._wake.wait()
                await asyncio.sleep(MARKER_RETRY_MS / 1000)  # poked: give a failed partition a moment
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                for tid in list(self.pending_markers):
                    self._send_markers(tid)
                now = loop.time()
                if now >= next_abort:
                    next_abort = now + cfg.abort_interval_ms / 1000
                    self.abort_timed_out()
                if now >= next_expiry:
                    next_expiry = now + cfg.remove_interval_ms / 1000
                    self.expire_transactional_ids()
            except Exception:
                log.exception("transaction coordinator housekeeping failed")

    # -- DescribeTransactions / ListTransactions -------------------------------------------

    def describe(self, transactional_id: str) -> dict:
        out = {
            "transactional_id": transactional_id,
            "error_code": NONE,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        try:
            self._check(transactional_id)
        except KafkaError as exc:
            out["error_code"] = int(exc.code)
            return out
        meta = self.txns.get(transactional_id)
        if meta is None:
            out["error_code"] = int(ErrorCode.transactional_id_not_found)
            return out
        out.update(
            transaction_state=str(meta.state),
            transaction_timeout=meta.timeout_ms,
            transaction_start_time=meta.start_ms,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=meta.topics(),
        )
        return out

    def list_transactions(
        self,
        states: list[str] | None = None,
        producer_ids: list[int] | None = None,
        min_duration_ms: int = -1,
        id_pattern: str | None = None,
    ) -> tuple[int, list[str], list[dict]]:
        """(error code, unknown state filters, transactions) for ListTransactions."""
        if not self.active:
            return int(ErrorCode.coordinator_not_available), [], []
        error = int(ErrorCode.coordinator_load_in_progress) if self.loading else NONE
        states = list(states or ())
        unknown = [s for s in states if s not in BY_NAME]
        wanted = {BY_NAME[s] for s in states if s in BY_NAME}
        if states and not wanted:
            return error, unknown, []
        pids = set(producer_ids or ())
        try:
            pattern = re.compile(id_pattern) if id_pattern else None
        except re.error:
            return int(ErrorCode.invalid_request), unknown, []
        now = self._now()
        listed = []
        for tid, meta in sorted(self.txns.items()):
            if wanted and meta.state not in wanted:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration_ms):
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            listed.append(
                {
                    "transactional_id": tid,
                    "producer_id": meta.producer_id,
                    "transaction_state": str(meta.state),
                }
            )
        return error, unknown, listed
