"""Run a pipeline's streaming queries until they end or the user stops them.

``supervise(spark, name, queries)`` waits for the queries while showing the rows they
have processed (a live line on a terminal, a line now and then elsewhere), and returns a
``RunSummary``.

Ctrl-C or SIGTERM asks for a stop: each query is stopped once the micro-batch it is
running has finished (it is stopped as soon as it is between triggers, or right after
its next progress report), then the run ends with a summary. A second Ctrl-C stops the
queries at once; a batch cut short is replayed from the checkpoint by the next run.

The signals only set flags. PySpark's own SIGINT handler raises KeyboardInterrupt in the
main thread, usually while it waits inside a Py4J call, which leaves the Py4J connection
half-read and prints pages of Python and Java traces; it is out of the way while the
queries are supervised.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from dataclasses import dataclass, field

_TERMINAL_REFRESH_S = 0.5
_PLAIN_REPORT_EVERY_S = 30.0


class StopSignals:
    """SIGINT and SIGTERM as flags: ``requested`` on the first, ``now`` on the second."""

    def __init__(self):
        self.requested = threading.Event()
        self.now = threading.Event()
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.requested.is_set():
            self.now.set()
        self.requested.set()

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class RowCounter:
    """Rows and micro-batches per query, from the progress reports Spark makes after each
    trigger. Reports arrive through a listener (asynchronously) and from the queries'
    ``recentProgress``; each counts once."""

    def __init__(self, queries):
        self.names = {str(q.id): q.name or str(q.id) for q in queries}
        self._reports: dict[str, dict[tuple, tuple[int, int]]] = {qid: {} for qid in self.names}
        self._lock = threading.Lock()

    def add(self, progress) -> None:
        qid = str(progress["id"])
        if qid in self._reports:
            key = (progress["batchId"], progress["timestamp"])
            with self._lock:
                self._reports[qid][key] = (progress["batchId"], progress["numInputRows"] or 0)

    def rows(self, qid: str) -> int:
        with self._lock:
            return sum(rows for _, rows in self._reports[qid].values())

    def batches(self, qid: str) -> int:
        """Micro-batches that read rows."""
        with self._lock:
            return len({batch for batch, rows in self._reports[qid].values() if rows})


def _listener(counter: RowCounter):
    from pyspark.sql.streaming import StreamingQueryListener

    class CountRows(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            counter.add(event.progress)

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return CountRows()


@dataclass
class QueryResult:
    name: str
    rows: int
    batches: int
    error: str | None = None


@dataclass
class RunSummary:
    name: str
    seconds: float
    interrupted: bool
    queries: list[QueryResult] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(q.rows for q in self.queries)

    @property
    def errors(self) -> list[str]:
        return [f"{q.name}: {q.error}" for q in self.queries if q.error]

    def text(self) -> str:
        how = "stopped" if self.interrupted else "done"
        parts = [f"{_count(q.rows, 'row')} in {_count(q.batches, 'batch')}" for q in self.queries]
        if len(self.queries) > 1:
            parts = [f"{q.name} {part}" for q, part in zip(self.queries, parts, strict=True)]
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        return f"{self.name}: {how}; {', '.join(parts)}; {self.seconds:.1f} s ({rate:,.0f} rows/s)"


def _count(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("h") else "s")
    return f"{n:,} {noun if n == 1 else plural}"


class _Rate:
    """Rows per second over the last ten seconds or so."""

    def __init__(self):
        self._samples: list[tuple[float, int]] = []

    def update(self, now: float, rows: int) -> float:
        self._samples.append((now, rows))
        while len(self._samples) > 2 and now - self._samples[1][0] >= 10:
            self._samples.pop(0)
        t0, r0 = self._samples[0]
        return (rows - r0) / (now - t0) if now > t0 else 0.0


def supervise(spark, name: str, queries: list, *, console=None) -> RunSummary:
    """Wait for ``queries`` to end, or stop them on Ctrl-C/SIGTERM; report progress on
    ``console`` (a rich Console on stderr). The caller stops the session."""
    from rich.console import Console
    from rich.live import Live

    console = console or Console(stderr=True, highlight=False)
    counter = RowCounter(queries)
    listener = _listener(counter)
    spark.streams.addListener(listener)
    started = time.monotonic()
    rate = _Rate()
    live = Live(console=console, transient=True, auto_refresh=False) if console.is_terminal else None
    last_plain = started
    stopping: dict[str, object] = {}  # query id → its last progress timestamp when the stop was asked
    signals = StopSignals()

    def line(now: float) -> str:
        rows = sum(counter.rows(qid) for qid in counter.names)
        per_query = [f"{counter.names[qid]} {counter.rows(qid):,}" for qid in counter.names]
        text = f"{name}: {rows:,} rows ({rate.update(now, rows):,.0f} rows/s)"
        if len(per_query) > 1:
            text += f" [{', '.join(per_query)}]"
        if signals.requested.is_set():
            text += "; stopping (Ctrl-C again: at once)"
        return text

    try:
        with signals:
            if live is not None:
                live.start()
            while any(q.isActive for q in queries):
                if signals.now.is_set() or _failed(queries):
                    break
                if signals.requested.is_set():
                    if not stopping:
                        spark.sparkContext.setLogLevel("ERROR")  # stopping makes Spark log warnings
                        console.print(
                            f"{name}: stopping after the current micro-batch… (Ctrl-C again to stop at once)",
                            highlight=False,
                        )
                        stopping = {str(q.id): _last_report(q) for q in queries if q.isActive}
                    for q in queries:
                        if q.isActive and _between_batches(q, stopping.get(str(q.id))):
                            q.stop()
                now = time.monotonic()
                if live is not None:
                    live.update(line(now), refresh=True)
                elif now - last_plain >= _PLAIN_REPORT_EVERY_S:
                    last_plain = now
                    console.print(line(now), highlight=False)
                if signals.requested.is_set():
                    signals.now.wait(0.2)
                else:
                    signals.requested.wait(_TERMINAL_REFRESH_S)
            if signals.requested.is_set() or _failed(queries):
                spark.sparkContext.setLogLevel("ERROR")
            for q in queries:
                if q.isActive:
                    q.stop()
    finally:
        if live is not None:
            live.stop()
        spark.streams.removeListener(listener)
    # The listener hears of the last batches a moment after they end: add what the
    # queries recorded themselves before they stopped.
    results = []
    for q in queries:
        for progress in q.recentProgress:
            counter.add(progress)
        qid = str(q.id)
        exc = q.exception()
        error = failure_line(exc) if exc is not None else None
        results.append(QueryResult(counter.names[qid], counter.rows(qid), counter.batches(qid), error))
    return RunSummary(name, time.monotonic() - started, signals.requested.is_set(), results)


def _last_report(q):
    progress = q.lastProgress
    return None if progress is None else progress["timestamp"]


def _between_batches(q, report_at_request) -> bool:
    """Whether stopping ``q`` now cuts no micro-batch short: it is waiting for its next
    trigger, or it has reported progress since the stop was asked (a batch just ended)."""
    if not q.status["isTriggerActive"]:
        return True
    return _last_report(q) != report_at_request


def _failed(queries) -> bool:
    """Whether a query has ended with an exception."""
    return any(not q.isActive and q.exception() is not None for q in queries)


_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt)\w*): (.+)$")


def failure_line(exc) -> str:
    """The cause of a query's failure, in one line.

    Spark wraps a Python task's exception in layers (StreamingQueryException, the stage
    failure, PythonException and its traceback): the cause is the traceback's last line,
    ``odradek.protocol.errors.NotLeaderOrFollowerError: ...``, given without its module.
    Otherwise the first line of the message."""
    text = str(getattr(exc, "desc", None) or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:
        for line in reversed(lines):
            match = _PYTHON_ERROR.match(line)
            if match:
                return f"{match.group(1)}: {match.group(2)}"
    return lines[0] if lines else type(exc).__name__
