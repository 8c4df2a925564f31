"""The producer's RecordAccumulator: per-partition queues of batches being filled.

A data structure, no tasks (the sender drives it). It is thread-safe: the blocking
producer appends from the caller's thread while the sender drains on the event loop, so
every method takes ``_lock``. Records are encoded into the batch's buffer as they are
appended (the v2 record layout, varints from a table); when the sender drains a batch it
is compressed and gets its 61-byte header and CRC, once (``ProducerBatch.build``).

Memory is bounded by ``buffer_memory``: a new batch reserves ``max(batch_size, record)``
bytes from the pool and gives them back when its fate is known. ``append`` reports
``NEED_MEMORY`` when the pool is exhausted; the caller waits (``wait_for_memory`` on a
thread, ``await_memory`` on the loop) up to ``max_block_ms``.

Each record gets a ``FutureRecordMetadata``: a small view onto its batch's
``BatchResult`` (one per batch), usable from threads (``result(timeout)``) and from
asyncio (``await``). ``result()`` on the thread of the event loop that delivers the
record could only time out, so it raises ``IllegalStateError`` at once there.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections import deque

import crc32c

from odradek.client.client_errors import IllegalStateError, KafkaTimeoutError
from odradek.client.structs import RecordMetadata, TopicPartition
from odradek.protocol import batch as batch_header
from odradek.protocol.compression import compress
from odradek.protocol.varint import TABLE, TABLE_SIZE, encode_raw

NEED_MEMORY = object()
RECORD_BATCH_OVERHEAD = batch_header.HEADER_SIZE

_SMALL_VARINTS = tuple(TABLE[2 * n] for n in range(len(TABLE) // 2))  # the zigzag varints of 0..8191
_SMALL_VARINTS_LEN = len(_SMALL_VARINTS)
_HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. record count (offset 21..61)
_HEADER_HEAD = struct.Struct(">qiib")  # base offset, length, leader epoch, magic
_UINT32 = struct.Struct(">I")
_callback_lock = threading.Lock()


def _varint(n: int) -> bytes:
    """The zigzag varint of ``n`` (a record field: lengths, counts, deltas)."""
    z = (n << 1) ^ (n >> 63)
    return TABLE[z] if z < TABLE_SIZE else encode_raw(z)


def _encode_headers(headers) -> bytes:
    parts = [_varint(len(headers))]
    for key, value in headers:
        kb = key.encode() if isinstance(key, str) else bytes(key)
        parts.append(_varint(len(kb)))
        parts.append(kb)
        if value is None:
            parts.append(b"\x01")
        else:
            if isinstance(value, str):
                value = value.encode()
            parts.append(_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def estimate_record_size(key, value, headers) -> int:
    size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    if headers:
        for k, v in headers:
            size += len(k) + (len(v) if v is not None else 0) + 10
    return size


class BatchResult:
    """The fate of one batch, shared by the futures of its records."""

    __slots__ = ("tp", "base_offset", "log_append_time", "error", "done", "_event", "_callbacks", "_afut", "loop")

    def __init__(self, tp: TopicPartition, loop: asyncio.AbstractEventLoop | None = None):
        self.tp = tp
        self.loop = loop  # the event loop whose sender completes this batch
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self._event = threading.Event()
        self._callbacks = None
        self._afut: asyncio.Future | None = None

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with _callback_lock:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            callbacks, self._callbacks = self._callbacks, None
        self._event.set()
        if self._afut is not None and not self._afut.done():
            self._afut.set_result(None)
        if callbacks:
            for fn, fut in callbacks:
                try:
                    fn(fut)
                except Exception:  # a user's callback must not break the sender
                    import logging

                    logging.getLogger("odradek.client.producer").exception("producer callback failed")

    def add_callback(self, fn, fut) -> None:
        with _callback_lock:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((fn, fut))
                return
        fn(fut)

    def wait(self, timeout: float | None) -> bool:
        if timeout != 0 and self.loop is not None and _running_loop() is self.loop:
            raise IllegalStateError(
                f"result() was called on the event loop that delivers this record to {self.tp.topic}-"
                f"{self.tp.partition} (in a coroutine of odradek.aio.Producer, or in a delivery callback), "
                "so it could only block the loop and time out: await the future instead, "
                "`md = await (await producer.send(...))`, or `md = await producer.send_and_wait(...)`"
            )
        return self._event.wait(timeout)

    def async_future(self) -> asyncio.Future:
        if self._afut is None:
            self._afut = asyncio.get_running_loop().create_future()
            if self.done:
                self._afut.set_result(None)
        return self._afut


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class FutureRecordMetadata:
    """The future of one sent record: ``result(timeout)`` from threads, ``await`` in asyncio."""

    __slots__ = ("_result", "_delta", "_timestamp", "_key_size", "_value_size")

    def __init__(self, result: BatchResult, delta: int, timestamp: int, key_size: int, value_size: int):
        self._result = result
        self._delta = delta
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def _metadata(self) -> RecordMetadata:
        r = self._result
        if r.error is not None:
            raise r.error
        offset = r.base_offset + self._delta if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(r.tp.topic, r.tp.partition, offset, ts, self._key_size, self._value_size)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        r = self._result
        if not r.done and not r.wait(timeout):
            raise TimeoutError(f"record to {r.tp.topic}-{r.tp.partition} not acknowledged within {timeout}s")
        return self._metadata()

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        r = self._result
        if not r.done and not r.wait(timeout):
            raise TimeoutError(f"record to {r.tp.topic}-{r.tp.partition} not acknowledged within {timeout}s")
        return r.error

    def done(self) -> bool:
        return self._result.done

    def succeeded(self) -> bool:
        return self._result.done and self._result.error is None

    def failed(self) -> bool:
        return self._result.done and self._result.error is not None

    def cancelled(self) -> bool:
        return False

    @property
    def batch(self) -> BatchResult:
        """The outcome shared by every record of the same produce batch: one wait covers them all."""
        return self._result

    def add_done_callback(self, fn) -> None:
        """Call ``fn(future)`` when the record is acknowledged or failed (on the I/O thread)."""
        self._result.add_callback(fn, self)

    def __await__(self):
        r = self._result
        if not r.done:
            yield from r.async_future().__await__()
        return self._metadata()

    def __repr__(self) -> str:
        state = "pending" if not self._result.done else ("error" if self._result.error else "done")
        return f"<FutureRecordMetadata {self._result.tp.topic}-{self._result.tp.partition} {state}>"


def failed_future(tp: TopicPartition, error: BaseException) -> FutureRecordMetadata:
    """The future of a record refused before it reached a batch (``Producer.send_many``)."""
    result = BatchResult(tp)
    result.complete(-1, -1, error)
    return FutureRecordMetadata(result, 0, -1, -1, -1)


class ProducerBatch:
    __slots__ = (
        "tp",
        "buf",
        "count",
        "base_ts",
        "max_ts",
        "created",
        "result",
        "futures",
        "reserved",
        "limit",
        "closed",
        "attempts",
        "retry_at",
        "base_sequence",
        "producer_id",
        "producer_epoch",
        "payload",
        "drained_at",
    )

    def __init__(
        self, tp: TopicPartition, base_ts: int, created: float, reserved: int, limit: int, loop=None
    ):
        self.tp = tp
        self.buf = bytearray()
        self.count = 0
        self.base_ts = base_ts
        self.max_ts = base_ts
        self.created = created
        self.result = BatchResult(tp, loop)
        self.futures = None  # per-record futures, kept only when interceptors need them
        self.reserved = reserved
        self.limit = limit  # batch_size: appends stop once the batch would pass it
        self.closed = False
        self.attempts = 0
        self.retry_at = 0.0
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.payload: list | None = None  # [header, records] once built
        self.drained_at = 0.0

    @property
    def size(self) -> int:
        return RECORD_BATCH_OVERHEAD + len(self.buf)

    def is_full(self) -> bool:
        return self.closed or RECORD_BATCH_OVERHEAD + len(self.buf) >= self.limit

    def try_append(self, timestamp, key, value, headers_bytes, size_hint, keep_future):
        """Encode one record into the batch; None when it does not fit."""
        buf = self.buf
        count = self.count
        if count and RECORD_BATCH_OVERHEAD + len(buf) + size_hint > self.limit:
            return None
        d = timestamp - self.base_ts
        if 0 <= d < _SMALL_VARINTS_LEN:
            tsb = _SMALL_VARINTS[d]
        else:
            tsb = _varint(d)
        if key is None:
            kl = -1
            kpart = b"\x01"
            key = b""
        else:
            kl = len(key)
            kpart = _SMALL_VARINTS[kl] if kl < _SMALL_VARINTS_LEN else _varint(kl)
        if value is None:
            vl = -1
            vpart = b"\x01"
            value = b""
        else:
            vl = len(value)
            vpart = _SMALL_VARINTS[vl] if vl < _SMALL_VARINTS_LEN else _varint(vl)
        body = b"".join(
            (
                b"\x00",
                tsb,
                _SMALL_VARINTS[count] if count < _SMALL_VARINTS_LEN else _varint(count),
                kpart,
                key,
                vpart,
                value,
                headers_bytes,
            )
        )
        n = len(body)
        buf += _SMALL_VARINTS[n] if n < _SMALL_VARINTS_LEN else _varint(n)
        buf += body
        self.count = count + 1
        if timestamp > self.max_ts:
            self.max_ts = timestamp
        fut = FutureRecordMetadata(self.result, count, timestamp, kl, vl)
        if keep_future:
            if self.futures is None:
                self.futures = []
            self.futures.append(fut)
        return fut

    def append_run(self, records: list, i: int, out: list, keep_future: bool) -> int:
        """``try_append`` for ``records[i:]`` (``(tp, timestamp, key, value, headers_bytes,
        size_hint)`` each) while they are for this batch's partition and fit; their futures go
        to ``out``. Returns the index of the first record not appended. One loop with the
        batch's state in locals: the per-record call and attribute traffic of ``try_append``
        is most of its cost for small records."""
        buf, count, tp, result, base_ts, max_ts = self.buf, self.count, self.tp, self.result, self.base_ts, self.max_ts
        room = self.limit - RECORD_BATCH_OVERHEAD
        small, n_small, varint, join = _SMALL_VARINTS, _SMALL_VARINTS_LEN, _varint, b"".join
        first = count
        n = len(records)
        while i < n:
            rec_tp, timestamp, key, value, headers_bytes, size_hint = records[i]
            if rec_tp is not tp or (count and len(buf) + size_hint > room):
                break
            d = timestamp - base_ts
            if key is None:
                kl, kpart, key = -1, b"\x01", b""
            else:
                kl = len(key)
                kpart = small[kl] if kl < n_small else varint(kl)
            if value is None:
                vl, vpart, value = -1, b"\x01", b""
            else:
                vl = len(value)
                vpart = small[vl] if vl < n_small else varint(vl)
            body = join((b"\x00", small[d] if 0 <= d < n_small else varint(d),
                         small[count] if count < n_small else varint(count), kpart, key, vpart, value, headers_bytes))
            size = len(body)
            buf += small[size] if size < n_small else varint(size)
            buf += body
            if timestamp > max_ts:
                max_ts = timestamp
            out.append(FutureRecordMetadata(result, count, timestamp, kl, vl))
            count += 1
            i += 1
        self.count, self.max_ts = count, max_ts
        if keep_future and count > first:
            if self.futures is None:
                self.futures = []
            self.futures.extend(out[first - count:])
        return i

    def build(
        self,
        codec: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        transactional: bool = False,
    ) -> None:
        """Make the batch's wire form: ``payload`` = [61-byte header, records] (compressed, CRC'd).

        The records buffer is not copied: the batch is closed, so it no longer changes.
        """
        if codec:
            records = compress(codec, bytes(self.buf))
        else:
            records = self.buf
        attributes = codec | batch_header.TRANSACTIONAL_BIT if transactional else codec
        tail = _HEADER_TAIL.pack(
            attributes,
            self.count - 1,
            self.base_ts,
            self.max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            self.count,
        )
        crc = crc32c.crc32c(records, crc32c.crc32c(tail))
        length = 49 + len(records)  # bytes after the length field: 4 epoch + 1 magic + 4 crc + 40 tail
        self.payload = [_HEADER_HEAD.pack(0, length, -1, 2) + _UINT32.pack(crc) + tail, records]
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def wire_bytes(self) -> bytes:
        """The built batch as one bytes object (tests, tools)."""
        return b"".join(self.payload)


class BufferPool:
    """Counts bytes reserved by batches against ``buffer_memory``."""

    def __init__(self, total: int, lock: threading.Lock):
        self.total = total
        self.available = total
        self._cond = threading.Condition(lock)
        self._async_waiters: list[asyncio.Future] = []
        self.waiters = 0

    def release(self, n: int) -> None:
        """Called with the accumulator lock held."""
        self.available += n
        self._cond.notify_all()
        if self._async_waiters:
            waiters, self._async_waiters = self._async_waiters, []
            for w in waiters:
                if not w.done():
                    w.get_loop().call_soon_threadsafe(_set_if_pending, w)


def _set_if_pending(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int, codec: int, keep_futures: bool):
        self.batch_size = max(batch_size, 1)
        self.linger = linger_ms / 1000
        self.codec = codec
        self.keep_futures = keep_futures
        self._lock = threading.Lock()
        self.pool = BufferPool(buffer_memory, self._lock)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.incomplete: set[BatchResult] = set()
        self._flushes = 0
        self.closed = False
        self.muted: set[TopicPartition] = set()
        self.loop: asyncio.AbstractEventLoop | None = None  # the sender's, set when it starts

    # -- appending (any thread) ------------------------------------------------------------

    def append(self, tp: TopicPartition, timestamp: int, key, value, headers_bytes: bytes, size_hint: int):
        """Append a record; return ``(future, new_batch_created)`` or ``(NEED_MEMORY, False)``."""
        with self._lock:
            dq = self._batches.get(tp)
            if dq:
                last = dq[-1]
                if not last.closed:
                    fut = last.try_append(timestamp, key, value, headers_bytes, size_hint, self.keep_futures)
                    if fut is not None:
                        return fut, False
                    last.closed = True
            fut = self._append_to_new_batch(tp, dq, timestamp, key, value, headers_bytes, size_hint)
            return (NEED_MEMORY, False) if fut is None else (fut, True)

    def append_many(self, records: list) -> tuple[list[FutureRecordMetadata], bool]:
        """Append ``(tp, timestamp, key, value, headers_bytes, size_hint)`` records in order, under
        one lock. Returns a future per record appended and whether a batch was created; fewer
        futures than records when buffer memory ran out (the caller waits, then appends the rest).
        """
        out: list[FutureRecordMetadata] = []
        created = False
        keep = self.keep_futures
        batches = self._batches
        i, n = 0, len(records)
        with self._lock:
            while i < n:
                tp, timestamp, key, value, headers_bytes, size_hint = records[i]
                dq = batches.get(tp)
                if dq:
                    last = dq[-1]
                    if not last.closed:
                        reached = last.append_run(records, i, out, keep)
                        if reached > i:
                            i = reached
                            continue
                        last.closed = True
                fut = self._append_to_new_batch(tp, dq, timestamp, key, value, headers_bytes, size_hint)
                if fut is None:
                    break
                out.append(fut)
                created = True
                i += 1
        return out, created

    def _append_to_new_batch(self, tp, dq, timestamp, key, value, headers_bytes, size_hint):
        """A new batch for ``tp`` holding the record (lock held); None when memory is short."""
        need = max(self.batch_size, size_hint + RECORD_BATCH_OVERHEAD)
        pool = self.pool
        if pool.available < need:
            return None
        pool.available -= need
        batch = ProducerBatch(tp, timestamp, time.monotonic(), need, self.batch_size, self.loop)
        fut = batch.try_append(timestamp, key, value, headers_bytes, size_hint, self.keep_futures)
        if dq is None:
            dq = self._batches[tp] = deque()
        dq.append(batch)
        self.incomplete.add(batch.result)
        return fut

    def wait_for_memory(self, need: int, timeout: float) -> bool:
        """Block the calling thread until ``need`` bytes may be free (False on timeout)."""
        with self._lock:
            pool = self.pool
            deadline = time.monotonic() + timeout
            pool.waiters += 1
            try:
                while pool.available < need and not self.closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    pool._cond.wait(remaining)
                return True
            finally:
                pool.waiters -= 1

    async def await_memory(self, need: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._lock:
                if self.pool.available >= need or self.closed:
                    return
                fut = loop.create_future()
                self.pool._async_waiters.append(fut)
                self.pool.waiters += 1
            try:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"failed to allocate memory within max_block_ms ({timeout * 1000:.0f} ms)"
                    )
                try:
                    async with asyncio.timeout(remaining):
                        await fut
                except TimeoutError:
                    raise KafkaTimeoutError(
                        f"failed to allocate memory within max_block_ms ({timeout * 1000:.0f} ms)"
                    ) from None
            finally:
                with self._lock:
                    self.pool.waiters -= 1

    # -- the sender's side (event loop) ----------------------------------------------------

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def ready(self, cluster, now: float):
        """``(nodes with something to send, seconds until the next check, topics without leader)``."""
        nodes = set()
        unknown = set()
        next_check = self.linger if self.linger > 0 else 1.0
        with self._lock:
            urgent = self._flushes > 0 or self.closed or self.pool.waiters > 0
            leaders = cluster.leaders
            for tp, dq in self._batches.items():
                if not dq or tp in self.muted:
                    continue
                leader = leaders.get(tp, -1)
                if leader < 0:
                    unknown.add(tp.topic)
                    continue
                if leader in nodes:
                    continue
                batch = dq[0]
                if batch.retry_at > now:
                    next_check = min(next_check, batch.retry_at - now)
                    continue
                waited = now - batch.created
                if urgent or len(dq) > 1 or batch.closed or batch.is_full() or waited >= self.linger:
                    nodes.add(leader)
                else:
                    next_check = min(next_check, self.linger - waited)
        return nodes, max(next_check, 0.0), unknown

    def drain(self, cluster, node: int, max_size: int, now: float, take) -> list[ProducerBatch]:
        """Take at most one ready batch per partition led by ``node``, up to ``max_size`` bytes.

        ``take(batch)`` decides whether a partition's head batch may go now (sequencing).
        """
        out = []
        size = 0
        with self._lock:
            leaders = cluster.leaders
            for tp, dq in self._batches.items():
                if not dq or tp in self.muted or leaders.get(tp, -1) != node:
                    continue
                batch = dq[0]
                if batch.retry_at > now:
                    continue
                if out and size + batch.size > max_size:
                    break
                if not take(batch):
                    continue
                dq.popleft()
                batch.closed = True
                batch.drained_at = now
                size += batch.size
                out.append(batch)
        return out

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a batch back at the head of its queue, keeping sequence order."""
        batch.retry_at = retry_at
        with self._lock:
            dq = self._batches.setdefault(batch.tp, deque())
            if batch.base_sequence >= 0:
                i = 0
                while i < len(dq) and 0 <= dq[i].base_sequence < batch.base_sequence:
                    i += 1
                dq.insert(i, batch)
            else:
                dq.appendleft(batch)

    def expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        out = []
        with self._lock:
            for dq in self._batches.values():
                while dq and now - dq[0].created >= delivery_timeout:
                    out.append(dq.popleft())
        return out

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int, error) -> None:
        batch.payload = None
        with self._lock:
            self.pool.release(batch.reserved)
            batch.reserved = 0
            self.incomplete.discard(batch.result)
        batch.result.complete(base_offset, log_append_time, error)

    def abort_all(self, error: BaseException) -> list[ProducerBatch]:
        with self._lock:
            batches = [b for dq in self._batches.values() for b in dq]
            self._batches.clear()
        for b in batches:
            self.complete(b, -1, -1, error)
        return batches

    def pending_results(self) -> list[BatchResult]:
        with self._lock:
            return list(self.incomplete)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.pool._cond.notify_all()
