"""LogManager: every partition log in the broker's log dirs, their loading and checkpoints.

Each log dir (``log.dirs``) holds, as in Kafka::

    meta.properties                        version, node.id, cluster.id (checkpoint.py)
    .kafka_cleanshutdown                   present only between a clean shutdown and the next load
    recovery-point-offset-checkpoint       topic partition offset (everything below is fsynced)
    log-start-offset-checkpoint
    replication-offset-checkpoint          high watermarks
    cleaner-offset-checkpoint              first dirty offsets (cleaner_manager.py owns it)
    <topic>-<partition>/                   one Log each
    <topic>-<partition>.<uuid>-delete/     a deleted log awaiting removal
    <topic>-<partition>.<uuid>-future/     a log being moved here from another dir (log_dirs.py)

Startup: with the clean-shutdown marker the logs are trusted and opened quickly; without it
each log re-validates its segments from its checkpointed recovery point (torn tails cut,
indexes rebuilt). The marker is removed once everything is loaded, so a crash from then on
is seen as unclean next time. ``shutdown`` flushes, closes, checkpoints, then writes it.

Retention (``cleanup``) skips a log while the cleaner works on it (``log.cleaning``), as
Kafka's does, and a deleted log's files are closed only once the cleaner has let go of it.

A failed write (a full disk, an I/O error) takes its log dir offline, as Kafka's
LogDirFailureChannel does: logged once, every log in it refuses further writes with
KAFKA_STORAGE_ERROR and stays readable, no new log goes there, and flushes, checkpoints,
retention and the clean-shutdown marker skip it, so the next start recovers it (read-only
again if the disk is still full). Nothing acknowledged is lost: a failed append is undone.

Loading opens no file for good: each log releases its descriptors once loaded (see
segment.LogSegment.release), so a data dir of any size loads within a small
RLIMIT_NOFILE; a partition holds descriptors from its first use on (see fd_budget).

Thread rules: the broker's event loop owns the manager (create/delete/get, ``cleanup``,
``shutdown``). ``flush_due`` and ``checkpoint_all`` may run in a worker thread. Stop the
log cleaner (``cleaner_manager.LogCleaner.shutdown``) before ``shutdown``.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterable

from ..protocol import errors
from .checkpoint import (
    LOG_MANAGER_CHECKPOINTS,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    fsync_dir,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from .log import Log, parse_topic_partition
from .log_config import LogConfig
from .log_dirs import LogDirs
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogManager(LogDirs):
    """Every partition log in the broker's log dirs, with their checkpoint files and the
    clean-shutdown marker (see the module docstring). Owned by the broker's event loop;
    ``flush_due`` and ``checkpoint_all`` may run in a worker thread."""

    def __init__(
        self,
        log_dirs: str | Iterable[str],
        default_config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig] | None = None,
        now_ms: int | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ):
        if isinstance(log_dirs, str):
            log_dirs = [d for d in log_dirs.split(",") if d]
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("At least one log dir is required")
        self.default_config = default_config or LogConfig()
        self._config_for = config_for
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._pending_dir_deletes: list[tuple[int, Log]] = []
        self.had_clean_shutdown: dict[str, bool] = {}
        self.offline_dirs: dict[str, str] = {}  # log dir -> why it went offline
        self.on_dir_offline = None  # called with a log dir when it goes offline (from any thread)
        self._closed = False
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
        self._load_logs(_now_ms() if now_ms is None else now_ms)

    # ---- loading -----------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        if self._config_for is not None:
            cfg = self._config_for(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(os.path.join(log_dir, name))
        except (CheckpointError, OSError) as e:
            _log.warning("Ignoring unreadable checkpoint %s in %s: %s", name, log_dir, e)
            return {}

    def _load_logs(self, now_ms: int) -> None:
        configs: dict[str, LogConfig] = {}  # one per topic: building one costs more than loading a log
        for log_dir in self.log_dirs:
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            self.had_clean_shutdown[log_dir] = clean
            recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            for entry in os.scandir(log_dir):
                name = entry.name
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                if name.endswith((FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
                    continue
                try:
                    tp = parse_topic_partition(name)
                except ValueError:
                    continue
                if tp in self._logs:
                    raise RuntimeError(
                        f"Duplicate log directories for {tp[0]}-{tp[1]}: {self._dir_of[tp]} and {log_dir}"
                    )
                config = configs.get(tp[0])
                if config is None:
                    config = configs[tp[0]] = self.config_for(tp[0])
                log = Log(
                    entry.path,
                    config,
                    log_start_offset=start_offsets.get(tp, 0),
                    recovery_point=recovery_points.get(tp, 0),
                    high_watermark=high_watermarks.get(tp),
                    had_clean_shutdown=clean,
                    now_ms=now_ms,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                    on_disk_error=self._on_log_disk_error,
                )
                self._logs[tp] = log
                self._dir_of[tp] = log_dir
            if log_dir in self.offline_dirs:
                for tp, d in self._dir_of.items():
                    if d == log_dir:
                        self._logs[tp].set_offline(self.offline_dirs[log_dir])
            if clean:
                os.unlink(marker)
                fsync_dir(log_dir)
        self._load_moves(now_ms)

    # ---- failed log dirs ---------------------------------------------------------------

    def _on_log_disk_error(self, log: Log, exc: OSError) -> None:
        self.set_dir_offline(os.path.dirname(log.dir), exc, exc.filename or log.dir)

    def set_dir_offline(self, log_dir: str, exc: OSError, what: str) -> None:
        """Take ``log_dir`` offline after ``exc`` (logged once per dir; any thread)."""
        if log_dir in self.offline_dirs:
            return
        name = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else type(exc).__name__
        reason = f"log dir {log_dir} is offline after {exc.strerror or exc} ({name}) writing {what}"
        self.offline_dirs[log_dir] = reason
        fix = "free space on its disk" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "repair its disk"
        _log.error(
            "%s. Its partitions stay readable but refuse writes with KAFKA_STORAGE_ERROR; "
            "%s, then restart the broker",
            reason,
            fix,
        )
        for tp, d in list(self._dir_of.items()):
            if d == log_dir:
                log = self._logs.get(tp)
                if log is not None:
                    log.set_offline(reason)
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir)

    def is_offline(self, topic: str, partition: int) -> bool:
        return self._dir_of.get((topic, partition)) in self.offline_dirs

    # ---- access ------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def items(self) -> list[tuple[TopicPartition, Log]]:
        return list(self._logs.items())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding the partition's directory."""
        return self._dir_of.get((topic, partition))

    def partitions(self) -> list[TopicPartition]:
        return list(self._logs)

    def __len__(self) -> int:
        return len(self._logs)

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._logs

    def _pick_log_dir(self) -> str:
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise errors.KafkaStorageErrorError(
                "every log dir is offline: " + "; ".join(self.offline_dirs.values())
            )
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, *, sync_dir: bool = True
    ) -> Log:
        """The partition's log, created if it has none. ``sync_dir=False`` leaves the fsync of
        the parent directory to the caller (``sync_dirs``), for creating many at once."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            if config is not None and config != log.config:
                log.update_config(config)
            return log
        if not topic or "/" in topic or topic in (".", "..") or partition < 0:
            raise ValueError(f"Invalid topic partition {topic!r} {partition}")
        log_dir = self._preferred_dir(tp) or self._pick_log_dir()
        path = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            log = Log(
                path,
                config or self.config_for(topic),
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                on_disk_error=self._on_log_disk_error,
            )
            if sync_dir:
                fsync_dir(log_dir)
        except OSError as e:
            self.set_dir_offline(log_dir, e, path)
            raise errors.KafkaStorageErrorError(f"Cannot create the log of {topic}-{partition}: {e}") from e
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def sync_dirs(self) -> None:
        """fsync every log dir (after creating logs with ``sync_dir=False``)."""
        for log_dir in self.log_dirs:
            if log_dir not in self.offline_dirs:
                fsync_dir(log_dir)

    def delete_log(self, topic: str, partition: int, *, now_ms: int | None = None) -> bool:
        """Rename the log's dir to ``<topic>-<partition>.<uuid>-delete``; remove it after
        ``file.delete.delay.ms`` (``cleanup``) so in-flight reads finish. Returns whether it existed.
        """
        tp = (topic, partition)
        self._forget_partition(topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        log_dir = self._dir_of.pop(tp)
        now = _now_ms() if now_ms is None else now_ms
        target = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        log.rename_dir(target)
        fsync_dir(log_dir)
        delay = log.config.file_delete_delay_ms
        if delay <= 0 and not log.cleaning:
            log.delete()
        else:
            self._pending_dir_deletes.append((now + delay, log))
        return True

    # ---- periodic work -----------------------------------------------------------------

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush logs whose ``flush.ms`` passed or that rolled since their last flush (worker-safe)."""
        now = _now_ms() if now_ms is None else now_ms
        n = 0
        for log in list(self._logs.values()):
            try:
                if log.flush_if_due(now):
                    n += 1
            except OSError as e:
                self._on_log_disk_error(log, e)
        return n

    def expire_producers(self, now_ms: int | None = None) -> None:
        """Forget producer ids idle for ``producer.id.expiration.ms`` (owner thread; the broker
        runs it every ``producer.id.expiration.check.interval.ms``)."""
        now = _now_ms() if now_ms is None else now_ms
        for log in list(self._logs.values()):
            if log.offline_reason is None:
                log.remove_expired_producers(now)

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention and removal of files and dirs whose delete delay passed (owner thread;
        Kafka runs these every few minutes). Returns segments deleted.
        """
        now = _now_ms() if now_ms is None else now_ms
        n = 0
        for log in list(self._logs.values()):
            if log.offline_reason is not None:
                continue  # as in Kafka, an offline dir is left alone until the restart
            try:
                if not log.cleaning:
                    n += log.enforce_retention(now)
                    log.delete_expired_files(now)
            except OSError as e:
                self._on_log_disk_error(log, e)
        keep = []
        for deadline, log in self._pending_dir_deletes:
            if now >= deadline and not log.cleaning:
                log.delete()
            else:
                keep.append((deadline, log))
        self._pending_dir_deletes = keep
        return n

    def checkpoint_all(
        self,
        high_watermarks: dict[TopicPartition, int] | None = None,
        files: Collection[str] = LOG_MANAGER_CHECKPOINTS,
    ) -> None:
        """Write the recovery-point, log-start-offset and replication-offset checkpoints of every
        log dir, or those of them named in ``files`` (each has its own interval).
        ``high_watermarks`` overrides the logs' own values (worker-safe).
        """
        by_dir: dict[str, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
        for tp, log in list(self._logs.items()):
            by_dir[self._dir_of[tp]].append((tp, log))
        for log_dir, items in by_dir.items():
            if log_dir in self.offline_dirs:
                continue
            for name in files:
                if name == RECOVERY_POINT_CHECKPOINT:
                    offsets = {tp: log.recovery_point for tp, log in items}
                elif name == LOG_START_OFFSET_CHECKPOINT:
                    offsets = {tp: log.log_start_offset for tp, log in items}
                else:
                    offsets = {}
                    for tp, log in items:
                        hw = high_watermarks.get(tp) if high_watermarks else None
                        offsets[tp] = log.high_watermark if hw is None else hw
                path = os.path.join(log_dir, name)
                try:
                    write_offset_checkpoint(path, offsets)
                except OSError as e:
                    self.set_dir_offline(log_dir, e, path)
                    break

    def ensure_meta_properties(self, node_id: int, cluster_id: str) -> None:
        """Check each log dir's ``meta.properties`` matches (or write it if missing)."""
        for log_dir in self.log_dirs:
            props = read_meta_properties(log_dir)
            if props is None:
                write_meta_properties(log_dir, node_id, cluster_id)
                continue
            if props.get("node.id") not in (None, str(node_id)):
                raise RuntimeError(
                    f"{log_dir}/meta.properties has node.id {props.get('node.id')}, not {node_id}"
                )
            if props.get("cluster.id") not in (None, cluster_id):
                raise RuntimeError(
                    f"{log_dir}/meta.properties has cluster.id {props.get('cluster.id')}, not {cluster_id}"
                )

    # ---- shutdown ----------------------------------------------------------------------

    def shutdown(self, high_watermarks: dict[TopicPartition, int] | None = None) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown markers."""
        if self._closed:
            return
        self._closed = True
        for log in self._logs.values():
            try:
                log.flush()
            except OSError as e:
                self._on_log_disk_error(log, e)
            log.close()  # writes what it can; a failure takes the dir offline
        for _deadline, log in self._pending_dir_deletes:
            log.delete()
        self._pending_dir_deletes = []
        self.checkpoint_all(high_watermarks)
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                _log.warning(
                    "Not marking %s as cleanly shut down (%s): the next start recovers its logs",
                    log_dir,
                    self.offline_dirs[log_dir],
                )
                continue
            try:
                fd = os.open(
                    os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
                )
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                _log.warning(
                    "Cannot write the clean-shutdown marker of %s: %s; the next start recovers it", log_dir, e
                )
                continue
            fsync_dir(log_dir)
