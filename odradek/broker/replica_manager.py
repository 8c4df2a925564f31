"""ReplicaManager: the partitions this broker hosts, and appends and reads across them.

It keeps ``Partition`` objects in step with the metadata image (creating and deleting
logs through the LogManager), applies produce requests partition by partition, reads
for fetches, and wakes delayed fetches after each append. Handlers call it; it never
sees a socket. Called only from the event loop.

Creating a log costs a directory (about a millisecond on a journaling file system), so a
topic with more than ``INLINE_CREATES`` new local partitions gets its logs from a background
task that works in slices of ``CREATE_SLICE_S`` and yields to the loop between them; its
partitions appear as their logs do, ``logs_ready(name)`` waits for the last, and
``on_ready(name)`` is called then (the broker re-announces the topic to the coordinators).
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek._tasks import cancel_and_wait
from odradek.broker.broker_metrics import BrokerTopicMetrics, ReplicaMetrics
from odradek.broker.partition import Partition
from odradek.protocol import errors

log = logging.getLogger(__name__)

INLINE_CREATES = 64
CREATE_SLICE_S = 0.02


class ReplicaManager:
    def __init__(self, node_id: int, log_manager, store, log_config_for, on_append=None, on_ready=None):
        self.node_id = node_id
        self.log_manager = log_manager
        self.store = store
        self.log_config_for = log_config_for  # topic name -> LogConfig
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.on_append = on_append or (lambda key: 0)  # (topic, partition) appended to
        self.on_ready = on_ready or (lambda name: None)
        self._creating: dict[str, asyncio.Task] = {}  # topic -> task creating its logs
        self.topic_metrics = BrokerTopicMetrics()
        self.replica_metrics = ReplicaMetrics()

    # -- keeping in step with metadata ------------------------------------------------------

    def sync_topic(self, name: str) -> None:
        """Create or refresh the local replicas of ``name`` from the metadata image."""
        topic = self.store.image.topics.get(name)
        if topic is None:
            self.remove_topic(name)
            return
        config = self.log_config_for(name)
        missing = []
        for index, state in topic.partitions.items():
            if self.node_id not in state.replicas:
                continue
            partition = self.partitions.get((name, index))
            if partition is None:
                missing.append(index)
            else:
                partition.update_config(config)
        if not missing or name in self._creating:
            return  # a running creation task picks up new partitions before it ends
        if len(missing) <= INLINE_CREATES or not _loop_running():
            failed = None
            for index in missing:
                try:
                    self._create_partition(name, index, config, sync_dir=True)
                except errors.KafkaStorageErrorError as exc:
                    failed = exc  # its log dir is offline: the other partitions go on
            if failed is not None:
                log.error("some partitions of %s have no log on this broker: %s", name, failed.message)
            return
        task = asyncio.get_running_loop().create_task(self._create_in_slices(name), name=f"create-logs-{name}")
        self._creating[name] = task
        task.add_done_callback(lambda done: self._creation_done(name, done))

    def _create_partition(self, name: str, index: int, config, *, sync_dir: bool) -> None:
        state = self.store.image.topics[name].partitions[index]
        plog = self.log_manager.get_or_create_log(name, index, config, sync_dir=sync_dir)
        partition = Partition(name, index, plog, state, self.node_id, config)
        partition.counters = self.topic_metrics.for_topic(name)
        self.partitions[(name, index)] = partition
        if partition.is_leader:
            partition.become_leader(state)

    async def _create_in_slices(self, name: str) -> None:
        t0 = time.perf_counter()
        created = 0
        while True:
            topic = self.store.image.topics.get(name)
            if topic is None:
                return  # deleted meanwhile: remove_topic took what was made
            config = self.log_config_for(name)
            missing = [
                index
                for index, state in topic.partitions.items()
                if self.node_id in state.replicas and (name, index) not in self.partitions
            ]
            if not missing:
                break
            deadline = time.perf_counter() + CREATE_SLICE_S
            for index in missing:
                if self.store.image.topics.get(name) is not topic:
                    break  # deleted (or recreated) during the last yield
                self._create_partition(name, index, config, sync_dir=False)
                created += 1
                if time.perf_counter() >= deadline:
                    self.log_manager.sync_dirs()
                    await asyncio.sleep(0)
                    config = self.log_config_for(name)  # it may have been altered meanwhile
                    deadline = time.perf_counter() + CREATE_SLICE_S
            self.log_manager.sync_dirs()
        log.info("created %d logs of %s in %.1f s", created, name, time.perf_counter() - t0)

    def _creation_done(self, name: str, task: asyncio.Task) -> None:
        if self._creating.get(name) is task:
            del self._creating[name]
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, errors.KafkaError):
            log.error("creating the logs of %s failed: %s", name, exc)
            return
        if exc is not None:
            log.error("creating the logs of %s failed", name, exc_info=exc)
            return
        if name in self.store.image.topics:
            self.sync_topic(name)  # partitions added after the task's last look
            self.on_ready(name)

    async def logs_ready(self, name: str) -> None:
        """Wait until every local log of ``name`` exists (at once if none is being created)."""
        task = self._creating.get(name)
        if task is not None:
            await asyncio.shield(task)  # a client hanging up must not stop the creation

    def sync_all(self) -> None:
        for name in list(self.store.image.topics):
            self.sync_topic(name)

    def remove_topic(self, name: str) -> None:
        task = self._creating.pop(name, None)
        if task is not None:
            task.cancel()
        for key in [k for k in self.partitions if k[0] == name]:
            self.partitions.pop(key)
            self.log_manager.delete_log(*key)
        self.topic_metrics.remove_topic(name)

    async def close(self) -> None:
        await cancel_and_wait(*self._creating.values())
        self._creating.clear()

    # -- access ----------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise errors.UnknownTopicOrPartitionError(f"this broker has no partition {topic}-{index}")
        return partition

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}

    # -- produce ---------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        index: int,
        records,
        required_acks: int,
        now_ms: int | None = None,
        origin: str = "client",
    ):
        """Append to one partition as leader; raises KafkaError on failure. ``origin``
        "coordinator" lets the group and transaction coordinators write transaction markers."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self.get_partition(topic, index)  # raises
        if self.log_manager.offline_dirs and self.log_manager.is_offline(topic, index):
            raise errors.KafkaStorageErrorError(
                f"{topic}-{index} is in an offline log dir: writes are refused until the broker restarts"
            )
        counters = partition.counters
        counters.produce_requests += 1
        try:
            info = partition.append_as_leader(
                records, required_acks, int(time.time() * 1000) if now_ms is None else now_ms, origin
            )
        except errors.KafkaError:
            counters.failed_produce_requests += 1
            raise
        except OSError as exc:  # the log's dir failed under it
            counters.failed_produce_requests += 1
            self.log_manager._on_log_disk_error(partition.log, exc)
            raise errors.KafkaStorageErrorError(f"{topic}-{index}: {exc.strerror or exc}") from None
        counters.messages_in += info.record_count
        counters.bytes_in += len(records)
        self.on_append((topic, index))
        return partition, info

    # -- delete records ------------------------------------------------------------------

    def delete_records(self, topic: str, index: int, offset: int) -> int:
        """Move a partition's log start offset up to ``offset`` (-1: the high watermark), as
        DeleteRecords does; returns the new log start offset. Raises KafkaError. Internal
        topics are refused (INVALID_TOPIC_EXCEPTION), as in Kafka."""
        info = self.store.image.topics.get(topic)
        if info is not None and info.internal:
            raise errors.InvalidTopicExceptionError(
                f"records of internal topic '{topic}' cannot be deleted: they are its coordinator's state"
            )
        partition = self.get_partition(topic, index)
        partition.check_leader()
        return partition.delete_records_on_leader(offset)

    # -- fetch -----------------------------------------------------------------------------

    def read(
        self,
        plan,
        max_bytes: int,
        isolation_level: int,
        *,
        file_slices: bool = False,
        sizes_only: bool = False,
    ):
        """Read the partitions of a fetch (Kafka's ``readFromLocalLog``): ``plan`` is
        ``(topic, partition, fetch offset, partition max bytes, current leader epoch or -1)``
        in request order. Returns (per topic, in request order, the partitions' results as
        ``protocol.hot_responses.fetch_response`` takes them; total bytes; whether any
        partition failed). Each partition reads up to the high watermark (read_committed: the
        last stable offset, with the aborted transactions its records overlap) and
        ``min(partition max bytes, what is left of max_bytes)``; the first partition with
        data returns at least one whole batch (KIP-74).

        Record data comes back as file slices with ``file_slices`` (the connection sends them
        with zero copy), else as bytes read from the page cache; ``sizes_only`` reads only how
        much there is (a waiting fetch asking whether it can complete).
        """
        partitions = self.partitions
        results: dict[str, list] = {}
        total = 0
        had_error = False
        for topic, index, offset, partition_max, epoch in plan:
            out = results.setdefault(topic, [])
            try:
                partition = partitions.get((topic, index))
                if partition is None:
                    partition = self.get_partition(topic, index)  # raises
                partition.check_leader(epoch)
                budget = min(partition_max, max_bytes - total)
                lso = partition.last_stable_offset
                read = partition.read(
                    offset, max(budget, 0), isolation_level=isolation_level, min_one_message=total == 0
                )
                records = None
                size = 0
                aborted = None
                if read.records is not None:
                    size = read.records.size
                    if not sizes_only and size:
                        records = read.records if file_slices else read.records.read()
                        if isolation_level == 1:
                            aborted = partition.aborted_transactions(offset, read.records, lso)
                total += size
                out.append(
                    (
                        index,
                        0,
                        partition.high_watermark,
                        lso,
                        partition.log_start_offset,
                        (aborted or []) if isolation_level == 1 else None,
                        records if records is not None else b"",
                    )
                )
            except errors.KafkaError as exc:
                had_error = True
                out.append((index, exc.code, -1, -1, -1, None, b""))
        return list(results.items()), total, had_error


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
