"""Metric primitives the components own: plain counters and fixed-bucket histograms.

Components count with plain integers and ``Histogram.observe`` (a bisect and three
integer additions); nothing here knows Prometheus. The HTTP side (``odradek.http``)
reads these objects when ``/metrics`` is scraped and renders them then, so counting
costs the produce and fetch paths almost nothing. No dependencies: every layer
(storage, broker) may import this module.

Thread rules: a ``Histogram`` is updated by one thread (the event loop); a
``LockedHistogram`` by any (the log flush timer, fed from worker threads too).
"""

from __future__ import annotations

import threading
from bisect import bisect_left

# Upper bounds in milliseconds, Prometheus' usual latency ladder stretched to 30 s.
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
)  # fmt: skip


class Histogram:
    """Counts of observations per bucket (``value <= bound``), their sum and count.

    Values are observed in nanoseconds and reported in milliseconds, so the hot path
    adds integers only. ``counts[i]`` is the number of observations in bucket ``i``
    alone (not cumulative); the last slot is the +Inf bucket.
    """

    __slots__ = ("bounds_ms", "bounds_ns", "counts", "sum_ns", "count")

    def __init__(self, bounds_ms: tuple[float, ...] = LATENCY_BUCKETS_MS):
        self.bounds_ms = tuple(bounds_ms)
        self.bounds_ns = [int(b * 1_000_000) for b in self.bounds_ms]
        self.counts = [0] * (len(self.bounds_ms) + 1)
        self.sum_ns = 0
        self.count = 0

    def observe_ns(self, elapsed_ns: int) -> None:
        self.counts[bisect_left(self.bounds_ns, elapsed_ns)] += 1
        self.sum_ns += elapsed_ns
        self.count += 1

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        """(cumulative ``(upper bound ms, count)`` pairs ending with +Inf, sum in ms, count)."""
        counts = list(self.counts)
        total_ns, count = self.sum_ns, self.count
        cumulative = []
        running = 0
        for bound, n in zip((*self.bounds_ms, float("inf")), counts, strict=True):
            running += n
            cumulative.append((bound, running))
        return cumulative, total_ns / 1_000_000, count


class LockedHistogram(Histogram):
    """A histogram several threads may update."""

    __slots__ = ("_lock",)

    def __init__(self, bounds_ms: tuple[float, ...] = LATENCY_BUCKETS_MS):
        super().__init__(bounds_ms)
        self._lock = threading.Lock()

    def observe_ns(self, elapsed_ns: int) -> None:
        with self._lock:
            Histogram.observe_ns(self, elapsed_ns)

    def snapshot(self):
        with self._lock:
            return Histogram.snapshot(self)
