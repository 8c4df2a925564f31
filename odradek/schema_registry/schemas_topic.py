"""The ``_schemas`` topic: read from the start into a RegistryState, written through a producer.

One task reads the topic's only partition and applies every record to the state, in order,
so the state has one owner. A write waits until that reader has applied the record it
wrote (read your writes), which is what makes the leader's next decision see it. The
topic is created compacted with one partition and ``replication_factor`` replicas (3 by
default) or as many as there are live brokers when fewer, as Confluent's registry creates it.

Writes are grouped: one writer task sends what is queued as one acks=all produce and waits
once for the reader to apply it; records queued while that write is in flight go into the
next one (group commit). Each caller still returns only after its own record is durable
and applied, and batches go out one after another, so the topic's order is the queue's.
"""

from __future__ import annotations

import asyncio
import logging

from odradek._tasks import cancel_and_wait
from odradek.aio import Admin, Consumer, NewTopic, Producer, TopicPartition
from odradek.protocol.errors import KafkaError, TopicAlreadyExistsError

from .registry_errors import RegistryError, store_error, store_timeout
from .registry_state import RegistryState

log = logging.getLogger("odradek.schema_registry")


class SchemasTopic:
    """Owns the reader task; ``state`` is read by everyone, changed only by that task."""

    def __init__(self, client_options: dict, topic: str = "_schemas", timeout: float = 30.0, replication_factor: int = 3):
        self.client_options = dict(client_options)
        self.topic = topic
        self.timeout = timeout
        self.replication_factor = replication_factor
        self.state = RegistryState()
        self.position = 0  # the next offset to apply
        self._applied = asyncio.Condition()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._reader: asyncio.Task | None = None
        self._failure: BaseException | None = None
        self._writer: asyncio.Task | None = None
        self._queued: list[tuple[bytes, bytes | None]] = []
        self._queued_done: asyncio.Future | None = None  # resolved when the queued records are applied
        self._in_flight: asyncio.Future | None = None
        self._has_queued = asyncio.Event()

    @property
    def partition(self) -> TopicPartition:
        return TopicPartition(self.topic, 0)

    async def start(self) -> None:
        """Create the topic if missing, then read it to its current end (from scratch)."""
        self.state, self.position, self._failure = RegistryState(), 0, None
        await self._ensure_topic()
        # Never lingers on its own: the writer flushes each batch as soon as it is queued.
        self._producer = Producer(**self.client_options, acks="all", linger_ms=60_000)
        await self._producer.start()
        self._consumer = Consumer(
            **self.client_options, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200
        )
        await self._consumer.start()
        self._consumer.assign([self.partition])
        self._consumer.seek_to_beginning(self.partition)
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(), name="schemas-topic-reader")
        self._writer = loop.create_task(self._write_batches(), name="schemas-topic-writer")
        end = (await self._consumer.end_offsets([self.partition], timeout=self.timeout))[self.partition]
        await self.wait_applied(end)
        log.info(
            "read %d records of %s: %d subjects, highest id %d",
            end, self.topic, len(self.state.versions), self.state.max_id,
        )

    async def _ensure_topic(self) -> None:
        async with Admin(**self.client_options) as admin:
            topics = await admin.list_topics(internal=True, timeout=self.timeout)
            if self.topic in topics:
                return
            live = len((await admin.describe_cluster(timeout=self.timeout)).brokers)
            replicas = min(self.replication_factor, max(live, 1))
            if replicas < self.replication_factor:
                (log.warning if live > 1 else log.info)(
                    "creating %s with %d replica(s): only %d broker(s) are live (kafkastore.topic.replication.factor=%d)",
                    self.topic, replicas, live, self.replication_factor,
                )
            try:
                await admin.create_topics(
                    [NewTopic(self.topic, 1, replicas, {"cleanup.policy": "compact"})], timeout=self.timeout
                )
                log.info("created the schemas topic %s (compacted, 1 partition, %d replicas)", self.topic, replicas)
            except TopicAlreadyExistsError:
                pass  # another instance created it a moment ago

    async def _read(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                records = await self._consumer.poll(timeout=1.0)
                if not records:
                    continue
                for record in records:
                    self.state.apply(record.key, record.value)
                    self.position = record.offset + 1
                async with self._applied:
                    self._applied.notify_all()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("reading %s failed; the registry stops answering", self.topic)
            self._failure = exc
            async with self._applied:
                self._applied.notify_all()

    async def wait_applied(self, end: int, timeout: float | None = None) -> None:
        """Until every record before offset ``end`` has been applied (50002 after the timeout)."""
        async def reached() -> None:
            async with self._applied:
                await self._applied.wait_for(lambda: self.position >= end or self._failure is not None)

        try:
            await asyncio.wait_for(reached(), timeout or self.timeout)
        except TimeoutError:
            raise store_timeout(f"{self.topic} not read up to offset {end}") from None
        if self._failure is not None:
            raise store_error(f"reading {self.topic} failed: {self._failure}")

    async def write(self, key: bytes, value: bytes | None) -> None:
        """Append one record and wait until the reader has applied it."""
        await asyncio.shield(self.enqueue(key, value))

    def enqueue(self, key: bytes, value: bytes | None) -> asyncio.Future:
        """Queue one record for the next batch; the future resolves once the reader has
        applied it (50001/50002 when the batch fails). It is shared by the whole batch: await
        it through ``asyncio.shield``, so that one cancelled caller does not cancel the rest."""
        if self._producer is None or self._writer is None:
            raise store_error("the store is not started")
        self._queued.append((key, value))
        if self._queued_done is None:
            self._queued_done = asyncio.get_running_loop().create_future()
            # Each caller gets the failure; none left (all cancelled) is not worth a warning.
            self._queued_done.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._has_queued.set()
        return self._queued_done

    async def settled(self) -> None:
        """Until every record queued so far has been written and applied, or has failed."""
        for pending in (self._in_flight, self._queued_done):
            if pending is not None:
                await asyncio.wait([pending])

    async def _write_batches(self) -> None:
        while True:
            await self._has_queued.wait()
            self._has_queued.clear()
            batch, done = self._queued, self._queued_done
            self._queued, self._queued_done = [], None
            if done is None:
                continue
            self._in_flight = done
            try:
                await self._append(batch)
                outcome: BaseException | None = None
            except asyncio.CancelledError:
                _settle(done, store_error("the registry is closing"))
                raise
            except Exception as exc:
                log.warning("writing %d record(s) to %s failed: %s", len(batch), self.topic, exc)
                outcome = exc if isinstance(exc, RegistryError) else store_error(str(exc))
            finally:
                self._in_flight = None
            _settle(done, outcome)

    async def _append(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """One produce for the batch (acks=all), then wait until the reader has applied it."""
        assert self._producer is not None
        try:
            async with asyncio.timeout(self.timeout):
                sent = [await self._producer.send(self.topic, value=v, key=k, partition=0) for k, v in batch]
                await self._producer.flush()
                metas = [await fut for fut in sent]
        except TimeoutError:
            raise store_timeout(f"no acknowledgement from {self.topic}") from None
        except KafkaError as exc:
            raise store_error(str(exc)) from None
        await self.wait_applied(max(meta.offset for meta in metas) + 1)

    async def catch_up(self) -> None:
        """Read up to the topic's current end (what a new leader does before it writes)."""
        assert self._consumer is not None
        end = (await self._consumer.end_offsets([self.partition], timeout=self.timeout))[self.partition]
        await self.wait_applied(end)

    async def close(self) -> None:
        await cancel_and_wait(self._writer)
        await cancel_and_wait(self._reader)
        self._reader = self._writer = None
        if self._queued_done is not None:
            _settle(self._queued_done, store_error("the registry is closing"))
        self._queued, self._queued_done = [], None
        for client in (self._producer, self._consumer):
            if client is not None:
                await client.close()
        self._producer = self._consumer = None


def _settle(done: asyncio.Future, failure: BaseException | None) -> None:
    """Resolve a batch's future (None: written), unless it is already done."""
    if done.done():
        return
    if failure is None:
        done.set_result(None)
    else:
        done.set_exception(failure)
