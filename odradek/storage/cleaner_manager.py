"""The log cleaner service: which log to compact next (Kafka's LogCleanerManager), the
``cleaner-offset-checkpoint`` files, and the cleaner threads (Kafka's LogCleaner).

Choosing a log (``LogCleanerManager.grab_filthiest``, owner thread). For each log whose
``cleanup.policy`` includes ``compact`` and that nobody is cleaning:

* first dirty offset: the log's entry in its log dir's ``cleaner-offset-checkpoint``, or the
  log start offset if it has none or it lies outside [log start, log end];
* first uncleanable offset: the smallest of the active segment's base offset (the active
  segment is never cleaned), the high watermark, and — with ``min.compaction.lag.ms`` — the
  base offset of the first segment holding a record younger than the lag;
* dirty ratio = cleanable bytes / (clean bytes + cleanable bytes), by whole segments below
  and from the first dirty offset (Kafka's arithmetic).

A log qualifies when its ratio exceeds ``min.cleanable.dirty.ratio``, or when
``max.compaction.lag.ms`` has passed since its first dirty segment's first batch and it has
cleanable bytes; the highest ratio wins. If none qualifies, a log whose earliest kept
tombstone's delete horizon has passed (remembered from its last pass, in memory) is cleaned
so the tombstones go without waiting for new data. Chosen logs are marked ``log.cleaning``
until ``done_cleaning``; retention skips them meanwhile (``LogManager.cleanup``).

Checkpoint: ``cleaner-offset-checkpoint`` in each log dir, Kafka's offset checkpoint format
(``topic partition offset``), rewritten atomically after every pass with the new first dirty
offset of each of its logs still present. A crash between a swap and the checkpoint only
means the next pass re-cleans what is already clean.

Threads (``LogCleaner``): ``log.cleaner.threads`` daemon threads, each with its own offset
map (``log.cleaner.dedupe.buffer.size`` split between them) and one shared ``Throttler``.
A thread asks the owner for a plan, cleans, reports back, and sleeps
``log.cleaner.backoff.ms`` when nothing qualifies. In the broker each thread delegates the
pass itself to its own worker process (``cleaner_worker``: no GIL contention with the event
loop) and relays the worker's swaps to the owner. Everything touching the LogManager or a
Log goes through ``call_owner(fn, *args)``, which runs ``fn`` on the owner thread and
returns its result: ``loop_caller(loop)`` for the broker's event loop, or a direct call
when the caller is the owner (``clean_once`` in tests and benchmarks, no threads).
``shutdown`` stops the threads (a pass in progress is abandoned, its ``.cleaned`` files
removed) and must run before ``LogManager.shutdown`` and off the event loop (the threads
may be waiting on it): ``await asyncio.to_thread(cleaner.shutdown)``.

Configuration: ``log.cleaner.enable``/``threads`` (no threads when off or 0: compacted logs
are then never cleaned, as in Kafka), ``dedupe.buffer.size`` and ``io.buffer.size`` (split
per thread; half the I/O buffer reads, half writes), ``io.buffer.load.factor`` (map fill),
``io.max.bytes.per.second`` (reads + writes, shared; split per worker process),
``backoff.ms``; per topic ``min.cleanable.dirty.ratio``, ``min/max.compaction.lag.ms``,
``delete.retention.ms``, ``segment.bytes`` (group size).

Thread rules: ``LogCleanerManager`` is owned by the owner thread, except
``write_checkpoint`` (any thread; serialised by a lock) and ``checkpoint`` (a read).
``LogCleaner.start``/``shutdown`` from the owner's side; ``passes``/``aborted``/``results``
are counters and a deque, safe to read anywhere.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from .cleaner import Cleaner, CleanerAborted, CleaningPlan, CleanResult, Throttler
from .cleaner_worker import WorkerDied, WorkerProcess, remove_cleaned_files
from .log_config import LONG_MAX

if TYPE_CHECKING:
    from .log import Log
    from .log_manager import LogManager

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` keys, with Kafka's defaults."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000

    @classmethod
    def from_getter(cls, get) -> CleanerConfig:
        """From a broker config's ``get(key)``."""
        rate = float(get("log.cleaner.io.max.bytes.per.second"))
        return cls(
            enable=bool(get("log.cleaner.enable")),
            threads=int(get("log.cleaner.threads")),
            dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size")),
            io_buffer_size=int(get("log.cleaner.io.buffer.size")),
            io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor")),
            max_io_bytes_per_second=float("inf") if rate >= 1.7e308 else rate,
            backoff_ms=int(get("log.cleaner.backoff.ms")),
        )


@dataclass
class DirtyStats:
    """What ``grab_filthiest`` measured of one log: its dirty range and byte counts."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class LogCleanerManager:
    """Which compacted log to clean next, and the ``cleaner-offset-checkpoint`` of each log
    dir (``topic partition offset`` lines). Owned by the owner thread; the cleaner threads
    reach it through ``call_owner``."""

    def __init__(self, log_manager: LogManager):
        self.log_manager = log_manager
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        self._owners: dict[TopicPartition, Log] = {}  # the Log a checkpoint entry belongs to
        self._in_progress: dict[TopicPartition, CleaningPlan] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._horizons: dict[TopicPartition, int] = {}
        self._write_lock = threading.Lock()
        for log_dir in log_manager.log_dirs:
            path = os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)
            try:
                entries = read_offset_checkpoint(path)
            except (CheckpointError, OSError) as e:
                _log.warning("Ignoring unreadable %s: %s", path, e)
                entries = {}
            self._checkpoints[log_dir] = entries
            for tp in entries:
                log = log_manager.get_log(*tp)
                if log is not None:
                    self._owners[tp] = log

    # ---- dirtiness (owner thread) -----------------------------------------------------

    def _recorded(self, tp: TopicPartition) -> int | None:
        """The first dirty offset the checkpoint of ``tp``'s log dir records for it."""
        log_dir = self.log_manager.log_dir_of(*tp)
        return None if log_dir is None else self._checkpoints.get(log_dir, {}).get(tp)

    def first_dirty_offset(self, tp: TopicPartition, log: Log) -> int:
        offset = self._recorded(tp)
        start = log.log_start_offset
        if offset is None or self._owners.get(tp) is not log or not start <= offset <= log.log_end_offset:
            return start
        return offset

    def dirty_stats(self, tp: TopicPartition, log: Log, now_ms: int) -> DirtyStats:
        cfg = log.config
        segments = log.segments
        first_dirty = self.first_dirty_offset(tp, log)
        uncleanable = min(segments[-1].base_offset, log.high_watermark)
        nexts = [seg.base_offset for seg in segments[1:]] + [log.log_end_offset]
        if cfg.min_compaction_lag_ms > 0:
            horizon = now_ms - cfg.min_compaction_lag_ms
            for seg, nxt in zip(segments[:-1], nexts, strict=False):
                if nxt > first_dirty and seg.largest_timestamp > horizon:
                    uncleanable = min(uncleanable, seg.base_offset)
                    break
        first_dirty = min(first_dirty, uncleanable)
        clean = cleanable = 0
        first_dirty_segment = None
        for seg, nxt in zip(segments, nexts, strict=True):
            if seg.base_offset < first_dirty:
                clean += seg.size
            if seg.base_offset < uncleanable and nxt > first_dirty:
                cleanable += seg.size
                if first_dirty_segment is None:
                    first_dirty_segment = seg
        need_now = False
        if cfg.max_compaction_lag_ms < LONG_MAX and first_dirty_segment is not None and cleanable:
            first_ts = first_dirty_segment.first_batch_timestamp
            if first_ts is None or first_ts < 0:
                first_ts = first_dirty_segment.largest_timestamp
            need_now = now_ms - first_ts > cfg.max_compaction_lag_ms
        return DirtyStats(first_dirty, uncleanable, clean, cleanable, need_now)

    def grab_filthiest(self, now_ms: int | None = None) -> CleaningPlan | None:
        """The log most worth cleaning now, marked in progress; None if none qualifies."""
        now = _now_ms() if now_ms is None else now_ms
        best = None
        best_ratio = -1.0
        tombstone_due = None
        for tp, log in self.log_manager.items():
            if not log.config.compact or log.cleaning or tp in self._in_progress or tp in self._uncleanable:
                continue
            stats = self.dirty_stats(tp, log, now)
            ratio = stats.ratio
            if (
                stats.need_compaction_now and stats.cleanable_bytes
            ) or ratio > log.config.min_cleanable_dirty_ratio:
                if ratio > best_ratio:
                    best, best_ratio = (tp, log, stats), ratio
            elif tombstone_due is None:
                horizon = self._horizons.get(tp)
                if horizon is not None and horizon <= now and len(log.segments) > 1:
                    tombstone_due = (tp, log, stats)
        chosen = best or tombstone_due
        if chosen is None:
            return None
        tp, log, stats = chosen
        segments = log.segments
        producers = log.producer_state.producers
        plan = CleaningPlan(
            log=log,
            topic=tp[0],
            partition=tp[1],
            dir=log.dir,
            segments=segments,
            sizes=[seg.size for seg in segments],
            first_dirty=stats.first_dirty,
            first_uncleanable=stats.first_uncleanable,
            truncations=log.truncations,
            config=log.config,
            producer_last_offsets={pid: e.last_offset for pid, e in producers.items() if e.batches},
            now_ms=now,
            dirty_ratio=stats.ratio,
        )
        log.cleaning = True
        self._in_progress[tp] = plan
        return plan

    def done_cleaning(
        self, plan: CleaningPlan, result: CleanResult | None, failed: bool = False
    ) -> tuple[str, dict[TopicPartition, int]] | None:
        """Owner thread: release the log; on success record its new first dirty offset and
        return ``(log dir, entries)`` for ``write_checkpoint``."""
        tp = (plan.topic, plan.partition)
        self._in_progress.pop(tp, None)
        log = plan.log
        assert log is not None, "a plan made on the owner thread has its log"
        log.cleaning = False
        if failed:
            self._uncleanable.add(tp)
        if result is None:
            return None
        if result.min_delete_horizon is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = result.min_delete_horizon
        log_dir = self.log_manager.log_dir_of(*tp)
        if log_dir is None or self.log_manager.get_log(*tp) is not log:
            return None  # deleted meanwhile
        self._checkpoints.setdefault(log_dir, {})[tp] = result.end_offset
        self._owners[tp] = log
        return log_dir, self._checkpoint_entries(log_dir)

    def _checkpoint_entries(self, log_dir: str) -> dict[TopicPartition, int]:
        lm = self.log_manager
        entries = self._checkpoints.get(log_dir, {})
        live = {tp: off for tp, off in entries.items() if lm.log_dir_of(*tp) == log_dir}
        self._checkpoints[log_dir] = live
        return dict(live)

    def write_checkpoint(self, log_dir: str, entries: dict[TopicPartition, int]) -> None:
        """Any thread: rewrite ``log_dir``'s cleaner-offset-checkpoint."""
        with self._write_lock:
            write_offset_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), entries)

    def checkpoint(self, topic: str, partition: int) -> int | None:
        """The recorded first dirty offset of a log (for tests and tools)."""
        return self._recorded((topic, partition))

    @property
    def uncleanable(self) -> set[TopicPartition]:
        return set(self._uncleanable)


def direct_caller(fn, *args):
    return fn(*args)


def loop_caller(loop):
    """A ``call_owner`` running functions on ``loop`` (call this on the loop's thread)."""
    owner = threading.get_ident()

    def call(fn, *args):
        if threading.get_ident() == owner:
            return fn(*args)
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the cleaner thread
                fut.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError as exc:  # loop closed
            raise CleanerAborted("the event loop is closed") from exc
        while True:
            try:
                return fut.result(timeout=0.5)
            except concurrent.futures.TimeoutError:
                if loop.is_closed() or not loop.is_running():
                    fut.cancel()
                    raise CleanerAborted("the event loop stopped") from None

    return call


class LogCleaner:
    """``log.cleaner.threads`` threads compacting the LogManager's compacted logs.

    With ``use_processes`` (the broker's choice) each thread hands its passes to its own worker
    process (``cleaner_worker``) and only relays swaps to the owner; without, the thread cleans
    itself (tests; ``clean_once`` always does). The throttle rate is then split between workers.
    """

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        call_owner=None,
        use_processes: bool = False,
    ):
        self.config = config or CleanerConfig()
        self.manager = LogCleanerManager(log_manager)
        self.call_owner = call_owner or direct_caller
        self.use_processes = use_processes
        self._stop = threading.Event()
        self.throttler = Throttler(self.config.max_io_bytes_per_second)
        n = max(self.config.threads, 1)
        self.cleaners = [
            Cleaner(
                map_memory=self.config.dedupe_buffer_size // n,
                load_factor=self.config.io_buffer_load_factor,
                io_buffer_size=self.config.io_buffer_size // n // 2,  # Kafka: half to read, half to write
                throttler=self.throttler,
                call_owner=self.call_owner,
                stop=self._stop,
                name=f"odradek-log-cleaner-{i}",
            )
            for i in range(n)
        ]
        self._threads: list[threading.Thread] = []
        self.results: deque[tuple[str, int, CleanResult]] = deque(maxlen=100)
        self.passes = 0
        self.aborted = 0

    @property
    def enabled(self) -> bool:
        return self.config.enable and self.config.threads > 0

    def start(self) -> None:
        if not self.enabled or self._threads:
            return
        for cleaner in self.cleaners[: self.config.threads]:
            t = threading.Thread(target=self._run, args=(cleaner,), name=cleaner.name, daemon=True)
            self._threads.append(t)
            t.start()

    def _new_worker(self) -> WorkerProcess:
        cfg = self.config
        n = max(cfg.threads, 1)
        return WorkerProcess(
            map_memory=cfg.dedupe_buffer_size // n,
            load_factor=cfg.io_buffer_load_factor,
            io_buffer_size=cfg.io_buffer_size // n // 2,
            rate=cfg.max_io_bytes_per_second / n,
        )

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Stop and join the threads (blocking: call it off the event loop). Safe twice."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []

    def clean_once(self, now_ms: int | None = None, cleaner: int = 0) -> CleanResult | None:
        """One pass over the filthiest log, in this thread (which must be the owner's)."""
        return self._pass(self.cleaners[cleaner], now_ms)

    def _run(self, cleaner: Cleaner) -> None:
        backoff = self.config.backoff_ms / 1000
        worker = self._new_worker() if self.use_processes else None
        try:
            while not self._stop.is_set():
                try:
                    result = self._pass(cleaner, worker=worker)
                except CleanerAborted:
                    return  # the owner is gone
                except Exception:
                    _log.exception("log cleaner thread %s failed; backing off", cleaner.name)
                    result = None
                if result is None:
                    self._stop.wait(backoff)
        finally:
            if worker is not None:
                worker.stop()

    def _pass(self, cleaner: Cleaner, now_ms: int | None = None, worker=None) -> CleanResult | None:
        plan = self.call_owner(self.manager.grab_filthiest, now_ms)
        if plan is None:
            return None
        result = None
        failed = False
        try:
            if worker is None:
                result = cleaner.clean(plan)
            else:
                result = worker.run(plan, cleaner.swap, lambda: self._stop.is_set() or plan.changed())
        except CleanerAborted as e:
            self.aborted += 1
            _log.info("Cleaning of %s-%d abandoned: %s", plan.topic, plan.partition, e)
        except WorkerDied as e:
            self.aborted += 1
            _log.error("The cleaner's worker process died cleaning %s-%d: %s", plan.topic, plan.partition, e)
            worker.stop()
            remove_cleaned_files(plan.dir)
        except Exception:
            failed = True
            _log.exception("Cleaning of %s-%d failed; it is marked uncleanable", plan.topic, plan.partition)
        finally:
            done = self.call_owner(self.manager.done_cleaning, plan, result, failed)
        if done is not None:
            self.manager.write_checkpoint(*done)
        if result is None:
            return None
        self.passes += 1
        self.results.append((plan.topic, plan.partition, result))
        mb = result.bytes_read / 1e6
        _log.info(
            "Cleaned %s-%d: dirty [%d, %d) ratio %.2f, %d group(s), %.2f MB read, %.2f MB written in "
            "%.2f s (%.1f MB/s)",
            plan.topic,
            plan.partition,
            plan.first_dirty,
            result.end_offset,
            plan.dirty_ratio,
            result.groups,
            mb,
            result.bytes_written / 1e6,
            result.elapsed_s,
            mb / result.elapsed_s if result.elapsed_s else 0.0,
        )
        return result
