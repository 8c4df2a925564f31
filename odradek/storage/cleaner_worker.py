"""The cleaner's worker process: compaction passes run here, off the broker's GIL.

Why a process: cleaning is CPU-bound Python (record scanning, key hashing). In a thread it
holds the GIL half the time and halves what the event loop can do; in its own process it
runs on another core, at a lower scheduling priority (``nice`` +10), and the broker's loop
only sees a few renames per swap.

``WorkerProcess`` (in the broker, owned by one cleaner thread) starts
``python -m odradek.storage._cleaner_worker_main READ_FD WRITE_FD`` with two pipes and speaks
pickled messages over them (``multiprocessing.connection`` framing):

    parent → worker   ("clean", job, plan spec)   plan as plain data: segment paths and sizes
                      ("swapped", job, ok)         answer to "group"
                      ("abort", job)               stop the pass (shutdown, log changed)
                      ("exit",)
    worker → parent   ("group", job, base, count)  <base>.log.cleaned (+ indexes) written and
                                                   fsynced for the ``count`` segments from
                                                   ``base``; swap them in on the owner thread
                      ("done", job, CleanResult) | ("aborted", job, why) | ("error", job, text)

The worker opens the segments it reads read-only by path (a segment deleted in between makes
the pass abort); it writes only ``.cleaned`` files, and removes them when a pass aborts. The
broker does every swap itself (``cleaner.swap_on_owner``), so the segment list has one owner.
If the worker dies, its ``.cleaned`` files are removed by the cleaner thread (or at the next
load) and a new worker is started for the next pass.

Thread rules: ``WorkerProcess`` belongs to one cleaner thread. In the worker, a reader thread
turns incoming messages into an abort flag and a queue of answers; passes run one at a time.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
import traceback
from multiprocessing.connection import Connection

from .. import faults
from .cleaner import Cleaner, CleanerAborted, CleaningPlan, Throttler

_log = logging.getLogger(__name__)

WORKER_NICE = 10


class WorkerDied(Exception):
    """The worker process exited or its pipe broke."""


class WorkerProcess:
    """The broker's handle on one worker process."""

    def __init__(self, *, map_memory: int, load_factor: float, io_buffer_size: int, rate: float):
        self.settings = {
            "map_memory": map_memory,
            "load_factor": load_factor,
            "io_buffer_size": io_buffer_size,
            "rate": rate,
        }
        self.proc: subprocess.Popen | None = None
        self._inbox: Connection | None = None  # worker → parent
        self._outbox: Connection | None = None  # parent → worker
        self._job = 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "odradek.storage._cleaner_worker_main",
                    str(to_worker_r),
                    str(from_worker_w),
                ],
                pass_fds=(to_worker_r, from_worker_w),
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self._outbox = Connection(to_worker_w, readable=False)
        self._inbox = Connection(from_worker_r, writable=False)
        self._send(("settings", self.settings))

    def _send(self, msg) -> None:
        if self._outbox is None:
            raise WorkerDied("the worker process was never started")
        try:
            self._outbox.send(msg)
        except (OSError, EOFError) as exc:
            raise WorkerDied(str(exc)) from exc

    def run(self, plan: CleaningPlan, swap, should_abort):
        """Clean ``plan`` in the worker. ``swap(plan, old_segments) -> bool`` runs for each
        group; ``should_abort()`` is polled while waiting. Returns the CleanResult; raises
        CleanerAborted, WorkerDied, or RuntimeError (the worker's exception, as text)."""
        if not self.alive:
            self.start()
        proc, inbox = self.proc, self._inbox
        assert proc is not None and inbox is not None, "start() sets both"
        self._job += 1
        job = self._job
        self._send(("clean", job, plan.to_spec()))
        abort_sent = False
        index = {seg.base_offset: i for i, seg in enumerate(plan.segments)}
        while True:
            try:
                ready = inbox.poll(0.1)
            except (OSError, EOFError) as exc:
                raise WorkerDied(str(exc)) from exc
            if not ready:
                if not abort_sent and should_abort():
                    self._send(("abort", job))
                    abort_sent = True
                if not self.alive:
                    raise WorkerDied(f"exit code {proc.returncode}")
                continue
            try:
                msg = inbox.recv()
            except (OSError, EOFError) as exc:
                raise WorkerDied(str(exc)) from exc
            kind, msg_job = msg[0], msg[1]
            if msg_job != job:
                continue  # a late answer to an earlier, abandoned job
            if kind == "group":
                base, count = msg[2], msg[3]
                i = index.get(base)
                ok = False
                if i is not None and not abort_sent:
                    try:
                        ok = bool(swap(plan, plan.segments[i : i + count]))
                    except CleanerAborted:
                        ok = False
                        self._send(("abort", job))
                        abort_sent = True
                self._send(("swapped", job, ok))
            elif kind == "done":
                return msg[2]
            elif kind == "aborted":
                raise CleanerAborted(msg[2])
            elif kind == "error":
                raise RuntimeError(msg[2])

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        try:
            if self.alive:
                self._send(("exit",))
            self.proc.wait(timeout)
        except (WorkerDied, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            for conn in (self._inbox, self._outbox):
                if conn is not None:
                    try:
                        conn.close()
                    except OSError:
                        pass
            self.proc = None


def remove_cleaned_files(dir: str) -> None:
    """Remove ``*.cleaned`` files a dead worker left in ``dir`` (only one pass per log runs)."""
    try:
        names = os.listdir(dir)
    except OSError:
        return
    for name in names:
        if name.endswith(".cleaned"):
            try:
                os.unlink(os.path.join(dir, name))
            except OSError:
                pass


# ---- the worker side ------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the broker dies (as a thread would die with it)."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def worker_main(read_fd: int, write_fd: int) -> None:
    _die_with_parent()
    faults.IN_CLEANER_WORKER = True
    try:
        os.nice(WORKER_NICE)
    except OSError:
        pass
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    jobs: queue.Queue = queue.Queue()
    answers: queue.Queue = queue.Queue()
    stop = threading.Event()
    current = [0]
    aborted: set[int] = set()
    send_lock = threading.Lock()

    def send(msg) -> None:
        with send_lock:
            try:
                outbox.send(msg)
            except OSError:
                os._exit(0)  # the broker is gone

    def reader() -> None:
        while True:
            try:
                msg = inbox.recv()
            except (EOFError, OSError):
                msg = ("exit",)
            kind = msg[0]
            if kind == "abort":
                aborted.add(msg[1])
                if msg[1] == current[0]:
                    stop.set()
                    answers.put(None)
            elif kind == "swapped":
                if msg[1] == current[0]:
                    answers.put(msg[2])
            elif kind == "exit":
                stop.set()
                answers.put(None)
                jobs.put(None)
                return
            else:
                jobs.put(msg)

    threading.Thread(target=reader, name="cleaner-worker-reader", daemon=True).start()
    settings = jobs.get()
    if settings is None:
        return
    settings = settings[1]
    throttler = Throttler(settings["rate"])

    def ask_parent(plan: CleaningPlan, old) -> bool:
        job = current[0]
        send(("group", job, old[0].base_offset, len(old)))
        ok = answers.get()
        if ok is None:
            raise CleanerAborted("aborted by the broker")
        return ok

    cleaner = Cleaner(
        map_memory=settings["map_memory"],
        load_factor=settings["load_factor"],
        io_buffer_size=settings["io_buffer_size"],
        throttler=throttler,
        swap=ask_parent,
        stop=stop,
    )
    while True:
        msg = jobs.get()
        if msg is None:
            return
        _kind, job, spec = msg
        stop.clear()
        while not answers.empty():
            answers.get_nowait()
        current[0] = job
        if job in aborted:  # aborted before it started (checked after publishing ``current``)
            send(("aborted", job, "aborted by the broker"))
            continue
        plan = None
        try:
            plan = CleaningPlan.from_spec(spec)
            result = cleaner.clean(plan)
            send(("done", job, result))
        except (CleanerAborted, FileNotFoundError) as exc:
            send(("aborted", job, str(exc)))
        except Exception:
            send(("error", job, traceback.format_exc()))
        finally:
            if plan is not None:
                plan.close_files()
