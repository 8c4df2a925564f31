"""JBOD for the LogManager: several log dirs, a failed dir, and moving logs between dirs.

A log dir that fails (an I/O error writing its checkpoints, or an append failing in it) is
taken offline (``set_dir_offline``), as Kafka's LogDirFailureChannel does: its partitions
refuse writes with KAFKA_STORAGE_ERROR until a restart (``is_offline``) and stay readable, no
new log goes there (``LogManager._pick_log_dir``), DescribeLogDirs reports it, and the other
dirs keep serving.

Moving a log to another dir (AlterReplicaLogDirs) goes through a future log,
``<topic>-<partition>.<uuid>-future`` in the destination dir, which the broker fills from the
current log while that keeps serving (``odradek.broker.log_dir_mover``), then swaps in with
``replace_current_with_future`` at a moment no append is in flight. The commit point is the
current dir's rename to ``-delete`` (the future is complete and fsynced by then): at start, a
``-future`` dir whose partition still has its current dir is an unfinished move and is removed
(rolled back); one without is a committed move and takes the partition's name.

``LogDirs`` is a mixin of ``LogManager`` (log_manager.py) working on its ``log_dirs``,
``offline_dirs``, ``_logs``, ``_dir_of`` and ``_pending_dir_deletes``; ``_load_moves`` runs at
the end of its loading. Owner thread only, like the LogManager's mutating methods.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import uuid
from typing import TYPE_CHECKING, NamedTuple

from ..protocol.errors import KafkaStorageErrorError, LogDirNotFoundError
from .checkpoint import fsync_dir
from .log import Log, parse_topic_partition

if TYPE_CHECKING:
    from .log_config import LogConfig

# The names LogManager gives these dirs (its DELETE_DIR_SUFFIX and FUTURE_DIR_SUFFIX).
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
    """JBOD, mixed into LogManager: offline dirs and moves through ``-future`` dirs (see the
    module docstring). Owner thread only."""

    # LogManager's, which this mixin works on.
    log_dirs: list[str]
    offline_dirs: dict[str, str]
    _logs: dict[TopicPartition, Log]
    _dir_of: dict[TopicPartition, str]
    _pending_dir_deletes: list[tuple[int, Log]]
    producer_id_expiration_ms: int

    if TYPE_CHECKING:

        def config_for(self, topic: str) -> LogConfig: ...

        def checkpoint_all(self, high_watermarks: dict[TopicPartition, int] | None = None) -> None: ...

    def _load_moves(self, now_ms: int) -> None:
        """At start: finish the committed moves, roll back the unfinished ones."""
        self._futures: dict[TopicPartition, tuple[Log, str]] = {}
        self._preferred_dirs: dict[TopicPartition, str] = {}
        for log_dir in self.log_dirs:
            for entry in os.scandir(log_dir):
                if not (entry.is_dir(follow_symlinks=False) and entry.name.endswith(FUTURE_DIR_SUFFIX)):
                    continue
                stem = entry.name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")[0]
                try:
                    tp = parse_topic_partition(stem)
                except ValueError:
                    continue
                if tp in self._logs:
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
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                )
                self._dir_of[tp] = log_dir

    # ---- a failed dir --------------------------------------------------------------------

    def set_dir_offline(self, log_dir: str, exc: OSError, what: str) -> None:
        """Take ``log_dir`` offline after ``exc`` writing ``what`` (logged once): its partitions
        refuse writes with KAFKA_STORAGE_ERROR and stay readable until a restart; moves into it
        or of its partitions stop."""
        if log_dir in self.offline_dirs:
            return
        name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else type(exc).__name__
        reason = f"log dir {log_dir} is offline after {exc.strerror or exc} ({name}) writing {what}"
        self.offline_dirs[log_dir] = reason
        for tp, (future, d) in list(self._futures.items()):
            if d == log_dir or self._dir_of.get(tp) == log_dir:
                del self._futures[tp]
                try:
                    future.delete()
                except (OSError, ValueError):
                    pass
        lost = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
        _log.error(
            "%s; %d partition(s) refuse writes with KAFKA_STORAGE_ERROR until the broker restarts: %s",
            reason,
            len(lost),
            ", ".join(f"{t}-{p}" for t, p in lost) or "none",
        )

    def _on_log_disk_error(self, log: Log, exc: OSError) -> None:
        self.set_dir_offline(os.path.dirname(log.dir), exc, exc.filename or log.dir)

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log is in a dir that failed."""
        return self._dir_of.get((topic, partition)) in self.offline_dirs

    def _forget_partition(self, topic: str, partition: int) -> None:
        """The partition's log is deleted: no move of it goes on."""
        self.abandon_future_log(topic, partition)

    def check_log_dir(self, log_dir: str) -> str:
        """``log_dir`` as an absolute path; LogDirNotFoundError unless it is one of ``log.dirs``."""
        path = os.path.abspath(log_dir)
        if path not in self.log_dirs:
            raise LogDirNotFoundError(
                f"Log dir {log_dir} is not found in the config ({', '.join(self.log_dirs)})"
            )
        return path

    def describe_dirs(self) -> list[LogDirInfo]:
        """Every log dir with its logs (current and future; none if it is offline) and its
        volume's size (-1 if unknown)."""
        out = []
        for d in self.log_dirs:
            offline = d in self.offline_dirs
            logs, total, usable = [], -1, -1
            if not offline:
                logs = [(tp, log, False) for tp, log in self._logs.items() if self._dir_of[tp] == d]
                logs += [(tp, future, True) for tp, (future, fd) in self._futures.items() if fd == d]
                try:
                    st = os.statvfs(d)
                    total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
                except OSError:
                    pass
            out.append(LogDirInfo(d, offline, logs, total, usable))
        return out

    # ---- placement and moves --------------------------------------------------------------

    def set_preferred_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Create the partition's log in ``log_dir`` when it is created (AlterReplicaLogDirs
        for a replica this broker does not host yet), as Kafka does."""
        self._preferred_dirs[(topic, partition)] = log_dir

    def _preferred_dir(self, tp: TopicPartition) -> str | None:
        preferred = self._preferred_dirs.pop(tp, None)
        return preferred if preferred is not None and preferred not in self.offline_dirs else None

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
            producer_id_expiration_ms=self.producer_id_expiration_ms,
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
