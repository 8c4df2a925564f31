"""Running one task: ``WorkerSourceTask`` (poll → transform → convert → produce → store offsets) and
``WorkerSinkTask`` (consume as group ``connect-<name>`` → convert → transform → put → commit).

Each task owns one asyncio task (its loop, on the worker's event loop) and one thread: every
call into the connector's code (``poll``, ``put``, converters, transforms) runs on that thread,
so a task that blocks holds up nobody else. ``stop()`` is the one call made from another thread,
as Kafka does, so that a blocked ``poll`` returns. A task that raises is FAILED with its trace;
the worker keeps running.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from odradek._tasks import cancel_and_wait
from odradek.client.consumer.consumer import Consumer
from odradek.client.consumer.subscription import ConsumerRebalanceListener
from odradek.client.producer.producer import Producer
from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.connect.api import SinkTask, SinkTaskContext, SourceTask, SourceTaskContext
from odradek.connect.error_handling import SKIPPED, ErrorHandler
from odradek.connect.errors import RetriableException
from odradek.connect.records import SinkRecord, SourceRecord, TimestampType
from odradek.connect.source_transactions import ABORT, WorkerTransactionContext

log = logging.getLogger("odradek.connect")

RUNNING, PAUSED, FAILED, UNASSIGNED = "RUNNING", "PAUSED", "FAILED", "UNASSIGNED"
SINK_POLL_S = 0.5
EMPTY_POLL_PAUSE_S = 0.05


class TaskRunner:
    """What source and sink tasks share: the thread, the state, start/pause/stop."""

    # A source task's stop() is called from another thread, to end a blocked poll(); a sink
    # task's after its last commit and close, on its own thread (Kafka's order).
    stop_from_outside = True

    def __init__(self, connector: str, task_id: int, task: Any, props: dict[str, str], plumbing: Any, on_state):
        self.connector, self.id = connector, task_id
        self.task = task
        self.props = props
        self.plumbing = plumbing  # converters, transforms, error handler, clients options, offset store
        self.on_state = on_state  # (runner) -> None, told of every state change
        self.state: str = UNASSIGNED
        self.trace: str | None = None
        self.target_paused = asyncio.Event()
        self.running = asyncio.Event()
        self.running.set()
        self.stopping = False
        self.thread = ThreadPoolExecutor(1, thread_name_prefix=f"task-{connector}-{task_id}")
        self._task: asyncio.Task | None = None
        self.topics: set[str] = set()
        self.records = 0

    async def call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.thread, fn, *args)

    def _set(self, state: str, trace: str | None = None) -> None:
        self.state, self.trace = state, trace
        self.on_state(self)

    def start(self, paused: bool) -> None:
        if paused:
            self.running.clear()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"task-{self.connector}-{self.id}")

    async def _run(self) -> None:
        try:
            await self.call(self.task.initialize, self.context())
            await self.call(self.task.start, self.props)
            self._set(RUNNING if self.running.is_set() else PAUSED)
            await self.execute()
        except asyncio.CancelledError:
            raise
        except BaseException:
            trace = traceback.format_exc()
            log.error("task %s-%d failed; it stays FAILED until restarted:\n%s", self.connector, self.id, trace)
            self._set(FAILED, trace)
        finally:
            await self.cleanup()

    def pause(self) -> None:
        self.running.clear()
        if self.state == RUNNING:
            self._set(PAUSED)

    def resume(self) -> None:
        self.running.set()
        if self.state == PAUSED:
            self._set(RUNNING)

    async def stop(self, timeout_s: float) -> None:
        self.stopping = True
        self.running.set()
        if self.stop_from_outside:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.task.stop)
            except Exception:
                log.exception("task %s-%d: stop() raised", self.connector, self.id)
        if self._task is not None:
            done, _ = await asyncio.wait([self._task], timeout=timeout_s)
            if not done:
                log.warning("task %s-%d did not stop within %.1f s; cancelled", self.connector, self.id, timeout_s)
                await cancel_and_wait(self._task)
        self.thread.shutdown(wait=False)

    async def execute(self) -> None:
        raise NotImplementedError

    async def cleanup(self) -> None:
        pass

    def context(self) -> Any:
        raise NotImplementedError


class _SourceContext(SourceTaskContext):
    def __init__(self, runner: WorkerSourceTask):
        self.runner = runner
        self.offset_storage_reader = runner.plumbing.offset_store.reader(runner.connector)
        self.transaction_context = runner.transaction_context

    def configs(self):
        return dict(self.runner.props)


class WorkerSourceTask(TaskRunner):
    task: SourceTask

    def context(self) -> SourceTaskContext:
        # transaction.boundary=connector (with exactly-once source support): the task ends its
        # transactions through this; otherwise the context has none, as in Kafka.
        self.transaction_context = WorkerTransactionContext() if self.plumbing.connector_boundaries else None
        return _SourceContext(self)

    async def execute(self) -> None:
        p = self.plumbing
        transactional_id = getattr(p.offset_store, "transactional_id", lambda c, t: None)(self.connector, self.id)
        self.transactional = transactional_id is not None
        self.in_transaction = False
        if self.transactional:  # KIP-618: records and their offsets in one transaction
            self.producer = Producer(**p.client_options("producer"), acks="all", linger_ms=5,
                                     enable_idempotence=True, transactional_id=transactional_id)
            await self.producer.start()
            await self.producer.init_transactions()  # fences a dead worker's producer of this task
        else:
            self.producer = Producer(**p.client_options("producer"), acks="all", linger_ms=5)
            await self.producer.start()
        self.pending: list = []  # send futures since the last offset commit (one per batch without acks)
        self.offsets: dict[str, tuple[dict, dict]] = {}
        wants_acks = type(self.task).commit_record is not SourceTask.commit_record
        next_commit = time.monotonic() + p.flush_interval_s
        boundaries = self.transaction_context if self.transactional else None
        while not self.stopping:
            if not self.running.is_set():
                if boundaries is None:  # the connector's transaction stays open while paused
                    await self.commit_offsets()
                await self.running.wait()
                continue
            polled = await self.call(self.task.poll)
            if not polled:
                await asyncio.sleep(EMPTY_POLL_PAUSE_S)  # a task with nothing returns at once: no spinning
                polled = []
            if boundaries is not None:
                await self._dispatch_with_boundaries(boundaries, polled, wants_acks)
                continue
            await self._dispatch(polled, wants_acks)
            if time.monotonic() >= next_commit:
                await self.commit_offsets()
                next_commit = time.monotonic() + p.flush_interval_s
        if boundaries is None:
            await self.commit_offsets()
        # else: a transaction the connector left open is aborted when the producer closes (Kafka's rule)

    async def _dispatch(self, polled: list[SourceRecord], wants_acks: bool) -> None:
        batch = self._convert(polled)
        await self._send(batch, wants_acks)
        self._track_offsets(polled)
        self.records += len(batch)

    async def _dispatch_with_boundaries(self, boundaries: WorkerTransactionContext, polled: list[SourceRecord],
                                        wants_acks: bool) -> None:
        """Send ``polled``, ending transactions where the connector asked: after a record, or after the batch."""
        start = 0
        if boundaries.has_record_requests:
            for i, record in enumerate(polled):
                action = boundaries.action_on(record)
                if action is not None:
                    await self._dispatch(polled[start:i + 1], wants_acks)
                    start = i + 1
                    await self._end_transaction(action)
        await self._dispatch(polled[start:], wants_acks)
        action = boundaries.batch_action()
        if action is not None:
            await self._end_transaction(action)

    async def _end_transaction(self, action: str) -> None:
        if action == ABORT:
            await self._abort_transaction()
        await self.commit_offsets()  # after an abort: the offsets alone, so the records are not polled again

    async def _abort_transaction(self) -> None:
        if not self.in_transaction:
            log.warning("task %s-%d: ignoring the request to abort the transaction: it is empty", self.connector, self.id)
            return
        pending, self.pending = self.pending, []
        await self.producer.abort_transaction()
        self.in_transaction = False
        await asyncio.gather(*(item[0] if isinstance(item, tuple) else item for item in pending), return_exceptions=True)
        log.info("task %s-%d: aborted the transaction as the connector requested", self.connector, self.id)

    def _convert(self, records: list[SourceRecord]) -> list:
        # On the loop's thread: CPU work in the task's thread would contend for the GIL with
        # the loop's I/O (each syscall gives it up and waits a switch interval to get it back).
        return self.plumbing.source_convert_all(records)

    async def _send(self, batch: list, wants_acks: bool) -> None:
        """Hand the converted records to the producer in one call; a record it refuses (too
        large, its topic unknown) fails the task before its offset is tracked, as a refused
        ``send`` does."""
        records = [r for r in batch if r[1] is not None]
        if not records:
            return
        self.topics.update({topic for _, topic, _, _, _ in records})
        if self.transactional and not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True
        futures = await self.producer.send_many(
            [(topic, value, key, headers, record.kafka_partition, record.timestamp)
             for record, topic, key, value, headers in records],
            per_record=wants_acks)
        for fut in futures:
            if fut.failed():
                raise fut.exception()  # type: ignore[misc]
        pending = self.pending
        if wants_acks:
            pending.extend(zip(futures, (r[0] for r in records), strict=True))
            return
        # One future per produce batch: the commit waits for each batch once.
        if pending and futures and futures[0].batch is pending[-1].batch:
            futures = futures[1:]
        pending.extend(futures)

    def _track_offsets(self, records: list[SourceRecord]) -> None:
        """The latest offset of each source partition, stored at the next offset commit."""
        offsets = self.offsets
        last_partition: Any = None
        key = ""
        for record in records:
            partition, offset = record.source_partition, record.source_offset
            if partition is None or offset is None:
                continue
            if partition is not last_partition:  # a task usually hands out one dict per partition
                key, last_partition = repr(sorted(partition.items())), partition
            offsets[key] = (partition, offset)

    @property
    def errors(self) -> ErrorHandler:
        return self.plumbing.errors

    async def commit_offsets(self) -> None:
        """Wait for every record sent, then store the offsets they carry and call ``commit``."""
        pending, offsets = self.pending, self.offsets
        self.pending, self.offsets = [], {}
        if not pending and not offsets:
            return
        acks = []
        for item in pending:
            if isinstance(item, tuple):
                acks.append((item[1], await item[0]))
            else:
                await item
        if self.transactional:
            await self._commit_transaction(list(offsets.values()))
        else:
            await self.plumbing.offset_store.write(self.connector, list(offsets.values()))
        if acks:
            await self.call(self._acknowledge, acks)
        await self.call(self.task.commit)

    async def _commit_transaction(self, offsets: list) -> None:
        store = self.plumbing.offset_store
        if offsets and not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True
        for key, value in store.offset_records(self.connector, offsets):
            await self.producer.send(store.topic, value, key)
        if self.in_transaction:
            await self.producer.commit_transaction()
            self.in_transaction = False
        await store.remember(self.connector, offsets)

    def _acknowledge(self, acks: list) -> None:
        for record, metadata in acks:
            self.task.commit_record(record, metadata)

    async def cleanup(self) -> None:
        producer = getattr(self, "producer", None)
        if producer is not None:
            await producer.close()
        await self.plumbing.close()


class _SinkContext(SinkTaskContext):
    """What a sink task asks of the consumer. The task calls it from its own thread, while the
    loop may be polling (the next batch is fetched during a put): requests are queued and the
    loop applies them once the call that made them has returned."""

    def __init__(self, runner: WorkerSinkTask):
        self.runner = runner

    def configs(self):
        return dict(self.runner.props)

    def offset(self, offsets, offset=None):
        if isinstance(offsets, TopicPartition):
            offsets = {offsets: offset}
        self.runner.requests.append(("seek", dict(offsets)))

    def timeout(self, timeout_ms: int) -> None:
        self.runner.retry_timeout_s = timeout_ms / 1000

    def assignment(self):
        return set(self.runner.consumer.assignment())

    def pause(self, *partitions):
        self.runner.requests.append(("pause", partitions))

    def resume(self, *partitions):
        self.runner.requests.append(("resume", partitions))

    def request_commit(self) -> None:
        self.runner.commit_requested = True


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, runner: WorkerSinkTask):
        self.runner = runner
        self.enabled = True

    async def on_partitions_revoked(self, revoked):
        if revoked and self.enabled:
            runner = self.runner
            # Runs in the consumer's own asyncio task: no put starts until the partitions are
            # closed and gone from the assignment (the consumer drops them as this returns).
            async with runner.settling:
                await runner.commit_settled()
                await runner.call(runner.task.close, sorted(revoked))
                for tp in revoked:
                    runner.current.pop(tp, None)

    async def on_partitions_assigned(self, assigned):
        if assigned:
            await self.runner.call(self.runner.task.open, sorted(assigned))
            if not self.runner.running.is_set():
                self.runner.consumer.pause(*assigned)


class _Batch:
    """Consumed records and the SinkRecords converted from them (skipped ones left out)."""

    __slots__ = ("records", "converted")

    def __init__(self, records: list, converted: list[SinkRecord]):
        self.records, self.converted = records, converted

    def partitions(self) -> set[TopicPartition]:
        return {TopicPartition(*tp) for tp in {(r.topic, r.partition) for r in self.records}}

    def without(self, partitions: set[TopicPartition]) -> tuple[_Batch, dict[TopicPartition, int]]:
        """This batch without the records of ``partitions``, and the first offset left out of each."""
        # TopicPartition is a named tuple: plain (topic, partition) tuples find it in the set.
        first: dict[TopicPartition, int] = {}
        kept = []
        for r in self.records:
            if (r.topic, r.partition) in partitions:
                first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
            else:
                kept.append(r)
        converted = [s for s in self.converted if (s.original_topic, s.original_kafka_partition) not in partitions]
        return _Batch(kept, converted), first


class WorkerSinkTask(TaskRunner):
    """Consume, convert, put, commit. While one batch's put runs on the task's thread, the loop
    fetches and converts the next one, so the database's (or the file's) work overlaps the
    worker's. Puts still run one at a time in consumer order, and a batch's offsets count for
    the next commit only once its put has returned; a put that raises RetriableException is
    made again with the same batch before the next one."""

    task: SinkTask
    stop_from_outside = False

    def context(self) -> SinkTaskContext:
        self.requests: list[tuple[str, Any]] = []  # pause/resume/seek asked by the task, in order
        self.retry_timeout_s = 0.0
        self.commit_requested = False
        self.current: dict[TopicPartition, OffsetAndMetadata] = {}
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.putting: tuple[asyncio.Future, _Batch] | None = None
        self.settling = asyncio.Lock()
        self.put_failure: BaseException | None = None
        return _SinkContext(self)

    async def execute(self) -> None:
        p = self.plumbing
        # A fetched batch is one put(): 2000 records unless max.poll.records (consumer.override.*) says
        options = {"enable_auto_commit": False, "auto_offset_reset": "earliest", "max_poll_records": p.sink_batch,
                   **p.client_options("consumer")}
        self.consumer = Consumer(**options, group_id=f"connect-{self.connector}")
        await self.consumer.start()
        topics = [t.strip() for t in self.props.get("topics", "").split(",") if t.strip()]
        self.listener = listener = _Rebalance(self)
        if topics:
            self.consumer.subscribe(topics, listener=listener)
        else:
            self.consumer.subscribe(pattern=self.props.get("topics.regex"), listener=listener)
        next_commit = time.monotonic() + p.flush_interval_s
        was_running = True
        ready: _Batch | None = None  # converted, waiting for the put before it to return
        while not self.stopping:
            running = self.running.is_set()
            if running != was_running:
                if not running and ready is not None:  # read again on resume
                    self._give_back(ready, ready.partitions())
                    ready = None
                (self.consumer.resume if running else self.consumer.pause)(*self.consumer.assignment())
                was_running = running
            if self.putting is None:
                ready = self._apply_requests(ready)
            if ready is None:
                records = await self.consumer.poll(timeout=SINK_POLL_S)
                if records and running:
                    ready = await self._convert(records)
                elif records:  # fetched as the task was being paused: read again on resume
                    batch = _Batch(records, [])
                    self._give_back(batch, batch.partitions())
            if ready is not None and running:
                await self.settle()
                ready = self._apply_requests(ready)
                if ready is not None:
                    self.putting = (self._start_put(ready), ready)
                    ready = None
            if self.commit_requested or time.monotonic() >= next_commit:
                self.commit_requested = False
                await self.commit()
                next_commit = time.monotonic() + p.flush_interval_s
        await self.commit()

    async def _convert(self, records: list) -> _Batch:
        try:
            return _Batch(records, self.plumbing.sink_convert_all(records))
        except BaseException:
            await self.settle()  # the batch before ends first (its offsets count), then the task fails
            raise

    def _start_put(self, batch: _Batch) -> asyncio.Future:
        return asyncio.get_running_loop().run_in_executor(self.thread, self._put, batch.converted)

    async def settle(self) -> None:
        """Wait for the put under way; count its batch's offsets for the next commit once it returns.
        (The consumer's rebalance listener commits from its own asyncio task: it holds
        ``settling`` while it does, and a put starts only after a settle.)"""
        async with self.settling:
            await self._settle()

    async def _settle(self) -> None:
        if self.put_failure is not None:  # no put after a failed one: the task is failing
            raise self.put_failure
        while self.putting is not None:
            future, batch = self.putting
            try:
                await future
            except RetriableException as exc:
                if self.stopping:  # not retried: the batch's offsets are not committed
                    self.putting = None
                    return
                log.info("task %s-%d: put will be retried: %s", self.connector, self.id, exc)
                await asyncio.sleep(self.retry_timeout_s or 1.0)
                self.putting = (self._start_put(batch), batch)
                continue
            except Exception as exc:
                self.putting, self.put_failure = None, exc
                raise
            self.putting = None
            self._track_offsets(batch.records)
            self.records += len(batch.records)
            await self.plumbing.flush_dlq()

    def _apply_requests(self, ready: _Batch | None) -> _Batch | None:
        """Carry out the task's pause/resume/seek requests (no put is running). Records of ``ready``
        that a paused or sought partition must not deliver now are left out and read again."""
        requests, self.requests = self.requests, []
        for kind, arg in requests:
            if kind == "seek":
                for tp, offset in arg.items():
                    if ready is not None:
                        ready, _ = ready.without({tp})
                    self.consumer.seek(tp, offset)
            elif kind == "pause":
                self.consumer.pause(*arg)
            else:
                self.consumer.resume(*arg)
        if ready is not None:
            gone = ready.partitions() - self.consumer.assignment()  # revoked while it was converted
            if gone:
                ready, _ = ready.without(gone)
            paused = self.consumer.paused()
            if paused:
                ready = self._give_back(ready, paused)
        return ready if ready is not None and ready.records else None

    def _give_back(self, ready: _Batch, partitions: set[TopicPartition]) -> _Batch:
        """``ready`` without the records of ``partitions``, which the consumer fetches again."""
        kept, first = ready.without(partitions)
        for tp, offset in first.items():
            self.consumer.seek(tp, offset)
        return kept

    def _track_offsets(self, records: list) -> None:
        """The next offset of each partition the batch came from, for the next commit."""
        last: dict[tuple[str, int], int] = {}
        for r in records:
            last[r.topic, r.partition] = r.offset
        for (topic, partition), offset in last.items():
            self.current[TopicPartition(topic, partition)] = OffsetAndMetadata(offset + 1)
            self.topics.add(topic)

    def _put(self, batch: list[SinkRecord]) -> None:
        if batch:
            self.task.put(batch)

    @property
    def errors(self) -> ErrorHandler:
        return self.plumbing.errors

    async def commit(self) -> None:
        async with self.settling:
            await self.commit_settled()

    async def commit_settled(self) -> None:
        """``commit`` for a caller holding ``settling``."""
        await self._settle()
        if not self.current:
            return
        offsets = await self.call(self.task.pre_commit, dict(self.current))
        offsets = {tp: o for tp, o in (offsets or {}).items() if self.committed.get(tp) != o}
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
            self.committed.update(offsets)
            self.plumbing.metrics_commit(True)
        except Exception as exc:
            self.plumbing.metrics_commit(False)
            log.warning("task %s-%d: offset commit failed: %s", self.connector, self.id, exc)

    async def cleanup(self) -> None:
        consumer = getattr(self, "consumer", None)
        if consumer is not None:
            try:
                if self.state != FAILED:
                    assigned = sorted(consumer.assignment())
                    if assigned:
                        await self.call(self.task.close, assigned)
            finally:
                self.listener.enabled = False  # closing the consumer revokes: already done above
                await consumer.close()
        await self.call(self.task.stop)
        await self.plumbing.close()


def sink_record(r, key_sv, value_sv, headers) -> SinkRecord:
    ts_type = TimestampType.LOG_APPEND_TIME if r.timestamp_type == 1 else TimestampType.CREATE_TIME
    return SinkRecord.read(r.topic, r.partition, r.offset, key_sv.schema, key_sv.value, value_sv.schema,
                           value_sv.value, r.timestamp, ts_type, headers)


def is_skipped(value: Any) -> bool:
    return value is SKIPPED


__all__ = ["WorkerSinkTask", "WorkerSourceTask", "SourceRecord", "sink_record", "is_skipped"]
