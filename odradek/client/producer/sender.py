"""The producer's sender: one task that drains the accumulator into Produce requests.

Each round it asks the accumulator which leaders have sendable batches (full, lingered
long enough, or flushing), drains at most one batch per partition per request up to
``max_request_size``, and writes the request on the leader's connection while fewer than
``max_in_flight_requests_per_connection`` are outstanding. Responses complete batches,
or put them back (retriable errors, with backoff, refreshing metadata when the error says
the leader moved) until ``retries`` or ``delivery_timeout_ms`` run out.

Idempotence: the sender gets a producer id and epoch (InitProducerId) before sending
anything, and numbers each partition's batches with sequences when they are first
drained. A batch keeps its sequence on retry; while a partition has a batch being
retried ("recovering"), it sends that partition's batches one at a time in sequence
order, so the broker sees them in order again. If a sequenced batch fails for good, the
producer takes a new producer id once nothing is in flight and renumbers what is left.
Without idempotence and with ``max_in_flight_requests_per_connection=1`` a partition is
muted while it has a batch in flight, which keeps order under retries.

Transactions (``txn``, a ``transactions.TransactionManager``): the producer id comes from
``init_transactions``, not from the sender; a partition's batches wait until the partition
was added to the transaction; batches are marked transactional; a batch that fails for
good makes the transaction abortable instead of taking a new producer id.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from functools import partial

from odradek.client.client_errors import KafkaTimeoutError, UnsupportedVersionError
from odradek.client.netclient import Backoff, NetClient
from odradek.client.producer.accumulator import ProducerBatch, RecordAccumulator
from odradek.client.structs import TopicPartition
from odradek.protocol import api_keys
from odradek.protocol.errors import ErrorCode, error_for
from odradek.protocol.hot_requests import produce_request

log = logging.getLogger("odradek.client.producer")

_DUPLICATE_SEQUENCE = int(ErrorCode.duplicate_sequence_number)
_OUT_OF_ORDER = int(ErrorCode.out_of_order_sequence_number)
_UNKNOWN_PRODUCER = int(ErrorCode.unknown_producer_id)
_FATAL = {
    int(ErrorCode.invalid_producer_epoch),
    int(ErrorCode.producer_fenced),
    int(ErrorCode.cluster_authorization_failed),
    int(ErrorCode.transactional_id_authorization_failed),
}


def _ms(dt) -> int:
    if dt is None:
        return -1
    if isinstance(dt, datetime.datetime):
        return int(dt.timestamp() * 1000)
    return int(dt)


class Sender:
    def __init__(self, client: NetClient, acc: RecordAccumulator, config: dict, idempotence: str):
        self.client = client
        self.acc = acc
        self.acks = config["acks"]
        self.retries = config["retries"]
        self.backoff = config["retry_backoff_ms"] / 1000
        self.delivery_timeout = config["delivery_timeout_ms"] / 1000
        self.request_timeout_ms = config["request_timeout_ms"]
        self.max_request_size = config["max_request_size"]
        self.max_in_flight = config["max_in_flight_requests_per_connection"]
        # "on": required (fail if unsupported); "auto": use if the broker supports it; "off"
        self.idempotence = idempotence
        self.idempotent = idempotence != "off"
        self.guarantee_order = self.max_in_flight == 1
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq: dict[TopicPartition, int] = {}
        self._inflight: dict[TopicPartition, int] = {}
        self._inflight_batches: set[ProducerBatch] = set()
        self._recovering: set[TopicPartition] = set()
        self._need_new_pid = False
        self._fatal: BaseException | None = None
        self._task: asyncio.Task | None = None
        self._pid_task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._metadata_requested_at = 0.0
        self._next_expiry_check = 0.0
        self.txn = None  # the TransactionManager of a transactional producer
        self._txn_held = False  # a round held back batches of partitions not yet in the transaction

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.client.add_connection_listener(lambda node: self.wakeup())
        self._task = self._loop.create_task(self._run(), name=f"{self.client.client_id}-sender")

    def wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def wakeup_threadsafe(self) -> None:
        loop = self._loop
        if loop is not None and self._wake is not None and not self._wake.is_set():
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # loop closed
                pass

    async def close(self, timeout: float | None) -> None:
        """Send what is left (up to ``timeout``), then stop; safe to call twice."""
        if self._task is None:
            return
        self._closing = True
        self.acc.close()
        self.wakeup()
        try:
            if timeout is None:
                await asyncio.shield(self._task)
            else:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(self._task)
        except TimeoutError:
            pass
        finally:
            for t in (self._task, self._pid_task):
                if t is not None and not t.done():
                    t.cancel()
                    try:
                        await t
                    except BaseException:  # noqa: S110 - cancelled on purpose
                        pass
            from odradek.client.client_errors import ClientClosedError

            err = ClientClosedError("producer closed before the record was sent")
            self.acc.abort_all(err)
            for b in list(self._inflight_batches):
                self._finish(b, -1, -1, err)

    @property
    def failed(self) -> BaseException | None:
        return self._fatal

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                delay = self._run_once()
            except Exception:  # a bug here must not silently stop sending
                log.exception("producer sender round failed")
                delay = self.backoff
            if self._closing and not self._inflight_batches and not self.acc.has_undrained():
                return
            if delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)
            self._wake.clear()

    def _run_once(self) -> float:
        now = time.monotonic()
        if now >= self._next_expiry_check:  # (each check takes the accumulator's lock)
            self._next_expiry_check = now + min(0.1, self.delivery_timeout / 10)
            for batch in self.acc.expired(now, self.delivery_timeout):
                self._fail(batch, self._expiry_error(batch, now))
        if self._fatal is not None:
            self.acc.abort_all(self._fatal)
            return 1.0
        txn = self.txn
        if txn is not None and self.producer_id < 0:
            return 1.0  # init_transactions() gives the producer id
        self._txn_held = False
        if txn is None and self.idempotent and (self.producer_id < 0 or self._need_new_pid):
            if self._need_new_pid and self._inflight_batches:
                return 0.05
            self._start_pid_init()
            return 0.1 if self.acc.has_undrained() else 1.0
        cluster = self.client.cluster
        nodes, delay, unknown = self.acc.ready(cluster, now)
        if unknown:
            self.client.add_topics(unknown)
            if now - self._metadata_requested_at > self.backoff:
                self._metadata_requested_at = now
                self.client.request_update()
            delay = min(delay, self.backoff)
        for node in nodes:
            conn = self.client.connection(node)
            if conn is None:
                delay = min(delay, self.backoff)
                continue
            if conn.in_flight >= self.max_in_flight:
                continue  # a response will wake us
            if not conn.writable:
                delay = min(delay, 0.005)
                continue
            batches = self.acc.drain(cluster, node, self.max_request_size, now, self._may_send)
            if batches:
                self._send(conn, batches)
        if self._txn_held:
            delay = max(delay, 0.05)  # partitions still being added wake us when they are
        return delay

    def _may_send(self, batch: ProducerBatch) -> bool:
        """Called under the accumulator lock for the head batch of a partition."""
        tp = batch.tp
        if self.txn is not None and not self.txn.may_send(tp):
            self._txn_held = True
            return False
        if self.guarantee_order and self._inflight.get(tp):
            return False
        if self.idempotent:
            if tp in self._recovering:
                if self._inflight.get(tp):
                    return False
                if batch.base_sequence < 0:
                    self._recovering.discard(tp)
            if batch.base_sequence < 0 or batch.producer_id != self.producer_id:
                seq = self._next_seq.get(tp, 0)
                batch.base_sequence = seq
                batch.producer_id = -2  # mark: needs (re)building with the new sequence
                self._next_seq[tp] = (seq + batch.count) & 0x7FFFFFFF
        return True

    def _send(self, conn, batches: list[ProducerBatch]) -> None:
        codec = self.acc.codec
        by_topic: dict[str, list] = {}
        ok = []
        for b in batches:
            try:
                if self.idempotent:
                    if b.payload is None or b.producer_id != self.producer_id:
                        b.build(
                            codec,
                            self.producer_id,
                            self.producer_epoch,
                            b.base_sequence,
                            self.txn is not None,
                        )
                elif b.payload is None:
                    b.build(codec, -1, -1, -1)
            except Exception as exc:
                log.exception("building a batch for %s failed", b.tp)
                self._fail(b, exc)
                continue
            ok.append(b)
        batches = ok
        if not batches:
            return
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append((b.tp.partition, b.payload))
            self._inflight[b.tp] = self._inflight.get(b.tp, 0) + 1
            self._inflight_batches.add(b)
            b.attempts += 1
        topic_data = list(by_topic.items())
        version = conn.version(api_keys.PRODUCE)
        acks, timeout, client_id = self.acks, self.request_timeout_ms, conn.client_id
        txn_id = self.txn.transactional_id if self.txn is not None else None
        fut = conn.send_parts(
            api_keys.PRODUCE,
            version,
            lambda cid: produce_request(version, cid, client_id, acks, timeout, topic_data, txn_id),
            expect_response=acks != 0,
        )
        fut.add_done_callback(partial(self._on_response, batches))

    def _on_response(self, batches: list[ProducerBatch], fut: asyncio.Future) -> None:
        if fut.cancelled():
            exc = KafkaTimeoutError("produce request cancelled")
        else:
            exc = fut.exception()
        if exc is not None:
            for b in batches:
                self._retry_or_fail(b, exc)
        elif self.acks == 0:
            for b in batches:
                self._finish(b, -1, -1, None)
        else:
            resp = fut.result()
            found = {}
            for topic in resp.responses:
                for p in topic.partition_responses:
                    found[(topic.name, int(p.index))] = p
            for b in batches:
                p = found.get(b.tp)
                if p is None:
                    self._retry_or_fail(
                        b, error_for(ErrorCode.unknown_server_error)("no response for partition")
                    )
                    continue
                code = int(p.error_code)
                if code == 0 or code == _DUPLICATE_SEQUENCE:
                    self._finish(b, int(p.base_offset), _ms(getattr(p, "log_append_time", None)), None)
                else:
                    msg = getattr(p, "error_message", None) or ""
                    err = error_for(code)(
                        f"{msg or error_for(code).code.name} ({b.tp.topic}-{b.tp.partition})"
                    )
                    self._retry_or_fail(b, err)
        self.wakeup()

    def _done_in_flight(self, batch: ProducerBatch) -> None:
        if batch in self._inflight_batches:
            self._inflight_batches.discard(batch)
            n = self._inflight.get(batch.tp, 1) - 1
            if n:
                self._inflight[batch.tp] = n
            else:
                self._inflight.pop(batch.tp, None)

    def _finish(self, batch: ProducerBatch, base_offset: int, log_append_time: int, error) -> None:
        self._done_in_flight(batch)
        self.acc.complete(batch, base_offset, log_append_time, error)

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException) -> None:
        self._done_in_flight(batch)
        now = time.monotonic()
        code = int(getattr(error, "code", -1)) if hasattr(error, "code") else -1
        retriable = bool(getattr(error, "retriable", False))
        if self.idempotent and code in (_OUT_OF_ORDER, _UNKNOWN_PRODUCER) and batch.tp in self._recovering:
            retriable = True  # an earlier batch of this partition is being retried
        elif self.idempotent and code == _UNKNOWN_PRODUCER and self.txn is None:
            # The broker lost our producer state (a restart, retention): start over with a
            # new producer id once nothing is in flight; this batch gets a new sequence.
            self._need_new_pid = True
            retriable = True
        if code in _FATAL:
            self._fatal = error
            retriable = False
        if (
            retriable
            and not self._closing_forced()
            and batch.attempts <= self.retries
            and now - batch.created + self.backoff < self.delivery_timeout
        ):
            if getattr(error, "invalid_metadata", False):
                self.client.request_update()
            if self.idempotent:
                self._recovering.add(batch.tp)
            log.debug("retrying batch to %s after %s (attempt %d)", batch.tp, error, batch.attempts)
            self.acc.reenqueue(batch, now + self.backoff)
            return
        if now - batch.created >= self.delivery_timeout and retriable:
            error = self._expiry_error(batch, now, error)
        self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.idempotent and batch.base_sequence >= 0:
            # The broker now expects a sequence that will never come: start over with a new id
            # (a transactional producer bumps its epoch when it aborts).
            self._need_new_pid = True
        self.acc.complete(batch, -1, -1, error)
        if self.txn is not None:
            self.txn.on_batch_failed(error, batch.base_sequence >= 0)

    def _closing_forced(self) -> bool:
        return False

    def _expiry_error(self, batch: ProducerBatch, now: float, cause=None) -> KafkaTimeoutError:
        err = KafkaTimeoutError(
            f"expiring {batch.count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
            f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation "
            f"(delivery_timeout_ms={self.delivery_timeout * 1000:.0f})"
            + (f"; last error: {cause}" if cause is not None else "")
        )
        return err

    # -- producer id -----------------------------------------------------------------------

    def _start_pid_init(self) -> None:
        if self._pid_task is None or self._pid_task.done():
            self._pid_task = self._loop.create_task(
                self._init_producer_id(), name=f"{self.client.client_id}-pid"
            )

    async def _init_producer_id(self) -> None:
        backoff = Backoff(int(self.backoff * 1000), 1000)
        while not self._closing or self.acc.has_undrained():
            try:
                conn = await self.client.any_connection()
                if not conn.supports(api_keys.INIT_PRODUCER_ID):
                    if self.idempotence == "on":
                        self._fatal = UnsupportedVersionError(
                            "enable_idempotence=True but the broker does not support InitProducerId"
                        )
                    else:
                        log.info("broker does not support idempotence; using max_in_flight=1 to keep order")
                        self.idempotent = False
                        self.guarantee_order = True
                    break
                resp = await conn.send(
                    api_keys.INIT_PRODUCER_ID,
                    {
                        "transactional_id": None,
                        "transaction_timeout": 60000,
                        "producer_id": -1,
                        "producer_epoch": -1,
                    },
                )
                if resp.error_code:
                    err = error_for(resp.error_code)("InitProducerId failed")
                    if not err.retriable:
                        self._fatal = err
                        break
                    raise err
                self.producer_id = int(resp.producer_id)
                self.producer_epoch = int(resp.producer_epoch)
                if self._need_new_pid:
                    self._renumber()
                self._need_new_pid = False
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("InitProducerId failed: %s", exc)
                await asyncio.sleep(backoff.next())
        self.wakeup()

    def _renumber(self) -> None:
        """After a new producer id: sequences restart at 0 for every partition."""
        self._next_seq.clear()
        self._recovering.clear()
        with self.acc._lock:
            for dq in self.acc._batches.values():
                for b in dq:
                    b.base_sequence = -1
                    b.producer_id = -1
