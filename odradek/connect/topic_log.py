"""A compacted internal topic read to its end and followed (Kafka's ``KafkaBasedLog``).

``TopicLog.start()`` creates the topic when missing (compacted, with the configured partitions
and replication factor), reads every partition from the beginning to its end offset, then
follows it: each record goes to ``on_record(key, value)`` in offset order per partition, on the
event loop. ``read_to_end()`` waits until everything written before the call has been handed
over, which is how a worker knows it has caught up (Kafka's ``readToEnd``). ``send`` writes a
key/value (None value: a tombstone) and waits for the write to be acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from odradek.client.admin import Admin
from odradek.client.client_errors import KafkaError
from odradek.client.consumer.consumer import Consumer
from odradek.client.producer.producer import Producer
from odradek.client.structs import NewTopic, TopicPartition

log = logging.getLogger("odradek.connect")


class TopicLog:
    def __init__(self, topic: str, partitions: int, replication: int, client_options: Callable[[str], dict],
                 on_record: Callable[[bytes | None, bytes | None], None]):
        self.topic, self.partitions, self.replication = topic, partitions, replication
        self.client_options = client_options
        self.on_record = on_record
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self.tps: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._progress = asyncio.Event()
        self._follow: asyncio.Task | None = None

    async def start(self) -> None:
        await self._create()
        self.producer = Producer(**self.client_options("producer"), acks="all", enable_idempotence=False,
                                 linger_ms=0)
        await self.producer.start()
        self.consumer = Consumer(**self.client_options("consumer"), enable_auto_commit=False,
                                 auto_offset_reset="earliest", isolation_level="read_committed")
        count = len(await self.consumer.partitions_for_topic(self.topic, fail_if_missing=True))
        self.tps = [TopicPartition(self.topic, p) for p in range(count)]
        self.consumer.assign(self.tps)
        self.consumer.seek_to_beginning(*self.tps)
        self._positions = dict.fromkeys(self.tps, 0)
        self._follow = asyncio.get_running_loop().create_task(self._run(), name=f"connect-log-{self.topic}")
        await self.read_to_end()

    async def _create(self) -> None:
        async with Admin(**self.client_options("admin"), default_api_timeout_ms=30000) as admin:
            if self.topic in await admin.list_topics():
                return
            try:
                await admin.create_topics(
                    [NewTopic(self.topic, self.partitions, self.replication, {"cleanup.policy": "compact"})]
                )
                log.info("created internal topic %s (%d partitions, compacted)", self.topic, self.partitions)
            except KafkaError as exc:
                if "exists" not in type(exc).__name__.lower() and "exists" not in str(exc).lower():
                    raise

    async def _run(self) -> None:
        assert self.consumer is not None
        while True:
            try:
                records = await self.consumer.poll(1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("reading %s: %s", self.topic, exc)
                await asyncio.sleep(0.5)
                continue
            for record in records:
                try:
                    self.on_record(record.key, record.value)
                except Exception:
                    log.exception("record of %s at offset %d not applied", self.topic, record.offset)
                tp = TopicPartition(record.topic, record.partition)
                self._positions[tp] = max(self._positions.get(tp, 0), record.offset + 1)
            if records:
                self._progress.set()

    async def read_to_end(self, timeout: float = 30.0) -> None:
        """Return once every record up to the end offsets of now has been applied."""
        assert self.consumer is not None
        ends = await self.consumer.end_offsets(self.tps)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            behind = {tp for tp, end in ends.items() if end > self._positions.get(tp, 0)}
            # A compacted log's end may sit past the last record left: position() tells.
            behind = {tp for tp in behind if await self.consumer.position(tp) < ends[tp]}
            if not behind:
                return
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"could not read {self.topic} to its end within {timeout:.0f} s")
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), min(remaining, 0.5))
            except TimeoutError:
                pass

    async def send(self, key: bytes, value: bytes | None) -> None:
        await self.send_many([(key, value)])

    async def send_many(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write in order; return once all are acknowledged."""
        assert self.producer is not None
        futures = [await self.producer.send(self.topic, value=v, key=k) for k, v in records]
        for future in futures:
            await future

    async def close(self) -> None:
        if self._follow is not None:
            self._follow.cancel()
            try:
                await self._follow
            except (asyncio.CancelledError, Exception):
                pass
        if self.consumer is not None:
            await self.consumer.close()
        if self.producer is not None:
            await self.producer.close()
