"""The transactional producer: its transaction state and its requests to the coordinators.

States (Kafka's ``TransactionManager``, simplified)::

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --> READY
    IN_TRANSACTION / ABORTABLE_ERROR --abort_transaction--> ABORTING --> READY
    any --(a send or a transactional request failed)--> ABORTABLE_ERROR: only abort works
    any --(fenced: a newer producer or a timeout took the id)--> FATAL_ERROR: only close works

A record may only be sent inside a transaction; its partition is added to the
transaction (AddPartitionsToTxn) before any batch of it goes out: ``add_partition`` notes
it, the manager's one task adds what is new, and the sender holds back a partition until
``may_send`` says it was added. ``commit_transaction`` flushes, then sends EndTxn;
``abort_transaction`` drops what was not sent, waits for what was, then sends EndTxn.
A failed batch with a sequence number left a gap the broker would never accept: the
abort then bumps the epoch (InitProducerId with the current id and epoch, KIP-360) and
the sender renumbers.

``send_offsets_to_transaction`` adds the group's offsets partition (AddOffsetsToTxn) and
commits the offsets through the group coordinator (TxnOffsetCommit): they take effect
only if the transaction commits, which is what makes consume-transform-produce
exactly-once.

The manager's task runs on the producer's event loop; the user's thread only calls
``check_can_send`` and ``add_partition`` (thread-safe).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
from typing import NamedTuple

from odradek._tasks import cancel_and_wait
from odradek.client.client_errors import (
    ClientError,
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerFencedError,
    UnsupportedVersionError,
)
from odradek.client.netclient import Backoff, NetClient
from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, error_for

log = logging.getLogger("odradek.client.producer")

E = ErrorCode
ADD_PARTITIONS_TO_TXN = api_keys.ADD_PARTITIONS_TO_TXN
ADD_OFFSETS_TO_TXN = api_keys.ADD_OFFSETS_TO_TXN
END_TXN = api_keys.END_TXN
TXN_OFFSET_COMMIT = api_keys.TXN_OFFSET_COMMIT

_RETRY_SAME = {int(E.coordinator_load_in_progress), int(E.concurrent_transactions), int(E.request_timed_out)}
_FIND_AGAIN = {int(E.not_coordinator), int(E.coordinator_not_available)}
_FENCED = {int(E.producer_fenced), int(E.invalid_producer_epoch)}
_FATAL = _FENCED | {
    int(E.transactional_id_authorization_failed),
    int(E.cluster_authorization_failed),
    int(E.unsupported_version),
    int(E.unsupported_for_message_format),
}
_GROUP_FAILED = {int(E.unknown_member_id), int(E.illegal_generation), int(E.fenced_instance_id)}
_TXN_COORDINATOR_CONN = 0x7FFEFFFF  # extra connection ids, minus the node id
_GROUP_COORDINATOR_CONN = 0x7FFDFFFF


class TransactionAbortableError(ClientError):
    """The transaction cannot commit any more; call ``abort_transaction`` and start again."""


class TransactionAbortedError(ClientError):
    """The record was not sent: its transaction was aborted."""


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


class ConsumerGroupMetadata(NamedTuple):
    """What TxnOffsetCommit needs of the consuming group member (Kafka's ConsumerGroupMetadata)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def of(cls, source) -> ConsumerGroupMetadata:
        """From a ConsumerGroupMetadata, a group id, or a (blocking or asyncio) Consumer."""
        if isinstance(source, cls):
            return source
        if isinstance(source, str):
            return cls(source)
        config = getattr(source, "config", None)
        if isinstance(config, dict) and config.get("group_id"):
            return cls(
                config["group_id"],
                source.group_generation,
                source.member_id or "",
                config.get("group_instance_id"),
            )
        raise TypeError(
            f"expected a consumer with a group_id, a group id or ConsumerGroupMetadata, got {source!r}"
        )


class TransactionManager:
    def __init__(self, client: NetClient, transactional_id: str, config: dict):
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = config["transaction_timeout_ms"]
        self.backoff_ms = config["retry_backoff_ms"]
        self.request_timeout = config["request_timeout_ms"] / 1000
        self.max_block = config["max_block_ms"] / 1000
        self.state = TxnState.UNINITIALIZED
        self.error: BaseException | None = None
        self.partitions: set[TopicPartition] = set()  # added to the open transaction
        self.offsets_added = False
        self.needs_epoch_bump = False
        self._new: set[TopicPartition] = set()  # to add (any thread appends; the task takes)
        self._adding: set[TopicPartition] = set()
        self._lock = threading.Lock()
        self._coordinator: int | None = None
        self._sender = None
        self._acc = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._work: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def bind(self, sender, acc) -> None:
        self._sender = sender
        self._acc = acc

    # -- lifecycle (the producer's loop) ---------------------------------------------------

    def start(self) -> None:
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task = self._loop.create_task(self._run(), name=f"{self.client.client_id}-txn")

    async def shutdown(self, timeout: float | None) -> None:
        """Producer close: abort an open transaction (as Kafka's producer does), then stop."""
        if self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
            TxnState.COMMITTING,
            TxnState.ABORTING,
        ):
            try:
                await self.abort(5.0 if timeout is None else timeout)
            except Exception as exc:
                log.info("transactional id %r: aborting at close failed: %s", self.transactional_id, exc)
        await self.close()
        if self._acc is not None:  # what is left could never be sent: its partitions were not added
            self._acc.abort_all(TransactionAbortedError("the producer was closed"))

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    # -- what the sender and the send path ask ---------------------------------------------

    def check_can_send(self) -> None:
        if self.state is TxnState.IN_TRANSACTION:
            return
        if self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            raise self.error
        raise IllegalStateError(
            f"cannot send outside a transaction (state {self.state.value}); call begin_transaction() first"
        )

    def add_partition(self, tp: TopicPartition) -> None:
        """A record was appended for ``tp``: make sure the partition joins the transaction."""
        if tp in self.partitions or tp in self._new:
            return
        with self._lock:
            self._new.add(tp)
        self._poke()

    def may_send(self, tp: TopicPartition) -> bool:
        return tp in self.partitions

    def on_batch_failed(self, error: BaseException, sequenced: bool) -> None:
        """The sender gave up on a batch: the transaction must abort (and re-number if sequenced)."""
        if sequenced:
            self.needs_epoch_bump = True
        if getattr(error, "code", None) in _FENCED:
            self._fatal(ProducerFencedError(f"producer fenced while sending: {error}"))
        else:
            self._abortable(error)

    def _poke(self) -> None:
        if self._work is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._work.set()
        else:
            self._loop.call_soon_threadsafe(self._work.set)

    # -- errors ----------------------------------------------------------------------------

    def _abortable(self, error: BaseException) -> None:
        if self.state is TxnState.FATAL_ERROR:
            return
        if not isinstance(error, TransactionAbortableError):
            error = TransactionAbortableError(f"the transaction must be aborted: {error}")
        if self.state is not TxnState.ABORTABLE_ERROR:
            log.info("transactional id %r: %s", self.transactional_id, error)
        self.state = TxnState.ABORTABLE_ERROR
        self.error = error
        if self._acc is not None:
            self._acc.abort_all(error)  # nothing else of this transaction will be sent

    def _fatal(self, error: BaseException) -> None:
        log.warning("transactional id %r: %s", self.transactional_id, error)
        self.state = TxnState.FATAL_ERROR
        self.error = error
        if self._acc is not None:
            self._acc.abort_all(error)

    def _raise_if_failed(self) -> None:
        if self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            raise self.error

    def _require(self, what: str, *states: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self.error
        if self.state not in states:
            raise IllegalStateError(f"cannot {what} in state {self.state.value}")

    # -- coordinators ----------------------------------------------------------------------

    async def _find(self, key_type: int, key: str, conn_base: int) -> int:
        backoff = Backoff(self.backoff_ms, 1000)
        while True:
            self.client.check_open()
            try:
                code, node, host, port = await self.client.find_coordinator(key_type, key)
                if code == 0:
                    conn_id = conn_base - node
                    self.client.register_node(conn_id, host, port)
                    return conn_id
                err = error_for(code)(f"FindCoordinator for {key!r}")
                if code not in _FIND_AGAIN and not err.retriable:
                    raise err
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("coordinator lookup for %r failed: %s", key, exc)
            await asyncio.sleep(backoff.next())

    async def _txn_call(self, api_key: int, values, error_of, what: str, deadline: float):
        """Send to the transaction coordinator until it answers something other than "retry"."""
        loop = asyncio.get_running_loop()
        backoff = Backoff(min(self.backoff_ms, 20), 1000)  # CONCURRENT_TRANSACTIONS clears fast
        while True:
            if loop.time() > deadline:
                raise KafkaTimeoutError(f"{what} for transactional id {self.transactional_id!r} timed out")
            if self._coordinator is None:
                self._coordinator = await self._find(1, self.transactional_id, _TXN_COORDINATOR_CONN)
            try:
                resp = await self.client.call(
                    self._coordinator, api_key, values, timeout=self.request_timeout
                )
            except KafkaConnectionError as exc:
                log.debug("%s: %s; looking up the coordinator again", what, exc)
                self._coordinator = None
                await asyncio.sleep(backoff.next())
                continue
            code = error_of(resp)
            if code in _FIND_AGAIN:
                self._coordinator = None
            elif code not in _RETRY_SAME:
                return resp, code
            await asyncio.sleep(backoff.next())

    def _deadline(self, timeout: float | None) -> float:
        return asyncio.get_running_loop().time() + (self.max_block if timeout is None else timeout)

    # -- InitProducerId --------------------------------------------------------------------

    async def init(self, timeout: float | None = None) -> None:
        if self.state not in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            self._require("initialize transactions", TxnState.UNINITIALIZED)
        self.state = TxnState.INITIALIZING
        self.start()
        await self._init_producer_id(-1, -1, self._deadline(timeout))
        self.state = TxnState.READY

    async def _init_producer_id(self, producer_id: int, epoch: int, deadline: float) -> None:
        values = {
            "transactional_id": self.transactional_id,
            "transaction_timeout": self.timeout_ms,
            "producer_id": producer_id,
            "producer_epoch": epoch,
        }
        resp, code = await self._txn_call(
            api_keys.INIT_PRODUCER_ID, values, lambda r: int(r.error_code), "InitProducerId", deadline
        )
        if code:
            err = error_for(code)(f"InitProducerId for transactional id {self.transactional_id!r}")
            if code in _FENCED:
                self._fatal(ProducerFencedError(str(err)))
                raise self.error
            raise err
        sender = self._sender
        sender.producer_id = int(resp.producer_id)
        sender.producer_epoch = int(resp.producer_epoch)
        sender._renumber()
        sender._need_new_pid = False
        self.needs_epoch_bump = False
        sender.wakeup()
        log.info(
            "transactional id %r: producer id %d, epoch %d",
            self.transactional_id,
            sender.producer_id,
            sender.producer_epoch,
        )

    # -- begin / commit / abort ------------------------------------------------------------

    def begin(self) -> None:
        self._require("begin a transaction", TxnState.READY)
        self.partitions.clear()
        self.offsets_added = False
        self.error = None
        self.state = TxnState.IN_TRANSACTION

    async def commit(self, flush, timeout: float | None = None) -> None:
        self._raise_if_failed()
        self._require("commit", TxnState.IN_TRANSACTION, TxnState.COMMITTING)
        self.state = TxnState.COMMITTING
        deadline = self._deadline(timeout)
        try:
            await flush(max(deadline - asyncio.get_running_loop().time(), 0))
        except KafkaTimeoutError:
            if self.state is TxnState.COMMITTING:
                self.state = TxnState.IN_TRANSACTION  # may be retried
            raise
        self._raise_if_failed()
        await self._end(True, deadline)

    async def abort(self, timeout: float | None = None) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self.error
        self._require(
            "abort", TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.COMMITTING, TxnState.ABORTING
        )
        self.state = TxnState.ABORTING
        deadline = self._deadline(timeout)
        aborted = self._acc.abort_all(TransactionAbortedError("the transaction was aborted"))
        if any(b.base_sequence >= 0 for b in aborted):
            self.needs_epoch_bump = True  # a numbered batch never reached the broker
        pending = [r.async_future() for r in self._acc.pending_results()]
        loop = asyncio.get_running_loop()
        if pending:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0)):
                    await asyncio.gather(*pending)
            except TimeoutError:
                raise KafkaTimeoutError("abort_transaction timed out waiting for in-flight batches") from None
        await self._wait_adds(deadline)
        await self._end(False, deadline)
        if self.needs_epoch_bump or self._sender._need_new_pid:
            s = self._sender
            await self._init_producer_id(s.producer_id, s.producer_epoch, deadline)

    async def _wait_adds(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while self._new or self._adding:
            self._poke()
            self._idle.clear()
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    await self._idle.wait()
            except TimeoutError:
                raise KafkaTimeoutError("timed out adding partitions to the transaction") from None
            if self.state is TxnState.FATAL_ERROR:
                raise self.error

    async def _end(self, committed: bool, deadline: float) -> None:
        if self.partitions or self.offsets_added:
            s = self._sender
            values = {
                "transactional_id": self.transactional_id,
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "committed": committed,
            }
            what = "EndTxn(commit)" if committed else "EndTxn(abort)"
            _, code = await self._txn_call(END_TXN, values, lambda r: int(r.error_code), what, deadline)
            if code:
                err = error_for(code)(f"{what} for transactional id {self.transactional_id!r}")
                if code in _FATAL:
                    self._fatal(ProducerFencedError(str(err)) if code in _FENCED else err)
                    raise self.error
                if committed:
                    self._abortable(err)
                raise err
        self.partitions.clear()
        self.offsets_added = False
        self.error = None
        self.state = TxnState.READY

    # -- AddPartitionsToTxn (the manager's task) -------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._work.wait()
            self._work.clear()
            with self._lock:
                batch = self._new - self.partitions
                self._new.clear()
                self._adding |= batch
            if batch:
                try:
                    await self._add(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if self.state not in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
                        self._abortable(exc)
                finally:
                    self._adding -= batch
            if not self._new and not self._adding:
                self._idle.set()
            if self._sender is not None:
                self._sender.wakeup()

    async def _add(self, batch: set[TopicPartition]) -> None:
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            return
        s = self._sender
        topics: dict[str, list[int]] = {}
        for tp in sorted(batch):
            topics.setdefault(tp.topic, []).append(tp.partition)
        values = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": s.producer_id,
            "v3_and_below_producer_epoch": s.producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def error_of(resp) -> int:
            codes = [
                int(p.partition_error_code)
                for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition
                if int(p.partition_error_code) not in (0, int(E.operation_not_attempted))
            ]
            retry = [c for c in codes if c in _RETRY_SAME or c in _FIND_AGAIN]
            return (retry or codes or [0])[0]

        _, code = await self._txn_call(
            ADD_PARTITIONS_TO_TXN, values, error_of, "AddPartitionsToTxn", self._deadline(self.max_block)
        )
        if code == 0:
            self.partitions |= batch
            return
        err = error_for(code)(f"AddPartitionsToTxn {sorted(batch)} for {self.transactional_id!r}")
        if code in _FATAL:
            self._fatal(ProducerFencedError(str(err)) if code in _FENCED else err)
        else:
            if code == int(E.invalid_producer_id_mapping):
                self.needs_epoch_bump = True
            self._abortable(err)

    # -- offsets ---------------------------------------------------------------------------

    async def send_offsets(self, offsets: dict, group, timeout: float | None = None) -> None:
        self._raise_if_failed()
        self._require("send offsets", TxnState.IN_TRANSACTION)
        meta = ConsumerGroupMetadata.of(group)
        deadline = self._deadline(timeout)
        s = self._sender
        values = {
            "transactional_id": self.transactional_id,
            "producer_id": s.producer_id,
            "producer_epoch": s.producer_epoch,
            "group_id": meta.group_id,
        }
        _, code = await self._txn_call(
            ADD_OFFSETS_TO_TXN, values, lambda r: int(r.error_code), "AddOffsetsToTxn", deadline
        )
        if code:
            self._fail_request(code, f"AddOffsetsToTxn for group {meta.group_id!r}")
        self.offsets_added = True
        await self._txn_offset_commit(offsets, meta, deadline)

    def _fail_request(self, code: int, what: str):
        err = error_for(code)(f"{what} (transactional id {self.transactional_id!r})")
        if code in _FATAL:
            self._fatal(ProducerFencedError(str(err)) if code in _FENCED else err)
        elif code in _GROUP_FAILED:
            self._abortable(CommitFailedError(f"{what}: {err}"))
        else:
            self._abortable(err)
        raise self.error

    async def _txn_offset_commit(self, offsets: dict, meta: ConsumerGroupMetadata, deadline: float) -> None:
        by_topic: dict[str, list[dict]] = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if isinstance(om, int):
                om = OffsetAndMetadata(om)
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch,
                    "committed_metadata": om.metadata or "",
                }
            )
        s = self._sender
        values = {
            "transactional_id": self.transactional_id,
            "group_id": meta.group_id,
            "producer_id": s.producer_id,
            "producer_epoch": s.producer_epoch,
            "generation_id": meta.generation_id,
            "member_id": meta.member_id,
            "group_instance_id": meta.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        loop = asyncio.get_running_loop()
        backoff = Backoff(self.backoff_ms, 1000)
        node = None
        while True:
            if loop.time() > deadline:
                raise KafkaTimeoutError(f"TxnOffsetCommit for group {meta.group_id!r} timed out")
            if node is None:
                node = await self._find(0, meta.group_id, _GROUP_COORDINATOR_CONN)
            try:
                resp = await self.client.call(node, TXN_OFFSET_COMMIT, values, timeout=self.request_timeout)
            except KafkaConnectionError:
                node = None
                await asyncio.sleep(backoff.next())
                continue
            except UnsupportedVersionError as exc:
                self._fatal(exc)
                raise
            codes = {int(p.error_code) for t in resp.topics for p in t.partitions} - {0}
            if not codes:
                return
            if codes & _FIND_AGAIN:
                node = None
            elif not all(error_for(c).retriable for c in codes):
                self._fail_request(max(codes), f"TxnOffsetCommit for group {meta.group_id!r}")
            await asyncio.sleep(backoff.next())
