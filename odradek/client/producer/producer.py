"""The producer: interceptors → serializers → partitioner → accumulator; the sender does the rest.

``ProducerCore`` holds the parts and the thread-safe fast path (``try_send``), shared by
the asyncio ``Producer`` here and the blocking ``odradek.Producer`` (which calls it from
the user's thread and only hops to the event loop to wait for metadata or memory).

With ``transactional_id`` the producer is transactional (``transactions.py``):
``init_transactions`` once, then ``begin_transaction`` → sends (and
``send_offsets_to_transaction``) → ``commit_transaction`` or ``abort_transaction``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from odradek.client import client_config as config_mod
from odradek.client.client_errors import (
    ClientClosedError,
    ConfigError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SerializationError,
)
from odradek.client.netclient import NetClient
from odradek.client.producer.accumulator import (
    NEED_MEMORY,
    RECORD_BATCH_OVERHEAD,
    FutureRecordMetadata,
    RecordAccumulator,
    _encode_headers,
    failed_future,
)
from odradek.client.producer.partitioner import make_partitioner
from odradek.client.producer.sender import Sender
from odradek.client.producer.transactions import TransactionManager
from odradek.client.structs import RecordMetadata, TopicPartition
from odradek.protocol.compression import codec_for_name

log = logging.getLogger("odradek.client.producer")


class ProducerRecord(NamedTuple):
    """What producer interceptors see (and may replace) in ``on_send``."""

    topic: str
    value: object
    key: object = None
    headers: list | None = None
    partition: int | None = None
    timestamp_ms: int | None = None


class NeedMetadata(Exception):
    def __init__(self, topic: str):
        self.topic = topic


class NeedMemory(Exception):
    def __init__(self, size: int):
        self.size = size


def _to_bytes(data, what: str, topic: str):
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise SerializationError(
        f"{what} of a record to topic {topic!r} must be bytes, str or None (or set {what}_serializer); "
        f"got {type(data).__name__}"
    )


def _check_headers(headers, topic):
    if headers is None:
        return None
    if isinstance(headers, dict):
        headers = list(headers.items())
    out = []
    for item in headers:
        try:
            k, v = item
        except (TypeError, ValueError):
            raise SerializationError(
                f"headers of a record to topic {topic!r} must be (str, bytes) pairs; got {item!r}"
            ) from None
        if not isinstance(k, str):
            raise SerializationError(f"header key must be str in a record to topic {topic!r}; got {k!r}")
        if v is not None and not isinstance(v, bytes):
            if isinstance(v, str):
                v = v.encode()
            elif isinstance(v, bytearray | memoryview):
                v = bytes(v)
            else:
                raise SerializationError(f"header {k!r} value must be bytes in a record to topic {topic!r}")
        out.append((k, v))
    return out


class ProducerCore:
    def __init__(self, config: dict | None, options: dict):
        cfg = config_mod.resolve("producer", config, options)
        explicit = {config_mod._canonical(k) for k in {**(config or {}), **options}}
        self.config = cfg
        idem = cfg["enable_idempotence"]
        if idem:
            problems = []
            if cfg["acks"] != -1:
                problems.append("acks='all'")
            if cfg["max_in_flight_requests_per_connection"] > 5:
                problems.append("max_in_flight_requests_per_connection <= 5")
            if cfg["retries"] == 0:
                problems.append("retries > 0")
            if problems:
                if "enable_idempotence" in explicit:
                    raise ConfigError(f"enable_idempotence=True needs {', '.join(problems)}")
                idem = False
        if cfg["transactional_id"] is not None:
            if not idem:
                raise ConfigError(
                    "transactional_id needs idempotence: enable_idempotence=True, acks='all', "
                    "max_in_flight_requests_per_connection <= 5, retries > 0"
                )
            idem = True
            explicit.add("enable_idempotence")
        idempotence = "off" if not idem else ("on" if "enable_idempotence" in explicit else "auto")
        self.codec = codec_for_name(cfg["compression_type"])
        self.max_block = cfg["max_block_ms"] / 1000
        self.max_request_size = cfg["max_request_size"]
        self.buffer_memory = cfg["buffer_memory"]
        self.key_serializer = cfg["key_serializer"]
        self.value_serializer = cfg["value_serializer"]
        self.interceptors = cfg["interceptors"]
        self.partitioner, _ = make_partitioner(cfg["partitioner"], cfg["batch_size"])
        self.client = NetClient(cfg, "producer")
        self.acc = RecordAccumulator(
            cfg["batch_size"],
            cfg["linger_ms"],
            cfg["buffer_memory"],
            self.codec,
            keep_futures=bool(self.interceptors),
        )
        self.sender = Sender(self.client, self.acc, cfg, idempotence)
        self.txn: TransactionManager | None = None
        if cfg["transactional_id"] is not None:
            self.txn = TransactionManager(self.client, cfg["transactional_id"], cfg)
            self.txn.bind(self.sender, self.acc)
            self.sender.txn = self.txn
        self.closed = False
        self.started = False
        if self.interceptors:
            self._wrap_completion()

    def start(self) -> None:
        if self.closed:
            raise ClientClosedError("producer is closed")
        if not self.started:
            self.started = True
            self.client.start()
            self.sender.start()
            self.acc.loop = asyncio.get_running_loop()

    def _wrap_completion(self) -> None:
        acc = self.acc
        original = acc.complete
        interceptors = self.interceptors

        def complete(batch, base_offset, log_append_time, error):
            original(batch, base_offset, log_append_time, error)
            for fut in batch.futures or ():
                try:
                    md = fut._metadata() if error is None else None
                except Exception:
                    md = None
                for ic in interceptors:
                    fn = getattr(ic, "on_acknowledgement", None)
                    if fn is None:
                        continue
                    try:
                        fn(md, error)
                    except Exception:
                        log.exception("producer interceptor on_acknowledgement failed")

        acc.complete = complete

    # -- the fast path (any thread) --------------------------------------------------------

    def prepare(self, topic, value, key, headers, partition, timestamp_ms):
        """Interceptors and serializers; returns the pieces ``try_send`` needs."""
        self.check_can_send()
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if self.interceptors:
            rec = ProducerRecord(topic, value, key, headers, partition, timestamp_ms)
            for ic in self.interceptors:
                fn = getattr(ic, "on_send", None)
                if fn is None:
                    continue
                try:
                    rec = fn(rec) or rec
                except Exception:
                    log.exception("producer interceptor on_send failed")
            topic, value, key, headers, partition, timestamp_ms = rec
        if self.key_serializer is not None and key is not None:
            try:
                key = self.key_serializer(key)
            except Exception as exc:
                raise SerializationError(
                    f"key_serializer failed for a record to topic {topic!r}: {exc}"
                ) from exc
        if self.value_serializer is not None and value is not None:
            try:
                value = self.value_serializer(value)
            except Exception as exc:
                raise SerializationError(
                    f"value_serializer failed for a record to topic {topic!r} (key={key!r}): {exc}"
                ) from exc
        if type(key) is not bytes and key is not None:
            key = _to_bytes(key, "key", topic)
        if type(value) is not bytes and value is not None:
            value = _to_bytes(value, "value", topic)
        if headers:
            headers = _check_headers(headers, topic)
            hbytes = _encode_headers(headers)
            hsize = len(hbytes)
        else:
            hbytes = b"\x00"
            hsize = 1
        size = 20 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0) + hsize
        if size + RECORD_BATCH_OVERHEAD > self.max_request_size:
            raise RecordTooLargeError(
                f"a record to topic {topic!r} is {size + RECORD_BATCH_OVERHEAD} bytes when serialized, "
                f"larger than max_request_size ({self.max_request_size})"
            )
        if size + RECORD_BATCH_OVERHEAD > self.buffer_memory:
            raise RecordTooLargeError(
                f"a record to topic {topic!r} is {size + RECORD_BATCH_OVERHEAD} bytes when serialized, "
                f"larger than buffer_memory ({self.buffer_memory})"
            )
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        elif not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise ValueError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
        return topic, value, key, hbytes, partition, timestamp_ms, size

    def check_can_send(self) -> None:
        """Raise what stops every send: a closed producer, a failed sender, no transaction."""
        if self.closed:
            raise ClientClosedError("producer is closed")
        if self.sender.failed is not None:
            raise self.sender.failed
        if self.txn is not None:
            self.txn.check_can_send()

    def try_send(self, topic, value, key, hbytes, partition, timestamp_ms, size):
        """Choose the partition and append; raise NeedMetadata/NeedMemory to be waited for."""
        cluster = self.client.cluster
        info = cluster.topics.get(topic)
        if info is None or not info.partitions:
            raise NeedMetadata(topic)
        if partition is None:
            partition = self.partitioner(topic, key, info.ids, info.available, size)
        tp = info.tps.get(partition)
        if tp is None:
            raise ValueError(
                f"partition {partition!r} is out of range for topic {topic!r} with {len(info.partitions)} partitions"
            )
        fut, new_batch = self.acc.append(tp, timestamp_ms, key, value, hbytes, size)
        if fut is NEED_MEMORY:
            raise NeedMemory(size)
        if self.txn is not None:
            self.txn.add_partition(tp)
        return fut, new_batch

    def append_many(self, records, start: int, futures: list, refused: dict) -> bool:
        """Prepare and append ``records[start:]`` (send's positional arguments each), putting a
        future per record in ``futures``; True when a batch was created. A record that fails to
        prepare gets a failed future, as does one whose topic is in ``refused`` ({topic: error}).
        Raises NeedMetadata/NeedMemory at the first record that must wait (``futures`` then ends
        just before it: call again with ``start=len(futures)`` once it has waited)."""
        self.check_can_send()
        entries: list = []
        topics = self.client.cluster.topics
        partitioner, txn, prepare = self.partitioner, self.txn, self.prepare
        # Plain records (bytes or None, no headers, nothing to intercept or serialize) skip
        # prepare(): the same checks, inline. Records without a timestamp get the call's time.
        plain = not self.interceptors and self.key_serializer is None and self.value_serializer is None
        largest = min(self.max_request_size, self.buffer_memory) - RECORD_BATCH_OVERHEAD
        now = int(time.time() * 1000)
        info = None
        try:
            for i in range(start, len(records)):
                rec = records[i]
                if len(rec) < 6:
                    rec = (*rec, None, None, None, None, None)[:6]
                try:  # a record's own faults are its outcome; the producer's (closed, failed) the call's
                    topic, value, key, headers, partition, timestamp = rec
                    if (plain and not headers and (type(value) is bytes or value is None)
                            and (type(key) is bytes or key is None) and type(topic) is str and topic
                            and (timestamp is None or (type(timestamp) is int and timestamp >= 0))):
                        hbytes = b"\x00"
                        size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                        if size > largest:
                            prepare(*rec)  # raises RecordTooLargeError with its message
                        if timestamp is None:
                            timestamp = now
                    else:
                        topic, value, key, hbytes, partition, timestamp, size = prepare(*rec)
                    error = refused.get(topic)
                    if error is None:
                        if info is None or info.name != topic:
                            info = topics.get(topic)
                            if info is None or not info.partitions:
                                raise NeedMetadata(topic)
                        if partition is None:
                            partition = partitioner(topic, key, info.ids, info.available, size)
                        tp = info.tps.get(partition)
                        if tp is None:
                            raise ValueError(f"partition {partition!r} is out of range for topic {topic!r} "
                                             f"with {len(info.partitions)} partitions")
                except (SerializationError, RecordTooLargeError, ValueError) as exc:
                    error = exc
                if error is not None:
                    entries.append(failed_future(_topic_partition(rec), error))
                    continue
                entries.append((tp, timestamp, key, value, hbytes, size))
        finally:
            created = self._append_entries(entries, futures, txn)
        return created

    def _append_entries(self, entries: list, futures: list, txn) -> bool:
        """Append prepared records (tuples) and pass failed futures through, in order."""
        created = False
        run: list = []
        for entry in [*entries, None]:
            if entry is not None and type(entry) is tuple:
                run.append(entry)
                continue
            if run:
                appended, made = self.acc.append_many(run)
                created |= made
                futures.extend(appended)
                if txn is not None:
                    for tp in {e[0] for e in run[: len(appended)]}:
                        txn.add_partition(tp)
                if len(appended) < len(run):
                    raise NeedMemory(run[len(appended)][5])
                run = []
            if entry is not None:
                futures.append(entry)
        return created

    def need_txn(self) -> TransactionManager:
        if self.closed:
            raise ClientClosedError("producer is closed")
        if self.txn is None:
            from odradek.client.client_errors import IllegalStateError

            raise IllegalStateError("transactions need a producer with transactional_id set")
        return self.txn

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("producer is closed")


class Producer:
    """The asyncio producer. Options are Kafka's config names (see ``odradek.client.client_config``).

    ``send`` is a coroutine returning a future of ``RecordMetadata`` (``await`` it), or use
    ``send_and_wait``. Use ``async with Producer(...) as p:`` or ``start()``/``close()``.
    """

    def __init__(self, config: dict | None = None, **options):
        self._core = ProducerCore(config, options)

    @property
    def config(self) -> dict:
        return self._core.config

    async def start(self) -> None:
        self._core.start()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        """Queue a record; returns its future (``await`` it for the RecordMetadata).

        Waits (up to ``max_block_ms``) only for the topic's metadata or for buffer memory.
        """
        core = self._core
        if not core.started:
            core.start()
        args = core.prepare(topic, value, key, headers, partition, timestamp_ms)
        try:
            fut, new_batch = core.try_send(*args)
        except (NeedMetadata, NeedMemory):
            fut, new_batch = await self._send_slow(args)
        if new_batch:
            core.sender.wakeup()
            await asyncio.sleep(0)  # let the sender run between batches
        return fut

    async def _send_slow(self, args):
        core = self._core
        loop = asyncio.get_running_loop()
        deadline = loop.time() + core.max_block
        while True:
            try:
                return core.try_send(*args)
            except NeedMetadata as need:
                remaining = deadline - loop.time()
                await core.client.wait_for_topic(need.topic, max(remaining, 0))
            except NeedMemory as need:
                core.sender.wakeup()
                await core.acc.await_memory(need.size + RECORD_BATCH_OVERHEAD, max(deadline - loop.time(), 0))
                core.check_open()

    async def send_and_wait(
        self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None
    ):
        fut = await self.send(topic, value, key, headers, partition, timestamp_ms)
        return await fut

    async def send_many(self, records, per_record: bool = True) -> list[FutureRecordMetadata]:
        """Queue many records in one call; each item is send's arguments in order,
        ``(topic, value[, key[, headers[, partition[, timestamp_ms]]]])``.

        Cheaper than a ``send`` per record: one coroutine, one lock for the appends, one wakeup
        of the sender. Returns the futures in order: one per record, or with
        ``per_record=False`` one per produce batch the records went into (awaiting each once
        covers them all; ``future.batch`` is shared by the records of a batch). A record refused
        before it reaches a batch (too large, not serializable, a bad partition, its topic's
        metadata missing after ``max_block_ms``) does not stop the others: it gets a failed
        future of its own in both modes. ``max_block_ms`` bounds the whole call's waits.
        """
        core = self._core
        if not core.started:
            core.start()
        records = records if isinstance(records, list) else list(records)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + core.max_block
        futures: list[FutureRecordMetadata] = []
        refused: dict[str, BaseException] = {}
        created = False
        while len(futures) < len(records):
            try:
                created |= core.append_many(records, len(futures), futures, refused)
            except NeedMetadata as need:
                try:
                    await core.client.wait_for_topic(need.topic, max(deadline - loop.time(), 0))
                except ClientClosedError:
                    raise
                except Exception as exc:  # noqa: BLE001 - the outcome of this topic's records
                    refused[need.topic] = exc
            except NeedMemory as need:
                core.sender.wakeup()
                try:
                    await core.acc.await_memory(need.size + RECORD_BATCH_OVERHEAD, max(deadline - loop.time(), 0))
                except KafkaTimeoutError as exc:
                    futures.append(failed_future(_topic_partition(records[len(futures)]), exc))
                core.check_open()
        if created:
            core.sender.wakeup()
            await asyncio.sleep(0)  # let the sender run
        if per_record:
            return futures
        return _one_per_batch(futures)

    async def flush(self, timeout: float | None = None) -> None:
        core = self._core
        core.check_open()
        if not core.started:
            return
        await _flush(core, timeout)

    # -- transactions ----------------------------------------------------------------------

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and epoch, fencing older producers of the
        same id (and aborting a transaction they left open). Call once, before any send."""
        txn = self._core.need_txn()
        self._core.start()
        await txn.init(timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: sends from now on belong to it."""
        self._core.need_txn().begin()

    async def send_offsets_to_transaction(self, offsets: dict, group, timeout: float | None = None) -> None:
        """Commit ``offsets`` ({TopicPartition: offset or OffsetAndMetadata}, the *next* offsets
        to consume) for a consumer group as part of the transaction: they count only if it
        commits. ``group`` is the consumer (its group id, generation and member id are
        checked), its group id, or a ``ConsumerGroupMetadata``."""
        await self._core.need_txn().send_offsets(offsets, group, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it. On TransactionAbortableError
        call ``abort_transaction``; on ProducerFencedError close the producer."""
        core = self._core
        await core.need_txn().commit(lambda t: _flush(core, t), timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop unsent records of the transaction and abort it; its sent records are never
        seen by read_committed consumers."""
        await self._core.need_txn().abort(timeout)

    async def partitions_for(self, topic: str, fail_if_missing: bool = False) -> set[int]:
        """The topic's partitions, waiting up to max_block_ms for them (the broker may be
        creating it). ``fail_if_missing``: raise UnknownTopicOrPartitionError at once when the
        broker has no such topic and does not create it for this request."""
        core = self._core
        core.check_open()
        core.start()
        cluster = await core.client.wait_for_topic(topic, core.max_block, fail_if_missing)
        return set(cluster.partitions_for(topic) or ())

    async def close(self, timeout: float | None = None) -> None:
        await _close(self._core, timeout)

    @property
    def closed(self) -> bool:
        return self._core.closed


def _topic_partition(rec) -> TopicPartition:
    """Where a refused record was going, for its failed future."""
    partition = rec[4] if len(rec) > 4 and isinstance(rec[4], int) else -1
    return TopicPartition(str(rec[0]), partition)


def _one_per_batch(futures: list[FutureRecordMetadata]) -> list[FutureRecordMetadata]:
    """The first future of each batch (records to several partitions interleave their batches)."""
    out, seen = [], set()
    for fut in futures:
        batch = fut.batch
        if batch not in seen:
            seen.add(batch)
            out.append(fut)
    return out


async def _flush(core: ProducerCore, timeout: float | None) -> None:
    core.acc.begin_flush()
    try:
        core.sender.wakeup()
        pending = core.acc.pending_results()
        if not pending:
            return
        waiters = [r.async_future() for r in pending]
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waiters)
        except TimeoutError:
            left = sum(1 for r in pending if not r.done)
            raise KafkaTimeoutError(
                f"flush timed out after {timeout}s with {left} batch(es) unsent"
            ) from None
    finally:
        core.acc.end_flush()


async def _close(core: ProducerCore, timeout: float | None) -> None:
    if core.closed:
        return
    core.closed = True
    if core.started:
        if core.txn is not None:
            await core.txn.shutdown(timeout)
        await core.sender.close(timeout)
        await core.client.close()
    for ic in core.interceptors or ():
        fn = getattr(ic, "close", None)
        if fn is not None:
            try:
                fn()
            except Exception:
                log.exception("producer interceptor close failed")


__all__ = ["Producer", "ProducerCore", "ProducerRecord", "RecordMetadata"]
