"""Moving partition replicas between this broker's log dirs (AlterReplicaLogDirs, KIP-113).

Kafka's ReplicaAlterLogDirsThread as one asyncio task per move. The partition keeps serving
from its current log while the task copies it, batch by batch and a megabyte at a time, into a
future log in the destination dir (``LogManager.create_future_log``): the future log takes the
batches as a follower would (``append_as_follower``: offsets, producer state, transaction
markers and leader epochs come with them), and follows the current log's start offset when
retention or DeleteRecords move it. Once the future log has caught up it is fsynced off the
event loop; then, in one synchronous step on the loop — so no append is in flight — the few
batches written meanwhile are copied, the latest leader epochs and producer states carried
over, and ``LogManager.replace_current_with_future`` swaps the logs (see storage/log_dirs.py
for the commit point and what a restart finishes or rolls back). A move waits while the log
cleaner works on the partition. Asking for another destination restarts the move; a deleted
topic or a failed dir ends it.

Owned by the broker's event loop; the tasks are the broker's background tasks, cancelled at
shutdown (an unfinished move is then rolled back at the next start).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol import errors
from odradek.storage.log import UnexpectedAppendOffsetError

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # copied per step before yielding the event loop


class LogDirMover:
    def __init__(self, broker):
        self.broker = broker
        self._tasks: dict[tuple[str, int], asyncio.Task] = {}

    @classmethod
    def of(cls, broker) -> LogDirMover:
        """The broker's mover, created on first use."""
        mover = getattr(broker, "log_dir_mover", None)
        if mover is None:
            mover = broker.log_dir_mover = cls(broker)
        return mover

    def move(self, topic: str, partition: int, dest: str) -> None:
        """Start moving the replica to log dir ``dest``; raises the KafkaError Kafka answers
        with (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE)."""
        lm = self.broker.log_manager
        dest = lm.check_log_dir(dest)
        if dest in lm.offline_dirs:
            raise errors.KafkaStorageErrorError(f"Log dir {dest} is offline")
        if lm.is_offline(topic, partition):
            raise errors.KafkaStorageErrorError(f"{topic}-{partition} is in an offline log dir")
        tp = (topic, partition)
        moving = lm.future_log(topic, partition)
        if moving is not None and moving[1] == dest:
            return  # already on its way there
        if moving is not None:
            self._stop(tp)
        current = lm.log_dir_of(topic, partition)
        if current is None:
            # Kafka: the replica is created there when it arrives, and the answer says it is not here yet.
            lm.set_preferred_dir(topic, partition, dest)
            raise errors.ReplicaNotAvailableError(f"this broker has no replica of {topic}-{partition} yet")
        if current == dest:
            return
        future = lm.create_future_log(topic, partition, dest)
        log.info("Moving %s-%d from %s to %s", topic, partition, current, dest)
        task = asyncio.get_running_loop().create_task(self._run(tp, future), name=f"move-{topic}-{partition}")
        self._tasks[tp] = task
        self.broker._tasks.append(task)  # cancelled and awaited at shutdown

    def _stop(self, tp) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self.broker.log_manager.abandon_future_log(*tp)

    async def _run(self, tp, future) -> None:
        lm = self.broker.log_manager
        try:
            while True:
                current = self._still_moving(tp, future)
                if current is None:
                    return
                _catch_up(current, future, CHUNK_BYTES)
                if future.log_end_offset < current.log_end_offset:
                    await asyncio.sleep(0)
                    continue
                await asyncio.to_thread(future.flush)
                current = self._still_moving(tp, future)
                if current is None:
                    return
                if current.cleaning:  # the cleaner's pass holds this log; try again shortly
                    await asyncio.sleep(0.05)
                    continue
                # From here to the swap nothing awaits: no append can come in between.
                _catch_up(current, future, None)
                _carry_over(current, future)
                new = lm.replace_current_with_future(*tp)
                partition = self.broker.replica_manager.partitions.get(tp)
                if partition is not None:
                    partition.log = new
                return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Moving %s-%d failed; it stays where it was", *tp)
            if lm.future_log(*tp) is not None and lm.future_log(*tp)[0] is future:
                lm.abandon_future_log(*tp)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    def _still_moving(self, tp, future):
        """The current log if this move is still wanted, else None."""
        lm = self.broker.log_manager
        entry = lm.future_log(*tp)
        if entry is None or entry[0] is not future:
            return None
        return lm.get_log(*tp)


def _catch_up(current, future, budget: int | None) -> None:
    """Copy batches from ``current`` to ``future`` until both end at the same offset, or
    ``budget`` bytes have been copied."""
    copied = 0
    while future.log_end_offset < current.log_end_offset:
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)  # retention went past us
        read = current.read(future.log_end_offset, CHUNK_BYTES)
        if read.records is None:
            return
        first = read.records.first_offset
        if first < future.log_end_offset:
            # The batch holding our position starts before it: we are at the log start offset,
            # inside the first batch (the future log then starts at that batch, and takes the
            # current log start offset at the swap), or compaction rewrote the batches around
            # our position (then the copy starts over).
            if future.size:
                future.truncate_fully_and_start_at(current.log_start_offset)
                continue
            future.truncate_fully_and_start_at(first)
        data = read.records.read()
        try:
            info = future.append_as_follower(data)
        except UnexpectedAppendOffsetError:
            future.truncate_fully_and_start_at(current.log_start_offset)  # as above: start over
            continue
        if info is None:
            return
        copied += len(data)
        if budget is not None and copied >= budget:
            return


def _carry_over(current, future) -> None:
    """What the batches do not say: leader epochs begun without a batch yet, and producers
    whose batches retention removed."""
    latest = future.leader_epoch_cache.latest_epoch
    for epoch, start in current.leader_epoch_cache.entries():
        if latest is None or epoch > latest:
            future.leader_epoch_cache.assign(epoch, start)
    for producer_id, entry in current.producer_state.producers.items():
        future.producer_state.producers.setdefault(producer_id, entry)
