"""The consumer's fetcher: one task keeping a fetch in flight to every leader with work.

Per leader at most one Fetch is outstanding (a broker answers a connection's requests in
order, so a second one would only queue behind a long poll); leaders are fetched from
independently. Fetching runs ahead of ``poll``: each partition has a *fetch position*
(where the next fetch starts: after the last complete batch received), so the next fetch
goes out as soon as the previous answer arrived, while ``poll`` is still decoding it. A
partition with ``PREFETCH`` responses already waiting is left out until ``poll`` catches
up, which bounds memory to a few fetch responses per partition; when that leaves a fetch
without work that could long-poll, it waits at most ``_SHORT_WAIT_MS``.

Responses are kept as raw bytes (``CompletedFetch``) and decoded lazily in ``poll``,
batch by batch, up to ``max_poll_records``.

Positions that are unknown are resolved first: the committed offset (through the group
coordinator) or ``auto_offset_reset`` via ListOffsets. ``read_committed`` drops records
of aborted transactions using the response's aborted-transaction list, as Kafka does.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import logging

from odradek.client.client_errors import (
    CorruptRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeClientError,
    SerializationError,
)
from odradek.client.consumer.subscription import SubscriptionState
from odradek.client.netclient import NetClient
from odradek.client.structs import ConsumerRecord, TopicPartition, record_class
from odradek.protocol import api_keys
from odradek.protocol import batch as batch_header
from odradek.protocol.control_records import ABORT
from odradek.protocol.errors import ErrorCode, KafkaError, error_for
from odradek.protocol.record_batch import RecordBatch, iter_batches

log = logging.getLogger("odradek.client.consumer")

EARLIEST = -2
LATEST = -1
PREFETCH = 2  # undelivered fetch responses per partition before it is left out of fetches
_SHORT_WAIT_MS = 20
_OUT_OF_RANGE = int(ErrorCode.offset_out_of_range)


def next_fetch_offset(data, fetch_offset: int) -> int:
    """The offset after the last complete batch in ``data`` (``fetch_offset`` if none)."""
    nxt = fetch_offset
    for _pos, header in batch_header.iter_headers(data):
        if header is not None:
            if header.next_offset > nxt:
                nxt = header.next_offset
        else:
            return fetch_offset  # legacy message sets: let poll's position drive the next fetch
    return nxt


def decode_records(batch, tp: TopicPartition) -> list:
    """The batch's records as ConsumerRecords, built by the record decoder directly."""
    if isinstance(batch, RecordBatch):
        h = batch.header
        return batch.records(
            record_class(tp.topic, tp.partition, 1 if h.attributes & batch_header.TIMESTAMP_TYPE_BIT else 0)
        )
    cls = record_class(tp.topic, tp.partition, batch.timestamp_type)
    new = tuple.__new__
    return [new(cls, (r.offset, r.timestamp, r.key, r.value, tuple(r.headers))) for r in batch.records()]


class CompletedFetch:
    """The undelivered part of one partition's fetched bytes."""

    __slots__ = (
        "tp",
        "fetch_offset",
        "batches",
        "records",
        "index",
        "batch_next",
        "aborted",
        "aborted_pids",
        "done",
    )

    def __init__(self, tp, fetch_offset, data, aborted):
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.batches = iter_batches(data)
        self.records = None
        self.index = 0
        self.batch_next = 0
        self.aborted = sorted(aborted, key=lambda a: a[1]) if aborted else None
        self.aborted_pids: set[int] = set()
        self.done = False


class Fetcher:
    def __init__(self, client: NetClient, subs: SubscriptionState, config: dict, committed_fn, interceptors):
        self.client = client
        self.subs = subs
        self.max_wait_ms = config["fetch_max_wait_ms"]
        self.min_bytes = config["fetch_min_bytes"]
        self.max_bytes = config["fetch_max_bytes"]
        self.partition_max_bytes = config["max_partition_fetch_bytes"]
        self.isolation = 1 if config["isolation_level"] == "read_committed" else 0
        self.check_crcs = config["check_crcs"]
        self.rack = config["client_rack"] or ""
        self.key_deserializer = config["key_deserializer"]
        self.value_deserializer = config["value_deserializer"]
        self.request_timeout = config["request_timeout_ms"] / 1000
        self.retry_backoff = config["retry_backoff_ms"] / 1000
        self.default_timeout = config["default_api_timeout_ms"] / 1000
        self.committed_fn = (
            committed_fn  # async f(partitions, timeout) -> {tp: OffsetAndMetadata|None}, or None
        )
        self.interceptors = interceptors
        self._completed: collections.deque[CompletedFetch] = collections.deque()
        self._buffered: dict[TopicPartition, int] = {}  # undelivered CompletedFetch count
        self._next_fetch: dict[TopicPartition, int] = {}  # where the next fetch starts
        self._inflight_nodes: set[int] = set()
        self._errors: list[BaseException] = []
        self._wake: asyncio.Event | None = None
        self._data: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._request_futures: set[asyncio.Future] = set()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._data = asyncio.Event()
        self.client.add_connection_listener(lambda node: self.wakeup())
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"{self.client.client_id}-fetcher"
        )

    def wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except BaseException:  # noqa: S110 - cancelled on purpose
            pass
        for f in list(self._request_futures):
            f.cancel()

    # -- the task --------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            delay = 1.0
            try:
                if self.subs.need_position():
                    await self._update_positions()
                delay = self._send_fetches()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("fetcher: %s", exc)
                delay = self.retry_backoff
            if self.subs.need_position():
                delay = min(delay, self.retry_backoff)
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def _update_positions(self) -> None:
        subs = self.subs
        need = [tp for tp in subs.need_position() if subs.assignment[tp].reset is None]
        need_committed = [tp for tp in need if subs.assignment[tp].needs_committed]
        if need_committed:
            if self.committed_fn is not None:
                committed = await self.committed_fn(need_committed, self.request_timeout)
            else:
                committed = {}
            for tp in need_committed:
                st = subs.assignment.get(tp)
                if st is None or st.position is not None or not st.needs_committed:
                    continue
                st.needs_committed = False
                om = committed.get(tp)
                if om is not None:
                    st.position = om.offset
                    st.leader_epoch = om.leader_epoch
                else:
                    st.reset = subs.default_reset
        for tp in subs.need_position():
            st = subs.assignment[tp]
            if st.reset is None and not st.needs_committed:
                st.reset = subs.default_reset
        resets = {tp: st.reset for tp, st in subs.assignment.items() if st.position is None and st.reset}
        if not resets:
            return
        none = [tp for tp, how in resets.items() if how == "none"]
        if none:
            for tp in none:
                subs.assignment[tp].reset = None
                subs.assignment[tp].needs_committed = False
            self._error(NoOffsetForPartitionError(none))
            resets = {tp: how for tp, how in resets.items() if how != "none"}
        timestamps = {tp: EARLIEST if how == "earliest" else LATEST for tp, how in resets.items()}
        if not timestamps:
            return
        found = await self.list_offsets(timestamps, self.request_timeout, strict=False)
        for tp, (offset, _ts, epoch) in found.items():
            st = subs.assignment.get(tp)
            if st is None or st.reset is None:
                continue
            st.position = offset
            st.leader_epoch = epoch
            st.reset = None
            log.debug("reset position of %s to %d", tp, offset)
        if found:
            self.wakeup()

    def _error(self, exc: BaseException) -> None:
        self._errors.append(exc)
        if self._data is not None:
            self._data.set()

    def _send_fetches(self) -> float:
        subs = self.subs
        cluster = self.client.cluster
        by_node: dict[int, list[TopicPartition]] = {}
        held_back: set[int] = set()
        delay = 1.0
        missing_leader = False
        buffered = self._buffered
        for tp, st in subs.assignment.items():
            if st.position is None or st.paused or st.reset is not None:
                continue
            leader = cluster.leaders.get(tp, -1)
            if leader < 0:
                missing_leader = True
                continue
            if leader in self._inflight_nodes:
                continue
            if buffered.get(tp, 0) >= PREFETCH:
                held_back.add(leader)
                continue
            by_node.setdefault(leader, []).append(tp)
        if missing_leader:
            self.client.add_topics({tp.topic for tp in subs.assignment})
            self.client.request_update()
            delay = self.retry_backoff
        for node, tps in by_node.items():
            conn = self.client.connection(node)
            if conn is None:
                delay = min(delay, self.retry_backoff)
                continue
            self._send_fetch(conn, node, tps, short=node in held_back)
        return delay

    def _send_fetch(self, conn, node: int, tps: list[TopicPartition], short: bool = False) -> None:
        topics: dict[str, list] = {}
        offsets = {}
        next_fetch = self._next_fetch
        for tp in tps:
            offset = next_fetch.get(tp)
            if offset is None:
                offset = self.subs.assignment[tp].position
            offsets[tp] = offset
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.partition_max_bytes,
                }
            )
        values = {
            "cluster_id": None,
            "replica_id": -1,
            "max_wait": min(self.max_wait_ms, _SHORT_WAIT_MS) if short else self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": self.isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": self.rack,
        }
        self._inflight_nodes.add(node)
        fut = conn.send(api_keys.FETCH, values, timeout=self.request_timeout + self.max_wait_ms / 1000)
        self._request_futures.add(fut)
        fut.add_done_callback(lambda f: self._on_fetch(node, offsets, f))

    def _on_fetch(self, node: int, offsets: dict, fut: asyncio.Future) -> None:
        self._request_futures.discard(fut)
        self._inflight_nodes.discard(node)
        self.wakeup()
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.debug("fetch from broker %s failed: %s", node, exc)
            if getattr(exc, "invalid_metadata", False):
                self.client.request_update()
            return
        resp = fut.result()
        if resp.error_code:
            log.info("fetch from broker %s failed: %s", node, error_for(resp.error_code).code.name)
            return
        subs = self.subs
        got_data = False
        next_fetch = self._next_fetch
        for topic in resp.responses:
            name = topic.topic
            for p in topic.partitions:
                tp = TopicPartition(name, int(p.partition_index))
                fetch_offset = offsets.get(tp)
                st = subs.assignment.get(tp)
                if st is None or fetch_offset is None or st.position is None:
                    continue
                if next_fetch.get(tp, st.position) != fetch_offset:
                    continue  # reassigned or sought while the fetch was in flight
                code = int(p.error_code)
                if code == 0 and not p.records and 0 <= int(p.high_watermark) < fetch_offset:
                    # Past the end of the log without an error: some brokers (tansu) do not
                    # report OFFSET_OUT_OF_RANGE after losing data. Kafka would; treat it so.
                    code = _OUT_OF_RANGE
                if code == 0:
                    st.high_watermark = int(p.high_watermark)
                    st.last_stable_offset = int(getattr(p, "last_stable_offset", -1))
                    st.log_start_offset = int(getattr(p, "log_start_offset", -1))
                    data = p.records
                    if data:
                        aborted = None
                        if self.isolation and p.aborted_transactions:
                            aborted = [
                                (int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions
                            ]
                        nxt = next_fetch_offset(data, fetch_offset)
                        if nxt > fetch_offset:
                            next_fetch[tp] = nxt
                        self._completed.append(CompletedFetch(tp, fetch_offset, data, aborted))
                        self._buffered[tp] = self._buffered.get(tp, 0) + 1
                        got_data = True
                elif code == _OUT_OF_RANGE:
                    if st.position != fetch_offset:
                        continue  # a prefetch past what poll has seen: retried from the position
                    next_fetch.pop(tp, None)
                    if subs.default_reset == "none":
                        st.reset = None
                        self._error(OffsetOutOfRangeClientError({tp: fetch_offset}))
                    else:
                        log.info(
                            "offset %d out of range for %s; resetting to %s",
                            fetch_offset,
                            tp,
                            subs.default_reset,
                        )
                        self.clear_buffers([tp])
                        st.position = None
                        st.reset = subs.default_reset
                else:
                    err = error_for(code)(f"fetch of {name}-{tp.partition}")
                    if err.invalid_metadata or err.retriable:
                        self.client.request_update()
                    else:
                        self._error(err)
        if got_data:
            self._data.set()

    # -- delivering records (poll) ---------------------------------------------------------

    def has_records(self) -> bool:
        return bool(self._completed)

    def raise_errors(self) -> None:
        if self._errors:
            err = self._errors.pop(0)
            raise err

    async def wait_for_data(self, timeout: float) -> None:
        if self._data.is_set() or self._errors:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._data.wait()
        except TimeoutError:
            pass

    def fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        # Decoding allocates one GC-tracked tuple per record, thousands per poll. With the
        # cyclic GC on, a collection runs every 700 allocations and promotes the records
        # still being built, which brings on full collections of the whole heap (about a
        # third of consume time in profiles at 100 B). Records cannot form cycles, so the
        # collector is paused while a poll decodes and catches up once afterwards.
        if gc.isenabled():
            gc.disable()
            try:
                return self._fetched_records(max_records)
            finally:
                gc.enable()
        return self._fetched_records(max_records)

    def _fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        completed = self._completed
        parked = []
        while completed and len(out) < max_records:
            cf = completed[0]
            st = self.subs.assignment.get(cf.tp)
            if st is None or st.position is None:
                completed.popleft()
                self._delivered(cf.tp)
                continue
            if st.paused:
                parked.append(completed.popleft())
                continue
            try:
                self._take(cf, st, max_records - len(out), out)
            except Exception:
                completed.popleft()
                self._delivered(cf.tp)
                self._next_fetch.pop(cf.tp, None)  # fetch again from the position
                raise
            if cf.done:
                completed.popleft()
                self._delivered(cf.tp)
                self.wakeup()
        if parked:
            completed.extendleft(reversed(parked))
        if not completed:
            self._data.clear()
        return out

    def _delivered(self, tp: TopicPartition) -> None:
        n = self._buffered.get(tp, 0) - 1
        if n > 0:
            self._buffered[tp] = n
        else:
            self._buffered.pop(tp, None)

    def _take(self, cf: CompletedFetch, st, n: int, out: list) -> None:
        tp = cf.tp
        topic, partition = tp
        position = st.position
        kdes = self.key_deserializer
        vdes = self.value_deserializer
        while n > 0:
            records = cf.records
            if records is None or cf.index >= len(records):
                cf.records = None
                try:
                    batch = next(cf.batches, None)
                except KafkaError as exc:
                    cf.done = True
                    raise CorruptRecordError(
                        f"corrupt data fetched from {topic}-{partition} at {position}: {exc}"
                    ) from exc
                if batch is None:
                    cf.done = True
                    break
                next_offset = batch.next_offset
                if next_offset <= position:
                    continue
                if self.check_crcs and not batch.crc_is_valid():
                    cf.done = True
                    raise CorruptRecordError(
                        f"record batch at offset {batch.base_offset} of {topic}-{partition} fails its CRC check"
                    )
                if cf.aborted is not None:
                    while cf.aborted and cf.aborted[0][1] <= next_offset - 1:
                        cf.aborted_pids.add(cf.aborted.pop(0)[0])
                if getattr(batch, "is_control", False):
                    if cf.aborted_pids and batch.producer_id in cf.aborted_pids:
                        marker = batch.end_txn_marker()
                        if marker is not None and marker.control_type == ABORT:
                            cf.aborted_pids.discard(batch.producer_id)
                    position = st.position = next_offset
                    continue
                if (
                    cf.aborted_pids
                    and getattr(batch, "is_transactional", False)
                    and batch.producer_id in cf.aborted_pids
                ):
                    position = st.position = next_offset
                    continue
                try:
                    cf.records = records = decode_records(batch, tp)
                except KafkaError as exc:
                    cf.done = True
                    raise CorruptRecordError(
                        f"corrupt batch in {topic}-{partition} at {batch.base_offset}: {exc}"
                    ) from exc
                cf.index = 0
                cf.batch_next = next_offset
                if records and records[0][0] < position:
                    i = 0
                    while i < len(records) and records[i][0] < position:
                        i += 1
                    cf.index = i
                if cf.index >= len(records):
                    position = st.position = next_offset
                    continue
            i = cf.index
            chunk = records[i : i + n] if i or len(records) > n else records
            if kdes is None and vdes is None:
                out += chunk
            else:
                cls = type(chunk[0])
                new = tuple.__new__
                for r in chunk:
                    key, value = r[2], r[3]
                    try:
                        if kdes is not None and key is not None:
                            key = kdes(key)
                        if vdes is not None and value is not None:
                            value = vdes(value)
                    except Exception as exc:
                        st.position = r[0]
                        raise SerializationError(
                            f"deserializing the record at offset {r[0]} of {topic}-{partition} failed: {exc}; "
                            "seek past it to continue"
                        ) from exc
                    out.append(new(cls, (r[0], r[1], key, value, r[4])))
                    st.position = r[0] + 1
            cf.index = i + len(chunk)
            n -= len(chunk)
            position = st.position = chunk[-1][0] + 1
            if cf.index >= len(records):
                # the batch is done: continue after it (compaction may have left a gap)
                cf.records = None
                if cf.batch_next > position:
                    position = st.position = cf.batch_next

    # -- offsets lookups -------------------------------------------------------------------

    async def list_offsets(self, timestamps: dict[TopicPartition, int], timeout: float, strict: bool = True):
        """``{tp: (offset, timestamp, leader_epoch)}`` for ``{tp: timestamp}`` (-2 earliest, -1 latest).

        With ``strict`` errors raise; otherwise partitions that failed are left out.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        remaining = dict(timestamps)
        found = {}
        last_error = None
        while remaining:
            cluster = self.client.cluster
            by_node: dict[int, dict] = {}
            unknown = set()
            for tp, ts in remaining.items():
                leader = cluster.leaders.get(tp, -1)
                if leader < 0:
                    unknown.add(tp.topic)
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            if unknown:
                self.client.add_topics(unknown)
            results = await asyncio.gather(
                *(self._list_offsets_node(node, tps) for node, tps in by_node.items()), return_exceptions=True
            )
            retry_needed = bool(unknown)
            for (_node, tps), res in zip(by_node.items(), results, strict=True):
                if isinstance(res, BaseException):
                    last_error = res
                    if isinstance(res, KafkaConnectionError | KafkaTimeoutError) or getattr(
                        res, "retriable", False
                    ):
                        retry_needed = True
                        continue
                    if strict:
                        raise res
                    for tp in tps:
                        remaining.pop(tp, None)
                    continue
                for tp, value in res.items():
                    if isinstance(value, BaseException):
                        last_error = value
                        if value.retriable or value.invalid_metadata:
                            retry_needed = True
                            continue
                        remaining.pop(tp, None)
                        if strict:
                            raise value
                        continue
                    found[tp] = value
                    remaining.pop(tp, None)
            if not remaining:
                break
            if loop.time() + self.retry_backoff >= deadline:
                if strict:
                    raise KafkaTimeoutError(
                        f"listing offsets timed out after {timeout}s"
                        + (f": {last_error}" if last_error else "")
                    )
                break
            if retry_needed:
                try:
                    await self.client.refresh(max(0.001, min(self.request_timeout, deadline - loop.time())))
                except KafkaTimeoutError:
                    pass
            await asyncio.sleep(self.retry_backoff)
        return found

    async def _list_offsets_node(self, node: int, tps: dict[TopicPartition, int]):
        topics: dict[str, list] = {}
        for tp, ts in tps.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "current_leader_epoch": -1,
                    "timestamp": ts,
                    "max_num_offsets": 1,
                }
            )
        resp = await self.client.call(
            node,
            api_keys.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": self.isolation,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, int(p.partition_index))
                code = int(p.error_code)
                if code:
                    out[tp] = error_for(code)(f"ListOffsets for {t.name}-{p.partition_index}")
                else:
                    offset = int(getattr(p, "offset", -1))
                    out[tp] = (offset, int(getattr(p, "timestamp", -1)), int(getattr(p, "leader_epoch", -1)))
        return out

    def clear_buffers(self, partitions=None) -> None:
        """Forget fetched data (after a seek, reset or reassignment): fetch again from the position."""
        if partitions is None:
            self._completed.clear()
            self._buffered.clear()
            self._next_fetch.clear()
        else:
            parts = set(partitions)
            self._completed = collections.deque(cf for cf in self._completed if cf.tp not in parts)
            for tp in parts:
                self._buffered.pop(tp, None)
                self._next_fetch.pop(tp, None)
        self.wakeup()

    def forget_unassigned(self) -> None:
        assigned = self.subs.assignment
        gone = {cf.tp for cf in self._completed if cf.tp not in assigned} | {
            tp for tp in self._next_fetch if tp not in assigned
        }
        if gone:
            self.clear_buffers(gone)


__all__ = ["Fetcher"]
