"""Blocking ``Producer``, ``Consumer`` and ``Admin``: the asyncio engine behind sync methods.

Each instance starts a private event loop thread (``sync.LoopThread``) and runs the
asyncio client on it. Options and behaviour are those of ``odradek.aio``; methods block
instead of being awaited, and ``Producer.send`` returns a concurrent.futures-style
future (``result(timeout)``, ``add_done_callback``).
"""

from __future__ import annotations

import time

from . import producer as aproducer
from .errors import ClientClosedError, KafkaTimeoutError
from .producer import NeedMemory, NeedMetadata
from .sync import LoopThread


class Producer:
    """Blocking producer. ``send(...)`` returns a future; ``result(timeout)`` gives RecordMetadata."""

    def __init__(self, config: dict | None = None, **options):
        self._aio = aproducer.Producer(config, **options)
        self._core = self._aio._core
        self._thread = LoopThread(f"{self._core.client.client_id}-io")
        try:
            self._thread.run(self._aio.start())
        except BaseException:
            self._thread.stop()
            raise
        self._wake = self._core.sender.wakeup_threadsafe

    @property
    def config(self) -> dict:
        return self._core.config

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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

    def send_and_wait(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None, timeout=None):
        return self.send(topic, value, key, headers, partition, timestamp_ms).result(timeout)

    def produce(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None, on_delivery=None):
        """confluent-kafka style: ``on_delivery(err, metadata)`` runs on the I/O thread."""
        fut = self.send(topic, value, key, headers, partition, timestamp_ms)
        if on_delivery is not None:
            fut.add_done_callback(lambda f: on_delivery(f.exception(0), None if f.failed() else f.result(0)))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        self._core.check_open()
        self._thread.run(aproducer._flush(self._core, timeout))

    def partitions_for(self, topic: str) -> set[int]:
        return self._thread.run(self._aio.partitions_for(topic))

    def close(self, timeout: float | None = None) -> None:
        if self._core.closed:
            return
        try:
            self._thread.run(self._aio.close(timeout))
        finally:
            self._thread.stop()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __del__(self):
        core = getattr(self, "_core", None)
        thread = getattr(self, "_thread", None)
        if core is not None and thread is not None and not core.closed:
            try:
                thread.run(self._aio.close(0))
                thread.stop()
            except Exception:  # noqa: S110 - interpreter shutdown
                pass


__all__ = ["ClientClosedError", "Producer"]
