"""Blocking ``Producer``, ``Consumer`` and ``Admin``: the asyncio engine behind sync methods.

Each instance starts a private event loop thread (``sync.LoopThread``) and runs the
asyncio client on it. Options and behaviour are those of ``odradek.aio``; methods block
instead of being awaited, and ``Producer.send`` returns a concurrent.futures-style
future (``result(timeout)``, ``add_done_callback``).
"""

from __future__ import annotations

import functools
import time

from odradek.client.client_errors import ClientClosedError, KafkaTimeoutError
from odradek.client.consumer import consumer as aconsumer
from odradek.client.producer import producer as aproducer
from odradek.client.producer.producer import NeedMemory, NeedMetadata

from . import admin as aadmin
from . import share_consumer as ashare
from .sync import LoopThread, UserThreadCalls


class _OnLoopThread:
    """What the blocking clients share: ``_aio``, their asyncio client, started on
    ``_thread``, a private event loop thread; ``config`` and ``closed`` are the client's."""

    def _start(self, aio, client_id: str, user_calls: UserThreadCalls | None = None) -> None:
        self._aio = aio
        self._thread = LoopThread(f"{client_id}-io")
        if user_calls is not None:
            self._thread.user_calls = user_calls
        try:
            self._thread.run(aio.start())
        except BaseException:
            self._thread.stop()
            raise

    @property
    def config(self) -> dict:
        return self._aio.config

    @property
    def closed(self) -> bool:
        return self._aio.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Producer(_OnLoopThread):
    """Blocking producer. ``send(...)`` returns a future; ``result(timeout)`` gives RecordMetadata."""

    def __init__(self, config: dict | None = None, **options):
        aio = aproducer.Producer(config, **options)
        self._core = aio._core
        self._start(aio, self._core.client.client_id)
        self._wake = self._core.sender.wakeup_threadsafe

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        core = self._core
        args = core.prepare(topic, value, key, headers, partition, timestamp_ms)
        try:
            fut, new_batch = core.try_send(*args)
        except (NeedMetadata, NeedMemory):
            fut, new_batch = self._send_slow(args)
        if new_batch:
            self._wake()
        return fut

    def _send_slow(self, args):
        core = self._core
        deadline = time.monotonic() + core.max_block
        while True:
            try:
                return core.try_send(*args)
            except NeedMetadata as need:
                remaining = max(deadline - time.monotonic(), 0)
                self._thread.run(core.client.wait_for_topic(need.topic, remaining))
            except NeedMemory as need:
                self._wake()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not core.acc.wait_for_memory(need.size + 61, remaining):
                    raise KafkaTimeoutError(
                        f"failed to allocate memory within max_block_ms ({core.max_block * 1000:.0f} ms): "
                        f"buffer_memory ({core.buffer_memory} bytes) is full"
                    ) from None
                core.check_open()

    def send_and_wait(
        self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None, timeout=None
    ):
        return self.send(topic, value, key, headers, partition, timestamp_ms).result(timeout)

    def produce(
        self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None, on_delivery=None
    ):
        """confluent-kafka style: ``on_delivery(err, metadata)`` runs on the I/O thread."""
        fut = self.send(topic, value, key, headers, partition, timestamp_ms)
        if on_delivery is not None:
            fut.add_done_callback(lambda f: on_delivery(f.exception(0), None if f.failed() else f.result(0)))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        self._core.check_open()
        self._thread.run(aproducer._flush(self._core, timeout))

    def partitions_for(self, topic: str, fail_if_missing: bool = False) -> set[int]:
        return self._thread.run(self._aio.partitions_for(topic, fail_if_missing))

    # -- transactions (see odradek.aio.Producer) -------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        self._thread.run(self._aio.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._core.need_txn().begin()

    def send_offsets_to_transaction(self, offsets: dict, group, timeout: float | None = None) -> None:
        self._thread.run(self._aio.send_offsets_to_transaction(offsets, group, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._thread.run(self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._thread.run(self._aio.abort_transaction(timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._core.closed:
            return
        try:
            self._thread.run(self._aio.close(timeout))
        finally:
            self._thread.stop()

    def __del__(self):
        core = getattr(self, "_core", None)
        thread = getattr(self, "_thread", None)
        if core is not None and thread is not None and not core.closed:
            try:
                thread.run(self._aio.close(0))
                thread.stop()
            except Exception:  # noqa: S110 - interpreter shutdown
                pass


class Consumer(_OnLoopThread):
    """Blocking consumer. ``poll(timeout)`` returns a list of ConsumerRecord.

    Rebalance listener callbacks run on the thread that is inside ``poll`` (or another
    blocking call such as ``close``), so they may call the consumer (e.g. ``commit``).
    """

    def __init__(self, config: dict | None = None, **options):
        self._calls = UserThreadCalls()
        aio = aconsumer.Consumer(config, _run_callback=self._calls.call, **options)
        self._start(aio, aio._client.client_id, self._calls)

    def _call(self, fn, *args, **kwargs):
        """Run a plain engine method on the loop thread (the engine's state has one owner)."""
        if self._aio.closed:
            raise ClientClosedError("consumer is closed")

        async def run():
            return fn(*args, **kwargs)

        return self._thread.run(run())

    def subscribe(self, topics=None, pattern=None, listener=None) -> None:
        self._call(self._aio.subscribe, topics, pattern, listener)

    def assign(self, partitions) -> None:
        self._call(self._aio.assign, partitions)

    def unsubscribe(self) -> None:
        self._call(self._aio.unsubscribe)

    def assignment(self):
        return self._call(self._aio.assignment)

    def subscription(self):
        return self._call(self._aio.subscription)

    def poll(self, timeout: float = 0.0, max_records: int | None = None):
        if self._aio.closed:
            raise ClientClosedError("consumer is closed")
        return self._thread.run(self._aio.poll(timeout, max_records))

    def __iter__(self):
        while not self._aio.closed:
            yield from self.poll(1.0)

    def seek(self, partition, offset: int) -> None:
        self._call(self._aio.seek, partition, offset)

    def seek_to_beginning(self, *partitions) -> None:
        self._call(self._aio.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions) -> None:
        self._call(self._aio.seek_to_end, *partitions)

    def pause(self, *partitions) -> None:
        self._call(self._aio.pause, *partitions)

    def resume(self, *partitions) -> None:
        self._call(self._aio.resume, *partitions)

    def paused(self):
        return self._call(self._aio.paused)

    def highwater(self, partition):
        return self._call(self._aio.highwater, partition)

    def commit_async(self, offsets=None, callback=None) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs inside a later blocking call."""
        self._call(self._aio.commit_async, offsets, callback)

    def close(self, timeout: float | None = None) -> None:
        if self._aio.closed:
            return
        try:
            self._thread.run(self._aio.close(timeout))
        finally:
            self._thread.stop()

    @property
    def member_id(self):
        return self._aio.member_id

    @property
    def group_generation(self) -> int:
        return self._aio.group_generation


def _blocking(name: str, doc_from):
    method = getattr(doc_from, name)

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self._aio.closed:
            raise ClientClosedError(f"{type(self).__name__.lower()} is closed")
        return self._thread.run(getattr(self._aio, name)(*args, **kwargs))

    return call


for _name in (
    "commit",
    "committed",
    "position",
    "beginning_offsets",
    "end_offsets",
    "offsets_for_times",
    "partitions_for_topic",
    "topics",
):
    setattr(Consumer, _name, _blocking(_name, aconsumer.Consumer))


def _close_on_loop(self) -> None:
    """Close the asyncio client on its loop, then stop the loop thread."""
    if self._aio.closed:
        return
    try:
        self._thread.run(self._aio.close())
    finally:
        self._thread.stop()


class ShareConsumer(_OnLoopThread):
    """Blocking share consumer (KIP-932); the methods of ``odradek.aio.ShareConsumer``, blocking."""

    def __init__(self, config: dict | None = None, **options):
        aio = ashare.ShareConsumer(config, **options)
        self._start(aio, aio._client.client_id)

    def subscribe(self, topics) -> None:
        self._thread.run(self._subscribe(topics))

    async def _subscribe(self, topics) -> None:
        self._aio.subscribe(topics)

    def assignment(self):
        return self._aio.assignment()

    def acknowledge(self, record, type: str = "accept") -> None:
        self._aio.acknowledge(record, type)

    def delivery_count(self, record) -> int:
        return self._aio.delivery_count(record)

    close = _close_on_loop


for _name in ("poll", "commit"):
    setattr(ShareConsumer, _name, _blocking(_name, ashare.ShareConsumer))


class Admin(_OnLoopThread):
    """Blocking admin client; the methods of ``odradek.aio.Admin``, blocking."""

    def __init__(self, config: dict | None = None, **options):
        aio = aadmin.Admin(config, **options)
        self._start(aio, aio._client.client_id)

    close = _close_on_loop


for _name in (
    "describe_user_scram_credentials",
    "create_acls",
    "alter_client_quotas",
    "describe_client_quotas",
    "describe_acls",
    "delete_acls",
    "alter_user_scram_credentials",
    "create_topics",
    "delete_topics",
    "list_topics",
    "describe_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "list_groups",
    "describe_groups",
    "describe_share_group",
    "alter_share_group_offsets",
    "describe_share_group_offsets",
    "delete_share_group_offsets",
    "delete_groups",
    "list_group_offsets",
    "alter_group_offsets",
    "delete_group_offsets",
    "delete_records",
    "describe_cluster",
    "describe_log_dirs",
    "api_versions",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
):
    setattr(Admin, _name, _blocking(_name, aadmin.Admin))


__all__ = ["Admin", "Consumer", "Producer"]
