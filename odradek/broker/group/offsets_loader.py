"""Loading a ``__consumer_offsets`` partition into its coordinator shard (Kafka's
CoordinatorLoader).

When this broker becomes the leader of a partition, the partition is read from its start
to its high watermark, ``offsets.load.buffer.size`` bytes at a time, and every record is
replayed into the shard, which passes it to the manager owning its type; a transaction
marker commits or drops the transactional offsets replayed before it. A record that cannot
be read is skipped with a warning. Partitions that fit the loader's budget are replayed at
once; larger ones chunk by chunk in a task that yields to the event loop between chunks
(the coordinator answers COORDINATOR_LOAD_IN_PROGRESS for their groups meanwhile).

Threading: everything runs on the event loop; a load task is cancelled by ``close()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from odradek._tasks import cancel_and_wait
from odradek.broker.group.partitioning import OFFSETS_TOPIC
from odradek.protocol import errors

log = logging.getLogger(__name__)


def replay_chunk(shard, chunk: Iterable[tuple]) -> None:
    """Replay ``(key, value, producer_id, committed)`` entries (``OffsetsTopic.replay``)."""
    for key, value, producer_id, committed in chunk:
        if committed is not None:
            shard.replay_transaction_marker(producer_id, committed)
            continue
        try:
            shard.replay(key, value, producer_id)
        except (errors.CorruptMessageError, UnicodeDecodeError) as exc:
            log.warning("skipping an unreadable %s record: %s", OFFSETS_TOPIC, exc)


class OffsetsLoader:
    def __init__(
        self, topic, chunk_bytes: int, *, on_loaded: Callable, on_failed: Callable, still_loading: Callable
    ):
        self.topic = topic
        self.chunk_bytes = chunk_bytes
        self.on_loaded = on_loaded  # (shard) once the shard holds the whole partition
        self.on_failed = on_failed  # (shard) when reading the partition failed
        self.still_loading = still_loading  # (shard) -> False once it was unloaded meanwhile
        self._tasks: set[asyncio.Task] = set()

    def load(self, shard, budget: int) -> int:
        """Replay the shard's partition now if it fits in ``budget`` bytes, else in a task;
        return the bytes replayed now. A partition that fails to load stays unloaded."""
        size = self.topic.log_size(shard.partition)
        if size > budget:
            task = asyncio.get_running_loop().create_task(
                self._load_in_chunks(shard), name=f"load-offsets-{shard.partition}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return 0
        try:
            for chunk in self.topic.replay(shard.partition, self.chunk_bytes):
                replay_chunk(shard, chunk)
        except Exception:
            log.exception("loading %s-%d failed; its groups are not served", OFFSETS_TOPIC, shard.partition)
            self.on_failed(shard)
            return size
        self.on_loaded(shard)
        return size

    async def _load_in_chunks(self, shard) -> None:
        t0 = time.perf_counter()
        try:
            for chunk in self.topic.replay(shard.partition, self.chunk_bytes):
                replay_chunk(shard, chunk)
                await asyncio.sleep(0)
                if not self.still_loading(shard):
                    return  # unloaded meanwhile
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; its groups are not served", OFFSETS_TOPIC, shard.partition)
            self.on_failed(shard)
            return
        self.on_loaded(shard)
        log.info("loaded %s-%d in %.0f ms", OFFSETS_TOPIC, shard.partition, (time.perf_counter() - t0) * 1000)

    async def close(self) -> None:
        tasks = list(self._tasks)
        self._tasks.clear()
        await cancel_and_wait(*tasks)
