"""The asyncio consumer: subscription state + fetcher + group coordinator.

``poll`` returns what the fetcher has buffered (decoding it on the way), or waits up to
``timeout`` seconds for it. Group membership, heartbeats, fetching and auto-commits run
in background tasks; ``close`` commits (when auto-commit is on), revokes, leaves the
group, and stops them in that order.
"""

from __future__ import annotations

import asyncio
import inspect
import logging

from odradek.client import client_config as config_mod
from odradek.client.client_errors import ClientClosedError, IllegalStateError, KafkaTimeoutError
from odradek.client.consumer.assignors import make_assignors
from odradek.client.consumer.consumer_coordinator import ConsumerCoordinator
from odradek.client.consumer.consumer_protocol_coordinator import ConsumerProtocolCoordinator
from odradek.client.consumer.fetcher import EARLIEST, LATEST, Fetcher
from odradek.client.consumer.subscription import SubscriptionState
from odradek.client.netclient import NetClient
from odradek.client.structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

log = logging.getLogger("odradek.client.consumer")


async def _call_direct(fn, *args):
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _flatten(partitions: tuple):
    """``f(tp1, tp2)`` and ``f([tp1, tp2])`` both work."""
    if (
        len(partitions) == 1
        and not isinstance(partitions[0], TopicPartition)
        and not isinstance(partitions[0], str)
    ):
        first = partitions[0]
        if isinstance(first, list | set | tuple | frozenset) and all(isinstance(x, tuple) for x in first):
            return tuple(first)
    return partitions


def _tps(partitions) -> list[TopicPartition]:
    if isinstance(partitions, TopicPartition):
        return [partitions]
    out = []
    for tp in partitions:
        if not isinstance(tp, tuple) or len(tp) != 2:
            raise TypeError(f"expected TopicPartition(topic, partition), got {tp!r}")
        out.append(TopicPartition(*tp))
    return out


class Consumer:
    """The asyncio consumer. Options are Kafka's config names (see ``odradek.client.client_config``)."""

    def __init__(self, config: dict | None = None, *, _run_callback=None, **options):
        cfg = config_mod.resolve("consumer", config, options)
        self.config = cfg
        if cfg["group_instance_id"] is not None and cfg["group_id"] is None:
            raise config_mod.ConfigError("group_instance_id needs a group_id")
        if cfg["heartbeat_interval_ms"] >= cfg["session_timeout_ms"]:
            raise config_mod.ConfigError("heartbeat_interval_ms must be lower than session_timeout_ms")
        self._assignors = make_assignors(cfg["partition_assignment_strategy"])
        self._client = NetClient(cfg, "consumer", allow_auto_topic_creation=cfg["allow_auto_create_topics"])
        self._subs = SubscriptionState(cfg["auto_offset_reset"])
        self._interceptors = cfg["interceptors"]
        run_callback = _run_callback or _call_direct
        self._coordinator = None
        if cfg["group_id"] is not None:
            member_class = ConsumerProtocolCoordinator if cfg["group_protocol"] == "consumer" else ConsumerCoordinator
            self._coordinator = member_class(
                self._client, self._subs, cfg, self._assignors, run_callback, self._interceptors
            )
        self._run_callback = run_callback
        committed = self._coordinator.fetch_committed if self._coordinator is not None else None
        self._fetcher = Fetcher(self._client, self._subs, cfg, committed, self._interceptors)
        self._subs.on_change = self._on_subscription_change
        self._max_poll_records = cfg["max_poll_records"]
        self._default_timeout = cfg["default_api_timeout_ms"] / 1000
        self._started = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._start()

    def _start(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")
        if self._started:
            return
        self._started = True
        self._client.start()
        self._fetcher.start()
        if self._coordinator is not None:
            self._coordinator.start()
            if self._subs.group_managed:
                self._coordinator.subscription_changed()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def _check(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        timeout = self._default_timeout if timeout is None else timeout
        try:
            if self._started:
                if self._coordinator is not None:
                    if (
                        self._coordinator.auto_commit
                        and not self._subs.group_managed
                        and self._subs.positions()
                    ):
                        try:
                            await self._coordinator.commit(self._positions_to_commit(), timeout)
                        except Exception as exc:
                            log.warning("commit on close failed: %s", exc)
                    await self._coordinator.close(timeout)
                await self._fetcher.close()
        finally:
            await self._client.close()
            for ic in self._interceptors or ():
                fn = getattr(ic, "close", None)
                if fn is not None:
                    try:
                        fn()
                    except Exception:
                        log.exception("consumer interceptor close failed")

    # -- subscription ----------------------------------------------------------------------

    def _on_subscription_change(self) -> None:
        self._fetcher.forget_unassigned()
        self._fetcher.wakeup()

    def subscribe(self, topics=None, pattern: str | None = None, listener=None) -> None:
        """Subscribe to topics (a list) or to every topic matching ``pattern`` (a regex)."""
        self._check()
        if topics is not None and pattern is not None:
            raise ValueError("subscribe() takes topics or a pattern, not both")
        if isinstance(topics, str) and pattern is None and any(c in topics for c in "^$*+?[]()|\\"):
            pattern, topics = topics, None
        if self._coordinator is None:
            raise IllegalStateError("subscribe() needs a group_id; use assign() without one")
        self._subs.subscribe(topics, pattern, listener)
        if pattern is not None:
            self._client.want_all_topics(True)
        else:
            self._client.set_topics(self._subs.topics)
        if self._started:
            self._coordinator.subscription_changed()

    def assign(self, partitions) -> None:
        self._check()
        tps = _tps(partitions)
        self._subs.assign(tps)
        self._fetcher.forget_unassigned()
        self._client.add_topics({tp.topic for tp in tps})
        if self._started:
            self._client.request_update()

    def unsubscribe(self) -> None:
        self._check()
        self._subs.unsubscribe()
        self._fetcher.clear_buffers()
        if self._coordinator is not None and self._started:
            self._coordinator.subscription_changed()

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assigned()

    def subscription(self) -> set[str]:
        return set(self._subs.topics) if self._subs.group_managed else set()

    # -- polling ---------------------------------------------------------------------------

    async def poll(self, timeout: float = 0.0, max_records: int | None = None):
        """Records fetched since the last poll (a list, possibly empty after ``timeout`` seconds)."""
        self._check()
        if not self._subs.subscribed:
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        self._start()
        max_records = max_records or self._max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or 0)
        coord = self._coordinator
        while True:
            self._client.raise_fatal(self._subscribed_topics())
            if coord is not None:
                coord.note_poll()
                coord.raise_pending()
            self._fetcher.raise_errors()
            records = self._fetcher.fetched_records(max_records)
            if records:
                for ic in self._interceptors or ():
                    fn = getattr(ic, "on_consume", None)
                    if fn is not None:
                        try:
                            records = fn(records) or records
                        except Exception:
                            log.exception("consumer interceptor on_consume failed")
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self._fetcher.wait_for_data(min(remaining, 1.0))
            self._check()

    getmany = poll

    def _subscribed_topics(self) -> set[str]:
        if self._subs.group_managed:
            return set(self._subs.topics)
        return {tp.topic for tp in self._subs.assigned()}

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        while not self._closed:
            for r in await self.poll(1.0):
                yield r

    # -- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check()
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative int, got {offset!r}")
        tp = TopicPartition(*partition)
        self._subs.seek(tp, offset)
        self._fetcher.clear_buffers([tp])

    def seek_to_beginning(self, *partitions) -> None:
        self._seek_reset(partitions, "earliest")

    def seek_to_end(self, *partitions) -> None:
        self._seek_reset(partitions, "latest")

    def _seek_reset(self, partitions, how: str) -> None:
        self._check()
        tps = _tps(_flatten(partitions)) if partitions else list(self._subs.assignment)
        for tp in tps:
            self._subs.request_reset(tp, how)
        self._fetcher.clear_buffers(tps)

    async def position(self, partition: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (looked up if unknown)."""
        self._check()
        self._start()
        tp = TopicPartition(*partition)
        st = self._subs.state(tp)
        loop = asyncio.get_running_loop()
        timeout = self._default_timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        while st.position is None:
            self._fetcher.raise_errors()
            if loop.time() >= deadline:
                raise KafkaTimeoutError(f"position of {tp.topic}-{tp.partition} not known after {timeout}s")
            self._fetcher.wakeup()
            await asyncio.sleep(0.01)
            st = self._subs.state(tp)
        return st.position

    def highwater(self, partition: TopicPartition) -> int | None:
        st = self._subs.state(TopicPartition(*partition))
        return st.high_watermark if st.high_watermark >= 0 else None

    def pause(self, *partitions) -> None:
        self._check()
        self._subs.pause(_tps(_flatten(partitions)))

    def resume(self, *partitions) -> None:
        self._check()
        self._subs.resume(_tps(_flatten(partitions)))

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    # -- commits ---------------------------------------------------------------------------

    def _positions_to_commit(self, offsets=None) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return {tp: OffsetAndMetadata(pos) for tp, pos in self._subs.positions().items()}
        out = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if isinstance(om, int):
                om = OffsetAndMetadata(om)
            elif not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(*om)
            out[tp] = om
        return out

    def _need_coordinator(self):
        if self._coordinator is None:
            raise IllegalStateError("this needs a group_id")
        return self._coordinator

    async def commit(self, offsets=None, timeout: float | None = None) -> None:
        """Commit ``offsets`` ({tp: offset}) or the positions of all assigned partitions; wait."""
        self._check()
        coord = self._need_coordinator()
        self._start()
        offsets = self._positions_to_commit(offsets)
        if not offsets:
            return
        await coord.commit(offsets, self._default_timeout if timeout is None else timeout)

    def commit_async(self, offsets=None, callback=None):
        """Commit without waiting; ``callback(offsets, exception_or_None)`` runs when done.

        A failed commit is retried only if no newer commit covers its partitions.
        Returns an awaitable.
        """
        self._check()
        coord = self._need_coordinator()
        self._start()
        offsets = self._positions_to_commit(offsets)
        cb = None
        if callback is not None:

            async def cb(o, e):
                await self._run_callback(callback, o, e)

        return coord.commit_async(offsets, cb)

    async def committed(self, partitions, timeout: float | None = None):
        """Committed offsets: ``{tp: OffsetAndMetadata or None}`` (or one value for one tp)."""
        self._check()
        coord = self._need_coordinator()
        self._start()
        single = isinstance(partitions, TopicPartition)
        tps = _tps(partitions)
        result = await coord.fetch_committed(tps, self._default_timeout if timeout is None else timeout)
        return result[tps[0]] if single else result

    # -- offset lookups --------------------------------------------------------------------

    async def _lookup(self, timestamps, timeout):
        self._check()
        self._start()
        timeout = self._default_timeout if timeout is None else timeout
        return await self._fetcher.list_offsets(timestamps, timeout)

    async def beginning_offsets(self, partitions, timeout: float | None = None) -> dict[TopicPartition, int]:
        tps = _tps(partitions)
        found = await self._lookup({tp: EARLIEST for tp in tps}, timeout)
        return {tp: found[tp][0] for tp in tps}

    async def end_offsets(self, partitions, timeout: float | None = None) -> dict[TopicPartition, int]:
        tps = _tps(partitions)
        found = await self._lookup({tp: LATEST for tp in tps}, timeout)
        return {tp: found[tp][0] for tp in tps}

    async def offsets_for_times(self, timestamps: dict, timeout: float | None = None):
        """``{tp: OffsetAndTimestamp or None}``: the first offset whose timestamp is >= the given one."""
        ts = {TopicPartition(*tp): int(t) for tp, t in timestamps.items()}
        for t in ts.values():
            if t < 0:
                raise ValueError("timestamps must be >= 0")
        found = await self._lookup(ts, timeout)
        out = {}
        for tp in ts:
            v = found.get(tp)
            out[tp] = OffsetAndTimestamp(v[0], v[1], v[2]) if v and v[0] >= 0 else None
        return out

    async def partitions_for_topic(self, topic: str, fail_if_missing: bool = False) -> set[int]:
        """The topic's partitions; ``fail_if_missing`` as in ``Producer.partitions_for``."""
        self._check()
        self._start()
        cluster = await self._client.wait_for_topic(topic, self._default_timeout, fail_if_missing)
        return set(cluster.partitions_for(topic) or ())

    async def topics(self) -> set[str]:
        """All topics in the cluster."""
        self._check()
        self._start()
        conn = await self._client.any_connection()
        from odradek.protocol import api_keys

        resp = await conn.send(
            api_keys.METADATA, lambda v: {"topics": () if v == 0 else None, "allow_auto_topic_creation": False}
        )
        return {t.name for t in resp.topics if not t.error_code}

    @property
    def group_generation(self) -> int:
        return self._coordinator.generation if self._coordinator is not None else -1

    @property
    def member_id(self) -> str | None:
        return self._coordinator.member_id if self._coordinator is not None else None
