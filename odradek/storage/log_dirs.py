"""JBOD for the LogManager: several log dirs, failed dirs, and moving logs between dirs.

A log dir that fails (cannot be created or written at start, or an I/O error on its
checkpoints or an append) is taken offline, as Kafka's LogDirFailureChannel does: its logs are
closed and forgotten, their partitions answer KAFKA_STORAGE_ERROR until a restart
(``is_offline``), the listeners in ``dir_failure_listeners`` hear of it, and the other dirs keep
serving. New logs go to the online dir with the fewest partitions.

Moving a log to another dir (AlterReplicaLogDirs) goes through a future log,
``<topic>-<partition>.<uuid>-future`` in the destination dir, which the broker fills from the
current log while that keeps serving (``odradek.broker.log_dir_mover``), then swaps in with
``replace_current_with_future`` at a moment no append is in flight. The commit point is the
current dir's rename to ``-delete`` (the future is complete and fsynced by then): at start, a
``-future`` dir whose partition still has its current dir is an unfinished move and is removed
(rolled back); one without is a committed move and takes the partition's name.

``LogDirs`` is a mixin of ``LogManager`` (log_manager.py) working on its ``log_dirs``,
``_logs``, ``_dir_of`` and ``_pending_dir_deletes``. Owner thread only, like the LogManager's
mutating methods (``checkpoint_all`` takes a dir it cannot write offline, so the broker calls
it from the owner thread).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

from ..protocol.errors import KafkaStorageErrorError, LogDirNotFoundError
from .checkpoint import fsync_dir
from .log import Log, parse_topic_partition

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogDirInfo(NamedTuple):
    """One log dir as DescribeLogDirs shows it; ``logs`` are (tp, Log, is_future) triples."""

    path: str
    offline: bool
    logs: list
    total_bytes: int
    usable_bytes: int


class LogDirs:
    def _init_jbod(self) -> None:
        self.offline_dirs: set[str] = set()
        self.dir_failure_listeners: list[Callable[[str, list[TopicPartition]], None]] = []
        self._offline_partitions: dict[TopicPartition, str] = {}
        self._futures: dict[TopicPartition, tuple[Log, str]] = {}
        self._preferred_dirs: dict[TopicPartition, str] = {}
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                if not os.access(d, os.W_OK | os.X_OK):
                    raise PermissionError(f"{d} is not writable")
            except OSError as e:
                _log.error("Log dir %s is unusable and stays offline: %s", d, e)
                self.offline_dirs.add(d)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise RuntimeError(f"Every log dir is unusable: {', '.join(self.log_dirs)}")

    # ---- failed dirs ---------------------------------------------------------------------

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log was in a dir that failed."""
        return (topic, partition) in self._offline_partitions

    def offline_partitions(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` whose log dir failed."""
        return [tp for tp in self._offline_partitions if tp[0] == topic]

    def check_log_dir(self, log_dir: str) -> str:
        """``log_dir`` as an absolute path; LogDirNotFoundError unless it is one of ``log.dirs``."""
        path = os.path.abspath(log_dir)
        if path not in self.log_dirs:
            raise LogDirNotFoundError(
                f"Log dir {log_dir} is not found in the config ({', '.join(self.log_dirs)})"
            )
        return path

    def mark_dir_offline(self, log_dir: str, reason: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline: its logs are closed and forgotten, their partitions
        answer KAFKA_STORAGE_ERROR until a restart. Returns those partitions."""
        if log_dir in self.offline_dirs:
            return []
        self.offline_dirs.add(log_dir)
        lost = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in lost:
            log = self._logs.pop(tp)
            del self._dir_of[tp]
            self._offline_partitions[tp] = log_dir
            try:
                log.close()
            except (OSError, ValueError):
                pass  # its files are what failed
        for tp, (future, d) in list(self._futures.items()):
            if d == log_dir or tp in self._offline_partitions:
                # A move into the failed dir, or of a partition that was in it, cannot finish.
                del self._futures[tp]
                try:
                    if d == log_dir:
                        future.close()
                    else:
                        future.delete()
                except (OSError, ValueError):
                    pass
        _log.error(
            "Log dir %s is offline (%s); %d partition(s) unavailable until a restart: %s",
            log_dir,
            reason,
            len(lost),
            ", ".join(f"{t}-{p}" for t, p in sorted(lost)) or "none",
        )
        for listener in self.dir_failure_listeners:
            listener(log_dir, lost)
        return lost

    def describe_dirs(self) -> list[LogDirInfo]:
        """Every log dir with its logs (current and future) and its volume's size (-1 if unknown)."""
        out = []
        for d in self.log_dirs:
            logs = [(tp, log, False) for tp, log in self._logs.items() if self._dir_of[tp] == d]
            logs += [(tp, future, True) for tp, (future, fd) in self._futures.items() if fd == d]
            total = usable = -1
            if d not in self.offline_dirs:
                try:
                    st = os.statvfs(d)
                    total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
                except OSError:
                    pass
            out.append(LogDirInfo(d, d in self.offline_dirs, logs, total, usable))
        return out

    # ---- placement and moves --------------------------------------------------------------

    def _online_dir_for(self, tp: TopicPartition) -> str:
        """Kafka's choice for a new log: the dir AlterReplicaLogDirs asked for, else the online
        dir holding the fewest partitions."""
        if tp in self._offline_partitions:
            raise KafkaStorageErrorError(
                f"{tp[0]}-{tp[1]} is in the offline log dir {self._offline_partitions[tp]}"
            )
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageErrorError("every log dir is offline")
        preferred = self._preferred_dirs.pop(tp, None)
        if preferred in online:
            return preferred
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def set_preferred_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Create the partition's log in ``log_dir`` when it is created (AlterReplicaLogDirs
        for a replica this broker does not host yet)."""
        self._preferred_dirs[(topic, partition)] = log_dir

    def future_log(self, topic: str, partition: int) -> tuple[Log, str] | None:
        """The future log of a move under way and its destination dir, or None."""
        return self._futures.get((topic, partition))

    def create_future_log(self, topic: str, partition: int, dest: str) -> Log:
        """An empty future log for the partition in ``dest``, starting at its log start offset."""
        tp = (topic, partition)
        if dest in self.offline_dirs:
            raise KafkaStorageErrorError(f"Log dir {dest} is offline")
        self.abandon_future_log(topic, partition)
        current = self._logs[tp]
        path = os.path.join(dest, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
        future = Log(
            path,
            current.config,
            log_start_offset=current.log_start_offset,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
        )
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        future.topic, future.partition = topic, partition
        fsync_dir(dest)
        self._futures[tp] = (future, dest)
        return future

    def abandon_future_log(self, topic: str, partition: int) -> None:
        """Stop a move: the future log and its dir go."""
        entry = self._futures.pop((topic, partition), None)
        if entry is not None:
            entry[0].delete()

    def replace_current_with_future(self, topic: str, partition: int, now_ms: int | None = None) -> Log:
        """Swap the caught-up future log in for the current one. The caller makes sure no
        append is in flight (owner thread) and that both logs end at the same offset. Returns
        the partition's new log."""
        tp = (topic, partition)
        future, dest = self._futures[tp]
        current = self._logs[tp]
        if future.log_end_offset != current.log_end_offset:
            raise RuntimeError(f"the future log of {topic}-{partition} is not caught up")
        future.high_watermark = current.high_watermark
        if current.log_start_offset > future.log_start_offset:
            future.maybe_increment_log_start_offset(current.log_start_offset, now_ms)
        future.flush()
        source = self._dir_of[tp]
        # The commit point: once the current dir is renamed away, the future is the partition's log.
        current.rename_dir(os.path.join(source, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"))
        fsync_dir(source)
        future.rename_dir(os.path.join(dest, f"{topic}-{partition}"))
        fsync_dir(dest)
        del self._futures[tp]
        self._logs[tp] = future
        self._dir_of[tp] = dest
        now = int(time.time() * 1000) if now_ms is None else now_ms
        # Reads in flight on the old files finish first, as for a deleted log.
        self._pending_dir_deletes.append((now + current.config.file_delete_delay_ms, current))
        self.checkpoint_all()
        _log.info("Moved %s-%d from %s to %s", topic, partition, source, dest)
        return future

    def _resolve_future_dirs(self, now_ms: int) -> None:
        """At start: finish the committed moves, roll back the unfinished ones."""
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            for entry in os.scandir(log_dir):
                if not (entry.is_dir(follow_symlinks=False) and entry.name.endswith(FUTURE_DIR_SUFFIX)):
                    continue
                stem = entry.name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")[0]
                try:
                    tp = parse_topic_partition(stem)
                except ValueError:
                    continue
                if tp in self._logs or tp in self._offline_partitions:
                    _log.info("Rolling back the unfinished move of %s-%d to %s", tp[0], tp[1], log_dir)
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                target = os.path.join(log_dir, stem)
                os.replace(entry.path, target)
                fsync_dir(log_dir)
                _log.info("Finishing the move of %s-%d to %s", tp[0], tp[1], log_dir)
                self._logs[tp] = Log(
                    target,
                    self.config_for(tp[0]),
                    had_clean_shutdown=False,
                    now_ms=now_ms,
                    producer_id_expiration_ms=self._producer_id_expiration_ms,
                )
                self._dir_of[tp] = log_dir
